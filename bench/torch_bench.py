"""remat.torch on real models: at limits from the smallest feasible one up to
plain autograd's peak, the predicted and the measured activation peak and
the step time; on CNNs also torch's checkpoint_sequential at every segment
count, and remat's gain over the best of them at no more memory (rotor's
evaluation, paper section 5).

Memory is measured independently of remat's bookkeeping (remat.torch.PeakMeter):
on CPU the profiler's allocation events, on CUDA max_memory_allocated(); the
peak of one training step above its start, gradients allocated before it.
Times are medians of --runs steps after a warm-up, the methods interleaved.

    make bench-torch                                      # CPU: GPT-2 and ResNet-50, 3 limits
    .venv/bin/python bench/torch_bench.py --device cuda   # GPU sizes, 6 limits, + Llama,
                                                          # ResNet-101, DenseNet-121, Inception-v3
    .venv/bin/python bench/torch_bench.py --quick         # logic check, tiny sizes
"""
from __future__ import annotations

import argparse
import copy
import csv
import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import torch  # noqa: E402
from torch.utils.checkpoint import checkpoint_sequential  # noqa: E402

import remat.torch as rt  # noqa: E402

Example = Tuple[torch.nn.Module, tuple, dict]


def hf(name: str, device: str, quick: bool) -> Example:
    import transformers
    transformers.logging.set_verbosity_error()
    import models as M
    if name == "gpt2":
        if quick:
            return M.gpt2(layers=2, width=64, seq=32)
        if device == "cuda":  # GPT-2 small, batch 8 x 1024
            return M.gpt2(layers=12, width=768, batch=8, seq=1024, vocab=50257)
        return M.gpt2(layers=6, width=384, batch=4, seq=256, vocab=8192)
    if quick:
        return M.llama(layers=2, width=64, seq=32)
    if device == "cuda":
        return M.llama(layers=16, width=2048, batch=4, seq=1024, vocab=32000)
    return M.llama(layers=6, width=384, batch=4, seq=256, vocab=8192)


def cnn(name: str, device: str, quick: bool) -> Example:
    import models as M
    if device == "cuda":
        try:
            import timm  # the GPU machines have timm: the real architectures
            arch = {"resnet50": "resnet50", "resnet101": "resnet101",
                    "densenet121": "densenet121", "inception_v3": "inception_v3"}[name]
            model = timm.create_model(arch, pretrained=False).train()
        except ImportError:
            model = None
        size, batch = {"inception_v3": (299, 32), "resnet101": (224, 32)}.get(name, (224, 32))
        if model is not None:
            return model, (torch.randn(batch, 3, size, size),), {}
    if name == "inception_v3":
        raise SystemExit("inception_v3 needs timm (on the GPU machines)")
    layers = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3)}
    if name in layers:
        base, image, batch = (16, 32, 2) if quick else (64, 128, 8)
        if device == "cuda":
            base, image, batch = 64, 224, 32
        return M.ResNet(layers[name], base=base, classes=1000).train(), \
            (torch.randn(batch, 3, image, image),), {}
    growth, image, batch = (8, 32, 2) if quick else (32, 128, 8)
    return M.DenseNet(growth=growth).train(), (torch.randn(batch, 3, image, image),), {}


BUILDERS: Dict[str, Callable[[str, str, bool], Example]] = {
    "gpt2": hf, "llama": hf, "resnet50": cnn, "resnet101": cnn, "densenet121": cnn,
    "inception_v3": cnn}


def loss_of(out: Any) -> torch.Tensor:
    return out.loss if getattr(out, "loss", None) is not None else out.float().square().mean()


def stack(model: torch.nn.Module) -> List[torch.nn.Module]:
    """The blocks checkpoint_sequential runs, for the CNNs defined here."""
    blocks: List[torch.nn.Module] = []
    for name in ("layer1", "layer2", "layer3", "layer4"):
        blocks += list(getattr(model, name, []))
    return blocks


def sequential_runner(model: torch.nn.Module, segments: int) -> Callable[..., Any]:
    """model's forward with its stack of blocks under checkpoint_sequential."""
    blocks = torch.nn.Sequential(*stack(model))
    kids = list(model.named_children())  # the stem, the layers, the head, in order
    first = next(i for i, (n, _) in enumerate(kids) if n == "layer1")
    last = next(i for i, (n, _) in enumerate(kids) if n == "layer4")

    def run(x: torch.Tensor) -> torch.Tensor:
        for _, m in kids[:first]:
            x = m(x)
        x = checkpoint_sequential(blocks, segments, x, use_reentrant=False)
        for _, m in kids[last + 1:]:  # models.ResNet's pool leaves 4 dimensions, timm's 2
            x = m(torch.flatten(x, 1) if isinstance(m, torch.nn.Linear) else x)
        return x
    return run


class Meter:
    """One training step: time and peak activation memory, measured apart
    (the profiler that measures memory on CPU costs time)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def step(self, fn: Callable[[], Any], params: List[torch.nn.Parameter]) -> float:
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.sync()
        t0 = time.perf_counter()
        fn().backward()
        self.sync()
        return (time.perf_counter() - t0) * 1e3

    def peak(self, fn: Callable[[], Any], params: List[torch.nn.Parameter]) -> int:
        self.step(fn, params)
        with rt.PeakMeter(self.device) as m:
            fn().backward()
        return m.peak


def bench_model(name: str, args: argparse.Namespace, rows: List[Dict[str, Any]]) -> None:
    device = torch.device(args.device)
    torch.manual_seed(0)
    model, inputs, kwargs = BUILDERS[name](name, args.device, args.quick)
    model = model.to(device)
    inputs = tuple(t.to(device) for t in inputs)
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = rt.checkpoint(copy.deepcopy(model), inputs, kwargs, memory=1.0, cache=False,
                          progress=True, loss=loss_of)
    prepare = time.perf_counter() - t0
    e = w.last_entry
    try:
        w.set_memory(1)
        low = 1
    except Exception as err:  # InfeasibleError: its minimum
        low = getattr(err, "min_memory", 1)
    plain = e.plain_peak
    k = args.limits
    limits = sorted({int(low + (plain - low) * i / (k - 1)) for i in range(k)})
    # (name, setup before the step (not timed), step returning the loss, parameters)
    Method = Tuple[str, Callable[[], None], Callable[[], Any], List[torch.nn.Parameter]]
    methods: List[Method] = [("plain", _nothing, lambda: loss_of(model(*inputs, **kwargs)),
                              list(model.parameters()))]
    for lim in limits:
        methods.append(("remat", lambda m=lim: w.set_memory(m), lambda: w(*inputs, **kwargs),
                        list(w.parameters())))
    if not kwargs and stack(model):
        n = len(stack(model))
        for seg in sorted({s for s in range(2, n + 1) if n % s == 0 or s <= 8}):
            methods.append(("sequential-%d" % seg, _nothing,
                            lambda s=seg: loss_of(sequential_runner(model, s)(*inputs)),
                            list(model.parameters())))
    meter = Meter(device)
    times: Dict[int, List[float]] = {i: [] for i in range(len(methods))}
    peaks: Dict[int, int] = {}
    solved: Dict[int, Tuple[int, int, float]] = {}
    for i, (kind, setup, fn, params) in enumerate(methods):
        setup()
        peaks[i] = meter.peak(fn, params)
        if kind == "remat":
            ent = w.last_entry
            solved[i] = (ent.limit, ent.predicted_peak, ent.schedule.time)
    for _ in range(args.runs):  # interleaved, so machine noise hits all alike
        for i, (_, setup, fn, params) in enumerate(methods):
            setup()
            times[i].append(meter.step(fn, params))
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    for i, (kind, _, _, _) in enumerate(methods):
        row = {"model": name, "method": kind, "measured_peak": peaks[i],
               "step_ms": statistics.median(times[i]),
               "spread": (max(times[i]) - min(times[i])) / statistics.median(times[i]),
               "load": load, "device": str(device), "prepare_s": round(prepare, 1),
               "stages": e.chain.n - 1, "path": e.info["path"]}
        if i in solved:
            row.update(limit=solved[i][0], predicted_peak=solved[i][1],
                       predicted_ms=solved[i][2])
        rows.append(row)


def _nothing() -> None:
    pass


def report(rows: List[Dict[str, Any]], out: str) -> None:
    os.makedirs(out, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(os.path.join(out, "torch_bench.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, keys)
        wr.writeheader()
        wr.writerows(rows)
    print("| model | method | limit | predicted peak | measured peak | error | step (ms) | spread "
          "| predicted (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lim = r.get("limit")
        pred = r.get("predicted_peak")
        err = "%+.1f%%" % (100 * (r["measured_peak"] - pred) / pred) if pred else ""
        print("| %s | %s | %s | %s | %.2f MiB | %s | %.0f | %.0f%% | %s |" % (
            r["model"], r["method"], "%.2f MiB" % (lim / 2 ** 20) if lim else "",
            "%.2f MiB" % (pred / 2 ** 20) if pred else "", r["measured_peak"] / 2 ** 20, err,
            r["step_ms"], 100 * r["spread"],
            "%.0f" % r["predicted_ms"] if r.get("predicted_ms") else ""))
    first = rows[0]
    print("\ndevice %s, load %s, torch %s" % (first["device"], first["load"], torch.__version__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", default=None,
                    help="comma-separated (default: gpt2,resnet50 on CPU; gpt2,llama,resnet101,"
                         "densenet121,inception_v3 on CUDA)")
    ap.add_argument("--limits", type=int, default=None, help="limits per model (3 CPU, 6 CUDA)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a logic check")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("torch_bench: --device cuda, but CUDA is not available here", file=sys.stderr)
        return 2
    cuda = args.device.startswith("cuda")
    args.limits = args.limits or (6 if cuda else 3)
    names = (args.models or ("gpt2,llama,resnet101,densenet121,inception_v3" if cuda
                             else "gpt2,resnet50")).split(",")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rows: List[Dict[str, Any]] = []
    for name in names:
        bench_model(name, args, rows)
    report(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

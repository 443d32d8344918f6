#!/usr/bin/python3
"""GPU benchmark of remat.torch (paper section 5.3-5.4): throughput against
peak memory for store-all (plain autograd), torch's checkpoint_sequential
with 2..2*sqrt(L) segments, and remat's revolve and optimal schedules at 10
limits between their minimum and the store-all peak.

Peak memory is torch.cuda.max_memory_allocated() during one training step
minus the memory held before it (parameters, gradients, input): the
activation memory the chain model predicts. Every figure is the median of
--runs runs (default 5). Writes a markdown table (stdout and OUT/table.md),
a CSV and one PNG plot per configuration to --out (default bench/out).

    /usr/bin/python3 bench/torch_bench.py [--quick] [--models resnet101,gpt]
    /usr/bin/python3 bench/torch_bench.py --cpu-smoke   # logic check on CPU, tiny sizes

Without CUDA (and without --cpu-smoke) it prints a message and exits 0.
"""
import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def build(name, smoke):
    import torchvision.models as tvm
    from torchvision.models.resnet import Bottleneck

    import remat.torch as rt
    from remat import models
    if smoke:  # tiny stand-ins with the same structure
        table = {
            "resnet101": lambda: (rt.sequential(tvm.resnet18(num_classes=10)), [(2, 32)]),
            "resnet1001": lambda: (rt.sequential(tvm.ResNet(Bottleneck, [1, 2, 6, 1],
                                                            num_classes=10)), [(2, 32)]),
            "densenet201": lambda: (rt.sequential(tvm.densenet121(num_classes=10)), [(2, 32)]),
            "inception_v3": lambda: (rt.sequential(tvm.inception_v3(
                aux_logits=False, init_weights=False, num_classes=10)), [(2, 75)]),
            "gpt": lambda: (models.gpt(vocab=64, n_layer=4, n_head=2, d_model=32, seq_len=16),
                            [(2, 16)]),
        }
    else:
        table = {
            "resnet101": lambda: (rt.sequential(tvm.resnet101()), [(8, 224), (32, 224), (4, 500)]),
            # depth 3 * 333 + 2 = 1001 with bottleneck blocks
            "resnet1001": lambda: (rt.sequential(tvm.ResNet(Bottleneck, [3, 4, 323, 3])),
                                   [(2, 224), (4, 224)]),
            "densenet201": lambda: (rt.sequential(tvm.densenet201()), [(16, 224), (32, 224)]),
            "inception_v3": lambda: (rt.sequential(tvm.inception_v3(
                aux_logits=False, init_weights=False)), [(16, 299), (32, 299)]),
            "gpt": lambda: (models.gpt(vocab=32000, n_layer=24, n_head=16, d_model=1024,
                                       seq_len=1024), [(4, 1024), (8, 512)]),
        }
    return table[name]()


def make_input(name, batch, size, device):
    import torch
    if name == "gpt":
        return torch.randint(0, 64 if device.type == "cpu" else 32000, (batch, size),
                             device=device)
    return torch.randn(batch, 3, size, size, device=device)


def loss_of(out):
    return out.float().square().mean()


class Meter:
    """Times one training step and measures its activation peak."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"

    def step(self, fn):
        import torch
        if self.cuda:
            torch.cuda.synchronize(self.device)
            base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = time.perf_counter()
        fn()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        dt = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated(self.device) - base if self.cuda else None
        return dt, peak

    def median(self, fn, runs):
        fn()  # warm-up: allocator, cudnn choice, gradients allocated
        res = [self.step(fn) for _ in range(runs)]
        t = statistics.median(r[0] for r in res)
        peaks = [r[1] for r in res if r[1] is not None]
        return t, (statistics.median(peaks) if peaks else None)


def run_config(name, seq, batch, size, device, runs, n_limits, out_rows, smoke):
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    import remat
    import remat.torch as rt
    seq = seq.to(device).train()
    x = make_input(name, batch, size, device)
    meter = Meter(device)
    L = len(seq)
    label = "%s b%d s%d" % (name, batch, size)
    chain = rt.profile(seq, x, repeat=1 if smoke else 5)
    rows = []

    def record(strategy, param, fn, predicted=None):
        try:
            t, peak = meter.median(fn, runs)
        except RuntimeError as e:  # out of memory: leave the point out, as the paper does
            if "out of memory" not in str(e):
                raise
            torch.cuda.empty_cache()
            return
        if peak is None and predicted is not None:  # CPU smoke: the executor's own count
            peak = getattr(record, "cpu_peak", None)
        row = {"config": label, "strategy": strategy, "param": param,
               "throughput": batch / t, "time_ms": t * 1e3, "peak": peak,
               "pred_peak": predicted[0] if predicted else None,
               "pred_time_ms": predicted[1] if predicted else None}
        rows.append(row)

    def plain():
        for p in seq.parameters():
            p.grad = None
        loss_of(seq(x)).backward()
    peak_sa, time_sa = remat.store_all_cost(chain)
    record("store-all", "", plain, (peak_sa, time_sa))

    top = max(2, int(2 * math.sqrt(L)))
    segs = sorted(set([2] + [int(round(2 + k * (top - 2) / 9)) for k in range(10)]))
    for s in segs:
        if s > L - 1:
            continue

        def seq_ckpt(s=s):
            # torch 1.13's checkpoint_sequential is reentrant: a segment whose input does
            # not require grad gets no parameter gradients. So stage 1 runs plainly and
            # the other L - 1 stages are split into s segments.
            for p in seq.parameters():
                p.grad = None
            h = seq[0](x)
            loss_of(checkpoint_sequential(seq[1:], s, h)).backward()
        record("checkpoint_sequential", s, seq_ckpt)

    model = None
    for alg in ("revolve", "optimal"):
        try:
            lo = remat.min_memory(chain, alg)
        except remat.RematError as e:
            print("note: %s on %s: %s" % (alg, label, e), file=sys.stderr)
            continue
        for k in range(n_limits):
            mem = lo + (peak_sa - lo) * k // max(1, n_limits - 1)
            try:
                sched = remat.solve(chain, mem, algorithm=alg)
            except remat.RematError as e:
                print("note: %s at %d on %s: %s" % (alg, mem, label, e), file=sys.stderr)
                continue
            if model is None:
                model = rt.Checkpointed(seq, x, chain=chain, schedule=sched)
            else:
                model.set_schedule(sched)
            sim = remat.simulate(chain, sched)

            def ck():
                for p in seq.parameters():
                    p.grad = None
                loss_of(model(x)).backward()
                record.cpu_peak = model.last_peak_bytes
            record(alg, mem, ck, (sim.peak_bytes, sim.time))
    out_rows.extend(rows)
    return rows


def gains(rows):
    """Optimal's throughput over the best checkpoint_sequential that fits in
    the same memory (per optimal point), as a list of ratios - 1."""
    seqs = [r for r in rows if r["strategy"] == "checkpoint_sequential" and r["peak"]]
    out = []
    for r in rows:
        if r["strategy"] != "optimal" or not r["peak"]:
            continue
        fit = [s["throughput"] for s in seqs if s["peak"] <= r["peak"]]
        if fit:
            out.append(r["throughput"] / max(fit) - 1)
    return out


def errors(rows):
    mem, tim = [], []
    for r in rows:
        if r["pred_peak"] and r["peak"]:
            mem.append(abs(r["peak"] - r["pred_peak"]) / r["pred_peak"])
        if r["pred_time_ms"] and r["time_ms"]:
            tim.append(abs(r["time_ms"] - r["pred_time_ms"]) / r["pred_time_ms"])
    return mem, tim


def mib(b):
    return "-" if b is None else "%.1f" % (b / 2 ** 20)


def table(rows):
    lines = ["| config | strategy | param | throughput (samples/s) | peak MiB | predicted MiB "
             "| time ms | predicted ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %.2f | %s | %s | %.1f | %s |" % (
            r["config"], r["strategy"], r["param"], r["throughput"], mib(r["peak"]),
            mib(r["pred_peak"]), r["time_ms"],
            "-" if r["pred_time_ms"] is None else "%.1f" % r["pred_time_ms"]))
    return "\n".join(lines)


def plot(rows, label, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    style = {"store-all": ("s", "red"), "checkpoint_sequential": ("x", "purple"),
             "revolve": ("o-", "green"), "optimal": ("^-", "blue")}
    for strat, (mk, col) in style.items():
        pts = sorted((r["peak"], r["throughput"]) for r in rows
                     if r["strategy"] == strat and r["peak"])
        if pts:
            ax.plot([p[0] / 2 ** 20 for p in pts], [p[1] for p in pts], mk, color=col,
                    label=strat)
    ax.set_xlabel("peak activation memory (MiB)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(label)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet101,resnet1001,densenet201,inception_v3,gpt")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--limits", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="first batch size only, 3 runs, 5 limits")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="check the benchmark logic on CPU at tiny sizes")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    a = ap.parse_args(argv)
    import torch
    if a.cpu_smoke:
        device = torch.device("cpu")
        a.runs, a.limits, a.quick = 1, 3, True
        torch.set_num_threads(1)
    elif not torch.cuda.is_available():
        print("torch_bench: CUDA is not available; nothing to measure (use --cpu-smoke to "
              "check the benchmark's logic on CPU).")
        return 0
    else:
        device = torch.device("cuda")
        torch.backends.cudnn.benchmark = True
    if a.quick:
        a.runs, a.limits = min(a.runs, 3), min(a.limits, 5)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for name in a.models.split(","):
        seq, shapes = build(name, a.cpu_smoke)
        for batch, size in shapes[:1] if a.quick else shapes:
            cfg_rows = run_config(name, seq, batch, size, device, a.runs, a.limits, rows,
                                  a.cpu_smoke)
            label = "%s b%d s%d" % (name, batch, size)
            plot(cfg_rows, label, os.path.join(a.out, label.replace(" ", "_") + ".png"))
        del seq
        if device.type == "cuda":
            torch.cuda.empty_cache()
    text = table(rows)
    mem_err, time_err = errors(rows)
    g = gains(rows)
    summary = [
        "",
        "device: %s; median of %d runs; peak = max_memory_allocated minus memory held before "
        "the step%s" % (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                        a.runs, " (CPU smoke: executor's own count, checkpoint_sequential "
                        "unmeasured)" if device.type == "cpu" else ""),
        "predicted vs measured peak: mean abs error %s over %d points" % (
            "%.1f%%" % (100 * statistics.mean(mem_err)) if mem_err else "-", len(mem_err)),
        "predicted vs measured time: mean abs error %s over %d points" % (
            "%.1f%%" % (100 * statistics.mean(time_err)) if time_err else "-", len(time_err)),
        "optimal vs best checkpoint_sequential at equal memory: mean gain %s over %d points" % (
            "%+.1f%%" % (100 * statistics.mean(g)) if g else "-", len(g)),
    ]
    text += "\n" + "\n".join(summary) + "\n"
    print(text)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "results.csv"), "w") as f:
        keys = list(rows[0].keys()) if rows else []
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join("" if r[k] is None else str(r[k]) for k in keys) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

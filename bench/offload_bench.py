#!/usr/bin/env python3
"""Offloading against its peers, step time against measured memory.

For ResNet-50, ResNet-101 and GPT-2, one training step (forward, loss,
backward) with:

  plain         plain autograd
  save_on_cpu   torch.autograd.graph.save_on_cpu(pin_memory=True): every saved
                tensor to pinned host memory, synchronously
  offload_all   torchtune's OffloadActivations when torchtune is installed;
                else remat's own equivalent (saved-tensor hooks that copy every
                activation to pinned host memory on a side stream and back on
                another, as torchtune does with use_streams=True; marked
                "offload_all*" in the table)
  optimal       remat, recomputation only
  pofo          remat, recomputation and offloading (bandwidth measured)
  offload-only  remat, offloading only

The remat methods run at the limits the peers reach (their measured peak:
"at equal memory") and at fractions of plain autograd's peak. Memory is the
measured peak of one step above what was allocated before it (CUDA:
torch.cuda.max_memory_allocated after reset_peak_memory_stats; CPU: the
profiler's allocation events, remat.torch.PeakMeter); time is the median of
--runs steps after --warmup steps.

    python bench/offload_bench.py --device cuda [--models resnet50,resnet101,gpt2]
    python bench/offload_bench.py --device cpu    # smoke test, tiny models (see stderr)

Writes a markdown table to stdout and, with --csv FILE, the rows as CSV.
"""
import argparse
import csv
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

CPU_CAVEATS = """\
offload_bench --device cpu is a smoke test of the code paths, not a measurement:
  - host and device are the same RAM: an offload moves bytes from one part of it
    to another, so it saves no real memory (the host pool is outside the CPU
    allocator that the peak counts, which is the only reason the peak drops);
  - copies are memcpy on remat's worker threads sharing this CPU with compute,
    not DMA over PCIe beside the GPU, so their speed and overlap say nothing about
    a GPU's, and neither do the step times;
  - save_on_cpu and offload_all copy into the same RAM the peak counts (no pinned
    memory on CPU), so their peaks do not drop;
  - the models are tiny (a few MiB of activations): fixed costs dominate.
Run --device cuda on a GPU for the comparison at equal memory.
"""


# -- models -----------------------------------------------------------------------------

def build(name, device, smoke):
    """(model, args, kwargs): full size on CUDA, tiny for the CPU smoke test."""
    import torch
    import models as M
    if name.startswith("resnet"):
        layers = (3, 4, 6, 3) if name == "resnet50" else (3, 4, 23, 3)
        model = None
        if not smoke:
            try:
                import torchvision.models as tvm
                model = getattr(tvm, name)()
            except ImportError:  # the tests' ResNet, torchvision's widths
                model = M.ResNet(layers, base=64, classes=1000)
        else:
            model = M.ResNet(layers, base=8, classes=10)
        batch, image = (2, 32) if smoke else (64, 224)
        x = torch.randn(batch, 3, image, image, device=device)
        return model.to(device).train(), (x,), {}
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        import transformers
        transformers.logging.set_verbosity_error()
        if smoke:
            cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32,
                             use_cache=False)
            batch, seq = 2, 32
        else:  # GPT-2 small
            cfg = GPT2Config(use_cache=False)
            batch, seq = 8, 1024
        model = GPT2LMHeadModel(cfg).to(device).train()
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
        return model, (ids,), {"labels": ids}
    raise SystemExit("offload_bench: unknown model %r (resnet50, resnet101, gpt2)" % name)


def loss_of(out):
    if getattr(out, "loss", None) is not None:
        return out.loss
    return out.float().square().mean()


# -- the peers ----------------------------------------------------------------------------

class OffloadAll:
    """torchtune-style activation offloading with saved-tensor hooks: every
    saved tensor but parameters and small ones goes to pinned host memory,
    copied on a side stream after the compute that made it (the device copy
    is dropped once the copy is over), and comes back on another stream when
    autograd unpacks it, compute waiting for it on the GPU."""

    MIN_BYTES = 1024

    def __init__(self, model, device):
        import torch
        self.torch = torch
        self.device = device
        self.params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.d2h = torch.cuda.Stream(device)
            self.h2d = torch.cuda.Stream(device)
        self.pending = []  # (event, device tensor) until the copy is over

    def _reap(self):
        self.pending = [(ev, t) for ev, t in self.pending if not ev.query()]

    def pack(self, t):
        torch = self.torch
        if t.untyped_storage().data_ptr() in self.params or \
                t.numel() * t.element_size() < self.MIN_BYTES or t.device.type != self.device.type:
            return t
        if not self.cuda:
            return ("host", t.to("cpu", copy=True))
        self._reap()
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        self.d2h.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.d2h):
            host.copy_(t, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.d2h)
        self.pending.append((ev, t))
        return ("host", host, ev)

    def unpack(self, packed):
        torch = self.torch
        if not isinstance(packed, tuple):
            return packed
        if not self.cuda:
            return packed[1]
        for done, _ in self.pending:  # the forward is over: its copies too
            done.synchronize()
        self.pending = []
        _, host, ev = packed
        self.h2d.wait_event(ev)
        with torch.cuda.stream(self.h2d):
            dev = host.to(self.device, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.h2d)
        torch.cuda.current_stream(self.device).wait_event(done)
        dev.record_stream(torch.cuda.current_stream(self.device))
        return dev

    def context(self):
        return self.torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def offload_all_context(model, device):
    """(context factory, label): torchtune's OffloadActivations if importable."""
    try:
        from torchtune.training import OffloadActivations
        return (lambda: OffloadActivations(use_pin_memory=device.type == "cuda")), "offload_all"
    except ImportError:
        oa = OffloadAll(model, device)
        return oa.context, "offload_all*"


# -- measuring ----------------------------------------------------------------------------

def measure(fn, device, runs, warmup):
    """(median step time in ms, measured peak in bytes) of fn() (one step).
    The warm-up steps also make the parameters' gradients, so that every
    measured step adds into them, as training does."""
    import torch
    import remat.torch as rt
    for _ in range(max(1, warmup)):
        fn()
    times = []
    for _ in range(runs):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3)
    with rt.PeakMeter(device) as m:
        fn()
    return statistics.median(times), m.peak


def bench_model(name, device, args, rows):
    import torch
    import remat
    import remat.torch as rt
    smoke = device.type == "cpu"
    model, a, kw = build(name, device, smoke)

    def plain_step(m=model, ctx=None):
        def run():
            if ctx is None:
                loss_of(m(*a, **kw)).backward()
            else:
                with ctx():
                    loss = loss_of(m(*a, **kw))
                loss.backward()
        return run

    def add(method, limit, t, peak, note=""):
        rows.append({"model": name, "method": method, "limit_mib": limit / 2**20 if limit else "",
                     "peak_mib": peak / 2**20, "time_ms": t, "note": note})
        print("  %-14s limit %9s  peak %9.1f MiB  %9.2f ms %s" % (
            method, "%.1f MiB" % (limit / 2**20) if limit else "-", peak / 2**20, t, note),
            file=sys.stderr)

    print("%s on %s" % (name, device), file=sys.stderr)
    t0, p0 = measure(plain_step(), device, args.runs, args.warmup)
    add("plain", 0, t0, p0)
    peer_peaks = []
    if device.type == "cuda" or smoke:
        pin = device.type == "cuda"
        t, p = measure(plain_step(ctx=lambda: torch.autograd.graph.save_on_cpu(pin_memory=pin)),
                       device, args.runs, args.warmup)
        add("save_on_cpu", 0, t, p)
        peer_peaks.append(("save_on_cpu", p))
        ctx, label = offload_all_context(model, device)
        t, p = measure(plain_step(ctx=ctx), device, args.runs, args.warmup)
        add(label, 0, t, p)
        peer_peaks.append((label, p))
    limits = [(peer, peak) for peer, peak in peer_peaks if peak < p0]
    limits += [("%.0f%% of plain" % (100 * f), int(f * p0)) for f in args.fractions]
    wrapped = {}
    for alg in args.algorithms:
        for why, limit in limits:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if alg not in wrapped:
                        wrapped[alg] = rt.checkpoint(model, a, kw, memory=limit, algorithm=alg,
                                                     bandwidth=args.bandwidth, cache=args.cache,
                                                     repeat=args.repeat, progress=False)
                    else:
                        wrapped[alg].set_memory(limit, algorithm=alg)
            except remat.InfeasibleError as e:
                add(alg, limit, float("nan"), float("nan"), "infeasible (needs %.1f MiB), at %s"
                    % (e.min_memory / 2**20, why))
                continue
            w = wrapped[alg]
            t, p = measure(plain_step(m=w), device, args.runs, args.warmup)
            e = w.last_entry
            n_off = sum(1 for st in e.plan.steps if st.kind == "Off")
            add(alg, limit, t, p, "at %s; %d offloads" % (why, n_off) +
                ("; OVER THE LIMIT" if p > limit else ""))
    del model, wrapped
    if device.type == "cuda":
        torch.cuda.empty_cache()


def table(rows):
    out = ["| model | method | limit MiB | measured peak MiB | step ms | note |",
           "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lim = "%.1f" % r["limit_mib"] if r["limit_mib"] != "" else ""
        out.append("| %s | %s | %s | %.1f | %.2f | %s |" % (r["model"], r["method"], lim,
                                                          r["peak_mib"], r["time_ms"], r["note"]))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (smoke test)")
    ap.add_argument("--models", default="resnet50,resnet101,gpt2")
    ap.add_argument("--algorithms", default="pofo,optimal,offload-only")
    ap.add_argument("--fractions", default=None,
                    help="limits as fractions of plain autograd's measured peak "
                    "(default 0.3,0.5,0.7; 0.7 with --device cpu)")
    ap.add_argument("--bandwidth", default="auto", help='"auto" (measured) or e.g. 24GB/s')
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cache", default=False, help="remat profile cache directory (default: none)")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    args = ap.parse_args(argv)
    args.algorithms = [x for x in args.algorithms.split(",") if x]
    import torch
    device = torch.device(args.device)
    fractions = args.fractions or ("0.7" if device.type == "cpu" else "0.3,0.5,0.7")
    args.fractions = [float(x) for x in fractions.split(",") if x]
    args.repeat = 1 if device.type == "cpu" else 3
    if device.type == "cuda" and not torch.cuda.is_available():
        print("offload_bench: no CUDA device here; run with --device cpu for the smoke test",
              file=sys.stderr)
        return 0
    if device.type == "cpu":
        sys.stderr.write(CPU_CAVEATS)
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
        args.runs, args.warmup = min(args.runs, 2), min(args.warmup, 1)
    else:
        print("GPU: %s, torch %s" % (torch.cuda.get_device_name(device), torch.__version__),
              file=sys.stderr)
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        bench_model(name, device, args, rows)
    print(table(rows))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    if device.type == "cpu":
        sys.stderr.write(CPU_CAVEATS)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where remat's step time goes against the peers at equal memory, kernel by
kernel (torch.profiler: each kernel's device time, one step after warm-up),
and where offload-only's measured peak leaves its plan on GPT-2 (memory
probed after every executor event). For a GPU lease (BENCHMARKS.md, "On an
NVIDIA H100 (second GPU lease)"); on CPU it runs the tiny sizes as a check.

    python bench/torch_kernels.py OUT [quick]      # PARTS=offload,gpt2,resnet50

Writes OUT/diag.txt (and OUT/offload_snapshot.pickle.gz on CUDA: one step's
allocations, torch.cuda.memory._snapshot, for the memory viz tool).
For each of GPT-2 and ResNet-50 at the sizes of torch_peers.py: plain
autograd, Hugging Face / per-block checkpointing (every 1), and remat at
plain's memory and at the checkpointing's measured peak: step time
(median of 7), profiled wall time, total kernel time, kernel count, and the
kernels whose time differs most between remat and the peer.
"""
import copy
import gzip
import os
import pickle
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests", "python"),
                os.path.join(HERE, "..", "python")]
import torch  # noqa: E402 (after the path)
import torch_peers as TP  # noqa: E402 (after the path)
import remat  # noqa: E402 (after the path)
import remat.torch as rt  # noqa: E402 (after the path)
from remat.torch import _executor as EX  # noqa: E402 (after the path)

OUT = sys.argv[1]
QUICK = len(sys.argv) > 2
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CUDA = DEV.type == "cuda"
MIB = float(1 << 20)
os.makedirs(OUT, exist_ok=True)
warnings.simplefilter("ignore")


def sync():
    if CUDA:
        torch.cuda.synchronize()


def step_fn(run, opt):
    def f():
        opt.zero_grad(set_to_none=False)
        loss, out = run()
        loss.backward()
        opt.step()
        del loss, out
    return f


def timed(f, n):
    ts = []
    for _ in range(n):
        sync()
        t = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), min(ts), max(ts)


def kernels(f):
    from torch.profiler import profile, ProfilerActivity
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    sync()
    with profile(activities=acts) as prof:
        t = time.perf_counter()
        f()
        sync()
        wall = time.perf_counter() - t
    by = {}
    for e in prof.key_averages():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            dt = getattr(e, "self_device_time_total", None)
            if dt is None:
                dt = getattr(e, "self_cuda_time_total", 0)
            by[e.key] = (dt / 1e3, e.count)
    return wall * 1e3, by


def part_time(name, size, out):
    task = TP.Task(name, TP.SIZES[size][name], DEV, 0)
    methods = {}
    cp = TP.Copy(copy.deepcopy(task.model))
    methods["plain"] = step_fn(lambda: task.forward(cp.model), cp.opt)
    if task.hf:
        hcp = TP.Copy(copy.deepcopy(task.model))
        TP.hf_checkpointing(hcp.model, 1, False)
        methods["hf-gc"] = step_fn(lambda: task.forward(hcp.model), hcp.opt)
    else:
        m, stack = TP.staged(task, task.model)
        scp = TP.Copy(m)
        stack.mode, stack.k = "every", 1
        methods["hf-gc"] = step_fn(lambda: task.forward(m), scp.opt)
    t = time.perf_counter()
    w = TP.wrap_remat(task, None, QUICK)
    print("%s: remat wrapped in %.0f s, %d stages" % (name, time.perf_counter() - t,
                                                      w.last_entry.chain.n - 1), file=out)
    wcp = TP.Copy(w, w.parameters())
    peaks = {}
    for k, f in methods.items():
        f()
        f()
        sync()
        with rt.PeakMeter(DEV) as mt:
            f()
        peaks[k] = mt.peak
    ws = {}
    for tag, lim in (("remat@plain", 1.0), ("remat@hf-gc", peaks["hf-gc"])):
        ws[tag] = lim
    res = {}
    for tag, lim in list(ws.items()):
        w.set_memory(lim)
        e = w.last_entry
        from remat.torch._saves import describe
        f = step_fn(lambda: task.forward_remat(w), wcp.opt)
        f()
        f()
        with rt.PeakMeter(DEV) as mt:
            f()
        peaks[tag] = mt.peak
        med = timed(f, 7)
        wall, by = kernels(f)
        res[tag] = (med, wall, by)
        print("%s %s: limit %.1f MiB, predicted %.1f, measured %.1f; predicted fb %.1f ms; %s; "
              "ops: %s" % (name, tag, lim / MIB, e.predicted_peak / MIB, mt.peak / MIB,
                           e.schedule.time, describe(e.plan.steps),
                           " ".join(st.op for st in e.plan.steps if st.kind != "Del")), file=out)
    for k, f in methods.items():
        med = timed(f, 7)
        wall, by = kernels(f)
        res[k] = (med, wall, by)
    for k, (med, wall, by) in res.items():
        kt = sum(v[0] for v in by.values())
        kn = sum(v[1] for v in by.values())
        print("%s %-12s peak %9.1f MiB  step %.1f ms (%.1f-%.1f)  profiled wall %.1f ms, "
              "kernel time %.1f ms, %d kernels" % (name, k, peaks[k] / MIB, med[0] * 1e3,
                                                   med[1] * 1e3, med[2] * 1e3, wall, kt, kn),
              file=out)
    for a, b in (("remat@hf-gc", "hf-gc"), ("remat@plain", "plain")):
        ba, bb = res[a][2], res[b][2]
        keys = set(ba) | set(bb)
        diff = sorted(keys, key=lambda k: -abs(ba.get(k, (0, 0))[0] - bb.get(k, (0, 0))[0]))
        print("%s: kernels, %s minus %s (ms, count):" % (name, a, b), file=out)
        for k in diff[:14]:
            x, y = ba.get(k, (0, 0)), bb.get(k, (0, 0))
            print("  %+8.2f ms  %+5d   %.1f/%d vs %.1f/%d  %s" % (
                x[0] - y[0], x[1] - y[1], x[0], x[1], y[0], y[1], k[:110]), file=out)
    out.flush()


def part_offload(out):
    import offload_bench as OB
    model, a, kw = OB.build("gpt2", DEV, not CUDA)

    def plain():
        OB.loss_of(model(*a, **kw)).backward()
    t0, p0 = OB.measure(plain, DEV, 2, 1)
    limit = int(0.6 * p0)
    try:
        w = rt.checkpoint(model, a, kw, memory=limit, algorithm="offload-only", progress=False,
                          repeat=1 if QUICK else 3)
    except remat.InfeasibleError as e:
        limit = int(e.min_memory * 1.05)
        w = rt.checkpoint(model, a, kw, memory=limit, algorithm="offload-only", progress=False,
                          repeat=1 if QUICK else 3)
    e = w.last_entry

    def step():
        OB.loss_of(w(*a, **kw)).backward()
    t, p = OB.measure(step, DEV, 2, 1)
    print("offload-only gpt2: plain %.1f MiB; limit %.1f MiB, predicted %.1f, measured %.1f, "
          "%.1f ms" % (p0 / MIB, limit / MIB, e.predicted_peak / MIB, p / MIB, t), file=out)
    for st in e.plan.steps:
        print("  plan %4d %-10s during %9.1f after %9.1f copy_at %d" % (
            st.pos, st.op, st.mem_during / MIB, st.mem_after / MIB, st.copy_at), file=out)
    # one step instrumented: memory and the peak since the last probe, at each executor event
    rec = []
    base = [0]

    def probe(tag):
        sync()
        now = (torch.cuda.memory_allocated() if CUDA else 0) - base[0]
        top = (torch.cuda.max_memory_allocated() if CUDA else 0) - base[0]
        if CUDA:
            torch.cuda.reset_peak_memory_stats()
        rec.append((tag, now, top))

    def wrap(name, tagger):
        orig = getattr(EX.Step, name)

        def f(self, *xs, **kw):
            r = orig(self, *xs, **kw)
            probe(tagger(*xs))
            return r
        setattr(EX.Step, name, f)
        return orig
    origs = {"before_main": wrap("before_main", lambda j: "before_main %d" % j),
             "after_main": wrap("after_main", lambda j, a: "after_main %d" % j),
             "_apply": wrap("_apply", lambda st: "apply %d %s" % (st.pos, st.op)),
             "stage_backward_done": wrap("stage_backward_done",
                                         lambda j, over=True: "bwd_done %d" % j)}
    sync()
    base[0] = torch.cuda.memory_allocated() if CUDA else 0
    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    step()
    probe("end")
    for k, v in origs.items():
        setattr(EX.Step, k, v)
    for tag, now, top in rec:
        print("  probe %-28s now %9.1f  peak since last %9.1f MiB" % (tag, now / MIB, top / MIB),
              file=out)
    if CUDA:  # one uninstrumented step's allocations
        step()
        torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
        step()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        with gzip.open(os.path.join(OUT, "offload_snapshot.pickle.gz"), "wb") as fz:
            pickle.dump(snap, fz)
    out.flush()


if __name__ == "__main__":
    size = "quick" if QUICK else ("gpu" if CUDA else "cpu")
    with open(os.path.join(OUT, "diag.txt"), "w") as out:
        which = os.environ.get("PARTS", "offload,gpt2,resnet50").split(",")
        for p in which:
            t = time.perf_counter()
            try:
                part_offload(out) if p == "offload" else part_time(p, size, out)
            except Exception:
                import traceback
                traceback.print_exc(file=out)
            print("== part %s: %.0f s" % (p, time.perf_counter() - t), file=out, flush=True)
            print("== part %s: %.0f s" % (p, time.perf_counter() - t), flush=True)

#!/usr/bin/env python3
"""Partial saves (issue 24) against Hugging Face's per-layer checkpointing:
a quick comparison, one meter for every method in one run.

For each model (built from a config, random weights, nothing downloaded):

  plain        plain autograd
  hf-gc        gradient_checkpointing_enable (non-reentrant), every layer
  hf-sac       the same with PyTorch's selective policy (matmul outputs saved)
  remat        remat.torch.checkpoint with partial saves (the default)
  remat-full   the same with REMAT_PARTIAL_SAVES=0 (full saves only)

remat's points are at its smallest accepted limit (the one an
InfeasibleError names, then given to set_memory) and at hf-gc's and
hf-sac's measured peaks. Peaks: remat.torch.PeakMeter around one training step (parameter
gradients allocated before it). Step times: forward + backward + SGD step,
medians of --rounds interleaved rounds (every point once per round, in a
new random order), with the spread.

    python bench/torch_saves.py                      # gpt2 and mixtral
    python bench/torch_saves.py --models gpt2 --rounds 3
"""
import argparse
import copy
import os
import random
import statistics
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch_peers as P  # noqa: E402

MIB = float(1 << 20)
SIZES = {
    "gpt2": dict(layers=4, width=256, batch=2, seq=128),
    "llama": dict(layers=4, width=256, batch=2, seq=128),
    "mixtral": dict(layers=4, width=128, batch=2, seq=64, vocab=1024),
    "qwen2moe": dict(layers=4, width=128, batch=2, seq=64, vocab=1024),
}


def build(name, seed):
    import torch
    import models as M
    torch.manual_seed(seed)
    fn = M.ALL.get(name) or M.ISSUE24[name]
    m, args, kwargs = fn(**SIZES.get(name, {}))
    return m.train(), args, kwargs


def wrap(model, args, kwargs, options):
    import remat.torch as rt
    old = os.environ.get("REMAT_PARTIAL_SAVES")
    os.environ["REMAT_PARTIAL_SAVES"] = "1" if options else "0"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rt.checkpoint(copy.deepcopy(model), args, kwargs, memory=1.0, cache=False,
                                 progress=False)
    finally:
        if old is None:
            del os.environ["REMAT_PARTIAL_SAVES"]
        else:
            os.environ["REMAT_PARTIAL_SAVES"] = old


def point(family, setting, model, args, kwargs, limit=None, state=None):
    """A point; remat's share `state` (the limit its model was last set to)."""
    cp = P.Copy(model, model.parameters())

    def run():
        out = model(*args, **kwargs)
        return out.loss, out

    def prepare():
        if state is not None and state.get("limit") != limit:
            model.set_memory(limit)
            state["limit"] = limit
    pt = P.Point(family, setting, cp, run, prepare if limit is not None else None)
    pt.limit = limit
    return pt


def run_model(name, a, log):
    import torch
    device = torch.device("cpu")
    model, args, kwargs = build(name, a.seed)
    log("== %s %s, %.2fM parameters" % (name, SIZES.get(name, {}),
                                         sum(p.numel() for p in model.parameters()) / 1e6))
    points = [point("plain", "", copy.deepcopy(model), args, kwargs)]
    for fam, sac in (("hf-gc", False), ("hf-sac", True)):
        m = copy.deepcopy(model)
        P.hf_checkpointing(m, 1, sac)
        points.append(point(fam, "every layer", m, args, kwargs))
    P.warm(points, device, 1, log)
    peers = [(pt.family, pt.peak) for pt in points[1:] if pt.status == "ok"]
    for fam, options in (("remat", True), ("remat-full", False)):
        w = wrap(model, args, kwargs, options)
        low = P.min_limit(w, "optimal")
        n_opt = sum(1 for st in w.last_entry.chain.stages if st.get("options"))
        log("  %s: %d stages, %d with partial saves, smallest limit %.3f MiB" % (
            fam, w.last_entry.chain.n - 1, n_opt, low / MIB))
        state = {}
        mine = [point(fam, "smallest", w, args, kwargs, low, state)]
        mine += [point(fam, "at " + peer, w, args, kwargs, peak, state)
                 for peer, peak in peers if peak >= low]
        P.warm(mine, device, 1, log)
        for pt in mine:
            pt.prepare()
            e = w.last_entry
            pt.pred_peak = e.predicted_peak
            pt.schedule = [op for op in e.schedule.ops if "/" in op]
        points += mine
    live = [p for p in points if p.status == "ok"]
    rng = random.Random(a.seed)
    for _ in range(a.rounds):
        rng.shuffle(live)
        for pt in live:
            _, st = P.train_step(pt, device)
            pt.step.append(st)
    return points


def table(name, points):
    lines = ["| %s | setting | limit MiB | measured peak MiB | predicted MiB | step s "
             "(median, min-max) | partial saves used |" % name,
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for pt in points:
        if pt.status != "ok":
            lines.append("| %s | %s | | %s | | | |" % (pt.family, pt.setting, pt.status))
            continue
        used = "" if pt.schedule is None else (
            "%d: %s" % (len(pt.schedule), ", ".join(sorted(set(
                op.split("/")[1] for op in pt.schedule)))) if pt.schedule else "none")
        lines.append("| %s | %s | %s | %.3f | %s | %.3f (%.3f-%.3f) | %s |" % (
            pt.family, pt.setting, "%.3f" % (pt.limit / MIB) if pt.limit else "",
            pt.peak / MIB, "%.3f" % (pt.pred_peak / MIB) if pt.pred_peak else "",
            statistics.median(pt.step), min(pt.step), max(pt.step), used))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2,mixtral")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int)
    a = p.parse_args(argv)
    import torch
    if a.threads:
        torch.set_num_threads(a.threads)
    P.keep_freed_memory()

    def log(s):
        print(s, file=sys.stderr, flush=True)
    for name in a.models.split(","):
        print(table(name, run_model(name, a, log)))
        print()


if __name__ == "__main__":
    main()

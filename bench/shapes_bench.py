#!/usr/bin/env python3
"""What a new input shape costs remat.torch before its step (issue 25):
the first call (capture with dynamic dimensions, profile, a second profile
at each dynamic dimension halved that verifies the size formulas, solve),
every later shape (derived: the formulas evaluated, temporaries and times
fitted, a solve),
against the cost of every new shape before (capture with the example's
sizes, profile, solve). Sequence lengths change, as with dynamic padding;
the steps themselves are not timed.

    python bench/shapes_bench.py --models gpt2,llama --lengths 48,40,33,57,20,31,50
"""
import argparse
import copy
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--lengths", default="48,40,33,57,20,31,50")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    import torch
    import models as M
    import remat.torch as rt
    from remat.torch._prepare import prepare
    from remat.torch._progress import Progress
    warnings.simplefilter("ignore")
    torch.set_num_threads(2)
    lengths = [int(x) for x in a.lengths.split(",")]
    for name in a.models.split(","):
        torch.manual_seed(0)
        model, args, kwargs = getattr(M, name)(seq=a.seq)
        ids = args[0]

        def cut(n, ids=ids):
            x = ids[:, :n].contiguous()
            return (x,), {"labels": x}
        t = time.perf_counter()
        w = rt.checkpoint(copy.deepcopy(model), args, kwargs, memory=0.6, cache=False,
                          repeat=a.repeat, progress=False)
        first = time.perf_counter() - t
        costs = []
        for n in lengths:
            x, kw = cut(n)
            t = time.perf_counter()
            e = w._entry(x, w._call_kwargs(kw))
            costs.append((n, time.perf_counter() - t, "derived" if "derived" in e.info
                          else "profiled"))
            w.last_entry = e
        derived = [c for _, c, how in costs if how == "derived"]
        # before: every new shape was captured with its own sizes, profiled, solved
        x, kw = cut(lengths[-1])
        t = time.perf_counter()
        old = prepare(copy.deepcopy(model), x, kw, w.remat_config, dynamic=False)
        old.solve(int(0.6 * old.plain_peak), "optimal", None, None, Progress("", False))
        before = time.perf_counter() - t
        c = w.remat_counts
        print("%s, seq %d -> %s (load %s):" % (name, a.seq, a.lengths,
                                               " ".join("%.2f" % v for v in os.getloadavg())))
        print("  first call (capture with dynamic dimensions, profile, verification profile, "
              "solve): %.1f s" % first)
        for n, cost, how in costs:
            print("  seq %3d: %-8s %8.3f s" % (n, how, cost))
        if derived:
            print("  derived shapes: median %.3f s, max %.3f s (%d of %d)" % (
                statistics.median(derived), max(derived), len(derived), len(lengths)))
        print("  before, each new shape (capture with its sizes, profile, solve): %.1f s" % before)
        print("  counts: %s" % c)


if __name__ == "__main__":
    main()

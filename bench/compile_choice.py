#!/usr/bin/env python3
"""remat.torch's compile=True against eager, store-all, on the models of
bench/torch_peers.py: every stage compiled, the stages kept compiled where
their profile is faster (COMPILED_GAIN 1.0, the default), where it is 5 %
faster (0.95), and no compiling. Prints the median forward + backward time
of interleaved steps (min-max) and how many stages ran compiled.

    python bench/compile_choice.py --models gpt2,resnet50 --steps 8
"""
import argparse
import copy
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))

VARIANTS = (("every stage compiled", 1e9), ("compiled where faster", 1.0),
            ("compiled where 5 % faster", 0.95), ("eager", None))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2,resnet50")
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args(argv)
    import torch
    import torch_peers as tp
    import remat.torch as rt
    import remat.torch._prepare as W
    tp.keep_freed_memory()
    warnings.simplefilter("ignore")
    for name in a.models.split(","):
        task = tp.Task(name, tp.SIZES["cpu"][name], torch.device("cpu"), 0)
        ws = {}
        for label, gain in VARIANTS:
            if gain is not None:
                W.COMPILED_GAIN = gain
            ws[label] = rt.checkpoint(copy.deepcopy(task.model), task.args, task.kwargs,
                                      memory=1.0, repeat=3, cache=False, progress=False,
                                      compile=gain is not None)
        W.COMPILED_GAIN = 1.0

        def step(w, task=task):
            t = time.perf_counter()
            loss, _ = task.forward(w)
            loss.backward()
            return time.perf_counter() - t
        for w in ws.values():
            step(w)
            step(w)
        times = {k: [] for k in ws}
        for _ in range(a.steps):
            for k, w in ws.items():
                times[k].append(step(w))
        print("%s (load %s):" % (name, tp.loadavg()))
        for k, v in times.items():
            prog = ws[k].last_entry.program
            print("  %-26s %.3f s (%.3f-%.3f), %d of %d stages compiled" % (
                k, statistics.median(v), min(v), max(v), getattr(prog, "compiled", 0),
                len(prog.stages)))
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

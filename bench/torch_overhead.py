"""remat.torch's executor overhead per training step: remat at memory=1.0
(the store-all schedule, nothing recomputed) against plain autograd, on small
models where Python's time per step dominates (a GPU cannot hide it).

Each round runs one plain step and one remat step, back to back (interleaved,
so load changes hit both); the overhead of a round is remat's time less
plain's. Times are the process's CPU time (time.process_time: other jobs on
a shared machine inflate it far less than wall time; torch runs on one
thread here), the wall-clock medians alongside. Reported: the medians, the
median overhead per step and per stage, its spread (the 25th-75th
percentiles), and the load average.

    .venv/bin/python bench/torch_overhead.py                 # ResNet and GPT-2, 60 rounds
    .venv/bin/python bench/torch_overhead.py --models resnet --rounds 100
    .venv/bin/python bench/torch_overhead.py --memory 0.5   # a recomputing limit

With --memory below 1.0 the difference also holds the recomputations' own
compute, not only the executor's work.
"""
from __future__ import annotations

import argparse
import copy
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
import torch.nn.functional as F  # noqa: E402

import models as M  # noqa: E402
import remat.torch as rt  # noqa: E402


MEMORY = 1.0  # --memory


def resnet() -> Tuple[torch.nn.Module, Callable[[Any], Any], Callable[[Any], Any]]:
    m = M.ResNet(layers=(3, 4, 6, 3), base=8, classes=10).train()
    x = torch.randn(2, 3, 32, 32)
    y = torch.randint(0, 10, (2,))
    w = rt.checkpoint(copy.deepcopy(m), (x,), {"loss_args": (y,)}, memory=MEMORY,
                      loss=F.cross_entropy, progress=False)
    return w, lambda mod: F.cross_entropy(mod(x), y), lambda mod: mod(x, loss_args=(y,))


def gpt2() -> Tuple[torch.nn.Module, Callable[[Any], Any], Callable[[Any], Any]]:
    m, args, kwargs = M.gpt2(layers=4, width=64, batch=2, seq=32, dropout=0.0)
    w = rt.checkpoint(copy.deepcopy(m), args, kwargs, memory=MEMORY, progress=False)
    return w, lambda mod: mod(*args, **kwargs).loss, lambda mod: mod(*args, **kwargs).loss


MODELS: Dict[str, Callable[[], Tuple[torch.nn.Module, Callable[[Any], Any],
                                     Callable[[Any], Any]]]] = {"resnet": resnet, "gpt2": gpt2}


def quartiles(v: List[float]) -> Tuple[float, float]:
    q = statistics.quantiles(v, n=4)
    return q[0], q[2]


def bench(name: str, rounds: int, warmup: int) -> None:
    torch.manual_seed(0)
    w, plain_loss, remat_loss = MODELS[name]()
    plain_model = copy.deepcopy(w._remat_model)  # the same weights, plain autograd

    def plain() -> None:
        plain_loss(plain_model).backward()

    def rem() -> None:
        remat_loss(w).backward()

    for _ in range(warmup):
        plain()
        rem()
    times: Dict[str, List[float]] = {"plain": [], "remat": []}
    walls: Dict[str, List[float]] = {"plain": [], "remat": []}
    diffs: List[float] = []
    clock, wall = time.process_time, time.perf_counter
    for _ in range(rounds):
        t0, w0 = clock(), wall()
        plain()
        t1, w1 = clock(), wall()
        rem()
        t2, w2 = clock(), wall()
        times["plain"].append(t1 - t0)
        times["remat"].append(t2 - t1)
        walls["plain"].append(w1 - w0)
        walls["remat"].append(w2 - w1)
        diffs.append((t2 - t1) - (t1 - t0))
    e = w.last_entry
    stages = e.program.n_stages if e is not None else 0
    med = statistics.median(diffs) * 1e3
    lo, hi = quartiles([d * 1e3 for d in diffs])
    print("%-7s stages %3d  plain %7.2f ms  remat %7.2f ms  overhead %6.2f ms/step "
          "[%.2f, %.2f]  %.3f ms/stage  (wall: plain %.2f, remat %.2f ms)" % (
              name, stages, statistics.median(times["plain"]) * 1e3,
              statistics.median(times["remat"]) * 1e3, med, lo, hi, med / max(1, stages),
              statistics.median(walls["plain"]) * 1e3, statistics.median(walls["remat"]) * 1e3))
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet,gpt2",
                    help="comma-separated, of: %s (default: all)" % ", ".join(MODELS))
    ap.add_argument("--rounds", type=int, default=60, help="timed rounds (default 60)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds first (default 5)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: less noise from the other core)")
    ap.add_argument("--memory", type=float, default=1.0,
                    help="remat's limit, a fraction of plain autograd's peak (default 1.0: "
                         "store-all, nothing recomputed)")
    a = ap.parse_args()
    global MEMORY
    MEMORY = a.memory
    torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore")
    print("torch %s, %d thread(s), memory=%g; load average before: %.2f %.2f %.2f" % (
        torch.__version__, a.threads, a.memory, *os.getloadavg()))
    print("CPU time per step; overhead: remat's less plain's, per round: median [25th, 75th "
          "percentile]")
    for name in a.models.split(","):
        bench(name.strip(), a.rounds, a.warmup)
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()

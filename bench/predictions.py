"""How far remat.torch's predicted peak is from the measured one (issue 24:
"within 2 % of the prediction"), on the test suite's models and those of
bench/unseen_models.py, at six limits from the smallest accepted one
(t = 0) to plain autograd's predicted peak (t = 1, where the step runs as
plain autograd, without hooks: marked "h"). Measured with
tests/python/torchkit.py's measured_peak (remat.torch.PeakMeter: the
profiler's allocation events on CPU), after a step whose gradients are
checked bitwise against plain autograd's. Prints a markdown table of
(predicted - measured) / predicted per limit, and /proc/loadavg.

    REMAT_LIB=$PWD/build/libremat.so python bench/predictions.py [--models gpt2,mlp,olmoe]
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import torch  # noqa: E402

import models as M  # noqa: E402
import remat  # noqa: E402
from torchkit import between, copies, hookless, limits, measured_peak, same_step, wrap  # noqa: E402

STEPS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
UNSEEN = ("olmoe", "granitemoe", "mamba2", "gptj", "falcon", "gemma2", "stablelm", "modernbert")


def example(name: str) -> Tuple[Any, tuple, dict]:
    torch.manual_seed(0)
    if name in M.ALL or name in M.ISSUE24:
        return (M.ALL.get(name) or M.ISSUE24[name])()
    import unseen_models as U
    _, build = U.configs()[name]
    model = build().train()
    ids = torch.randint(1, U.VOCAB, (U.BATCH, U.SEQ))
    return model, (ids,), {"labels": ids}


def row(name: str) -> List[str]:
    model, args, kwargs = example(name)
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    low, _, plain = limits(w)
    cells = []
    for t in STEPS:
        try:
            w.set_memory(between(low, plain, t))
        except remat.InfeasibleError:
            cells.append("—")
            continue
        e = w.last_entry
        same_step(ref, w, args, kwargs)
        peak = measured_peak(w, args, kwargs)
        measured_peak(ref, args, kwargs)  # the same number of steps (BatchNorm statistics)
        mark = " h" if hookless(w) else ""
        over = "" if peak <= e.limit else " OVER THE LIMIT"
        cells.append("%.2f %%%s%s" % (100.0 * (e.predicted_peak - peak) / e.predicted_peak,
                                      mark, over))
    return [name, w.last_entry.info["path"], "%.2f" % (plain / 2**20)] + cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(list(M.ALL) + list(M.ISSUE24) + list(UNSEEN)))
    opts = ap.parse_args()
    warnings.simplefilter("ignore")
    print("load before:", open("/proc/loadavg").read().strip())
    print("| model | path | plain, MiB | " + " | ".join("t = %g" % t for t in STEPS) + " |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in STEPS) + " |")
    for name in opts.models.split(","):
        if name == "clip":  # a join: bench/torch_join.py
            continue
        print("| " + " | ".join(row(name)) + " |", flush=True)
    print("load after:", open("/proc/loadavg").read().strip())
    print("torch %s" % torch.__version__)


if __name__ == "__main__":
    main()

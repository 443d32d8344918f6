"""remat.torch's smallest accepted limit on the test suite's models: for
each, the smallest limit `checkpoint()` accepts (its InfeasibleError's
figure, then met), plain autograd's predicted peak, and at the smallest
limit the measured peak (remat.torch.PeakMeter: the profiler's allocation
events on CPU) against the prediction. Run it from two checkouts to see
what a change of the chain model moves.

    REMAT_LIB=$PWD/build/libremat.so python bench/smallest_limits.py \\
        [--models gpt2,llama,bert,vit,resnet50,mixtral,clip,two_tower]
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import torch  # noqa: E402

import join_models as jm  # noqa: E402
import models as M  # noqa: E402
from torchkit import copies, limits, measured_peak, same_step, wrap  # noqa: E402

JOIN = {"clip": jm.clip, "two_tower": jm.two_tower}


def example(name: str):  # type: ignore[no-untyped-def]
    if name in JOIN:
        return JOIN[name]()
    return (M.ALL.get(name) or M.ISSUE24[name])()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,llama,bert,vit,resnet50,mixtral,clip,two_tower")
    opts = ap.parse_args()
    warnings.simplefilter("ignore")
    print("| model | smallest limit | plain (predicted) | smallest / plain | measured at it "
          "| predicted at it |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in opts.models.split(","):
        torch.manual_seed(0)
        model, args, kwargs = example(name)
        ref, base = copies(model)
        w = wrap(base, args, kwargs)
        low, _, plain = limits(w)
        w.set_memory(low)
        same_step(ref, w, args, kwargs)  # (bitwise, as the tests check)
        peak = measured_peak(w, args, kwargs)
        print("| %s | %d | %d | %.1f %% | %d | %d |" % (
            name, low, plain, 100.0 * low / plain, peak, w.last_entry.predicted_peak),
            flush=True)


if __name__ == "__main__":
    main()

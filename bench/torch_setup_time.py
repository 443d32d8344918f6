#!/usr/bin/env python3
"""Capture + profile + solve time of remat.torch.checkpoint on a GPT-2-small
sized model (12 layers x 768, vocabulary 50257, batch 2 x 512; random
weights, no cache), with the load average before and after (issue 8: under
a minute on the 2-core development machine).

    PYTHONPATH=python REMAT_LIB=build/libremat.so .venv/bin/python bench/torch_setup_time.py
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))


def main():
    import torch
    import models as M
    import remat.torch as rt
    torch.manual_seed(0)
    model, args, kw = M.gpt2(layers=12, width=768, batch=2, seq=512, vocab=50257)
    load0 = open("/proc/loadavg").read().split()[:3]
    t = time.perf_counter()
    w = rt.checkpoint(model, args, kw, memory=0.5, cache=False, progress=False)
    secs = time.perf_counter() - t
    load1 = open("/proc/loadavg").read().split()[:3]
    e = w.last_entry
    print("GPT-2 small, batch 2 x 512: capture + profile + solve %.1f s (%s path, %d stages); "
          "load before %s, after %s" % (secs, e.info["path"], e.chain.n - 1, " ".join(load0),
                                          " ".join(load1)))


if __name__ == "__main__":
    main()

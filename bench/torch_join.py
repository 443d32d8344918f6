"""remat.torch on models whose towers meet at the loss (issue 26): the join
solver against the same model as one chain (what remat.torch ran before:
the towers cut into one chain, in the model's order) and against per-layer
checkpointing of every tower, measured with one meter (remat.torch.PeakMeter)
for every method.

    python bench/torch_join.py [--models clip,siamese,triplet,dual-bert,siglip,chinese-clip,altclip]
                               [--steps 5] [--quick]
                               [--out docs/img] [--interleave R]

For each model: plain autograd and per-layer checkpointing (Hugging Face's
gradient_checkpointing_enable() for CLIP, torch.utils.checkpoint around every
block for the others), measured; remat's join program and remat's chain
program (the same model, the join shape switched off), each at its smallest
limit, at per-layer checkpointing's measured peak and at plain autograd's,
measured (peak and median step time). Writes the measured network
(docs/img/torch_join_NAME.json, remat-join-2, with what remat.torch holds in
its profile), the chain (torch_join_NAME_chain.json), the points (torch_join_NAME.csv)
and the picture of `remat plot join NET --compare --chain CHAIN --held
--mark ...` (torch_join_NAME.png). Models from tests/python/join_models.py.
"""
from __future__ import annotations

import argparse
import copy
import csv
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import join_models as jm  # noqa: E402

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _prepare  # noqa: E402

MODELS = {
    # CLIP: a 6-layer text tower (sequences of 32) and a 6-layer vision tower
    # (64 x 64 images in 8 x 8 patches), width 128, batch 16
    "clip": (lambda: jm.clip(layers=6, width=128, batch=16, seq=32, image=64),
             jm.clip_per_layer),
    # a siamese network: one 8-block MLP encoder (width 128) on two inputs
    "siamese": (lambda: jm.siamese(batch=64, seq=32, d=128, n=8), jm.per_layer),
    # a triplet network: one 6-block convolutional encoder on three images
    "triplet": (lambda: jm.triplet(batch=16, image=32, c=32, n=6), jm.per_layer),
    # a dual BERT encoder (4- and 6-layer towers, width 96; queries of 32
    # tokens, documents of 128, batch 8): no test uses it
    "dual-bert": (jm.dual_bert, jm.dual_bert_per_layer),
    # SigLIP, Chinese-CLIP and AltCLIP at the test suite's CLIP size
    "siglip": (jm.siglip, jm.clip_per_layer),
    "chinese-clip": (jm.chinese_clip, jm.clip_per_layer),
    "altclip": (jm.altclip, jm.clip_per_layer),
}
# --quick: the test suite's sizes (tests/python/join_models.py defaults)
QUICK = {"clip": (jm.clip, jm.clip_per_layer), "siamese": (jm.siamese, jm.per_layer),
         "triplet": (jm.triplet, jm.per_layer), "dual-bert": (jm.dual_bert, jm.dual_bert_per_layer),
         "siglip": (jm.siglip, jm.clip_per_layer), "chinese-clip": MODELS["chinese-clip"],
         "altclip": MODELS["altclip"]}


def loss_of(out: Any) -> torch.Tensor:
    return out.loss if hasattr(out, "loss") else out


def run(model: torch.nn.Module, args: tuple, kwargs: dict, steps: int) -> Tuple[int, float]:
    """(measured peak of one step above its start, median step time in ms
    of `steps` steps run without the meter, after one to warm up)."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    torch.manual_seed(0)
    loss_of(model(*args, **kwargs)).backward()
    with rt.PeakMeter() as m:
        loss_of(model(*args, **kwargs)).backward()
    times = []
    for k in range(steps):
        torch.manual_seed(k)
        t0 = time.perf_counter()
        loss_of(model(*args, **kwargs)).backward()
        times.append((time.perf_counter() - t0) * 1e3)
    return m.peak, statistics.median(times)


def wrap(model: torch.nn.Module, args: tuple, kwargs: dict, join: bool) -> rt.RematModule:
    shapes = _prepare.SHAPES
    if not join:
        _prepare.SHAPES = []
    try:
        return rt.checkpoint(model, args, kwargs, memory=1.0, cache=False, repeat=3,
                             progress=False)
    finally:
        _prepare.SHAPES = shapes


def smallest(w: rt.RematModule) -> int:
    try:
        w.set_memory(1)
    except remat.InfeasibleError as e:
        return int(e.min_memory)
    return 1


def bench(name: str, steps: int, out: str, quick: bool) -> List[Dict[str, Any]]:
    make, per_layer = (QUICK if quick else MODELS)[name]
    torch.manual_seed(0)
    m, args, kw = make()
    rows: List[Dict[str, Any]] = []

    def row(method: str, limit: Any, predicted: Any, model: torch.nn.Module,
            ptime: Any = "") -> Tuple[int, float]:
        peak, ms = run(model, args, kw, steps)
        rows.append({"model": name, "method": method, "limit": limit, "predicted_peak": predicted,
                     "measured_peak": peak, "predicted_ms": ptime, "measured_ms": round(ms, 1)})
        print("%-8s %-28s limit %-10s measured %9d B %8.1f ms" % (name, method, limit, peak, ms),
              flush=True)
        return peak, ms

    plain_peak, plain_ms = row("plain autograd", "", "", copy.deepcopy(m))
    ck_peak, ck_ms = row("per-layer checkpointing", "", "", per_layer(copy.deepcopy(m)))
    marks = ["plain autograd=%d@%.4g" % (plain_peak, plain_ms),
             "per-layer checkpointing=%d@%.4g" % (ck_peak, ck_ms)]
    for join in (True, False):
        w = wrap(copy.deepcopy(m), args, kw, join)
        e = w.last_entry
        label = "remat join" if join else "remat one chain"
        if join:
            path = os.path.join(out, "torch_join_%s.json" % name)
            e.problem.save(path)
            print(w.remat_report())
        else:
            e.chain.save(os.path.join(out, "torch_join_%s_chain.json" % name))
        low = smallest(w)
        for lim in sorted({low, max(low, ck_peak), e.plain_peak}):
            w.set_memory(lim)
            peak, ms = row("%s at %s" % (label, "smallest" if lim == low else lim), lim,
                           e.predicted_peak, w, round(e.schedule.time, 1))
            if lim == low:
                marks.append("%s, smallest limit=%d@%.4g" % (label, peak, ms))
    png = os.path.join(out, "torch_join_%s.png" % name)
    cmd = [sys.executable, "-m", "remat", "plot", "join", path, "--compare", "--held",
           "--chain", os.path.join(out, "torch_join_%s_chain.json" % name), "-o", png,
           "--title", "%s: time per step against the limit (measured points marked)" % name]
    for mk in marks:
        cmd += ["--mark", mk]
    subprocess.run(cmd, check=True)
    print("wrote", png)
    return rows


def interleaved(name: str, rounds: int, quick: bool) -> None:
    """Step times of per-layer checkpointing and of remat's join at
    per-layer checkpointing's measured peak, one step of each in turn:
    medians and ranges of `rounds` steps each, with the load average."""
    make, per_layer = (QUICK if quick else MODELS)[name]
    torch.manual_seed(0)
    m, args, kw = make()
    ck = per_layer(copy.deepcopy(m))
    ck_peak, _ = run(ck, args, kw, 1)
    w = rt.checkpoint(copy.deepcopy(m), args, kw, memory=ck_peak, cache=False, progress=False)

    def one(model: torch.nn.Module) -> float:
        torch.manual_seed(1)
        t0 = time.perf_counter()
        loss_of(model(*args, **kw)).backward()
        return (time.perf_counter() - t0) * 1e3

    one(ck)
    one(w)
    times: Dict[str, List[float]] = {"per-layer checkpointing": [], "remat join": []}
    for _ in range(rounds):
        times["per-layer checkpointing"].append(one(ck))
        times["remat join"].append(one(w))
    print("%s at per-layer checkpointing's peak (%d B), %d interleaved steps each, load %s"
          % (name, ck_peak, rounds, " ".join("%.2f" % x for x in os.getloadavg())))
    for k, v in times.items():
        print("  %-24s median %7.1f ms  [%.1f-%.1f]" % (k, statistics.median(v), min(v), max(v)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="clip,siamese,triplet")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "docs", "img"))
    ap.add_argument("--quick", action="store_true",
                    help="the test suite's smaller models (a loaded or small machine)")
    ap.add_argument("--interleave", type=int, default=0, metavar="R",
                    help="only time per-layer checkpointing and remat's join at per-layer "
                    "checkpointing's peak, R steps of each in turn")
    ns = ap.parse_args()
    torch.set_num_threads(2)
    if ns.interleave:
        for name in ns.models.split(","):
            interleaved(name, ns.interleave, ns.quick)
        return
    for name in ns.models.split(","):
        rows = bench(name, ns.steps, ns.out, ns.quick)
        path = os.path.join(ns.out, "torch_join_%s.csv" % name)
        with open(path, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
        print("wrote", path)


if __name__ == "__main__":
    main()

"""One input whose graph is a join of towers → a prepared join entry: the
join program and its network (from the disk cache or measured); the caller
solves it with the join solver. _prepare.prepare() asks `join_entry`
first (through _prepare.SHAPES: this module imports _prepare)."""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Optional, Tuple

import torch.utils._pytree as pytree
from torch import nn

import remat

from .._budget import human
from .._cache import ProfileCache
from .._config import Bandwidth, Config, Memory
from .._graph.program import GraphProgram
from .._offload import OFFLOAD_ALGORITHMS
from .._prepare import SHAPES, AnyProgram, Prepared
from .._program import Args, Kwargs
from .._progress import Progress
from .measure import profile_join
from .program import JoinGraphProgram


class JoinCache:
    """The disk cache entry of a join program's network: a remat-join-2 file
    beside the chain profiles (_cache.py's directory and key)."""

    def __init__(self, cache: Any, program_key: str) -> None:
        base = ProfileCache(cache, program_key)
        self.key = base.key
        self.dir = base.dir
        self.path = os.path.join(base.dir, "join-%s.json" % base.key) if base.dir else None

    def load(self, stage_names: object) -> Optional["remat.JoinProblem"]:
        if not self.path or not os.path.exists(self.path):
            return None
        try:
            net = remat.JoinProblem.load(self.path)
            p = net.meta.get("profile", {})
            if p.get("key") == self.key and p.get("stages") == stage_names:
                return net
        except (remat.RematError, KeyError, ValueError):
            pass
        return None

    def save(self, net: "remat.JoinProblem") -> None:
        if not self.path or not self.dir:
            return
        try:
            os.makedirs(self.dir, exist_ok=True)
            net.save(self.path)
        except (OSError, remat.RematError) as e:
            warnings.warn("remat: cannot write the profile cache %s: %s" % (self.path, e),
                          stacklevel=6)


class JoinPrepared(Prepared):
    """A prepared input whose program is a join of towers: `problem` (the
    remat-join-2 network), and once solved its JoinSchedule and JoinPlan in
    `schedule` and `plan`. `chain` is the network flattened to one chain
    (remat.JoinProblem.flatten), for what reads a chain."""

    schedule: Optional["remat.JoinSchedule"]  # type: ignore[assignment]
    plan: Optional["remat.JoinPlan"]  # type: ignore[assignment]

    def __init__(self, program: JoinGraphProgram, problem: "remat.JoinProblem",
                 info: Dict[str, Any]) -> None:
        held = int(problem.meta["profile"]["held_bytes"])
        super().__init__(program, problem.flatten(), held, info)
        self.problem = problem
        self.step_held = held
        self.backward_held = []

    @property
    def plain_peak(self) -> int:
        """Predicted peak of plain autograd (store everything), held included."""
        return self.problem.store_all_cost()[0] + self.held

    def solve(self, memory: Memory, algorithm: str, slots: Optional[int],
              segments: Optional[int], progress: Progress, bandwidth: Bandwidth = None) -> None:
        """The join solver's schedule for `memory` (the fastest nested
        persistent one, docs/join.md), its plan and predicted peak;
        remat.InfeasibleError naming the smallest limit when none fits."""
        if algorithm != "optimal":
            raise ValueError(
                "remat: this input is a join of %d towers, which the join solver schedules; it "
                "takes algorithm='optimal' (got %r). Prepare the model with that algorithm to "
                "flatten it into one chain." % (len(self.problem.branches), algorithm))
        limit = self.limit_of(memory)
        budget = limit - self.held
        try:
            if budget < 0:
                raise remat.InfeasibleError("", self.problem.min_memory(slots))
            sched = self.problem.solve(budget, slots=slots)
        except remat.InfeasibleError as e:
            need = min((e.min_memory or 0) + self.held, self.plain_peak)
            raise remat.InfeasibleError(
                "remat.torch.checkpoint: a memory limit of %s (%d bytes) is below the smallest "
                "this model can train in with the join solver: %s (%d bytes, %s of it held for "
                "the whole step). Plain autograd needs %s." % (
                    human(limit), limit, human(need), need, human(self.held),
                    human(self.plain_peak)), need) from None
        self.schedule = sched
        self.plan = self.problem.plan(sched)
        self.limit = limit
        self.predicted_peak = sched.peak_bytes + self.held


def join_entry(program: AnyProgram, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
               why: str, progress: Progress) -> Tuple[Optional[Prepared], str]:
    """A JoinPrepared when the captured graph is a join of towers (and the
    settings let the join solver run it), else None and a note for the
    report on why the model runs as one chain ("" when it has one path)."""
    if not isinstance(program, GraphProgram):
        return None, ""
    join, no = JoinGraphProgram.from_graph(program, model, args, kwargs, cfg.max_stages)
    if join is None:  # a model without towers says nothing more
        return None, "; one chain: %s" % no if no else ""
    shape = join.shape()
    other = _other_settings(cfg)
    if other:
        return None, "; %s found, but %s: flattened into one chain" % (shape, other)
    progress.note(shape)
    info = {"path": "graph", "why": "%s; %s" % (shape, why), "export_log": "", "shape": shape}
    # the caller solves it (RematModule._solve)
    return join_profile_on(join, model, args, kwargs, cfg, progress, info), ""


def join_profile_on(join: JoinGraphProgram, model: nn.Module, args: Args, kwargs: Kwargs,
                    cfg: Config, progress: Progress, info: Dict[str, Any]) -> JoinPrepared:
    """A JoinPrepared of `join` profiled on this input (another shape of a
    dynamic join runs the same program), or its cached network;
    info["cached"] says which."""
    cache = JoinCache(cfg.cache, join.cache_key(model, args, kwargs, cfg.repeat))
    net = cache.load(join.stage_names())
    cached = cache.path if net is not None else None
    if net is None:
        net = profile_join(join, model, pytree.tree_leaves((args, kwargs)), cfg.repeat, progress,
                           type(model).__name__)
        net.meta["profile"]["key"] = cache.key
        cache.save(net)
    return JoinPrepared(join, net, dict(info, cached=cached))


def _other_settings(cfg: Config) -> str:
    """Why the join solver cannot run these settings ("" when it can)."""
    if cfg.algorithm != "optimal":
        return "algorithm=%r solves chains" % cfg.algorithm
    if cfg.algorithm in OFFLOAD_ALGORITHMS or cfg.compile:
        return "compile=True runs chains"
    return ""


SHAPES.append(join_entry)

"""The budget: a memory limit turned into a schedule, its execution plan
and its predictions, for a profiled chain.

The chain gives each op its own temporary memory (`fwd_overhead` for Fn and
Fck, `fall_overhead` for Fall, and each partial save's own), so the solver
sees what runs. What it cannot see is memory held in the backward only
(backward_held): the solver is given everything held as held for the whole
step, while predictions count backward_held op by op, so a schedule the
solver would refuse may still fit, and is tried (_roomier, _fitting). The
smallest limit an InfeasibleError names is the prediction of the schedule
found at the solver's smallest budget: a limit that large is accepted and
met.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch

import remat

from ._cache import ProfileCache
from ._config import Bandwidth, Memory, check_memory
from ._offload import OFFLOAD_ALGORITHMS, HostLink
from ._progress import Progress

PORTFOLIO = ("sequential", "revolve")  # tried with optimal when held in the backward only
ROOMIER_STEPS = 8  # solves at most, when part of `held` is held in the backward only


def human(n: float) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if abs(n) >= 1 << k:
            return "%.2f %s" % (n / (1 << k), unit)
    return "%d B" % n




class Budget:
    """A profiled chain (what the profile holds for the whole step: `held`)
    and, once solve() ran, the schedule for a limit, its plan and its
    predicted peak. `device`: where the host link copies from (offload
    schedules); `cache`: where a measured host link is kept."""

    def __init__(self, chain: "remat.Chain", held: int, device: torch.device,
                 cache: Optional[ProfileCache] = None) -> None:
        self.chain = chain
        self.held = held
        self.device = device
        self.cache = cache
        self.schedule: Optional[remat.Schedule] = None
        self.plan: Optional[remat.Plan] = None
        self.limit = 0
        self.predicted_peak = 0
        # Held only in the backward ([bytes, from, until], see _program.Profile): the
        # rest of `held` is held for the whole step.
        self.backward_held = [tuple(int(x) for x in b) for b in
                              chain.meta.get("profile", {}).get("backward_held", [])]
        self.step_held = held - sum(b[0] for b in self.backward_held)
        # what a step run as plain autograd frees sooner, or never holds (Profile)
        prof = chain.meta.get("profile", {})
        # stage -> the share of a[i] that B i's peak still counts (at another
        # input shape, the same share of that shape's a[i])
        self.frees_out = {int(i): max(0.0, 1.0 - int(gone) / max(1, int(out)))
                          for i, gone, out in prof.get("frees_out", [])}
        self.replay_bytes = int(prof.get("replay_bytes", 0))
        self._plain_peak: Optional[int] = None
        self._every: Optional[Tuple["remat.Chain", "remat.Schedule"]] = None
        self.bandwidth = 0.0   # the host link of the schedule, bytes per chain time unit
        self.link: Optional[HostLink] = None  # its copy engine, made for offload schedules

    def _store_all(self) -> "remat.Schedule":
        if self._every is None or self._every[0] is not self.chain:
            self._every = (self.chain, remat.solve(
                self.chain, remat.store_all_cost(self.chain)[0], algorithm="store-all"))
        return self._every[1]

    @property
    def plain_peak(self) -> int:
        """Predicted activation peak of plain autograd (store everything)."""
        if self._plain_peak is None:
            self._plain_peak = self.predict(self._store_all())
        return self._plain_peak

    def _backward_held(self, ops: Sequence[str]) -> List[int]:
        """What backward_held adds while each op runs (see Runner)."""
        alive: Dict[int, int] = {}
        out = []
        for op in ops:
            kind, _, rest = op.partition(" ")
            j = int(rest.split()[0]) if kind == "B" else -1
            out.append(sum(alive.values()))
            for k, (b, first, last) in enumerate(self.backward_held):
                if last == j:
                    alive.pop(k, None)
                elif first == j:
                    alive[k] = b
        return out

    def predict(self, sched: "remat.Schedule") -> int:
        """Peak of `sched` (libremat's simulator: each op with its own
        overhead), plus what is held: for the whole step, and in the
        backward while it lives."""
        sim = remat.simulate(self.chain, sched, self.bandwidth)
        during = [m + b for m, b in zip(sim.mem_during, self._backward_held(sched.ops))]
        held = self.step_held
        if sched.ops == self._store_all().ops:
            # plain autograd's step (the executor's Step.all_native): a stage
            # output that stage saves none of is gone after the next stage's
            # backward, and no RNG state or buffer snapshot is kept
            held -= self.replay_bytes
            for k, op in enumerate(sched.ops):
                i = int(op[2:]) if op.startswith("B ") else 0
                if i in self.frees_out:
                    during[k] -= int(self.chain.stages[i - 1]["out_bytes"] * self.frees_out[i])
        return int(max(during + [self.chain.input_bytes])) + held

    def link_bandwidth(self, bandwidth: Bandwidth) -> float:
        """Bytes per time unit of the chain: `bandwidth` given in bytes per
        second or as "24GB/s", or measured ("auto", None) once and kept in the
        profile's metadata (and its cache file)."""
        if isinstance(bandwidth, str) and bandwidth != "auto":
            return remat.bandwidth_per_unit(bandwidth, self.chain.time_unit)
        if bandwidth is not None and bandwidth != "auto":
            return remat.bandwidth_per_unit("%d/s" % int(bandwidth), self.chain.time_unit)
        prof = self.chain.meta.setdefault("profile", {})
        if not prof.get("link"):
            prof["link"] = self._link().measure()
            if self.cache is not None:
                self.cache.save(self.chain, stacklevel=6)
        return remat.bandwidth_per_unit("%d/s" % int(prof["link"]["bytes_per_s"]),
                                        self.chain.time_unit)

    def _link(self) -> HostLink:
        if self.link is None:
            self.link = HostLink(self.device)
        return self.link

    def _roomier(self, sched: Optional["remat.Schedule"], limit: int, algorithm: str,
                 slots: Optional[int], segments: Optional[int], bw: Optional[float]
                 ) -> Optional["remat.Schedule"]:
        """`sched` (None: infeasible) was solved as if backward_held were held
        for the whole step. The solver cannot see that it is held in the
        backward only, so budgets up to the one that leaves out backward_held
        are tried (bisection on the budget); a schedule is taken if it is
        faster and its prediction, which counts backward_held op by op, fits."""
        lo, hi = limit - self.held, limit - self.step_held
        if not self.backward_held or hi <= 0:
            return sched
        best, budget, roomiest = sched, hi, hi
        for _ in range(ROOMIER_STEPS):
            try:
                cand = remat.solve(self.chain, budget, algorithm=algorithm, slots=slots,
                                   segments=segments, bandwidth=bw)
            except remat.InfeasibleError:  # so is every smaller budget
                cand = None
            if cand is not None and self.predict(cand) > limit:
                hi = budget
            else:
                lo = budget
                if cand is not None and (best is None or cand.time < best.time):
                    best = cand
                if budget == roomiest:
                    break
            if hi - lo <= max(1, limit >> 10):
                break
            budget = (lo + hi) // 2
        return best

    def _fitting(self, limit: int, algorithm: str, slots: Optional[int],
                 segments: Optional[int], bw: Optional[float]
                 ) -> Tuple[Optional["remat.Schedule"], int]:
        """(the fastest schedule of `algorithm` found to fit `limit`, 0) or
        (None, the smallest limit it meets). That limit is the prediction
        of the schedule at the chain's smallest budget (at most that budget
        plus all held: less when the schedule's peak falls where
        backward_held is not alive, or below the budget); with `limit` that
        large, this function finds that schedule again and takes it."""
        budget = limit - self.held
        sched: Optional[remat.Schedule] = None
        floor = 0
        try:
            if budget < 0:
                raise remat.InfeasibleError("", remat.min_memory(self.chain, algorithm, slots,
                                                                 bandwidth=bw))
            sched = remat.solve(self.chain, budget, algorithm=algorithm, slots=slots,
                                segments=segments, bandwidth=bw)
        except remat.InfeasibleError as e:
            floor = e.min_memory or 0
        sched = self._roomier(sched, limit, algorithm, slots, segments, bw)
        if sched is not None:
            return sched, 0
        need = floor + self.held
        if floor:
            try:
                at_floor = remat.solve(self.chain, floor, algorithm=algorithm, slots=slots,
                                       segments=segments, bandwidth=bw)
            except remat.InfeasibleError:
                pass
            else:
                peak = self.predict(at_floor)
                if peak <= limit:
                    return at_floor, 0
                need = min(need, peak)
        return None, min(need, self.plain_peak)

    def limit_of(self, memory: Memory) -> int:
        """Bytes of a limit given in bytes, as a size text or as a fraction of
        plain autograd's predicted peak."""
        check_memory(memory)
        if isinstance(memory, float):
            return int(memory * self.plain_peak)
        return remat.parse_size(memory)

    def solve(self, memory: Memory, algorithm: str, slots: Optional[int],
              segments: Optional[int], progress: Progress, bandwidth: Bandwidth = None) -> None:
        """The fastest schedule of `algorithm` found to fit `memory`, its plan
        and its predicted peak; remat.InfeasibleError naming the smallest
        limit that would fit when none does."""
        offload = algorithm in OFFLOAD_ALGORITHMS
        bw = self.link_bandwidth(bandwidth) if offload else None
        self.bandwidth = bw or 0.0
        limit = self.limit_of(memory)
        # With backward_held the solver may refuse keeping everything though
        # its prediction fits; then it is the fastest schedule, so a candidate.
        every = self._store_all()
        every_fits = self.predict(every) <= limit
        sched, need = self._fitting(limit, algorithm, slots, segments, bw)
        if algorithm == "optimal" and self.backward_held:
            # The solver cannot see memory held in the backward only, so its
            # optimum may not be the fastest schedule that fits: near the
            # smallest limits, sequential's (whose peak falls in the forward)
            # can be faster. Take the fastest of the three.
            for other in PORTFOLIO:
                cand, low = self._fitting(limit, other, None, None, bw)
                if cand is not None and (sched is None or cand.time < sched.time):
                    sched = cand
                if cand is None:
                    need = min(need, low)
        if sched is None:
            if not every_fits:
                raise remat.InfeasibleError(
                    "remat.torch.checkpoint: a memory limit of %s (%d bytes) is below the "
                    "smallest this model can train in with %s: %s (%d bytes, %s of it held for "
                    "the whole step). Plain autograd needs %s." % (
                        human(limit), limit, algorithm, human(need), need,
                        human(self.step_held), human(self.plain_peak)), need) from None
            sched = every
        if every_fits and every.time <= sched.time:
            sched = every
        peak = self.predict(sched)
        self.schedule = sched
        self.plan = remat.plan(self.chain, sched, bandwidth=bw)
        if offload:
            self._link()
        self.limit = limit
        self.predicted_peak = peak

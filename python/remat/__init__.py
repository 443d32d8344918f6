"""remat: checkpointing schedules for training under a memory limit.

Python face of libremat: chains (SPEC section 1), schedules, the solvers, the
simulator and execution plans. All the algorithms live in the C library; this
package only wraps handles. The PyTorch front-end is remat.torch.

    chain = remat.Chain.load("c.json")
    sched = remat.solve(chain, "4GiB", algorithm="optimal")
    res = remat.simulate(chain, sched)     # res.valid, res.time, res.peak_bytes

Join networks (several chains meeting at the loss, "remat-join-2") are
remat.JoinProblem, with solve, curve, simulate and plan of their own.
"""
from __future__ import annotations

import ctypes

from . import _lib
from ._chain import Chain, Schedule
from ._convert import Size, _chain_ptr, _options, _real, parse_size
from ._curves import (Curve, Event, JoinCurve, Timeline, bandwidth_per_unit, curve, join_curve,
                      timeline)
from ._join import JoinPlan, JoinProblem, JoinSchedule, JoinSimResult, JoinStep
from ._lib import (InfeasibleError, InputError, InternalError, NoMemoryError, RematError,
                   RematIOError, TooLargeError)
from ._lib import call as _call

__version__ = _lib.VERSION_STRING
__all__ = ["Chain", "Schedule", "SimResult", "Plan", "solve", "simulate", "plan", "parse_size",
           "min_memory", "store_all_cost", "RematError", "InputError", "InfeasibleError",
           "NoMemoryError", "TooLargeError", "RematIOError", "InternalError", "__version__",
           "curve", "Curve", "timeline", "Timeline", "Event", "join_curve", "JoinCurve",
           "bandwidth_per_unit", "algorithms", "offload_algorithms", "JoinProblem",
           "JoinSchedule", "JoinSimResult", "JoinPlan", "JoinStep"]


def algorithms() -> tuple[str, ...]:
    """The names of libremat's algorithms, in its order ("optimal" first): the
    values solve(), min_memory() and curve() take as `algorithm`."""
    count = int(_lib.lib.remat_algorithm_count())
    return tuple(str(_lib.lib.remat_algorithm_name(a).decode()) for a in range(count))


def offload_algorithms() -> tuple[str, ...]:
    """The algorithms whose schedules move values to the host (Off/Pre/Wait,
    docs/offload.md): they solve for a host link, solve(..., bandwidth=...)."""
    count = int(_lib.lib.remat_algorithm_count())
    return tuple(str(_lib.lib.remat_algorithm_name(a).decode()) for a in range(count)
                 if _lib.lib.remat_algorithm_is_offload(a))


def solve(chain: Chain, memory: Size, algorithm: str = "optimal", slots: int | None = None,
          segments: int | None = None, threads: int = 0,
          bandwidth: float | str | None = None) -> Schedule:
    """Solves `chain` under `memory` (bytes or "4GiB"). Raises InfeasibleError
    (with .min_memory, which libremat always fills when it can be known) when
    nothing fits. `bandwidth` (bytes per time unit or "12GB/s") is the host
    link of the offload algorithms (pofo, ...)."""
    cp = _chain_ptr(chain)
    o = _options(memory, algorithm, slots, segments, threads)
    if bandwidth is not None:
        o.bandwidth = bandwidth_per_unit(bandwidth, chain.time_unit)
    ptr = ctypes.POINTER(_lib.ScheduleStruct)()
    try:
        _call(_lib.lib.remat_solve, cp, ctypes.byref(o), ctypes.byref(ptr))
    except InfeasibleError as e:
        if not e.min_memory:
            raise
        raise InfeasibleError("%s; %s needs at least %d bytes (%s) for chain %r"
                              % (e.message, algorithm, e.min_memory, _human(e.min_memory),
                                 chain.name), e.min_memory) from None
    return Schedule(ptr)


def min_memory(chain: Chain, algorithm: str = "optimal", slots: int | None = None,
               bandwidth: float | str | None = None) -> int:
    """Smallest memory limit in bytes for which `algorithm` finds a schedule
    (the offload algorithms with a host link of `bandwidth`, as solve())."""
    cp = _chain_ptr(chain)
    o = _options(0, algorithm, slots, None, 0)
    if bandwidth is not None:
        o.bandwidth = bandwidth_per_unit(bandwidth, chain.time_unit)
    out = ctypes.c_uint64()
    _call(_lib.lib.remat_min_memory, cp, ctypes.byref(o), ctypes.byref(out))
    return int(out.value)


def store_all_cost(chain: Chain) -> tuple[int, float]:
    """(peak_bytes, time) of plain autograd on `chain`."""
    peak, t = ctypes.c_uint64(), ctypes.c_double()
    _call(_lib.lib.remat_store_all_cost, _chain_ptr(chain), ctypes.byref(peak), ctypes.byref(t))
    return int(peak.value), float(t.value)


class SimResult:
    """What remat.simulate() found: valid, time, peak_bytes, mem_during,
    mem_after, and for invalid schedules failed_op, failed_op_text, reason."""

    def __init__(self, r: _lib.SimResult) -> None:
        self.valid = bool(r.valid)
        self.time = float(r.time)
        self.peak_bytes = int(r.peak_bytes)
        n = int(r.n_ops)
        self.mem_during = [int(r.mem_during[k]) for k in range(n)] if r.mem_during else []
        self.mem_after = [int(r.mem_after[k]) for k in range(n)] if r.mem_after else []
        self.failed_op: int | None = int(r.failed_op) if not self.valid else None
        self.failed_op_text: str | None = r.failed_op_text.decode() if not self.valid else None
        self.reason: str | None = r.reason.decode() if not self.valid else None

    def __repr__(self) -> str:
        if self.valid:
            return "<SimResult valid time=%g peak=%d>" % (self.time, self.peak_bytes)
        return "<SimResult invalid at %s: %s>" % (self.failed_op_text, self.reason)


def simulate(chain: Chain, schedule: Schedule, bandwidth: float = 0.0) -> SimResult:
    """Replays `schedule` on `chain` (SPEC section 2)."""
    cp = _chain_ptr(chain)
    if not isinstance(schedule, Schedule):
        raise TypeError("schedule: expected a remat.Schedule, got %s" % type(schedule).__name__)
    opt = _lib.SimOptions()
    _lib.lib.remat_sim_options_init(ctypes.byref(opt))
    opt.bandwidth = _real(bandwidth, "bandwidth")
    ptr = ctypes.POINTER(_lib.SimResult)()
    _call(_lib.lib.remat_simulate, cp, schedule._ptr, ctypes.byref(opt), ctypes.byref(ptr))
    try:
        return SimResult(ptr.contents)
    finally:
        _lib.lib.remat_sim_result_free(ptr)


_REF_KIND = {0: "a", 1: "abar", 2: "d"}


class Step:
    """One planned op: .op (text, e.g. "Fall 3/2"), .kind ("Fn", "Fck",
    "Fall", "B", "Del", "Off", "Pre", "Wait"), .index (its stage or value
    index), .option (the partial save: for Fall the one it makes, for B the
    one of the abar it consumes; 0 = the full save and for other ops), .pos
    (its place in the plan), .reads/.creates/.frees as ("a"|"abar"|"d", i)
    pairs, .mem_during/.mem_after, .start/.end (simulated times) and .copy_at:
    for Off, the step before which the value's device copy is released; for
    Pre, the step before which the prefetch starts (include/remat/exec.h).
    .stops is True for a stopped Fall (a full-save Fall i followed by B i,
    docs/formats.md): it need only run stage i up to its last saved tensor."""

    __slots__ = ("op", "kind", "index", "option", "pos", "reads", "creates", "frees",
                 "mem_during", "mem_after", "start", "end", "copy_at", "stops")

    def __init__(self, st: _lib.ExecStep, pos: int) -> None:
        self.op = _lib.op_text(st.op)
        self.kind = self.op.split()[0]
        self.index = int(st.op.index)
        self.option = int(st.option)
        self.pos = pos
        self.reads = [(_REF_KIND[r.kind], int(r.index)) for r in st.reads[:st.n_reads]]
        self.creates = [(_REF_KIND[r.kind], int(r.index)) for r in st.creates[:st.n_creates]]
        self.frees = [(_REF_KIND[r.kind], int(r.index)) for r in st.frees[:st.n_frees]]
        self.mem_during = int(st.mem_during)
        self.mem_after = int(st.mem_after)
        self.start = float(st.start)
        self.end = float(st.end)
        self.copy_at = int(st.copy_at)
        self.stops = bool(st.stops)

    @property
    def value(self) -> tuple[str, int] | None:
        """The value an Off, Pre or Wait copies or waits for."""
        if self.kind not in ("Off", "Pre", "Wait"):
            return None
        return ("abar" if self.op.split()[1].startswith("abar") else "a", self.index)

    def __repr__(self) -> str:
        return "<Step %s reads=%s creates=%s frees=%s>" % (self.op, self.reads, self.creates,
                                                          self.frees)


class Plan:
    """An execution plan (include/remat/exec.h), copied into Python;
    .bandwidth is the host link it was made for (bytes per time unit, 0: none)."""

    def __init__(self, p: _lib.ExecPlan) -> None:
        self.steps = [Step(p.steps[k], k) for k in range(p.n_steps)]
        self.first_backward = int(p.first_backward)
        self.peak_bytes = int(p.peak_bytes)
        self.time = float(p.time)
        self.bandwidth = float(p.bandwidth)


def plan(chain: Chain, schedule: Schedule, bandwidth: float | str | None = None) -> Plan:
    """What each op of `schedule` reads, creates and frees on `chain`. With a
    host link (`bandwidth`: bytes per time unit or "12GB/s", as solve()),
    offload ops are planned too (remat_exec_plan_create_timed)."""
    cp = _chain_ptr(chain)
    if not isinstance(schedule, Schedule):
        raise TypeError("schedule: expected a remat.Schedule, got %s" % type(schedule).__name__)
    ptr = ctypes.POINTER(_lib.ExecPlan)()
    if bandwidth is None:
        _call(_lib.lib.remat_exec_plan_create, cp, schedule._ptr, ctypes.byref(ptr))
    else:
        _call(_lib.lib.remat_exec_plan_create_timed, cp, schedule._ptr,
              bandwidth_per_unit(bandwidth, chain.time_unit), ctypes.byref(ptr))
    try:
        return Plan(ptr.contents)
    finally:
        _lib.lib.remat_exec_plan_free(ptr)


def _human(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return "%.2f %s" % (n / (1 << k), unit)
    return "%d B" % n

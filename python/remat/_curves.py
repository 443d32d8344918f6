"""Time-memory curves, timed timelines and join curves, from libremat.

Thin ctypes wrappers of remat_curve_compute(), remat_simulate() with a
recorded timeline and remat_join_curve_compute(); remat.plot draws them.
No algorithm code here: every number comes from the C library.
"""
from __future__ import annotations

import ctypes
import json
import os
from ctypes import POINTER, Structure, c_char, c_char_p, c_double, c_int, c_size_t, c_uint32, \
    c_uint64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _lib
from ._convert import _chain_ptr, _int, _options, _path, _read_text, _text, _utf8, parse_size
from ._lib import InputError
from ._lib import call as _call

if TYPE_CHECKING:
    from ._chain import Chain, Schedule

PathLike = str | os.PathLike[str]
JOIN_MAX_BRANCHES = 16
LANES = ("compute", "offload", "prefetch")  # remat_sim_event.lane 0, 1, 2
# Seconds per time unit of a chain, for bandwidths given as "SIZE/s" (as the CLI).
SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class _CurvePoint(Structure):
    _c_name = "remat_curve_point"
    _fields_ = [("memory", c_uint64), ("time", c_double)]


class _Curve(Structure):
    _c_name = "remat_curve"
    _fields_ = [("algorithm", c_char * _lib.ALGORITHM_MAX), ("n", c_size_t),
                ("points", POINTER(_CurvePoint))]


class _JoinProblem(Structure):
    _c_name = "remat_join_problem"
    _fields_ = [("k", c_size_t), ("lengths", c_uint32 * JOIN_MAX_BRANCHES),
                ("fwd_time", c_double), ("bwd_time", c_double), ("turn_time", c_double),
                ("slots", c_uint64)]


class _JoinCurvePoint(Structure):
    _c_name = "remat_join_curve_point"
    _fields_ = [("slots", c_uint64), ("makespan", c_double), ("equiv_chain", c_double)]


class _JoinCurve(Structure):
    _c_name = "remat_join_curve"
    _fields_ = [("n", c_size_t), ("points", POINTER(_JoinCurvePoint))]


def _declare() -> None:
    P = POINTER
    Err = P(_lib.Error)
    sigs = {
        "remat_curve_compute": (c_int, [P(_lib.ChainStruct), P(_lib.SolveOptions), c_size_t,
                                        P(P(_Curve)), Err]),
        "remat_curve_free": (None, [P(_Curve)]),
        "remat_sim_result_to_json": (c_int, [P(_lib.SimResult), P(ctypes.c_void_p), Err]),
        "remat_join_problem_from_json": (c_int, [c_char_p, c_size_t, c_char_p, P(_JoinProblem),
                                                 Err]),
        "remat_join_curve_compute": (c_int, [P(_JoinProblem), c_int, ctypes.c_void_p,
                                             P(P(_JoinCurve)), Err]),
        "remat_join_curve_free": (None, [P(_JoinCurve)]),
        "remat_join_min_slots": (c_uint64, [P(_JoinProblem)]),
        "remat_join_full_slots": (c_uint64, [P(_JoinProblem)]),
        "remat_join_span_star": (c_double, [P(_JoinProblem)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(_lib.lib, name)
        fn.restype = res
        fn.argtypes = args


_declare()
_lib.check_struct_sizes(_lib.lib, (_CurvePoint, _Curve, _JoinProblem, _JoinCurvePoint,
                                   _JoinCurve))


def bandwidth_per_unit(bandwidth: float | int | str, time_unit: str) -> float:
    """Bytes per time unit of the chain from a number (already per time unit)
    or a text "SIZE/s" such as "12GB/s", by the rules of `remat --bandwidth`."""
    if isinstance(bandwidth, str):
        text = bandwidth.strip()
        if text.endswith("/s") and len(text) > 2:
            per_unit = SECONDS_PER_UNIT.get(time_unit or "ms")
            if per_unit is None:
                raise InputError('bandwidth: the chain\'s time_unit "%s" is not s, ms, us or ns; '
                                 "give bytes per time unit instead" % time_unit)
            return float(parse_size(text[:-2]) * per_unit)
        try:
            value = float(text)
        except ValueError:
            raise InputError('bandwidth: "%s" is not a number >= 0 (bytes per time unit) or '
                             "SIZE/s" % bandwidth) from None
    elif isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)):
        raise TypeError("bandwidth: expected a number or a text like '12GB/s', got %s"
                        % type(bandwidth).__name__)
    else:
        value = float(bandwidth)
    if not (0 <= value <= 1e300):
        raise InputError("bandwidth: %r is not a finite number >= 0" % (bandwidth,))
    return value


@dataclass(frozen=True)
class Curve:
    """The time-memory trade-off of one algorithm: points (memory limit in
    bytes, best time) by increasing memory and non-increasing time; the first
    point is the smallest memory the algorithm meets."""

    algorithm: str
    points: list[tuple[int, float]]

    @property
    def min_memory(self) -> int:
        return self.points[0][0]


def curve(chain: Chain, algorithm: str = "optimal", points: int = 0,
          memory: int | str | None = None, slots: int | None = None,
          segments: int | None = None, bandwidth: float | str | None = None,
          threads: int = 0) -> Curve:
    """remat_curve_compute(): the best time for limits from the smallest
    feasible memory up to the store-all peak (or `memory`). `points` caps the
    number of points (0: every step for optimal, 50 otherwise)."""
    cp = _chain_ptr(chain)
    o = _options(memory, algorithm, slots, segments, threads)
    if bandwidth is not None:
        o.bandwidth = bandwidth_per_unit(bandwidth, chain.time_unit)
    points = _int(points, "points", 0, 1000000)
    ptr = POINTER(_Curve)()
    _call(_lib.lib.remat_curve_compute, cp, ctypes.byref(o), points, ctypes.byref(ptr))
    try:
        c = ptr.contents
        pts = [(int(c.points[k].memory), float(c.points[k].time)) for k in range(c.n)]
        return Curve(c.algorithm.decode(), pts)
    finally:
        _lib.lib.remat_curve_free(ptr)


@dataclass(frozen=True)
class Event:
    """One op of a timed simulation: its index in the schedule, its text, its
    lane ("compute", "offload" or "prefetch") and when it runs."""

    op: int
    text: str
    lane: str
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A schedule replayed by the timed simulator: `memory` holds (time,
    bytes in use from that time on) steps; `events` the ops on their lanes."""

    time: float
    peak_bytes: int
    memory_limit: int
    bandwidth: float
    compute_idle: float
    d2h_idle: float
    h2d_idle: float
    events: list[Event]
    memory: list[tuple[float, int]]

    @property
    def offloads(self) -> bool:
        """True when the schedule moves values to or from the host."""
        return any(e.lane != "compute" for e in self.events)


def timeline(chain: Chain, schedule: Schedule,
             bandwidth: float | str = 0.0) -> Timeline:
    """remat_simulate() with record_timeline: what runs when, on the compute
    lane and on both directions of the host link, and the memory in use over
    time. Raises InputError naming the op when the schedule is invalid."""
    opt = _lib.SimOptions()
    _lib.lib.remat_sim_options_init(ctypes.byref(opt))
    opt.bandwidth = bandwidth_per_unit(bandwidth, chain.time_unit)
    opt.record_timeline = 1
    ptr = POINTER(_lib.SimResult)()
    _call(_lib.lib.remat_simulate, chain._ptr, schedule._ptr, ctypes.byref(opt),
          ctypes.byref(ptr))
    try:
        r = ptr.contents
        if not r.valid:
            raise InputError("op %d (%s): %s" % (r.failed_op, r.failed_op_text.decode(),
                                                 r.reason.decode()))
        text = ctypes.c_void_p()
        _call(_lib.lib.remat_sim_result_to_json, ptr, ctypes.byref(text))
        doc = json.loads(_lib.take_string(text))
    finally:
        _lib.lib.remat_sim_result_free(ptr)
    ops = schedule.ops
    events = [Event(int(e["op"]), ops[int(e["op"])], LANES[int(e["lane"])], float(e["start"]),
                    float(e["end"])) for e in doc.get("events", [])]
    memory = [(float(t), int(b)) for t, b in doc.get("memory", [])]
    return Timeline(float(doc["time"]), int(doc["peak_bytes"]), schedule.memory_limit,
                    opt.bandwidth, float(doc.get("compute_idle", 0.0)),
                    float(doc.get("d2h_idle", 0.0)), float(doc.get("h2d_idle", 0.0)), events,
                    memory)


@dataclass(frozen=True)
class JoinCurve:
    """Makespan against memory for a join problem (papers/join-networks.md):
    points (slots, optimal makespan, EQUIV-CHAIN makespan or None where it
    does not fit or was not asked for), from c_min to full storage."""

    lengths: list[int]
    span_star: float
    min_slots: int
    full_slots: int
    points: list[tuple[int, float, float | None]]


def _join_problem(problem: PathLike | dict[str, Any]) -> tuple[_JoinProblem, str]:
    if isinstance(problem, dict):
        text, source = json.dumps(problem), "<python>"
    else:
        source = os.fsdecode(_path(problem))
        text = _read_text(problem)  # capped; RematIOError on file errors
    p = _JoinProblem()
    data = _utf8(text, source)
    _call(_lib.lib.remat_join_problem_from_json, data, len(data), _text(source, "source"),
          ctypes.byref(p))
    return p, source


def join_curve(problem: PathLike | dict[str, Any], compare: bool = False) -> JoinCurve:
    """remat_join_curve_compute() on a "remat-join-1" problem (a path or the
    parsed document); with compare, EQUIV-CHAIN's makespan too."""
    p, _ = _join_problem(problem)
    ptr = POINTER(_JoinCurve)()
    _call(_lib.lib.remat_join_curve_compute, ctypes.byref(p), int(bool(compare)), None,
          ctypes.byref(ptr))
    try:
        c = ptr.contents
        pts: list[tuple[int, float, float | None]] = []
        for k in range(c.n):
            q = c.points[k]
            eq = float(q.equiv_chain)
            pts.append((int(q.slots), float(q.makespan),
                        eq if compare and eq == eq and eq != float("inf") else None))
    finally:
        _lib.lib.remat_join_curve_free(ptr)
    return JoinCurve([int(p.lengths[j]) for j in range(p.k)],
                     float(_lib.lib.remat_join_span_star(ctypes.byref(p))),
                     int(_lib.lib.remat_join_min_slots(ctypes.byref(p))),
                     int(_lib.lib.remat_join_full_slots(ctypes.byref(p))), pts)

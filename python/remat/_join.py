"""Heterogeneous join networks ("remat-join-2", include/remat/hjoin.h).

Several chains (branches, towers) meeting at the loss (the turn): CLIP-like
two-tower models, siamese and triplet networks. The solver, the simulator and
the execution plans are libremat's; this module wraps the handles.

    net = remat.JoinProblem.load("examples/join/clip-like.json")
    sched = net.solve("200MiB")        # ops such as "Fck 1.3", "T", "B 2.5"
    res = net.simulate(sched)          # res.valid, res.time, res.peak_bytes
    plan = net.plan(sched)             # what each op reads, creates, frees
"""
from __future__ import annotations

import ctypes
import json
import os
import weakref
from collections.abc import Iterable, Mapping
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_size_t, c_uint8,
                    c_uint32, c_uint64, c_void_p)
from typing import Any, Tuple

from . import _lib
from ._chain import Chain, _stage_of
from ._convert import _int, _options, _path, _read_text, _real, _text, _write_text
from ._curves import Curve, _Curve
from ._lib import call as _call

MAX_BRANCHES = 4
OP_TEXT_MAX = 32
EXEC_MAX_REFS = 4
_TURN_FIELDS = ("fwd_time", "bwd_time", "out_bytes", "saved_bytes", "fwd_overhead",
                "bwd_overhead")


class _Branch(Structure):
    _c_name = "remat_hjoin_branch"
    _fields_ = [("name", c_char * _lib.NAME_MAX), ("input_bytes", c_uint64),
                ("input_grad_bytes", c_uint64), ("n", c_size_t),
                ("stages", POINTER(_lib.Stage))]


class _HJoin(Structure):
    _c_name = "remat_hjoin"
    _fields_ = [("name", c_char * _lib.NAME_MAX), ("time_unit", c_char * 32), ("k", c_size_t),
                ("branches", _Branch * MAX_BRANCHES), ("turn", _lib.Stage), ("ordered", c_int)]


class _Op(Structure):
    _c_name = "remat_hjoin_op"
    _fields_ = [("kind", c_uint8), ("branch", c_uint8), ("index", c_uint32),
                ("option", c_uint8)]


class _Schedule(Structure):
    _c_name = "remat_hjoin_schedule"
    _fields_ = [("algorithm", c_char * _lib.ALGORITHM_MAX), ("memory_limit", c_uint64),
                ("time", c_double), ("peak_bytes", c_uint64), ("n_ops", c_size_t),
                ("cap", c_size_t), ("ops", POINTER(_Op))]


class _SimResult(Structure):
    _c_name = "remat_hjoin_sim_result"
    _fields_ = [("valid", c_int), ("time", c_double), ("peak_bytes", c_uint64),
                ("n_ops", c_size_t), ("mem_during", POINTER(c_uint64)),
                ("mem_after", POINTER(c_uint64)), ("failed_op", c_size_t),
                ("failed_op_text", c_char * OP_TEXT_MAX), ("reason", c_char * 256)]


class _Ref(Structure):
    _c_name = "remat_hjoin_exec_ref"
    _fields_ = [("kind", c_uint8), ("branch", c_uint8), ("index", c_uint32)]


class _Step(Structure):
    _c_name = "remat_hjoin_exec_step"
    _fields_ = [("op", _Op), ("n_reads", c_size_t), ("reads", _Ref * EXEC_MAX_REFS),
                ("n_creates", c_size_t), ("creates", _Ref * EXEC_MAX_REFS),
                ("n_frees", c_size_t), ("frees", _Ref * EXEC_MAX_REFS),
                ("mem_during", c_uint64), ("mem_after", c_uint64), ("start", c_double),
                ("end", c_double), ("option", c_uint8),
                ("stops", c_uint8)]


class _Plan(Structure):
    _c_name = "remat_hjoin_exec_plan"
    _fields_ = [("n_steps", c_size_t), ("steps", POINTER(_Step)), ("turn", c_size_t),
                ("peak_bytes", c_uint64), ("time", c_double)]


def _declare() -> None:
    P = POINTER
    Err = P(_lib.Error)
    H = P(_HJoin)
    S = P(_Schedule)
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "remat_hjoin_from_json": (c_int, [c_char_p, c_size_t, c_char_p, P(H), Err]),
        "remat_hjoin_to_json": (c_int, [H, P(c_void_p), Err]),
        "remat_hjoin_free": (None, [H]),
        "remat_hjoin_branch_chain": (c_int, [H, c_size_t, P(P(_lib.ChainStruct)), Err]),
        "remat_hjoin_flatten": (c_int, [H, P(P(_lib.ChainStruct)), Err]),
        "remat_hjoin_op_format": (None, [_Op, c_char_p]),
        "remat_hjoin_op_parse": (c_int, [c_char_p, P(_Op), Err]),
        "remat_hjoin_schedule_create": (c_int, [c_char_p, P(S), Err]),
        "remat_hjoin_schedule_push": (c_int, [S, _Op, Err]),
        "remat_hjoin_schedule_free": (None, [S]),
        "remat_hjoin_schedule_to_json": (c_int, [S, P(c_void_p), Err]),
        "remat_hjoin_schedule_from_json": (c_int, [c_char_p, c_size_t, c_char_p, P(S), Err]),
        "remat_hjoin_simulate": (c_int, [H, S, P(P(_SimResult)), Err]),
        "remat_hjoin_sim_result_free": (None, [P(_SimResult)]),
        "remat_hjoin_store_all_cost": (c_int, [H, P(c_uint64), P(c_double), Err]),
        "remat_hjoin_solve": (c_int, [H, P(_lib.SolveOptions), P(S), Err]),
        "remat_hjoin_min_memory": (c_int, [H, P(_lib.SolveOptions), P(c_uint64), Err]),
        "remat_hjoin_curve": (c_int, [H, P(_lib.SolveOptions), c_size_t, P(P(_Curve)), Err]),
        "remat_hjoin_exec_plan_create": (c_int, [H, S, P(P(_Plan)), Err]),
        "remat_hjoin_exec_plan_free": (None, [P(_Plan)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(_lib.lib, name)
        fn.restype = res
        fn.argtypes = args


_declare()
_lib.check_struct_sizes(_lib.lib, (_Branch, _HJoin, _Op, _Schedule, _SimResult, _Ref, _Step,
                                   _Plan))


def _op_text(op: _Op) -> str:
    buf = ctypes.create_string_buffer(OP_TEXT_MAX)
    _lib.lib.remat_hjoin_op_format(op, buf)
    return buf.value.decode()


def _stage_dict(s: _lib.Stage, fields: Iterable[str]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": s.name.decode()}
    d.update({f: (float if "time" in f else int)(getattr(s, f)) for f in fields})
    return d


class JoinSchedule:
    """A join schedule ("remat-join-schedule-2"): .ops (texts such as
    "Fck 1.3", "T", "B 2.5"), .algorithm, .memory_limit, and .time and
    .peak_bytes as the solver predicted them."""

    def __init__(self, ptr: ctypes._Pointer[_Schedule]) -> None:
        self._ptr = ptr
        self._fin = weakref.finalize(self, _lib.lib.remat_hjoin_schedule_free, ptr)

    @classmethod
    def from_ops(cls, ops: Iterable[str], algorithm: str = "hand") -> JoinSchedule:
        ptr = ctypes.POINTER(_Schedule)()
        _call(_lib.lib.remat_hjoin_schedule_create, _text(algorithm, "algorithm"),
              ctypes.byref(ptr))
        self = cls(ptr)
        for k, text in enumerate(ops):
            op = _Op()
            _call(_lib.lib.remat_hjoin_op_parse, _text(text, "ops[%d]" % k), ctypes.byref(op))
            _call(_lib.lib.remat_hjoin_schedule_push, ptr, op)
        return self

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> JoinSchedule:
        if not isinstance(text, str):
            raise TypeError("schedule text: expected a str, got %s" % type(text).__name__)
        ptr = ctypes.POINTER(_Schedule)()
        data = text.encode("utf-8")
        _call(_lib.lib.remat_hjoin_schedule_from_json, data, len(data), _text(source, "source"),
              ctypes.byref(ptr))
        return cls(ptr)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> JoinSchedule:
        return cls.from_json(_read_text(path), os.fsdecode(_path(path)))

    def to_json(self) -> str:
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_hjoin_schedule_to_json, self._ptr, ctypes.byref(out))
        return _lib.take_string(out)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the schedule atomically: on failure the old file is kept."""
        _write_text(path, self.to_json())

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        return (JoinSchedule.from_json, (self.to_json(),))

    @property
    def ops(self) -> list[str]:
        s = self._ptr.contents
        return [_op_text(s.ops[k]) for k in range(s.n_ops)]

    @property
    def algorithm(self) -> str:
        return str(self._ptr.contents.algorithm.decode())

    @property
    def memory_limit(self) -> int:
        return int(self._ptr.contents.memory_limit)

    @property
    def time(self) -> float:
        return float(self._ptr.contents.time)

    @property
    def peak_bytes(self) -> int:
        return int(self._ptr.contents.peak_bytes)

    def __len__(self) -> int:
        return int(self._ptr.contents.n_ops)

    def __repr__(self) -> str:
        return "<remat.JoinSchedule %s: %d ops, time %g, peak %d bytes>" % (
            self.algorithm, len(self), self.time, self.peak_bytes)


class JoinSimResult:
    """What JoinProblem.simulate() found: valid, time, peak_bytes,
    mem_during, mem_after, and for invalid schedules failed_op,
    failed_op_text, reason."""

    def __init__(self, r: _SimResult) -> None:
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
            return "<JoinSimResult valid time=%g peak=%d>" % (self.time, self.peak_bytes)
        return "<JoinSimResult invalid at %s: %s>" % (self.failed_op_text, self.reason)


_REF_KIND = {0: "a", 1: "abar", 2: "d"}
Ref = Tuple[str, int, int]
"""A value of a join: ("a" | "abar" | "d", branch from 1, index)."""


class JoinStep:
    """One planned op: .op (text), .kind ("Fn", "Fck", "Fall", "B", "T"),
    .branch (from 1; 0 for T), .index (the stage; 0 for T), .option (the
    partial save: for Fall the one it makes, for B the one of the abar it
    consumes; 0 the full save), .stops (True for a stopped Fall: a full-save
    Fall j.i right before B j.i, which runs the stage only up to its last
    saved tensor; docs/join.md), .pos (its place in the plan),
    .reads/.creates/.frees as (kind, branch, index) triples,
    .mem_during/.mem_after and .start/.end (simulated times)."""

    __slots__ = ("op", "kind", "branch", "index", "option", "stops", "pos", "reads", "creates",
                 "frees", "mem_during", "mem_after", "start", "end")

    def __init__(self, st: _Step, pos: int) -> None:
        self.op = _op_text(st.op)
        self.kind = self.op.split()[0]
        self.branch = int(st.op.branch)
        self.index = int(st.op.index)
        self.option = int(st.option)
        self.stops = bool(st.stops)
        self.pos = pos
        self.reads = [_ref(r) for r in st.reads[:st.n_reads]]
        self.creates = [_ref(r) for r in st.creates[:st.n_creates]]
        self.frees = [_ref(r) for r in st.frees[:st.n_frees]]
        self.mem_during = int(st.mem_during)
        self.mem_after = int(st.mem_after)
        self.start = float(st.start)
        self.end = float(st.end)

    def __repr__(self) -> str:
        return "<JoinStep %s reads=%s creates=%s frees=%s>" % (self.op, self.reads,
                                                              self.creates, self.frees)


def _ref(r: _Ref) -> Ref:
    return (_REF_KIND[r.kind], int(r.branch), int(r.index))


class JoinPlan:
    """An execution plan of a join schedule (remat_hjoin_exec_plan_create),
    copied into Python: .steps, .turn (the index of T: the steps before it
    run in the training step's forward pass), .peak_bytes and .time."""

    def __init__(self, p: _Plan) -> None:
        self.steps = [JoinStep(p.steps[k], k) for k in range(p.n_steps)]
        self.turn = int(p.turn)
        self.peak_bytes = int(p.peak_bytes)
        self.time = float(p.time)


class JoinProblem:
    """A validated join network ("remat-join-2"), owned by libremat.

    `branches` are dicts like a chain document without its loss stage:
    {"name", "input_bytes", "input_grad_bytes" (default input_bytes),
    "stages": [stage dicts as for remat.Chain, the stop fields too]}; `turn`
    is the loss stage
    reading every branch's last output: {"fwd_time", "bwd_time",
    "saved_bytes", "fwd_overhead", "bwd_overhead"} (sizes optional, 0).
    `ordered`: the branches run one after another in their order (the
    forward of branch 1 first, its backward last), as a model whose results
    depend on the order runs them (include/remat/hjoin.h)."""

    def __init__(self, branches: Iterable[Mapping[str, Any]], turn: Mapping[str, Any],
                 name: str = "join", time_unit: str = "ms",
                 meta: Mapping[str, Any] | None = None, ordered: bool = False) -> None:
        _text(name, "name")
        _text(time_unit, "time_unit")
        if not isinstance(ordered, bool):
            raise TypeError("ordered: expected a bool, got %s" % type(ordered).__name__)
        doc: dict[str, Any] = {"format": "remat-join-2", "name": name, "time_unit": time_unit,
                               "branches": [dict(b) for b in branches], "turn": dict(turn),
                               "ordered": ordered}
        self._adopt(self._parse(json.dumps(doc), "<python>"), meta)

    @staticmethod
    def _parse(text: str, source: str) -> ctypes._Pointer[_HJoin]:
        if not isinstance(text, str):
            raise TypeError("join text: expected a str, got %s" % type(text).__name__)
        ptr = ctypes.POINTER(_HJoin)()
        data = text.encode("utf-8")
        _call(_lib.lib.remat_hjoin_from_json, data, len(data), _text(source, "source"),
              ctypes.byref(ptr))
        return ptr

    def _adopt(self, ptr: ctypes._Pointer[_HJoin], meta: Mapping[str, Any] | None) -> None:
        self._ptr = ptr
        self.meta = dict(meta or {})
        self._fin = weakref.finalize(self, _lib.lib.remat_hjoin_free, ptr)

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> JoinProblem:
        self = cls.__new__(cls)
        ptr = cls._parse(text, source)
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {}
        known = {"format", "name", "time_unit", "branches", "turn", "ordered"}
        self._adopt(ptr, {k: v for k, v in doc.items() if k not in known}
                    if isinstance(doc, dict) else {})
        return self

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> JoinProblem:
        return cls.from_json(_read_text(path), os.fsdecode(_path(path)))

    def to_json(self) -> str:
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_hjoin_to_json, self._ptr, ctypes.byref(out))
        doc = json.loads(_lib.take_string(out))
        doc.update(self.meta)
        return json.dumps(doc, indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the problem atomically: on failure the old file is kept."""
        _write_text(path, self.to_json() + "\n")

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        return (JoinProblem.from_json, (self.to_json(),))

    # -- the network ---------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self._ptr.contents.name.decode())

    @property
    def time_unit(self) -> str:
        return str(self._ptr.contents.time_unit.decode())

    @property
    def k(self) -> int:
        return int(self._ptr.contents.k)

    @property
    def ordered(self) -> bool:
        """Whether the branches run in order (see the class docstring)."""
        return bool(self._ptr.contents.ordered)

    @property
    def branches(self) -> list[dict[str, Any]]:
        j = self._ptr.contents
        out: list[dict[str, Any]] = []
        for b in range(j.k):
            br = j.branches[b]
            out.append({"name": br.name.decode(), "input_bytes": int(br.input_bytes),
                        "input_grad_bytes": int(br.input_grad_bytes),
                        "stages": [_stage_of(br.stages[i]) for i in range(br.n)]})
        return out

    @property
    def turn(self) -> dict[str, Any]:
        return _stage_dict(self._ptr.contents.turn, _TURN_FIELDS)

    def __repr__(self) -> str:
        shape = ", ".join(str(len(b["stages"])) for b in self.branches)
        return "<remat.JoinProblem %r: %d branches (%s stages)>" % (self.name, self.k, shape)

    def _chain(self, fn: Any, *args: Any) -> Any:
        ptr = ctypes.POINTER(_lib.ChainStruct)()
        _call(fn, self._ptr, *args, ctypes.byref(ptr))
        c = Chain.__new__(Chain)
        c._adopt(ptr, None)
        return c

    def flatten(self) -> Any:
        """The same network as one remat.Chain: the branches one after another,
        each value carrying what the other branches hold (remat_hjoin_flatten),
        the turn as the loss. What a chain solver can see of the join."""
        return self._chain(_lib.lib.remat_hjoin_flatten)

    def branch_chain(self, b: int) -> Any:
        """Branch b (from 1) as a remat.Chain ending in an empty stage."""
        return self._chain(_lib.lib.remat_hjoin_branch_chain, _int(b, "branch", 0, 1 << 30))

    # -- solving -------------------------------------------------------------

    @staticmethod
    def _options(memory: Any, slots: int | None, threads: int,
                 max_seconds: float | None) -> _lib.SolveOptions:
        o = _options(memory, "optimal", slots, None, threads)
        if max_seconds is not None:
            secs = _real(max_seconds, "max_seconds")
            o.max_seconds = secs if secs > 0 else -1.0
        return o

    def solve(self, memory: int | str, slots: int | None = None, threads: int = 0,
              max_seconds: float | None = None) -> JoinSchedule:
        """The fastest nested persistent schedule within `memory` (bytes or
        "4GiB"); `slots` as optimal (default 500, 0: exact bytes). Raises
        InfeasibleError (.min_memory) below the smallest limit and
        TooLargeError past the work or time limits (max_seconds: 0 for none)."""
        o = self._options(memory, slots, threads, max_seconds)
        ptr = ctypes.POINTER(_Schedule)()
        _call(_lib.lib.remat_hjoin_solve, self._ptr, ctypes.byref(o), ctypes.byref(ptr))
        return JoinSchedule(ptr)

    def min_memory(self, slots: int | None = None) -> int:
        """The smallest limit in bytes at which solve() succeeds."""
        o = self._options(0, slots, 0, None)
        out = ctypes.c_uint64()
        _call(_lib.lib.remat_hjoin_min_memory, self._ptr, ctypes.byref(o), ctypes.byref(out))
        return int(out.value)

    def store_all_cost(self) -> tuple[int, float]:
        """(peak_bytes, time) of plain autograd: branch after branch, then the
        turn, then the backward of the last branch first."""
        peak, t = ctypes.c_uint64(), ctypes.c_double()
        _call(_lib.lib.remat_hjoin_store_all_cost, self._ptr, ctypes.byref(peak),
              ctypes.byref(t))
        return int(peak.value), float(t.value)

    def curve(self, points: int = 0, memory: int | str | None = None,
              slots: int | None = None, threads: int = 0,
              max_seconds: float | None = None) -> Curve:
        """Time against memory from the smallest limit to the store-all peak
        (or `memory`), from one table; `points` caps the points (0: all)."""
        o = self._options(memory, slots, threads, max_seconds)
        ptr = ctypes.POINTER(_Curve)()
        _call(_lib.lib.remat_hjoin_curve, self._ptr, ctypes.byref(o),
              _int(points, "points", 0, 1000000), ctypes.byref(ptr))
        try:
            c = ptr.contents
            pts = [(int(c.points[k].memory), float(c.points[k].time)) for k in range(c.n)]
            return Curve(c.algorithm.decode(), pts)
        finally:
            _lib.lib.remat_curve_free(ptr)

    def simulate(self, schedule: JoinSchedule) -> JoinSimResult:
        """Replays `schedule` on the network (include/remat/hjoin.h)."""
        ptr = ctypes.POINTER(_SimResult)()
        _call(_lib.lib.remat_hjoin_simulate, self._ptr, _schedule_ptr(schedule),
              ctypes.byref(ptr))
        try:
            return JoinSimResult(ptr.contents)
        finally:
            _lib.lib.remat_hjoin_sim_result_free(ptr)

    def plan(self, schedule: JoinSchedule) -> JoinPlan:
        """What each op of `schedule` reads, creates and frees, branch by
        branch (remat_hjoin_exec_plan_create); raises InputError naming the
        op when the schedule is not valid."""
        ptr = ctypes.POINTER(_Plan)()
        _call(_lib.lib.remat_hjoin_exec_plan_create, self._ptr, _schedule_ptr(schedule),
              ctypes.byref(ptr))
        try:
            return JoinPlan(ptr.contents)
        finally:
            _lib.lib.remat_hjoin_exec_plan_free(ptr)


def _schedule_ptr(schedule: object) -> ctypes._Pointer[_Schedule]:
    if not isinstance(schedule, JoinSchedule):
        raise TypeError("schedule: expected a remat.JoinSchedule, got %s"
                        % type(schedule).__name__)
    return schedule._ptr


def join_problem(problem: str | os.PathLike[str] | Mapping[str, Any] | JoinProblem) -> JoinProblem:
    """A JoinProblem from itself, a path or a parsed "remat-join-2" document."""
    if isinstance(problem, JoinProblem):
        return problem
    if isinstance(problem, Mapping):
        return JoinProblem.from_json(json.dumps(dict(problem)), "<python>")
    return JoinProblem.load(problem)


__all__ = ["JoinProblem", "JoinSchedule", "JoinSimResult", "JoinPlan", "JoinStep",
           "join_problem"]

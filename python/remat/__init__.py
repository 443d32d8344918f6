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
import json
import math
import os
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Tuple

from . import _lib
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

_STAGE_FIELDS = ("fwd_time", "bwd_time", "out_bytes", "saved_bytes", "grad_bytes",
                 "fwd_overhead", "bwd_overhead")
_OPTION_FIELDS = ("saved_bytes", "fall_overhead", "bwd_time", "bwd_overhead")


Size = int | float | str
"""Bytes as an int, or a text such as "4GiB" (libremat's rules)."""
StrPath = str | os.PathLike[str]


# Checks on what goes to C. A value of the wrong type is a TypeError; a value
# the C field cannot hold exactly (out of its range, a NUL that would cut a C
# string short) is an InputError, never a silent wrap or truncation.

def _utf8(value: str, what: str) -> bytes:
    """UTF-8 bytes of a str; a lone surrogate ('\\ud800'), which has none, is
    an InputError like any other value C cannot take."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError("%s: not valid Unicode (a lone surrogate at index %d)"
                         % (what, e.start)) from None


def _text(value: object, what: str) -> bytes:
    """A str as NUL-free UTF-8 bytes for a C string."""
    if not isinstance(value, str):
        raise TypeError("%s: expected a str, got %s" % (what, type(value).__name__))
    if "\0" in value:
        raise InputError("%s: contains a NUL character" % what)
    return _utf8(value, what)


def _path(value: object, what: str = "path") -> bytes:
    """A file path (str, bytes or os.PathLike) as bytes for C."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError("%s: expected a str, bytes or os.PathLike, got %s"
                        % (what, type(value).__name__))
    try:
        data = os.fsencode(value)
    except UnicodeEncodeError as e:
        raise InputError("%s: cannot be encoded for the file system (index %d)"
                         % (what, e.start)) from None
    if b"\0" in data:
        raise InputError("%s: contains a NUL character" % what)
    return data


def _int(value: object, what: str, lo: int, hi: int) -> int:
    """An int in [lo, hi] (the C field's range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s: expected an int, got %s" % (what, type(value).__name__))
    if not lo <= value <= hi:
        raise InputError("%s: %d is out of range (%d .. %d)" % (what, value, lo, hi))
    return value


def _real(value: object, what: str) -> float:
    """An int or float for a C double (its value is C's to judge)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s: expected a number, got %s" % (what, type(value).__name__))
    try:
        return float(value)
    except OverflowError:
        raise InputError("%s: %d is too large for a double" % (what, value)) from None


def _stage_types(stages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stage dicts, each field the binding knows of the right Python type
    (TypeError otherwise); the values are the C reader's to judge, except
    numbers JSON cannot write (nan, inf)."""
    out: list[dict[str, Any]] = []
    for i, stage in enumerate(stages):
        if not isinstance(stage, Mapping):
            raise TypeError("stages[%d]: expected a mapping, got %s" % (i, type(stage).__name__))
        d = dict(stage)
        for f in _STAGE_FIELDS:
            if f not in d:
                continue
            what, v = "stages[%d].%s" % (i, f), d[f]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError("%s: expected a number, got %s" % (what, type(v).__name__))
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError("%s: not a finite number" % what)
        if "name" in d:
            _text(d["name"], "stages[%d].name" % i)
        out.append(d)
    return out


_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT32 = (0, (1 << 32) - 1)


def _read_text(path: StrPath) -> str:
    """A whole file through libremat's capped reader, decoded as UTF-8."""
    data = _path(path)
    out, n = ctypes.c_void_p(), ctypes.c_size_t()
    _call(_lib.lib.remat_read_file, data, ctypes.byref(out), ctypes.byref(n))
    try:
        raw = ctypes.string_at(out, n.value)
    finally:
        _lib.lib.remat_free(out)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError("%s: not UTF-8 text (byte %d)" % (os.fsdecode(data), e.start)) from None


def _write_bytes(path: StrPath, raw: bytes) -> None:
    """Writes raw atomically through libremat (the old file survives a failure)."""
    _call(_lib.lib.remat_write_file, _path(path), raw, len(raw))


def _write_text(path: StrPath, text: str) -> None:
    _write_bytes(path, text.encode("utf-8"))


def parse_size(size: Size) -> int:
    """Bytes from an int or a text such as "4GiB", "300MB" (libremat rules)."""
    if isinstance(size, bool):
        raise TypeError("size: expected an int or a text like '4GiB', got a bool")
    if isinstance(size, int):
        if size < 0 or size >= 1 << 53:
            raise InputError("size: %d is out of range (0 .. 2^53-1)" % size)
        return size
    if isinstance(size, float) and size.is_integer():
        return parse_size(int(size))
    if isinstance(size, float):
        raise InputError("size: %r is not a whole number of bytes" % size)
    if not isinstance(size, str):
        raise TypeError("size: expected an int or a text like '4GiB', got %s"
                        % type(size).__name__)
    out = ctypes.c_uint64()
    _call(_lib.lib.remat_parse_size, _text(size, "size"), ctypes.byref(out))
    return int(out.value)


class Chain:
    """A validated chain (SPEC section 1), owned by libremat.

    Build one from stage dicts (the last stage is the loss), from JSON, or from
    a file. A stage dict has the fields of a stage in docs/formats.md,
    optionally "fall_overhead" and "options" (a list of partial saves, each a
    dict with "saved_bytes", "bwd_time", and optionally "fall_overhead",
    "bwd_overhead", "name"); .stages gives them back where a stage has them.
    `meta` holds extra top-level JSON fields (e.g. "profile"); the C library
    ignores them, save() writes them back.
    """

    def __init__(self, stages: Iterable[Mapping[str, Any]], input_bytes: int,
                 input_grad_bytes: int | None = None, name: str = "chain",
                 time_unit: str = "ms", meta: Mapping[str, Any] | None = None) -> None:
        # The document goes through the C reader, which judges every value and
        # names the field; here only the Python types are checked.
        _text(name, "name")
        _text(time_unit, "time_unit")
        doc: dict[str, Any] = {"format": "remat-chain-1", "name": name, "time_unit": time_unit,
                               "input_bytes": _int(input_bytes, "input_bytes", 0, (1 << 64) - 1),
                               "stages": _stage_types(stages)}
        if input_grad_bytes is not None:
            doc["input_grad_bytes"] = _int(input_grad_bytes, "input_grad_bytes", 0,
                                           (1 << 64) - 1)
        self._adopt(self._parse(json.dumps(doc), "<python>"), meta)

    @staticmethod
    def _parse(text: str, source: str) -> ctypes._Pointer[_lib.ChainStruct]:
        ptr = ctypes.POINTER(_lib.ChainStruct)()
        if not isinstance(text, str):
            raise TypeError("chain text: expected a str, got %s" % type(text).__name__)
        data = _utf8(text, source)  # a NUL here is JSON's problem: the parser reports it
        _call(_lib.lib.remat_chain_from_json, data, len(data), _text(source, "source"),
              ctypes.byref(ptr))
        return ptr

    def _adopt(self, ptr: ctypes._Pointer[_lib.ChainStruct],
               meta: Mapping[str, Any] | None) -> None:
        self._ptr = ptr
        self.meta = dict(meta or {})
        self._fin = weakref.finalize(self, _lib.lib.remat_chain_free, ptr)

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> Chain:
        self = cls.__new__(cls)
        ptr = cls._parse(text, source)
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {}
        known = {"format", "name", "time_unit", "input_bytes", "input_grad_bytes", "stages"}
        self._adopt(ptr, {k: v for k, v in doc.items() if k not in known})
        return self

    @classmethod
    def load(cls, path: StrPath) -> Chain:
        return cls.from_json(_read_text(path), os.fsdecode(_path(path)))

    def to_json(self) -> str:
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_chain_to_json, self._ptr, ctypes.byref(out))
        doc = json.loads(_lib.take_string(out))
        doc.update(self.meta)
        return json.dumps(doc, indent=2)

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        """Pickles (and deep-copies) as its JSON document."""
        return (Chain.from_json, (self.to_json(),))

    def save(self, path: StrPath) -> None:
        """Writes the chain atomically: on failure the old file is kept."""
        _write_text(path, self.to_json() + "\n")

    @property
    def n(self) -> int:
        return int(self._ptr.contents.n)

    @property
    def name(self) -> str:
        return str(self._ptr.contents.name.decode())

    @property
    def time_unit(self) -> str:
        return str(self._ptr.contents.time_unit.decode())

    @property
    def input_bytes(self) -> int:
        return int(self._ptr.contents.input_bytes)

    @property
    def input_grad_bytes(self) -> int:
        return int(self._ptr.contents.input_grad_bytes)

    @property
    def stages(self) -> list[dict[str, Any]]:
        c = self._ptr.contents
        out: list[dict[str, Any]] = []
        for i in range(c.n):
            s = c.stages[i]
            d: dict[str, Any] = {"name": s.name.decode()}
            d.update({f: (float if "time" in f else int)(getattr(s, f)) for f in _STAGE_FIELDS})
            if s.has_fall_overhead:
                d["fall_overhead"] = int(s.fall_overhead)
            if s.n_options:
                d["options"] = [_option_dict(s.options[k]) for k in range(s.n_options)]
            out.append(d)
        return out

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return "<remat.Chain %r: %d stages>" % (self.name, self.n)


def _option_dict(o: _lib.StageOption) -> dict[str, Any]:
    d: dict[str, Any] = {"name": o.name.decode()}
    d.update({f: (float if "time" in f else int)(getattr(o, f)) for f in _OPTION_FIELDS})
    return d


class Schedule:
    """A schedule (SPEC section 2): .ops (texts), .algorithm, .memory_limit,
    .time and .peak_bytes as the solver predicted them."""

    def __init__(self, ptr: ctypes._Pointer[_lib.ScheduleStruct]) -> None:
        self._ptr = ptr
        self._fin = weakref.finalize(self, _lib.lib.remat_schedule_free, ptr)

    @classmethod
    def from_ops(cls, ops: Iterable[str], algorithm: str = "hand") -> Schedule:
        """A schedule from op texts such as ["Fall 1", "Fall 2/1", "B 2", ...]."""
        ptr = ctypes.POINTER(_lib.ScheduleStruct)()
        _call(_lib.lib.remat_schedule_create, _text(algorithm, "algorithm"), ctypes.byref(ptr))
        self = cls(ptr)
        for k, text in enumerate(ops):
            op = _lib.Op()
            _call(_lib.lib.remat_op_parse, _text(text, "ops[%d]" % k), ctypes.byref(op))
            _call(_lib.lib.remat_schedule_push, ptr, op)
        return self

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> Schedule:
        ptr = ctypes.POINTER(_lib.ScheduleStruct)()
        if not isinstance(text, str):
            raise TypeError("schedule text: expected a str, got %s" % type(text).__name__)
        data = _utf8(text, source)
        _call(_lib.lib.remat_schedule_from_json, data, len(data), _text(source, "source"),
              ctypes.byref(ptr))
        return cls(ptr)

    @classmethod
    def load(cls, path: StrPath) -> Schedule:
        return cls.from_json(_read_text(path), os.fsdecode(_path(path)))

    def to_json(self) -> str:
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_schedule_to_json, self._ptr, ctypes.byref(out))
        return _lib.take_string(out)

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        """Pickles (and deep-copies) as its JSON document."""
        return (Schedule.from_json, (self.to_json(),))

    def save(self, path: StrPath) -> None:
        """Writes the schedule atomically: on failure the old file is kept."""
        _write_text(path, self.to_json())

    @property
    def ops(self) -> list[str]:
        s = self._ptr.contents
        return [_lib.op_text(s.ops[k]) for k in range(s.n_ops)]

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
        return "<remat.Schedule %s: %d ops, time %g, peak %d bytes>" % (
            self.algorithm, len(self), self.time, self.peak_bytes)


def _chain_ptr(chain: object) -> ctypes._Pointer[_lib.ChainStruct]:
    if not isinstance(chain, Chain):
        raise TypeError("chain: expected a remat.Chain, got %s" % type(chain).__name__)
    return chain._ptr


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


def _options(memory: Size | None, algorithm: str, slots: int | None, segments: int | None,
             threads: int) -> _lib.SolveOptions:
    o = _lib.SolveOptions()
    _lib.lib.remat_solve_options_init(ctypes.byref(o))
    alg = ctypes.c_int()
    _call(_lib.lib.remat_algorithm_parse, _text(algorithm, "algorithm"), ctypes.byref(alg))
    o.algorithm = alg.value
    o.memory = parse_size(memory) if memory is not None else 0
    if slots is not None:
        o.slots = _int(slots, "slots", *_INT64)
    if segments is not None:
        o.segments = _int(segments, "segments", *_UINT32)
    o.threads = _int(threads, "threads", *_UINT32)
    return o


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
    Pre, the step before which the prefetch starts (include/remat/exec.h)."""

    __slots__ = ("op", "kind", "index", "option", "pos", "reads", "creates", "frees",
                 "mem_during", "mem_after", "start", "end", "copy_at")

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

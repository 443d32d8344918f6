"""remat.Chain and remat.Schedule: a chain (SPEC section 1) and a schedule
(section 2) owned by libremat, built from Python values, JSON or files."""
from __future__ import annotations

import ctypes
import json
import math
import os
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Tuple

from . import _lib
from ._convert import StrPath, _int, _path, _read_text, _text, _utf8, _write_text
from ._lib import InputError
from ._lib import call as _call

_STAGE_FIELDS = ("fwd_time", "bwd_time", "out_bytes", "saved_bytes", "grad_bytes",
                 "fwd_overhead", "bwd_overhead")

# The stopped Fall's optional fields (docs/formats.md), given back where set.
_STOP_FIELDS = ("stop_time", "stop_saved_bytes", "stop_overhead")


_OPTION_FIELDS = ("saved_bytes", "fall_overhead", "bwd_time", "bwd_overhead")


def _stage_types(stages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stage dicts, each field the binding knows of the right Python type
    (TypeError otherwise); the values are the C reader's to judge, except
    numbers JSON cannot write (nan, inf)."""
    out: list[dict[str, Any]] = []
    for i, stage in enumerate(stages):
        if not isinstance(stage, Mapping):
            raise TypeError("stages[%d]: expected a mapping, got %s" % (i, type(stage).__name__))
        d = dict(stage)
        for f in _STAGE_FIELDS + _STOP_FIELDS:
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


class Chain:
    """A validated chain (SPEC section 1), owned by libremat.

    Build one from stage dicts (the last stage is the loss), from JSON, or from
    a file. A stage dict has the fields of a stage in docs/formats.md,
    optionally "fall_overhead", "options" (a list of partial saves, each a
    dict with "saved_bytes", "bwd_time", and optionally "fall_overhead",
    "bwd_overhead", "name") and the stopped Fall's "stop_time",
    "stop_saved_bytes", "stop_overhead"; .stages gives them back where a
    stage has them.
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
            out.append(_stage_of(c.stages[i]))
        return out

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return "<remat.Chain %r: %d stages>" % (self.name, self.n)


def _stage_of(s: _lib.Stage) -> dict[str, Any]:
    """A stage as Chain.stages gives it (also a join branch's): fall_overhead
    and the partial saves ("options") where the stage has them."""
    d: dict[str, Any] = {"name": s.name.decode()}
    d.update({f: (float if "time" in f else int)(getattr(s, f)) for f in _STAGE_FIELDS})
    if s.has_fall_overhead:
        d["fall_overhead"] = int(s.fall_overhead)
    if s.n_options:
        d["options"] = [_option_dict(s.options[k]) for k in range(s.n_options)]
    for f in _STOP_FIELDS:
        if getattr(s, "has_" + f):
            d[f] = (float if "time" in f else int)(getattr(s, f))
    return d


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

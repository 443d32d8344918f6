"""remat: checkpointing schedules for training under a memory limit.

Python face of libremat: chains (SPEC section 1), schedules, the solvers, the
simulator and execution plans. All the algorithms live in the C library; this
package only wraps handles. The PyTorch front-end is remat.torch.

    chain = remat.Chain.load("c.json")
    sched = remat.solve(chain, "4GiB", algorithm="optimal")
    res = remat.simulate(chain, sched)     # res.valid, res.time, res.peak_bytes
"""
import ctypes
import json
import weakref

from . import _lib
from ._lib import (InfeasibleError, InputError, InternalError, NoMemoryError, RematError,
                   RematIOError, TooLargeError)

__version__ = _lib.VERSION_STRING
__all__ = ["Chain", "Schedule", "SimResult", "Plan", "solve", "simulate", "plan", "parse_size",
           "min_memory", "store_all_cost", "RematError", "InputError", "InfeasibleError",
           "NoMemoryError", "TooLargeError", "RematIOError", "InternalError", "__version__"]

_STAGE_FIELDS = ("fwd_time", "bwd_time", "out_bytes", "saved_bytes", "grad_bytes",
                 "fwd_overhead", "bwd_overhead")


def _call(fn, *args):
    err = _lib.Error()
    _lib.check(fn(*args, ctypes.byref(err)), err)


def parse_size(size):
    """Bytes from an int or a text such as "4GiB", "300MB" (libremat rules)."""
    if isinstance(size, bool):
        raise InputError("size: expected an int or a text like '4GiB', got a bool")
    if isinstance(size, int):
        if size < 0 or size >= 1 << 53:
            raise InputError("size: %d is out of range (0 .. 2^53-1)" % size)
        return size
    if isinstance(size, float) and size.is_integer():
        return parse_size(int(size))
    if not isinstance(size, str):
        raise InputError("size: expected an int or a text like '4GiB', got %r" % (size,))
    out = ctypes.c_uint64()
    _call(_lib.lib.remat_parse_size, size.encode(), ctypes.byref(out))
    return int(out.value)


class Chain:
    """A validated chain (SPEC section 1), owned by libremat.

    Build one from stage dicts (the last stage is the loss), from JSON, or from
    a file. `meta` holds extra top-level JSON fields (e.g. "profile"); the C
    library ignores them, save() writes them back.
    """

    def __init__(self, stages, input_bytes, input_grad_bytes=None, name="chain",
                 time_unit="ms", meta=None):
        doc = {"format": "remat-chain-1", "name": name, "time_unit": time_unit,
               "input_bytes": int(input_bytes), "stages": [dict(s) for s in stages]}
        if input_grad_bytes is not None:
            doc["input_grad_bytes"] = int(input_grad_bytes)
        self._adopt(self._parse(json.dumps(doc), "<python>"), meta)

    @staticmethod
    def _parse(text, source):
        ptr = ctypes.POINTER(_lib.ChainStruct)()
        data = text.encode()
        _call(_lib.lib.remat_chain_from_json, data, len(data), source.encode(), ctypes.byref(ptr))
        return ptr

    def _adopt(self, ptr, meta):
        self._ptr = ptr
        self.meta = dict(meta or {})
        self._fin = weakref.finalize(self, _lib.lib.remat_chain_free, ptr)

    @classmethod
    def from_json(cls, text, source="<string>"):
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
    def load(cls, path):
        try:
            with open(path, "r", encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise RematIOError("%s: cannot read: %s" % (path, e.strerror)) from e
        return cls.from_json(text, str(path))

    def to_json(self):
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_chain_to_json, self._ptr, ctypes.byref(out))
        doc = json.loads(_lib.take_string(out))
        doc.update(self.meta)
        return json.dumps(doc, indent=2)

    def save(self, path):
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.to_json() + "\n")
        except OSError as e:
            raise RematIOError("%s: cannot write: %s" % (path, e.strerror)) from e

    @property
    def n(self):
        return int(self._ptr.contents.n)

    @property
    def name(self):
        return self._ptr.contents.name.decode()

    @property
    def time_unit(self):
        return self._ptr.contents.time_unit.decode()

    @property
    def input_bytes(self):
        return int(self._ptr.contents.input_bytes)

    @property
    def input_grad_bytes(self):
        return int(self._ptr.contents.input_grad_bytes)

    @property
    def stages(self):
        c = self._ptr.contents
        out = []
        for i in range(c.n):
            s = c.stages[i]
            d = {"name": s.name.decode()}
            d.update({f: (float if "time" in f else int)(getattr(s, f)) for f in _STAGE_FIELDS})
            out.append(d)
        return out

    def __len__(self):
        return self.n

    def __repr__(self):
        return "<remat.Chain %r: %d stages>" % (self.name, self.n)


class Schedule:
    """A schedule (SPEC section 2): .ops (texts), .algorithm, .memory_limit,
    .time and .peak_bytes as the solver predicted them."""

    def __init__(self, ptr):
        self._ptr = ptr
        self._fin = weakref.finalize(self, _lib.lib.remat_schedule_free, ptr)

    @classmethod
    def from_ops(cls, ops, algorithm="hand"):
        """A schedule from op texts such as ["Fall 1", "B 2", ...]."""
        ptr = ctypes.POINTER(_lib.ScheduleStruct)()
        _call(_lib.lib.remat_schedule_create, algorithm.encode(), ctypes.byref(ptr))
        self = cls(ptr)
        for text in ops:
            op = _lib.Op()
            _call(_lib.lib.remat_op_parse, text.encode(), ctypes.byref(op))
            _call(_lib.lib.remat_schedule_push, ptr, op)
        return self

    @classmethod
    def from_json(cls, text, source="<string>"):
        ptr = ctypes.POINTER(_lib.ScheduleStruct)()
        data = text.encode()
        _call(_lib.lib.remat_schedule_from_json, data, len(data), source.encode(),
              ctypes.byref(ptr))
        return cls(ptr)

    @classmethod
    def load(cls, path):
        with open(path, "r", encoding="utf-8") as f:
            return cls.from_json(f.read(), str(path))

    def to_json(self):
        out = ctypes.c_void_p()
        _call(_lib.lib.remat_schedule_to_json, self._ptr, ctypes.byref(out))
        return _lib.take_string(out)

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @property
    def ops(self):
        s = self._ptr.contents
        return [_lib.op_text(s.ops[k]) for k in range(s.n_ops)]

    @property
    def algorithm(self):
        return self._ptr.contents.algorithm.decode()

    @property
    def memory_limit(self):
        return int(self._ptr.contents.memory_limit)

    @property
    def time(self):
        return float(self._ptr.contents.time)

    @property
    def peak_bytes(self):
        return int(self._ptr.contents.peak_bytes)

    def __len__(self):
        return int(self._ptr.contents.n_ops)

    def __repr__(self):
        return "<remat.Schedule %s: %d ops, time %g, peak %d bytes>" % (
            self.algorithm, len(self), self.time, self.peak_bytes)


def _options(chain, memory, algorithm, slots, segments, threads):
    o = _lib.SolveOptions()
    _lib.lib.remat_solve_options_init(ctypes.byref(o))
    alg = ctypes.c_int()
    _call(_lib.lib.remat_algorithm_parse, algorithm.encode(), ctypes.byref(alg))
    o.algorithm = alg.value
    o.memory = parse_size(memory) if memory is not None else 0
    if slots is not None:
        o.slots = int(slots)
    if segments is not None:
        o.segments = int(segments)
    o.threads = int(threads)
    return o


def solve(chain, memory, algorithm="optimal", slots=None, segments=None, threads=0):
    """Solves `chain` under `memory` (bytes or "4GiB"). Raises InfeasibleError
    (with .min_memory) when nothing fits."""
    o = _options(chain, memory, algorithm, slots, segments, threads)
    ptr = ctypes.POINTER(_lib.ScheduleStruct)()
    err = _lib.Error()
    st = _lib.lib.remat_solve(chain._ptr, ctypes.byref(o), ctypes.byref(ptr), ctypes.byref(err))
    if st == 2 and not err.min_memory:  # e.g. a limit below the input: ask the library
        try:
            err.min_memory = min_memory(chain, algorithm, slots)
        except RematError:
            err.min_memory = _min_from_solver(chain, o)
    if st == 2 and err.min_memory:
        msg = err.message.decode("utf-8", "replace")
        raise InfeasibleError("%s; %s needs at least %d bytes (%s) for chain %r"
                              % (msg, algorithm, err.min_memory, _human(err.min_memory),
                                 chain.name), int(err.min_memory))
    _lib.check(st, err)
    return Schedule(ptr)


def _min_from_solver(chain, o):
    """The minimum the solver itself reports at the smallest sensible limit."""
    o2 = _lib.SolveOptions.from_buffer_copy(o)
    o2.memory = chain.input_bytes
    ptr = ctypes.POINTER(_lib.ScheduleStruct)()
    err = _lib.Error()
    st = _lib.lib.remat_solve(chain._ptr, ctypes.byref(o2), ctypes.byref(ptr), ctypes.byref(err))
    if st == 0:
        _lib.lib.remat_schedule_free(ptr)
        return chain.input_bytes
    return int(err.min_memory) if st == 2 else 0


def min_memory(chain, algorithm="optimal", slots=None):
    """Smallest memory limit in bytes for which `algorithm` finds a schedule."""
    o = _options(chain, 0, algorithm, slots, None, 0)
    out = ctypes.c_uint64()
    _call(_lib.lib.remat_min_memory, chain._ptr, ctypes.byref(o), ctypes.byref(out))
    return int(out.value)


def store_all_cost(chain):
    """(peak_bytes, time) of plain autograd on `chain`."""
    peak, t = ctypes.c_uint64(), ctypes.c_double()
    _call(_lib.lib.remat_store_all_cost, chain._ptr, ctypes.byref(peak), ctypes.byref(t))
    return int(peak.value), float(t.value)


class SimResult:
    """What remat.simulate() found: valid, time, peak_bytes, mem_during,
    mem_after, and for invalid schedules failed_op, failed_op_text, reason."""

    def __init__(self, r):
        self.valid = bool(r.valid)
        self.time = float(r.time)
        self.peak_bytes = int(r.peak_bytes)
        n = int(r.n_ops)
        self.mem_during = [int(r.mem_during[k]) for k in range(n)] if r.mem_during else []
        self.mem_after = [int(r.mem_after[k]) for k in range(n)] if r.mem_after else []
        self.failed_op = int(r.failed_op) if not self.valid else None
        self.failed_op_text = r.failed_op_text.decode() if not self.valid else None
        self.reason = r.reason.decode() if not self.valid else None

    def __repr__(self):
        if self.valid:
            return "<SimResult valid time=%g peak=%d>" % (self.time, self.peak_bytes)
        return "<SimResult invalid at %s: %s>" % (self.failed_op_text, self.reason)


def simulate(chain, schedule, bandwidth=0.0):
    """Replays `schedule` on `chain` (SPEC section 2)."""
    opt = _lib.SimOptions()
    _lib.lib.remat_sim_options_init(ctypes.byref(opt))
    opt.bandwidth = float(bandwidth)
    ptr = ctypes.POINTER(_lib.SimResult)()
    _call(_lib.lib.remat_simulate, chain._ptr, schedule._ptr, ctypes.byref(opt), ctypes.byref(ptr))
    try:
        return SimResult(ptr.contents)
    finally:
        _lib.lib.remat_sim_result_free(ptr)


_REF_KIND = {0: "a", 1: "abar", 2: "d"}


class Step:
    """One planned op: .op (text), .kind ("Fn", "Fck", "Fall", "B", "Del"),
    .index, and .reads/.creates/.frees as ("a"|"abar"|"d", i) pairs."""

    __slots__ = ("op", "kind", "index", "reads", "creates", "frees", "mem_during", "mem_after")

    def __init__(self, st):
        self.op = _lib.op_text(st.op)
        self.kind = self.op.split()[0]
        self.index = int(st.op.index)
        self.reads = [(_REF_KIND[r.kind], int(r.index)) for r in st.reads[:st.n_reads]]
        self.creates = [(_REF_KIND[r.kind], int(r.index)) for r in st.creates[:st.n_creates]]
        self.frees = [(_REF_KIND[r.kind], int(r.index)) for r in st.frees[:st.n_frees]]
        self.mem_during = int(st.mem_during)
        self.mem_after = int(st.mem_after)

    def __repr__(self):
        return "<Step %s reads=%s creates=%s frees=%s>" % (self.op, self.reads, self.creates,
                                                          self.frees)


class Plan:
    """An execution plan (include/remat/exec.h), copied into Python."""

    def __init__(self, p):
        self.steps = [Step(p.steps[k]) for k in range(p.n_steps)]
        self.first_backward = int(p.first_backward)
        self.peak_bytes = int(p.peak_bytes)
        self.time = float(p.time)


def plan(chain, schedule):
    """What each op of `schedule` reads, creates and frees on `chain`."""
    ptr = ctypes.POINTER(_lib.ExecPlan)()
    _call(_lib.lib.remat_exec_plan_create, chain._ptr, schedule._ptr, ctypes.byref(ptr))
    try:
        return Plan(ptr.contents)
    finally:
        _lib.lib.remat_exec_plan_free(ptr)


def _human(n):
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return "%.2f %s" % (n / (1 << k), unit)
    return "%d B" % n

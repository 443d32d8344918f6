"""ctypes binding to libremat.

This module holds no algorithm code: it declares the C structs and
prototypes, loads the library, checks its version and turns statuses into
exceptions. Library handles are released by finalizers in remat/__init__.py.

The library is found through, in order: the REMAT_LIB environment variable
(a path), libremat.so inside the installed package (pip install), the
Makefile's ../../build/libremat.so relative to this package, then the system
loader ("libremat.so.0" / "libremat.so").
"""
from __future__ import annotations

import ctypes
import importlib.resources
import os
from collections.abc import Callable, Iterable
from typing import Any
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64,
                    c_size_t, c_uint, c_uint8, c_uint32, c_uint64, c_void_p)

EXPECTED_MAJOR = 0
NAME_MAX = 256
OPTION_NAME_MAX = 64
OPTION_NAME_MAX = 64
OPTION_NAME_MAX = 64
OPTION_NAME_MAX = 64
OPTION_NAME_MAX = 64
MESSAGE_MAX = 512
OP_TEXT_MAX = 32
ALGORITHM_MAX = 32
EXEC_MAX_REFS = 4


class RematError(Exception):
    """A libremat call failed; .status is the C status name."""

    status = "REMAT_E_INTERNAL"

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status:
            self.status = status


class InputError(RematError, ValueError):
    status = "REMAT_E_INPUT"


class InfeasibleError(RematError):
    """No schedule fits the memory limit; .min_memory (bytes, 0 if unknown)
    is the smallest limit the algorithm can meet."""

    status = "REMAT_E_INFEASIBLE"

    def __init__(self, message: str, min_memory: int = 0) -> None:
        super().__init__(message)
        self.min_memory = min_memory


class NoMemoryError(RematError, MemoryError):
    status = "REMAT_E_NOMEM"


class TooLargeError(RematError):
    status = "REMAT_E_TOO_LARGE"


class RematIOError(RematError, OSError):
    status = "REMAT_E_IO"


class InternalError(RematError):
    status = "REMAT_E_INTERNAL"


# Exceptions by the C status name (remat_status_name), so no status number is
# written twice.
_BY_NAME: dict[str, type[RematError]] = {
    cls.status: cls for cls in (InputError, InfeasibleError, NoMemoryError, TooLargeError,
                                RematIOError, InternalError)}


# Every Structure below names its C struct in _c_name: at import, its size must
# equal the library's remat_sizeof(_c_name), or the layouts differ and reading
# a field would read garbage.


class Error(Structure):
    _c_name = "remat_error"
    _fields_ = [("status", c_int), ("message", c_char * MESSAGE_MAX), ("min_memory", c_uint64)]


class StageOption(Structure):
    _c_name = "remat_stage_option"
    _fields_ = [("name", c_char * OPTION_NAME_MAX), ("saved_bytes", c_uint64),
                ("fall_overhead", c_uint64), ("bwd_time", c_double), ("bwd_overhead", c_uint64)]


class Stage(Structure):
    _c_name = "remat_stage"
    _fields_ = [("name", c_char * NAME_MAX), ("fwd_time", c_double), ("bwd_time", c_double),
                ("out_bytes", c_uint64), ("saved_bytes", c_uint64), ("grad_bytes", c_uint64),
                ("fwd_overhead", c_uint64), ("bwd_overhead", c_uint64),
                ("fall_overhead", c_uint64), ("has_fall_overhead", c_int),
                ("n_options", c_size_t), ("options", POINTER(StageOption)),
                ("stop_time", c_double), ("has_stop_time", c_int),
                ("stop_saved_bytes", c_uint64), ("has_stop_saved_bytes", c_int),
                ("stop_overhead", c_uint64), ("has_stop_overhead", c_int)]


class ChainStruct(Structure):
    _c_name = "remat_chain"
    _fields_ = [("name", c_char * NAME_MAX), ("time_unit", c_char * 32),
                ("input_bytes", c_uint64), ("input_grad_bytes", c_uint64),
                ("n", c_size_t), ("stages", POINTER(Stage))]


class Op(Structure):
    _c_name = "remat_op"
    _fields_ = [("kind", c_uint8), ("value", c_uint8), ("index", c_uint32), ("option", c_uint8)]


class ScheduleStruct(Structure):
    _c_name = "remat_schedule"
    _fields_ = [("algorithm", c_char * ALGORITHM_MAX), ("memory_limit", c_uint64),
                ("time", c_double), ("peak_bytes", c_uint64), ("n_ops", c_size_t),
                ("cap", c_size_t), ("ops", POINTER(Op))]


class SolveOptions(Structure):
    _c_name = "remat_solve_options"
    _fields_ = [("algorithm", c_int), ("memory", c_uint64), ("slots", c_int64),
                ("segments", c_uint32), ("bucket_bytes", c_uint64), ("revolve_mode", c_int),
                ("exact_no_del", c_int), ("bandwidth", c_double), ("offload_values", c_uint32),
                ("max_work_bytes", c_uint64), ("threads", c_uint),
                ("max_seconds", c_double), ("progress", c_void_p), ("progress_arg", c_void_p)]


class SimOptions(Structure):
    _c_name = "remat_sim_options"
    _fields_ = [("bandwidth", c_double), ("record_timeline", c_int)]


class SimEvent(Structure):
    _c_name = "remat_sim_event"
    _fields_ = [("op", c_size_t), ("lane", c_int), ("start", c_double), ("end", c_double)]


class SimMemPoint(Structure):
    _c_name = "remat_sim_mem_point"
    _fields_ = [("time", c_double), ("bytes", c_uint64)]


class SimResult(Structure):
    _c_name = "remat_sim_result"
    _fields_ = [("valid", c_int), ("time", c_double), ("peak_bytes", c_uint64),
                ("n_ops", c_size_t), ("mem_during", POINTER(c_uint64)),
                ("mem_after", POINTER(c_uint64)), ("failed_op", c_size_t),
                ("failed_op_text", c_char * OP_TEXT_MAX), ("reason", c_char * 256),
                ("compute_idle", c_double), ("d2h_idle", c_double), ("h2d_idle", c_double),
                ("n_events", c_size_t), ("events", POINTER(SimEvent)),
                ("n_mem_points", c_size_t), ("mem_points", POINTER(SimMemPoint))]


class ExecRef(Structure):
    _c_name = "remat_exec_ref"
    _fields_ = [("kind", c_uint8), ("index", c_uint32)]


class ExecStep(Structure):
    _c_name = "remat_exec_step"
    _fields_ = [("op", Op), ("n_reads", c_size_t), ("reads", ExecRef * EXEC_MAX_REFS),
                ("n_creates", c_size_t), ("creates", ExecRef * EXEC_MAX_REFS),
                ("n_frees", c_size_t), ("frees", ExecRef * EXEC_MAX_REFS),
                ("mem_during", c_uint64), ("mem_after", c_uint64), ("start", c_double),
                ("end", c_double), ("copy_at", c_size_t), ("option", c_uint8),
                ("stops", c_uint8)]


class ExecPlan(Structure):
    _c_name = "remat_exec_plan"
    _fields_ = [("n_steps", c_size_t), ("steps", POINTER(ExecStep)),
                ("first_backward", c_size_t), ("peak_bytes", c_uint64), ("time", c_double),
                ("bandwidth", c_double)]


def package_file(name: str) -> str | None:
    """Path of a file shipped inside the installed package (the wheel puts
    libremat.so and bin/remat there), or None. importlib.resources also sees
    the files of an editable install, which live outside the source tree."""
    try:
        path = importlib.resources.files(__package__).joinpath(name)
    except (ImportError, TypeError):
        return None
    return str(path) if path.is_file() and isinstance(path, os.PathLike) else None


def build_tree_file(name: str) -> str:
    """Path of `name` in the Makefile's build/ next to python/ (development)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "build", name)


def _candidates() -> list[str]:
    env = os.environ.get("REMAT_LIB")
    if env:
        return [env]
    inside = package_file("libremat.so")
    return ([inside] if inside else []) + [build_tree_file("libremat.so"), "libremat.so.0",
                                           "libremat.so"]


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("remat: cannot load libremat: tried " + "; ".join(tried) +
                      ". Build it with `make` or set REMAT_LIB to its path.")


def _declare(lib: ctypes.CDLL) -> None:
    P = POINTER
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "remat_version_number": (c_int, []),
        "remat_version_string": (c_char_p, []),
        "remat_status_name": (c_char_p, [c_int]),
        "remat_strerror": (c_char_p, [c_int]),
        "remat_free": (None, [c_void_p]),
        "remat_sizeof": (c_size_t, [c_char_p]),
        "remat_read_file": (c_int, [c_char_p, P(c_void_p), P(c_size_t), P(Error)]),
        "remat_write_file": (c_int, [c_char_p, c_char_p, c_size_t, P(Error)]),
        "remat_parse_size": (c_int, [c_char_p, P(c_uint64), P(Error)]),
        "remat_chain_create": (c_int, [c_char_p, c_uint64, c_uint64, P(Stage), c_size_t,
                                       P(P(ChainStruct)), P(Error)]),
        "remat_chain_from_json": (c_int, [c_char_p, c_size_t, c_char_p, P(P(ChainStruct)),
                                          P(Error)]),
        "remat_chain_load": (c_int, [c_char_p, P(P(ChainStruct)), P(Error)]),
        "remat_chain_to_json": (c_int, [P(ChainStruct), P(c_void_p), P(Error)]),
        "remat_chain_free": (None, [P(ChainStruct)]),
        "remat_schedule_create": (c_int, [c_char_p, P(P(ScheduleStruct)), P(Error)]),
        "remat_schedule_push": (c_int, [P(ScheduleStruct), Op, P(Error)]),
        "remat_schedule_free": (None, [P(ScheduleStruct)]),
        "remat_schedule_to_json": (c_int, [P(ScheduleStruct), P(c_void_p), P(Error)]),
        "remat_schedule_from_json": (c_int, [c_char_p, c_size_t, c_char_p,
                                             P(P(ScheduleStruct)), P(Error)]),
        "remat_op_format": (None, [Op, c_char_p]),
        "remat_op_parse": (c_int, [c_char_p, P(Op), P(Error)]),
        "remat_solve_options_init": (None, [P(SolveOptions)]),
        "remat_algorithm_parse": (c_int, [c_char_p, P(c_int), P(Error)]),
        "remat_algorithm_count": (c_size_t, []),
        "remat_algorithm_name": (c_char_p, [c_int]),
        "remat_algorithm_is_offload": (c_int, [c_int]),
        "remat_solve": (c_int, [P(ChainStruct), P(SolveOptions), P(P(ScheduleStruct)), P(Error)]),
        "remat_min_memory": (c_int, [P(ChainStruct), P(SolveOptions), P(c_uint64), P(Error)]),
        "remat_store_all_cost": (c_int, [P(ChainStruct), P(c_uint64), P(c_double), P(Error)]),
        "remat_sim_options_init": (None, [P(SimOptions)]),
        "remat_simulate": (c_int, [P(ChainStruct), P(ScheduleStruct), P(SimOptions),
                                   P(P(SimResult)), P(Error)]),
        "remat_sim_result_free": (None, [P(SimResult)]),
        "remat_exec_plan_create": (c_int, [P(ChainStruct), P(ScheduleStruct), P(P(ExecPlan)),
                                          P(Error)]),
        "remat_exec_plan_create_timed": (c_int, [P(ChainStruct), P(ScheduleStruct), c_double,
                                                P(P(ExecPlan)), P(Error)]),
        "remat_exec_plan_free": (None, [P(ExecPlan)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


STRUCTS = (Error, StageOption, Stage, ChainStruct, Op, ScheduleStruct, SolveOptions, SimOptions,
           SimEvent, SimMemPoint, SimResult, ExecRef, ExecStep, ExecPlan)


def check_struct_sizes(lib: ctypes.CDLL, structs: Iterable[type[Structure]] = STRUCTS) -> None:
    """Raises ImportError unless every ctypes struct has the size the loaded
    library reports for its C struct (a field added on one side only)."""
    wrong: list[str] = []
    for cls in structs:
        name = str(vars(cls)["_c_name"])
        want = int(lib.remat_sizeof(name.encode()))
        if want != ctypes.sizeof(cls):
            wrong.append("%s: %d bytes in libremat, %d here" % (name, want, ctypes.sizeof(cls)))
    if wrong:
        raise ImportError("remat: this binding does not match the loaded libremat (%s): %s"
                          % (VERSION_STRING, "; ".join(wrong)))


lib = _load()
_declare(lib)
VERSION: int = lib.remat_version_number()
VERSION_STRING: str = lib.remat_version_string().decode()
if VERSION // 10000 != EXPECTED_MAJOR:
    raise ImportError("remat: libremat %s is not compatible with this binding (major %d expected)"
                      % (VERSION_STRING, EXPECTED_MAJOR))
check_struct_sizes(lib)


def call(fn: Callable[..., int], *args: object) -> None:
    """Calls a libremat function whose last argument is a remat_error and
    raises on failure."""
    err = Error()
    check(fn(*args, ctypes.byref(err)), err)


def check(status: int, err: Error) -> None:
    """Raises the exception matching a non-OK status, with the C message."""
    if status == 0:
        return
    msg = err.message.decode("utf-8", "replace")
    name = lib.remat_status_name(status).decode()
    if not msg:
        msg = "%s: %s" % (name, lib.remat_strerror(status).decode())
    cls = _BY_NAME.get(name, InternalError)
    if cls is InfeasibleError:
        raise InfeasibleError(msg, int(err.min_memory))
    raise cls(msg)


def take_string(ptr: ctypes.c_void_p) -> str:
    """Copies a library-owned C string and frees it with remat_free."""
    try:
        if not ptr.value:
            raise InternalError("libremat returned no text")
        return ctypes.string_at(ptr.value).decode("utf-8")
    finally:
        lib.remat_free(ptr)


def op_text(op: Op) -> str:
    buf = ctypes.create_string_buffer(OP_TEXT_MAX)
    lib.remat_op_format(op, buf)
    return buf.value.decode()

"""ctypes binding to libremat.

This module holds no algorithm code: it declares the C structs and
prototypes, loads the library, checks its version and turns statuses into
exceptions. Library handles are released by finalizers in remat/__init__.py.

The library is found through, in order: the REMAT_LIB environment variable
(a path), ../../build/libremat.so relative to this package, then the system
loader ("libremat.so.0" / "libremat.so").
"""
import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64,
                    c_size_t, c_uint, c_uint8, c_uint32, c_uint64, c_void_p)

EXPECTED_MAJOR = 0
NAME_MAX = 256
MESSAGE_MAX = 512
OP_TEXT_MAX = 32
ALGORITHM_MAX = 32
EXEC_MAX_REFS = 4


class RematError(Exception):
    """A libremat call failed; .status is the C status name."""

    status = "REMAT_E_INTERNAL"

    def __init__(self, message, status=None):
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

    def __init__(self, message, min_memory=0):
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


_BY_STATUS = {1: InputError, 2: InfeasibleError, 3: NoMemoryError, 4: TooLargeError,
              5: RematIOError, 6: InternalError}


class Error(Structure):
    _fields_ = [("status", c_int), ("message", c_char * MESSAGE_MAX), ("min_memory", c_uint64)]


class Stage(Structure):
    _fields_ = [("name", c_char * NAME_MAX), ("fwd_time", c_double), ("bwd_time", c_double),
                ("out_bytes", c_uint64), ("saved_bytes", c_uint64), ("grad_bytes", c_uint64),
                ("fwd_overhead", c_uint64), ("bwd_overhead", c_uint64)]


class ChainStruct(Structure):
    _fields_ = [("name", c_char * NAME_MAX), ("time_unit", c_char * 32),
                ("input_bytes", c_uint64), ("input_grad_bytes", c_uint64),
                ("n", c_size_t), ("stages", POINTER(Stage))]


class Op(Structure):
    _fields_ = [("kind", c_uint8), ("value", c_uint8), ("index", c_uint32)]


class ScheduleStruct(Structure):
    _fields_ = [("algorithm", c_char * ALGORITHM_MAX), ("memory_limit", c_uint64),
                ("time", c_double), ("peak_bytes", c_uint64), ("n_ops", c_size_t),
                ("cap", c_size_t), ("ops", POINTER(Op))]


class SolveOptions(Structure):
    _fields_ = [("algorithm", c_int), ("memory", c_uint64), ("slots", c_int64),
                ("segments", c_uint32), ("bucket_bytes", c_uint64), ("revolve_mode", c_int),
                ("exact_no_del", c_int), ("bandwidth", c_double), ("offload_values", c_uint32),
                ("max_work_bytes", c_uint64), ("threads", c_uint),
                ("max_seconds", c_double), ("progress", c_void_p), ("progress_arg", c_void_p)]


class SimOptions(Structure):
    _fields_ = [("bandwidth", c_double), ("record_timeline", c_int)]


class SimResult(Structure):
    # Leading fields of remat_sim_result; only read through a pointer.
    _fields_ = [("valid", c_int), ("time", c_double), ("peak_bytes", c_uint64),
                ("n_ops", c_size_t), ("mem_during", POINTER(c_uint64)),
                ("mem_after", POINTER(c_uint64)), ("fail_op", c_size_t),
                ("fail_op_text", c_char * OP_TEXT_MAX), ("reason", c_char * 256)]


class ExecRef(Structure):
    _fields_ = [("kind", c_uint8), ("index", c_uint32)]


class ExecStep(Structure):
    _fields_ = [("op", Op), ("n_reads", c_size_t), ("reads", ExecRef * EXEC_MAX_REFS),
                ("n_creates", c_size_t), ("creates", ExecRef * EXEC_MAX_REFS),
                ("n_frees", c_size_t), ("frees", ExecRef * EXEC_MAX_REFS),
                ("mem_during", c_uint64), ("mem_after", c_uint64)]


class ExecPlan(Structure):
    _fields_ = [("n_steps", c_size_t), ("steps", POINTER(ExecStep)),
                ("first_backward", c_size_t), ("peak_bytes", c_uint64), ("time", c_double)]


def _candidates():
    env = os.environ.get("REMAT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "..", "..", "build", "libremat.so"), "libremat.so.0", "libremat.so"]


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("remat: cannot load libremat: tried " + "; ".join(tried) +
                      ". Build it with `make` or set REMAT_LIB to its path.")


def _declare(lib):
    P = POINTER
    sigs = {
        "remat_version_number": (c_int, []),
        "remat_version_string": (c_char_p, []),
        "remat_status_name": (c_char_p, [c_int]),
        "remat_free": (None, [c_void_p]),
        "remat_parse_size": (c_int, [c_char_p, P(c_uint64), P(Error)]),
        "remat_chain_create": (c_int, [c_char_p, c_uint64, c_uint64, P(Stage), c_size_t,
                                       P(P(ChainStruct)), P(Error)]),
        "remat_chain_from_json": (c_int, [c_char_p, c_size_t, c_char_p, P(P(ChainStruct)),
                                          P(Error)]),
        "remat_chain_load": (c_int, [c_char_p, P(P(ChainStruct)), P(Error)]),
        "remat_chain_to_json": (c_int, [P(ChainStruct), P(c_void_p), P(Error)]),
        "remat_chain_free": (None, [P(ChainStruct)]),
        "remat_schedule_new": (c_int, [c_char_p, P(P(ScheduleStruct)), P(Error)]),
        "remat_schedule_push": (c_int, [P(ScheduleStruct), Op, P(Error)]),
        "remat_schedule_free": (None, [P(ScheduleStruct)]),
        "remat_schedule_to_json": (c_int, [P(ScheduleStruct), P(c_void_p), P(Error)]),
        "remat_schedule_from_json": (c_int, [c_char_p, c_size_t, c_char_p,
                                             P(P(ScheduleStruct)), P(Error)]),
        "remat_op_format": (None, [Op, c_char_p]),
        "remat_op_parse": (c_int, [c_char_p, P(Op), P(Error)]),
        "remat_solve_options_init": (None, [P(SolveOptions)]),
        "remat_algorithm_parse": (c_int, [c_char_p, P(c_int), P(Error)]),
        "remat_solve": (c_int, [P(ChainStruct), P(SolveOptions), P(P(ScheduleStruct)), P(Error)]),
        "remat_min_memory": (c_int, [P(ChainStruct), P(SolveOptions), P(c_uint64), P(Error)]),
        "remat_store_all_cost": (c_int, [P(ChainStruct), P(c_uint64), P(c_double), P(Error)]),
        "remat_sim_options_init": (None, [P(SimOptions)]),
        "remat_simulate": (c_int, [P(ChainStruct), P(ScheduleStruct), P(SimOptions),
                                   P(P(SimResult)), P(Error)]),
        "remat_sim_result_free": (None, [P(SimResult)]),
        "remat_exec_plan_build": (c_int, [P(ChainStruct), P(ScheduleStruct), P(P(ExecPlan)),
                                          P(Error)]),
        "remat_exec_plan_free": (None, [P(ExecPlan)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


lib = _load()
_declare(lib)
VERSION = lib.remat_version_number()
VERSION_STRING = lib.remat_version_string().decode()
if VERSION // 10000 != EXPECTED_MAJOR:
    raise ImportError("remat: libremat %s is not compatible with this binding (major %d expected)"
                      % (VERSION_STRING, EXPECTED_MAJOR))


def check(status, err):
    """Raises the exception matching a non-OK status, with the C message."""
    if status == 0:
        return
    msg = err.message.decode("utf-8", "replace")
    cls = _BY_STATUS.get(status, InternalError)
    if cls is InfeasibleError:
        raise InfeasibleError(msg, int(err.min_memory))
    raise cls(msg)


def take_string(ptr):
    """Copies a library-owned C string and frees it with remat_free."""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8")
    finally:
        lib.remat_free(ptr)


def op_text(op):
    buf = ctypes.create_string_buffer(OP_TEXT_MAX)
    lib.remat_op_format(op, buf)
    return buf.value.decode()

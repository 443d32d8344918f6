"""What the binding hands to C: Python values checked and converted (sizes,
texts, paths, numbers in a C field's range), files read and written through
libremat, and solve options. Every module of the binding uses these; none
of them imports the package itself."""
from __future__ import annotations

import ctypes
import os
from typing import Any

from . import _lib
from ._lib import InputError
from ._lib import call as _call

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


def _chain_ptr(chain: object) -> ctypes._Pointer[_lib.ChainStruct]:
    """The C chain of a remat.Chain (TypeError for anything else)."""
    ptr: Any = getattr(chain, "_ptr", None)
    if not isinstance(ptr, ctypes.POINTER(_lib.ChainStruct)):
        raise TypeError("chain: expected a remat.Chain, got %s" % type(chain).__name__)
    return ptr

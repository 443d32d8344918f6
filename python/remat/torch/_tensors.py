"""Tensors and the state around them, as every pipeline step sees them:
storage keys and byte counts, the one saved-tensor hook that saves or skips,
device helpers, and the state a recomputation replays (RNG, autocast) or
must leave as it was (buffers)."""
from __future__ import annotations

import contextlib
from typing import (AbstractSet, Any, Callable, Iterable, Iterator, List, Optional, Sequence,
                    Set, Tuple)

import torch
import torch.utils._pytree as pytree

# (device type, device index, data pointer): a storage, for the graph's facts
StorageKey = Tuple[str, int, int]
# (device type, data pointer): a storage held anyway, which the hooks never save
FreeKey = Tuple[str, int]


def _ptr(s: Any) -> int:
    """A storage's identity: its data pointer (0: empty), or, for a storage
    without data (a FakeTensor's, in the symbolic size pass of
    _graph/sizes.py), its address."""
    if s.device.type == "meta":
        return int(s._cdata)
    return int(s.data_ptr())


def device_type(t: torch.Tensor) -> str:
    """t.device.type, read faster (the hooks read it for every saved tensor):
    is_cuda and is_cpu follow the tensor's dispatch keys, as its device does
    (a FakeTensor's too)."""
    return "cuda" if t.is_cuda else "cpu" if t.is_cpu else t.device.type


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def free_key(t: torch.Tensor) -> FreeKey:
    if type(t) in _PLAIN:  # (a storage's device costs 0.7 us; no plain tensor is fake)
        s = t.untyped_storage()
        return (device_type(t), int(s._cdata) if t.is_meta else s.data_ptr())
    return (device_type(t), _ptr(t.untyped_storage()))


def storage_key(t: torch.Tensor) -> Tuple[StorageKey, int]:
    """(identity of t's storage, its size in bytes)."""
    s = t.untyped_storage()
    idx = t.device.index if t.device.index is not None else -1
    return (t.device.type, idx, _ptr(s)), s.nbytes()


def keys_of(tensors: Iterable[torch.Tensor]) -> Set[FreeKey]:
    return {free_key(t) for t in tensors}


def unique_bytes(tensors: Iterable[torch.Tensor], exclude: AbstractSet[FreeKey] = frozenset()
                 ) -> int:
    """Bytes of the distinct storages of `tensors`, less those in `exclude`."""
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        key = (t.device.type, _ptr(s))
        if key not in exclude and key[1] != 0:
            seen[key] = s.nbytes()
    return sum(seen.values())


def dense_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the tensors' elements (a gradient's size)."""
    return sum(t.numel() * t.element_size() for t in tensors)


def tensors_in(value: Any) -> List[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def detached(x: Any) -> Any:
    """x with every tensor in it detached."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), x)


def detached_like(t: torch.Tensor) -> torch.Tensor:
    """t cut from its graph, still requiring grad if t did. Stages read held
    values as the forward made them: SDPA, for one, picks another kernel
    (saving other tensors) for a mask that requires grad (T5's position
    bias, made from a parameter)."""
    d = t.detach()
    return d.requires_grad_(True) if t.requires_grad else d


# -- the saved-tensor hook -----------------------------------------------------------

class Missing:
    """In a list of what a stage saved: a saved tensor that a partial save
    did not keep (_saves), made again by the stage's backward."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()


class StopRecompute(Exception):
    """Raised by a recomputation's pack hook once it has the last tensor the
    stage saves, when nobody reads the stage's outputs (B i alone needs the
    saved tensors): the ops after it do not run. Autograd records an op's
    saved inputs before its kernel runs, so a stage ending in a matmul skips
    that matmul (torch.utils.checkpoint's early stop does the same)."""


def _unpacked(t: Any) -> Any:
    return t


def saving(free: AbstractSet[FreeKey], saved: Optional[List[Any]] = None,
           keep: bool = True, seen: Optional[Callable[[torch.Tensor], None]] = None,
           keeps: Optional[Callable[[torch.Tensor], bool]] = None,
           stop: Optional[int] = None) -> Any:
    """Saved-tensor hooks for a run whose saved tensors are collected: a
    tensor on a storage in `free` (held anyway) or empty is saved as itself;
    any other is detached (the tensor itself would make a cycle through its
    grad_fn) and appended to `saved`, or, keep=False, replaced by None (as
    the model's forward keeps only a handle for a stage it does not save);
    with `keeps` (a partial save), one it does not keep is MISSING in
    `saved`. `seen` is called first with every tensor autograd saves.
    With `stop`, StopRecompute is raised once `saved` has that many."""
    def pack(t: torch.Tensor) -> Any:
        if seen is not None:
            seen(t)
        key = free_key(t)
        if key in free or key[1] == 0:
            return t
        if not keep:
            return None
        if keeps is not None and not keeps(t):
            if saved is not None:
                saved.append(MISSING)
                if stop is not None and len(saved) >= stop:
                    raise StopRecompute()
            return None
        d = t.detach()
        if saved is not None:
            saved.append(d)
            if stop is not None and len(saved) >= stop:
                raise StopRecompute()
        return d
    return torch.autograd.graph.saved_tensors_hooks(pack, _unpacked)


# -- devices ----------------------------------------------------------------------------

def cuda_devices(values: Iterable[Any]) -> List[int]:
    """The CUDA device indices among tensors and devices (for the RNG)."""
    devs = set()
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.is_cuda:  # (faster to read than its device: this runs in every step)
                devs.add(v.device.index or 0)
        elif isinstance(v, torch.device) and v.type == "cuda":
            devs.add(v.index or 0)
    return sorted(devs)


def device_of(values: Iterable[Any], default: str = "cpu") -> torch.device:
    """The device of the first tensor among values."""
    for v in values:
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device(default)


def sync(device: torch.device) -> None:
    """Waits for the device's queued work (timing)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- state replayed or restored -------------------------------------------------------------

class RngState:
    """CPU and CUDA generator states at the start of a stage's first run."""

    def __init__(self, devices: Sequence[int]) -> None:
        self.devices = list(devices)
        self.cpu = torch.get_rng_state()
        self.cuda = [torch.cuda.get_rng_state(d) for d in self.devices]

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=self.devices):
            torch.set_rng_state(self.cpu)
            for d, s in zip(self.devices, self.cuda):
                torch.cuda.set_rng_state(s, d)
            yield


class AutocastState:
    """The autocast settings of the step's forward, replayed by recomputations
    that run in the backward, outside the user's autocast block."""

    DEVICES = ("cpu", "cuda")

    def __init__(self) -> None:
        self.state = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                      for d in self.DEVICES]
        self.cache = torch.is_autocast_cache_enabled()

    def key(self) -> Tuple[Any, ...]:
        return tuple((d, e, str(t)) for d, e, t in self.state if e)

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for d, enabled, dtype in self.state:
                stack.enter_context(torch.autocast(d, dtype=dtype, enabled=enabled,
                                                   cache_enabled=self.cache))
            yield


@contextlib.contextmanager
def leave_no_trace(model: torch.nn.Module) -> Iterator[None]:
    """Runs of `model` inside the block (discovery, checks, profiles) leave
    its buffers (BatchNorm statistics) and the RNGs as they were."""
    bufs = [(b, b.detach().clone()) for b in model.buffers()]
    devices = cuda_devices(list(model.parameters())[:1] + [b for b, _ in bufs[:1]])
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            with torch.no_grad():
                for b, v in bufs:
                    b.copy_(v)

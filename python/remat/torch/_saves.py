"""Partial saves (SPEC section 1, a stage's `options`): other ways for
`Fall i` to keep less than everything autograd saves, the rest made again
by `B i`.

Every stage that saves more than its output gets the same two options, in
this order (the executor knows an option by its number, `SAVES[k - 1]`):

- 1, "matmuls": PyTorch's documented selective checkpointing policy. The
  outputs of matmuls, convolutions and attention kernels (`SAVE_OPS`) are
  kept, whether autograd saves them or not, as
  `torch.utils.checkpoint.create_selective_checkpoint_contexts` keeps them;
  of the tensors autograd saves, those on their storages are kept, the
  others (the element-wise ops' outputs, norms) are made again in `B i` by
  running the stage again from a[i-1] with the kept outputs replayed in
  place of the ops that made them (`OpReplay`), so no matmul runs twice.
- 2, "input": nothing but a[i]; `B i` runs the whole stage again from
  a[i-1] before its backward.

A saved tensor left for `B i` is `MISSING` in the list of what the stage
saved; the first unpack of one runs the stage again and fills them all.
The same classes serve the profile (_measure) and the training step
(_executor), so what is measured is what runs.

`REMAT_PARTIAL_SAVES=0` in the environment turns them off: profiles then
have no options (and their own cache key), as before issue 24.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, ContextManager, Dict, Iterator, List, Optional, Set

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ._tensors import MISSING, FreeKey, free_key

SAVES = ("matmuls", "input")


def enabled() -> bool:
    """Whether profiles measure partial saves (REMAT_PARTIAL_SAVES, default on)."""
    return os.environ.get("REMAT_PARTIAL_SAVES", "1").strip().lower() not in (
        "0", "no", "off", "false")

_aten = torch.ops.aten
SAVE_OPS = frozenset(
    getattr(_aten, name).default for name in (
        "mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_addmm_activation", "convolution",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable")
    if hasattr(_aten, name))


def describe(steps: Any) -> str:
    """How a plan's forwards that keep their saves keep them: "5 full, 3
    matmuls, 2 input" (counts of `Fall` ops by option; "" when it makes
    none)."""
    counts: Dict[int, int] = {}
    for st in steps:
        if st.kind == "Fall":
            counts[st.option] = counts.get(st.option, 0) + 1
    names = ("full",) + SAVES
    return ", ".join("%d %s" % (counts[k], names[k] if k < len(names) else k)
                     for k in sorted(counts))


def _detach(out: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.detach, out)


class OpCache(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the outputs of SAVE_OPS in call order (detached: the cache
    must not hold the graph)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.outs: List[Any] = []
        self.versions: List[List[int]] = []
        self.keys: Set[FreeKey] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Optional[Dict[str, Any]] = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in SAVE_OPS:
            d = _detach(out)
            ts = [t for t in pytree.tree_leaves(d) if isinstance(t, torch.Tensor)]
            self.outs.append(d)
            self.versions.append([t._version for t in ts])
            self.keys |= {free_key(t) for t in ts}
        return out

    def close(self) -> None:
        """Forgets outputs changed in place after they were made (the replay
        would return the changed value): those ops run again instead."""
        for i, (d, vs) in enumerate(zip(self.outs, self.versions)):
            ts = [t for t in pytree.tree_leaves(d) if isinstance(t, torch.Tensor)]
            if any(t._version != v for t, v in zip(ts, vs)):
                self.outs[i] = None

    def tensors(self) -> List[torch.Tensor]:
        return [t for d in self.outs if d is not None for t in pytree.tree_leaves(d)
                if isinstance(t, torch.Tensor)]


class OpReplay(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """In a stage's recomputation, the i-th call of a SAVE_OPS operator
    returns the i-th output OpCache recorded (the same values: the stage's
    ops run in the same order on the same inputs) instead of computing it."""

    def __init__(self, outs: List[Any]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.outs = outs
        self.pos = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Optional[Dict[str, Any]] = None) -> Any:
        if func in SAVE_OPS:
            i = self.pos
            self.pos += 1
            if i < len(self.outs) and self.outs[i] is not None:
                return _detach(self.outs[i])
        return func(*args, **(kwargs or {}))


class PartialSave:
    """One run of Fall i/k (k > 0, `name` = SAVES[k - 1]) and what it keeps
    for its B i: keeps(t) tells the pack hook whether a saved tensor is kept;
    recording() is active while the stage runs; replaying() while B i runs
    it again."""

    def __init__(self, name: str) -> None:
        if name not in SAVES:
            raise ValueError("remat: unknown partial save %r (known: %s)" % (
                name, ", ".join(SAVES)))
        self.name = name
        self.cache: Optional[OpCache] = OpCache() if name == "matmuls" else None

    @classmethod
    def of_option(cls, k: int) -> Optional["PartialSave"]:
        """The partial save of option k (None for 0, the full save)."""
        if k <= 0:
            return None
        if k > len(SAVES):
            raise ValueError("remat: the schedule names partial save %d; this version knows "
                             "%d (%s)" % (k, len(SAVES), ", ".join(SAVES)))
        return cls(SAVES[k - 1])

    def keeps(self, t: torch.Tensor) -> bool:
        return self.cache is not None and free_key(t) in self.cache.keys

    def recording(self) -> ContextManager[Any]:
        return self.cache if self.cache is not None else contextlib.nullcontext()

    def close(self) -> None:
        """The stage's run is over (see OpCache.close)."""
        if self.cache is not None:
            self.cache.close()

    def replaying(self) -> ContextManager[Any]:
        if self.cache is None:
            return contextlib.nullcontext()
        return OpReplay(self.cache.outs)

    def kept(self) -> List[torch.Tensor]:
        """What the save holds besides the saved tensors it kept."""
        return self.cache.tensors() if self.cache is not None else []

    def drop(self) -> None:
        """B i has made again what was not kept: the cache is not needed. Its
        outputs go too: an offloaded save's rebuild holds the cache (and set
        its outputs to the prefetched copies), so they would stay taken until
        the end of the step while the plan counts them freed by B i."""
        if self.cache is not None:
            self.cache.outs = []
        self.cache = None


def fill(slots: List[Any], full: List[Any]) -> None:
    """Puts a recomputation's saved tensors in the MISSING slots."""
    if len(full) != len(slots):
        raise RuntimeError("remat: recomputing a stage saved %d tensors, its forward %d"
                           % (len(full), len(slots)))
    for k, x in enumerate(slots):
        if x is MISSING:
            slots[k] = full[k]


@contextlib.contextmanager
def both(*cms: ContextManager[Any]) -> Iterator[None]:
    """The context managers entered in order, left in reverse."""
    with contextlib.ExitStack() as stack:
        for cm in cms:
            stack.enter_context(cm)
        yield

"""Held values: what a stage makes and later stages read (masks, rotary
tables, an encoder's output) is held once for the whole step. Stage graphs
call `register_held` right after making one, so the saved-tensor hooks of
the run that made it treat its storage as free (held anyway)."""
from __future__ import annotations

import threading
from typing import Any, List, Set

import torch
from torch import fx

from .._tensors import FreeKey, free_key, tensors_in

_HELD = threading.local()


def register_held(x: Any) -> Any:
    """Called by stage graphs right after a held value is made: from then on
    it is free for the saved-tensor hooks (held once for the whole step)."""
    reg = getattr(_HELD, "registry", None)
    if reg is not None:
        for t in tensors_in(x):
            reg.add(free_key(t))
            if isinstance(reg, KeepAlive):
                reg.alive.append(t)
    return x


class KeepAlive(set):  # type: ignore[type-arg]
    """A recomputation's free storages: the step's, and the held values it
    makes again, kept alive until it ends (a freed one's address could come
    back for a tensor the hooks must save)."""

    def __init__(self, free: Set[FreeKey]) -> None:
        super().__init__(free)
        self.alive: List[torch.Tensor] = []


class HeldRegistry:
    """Installs a set as the target of register_held for a with-block."""

    def __init__(self, free: Set[FreeKey]) -> None:
        self.free = free

    def __enter__(self) -> "HeldRegistry":
        self.prev = getattr(_HELD, "registry", None)
        _HELD.registry = self.free
        return self

    def __exit__(self, *exc: Any) -> None:
        _HELD.registry = self.prev


def insert_register(gm: fx.GraphModule, held: Set[str]) -> None:
    """Adds a register_held call after each node named in `held`."""
    for n in list(gm.graph.nodes):
        if n.op != "placeholder" and n.name in held:
            with gm.graph.inserting_after(n):
                gm.graph.call_function(register_held, (n,))
    gm.recompile()


def registers_held(gm: fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target is register_held for n in gm.graph.nodes)

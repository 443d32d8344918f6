"""ModuleProgram: the module path. When torch.export cannot capture the
model (data-dependent control flow, say), the stages are the longest run of
blocks the model calls in sequence (discover.py).

The code before the run (embeddings) and after it (head, loss) runs as
usual, and what it keeps is counted as held. The other tensor arguments of
the blocks (masks, rotary tables, a time embedding) are read again, as held
values, by recomputations.

Running. The model's own forward runs; hooks on the blocks carry out the
schedule around each call (ModuleReplay, one per step), exactly as the graph
path does around each stage. A block called out of the profiled order, or
given something other than what the previous block returned, stops the step
with an error.
"""
from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from .._executor import Step, boundary
from .._offload import HostLink
from .._program import Args, CaptureError, Kwargs, Profile
from .._progress import Progress
from .._tensors import (AutocastState, cuda_devices, detached, free_key, leave_no_trace,
                        saving)
from .discover import Block, find_blocks, get_slots, set_slots, tensor_slots
from .measure import profile_blocks


class ModuleProgram:
    """A run of blocks as stages 1..L; keeps the _program.Program contract
    (it compiles nothing: compile=True leaves its blocks eager)."""

    path = "modules"
    compiled = 0

    @classmethod
    def capture(cls, model: nn.Module, args: Args, kwargs: Kwargs) -> "ModuleProgram":
        with leave_no_trace(model):
            blocks = find_blocks(model, args, kwargs)
        return cls(model, blocks)

    def __init__(self, model: nn.Module, blocks: List[Block]) -> None:
        self.model = model
        self.blocks = blocks
        self.n_stages = len(blocks)
        p = next(iter(model.parameters()), None)
        self._device = p.device if p is not None else torch.device("cpu")

    @property
    def device(self) -> torch.device:
        return self._device

    def stage_names(self) -> List[str]:
        return ["%d:%s" % (b.index, b.name) for b in self.blocks]

    def differs_from_eager(self, model: nn.Module, args: Args, kwargs: Kwargs) -> Optional[str]:
        return None  # the model's own code runs

    def compile_stages(self) -> int:
        return 0

    def compiled_stages(self) -> List[int]:
        return []

    def set_eager(self, indices: Sequence[int]) -> None:
        pass

    @contextlib.contextmanager
    def eager_stages(self) -> Iterator[None]:
        yield

    def cache_key(self, module: nn.Module, args: Args, kwargs: Kwargs, repeat: int) -> str:
        """Covers the code that runs: the bytecode of every module's forward,
        the module tree, shapes and dtypes of inputs and parameters."""
        h = hashlib.sha256()
        for m in self.model.modules():
            h.update(type(m).__qualname__.encode())
            _hash_code(h, type(m).forward)
        leaves = [(tuple(t.shape), str(t.dtype), str(t.device), t.requires_grad)
                  if isinstance(t, torch.Tensor) else repr(t)
                  for t in pytree.tree_leaves((args, kwargs))]
        params = [(n, tuple(p.shape), str(p.dtype), str(p.device), p.requires_grad)
                  for n, p in self.model.named_parameters()]
        return repr((h.hexdigest(), repr(self.model), leaves, params, self.stage_names(),
                     AutocastState().key(), repeat))

    def profile(self, module: nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                progress: Progress) -> Profile:
        with leave_no_trace(self.model):
            return profile_blocks(self.model, self.blocks, self._device, args, kwargs, repeat,
                                  progress)

    def forward(self, model: nn.Module, plan: "remat.Plan", link: Optional[HostLink],
                args: Args, kwargs: Kwargs) -> Any:
        """One training step's forward by `plan`: the model's own forward, with
        the schedule carried out around each block."""
        replay = ModuleReplay(self)
        step = Step(replay, self.n_stages, plan, set(), cuda_devices([self._device]), link)
        for p in list(self.model.parameters()) + list(self.model.buffers()):
            step.free_storages.add(free_key(p))
        for t in pytree.tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                step.free_storages.add(free_key(t))
                step.watch(t, "an input")
        handles = []
        for blk in self.blocks:
            handles.append(blk.module.register_forward_pre_hook(
                replay.before_block(step, blk), with_kwargs=True))
            handles.append(blk.module.register_forward_hook(
                replay.after_block(step, blk), with_kwargs=True))
        try:
            out = self.model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
            if replay.hooks is not None:
                replay.hooks.__exit__(None, None, None)
        if replay.next != self.n_stages + 1:
            raise CaptureError("remat: the model called %d of its %d blocks" % (
                replay.next - 1, self.n_stages))
        step.finish_forward()
        return out


class ModuleReplay:
    """One training step of a ModuleProgram: the hooks around each block's
    call, and what recomputations read again (each block's other arguments,
    detached, and the buffers it changed, as they were before its call)."""

    def __init__(self, prog: ModuleProgram) -> None:
        self.prog = prog
        self.next = 1                 # the block the model must call next
        self.out: List[Any] = []      # what the last block returned (a[j])
        self.hooks: Any = None        # the saved-tensor hooks of the block running
        self.calls: Dict[int, Tuple[Args, Kwargs, List[Optional[torch.Tensor]]]] = {}

    def before_block(self, step: Step, blk: Block) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs) -> Optional[Tuple[Args, Kwargs]]:
            j = blk.index
            if self.next != j or self.hooks is not None:
                raise CaptureError("remat: block %s was called out of the profiled order "
                                   "(expected block %d)" % (blk.name, self.next))
            ins = get_slots(args, kwargs, blk.in_slots)
            if j > 1 and any(x is not y for x, y in zip(ins, self.out)):
                raise CaptureError("remat: block %s did not receive what block %d returned; "
                                   "the code between blocks changed since profiling"
                                   % (blk.name, j - 1))
            if j == 1:
                step.set_input(ins)
                ins = boundary(step, 0, ins)
                args, kwargs = set_slots(args, kwargs, blk.in_slots, ins)
            step.before_main(j)
            held = [(s, t) for s, t in tensor_slots(args, kwargs) if s not in blk.in_slots]
            for _, t in held:
                step.free_storages.add(free_key(t))
                step.watch(t, "an argument of block %s" % blk.name)
            # The arguments recomputations read again; not the boundary (a[j-1]
            # comes from the schedule's store: holding it here would keep it).
            dargs, dkwargs = set_slots(detached(args), detached(kwargs), blk.in_slots,
                                       [None] * len(blk.in_slots))
            self.calls[j] = (dargs, dkwargs, [b.detach().clone() for b in blk.module.buffers()])
            # (after the block, only the buffers it changed keep their snapshot)
            step.record_rng(j)
            self.hooks = step.main_stage(j)
            self.hooks.__enter__()
            return args, kwargs
        return hook

    def after_block(self, step: Step, blk: Block) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs, out: Any) -> Any:
            j = blk.index
            self.hooks.__exit__(None, None, None)
            self.hooks = None
            leaves, spec = pytree.tree_flatten(out)
            a = [leaves[i] for i in blk.out_leaves]
            if j < self.prog.n_stages:
                a = boundary(step, j, a)
                for i, v in zip(blk.out_leaves, a):
                    leaves[i] = v
                out = pytree.tree_unflatten(leaves, spec)
            dargs, dkwargs, snaps = self.calls[j]
            # Values, not versions: batch_norm updates its statistics in place
            # without moving their version counter.
            self.calls[j] = (dargs, dkwargs, [s if s is not None and not torch.equal(b, s) else None
                                              for b, s in zip(blk.module.buffers(), snaps)])
            step.after_main(j, a)
            self.out = a
            self.next = j + 1
            return out
        return hook

    def recompute(self, step: Step, j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        blk = self.prog.blocks[j - 1]
        dargs, dkwargs, snaps = self.calls[j]
        ins = [t.detach().requires_grad_(keep and t.is_floating_point())
               if isinstance(t, torch.Tensor) else t for t in a_prev]
        args, kwargs = set_slots(dargs, dkwargs, blk.in_slots, ins)
        with _buffers_as(blk.module, snaps):
            if not keep:
                with torch.no_grad():
                    out = blk.module(*args, **kwargs)
                return [pytree.tree_leaves(out)[i].detach() for i in blk.out_leaves], None
            saved: List[torch.Tensor] = []
            with torch.enable_grad(), saving(step.free_storages, saved, keeps=step.keeps):
                out = blk.module(*args, **kwargs)
        leaves = pytree.tree_leaves(out)
        return [leaves[i].detach() for i in blk.out_leaves], saved


@contextlib.contextmanager
def _buffers_as(module: nn.Module, snaps: Sequence[Optional[torch.Tensor]]) -> Any:
    """Runs with the block's changed buffers set to copies of their values at
    its first run, and puts the current values back after."""
    bufs = list(module.buffers())
    saved = []
    with torch.no_grad():
        for b, s in zip(bufs, snaps):
            if s is not None:
                saved.append((b, b.clone()))
                b.copy_(s)
    try:
        yield
    finally:
        with torch.no_grad():
            for b, v in saved:
                b.copy_(v)


def _hash_code(h: Any, fn: Any) -> None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            h.update(c.co_code)
        else:
            h.update(repr(c).encode())


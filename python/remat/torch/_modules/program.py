"""ModuleProgram: the module path. When torch.export cannot capture the
model (data-dependent control flow, say), the stages are the longest run of
blocks the model calls in sequence (discover.py).

The code before the run (embeddings) and after it (head, loss) runs as
usual, and what it keeps is counted as held. The other tensor arguments of
the blocks (masks, rotary tables, a time embedding, a residual) are read
again, as held values, by recomputations.

Recomputing. A block runs again as its main run ran: with grad, its inputs
and held values requiring grad where they did (what autograd saves, and some
kernels' last bits, depend on both), saving what the main run saved (a held
value a later block made free is saved again: _FreeAt), or nothing when the
schedule keeps nothing.

Running. The model's own forward runs; hooks on the blocks carry out the
schedule around each call (ModuleReplay, one per step), exactly as the graph
path does around each stage. The hooks follow the calls the step makes: a
call is stage j when it is the call of block j's module that the profile
expects next, given what block j-1 returned. When the model's calls change
(a branch on tensor values skips a block, calls another module, or the code
between blocks takes another path), the step leaves the plan there: the rest
of the forward runs as plain autograd, the stages run so far are recomputed
from their checkpoints off the plan (Step.leave_plan), and gradients stay
exact. Such a step warns once per change, and `left_plan` counts them.
"""
from __future__ import annotations

import contextlib
import hashlib
import warnings
import weakref
from typing import AbstractSet, Any, Dict, Iterator, List, Optional, Sequence, Tuple, cast

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from .._executor import Step, boundary
from .._offload import HostLink
from .._program import Args, Kwargs, Profile
from .._progress import Progress
from .._tensors import (AutocastState, FreeKey, StopRecompute, cuda_devices, free_key,
                        leave_no_trace, saving)
from .discover import (Block, distinct_modules, find_blocks, get_slots, set_slots,
                       tensor_slots, version)
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
        # why a step left the plan -> how many steps did (see the docstring)
        self.left_plan: Dict[str, int] = {}
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
        for mod in distinct_modules(self.blocks):  # a module may be several blocks
            handles.append(mod.register_forward_pre_hook(replay.pre_hook(step), with_kwargs=True))
            handles.append(mod.register_forward_hook(replay.post_hook(step), with_kwargs=True))
        try:
            out = self.model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
            if replay.hooks is not None:
                replay.hooks.__exit__(None, None, None)
        if replay.next != self.n_stages + 1:
            nxt = self.blocks[replay.next - 1]
            prev = "after block %d (%s), " % (nxt.index - 1, self.blocks[nxt.index - 2].name) \
                if nxt.index > 1 else ""
            replay.leave(step, "%sblock %d (%s) was never called" % (prev, nxt.index, nxt.name))
        step.finish_forward()
        return out

    def note_left(self, why: str) -> None:
        """A step left the plan (see the docstring): counted, warned once."""
        first = why not in self.left_plan
        self.left_plan[why] = self.left_plan.get(why, 0) + 1
        if first:
            warnings.warn("remat: this step's calls differ from the profiled ones (%s); it runs "
                          "the rest of its forward as plain autograd, outside the memory plan, "
                          "with exact gradients" % why, stacklevel=2)


class ModuleReplay:
    """One training step of a ModuleProgram: the hooks around the blocks'
    modules, which of their calls are stages, and what recomputations read
    again (each block's other arguments, detached, and the buffers it
    changed, as they were before its call)."""

    def __init__(self, prog: ModuleProgram) -> None:
        self.prog = prog
        self.next = 1                 # the block the plan runs next
        # what the last block returned (a[j]), weakly: only its identity is
        # needed, and a strong reference kept the last block's output alive
        # through the whole backward (64 KB over the prediction on Llama)
        self.out: List[Any] = []
        self.out_versions: List[int] = []  # their version counters then
        self.hooks: Any = None        # the saved-tensor hooks of the block running
        self.calls: Dict[int, Tuple[Args, Kwargs, List[Optional[torch.Tensor]]]] = {}
        self.frames: List[Optional[Block]] = []  # per hooked call running: its stage, or None
        self.left: Optional[str] = None  # why the step left the plan
        self.replaying = False        # a recomputation runs: its calls are no stages
        self.count: Dict[int, int] = {}  # the calls of each block module so far
        # A held argument's storage -> the block whose call made it free (not
        # saved by the hooks). A residual (block 3 reading what block 1
        # returned) becomes free only at block 3: recomputing block 2 must
        # save it as block 2's main run did.
        self.free_from: Dict[FreeKey, int] = {}
        self.needs_grad: Dict[int, List[bool]] = {}

    def leave(self, step: Step, why: str) -> None:
        """The step's calls left the profile: stages next.. run plain."""
        if self.left is None:
            self.left = why
            step.leave_plan(self.next - 1)
            self.prog.note_left(why)

    def _stage_of(self, step: Step, mod: nn.Module, args: Args, kwargs: Kwargs
                  ) -> Optional[Block]:
        """The block this call runs as a stage; None for a call inside a
        stage, in a recomputation, after the step left the plan, or of a
        block's module where the profile has no block (it runs as the
        model's own code). A call that takes the chain elsewhere (a block
        skipped, another path between blocks) leaves the plan."""
        if self.left is not None or self.hooks is not None or self.replaying:
            return None
        nth = self.count.get(id(mod), 0)
        self.count[id(mod)] = nth + 1
        L = self.prog.n_stages
        blk = self.prog.blocks[self.next - 1] if self.next <= L else None
        if blk is not None and blk.module is mod:
            if blk.index == 1 and nth == blk.nth:  # (its module's call it was in the example)
                return blk
            if blk.index > 1 and _same(_slots_or_none(args, kwargs, blk.in_slots), self.out):
                if _versions(self.out) == self.out_versions:
                    return blk
                self.leave(step, "what block %d (%s) returned was changed in place before block "
                           "%d (%s) read it" % (blk.index - 1, self.prog.blocks[blk.index - 2].name,
                                                blk.index, blk.name))
                return None
            if blk.index == 1:
                return None
            self.leave(step, "block %d (%s) did not receive what block %d returned: the code "
                       "between them took another path" % (blk.index, blk.name, blk.index - 1))
            return None
        if self.next > 1 and _receives(args, kwargs, self.out):
            name = next((b.name for b in self.prog.blocks if b.module is mod), "?")
            self.leave(step, "%s was called on what block %d returned, where %s" % (
                name, self.next - 1, "block %d (%s) was expected" % (blk.index, blk.name)
                if blk is not None else "no block was expected"))
        return None

    def pre_hook(self, step: Step) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs) -> Optional[Tuple[Args, Kwargs]]:
            blk = self._stage_of(step, mod, args, kwargs)
            self.frames.append(blk)
            return self._enter(step, blk, args, kwargs) if blk is not None else None
        return hook

    def post_hook(self, step: Step) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs, out: Any) -> Any:
            blk = self.frames.pop() if self.frames else None
            return self._exit(step, blk, out) if blk is not None else None
        return hook

    def _enter(self, step: Step, blk: Block, args: Args, kwargs: Kwargs) -> Tuple[Args, Kwargs]:
        j = blk.index
        ins = get_slots(args, kwargs, blk.in_slots)
        if j == 1:
            step.set_input(ins)
            ins = boundary(step, 0, ins)
            args, kwargs = set_slots(args, kwargs, blk.in_slots, ins)
        step.before_main(j)
        # which of a[j-1] required grad: a recomputation gives them the same
        # (kernels choose by it: SDPA's backend, matmul's folding)
        self.needs_grad[j] = [isinstance(t, torch.Tensor) and t.requires_grad for t in ins]
        held = [(s, t) for s, t in tensor_slots(args, kwargs) if s not in blk.in_slots]
        for _, t in held:
            key = free_key(t)
            if key not in step.free_storages:
                self.free_from[key] = j
                step.free_storages.add(key)
            step.watch(t, "an argument of block %s" % blk.name)
        # The arguments recomputations read again; not the boundary (a[j-1]
        # comes from the schedule's store: holding it here would keep it).
        # (requiring grad as they did: what autograd saves depends on it)
        dargs, dkwargs = set_slots(_detached_alike(args), _detached_alike(kwargs), blk.in_slots,
                                   [None] * len(blk.in_slots))
        # (after the block, only the buffers it changed keep their snapshot;
        # none where nothing runs a block again: Step.all_native)
        self.calls[j] = (dargs, dkwargs, [] if step.all_native else
                         [b.detach().clone() for b in blk.module.buffers()])
        step.record_rng(j)
        self.hooks = step.main_stage(j)
        self.hooks.__enter__()
        return args, kwargs

    def _exit(self, step: Step, blk: Block, out: Any) -> Any:
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
        self.out = [_weak(v) for v in a]
        self.out_versions = _versions(self.out)
        self.next = j + 1
        return out

    def recompute(self, step: Step, j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        blk = self.prog.blocks[j - 1]
        dargs, dkwargs, snaps = self.calls[j]
        needs = self.needs_grad.get(j, [])
        ins = [t.detach().requires_grad_(k < len(needs) and needs[k])
               if isinstance(t, torch.Tensor) else t for k, t in enumerate(a_prev)]
        self.replaying = True  # (a recomputation in the forward reaches the hooks)
        saved: List[torch.Tensor] = []
        free = _FreeAt(step.free_storages, self.free_from, j)
        try:
            # With grad, as the main run: under no_grad some kernels differ in
            # the last bits (T5's self-attention on CPU). keep=False saves nothing.
            with _buffers_as(blk.module, snaps), torch.enable_grad(), \
                    saving(free, saved, keep=keep, keeps=step.keeps,
                           stop=step.stop_after if keep else None):
                # not leaves, as in the main run (an in-place ReLU block)
                args, kwargs = set_slots(dargs, dkwargs, blk.in_slots, boundary(None, j - 1, ins))
                out = blk.module(*args, **kwargs)
        except StopRecompute:  # the caller reads only the saved tensors
            return [], saved
        finally:
            self.replaying = False
        leaves = pytree.tree_leaves(out)
        return [leaves[i].detach() for i in blk.out_leaves], saved if keep else None


def _detached_alike(x: Any) -> Any:
    """x with every tensor detached, requiring grad where it did."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach().requires_grad_(t.requires_grad),
                                x)


class _FreeAt(AbstractSet[FreeKey]):
    """The storages that were free when block j's main run saved its tensors:
    `free` less those a later block's held arguments added."""

    def __init__(self, free: AbstractSet[FreeKey], free_from: Dict[FreeKey, int], j: int
                 ) -> None:
        self.free, self.free_from, self.j = free, free_from, j

    def __contains__(self, key: object) -> bool:
        return key in self.free and self.free_from.get(cast(FreeKey, key), 0) <= self.j

    def __iter__(self) -> Iterator[FreeKey]:
        return (k for k in self.free if self.free_from.get(k, 0) <= self.j)

    def __len__(self) -> int:
        return sum(1 for _ in self)


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


def _slots_or_none(args: Args, kwargs: Kwargs, slots: Sequence[Any]) -> Optional[List[Any]]:
    try:
        return get_slots(args, kwargs, slots)
    except (IndexError, KeyError):  # called with other arguments than in the profile
        return None


def _weak(v: Any) -> Any:
    """A callable returning v, not keeping a tensor alive."""
    if isinstance(v, torch.Tensor):
        return weakref.ref(v)
    return lambda: v


def _versions(values: Sequence[Any]) -> List[int]:
    """The version counters of `values` (as _weak gives them); -1 for others."""
    return [version(t) if isinstance(t, torch.Tensor) else -1 for t in (v() for v in values)]


def _same(got: Optional[Sequence[Any]], want: Sequence[Any]) -> bool:
    """The very tensors (not equal ones); want as _weak gives them."""
    return got is not None and len(got) == len(want) and all(x is y() for x, y in zip(got, want))


def _receives(args: Args, kwargs: Kwargs, values: Sequence[Any]) -> bool:
    """Whether a tensor of `values` (as _weak gives them) is an argument."""
    live = [v() for v in values]
    ids = {id(v) for v in live if isinstance(v, torch.Tensor)}
    return any(id(t) in ids for _, t in tensor_slots(args, kwargs))


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


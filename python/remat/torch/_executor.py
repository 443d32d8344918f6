"""The training step: one forward that builds autograd's usual graph, and a
backward that autograd drives, with the schedule deciding what is kept.

Non-reentrant design. The model's forward runs once, building the same
autograd graph as plain PyTorch, so autograd.grad, backward(inputs=...),
retain_graph, tensor and parameter hooks, gradient accumulation, DDP and
FSDP see an ordinary graph. What the schedule changes is only what autograd
keeps: every tensor an operator saves for its backward goes through
saved-tensor hooks. Stage j's saved tensors are kept when the schedule runs
`Fall j` in the forward; otherwise the hook keeps a handle, and when
autograd unpacks it during the backward, the executor runs the schedule up
to `B j` (recomputing from checkpoints) and hands back the recomputed tensor.
A plan that runs every stage once, by a full `Fall j` (memory=1.0:
Step.all_native), has no hooks: autograd keeps the saved tensors itself,
as without remat.
A partial save `Fall j/k` (_saves) keeps some of them; the first unpack of
one it did not keep runs stage j again from a[j-1] (its kept matmul outputs
replayed, not recomputed) and fills in the others.

Op semantics (what each op reads, creates and frees) come from the C
execution plan (`remat.plan`), so they are defined once, in libremat. The
offload ops (Off, Pre, Wait) of a plan made with a host link are carried out
by _offload.StepCopies, at the steps the plan names.

Ordering. Autograd runs a stage's backward only after every stage after it:
the activations crossing each boundary pass through a `_Boundary` node, an
identity whose backward runs once all of its outputs' gradients are in, i.e.
once the next stage's backward is over; it also tells the executor so. If
autograd ever asks for a stage out of the schedule's order (a pruned
`inputs=` backward, two graphs interleaved, a second backward with
retain_graph), the executor recomputes what it needs from the nearest
checkpoint: results stay exact, only time and memory move off the plan.

Leaving the plan. A model whose calls change from one step to the next (the
module path; a branch on tensor values skips a block or calls another) tells
the step where it left the profiled calls (leave_plan): what ran after runs
as plain autograd, and the backward recomputes the stages run before it
from the checkpoints the forward kept, off the plan. Exact as ever; the
step's memory is then no longer the plan's.
"""
from __future__ import annotations

import contextlib
from typing import (AbstractSet, Any, Callable, Dict, List, Optional, Protocol, Sequence, Set,
                    Tuple)

import torch

import remat

from ._offload import OFFLOAD_OPS, HostLink, Link, StepCopies, make_links
from ._saves import PartialSave, both, fill
from ._tensors import MISSING, AutocastState, FreeKey, RngState

Ref = Tuple[str, int]
FORWARD_OPS = ("Fn", "Fck", "Fall")


# Recomputations whose outputs nobody reads stop at their last saved tensor
# (StopRecompute): B j of a partial save, and a full Fall j right before B j
# (the plan's `stops`: the chain's stop_time, stop_saved_bytes and
# stop_overhead, measured by _measure._stopped). Off only to measure what
# that saves.
STOP_EARLY = True


class RematRuntimeError(RuntimeError):
    """A call pattern remat cannot run exactly (it never returns wrong values)."""


class StageReplay(Protocol):
    """What a program gives each training step: the means of running stage j
    again when the schedule recomputes it (its per-step state lives in it)."""

    def recompute(self, step: "Step", j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        """Runs stage j again from a[j-1] = a_prev. Returns a[j] (detached) and,
        when keep, the tensors autograd saves, in the order it saved them."""


class _Boundary(torch.autograd.Function):
    """Identity over the activations crossing the end of stage j."""

    @staticmethod
    def forward(ctx: Any, step: Optional["Step"], j: int, *xs: torch.Tensor
                ) -> Tuple[torch.Tensor, ...]:
        ctx.step, ctx.j = step, j
        return tuple(x.detach() for x in xs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Tuple[Any, ...]:
        step = ctx.step
        if step is not None:
            step.stage_backward_done(ctx.j + 1)
        return (None, None) + grads


def boundary(step: Optional["Step"], j: int, xs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """xs passed through stage j's boundary node (those that require grad);
    as they are where the step's backward has nothing to do (Step.all_native)."""
    if step is not None and step.all_native:
        return list(xs)
    idx = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.requires_grad]
    if not idx or not torch.is_grad_enabled():
        return list(xs)
    outs = _Boundary.apply(step, j, *[xs[i] for i in idx])  # type: ignore[no-untyped-call]
    res = list(xs)
    for i, o in zip(idx, outs):
        res[i] = o
    return res


class _Handle:
    """What autograd holds instead of a saved activation."""

    __slots__ = ("step", "j", "k", "__weakref__")

    def __init__(self, step: "Step", j: int, k: int) -> None:
        self.step, self.j, self.k = step, j, k
        step.live_handles += 1

    def __del__(self) -> None:
        step = self.step
        step.live_handles -= 1
        if step.live_handles == 0 and step.forward_over:
            step.release()


class _Abar:
    """abar[j]: the stage's boundary tensors and the tensors autograd saved
    (None once autograd has taken one; MISSING where a partial save `part`
    did not keep one)."""

    __slots__ = ("a", "saved", "part")

    def __init__(self, a: List[torch.Tensor], saved: List[Any],
                 part: Optional[PartialSave] = None) -> None:
        self.a: List[torch.Tensor] = a
        # The very list the pack hook filled (not a copy): emptying a slot frees
        # the tensor once autograd is done with it.
        self.saved: List[Any] = saved
        self.part = part


class Step:
    """The state of one training step: the values the schedule holds, the
    stages' RNG states and the main forward's saved-tensor metadata."""

    def __init__(self, replay: StageReplay, n_stages: int, plan: "remat.Plan",
                 free_storages: Set[FreeKey], rng_devices: Sequence[int],
                 link: Optional[HostLink] = None, outputs_last: bool = False) -> None:
        self.replay = replay
        self.plan = plan
        self.L = n_stages
        # the last stage's a[L] is the model's outputs: the caller holds them
        self.outputs_last = outputs_last
        self.n = self.L + 1
        self.free_storages = free_storages   # params, buffers, inputs, held values
        self.rng_devices = list(rng_devices)
        self.autocast = AutocastState()
        self.store: Dict[Ref, Any] = {}
        self.extra: Dict[int, _Abar] = {}    # abar recomputed off the plan
        self.rng: Dict[int, RngState] = {}
        self.meta: Dict[int, List[Tuple[torch.Size, torch.dtype]]] = {}
        self.n_packed: Dict[int, int] = {}
        self.n_unpacked: Dict[int, Set[int]] = {}
        self.main_done = [False] * (self.n + 1)
        self.bwd_done = [False] * (self.n + 1)
        self.a0: List[torch.Tensor] = []
        self.pos = plan.first_backward
        self.in_pass = False
        self.passes = 0
        self.live_handles = 0
        self.versions: List[Tuple[torch.Tensor, int, str]] = []
        self.released = False
        self.forward_over = False
        self._fpos = 0
        self._kept_main: List[Any] = []
        self._part_main: Optional[PartialSave] = None
        # What a recomputation's pack hook keeps (a partial save's keeps), for
        # the programs' replays (StageReplay.recompute); None: everything.
        self.keeps: Optional[Callable[[torch.Tensor], bool]] = None
        # Set while a recomputation's outputs go unread: stop after this many
        # saved tensors (StopRecompute).
        self.stop_after: Optional[int] = None
        # Set by leave_plan: the last stage the plan ran (the rest ran plain).
        self.left_after: Optional[int] = None
        # The offload ops' copies, when the plan has some and a host link is given.
        self.copies: Optional[StepCopies] = None
        if link is not None and any(st.kind in OFFLOAD_OPS for st in plan.steps):
            self.copies = StepCopies(link, plan, lambda: self.store, free_storages)
            self.copies.on_release = self._released
        # Every stage's main run keeps all it saves and the plan runs each
        # once (memory=1.0): autograd keeps the saved tensors itself, without
        # hooks, and the backward is plain autograd's (off the plan too). (Not
        # per stage: B j, which frees the store's values, would come after
        # stage j's backward, not at its last unpack: a later peak.)
        native = native_stages(plan) if self.copies is None else frozenset()
        self.all_native = all(j in native for j in range(1, self.L + 1))

    # -- forward ------------------------------------------------------------
    def set_input(self, a0: List[torch.Tensor]) -> None:
        self.a0 = [t.detach() for t in a0]
        self.store[("a", 0)] = self.a0

    def watch(self, t: torch.Tensor, what: str) -> None:
        """t must not change between forward and backward (it is read again)."""
        self.versions.append((t, t._version, what))

    def forward_ops(self) -> List[Any]:
        return self.plan.steps[:self.plan.first_backward]

    def main_pack(self, j: int, keep: bool, part: Optional[PartialSave] = None
                  ) -> Callable[[torch.Tensor], Any]:
        """The pack hook of stage j's main run (with `part`, a partial save:
        what it does not keep is MISSING)."""
        n_packed = self.n_packed
        n_packed[j] = 0
        meta: List[Tuple[torch.Size, torch.dtype]] = []
        self.meta[j] = meta
        kept: List[Any] = []
        self._kept_main = kept
        free = self.free_storages
        keep_all = keep and part is None

        def pack(t: torch.Tensor) -> Any:
            s = t.untyped_storage().data_ptr()
            # (device_type inlined: this runs for every saved tensor)
            if s == 0 or ("cuda" if t.is_cuda else "cpu" if t.is_cpu else t.device.type,
                          s) in free:
                return t
            k = len(meta)
            n_packed[j] = k + 1
            meta.append((t.shape, t.dtype))
            if keep_all:  # (t itself would tie the store to the graph)
                kept.append(t.detach())
            elif keep:
                kept.append(t.detach() if part.keeps(t) else MISSING)  # type: ignore[union-attr]
            return _Handle(self, j, k)
        return pack

    def main_stage(self, j: int) -> Any:
        """The saved-tensor hooks of stage j's main run (and, for a partial
        save, the recording of what it keeps)."""
        st = self.forward_ops()[self._fpos]
        if self.all_native:
            self._kept_main, self._part_main = [], None
            return contextlib.nullcontext()
        keep = ("abar", j) in st.creates
        part = PartialSave.of_option(st.option) if keep else None
        self._part_main = part
        hooks = torch.autograd.graph.saved_tensors_hooks(self.main_pack(j, keep, part), _unpack)
        return hooks if part is None else both(hooks, part.recording())

    def record_rng(self, j: int) -> None:
        if not self.all_native:  # (nothing runs again: no state to replay)
            self.rng[j] = RngState(self.rng_devices)

    def _store_result(self, j: int, a_j: List[torch.Tensor], saved: Optional[List[Any]],
                      part: Optional[PartialSave] = None) -> None:
        if saved is not None and self.copies is not None:
            # Views of a[j-1] become Links: offloading or freeing a[j-1] then
            # frees its memory, and offloading abar[j] does not copy it again.
            # The list given is emptied: the main run's pack hook, which
            # autograd keeps as long as the graph, holds it.
            linked = make_links(saved, self._peek_a(j - 1))
            saved.clear()
            saved = linked
        if saved is not None:
            self.store.pop(("a", j), None)
            self.store[("abar", j)] = _Abar(a_j, saved, part)
        elif ("abar", j) not in self.store:
            self.store[("a", j)] = a_j

    def before_main(self, j: int) -> None:
        """Carries out the schedule's ops that come before stage j's first
        forward (the model is about to run stage j)."""
        ops = self.forward_ops()
        while self._fpos < len(ops):
            st = ops[self._fpos]
            if st.kind in FORWARD_OPS and st.index <= self.L and not self.main_done[st.index]:
                if st.index != j or any(not self.main_done[i] for i in range(1, j)):
                    raise RematRuntimeError(
                        "remat: the schedule runs stage %d forward where the model runs stage %d"
                        % (st.index, j))
                self._copies_before(st)
                return
            self._apply(st)
            self._fpos += 1
        raise RematRuntimeError("remat: the schedule has no forward of stage %d" % j)

    def after_main(self, j: int, a_j: List[torch.Tensor]) -> None:
        """Stage j's first forward has run: store what its op creates."""
        st = self.forward_ops()[self._fpos]
        self.main_done[j] = True
        kept, part = self._kept_main, self._part_main
        self._kept_main, self._part_main = [], None
        if part is not None:
            part.close()
        if j == self.L and self.copies is not None and self.outputs_last:
            self.copies.pin(a_j)  # the model's outputs: the caller holds them
        self._store_result(j, [t.detach() for t in a_j],
                           kept if ("abar", j) in st.creates else None, part)
        self._frees(st)
        self._fpos += 1

    def leave_plan(self, m: int) -> None:
        """The model's calls left the profile after stage m (stages m+1..L
        will not run as stages): what follows runs as plain autograd, and the
        backward recomputes stages 1..m off the plan (_off_plan), exactly."""
        if self.left_after is not None:
            return
        self.left_after = m
        if m > 0:
            self.store.pop(("a", m), None)  # only stage m + 1 would have read it
        if self.copies is not None:  # what is on the host is copied back when read
            self.copies.enabled = False

    def finish_forward(self) -> None:
        """The model's forward is over: the schedule's remaining forward ops."""
        if self.left_after is not None:
            self.forward_over = True
            if self.live_handles == 0:
                self.release()
            return
        ops = self.forward_ops()
        while self._fpos < len(ops):
            self._apply(ops[self._fpos])
            self._fpos += 1
        missing = [j for j in range(1, self.L + 1) if not self.main_done[j]]
        if missing:
            raise RematRuntimeError("remat: the model never ran stage %d" % missing[0])
        self.forward_over = True
        if self.live_handles == 0:
            self.release()

    # -- plan ops -----------------------------------------------------------
    def _copies_before(self, st: Any) -> None:
        """The releases and prefetch starts due before step st, and the
        prefetches it reads waited for."""
        if self.copies is not None:
            self.copies.before(st.pos)
            self.copies.reads_ready(st.reads)

    def _apply(self, st: Any) -> None:
        kind, j = st.kind, st.index
        if kind in OFFLOAD_OPS:
            if self.copies is not None:
                self.copies.before(st.pos)
                self.copies.apply(st)
            return  # without copies (a replay off the plan) values stay on the device
        self._copies_before(st)
        if kind in FORWARD_OPS and st.creates:
            if j == self.n:
                a = self._a(self.L)
                self._store_result(j, a, [] if ("abar", j) in st.creates else None)
            else:
                keep = ("abar", j) in st.creates
                part = PartialSave.of_option(st.option) if keep else None
                # (the plan's stops; a join's tower plans copy them)
                a, saved = self._recompute(j, keep, part=part, unread=st.stops)
                if j == self.L and self.bwd_done[self.n]:
                    # The model's outputs, made again: only the output
                    # stage's forward reads them, and it is over (the chain
                    # counts them once, held by the caller).
                    a = []
                self._store_result(j, a, saved, part)
        self._frees(st)

    def _frees(self, st: Any) -> None:
        for ref in st.frees:
            if ref[0] != "d":
                self.store.pop(tuple(ref), None)

    def _value(self, ref: Ref) -> Any:
        """The value of ref on the device, ready to read (its prefetch waited
        for; on the host and not stored: copied back), or None."""
        if self.copies is not None:
            return self.copies.get(ref)
        return self.store.get(ref)

    def _a(self, i: int) -> List[torch.Tensor]:
        refs = [r for r in (("a", i), ("abar", i)) if r in self.store] or [("a", i), ("abar", i)]
        for ref in refs:  # a stored value first; else one on the host
            v = self._value(ref)
            if v is not None:
                a: List[torch.Tensor] = v if ref[0] == "a" else v.a
                return a
        if i == 0:
            return self._input()
        raise RematRuntimeError("remat: a[%d] is not held where the schedule reads it" % i)

    def _peek_a(self, i: int) -> List[torch.Tensor]:
        """a[i]'s tensors as stored, without waiting for a copy."""
        if ("a", i) in self.store:
            a: List[torch.Tensor] = self.store[("a", i)]
            return a
        if ("abar", i) in self.store:
            ab: _Abar = self.store[("abar", i)]
            return ab.a
        return self.a0 if i == 0 else []

    def _input(self) -> List[torch.Tensor]:
        """a[0], copied back if the schedule offloaded it."""
        if self.copies is not None and self.copies.on_host(("a", 0)):
            self.a0 = self.copies.get(("a", 0)) or []
        return self.a0

    def _released(self, ref: Ref) -> None:
        if ref == ("a", 0):
            self.a0 = []  # the store held the other reference

    def _recompute(self, j: int, keep: bool, a_prev: Optional[List[torch.Tensor]] = None,
                   part: Optional[PartialSave] = None, replay: Optional[PartialSave] = None,
                   unread: bool = False) -> Tuple[List[torch.Tensor], Optional[List[Any]]]:
        """Stage j run again: keeping what `part` keeps (a partial Fall), or
        with the outputs `replay` kept replayed (its B making again what it
        did not keep). unread: nobody reads a[j], so the run stops at the
        last tensor the stage saves (a[j] is then empty)."""
        self._check_versions()
        a_prev = self._a(j - 1) if a_prev is None else a_prev
        ctx = self.rng[j].replay() if j in self.rng else contextlib.nullcontext()
        ops = part.recording() if part is not None else \
            replay.replaying() if replay is not None else contextlib.nullcontext()
        self.keeps = part.keeps if part is not None else None
        n_saved = len(self.meta.get(j, ()))
        if unread and keep and n_saved and j < self.L and STOP_EARLY:
            self.stop_after = n_saved
        try:
            with ctx, self.autocast.replay(), ops:
                a, saved = self.replay.recompute(self, j, a_prev, keep)
        finally:
            self.keeps = None
            self.stop_after = None
        if part is not None:
            part.close()
        if keep:
            self._check_saved(j, saved or [])
        return a, saved

    def _check_versions(self) -> None:
        for t, v, what in self.versions:
            if t._version != v:
                raise RematRuntimeError(
                    "remat: %s was modified in place after the forward (version %d, now %d); "
                    "the backward recomputes from it and would give wrong gradients. Clone it "
                    "before changing it, or change it after backward()." % (what, v, t._version))

    def _check_saved(self, j: int, saved: List[Any]) -> None:
        want = self.meta.get(j)
        got = [(t.shape, t.dtype) for t in saved if t is not MISSING]
        if want is not None and (len(saved) != len(want) or got != [
                w for w, t in zip(want, saved) if t is not MISSING]):
            raise RematRuntimeError(
                "remat: recomputing stage %d saved %d tensors %s, the forward saved %d %s; the "
                "stage is not deterministic in what it computes (data-dependent Python?)"
                % (j, len(got), got[:3], len(want), want[:3]))

    # -- backward -----------------------------------------------------------
    def unpack(self, h: _Handle) -> torch.Tensor:
        if torch.is_grad_enabled():
            raise RematRuntimeError("remat: backward with create_graph=True (double backward) "
                                    "through a remat model is not supported")
        j, k = h.j, h.k
        if not self.in_pass:
            self._start_pass()
        ab = self._ensure(j)
        t = ab.saved[k]
        if t is MISSING:  # not kept by a partial save: made again now, with the others
            self._fill(j, ab)
            t = ab.saved[k]
        if t is None:  # unpacked before in this pass (a custom Function reading twice)
            ab = self._off_plan(j)
            t = ab.saved[k]
        else:  # autograd unpacks each saved tensor once: free it after its node, as eager
            ab.saved[k] = None
            if isinstance(t, Link):  # a view of a[j-1], held for B j
                try:
                    t = t.resolve(self._a(j - 1))
                except RematRuntimeError:
                    t = self._off_plan(j).saved[k]
        seen = self.n_unpacked.setdefault(j, set())
        seen.add(k)
        if len(seen) >= self.n_packed.get(j, 0):
            self.stage_backward_done(j, over=False)
        if t is None:
            raise RematRuntimeError("remat: stage %d's saved tensor %d is gone" % (j, k))
        out: torch.Tensor = t
        return out

    def _start_pass(self) -> None:
        self.in_pass = True
        torch.autograd.Variable._execution_engine.queue_callback(self.end_pass)
        self.pos = self.plan.first_backward
        self.n_unpacked = {}
        self.bwd_done = [False] * (self.n + 1)
        if self.passes > 0 and self.left_after is not None:
            self.store = {("a", 0): self._input()}  # off the plan: from a[0]
        elif self.passes > 0:  # a second backward (retain_graph): replay from a[0]
            if self.copies is not None:  # off the plan: everything stays on the device
                self.copies.enabled = False
            self.store = {("a", 0): self._input()}
            for st in self.forward_ops():
                self._apply(st)
        self.passes += 1

    def _ensure(self, j: int) -> _Abar:
        """abar[j], running the schedule until B j if needed."""
        if ("abar", j) in self.store:  # (on the host: the schedule may prefetch it below)
            stored: _Abar = self._value(("abar", j))
            return stored
        if j in self.extra:
            return self.extra[j]
        if self.left_after is not None:
            return self._off_plan(j)
        steps = self.plan.steps
        while self.pos < len(steps):
            st = steps[self.pos]
            if st.kind == "B":
                if st.index == j:
                    self._copies_before(st)
                    break
                if st.index < j:  # B j is behind us: off the plan
                    break
                self._finish_b(st)
                continue
            self._apply(st)
            self.pos += 1
        ab: Optional[_Abar] = self._value(("abar", j))
        if ab is not None:
            return ab
        return self._off_plan(j)

    def _fill(self, j: int, ab: _Abar) -> None:
        """B j of a partial save: stage j again from a[j-1], its kept op
        outputs replayed; what it saved fills the slots the save left."""
        _, full = self._recompute(j, True, self._a(j - 1), replay=ab.part, unread=True)
        fill(ab.saved, full or [])
        if ab.part is not None:
            ab.part.drop()
        ab.part = None

    def _finish_b(self, st: Any) -> None:
        self._copies_before(st)
        self.bwd_done[st.index] = True
        self._frees(st)
        self.pos += 1

    def stage_backward_done(self, j: int, over: bool = True) -> None:
        """Stage j's backward is over (over=False: its last saved tensor is
        unpacked, its last nodes may still run): carry out the schedule's B j."""
        if not self.in_pass or j > self.n or self.released:
            return  # (released: no saved tensor is left for the stages before j)
        if self.left_after is not None:
            self._done_off_plan(j)
            return
        if self.bwd_done[j]:
            if over:
                self._copies_after_b()
            return
        steps = self.plan.steps
        while self.pos < len(steps):
            st = steps[self.pos]
            if st.kind == "B" and st.index < j:
                return
            if st.kind == "B":
                self._finish_b(st)
                if st.index == j:
                    if over:
                        self._copies_after_b()
                    return
            else:
                self._apply(st)
                self.pos += 1

    def _copies_after_b(self) -> None:
        """A B is over and the stage before it goes next: the copy ops that
        follow it in the schedule (prefetches start as early as the plan
        says, not at the next stage's first unpack), and what is due before
        the next B when it comes right after. Compute stays lazy."""
        if self.copies is None:
            return
        steps = self.plan.steps
        while self.pos < len(steps) and steps[self.pos].kind in OFFLOAD_OPS:
            self._apply(steps[self.pos])
            self.pos += 1
        if self.pos < len(steps) and steps[self.pos].kind == "B":
            self.copies.before(steps[self.pos].pos)

    def _done_off_plan(self, j: int) -> None:
        """Stage j's backward is over, off the plan: what only it read goes."""
        if j > (self.left_after or 0):
            return
        self.store.pop(("abar", j), None)
        self.extra.pop(j, None)
        if j > 1:
            self.store.pop(("a", j - 1), None)

    def _off_plan(self, j: int) -> _Abar:
        """abar[j] from the nearest held checkpoint below j."""
        i = j - 1
        while i > 0 and ("a", i) not in self.store and ("abar", i) not in self.store:
            i -= 1
        a = self._a(i)
        for s in range(i + 1, j):
            a, _ = self._recompute(s, False, a)
        a_j, saved = self._recompute(j, True, a)
        ab = _Abar(a_j, saved or [])
        self.extra[j] = ab
        return ab

    def end_pass(self) -> None:
        """Autograd's callback at the end of a backward pass."""
        self.in_pass = False
        if self.copies is not None:  # a[0]'s host copy stays for a second backward
            self.copies.finish(keep_host=[("a", 0)])
        self.store = {}
        self.extra = {}

    def release(self) -> None:
        """No saved tensor of this step is left: drop everything."""
        self.released = True
        if self.copies is not None:
            self.copies.close()
            self.copies = None
        self.store = {}
        self.extra = {}
        self.a0 = []
        self.versions = []
        self.rng = {}
        self.replay = None  # type: ignore[assignment]


def native_stages(plan: "remat.Plan") -> AbstractSet[int]:
    """The stages whose one forward op in the plan is their main run's full
    save (Fall j, no partial save): nothing on the plan runs them again.
    Cached on the plan."""
    got: Optional[AbstractSet[int]] = getattr(plan, "_native", None)
    if got is not None:
        return got
    runs: Dict[int, int] = {}
    for st in plan.steps:
        if st.kind in FORWARD_OPS:
            runs[st.index] = runs.get(st.index, 0) + 1
    got = frozenset(st.index for st in plan.steps[:plan.first_backward]
                    if st.kind == "Fall" and ("abar", st.index) in st.creates
                    and PartialSave.of_option(st.option) is None and runs[st.index] == 1)
    plan._native = got  # type: ignore[attr-defined]
    return got


def _unpack(h: Any) -> torch.Tensor:
    if isinstance(h, _Handle):
        return h.step.unpack(h)
    t: torch.Tensor = h  # a parameter, buffer, input or held value, saved as itself
    return t

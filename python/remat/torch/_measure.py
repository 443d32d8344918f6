"""How a stage's memory and time are measured (rotor's paper, section 5.1),
for both capture paths: this file is the one home of the formulas.

For each stage, on the example input: the median forward and backward
times over `repeat` runs; a[i], the storages of the values crossing its end;
abar[i], a[i] plus the storages autograd saves, less the stage's input (held
as a[i-1]) and everything held anyway (parameters, buffers, inputs, held
values); and the temporary memory of its operations, measured by PeakMeter
(allocator statistics on CUDA, the profiler's allocation events on CPU):

    fwd_overhead  = peak keeping none - a[i]       (Fn, Fck)
    fall_overhead = peak keeping all - abar[i]     (Fall)
    bwd_overhead  = peak of the backward - bytes of the input's gradient
                    (the outputs let go at the stage's last unpack, as
                    a step's B frees abar[i] then: _released_bwd)

so that the SPEC's figure for each op (held + what it adds + its own
overhead) bounds what the op really takes. Each op has its own figure in
the chain (SPEC section 1, `fall_overhead`): a stage whose intermediates are
all alive at once (attention) holds them as temporaries when it keeps none,
and as saved tensors when it keeps all, so one figure for both would count
them twice in Fall. Parameter gradients are computed in each backward (as
autograd.grad returns them) and count as temporaries, as they are when
.grad already exists and autograd adds into it.

Each partial save of a stage (_saves: its chain `options`) is measured the
same way, by running its Fall i/k and its B i as the executor does
(`PartialRun`): saved_bytes is a[i] with what the save keeps, fall_overhead
the peak of that forward above it, bwd_overhead the peak of the backward,
which runs the stage again for what was not kept, above d[i-1], and
bwd_time that backward's time plus what the forward's recording of the
kept outputs added to fwd_time (an option's forward time is the stage's in
the chain, and every Fall i/k is followed by its B i). bwd_overhead is at
least what the full save's B holds beyond the option's abar: B makes again
what was not kept first.

What the chain's stages cannot hold is counted as held for the whole step
(`step_reserve`): the RNG states the executor keeps for random stages and
room for the small tensors no stage measures.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch

from . import _executor
from ._executor import boundary
from ._memory import PeakMeter
from ._saves import SAVES, PartialSave, both, enabled, fill
from ._tensors import (MISSING, FreeKey, RngState, StopRecompute, cuda_devices, dense_bytes,
                       free_key, keys_of, saving, sync, unique_bytes)

# Counted as held: room for the step's small tensors no stage measures (the
# loss scalar and its seed, the executor's bookkeeping). On 25 models (the
# test models and bench/unseen_models.py's, 13 to 670 operators, from the
# smallest limit to plain's) a step measured at most 2052 bytes above its
# prediction without it, independent of the operator count: RESERVE covers
# that, RESERVE_PER_OP is a margin (it was 64, all of it over-prediction:
# 2.2 % on Gemma-2's test model).
RESERVE = 4096
RESERVE_PER_OP = 8
# The module path counts saved tensors, not operators, and measures blocks
# alone: what runs between them is calibrated from one plain step. BERT's
# layer parts with a padding mask used 5.6 KB more than 8 B each at a limit
# that recomputes (test_torch_branches.py).
MODULE_RESERVE_PER_OP = 64


def rng_state_bytes(device: torch.device) -> int:
    """What the executor's RngState of one stage holds: the CPU generator's
    state, and the device's."""
    n = torch.get_rng_state().nbytes
    if device.type == "cuda":
        n += torch.cuda.get_rng_state(device).nbytes
    return n


def rng_bytes(device: torch.device, random_stages: int) -> int:
    """The RNG states the executor keeps for the stages that draw random
    numbers, and one more while a recomputation replays one (fork_rng keeps
    the state it puts back)."""
    return (random_stages + 1 if random_stages else 0) * rng_state_bytes(device)


def step_reserve(device: torch.device, random_stages: int, ops: int,
                 per_op: int = RESERVE_PER_OP) -> int:
    """Held for the whole step besides the values: rng_bytes, and RESERVE
    and `per_op` bytes per operator for the small tensors."""
    return rng_bytes(device, random_stages) + RESERVE + per_op * ops


class StageProbe:
    """One stage on fixed inputs, for measuring. Subclasses implement fwd
    (returns a Result); bwd is shared."""

    class Result:
        def __init__(self, a: List[torch.Tensor], saved: List[torch.Tensor],
                     graph_outs: List[torch.Tensor], inputs: List[torch.Tensor],
                     free: Set[FreeKey]) -> None:
            self.a, self.saved, self.graph_outs, self.inputs = a, saved, graph_outs, inputs
            self.free = free  # storages held anyway while this result lives
            # held values read here that require grad: the backward makes their
            # gradients too (summed by autograd outside the stage), then drops them
            self.held_leaves: List[torch.Tensor] = []
            self.alive: List[torch.Tensor] = []  # storages in `free` that the run made

    name = "stage"
    partial_saves = True  # whether the stage's partial saves can be measured (eager code)
    partial: Optional["PartialRun | _Redo | _Stop | _Release"] = None  # hooks of the next runs
    # set by measure(): the stage's autograd saves none of its outputs (and
    # they are not the model's), so plain autograd frees them once the next
    # stage is done with them
    frees_out = False
    released_by = 0  # set by measure(): see there
    unsaved_out = 0  # bytes of the outputs the stage saves none of

    def fwd(self, grad: bool, keep: bool = True) -> "StageProbe.Result":
        """One run: with grad, keeping what autograd saves (or, keep=False, a
        placeholder for it, as the main forward's Fn), or without grad."""
        raise NotImplementedError

    def hooks(self, free: Set[FreeKey], saved: List[torch.Tensor], keep: bool) -> Any:
        """The saved-tensor hooks of a probe's run (see _tensors.saving), or
        those of the partial save being measured."""
        if self.partial is not None:
            return self.partial.hooks(free, saved)
        return saving(free, saved, keep)

    def redo(self) -> "StageProbe.Result":
        """The run B i makes of the stage for a partial save (PartialRun):
        fwd(True), leaving what the next stages read as it was."""
        return self.fwd(True)

    @staticmethod
    def seeds(res: "StageProbe.Result") -> List[torch.Tensor]:
        """A scalar whose backward sends the stage outputs their gradients
        d[i]. They come out of the graph, as from the next stage, so autograd
        frees each once it is used (a gradient passed in would be held by the
        caller's frame until the whole backward is over)."""
        outs = [o for o in res.graph_outs if o.requires_grad]
        if not outs:
            return []
        return [sum((o * torch.ones_like(o)).sum() for o in outs)]  # type: ignore[list-item]

    def bwd(self, res: "StageProbe.Result", grads: List[torch.Tensor]) -> List[torch.Tensor]:
        """Backward from the seeds() scalar; returns the gradients of
        res.inputs. Parameters take part through proxies (see proxy()), so
        their gradients are added into an existing .grad, as in training,
        and no hook of the real parameters (the user's, DDP's) fires."""
        outs = list(grads)
        grads.clear()
        if not outs:
            return []
        ins = [t for t in res.inputs if t.requires_grad]
        wrt = ins + res.held_leaves + [p for p in self.proxies.values() if p.requires_grad]
        torch.autograd.backward(outs, inputs=wrt)
        out = [t.grad for t in ins if t.grad is not None]
        for t in ins + res.held_leaves:
            t.grad = None
        return out

    proxies: Dict[int, torch.Tensor] = {}

    def proxy(self, p: torch.Tensor) -> torch.Tensor:
        """A leaf sharing p's storage, with a zero .grad made up front."""
        if not isinstance(self.proxies, dict) or self.proxies is StageProbe.proxies:
            self.proxies = {}
        q = self.proxies.get(id(p))
        if q is None:
            q = p.detach().requires_grad_(p.requires_grad)
            if q.requires_grad:
                q.grad = torch.zeros_like(q)
            self.proxies[id(p)] = q
        return q


class _Slot:
    """What autograd holds for a saved tensor in a PartialRun."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


class PartialRun:
    """Fall i/k and its B i on a probe, as the executor runs them (_executor:
    main_pack, unpack, _fill): the pack hook keeps what the partial save
    keeps and leaves the rest MISSING; the first unpack of a missing one
    runs the stage again with the kept op outputs replayed and fills every
    missing slot; each slot is emptied when autograd takes it. The
    recomputation replays the RNG states of Fall i/k, as the executor's
    does (a router's jitter noise drew other tokens for the experts)."""

    def __init__(self, run: StageProbe, name: str, device: torch.device) -> None:
        self.run = run
        self.save: Optional[PartialSave] = PartialSave(name)
        self.slots: List[Any] = []
        self.rng = RngState(cuda_devices([device]))

    def hooks(self, free: Set[FreeKey], saved: List[torch.Tensor]) -> Any:
        save = self.save
        assert save is not None

        def pack(t: torch.Tensor) -> Any:
            if free_key(t) in free or t.untyped_storage().data_ptr() == 0:
                return t
            k = len(self.slots)
            if save.keeps(t):
                d = t.detach()
                saved.append(d)
                self.slots.append(d)
            else:
                self.slots.append(MISSING)
            return _Slot(k)

        def unpack(h: Any) -> Any:
            if not isinstance(h, _Slot):
                return h
            t = self.slots[h.k]
            if t is MISSING:
                self._fill()
                t = self.slots[h.k]
            self.slots[h.k] = None
            return t
        return both(torch.autograd.graph.saved_tensors_hooks(pack, unpack), save.recording())

    def fwd(self) -> StageProbe.Result:
        """Fall i/k; the result's `saved` is what the save keeps."""
        assert self.save is not None
        self.run.partial = self
        self.rng = RngState(self.rng.devices)
        try:
            res = self.run.fwd(True)
        finally:
            self.run.partial = None
        self.save.close()
        res.saved.extend(self.save.kept())
        return res

    def _fill(self) -> None:
        save, self.save = self.save, None
        assert save is not None
        redo = _Redo(save, len(self.slots))
        self.run.partial = redo
        try:
            with self.rng.replay():
                self.run.redo()
        except StopRecompute:  # as the executor's B i: the stage's last ops do not run
            pass
        finally:
            self.run.partial = None
        fill(self.slots, list(redo.saved))
        redo.saved.clear()  # (the pack hook, which the probe's graph keeps, holds this list)
        save.drop()  # (as the executor's _fill: the recorded outputs go)
        del redo, save


class _Redo:
    """The hooks of a PartialRun's recomputation: every saved tensor is
    collected, none is left to the recomputation's own graph (which the
    probe may keep through its outputs, unlike the executor, which drops
    it), and the kept op outputs are replayed. The run stops at the
    stop-th saved tensor (StopRecompute), as the executor's does."""

    def __init__(self, save: PartialSave, stop: int) -> None:
        self.save, self.stop = save, stop
        self.saved: List[torch.Tensor] = []

    def hooks(self, free: Set[FreeKey], saved: List[torch.Tensor]) -> Any:
        self.saved = saved

        def pack(t: torch.Tensor) -> Any:
            if free_key(t) in free or t.untyped_storage().data_ptr() == 0:
                return t
            saved.append(t.detach())
            if _executor.STOP_EARLY and len(saved) >= self.stop:
                raise StopRecompute()
            return None
        return both(torch.autograd.graph.saved_tensors_hooks(pack, _unpacked),
                    self.save.replaying())


def _unpacked(h: Any) -> Any:
    return h


def through_boundary(leaves: List[torch.Tensor]) -> List[torch.Tensor]:
    """Stage inputs as the executor gives them: out of a boundary node, so
    that gradients from several readers are summed in that node's input
    buffer (out of place), not into a leaf's .grad (in place)."""
    return boundary(None, 0, leaves)


def measure(run: StageProbe, repeat: int, device: torch.device, outputs_held: bool = False,
            loss_output: bool = False, stops: bool = False) -> Dict[str, Any]:
    """The chain fields of one stage (times in ms, sizes in bytes), plus
    "held_outputs" for the caller to take out. With
    outputs_held (the model's outputs: the caller holds them through the
    backward, so they are counted as held), a[i] is empty and the outputs'
    storages count neither in abar[i] nor in the overheads; d[i] is the
    gradient the caller sends back (nothing with loss_output: the model
    returns a scalar "loss" and backward starts from it). Leaves the
    values of the last run in the run for the next stages. With stops (a
    stage whose recomputation may stop early: not the model's last), its
    stopped Fall too (stop_time, stop_saved_bytes, stop_overhead)."""
    n = max(1, repeat)
    last: List[Tuple[int, int, int, int]] = []

    def sized_seeds(res: Any) -> Any:  # the sizes of the last run
        last[:] = [_sizes(res, outputs_held, loss_output)]
        unsaved, out = _unsaved_outputs(res)
        run.frees_out = not outputs_held and out > 0 and unsaved == out
        run.unsaved_out = 0 if outputs_held else unsaved
        return run.seeds(res)

    fwd_ms, bwd_ms = _timed(device, n, lambda: run.fwd(True), sized_seeds, run.bwd)
    a_bytes, saved_bytes, grad_bytes, held_out = last[0]
    options = []
    if run.partial_saves and enabled() and saved_bytes > a_bytes:
        options = _partial_saves(run, n, device, outputs_held, loss_output, fwd_ms, bwd_ms)
    with PeakMeter(device) as m:
        run.fwd(False)  # Fn / Fck in a recomputation
    ovh_none = m.peak - a_bytes - held_out
    with PeakMeter(device) as m:
        run.fwd(True, keep=False)  # Fn / Fck in the model's forward
    ovh_none = max(ovh_none, m.peak - a_bytes - held_out)
    stopped = _stopped(run, n, device) if stops and not outputs_held else {}
    released = None if outputs_held else _released_bwd(run, device)
    # One session for the kept forward and the backward, so the backward
    # sees the frees of what the forward allocated. It runs last: the next
    # stages read its values (a no-grad run may lay tensors out otherwise).
    with PeakMeter(device) as m:
        m.mark()
        res = run.fwd(True)
        res.saved.clear()  # (the pack hook holds this list) each saved tensor goes after its node
        m.mark()
        seeds = run.seeds(res)  # d[i]: held before B i starts
        m.mark()
        d = run.bwd(res, seeds)
        d_bytes = dense_bytes(d)
        del res, seeds, d
    fwd_keep, _, bwd = m.segment_peaks
    ovh_keep = fwd_keep - saved_bytes - held_out
    ovh_bwd = bwd - d_bytes
    floor_bwd = ovh_bwd  # (a partial save's B holds its outputs: _partial_saves)
    if released is not None:
        ovh_bwd = min(ovh_bwd, released)
    # What B's peak no longer counts of the outputs. A stopped Fall never
    # makes those the stage does not save: its B takes the figure with them
    # held, through stop_saved_bytes (the Fall's own peak unchanged, or higher).
    run.released_by = int(floor_bwd - ovh_bwd)
    if stopped:
        keep = min(stopped["stop_saved_bytes"], int(saved_bytes))
        more = min(run.released_by, run.unsaved_out)
        if more > int(saved_bytes) - keep:  # (it cannot: B keeps the held figure)
            ovh_bwd, run.released_by, more = floor_bwd, 0, 0
        stopped["stop_saved_bytes"] = keep + more
        stopped["stop_overhead"] = max(0, stopped["stop_overhead"] - more)
    info = {"name": run.name, "fwd_time": fwd_ms, "bwd_time": bwd_ms, "out_bytes": int(a_bytes),
            "saved_bytes": int(saved_bytes), "grad_bytes": int(grad_bytes),
            "fwd_overhead": int(max(0, ovh_none)), "fall_overhead": int(max(0, ovh_keep)),
            "bwd_overhead": int(max(0, ovh_bwd)), "held_outputs": int(held_out)}
    if stopped:  # (a run cut short: never slower, never more saved, than the whole one)
        stopped["stop_time"] = min(stopped["stop_time"], fwd_ms)
        info.update(stopped)
    if options:
        # B i of a partial save makes again what the save did not keep, then
        # runs the full save's backward: it holds at least that much (the
        # runs measured apart differ by a small tensor or two)
        for o in options:
            floor = int(saved_bytes) - o["saved_bytes"] + max(0, int(floor_bwd), int(ovh_keep))
            o["bwd_overhead"] = max(o["bwd_overhead"], floor)
        info["options"] = options
    return info



class _Release:
    """The hooks of a run whose backward lets go of the stage's outputs at
    the stage's last unpack, as a step's does (the executor's unpack then
    carries out B i, which frees abar[i]): `release` is called then. Each
    saved tensor goes after its node, as the executor's."""

    class Box:
        __slots__ = ("t", "seen")

        def __init__(self, t: torch.Tensor) -> None:
            self.t, self.seen = t, False

    def __init__(self) -> None:
        self.left = 0
        self.release: Callable[[], None] = lambda: None

    def hooks(self, free: Set[FreeKey], saved: List[torch.Tensor]) -> Any:
        def pack(t: torch.Tensor) -> Any:
            key = free_key(t)
            if key in free or key[1] == 0:
                return t
            self.left += 1
            return _Release.Box(t.detach())

        def unpack(box: Any) -> Any:
            if not isinstance(box, _Release.Box):
                return box
            if not box.seen:
                box.seen = True
                self.left -= 1
                if self.left == 0:
                    self.release()
            return box.t
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def _clear(lists: Tuple[List[torch.Tensor], ...]) -> None:
    for x in lists:
        x.clear()


def _released_bwd(run: StageProbe, device: torch.device) -> int:
    """B i's peak above its start, less d[i-1], where the stage's outputs
    go at its last unpack, as in a step (where B's peak comes after that
    unpack, a weight gradient's temporary: the outputs are gone)."""
    rel = _Release()
    run.partial = rel
    try:
        with PeakMeter(device) as m:
            m.mark()
            res = run.redo()  # (the next stages read the main run's values, not these)
            res.saved.clear()
            m.mark()
            seeds = run.seeds(res)
            outputs = (res.a, res.graph_outs)
            rel.release = lambda: _clear(outputs)
            m.mark()
            d = run.bwd(res, seeds)
            d_bytes = dense_bytes(d)
            del res, seeds, d
    finally:
        run.partial = None
    return int(m.segment_peaks[2] - d_bytes)


class _Stop:
    """The hooks of a stopped Fall (the executor's recomputation right
    before its B: _executor.Step._recompute with stops): every saved tensor
    is kept, and the run ends at the last one the stage saves
    (StopRecompute), so the ops after it, which only make a[i], never run."""

    def __init__(self, stop: int) -> None:
        self.stop = stop
        self.saved: List[torch.Tensor] = []

    def hooks(self, free: Set[FreeKey], saved: List[torch.Tensor]) -> Any:
        self.saved = saved
        return saving(free, saved, stop=self.stop)

    def run(self, probe: StageProbe) -> None:
        probe.partial = self
        try:
            probe.redo()
        except StopRecompute:
            pass
        finally:
            probe.partial = None


def _stopped(run: StageProbe, n: int, device: torch.device) -> Dict[str, Any]:
    """The chain's stop fields of a stage (see measure): the stopped Fall's
    median time over n runs, the bytes it saves (what the full run saves
    less a[i]'s storages that no op saved) and its peak above them. Empty
    when the stage saves nothing (nothing to stop at)."""
    res = run.redo()
    count = len(res.saved)
    inputs = keys_of(res.inputs)
    del res
    if not count:
        return {}
    times = []
    for _ in range(n):
        stop = _Stop(count)
        sync(device)
        t0 = time.perf_counter()
        stop.run(run)
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
        stop.saved.clear()
        del stop
    with PeakMeter(device) as m:
        stop = _Stop(count)
        stop.run(run)
        saved = unique_bytes(stop.saved, inputs)  # (the hook kept none held anyway)
        stop.saved.clear()
        del stop
    return {"stop_time": statistics.median(times), "stop_saved_bytes": int(saved),
            "stop_overhead": int(max(0, m.peak - saved))}


def _timed(device: torch.device, n: int, fwd: Callable[[], Any], seeds: Callable[[Any], Any],
           bwd: Callable[[Any, Any], Any]) -> Tuple[float, float]:
    """Median forward and backward times (ms) of n runs of a stage: fwd(),
    then (not timed) seeds(res), then bwd(res, seeds)."""
    f_ms: List[float] = []
    b_ms: List[float] = []
    for _ in range(n):
        sync(device)
        t0 = time.perf_counter()
        res = fwd()
        sync(device)
        t1 = time.perf_counter()
        d = seeds(res)
        sync(device)
        t2 = time.perf_counter()
        bwd(res, d)
        sync(device)
        f_ms.append((t1 - t0) * 1e3)
        b_ms.append((time.perf_counter() - t2) * 1e3)
        del res, d
    return statistics.median(f_ms), statistics.median(b_ms)


def _fresh_partial(run: StageProbe, name: str, device: torch.device
                   ) -> Callable[[], StageProbe.Result]:
    """Fall i/k of partial save `name`, a new PartialRun for each run."""
    return lambda: PartialRun(run, name, device).fwd()


def _seeds_clearing(run: StageProbe) -> Callable[[Any], Any]:
    """run.seeds, then the partial run's saved list emptied (as in measure)."""
    def seeds(res: Any) -> Any:
        d = run.seeds(res)
        res.saved.clear()
        return d
    return seeds


def add_bwd_overhead(stage: Dict[str, Any], nbytes: int) -> None:
    """What a stage's B holds beyond its profile (a tied parameter's gradient
    added out of place), added to the B of its full save and of each of its
    partial saves: every one runs the same backward."""
    stage["bwd_overhead"] += nbytes
    for o in stage.get("options", []):
        o["bwd_overhead"] += nbytes

def _partial_saves(run: StageProbe, n: int, device: torch.device, outputs_held: bool,
                   loss_output: bool, fwd_ms: float, bwd_ms: float) -> List[Dict[str, Any]]:
    """The chain options of a stage: every partial save of SAVES, in order,
    measured (see the module docstring). An option's B is the full save's B
    plus what it makes again, so its time is at least bwd_ms (one measured
    below it is noise, and would keep the solver from storing everything
    at plain autograd's memory). A "matmuls" save that finds no
    matmul keeps what "input" keeps, and is that one under its own name."""
    out: Dict[str, Dict[str, Any]] = {}
    for name in reversed(SAVES):  # "input" first: "matmuls" may be the same
        with PeakMeter(device) as m:
            m.mark()
            pr = PartialRun(run, name, device)
            res = pr.fwd()
            a_bytes, saved_bytes, _, held_out = _sizes(res, outputs_held, loss_output)
            none_kept = not res.saved
            res.saved.clear()
            m.mark()
            seeds = run.seeds(res)
            m.mark()
            d = run.bwd(res, seeds)
            d_bytes = dense_bytes(d)
            del res, seeds, d, pr
        if name != "input" and none_kept and "input" in out:
            out[name] = dict(out["input"], name=name)
            continue
        fwd_peak, _, bwd_peak = m.segment_peaks
        p_fwd_ms, p_bwd_ms = _timed(device, n, _fresh_partial(run, name, device),
                                    _seeds_clearing(run), run.bwd)
        extra = max(0.0, p_fwd_ms - fwd_ms)  # recording the kept outputs
        out[name] = {"name": name, "saved_bytes": int(saved_bytes),
                     "fall_overhead": int(max(0, fwd_peak - saved_bytes - held_out)),
                     "bwd_time": max(bwd_ms, p_bwd_ms + extra),
                     "bwd_overhead": int(max(0, bwd_peak - d_bytes))}
    return [out[name] for name in SAVES]


def sizes_only(run: StageProbe, outputs_held: bool = False, loss_output: bool = False
               ) -> Dict[str, Any]:
    """measure()'s sizes of one stage (out_bytes, saved_bytes, grad_bytes,
    held_outputs) from one forward, without timing or temporaries: the
    symbolic size pass (_graph/sizes.py) runs it on FakeTensors whose sizes
    are polynomials in the input's dimensions."""
    res = run.fwd(True)
    a_bytes, saved_bytes, grad_bytes, held_out = _sizes(res, outputs_held, loss_output)
    return {"name": run.name, "out_bytes": a_bytes, "saved_bytes": saved_bytes,
            "grad_bytes": grad_bytes, "held_outputs": held_out}


def _unsaved_outputs(res: StageProbe.Result) -> Tuple[int, int]:
    """(bytes of the storages of the run's outputs that autograd saved
    none of, bytes of all of them), those held anyway aside."""
    skip = res.free | keys_of(res.inputs)
    saved = keys_of(res.saved)
    return (unique_bytes([t for t in res.a if free_key(t) not in saved], skip),
            unique_bytes(res.a, skip))


def _sizes(res: StageProbe.Result, outputs_held: bool, loss_output: bool
           ) -> Tuple[int, int, int, int]:
    """(a[i], abar[i], d[i], bytes of held outputs) of a forward's result."""
    inputs = keys_of(res.inputs)
    out_keys = keys_of(res.a) if outputs_held else set()
    held_out = unique_bytes(res.a, res.free | inputs) if outputs_held else 0
    a_bytes = unique_bytes(res.a, res.free | out_keys)
    saved_bytes = unique_bytes(list(res.saved) + list(res.a), res.free | inputs | out_keys)
    # The gradient the caller's loss sends into the outputs; none when the
    # model returns its loss (backward starts from that scalar).
    grad_bytes = 0 if outputs_held and loss_output else dense_bytes(res.a)
    # (sym_max: symbolic sizes stay a formula instead of being decided at one shape)
    return a_bytes, torch.sym_max(  # type: ignore[no-untyped-call]
        saved_bytes, a_bytes), grad_bytes, held_out

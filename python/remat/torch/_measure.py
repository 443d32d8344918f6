"""How a stage's memory and time are measured (rotor's paper, section 5.1),
for both capture paths: this file is the one home of the formulas.

For each stage, on the example input: the median forward and backward
times over `repeat` runs; a[i], the storages of the values crossing its end;
abar[i], a[i] plus the storages autograd saves, less the stage's input (held
as a[i-1]) and everything held anyway (parameters, buffers, inputs, held
values); and the temporary memory of its operations, measured by PeakMeter
(allocator statistics on CUDA, the profiler's allocation events on CPU):

    fwd_overhead = max(peak keeping all - abar[i], peak keeping none - a[i])
    bwd_overhead = peak of the backward - bytes of the input's gradient

so that the SPEC's figure for an op (held + what it adds + overhead) bounds
what the op really takes, whichever way the schedule runs it. The first
term alone (fall_overhead, kept in the chain's profile metadata) is what a
Fall really adds: predictions use it for Fall ops (see _budget). Parameter
gradients are computed in each backward (as autograd.grad returns them) and
count as temporaries, as they are when .grad already exists and autograd
adds into it.

What the chain's stages cannot hold is counted as held for the whole step
(`step_reserve`): the RNG states the executor keeps for random stages and
room for the small tensors no stage measures.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List, Set, Tuple

import torch

from ._executor import boundary
from ._memory import PeakMeter
from ._tensors import FreeKey, dense_bytes, keys_of, saving, sync, unique_bytes

# Counted as held: room for the step's small tensors no stage measures (the
# loss scalar and its seed, index and statistics tensors, the executor's
# bookkeeping), which grow with the number of operators.
RESERVE = 4096
RESERVE_PER_OP = 64


def rng_state_bytes(device: torch.device) -> int:
    """What the executor's RngState of one stage holds: the CPU generator's
    state, and the device's."""
    n = torch.get_rng_state().nbytes
    if device.type == "cuda":
        n += torch.cuda.get_rng_state(device).nbytes
    return n


def step_reserve(device: torch.device, random_stages: int, ops: int) -> int:
    """Held for the whole step besides the values: the RNG states of the
    stages that draw random numbers, and RESERVE for the small tensors."""
    return random_stages * rng_state_bytes(device) + RESERVE + RESERVE_PER_OP * ops


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

    name = "stage"

    def fwd(self, grad: bool, keep: bool = True) -> "StageProbe.Result":
        """One run: with grad, keeping what autograd saves (or, keep=False, a
        placeholder for it, as the main forward's Fn), or without grad."""
        raise NotImplementedError

    @staticmethod
    def hooks(free: Set[FreeKey], saved: List[torch.Tensor], keep: bool) -> Any:
        """The saved-tensor hooks of a probe's run (see _tensors.saving)."""
        return saving(free, saved, keep)

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


def through_boundary(leaves: List[torch.Tensor]) -> List[torch.Tensor]:
    """Stage inputs as the executor gives them: out of a boundary node, so
    that gradients from several readers are summed in that node's input
    buffer (out of place), not into a leaf's .grad (in place)."""
    return boundary(None, 0, leaves)


def measure(run: StageProbe, repeat: int, device: torch.device, outputs_held: bool = False,
            loss_output: bool = False) -> Dict[str, Any]:
    """The chain fields of one stage (times in ms, sizes in bytes), plus
    "held_outputs" and "fall_overhead" for the caller to take out. With
    outputs_held (the model's outputs: the caller holds them through the
    backward, so they are counted as held), a[i] is empty and the outputs'
    storages count neither in abar[i] nor in the overheads; d[i] is the
    gradient the caller sends back (nothing with loss_output: the model
    returns a scalar "loss" and backward starts from it). Leaves the
    values of the last run in the run for the next stages."""
    f_ms: List[float] = []
    b_ms: List[float] = []
    n = max(1, repeat)
    for r in range(n):
        sync(device)
        t0 = time.perf_counter()
        res = run.fwd(True)
        sync(device)
        t1 = time.perf_counter()
        if r == n - 1:
            sizes = _sizes(res, outputs_held, loss_output)
        seeds = run.seeds(res)
        sync(device)
        t2 = time.perf_counter()
        run.bwd(res, seeds)
        sync(device)
        f_ms.append((t1 - t0) * 1e3)
        b_ms.append((time.perf_counter() - t2) * 1e3)
        del res, seeds
    a_bytes, saved_bytes, grad_bytes, held_out = sizes
    with PeakMeter(device) as m:
        run.fwd(False)  # Fn / Fck in a recomputation
    ovh_none = m.peak - a_bytes - held_out
    with PeakMeter(device) as m:
        run.fwd(True, keep=False)  # Fn / Fck in the model's forward
    ovh_none = max(ovh_none, m.peak - a_bytes - held_out)
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
    return {"name": run.name, "fwd_time": statistics.median(f_ms),
            "bwd_time": statistics.median(b_ms), "out_bytes": int(a_bytes),
            "saved_bytes": int(saved_bytes), "grad_bytes": int(grad_bytes),
            "fwd_overhead": int(max(0, ovh_keep, ovh_none)), "bwd_overhead": int(max(0, ovh_bwd)),
            "held_outputs": int(held_out), "fall_overhead": int(max(0, ovh_keep))}


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

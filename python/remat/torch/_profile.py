"""Measuring stages (rotor's paper, section 5.1) into a remat chain.

For each stage, on the example input: the median forward and backward
times over `repeat` runs; a[i], the storages of the values crossing its end;
abar[i], a[i] plus the storages autograd saves, less the stage's input (held
as a[i-1]) and everything held anyway (parameters, buffers, inputs, held
values); and the temporary memory of its operations, measured by PeakMeter
(allocator statistics on CUDA, the profiler's allocation events on CPU):

    fwd_overhead = max(peak keeping all - abar[i], peak keeping none - a[i])
    bwd_overhead = peak of the backward - bytes of the input's gradient

so that the SPEC's figure for an op (held + what it adds + overhead) bounds
what the op really takes, whichever way the schedule runs it. Parameter
gradients are computed in each backward (as autograd.grad returns them) and
count as temporaries, as they are when .grad already exists and autograd
adds into it.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Dict, Iterable, List, Set, Tuple

import torch

from ._memory import PeakMeter

FreeKey = Tuple[str, int]


def unique_bytes(tensors: Iterable[torch.Tensor], exclude: Set[FreeKey] = frozenset()) -> int:
    seen: Dict[FreeKey, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        key = (t.device.type, s.data_ptr())
        if key not in exclude and s.data_ptr() != 0:
            seen[key] = s.nbytes()
    return sum(seen.values())


def dense_bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def keys_of(tensors: Iterable[torch.Tensor]) -> Set[FreeKey]:
    return {(t.device.type, t.untyped_storage().data_ptr()) for t in tensors}


class StageRun:
    """One stage on fixed inputs, for measuring. Subclasses implement fwd
    (returns a Result) and bwd."""

    class Result:
        def __init__(self, a: List[torch.Tensor], saved: List[torch.Tensor],
                     graph_outs: List[torch.Tensor], inputs: List[torch.Tensor],
                     free: Set[FreeKey]) -> None:
            self.a, self.saved, self.graph_outs, self.inputs = a, saved, graph_outs, inputs
            self.free = free  # storages held anyway while this result lives

    name = "stage"

    def fwd(self, grad: bool) -> "StageRun.Result":
        raise NotImplementedError

    def bwd(self, res: "StageRun.Result") -> List[torch.Tensor]:
        """Backward of res.graph_outs; returns the gradients of res.inputs.
        Parameters take part through proxies (see proxies()), so their
        gradients are added into an existing .grad, as in training, and no
        hook of the real parameters (the user's, DDP's) fires."""
        outs = [o for o in res.graph_outs if o.requires_grad]
        if not outs:
            return []
        grads = [torch.ones_like(o) for o in outs]
        ins = [t for t in res.inputs if t.requires_grad]
        wrt = ins + [p for p in self.proxies.values() if p.requires_grad]
        torch.autograd.backward(outs, grads, inputs=wrt)
        out = [t.grad for t in ins if t.grad is not None]
        for t in ins:
            t.grad = None
        return out

    proxies: Dict[int, torch.Tensor] = {}

    def proxy(self, p: torch.Tensor) -> torch.Tensor:
        """A leaf sharing p's storage, with a zero .grad made up front."""
        if not isinstance(self.proxies, dict) or self.proxies is StageRun.proxies:
            self.proxies = {}
        q = self.proxies.get(id(p))
        if q is None:
            q = p.detach().requires_grad_(p.requires_grad)
            if q.requires_grad:
                q.grad = torch.zeros_like(q)
            self.proxies[id(p)] = q
        return q


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(run: StageRun, repeat: int, device: torch.device, outputs_held: bool = False
            ) -> Dict[str, Any]:
    """The chain fields of one stage (times in ms, sizes in bytes). With
    outputs_held (the model's outputs: the caller holds them through the
    backward, so they are counted as held), a[i] is empty and the outputs'
    storages count neither in abar[i] nor in the overheads."""
    f_ms: List[float] = []
    b_ms: List[float] = []
    for _ in range(max(1, repeat)):
        _sync(device)
        t0 = time.perf_counter()
        res = run.fwd(True)
        _sync(device)
        t1 = time.perf_counter()
        run.bwd(res)
        _sync(device)
        t2 = time.perf_counter()
        f_ms.append((t1 - t0) * 1e3)
        b_ms.append((t2 - t1) * 1e3)
        del res
    res = run.fwd(True)
    inputs = keys_of(res.inputs)
    out_keys = keys_of(res.a) if outputs_held else set()
    held_out = unique_bytes(res.a, res.free | inputs) if outputs_held else 0
    a_bytes = unique_bytes(res.a, res.free | out_keys)
    saved_bytes = unique_bytes(list(res.saved) + list(res.a), res.free | inputs | out_keys)
    saved_bytes = max(saved_bytes, a_bytes)
    grad_bytes = 0 if outputs_held else dense_bytes(res.a)
    del res
    with PeakMeter(device) as m:
        res = run.fwd(True)
    ovh_keep = m.peak - saved_bytes - held_out
    del res
    with PeakMeter(device) as m:
        res = run.fwd(False)
    ovh_none = m.peak - a_bytes - held_out
    del res
    res = run.fwd(True)
    res.saved = []  # the executor frees each saved tensor after its node's backward, as eager
    with PeakMeter(device) as m:
        d = run.bwd(res)
    ovh_bwd = m.peak - dense_bytes(d)
    del res, d
    return {"name": run.name, "fwd_time": statistics.median(f_ms),
            "bwd_time": statistics.median(b_ms), "out_bytes": int(a_bytes),
            "saved_bytes": int(saved_bytes), "grad_bytes": int(grad_bytes),
            "fwd_overhead": int(max(0, ovh_keep, ovh_none)), "bwd_overhead": int(max(0, ovh_bwd)),
            "held_outputs": int(held_out)}

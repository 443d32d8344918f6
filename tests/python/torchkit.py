"""Helpers for the PyTorch tests: wrapping, one training step, bitwise
comparison with plain autograd, the limits to test at, measured peaks."""
from __future__ import annotations

import copy
import warnings
from typing import Any, Dict, List, Tuple

import torch

import remat
import remat.torch as rt

torch.set_num_threads(2)


def wrap(model: torch.nn.Module, args: tuple, kwargs: dict, memory: Any = 1.0,
         **kw: Any) -> rt.RematModule:
    """remat.torch.checkpoint with test settings (no disk cache, one timing run)."""
    kw.setdefault("cache", False)
    kw.setdefault("repeat", 1)
    kw.setdefault("progress", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.checkpoint(model, args, kwargs, memory=memory, **kw)


def loss_of(out: Any) -> torch.Tensor:
    """A scalar from any output, cheap in memory (sums: their backward
    sends expanded gradients, so the caller's loss adds almost nothing)."""
    if getattr(out, "loss", None) is not None:
        return out.loss
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state.sum() + out.pooler_output.sum()
    if isinstance(out, dict):
        return out["out"].sum() + sum(out["aux"])
    return out.sum()


def zero_grads(model: torch.nn.Module) -> None:
    """Gradients allocated and zero (as after optimizer.zero_grad(set_to_none=False))."""
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()


def step(model: torch.nn.Module, args: tuple, kwargs: dict, seed: int = 7) -> torch.Tensor:
    """One training step as a typical loop writes it: the output object is
    alive during backward (remat counts the outputs as held)."""
    torch.manual_seed(seed)
    out = model(*args, **kwargs)
    loss = loss_of(out)
    loss.backward()
    del out
    return loss.detach()


def two_backwards(models: List[torch.nn.Module], args: tuple, kwargs: dict,
                  seed: int = 5) -> None:
    """For each model: a forward, then two backwards over its graph (the
    first with retain_graph)."""
    for m in models:
        zero_grads(m)
        torch.manual_seed(seed)
        loss = m(*args, **kwargs).loss
        loss.backward(retain_graph=True)
        loss.backward()


def state(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    out = {"grad." + n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    out.update({"buf." + n: b.clone() for n, b in model.named_buffers()})
    return out


def assert_same(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    bad = [k for k in a if not torch.equal(a[k], b[k])]
    assert not bad, "differ from plain autograd: %s" % bad[:5]


def same_step(ref: torch.nn.Module, w: torch.nn.Module, args: tuple, kwargs: dict,
              seed: int = 7) -> None:
    """One step of each from the same state: equal losses, grads and buffers."""
    zero_grads(ref)
    zero_grads(w)
    l0 = step(ref, args, kwargs, seed)
    l1 = step(w, args, kwargs, seed)
    assert torch.equal(l0, l1)
    assert_same(state(ref), state(w))


def measured_peak(model: torch.nn.Module, args: tuple, kwargs: dict) -> int:
    """Peak bytes of one step above its start, from the profiler's allocation
    events (not remat's bookkeeping); gradients exist before it starts.
    Fails if the step leaves anything allocated (a leak grows every step)."""
    zero_grads(model)
    with rt.PeakMeter() as m:
        step(model, args, kwargs)
    assert m.end <= 0, "%d bytes outlive the step" % m.end
    return m.peak


def limits(w: rt.RematModule, algorithm: str = "optimal") -> List[int]:
    """Three limits: the smallest feasible one, halfway, plain autograd's peak."""
    e = w.last_entry
    plain = e.plain_peak
    try:
        w.set_memory(1, algorithm=algorithm)
    except remat.InfeasibleError as err:
        low = err.min_memory
    else:
        low = 1
    return sorted({low, (low + plain) // 2, plain})


def copies(model: torch.nn.Module) -> Tuple[torch.nn.Module, torch.nn.Module]:
    return copy.deepcopy(model), copy.deepcopy(model)

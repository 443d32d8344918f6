"""Helpers for the PyTorch tests: wrapping, one training step, bitwise
comparison with plain autograd, the limits to test at, measured peaks."""
from __future__ import annotations

import copy
import os
import warnings
from typing import Any, Dict, List, Tuple

import torch

import remat
import remat.torch as rt

torch.set_num_threads(2)
# REMAT_TEST_KERNELS=plain (conftest.py): convolutions by ATen's own kernels,
# not oneDNN's. Set here too for the processes the tests spawn.
if os.environ.get("REMAT_TEST_KERNELS") == "plain":
    torch.backends.mkldnn.enabled = False


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


def _smallest(w: rt.RematModule, algorithm: str, bandwidth: Any) -> int:
    """The smallest limit w accepts for its input (w is left unsolved)."""
    try:
        w.set_memory(1, algorithm=algorithm, bandwidth=bandwidth)
    except remat.InfeasibleError as err:
        return int(err.min_memory)
    return 1


def bounds(w: rt.RematModule, algorithm: str = "optimal", bandwidth: Any = None
           ) -> Tuple[int, int]:
    """(the smallest limit w accepts, plain autograd's predicted peak) for
    w's one prepared input, as the public API gives them. Both depend on the
    CPU's kernels (their workspaces: ResNet-50's smallest limit is 0.86 of
    plain with oneDNN on one CPU, 0.45 without), so tests take their limits
    from these, never as fixed fractions of plain. w keeps its settings."""
    cfg = w.remat_config
    memory, before = cfg.memory, cfg.algorithm
    low = _smallest(w, algorithm, bandwidth)
    w.set_memory(memory, algorithm=before)
    return low, w.last_entry.plain_peak


def between(low: int, plain: int, t: float) -> int:
    """The limit t of the way from `low` (t = 0) to `plain` (t = 1)."""
    return low + int(t * (plain - low))


def hookless(w: rt.RematModule) -> bool:
    """Whether w's steps run as plain autograd, without hooks (the executor's
    Step.all_native: memory=1.0's store-all plan). Budget.predict counts
    what such a step frees sooner or never holds."""
    from remat.torch._executor import OFFLOAD_OPS, native_stages
    e = w.last_entry
    L = e.chain.n - 1
    return all(j in native_stages(e.plan) for j in range(1, L + 1)) and \
        not any(st.kind in OFFLOAD_OPS for st in e.plan.steps)


def limit_at(w: rt.RematModule, t: float, algorithm: str = "optimal",
             bandwidth: Any = None) -> int:
    """Solves w for the limit t of the way from its smallest accepted one
    (t = 0) to plain autograd's peak (t = 1), and returns it."""
    low = _smallest(w, algorithm, bandwidth)
    limit = between(low, w.last_entry.plain_peak, t)
    w.set_memory(limit, algorithm=algorithm, bandwidth=bandwidth)
    return limit


def fraction_at(t: float, *ws: rt.RematModule) -> float:
    """A fraction of plain autograd's peak (memory=float: of each input's
    own) t of the way from the smallest to plain for whichever of ws (one
    prepared input each, e.g. the inputs a test will feed one module) needs
    the most, so that every one of them accepts it."""
    need = max(low / plain for low, plain in map(bounds, ws))
    return need + t * (1 - need)


def limits(w: rt.RematModule, algorithm: str = "optimal") -> List[int]:
    """Three limits: the smallest feasible one, halfway, plain autograd's peak."""
    low, plain = bounds(w, algorithm)
    return sorted({low, between(low, plain, 0.5), plain})


def limits_of_largest(w: rt.RematModule) -> List[int]:
    """torchkit.limits for a module with several inputs prepared, the last
    the largest: its smallest accepted limit (set_memory solves every input
    and names the first that does not fit), halfway, its plain peak."""
    low = 1
    while True:
        try:
            w.set_memory(low)
            break
        except remat.InfeasibleError as e:
            assert e.min_memory > low
            low = int(e.min_memory)
    plain = w.last_entry.plain_peak
    return sorted({low, between(low, plain, 0.5), plain})


def recomputes(sched: "remat.Schedule") -> bool:
    """Whether the schedule runs some stage's forward more than once, or
    makes a partial save ("Fall i/k": its B runs the stage again)."""
    fwd = [op.split()[1].split("/")[0] for op in sched.ops if op.startswith("F")]
    return len(fwd) > len(set(fwd)) or any(
        op.startswith("Fall ") and "/" in op for op in sched.ops)


def copies(model: torch.nn.Module) -> Tuple[torch.nn.Module, torch.nn.Module]:
    return copy.deepcopy(model), copy.deepcopy(model)

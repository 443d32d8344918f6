"""Capturing the model with torch.export, and checking that the graph runs
the kernels eager runs.

Why torch.export: its training IR keeps the operators eager PyTorch runs
(aten.linear, conv2d, batch_norm with its in-place statistics update, relu_,
dropout, scaled_dot_product_attention), so replaying the graph op by op calls
the same kernels as the model's own forward and gives bitwise-equal results.
It records parameters, buffers and user inputs by name, and its non-strict
mode runs the model's Python, so most Hugging Face models export as they are.
torch.fx.symbolic_trace stops at the first shape-dependent branch.
"""
from __future__ import annotations

import inspect
import sys
import weakref
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .._memory import fd2_to
from .._program import Args, Kwargs
from .._tensors import leave_no_trace, tensors_in


def dynamic_shapes(model: torch.nn.Module, args: Args, kwargs: Kwargs) -> Optional[Any]:
    """torch.export's dynamic_shapes with every dimension of every input tensor
    left to export (Dim.AUTO: dynamic where the model allows, fixed where it
    fixes it, as a weight's size fixes a feature dimension; a size of 0 or 1
    is fixed by export itself), by the names of the forward's parameters;
    None where this torch has no Dim.AUTO (before 2.6) or the call does not
    bind to the forward's signature."""
    auto = getattr(getattr(torch.export, "Dim", None), "AUTO", None)
    if auto is None:
        return None
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None

    def spec(t: Any) -> Any:  # (a size 0 or 1 would be fixed, with a warning)
        return {i: auto for i in range(t.dim()) if t.shape[i] > 1} \
            if isinstance(t, torch.Tensor) else None
    return {name: pytree.tree_map(spec, v) for name, v in bound.arguments.items()}


def export_model(model: torch.nn.Module, args: Args, kwargs: Kwargs,
                 dynamic: Optional[Any] = None) -> Any:
    """The training-IR ExportedProgram of model(*args, **kwargs).

    Libraries branch on torch.compiler.is_exporting() / is_compiling() (and
    Hugging Face also on whether a tensor is a FakeTensor) to build graphs
    that stay valid for other shapes: Hugging Face builds an explicit causal
    mask instead of passing is_causal=True to SDPA, which computes the same
    values with other kernels, so gradients differ in the last bits. remat
    captures again whenever a shape changes, so it first captures with those
    checks reporting False: the code takes the path eager runs. Non-strict
    export cannot quietly specialize on tensor values (reading one raises),
    so only shape-based choices change; if that path reads values, the
    capture is done again as a plain export. `dynamic`: dynamic_shapes()
    (then each node's value in the graph has symbolic sizes, and the graph
    runs any shape its range constraints admit)."""
    fn = getattr(torch.export, "export_for_training", None)  # torch 2.5 .. 2.8
    export = fn if fn is not None else torch.export.export
    extra = {} if dynamic is None else {"dynamic_shapes": dynamic}
    try:
        with _as_eager(), fd2_to():  # a failure here prints whole graphs, then is retried
            return export(model, args, kwargs, strict=False, **extra)
    except Exception:  # the eager path reads values: capture the traced path
        return export(model, args, kwargs, strict=False, **extra)


class _as_eager:
    """torch.compiler.is_exporting() and is_compiling() report False, and so
    does transformers' is_fake_tensor (where transformers is loaded)."""

    def __enter__(self) -> None:
        self.saved: List[Tuple[Any, str, Any]] = []
        targets: List[Tuple[Any, Tuple[str, ...]]] = [
            (torch.compiler, ("is_exporting", "is_compiling"))]
        hf = sys.modules.get("transformers.utils.import_utils")
        if hf is not None:
            targets.append((hf, ("is_fake_tensor",)))
        for mod, names in targets:
            for n in names:
                if hasattr(mod, n):
                    self.saved.append((mod, n, getattr(mod, n)))
                    setattr(mod, n, _false)

    def __exit__(self, *exc: Any) -> None:
        for mod, n, f in self.saved:
            setattr(mod, n, f)


def _false(*args: Any, **kwargs: Any) -> bool:
    return False


def eager_forward(owner: torch.nn.Module, m: torch.nn.Module, args: Args, kwargs: Kwargs
                  ) -> None:
    """m(*args, **kwargs) without grad, from seed 0; owner's buffers (BatchNorm
    statistics) and the RNG are left as they were."""
    with leave_no_trace(owner), torch.no_grad():
        torch.manual_seed(0)
        m(*args, **kwargs)

def custom_functions(model: torch.nn.Module, args: Args, kwargs: Kwargs) -> List[str]:
    """The custom autograd Functions (subclasses of torch.autograd.Function)
    one forward of `model` calls, by name. torch.export traces only their
    forward, so a graph of a model that calls one back-propagates through
    the forward's operators instead of the Function's own backward: other
    gradients (BLOOM's GELU: the last bits; a straight-through estimator:
    all of them). The forward runs with grad, but its saved tensors are
    dropped as they are packed, so it holds what one without grad holds.
    Buffers and the RNG are left as they were."""
    names: Dict[str, None] = {}
    try:
        with leave_no_trace(model), torch.enable_grad(), \
                torch.autograd.graph.saved_tensors_hooks(_dropped, _never_unpacked):
            torch.manual_seed(0)
            todo = [t.grad_fn for t in tensors_in(model(*args, **kwargs))
                    if t.grad_fn is not None]
    except Exception:  # noqa: BLE001 (a forward that needs its saved tensors: none found)
        return []
    seen: Set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            names[type(node).__name__.removesuffix("Backward")] = None
        todo.extend(n for n, _ in node.next_functions if n is not None)
    return list(names)


def _dropped(t: torch.Tensor) -> None:
    return None


def _never_unpacked(h: Any) -> torch.Tensor:
    raise RuntimeError("remat: custom_functions' forward runs no backward")


_IGNORED_OPS = ("aten._assert", "aten.detach", "aten.alias", "aten.lift_fresh")


class _OpLog(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The ops reached from the parameters, with their output shapes. Mask
    and index building (from inputs alone) and views are left out: they may
    differ without changing any value autograd sees."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: List[Tuple[str, Tuple[Any, ...]]] = []
        # storage address -> tensors reached with it (weakly: once they are
        # gone, the address may come back for an unrelated tensor)
        self.reached: Dict[int, List[Any]] = {}
        for p in params:
            self._mark(p)

    def _mark(self, t: torch.Tensor) -> None:
        self.reached.setdefault(t.untyped_storage().data_ptr(), []).append(weakref.ref(t))

    def _is_reached(self, t: torch.Tensor) -> bool:
        refs = self.reached.get(t.untyped_storage().data_ptr())
        if refs is None:
            return False
        refs[:] = [r for r in refs if r() is not None]
        return bool(refs)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        ins = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if any(self._is_reached(a) for a in ins):
            outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            for t in outs:
                self._mark(t)
            name = str(func).rsplit(".", 1)[0]
            ptrs = {a.untyped_storage().data_ptr() for a in ins}
            views = all(t.untyped_storage().data_ptr() in ptrs for t in outs)
            if not name.startswith(_IGNORED_OPS) and not views:  # views change nothing
                self.ops.append((name, tuple((tuple(t.shape), str(t.dtype)) for t in outs)))
        return out


def first_difference(model: torch.nn.Module, graph_module: torch.nn.Module, args: Args,
                     kwargs: Kwargs) -> Optional[str]:
    """None when one no-grad forward of `model` and of the captured graph
    dispatch the same operators (by name and output shape) on everything
    computed from the parameters; else the first difference. Libraries may
    take other code paths while traced (Hugging Face repeats the key/value
    heads of grouped-query attention and builds an explicit mask where eager
    calls SDPA with enable_gqa and is_causal): the values agree, but the
    backward kernels differ and gradients change in the last bits. Buffers
    and the RNG are left as they were."""
    logs = []
    for m in (model, graph_module):
        with _OpLog(list(m.parameters())) as log:
            eager_forward(model, m, args, kwargs)
        logs.append(log.ops)
    a, b = logs
    if a == b:
        return None
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "operator %d: eager runs %s, the graph %s" % (
        k, a[k][0] if k < len(a) else "nothing", b[k][0] if k < len(b) else "nothing")

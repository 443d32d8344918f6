"""Grouped matmuls as eager runs them: a mixture of experts exported by
torch.export calls transformers' loop fallback where eager calls
torch's grouped matmul kernel; the graph's calls are made eager's again
(match_eager_grouped_mm), so its gradients are eager's bit for bit.

Why the graph differs. transformers' `_grouped_mm` takes torch's kernel
(`torch.nn.functional.grouped_mm`, dispatched as `aten._grouped_mm`) unless
`torch.compiler.is_compiling()` is True and the weights are not bf16 (and
on CUDA before compute capability 8, or old CPU builds); then it calls its
custom operator `transformers::grouped_mm_fallback`, a loop of `mm` over
the experts. export.export_model first captures with is_compiling()
reporting False, but transformers 5 reads the position ids (its packed-
sequence check) on that path, so the capture that succeeds is the traced
one, which takes the fallback. Both compute the same values with other
kernels, so the gradients differ in the last bits.

Why rewriting is exact. Both operators take the same (input, weight,
offsets) and return (tokens, out_features); the routing (softmax, top-k,
the sort by expert, histc, cumsum of the token counts) is ordinary graph
nodes before them, identical in eager and in the graph. The offsets are a
tensor, not a shape: per-expert token counts never become shapes on this
path, so the graph has no data-dependent shape. A recomputation runs the
same routing ops on bitwise the same inputs (with the stage's RNG state
replayed for router jitter noise), so it routes exactly as the forward did,
ties in top-k included.
"""
from __future__ import annotations

from typing import Any, List, Sequence

import torch
from torch import fx
from torch.utils._python_dispatch import TorchDispatchMode

from .._program import Args, Kwargs
from .export import eager_forward

# The traced fallback's operator name -> the kernel eager runs instead.
_EAGER_KERNEL = "aten._grouped_mm"
_FALLBACKS = ("transformers.grouped_mm_fallback",)


def _op_name(target: Any) -> str:
    """"aten._grouped_mm" for aten._grouped_mm.default (overload dropped)."""
    return str(target).rsplit(".", 1)[0]


def _grouped_calls(gm: fx.GraphModule) -> List[fx.Node]:
    names = (_EAGER_KERNEL,) + _FALLBACKS
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and _op_name(n.target) in names]


def _bind(n: fx.Node, names: Sequence[str]) -> List[Any]:
    return [n.args[i] if i < len(n.args) else n.kwargs[k] for i, k in enumerate(names)]


def has_grouped_fallback(gm: fx.GraphModule) -> bool:
    """Whether the graph calls a traced grouped-matmul fallback (only then is
    eager's record worth a forward)."""
    return any(_op_name(n.target) in _FALLBACKS for n in _grouped_calls(gm))


class _GroupedLog(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The grouped-matmul operators an eager forward dispatches, in order."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls: List[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = _op_name(func)
        if name == _EAGER_KERNEL or name in _FALLBACKS:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def eager_grouped_calls(model: torch.nn.Module, args: Args, kwargs: Kwargs) -> List[str]:
    """match_eager_grouped_mm's record: one no-grad eager forward, leaving no
    trace (buffers and the RNG as they were)."""
    log = _GroupedLog()
    with log:
        eager_forward(model, model, args, kwargs)
    return log.calls


def match_eager_grouped_mm(gm: fx.GraphModule, eager: Sequence[str]) -> int:
    """Makes each traced fallback call of the graph the kernel eager called
    in the same place (`eager`: one name per grouped call of an eager
    forward, in order); returns how many calls changed. Nothing changes when
    the calls do not pair up (another count: the model's code differs
    between eager and the trace beyond this choice), and export's check
    (first_difference) then sends the model to the module path."""
    calls = _grouped_calls(gm)
    if len(calls) != len(eager):
        return 0
    kernel = torch.ops.aten._grouped_mm.default
    changed = 0
    for n, want in zip(calls, eager):
        if want != _EAGER_KERNEL or _op_name(n.target) not in _FALLBACKS:
            continue
        x, w, offs = _bind(n, ("input", "weight", "offs"))
        n.target = kernel
        n.args, n.kwargs = (x, w), {"offs": offs}
        changed += 1
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed

"""Finding the blocks of the module path: the longest run of submodule
calls passing tensors one to the next.

Forward hooks record every submodule call on the example input. Calls that
are children of the same call form a list; a child whose own children pass
one to the next from its input to its output (an nn.Sequential, a ResNet
stage) is replaced by them. In each list, a run is a stretch of calls where
each call receives, as some of its arguments, the very tensors the previous
call returned (`h = layer(h, mask)`): those tensors cross the boundary. The
longest run, of at least two calls, gives stages 1..L.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch import nn

from .._program import Args, CaptureError, Kwargs


@dataclasses.dataclass
class _Call:
    module: nn.Module
    name: str
    parent: int
    args: Args
    kwargs: Kwargs
    output: Any = None
    children: List[int] = dataclasses.field(default_factory=list)
    # the tensors' version counters when the call began (arguments) and
    # ended (output): a link holds only for a tensor nothing changed in place
    # in between (a residual `out += identity` after a block of a ResNet
    # bottleneck: recomputing the next block from what the block returned
    # would miss the addition)
    arg_versions: Dict[int, int] = dataclasses.field(default_factory=dict)
    out_versions: Dict[int, int] = dataclasses.field(default_factory=dict)


def record_calls(model: nn.Module, args: Args, kwargs: Kwargs) -> List[_Call]:
    """Every submodule call of model(*args, **kwargs), in call order."""
    calls: List[_Call] = [_Call(model, "", -1, args, kwargs)]
    stack = [0]
    handles = []

    def pre(name: str) -> Any:
        def hook(mod: nn.Module, a: Tuple[Any, ...], kw: Kwargs) -> None:
            calls.append(_Call(mod, name, stack[-1], a, kw, arg_versions=_versions((a, kw))))
            calls[stack[-1]].children.append(len(calls) - 1)
            stack.append(len(calls) - 1)
        return hook

    def post(mod: nn.Module, a: Tuple[Any, ...], kw: Kwargs, out: Any) -> None:
        c = calls[stack.pop()]
        c.output, c.out_versions = out, _versions(out)

    for name, mod in model.named_modules():
        if mod is model:
            continue
        handles.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True, always_call=True))
    try:
        calls[0].arg_versions = _versions((args, kwargs))
        calls[0].output = model(*args, **kwargs)
        calls[0].out_versions = _versions(calls[0].output)
    finally:
        for h in handles:
            h.remove()
    return calls


def version(t: torch.Tensor) -> int:
    """t's version counter; -1 for an inference tensor, which has none."""
    return -1 if t.is_inference() else t._version


def _versions(x: Any) -> Dict[int, int]:
    return {id(t): version(t) for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)}


def tensor_slots(args: Args, kwargs: Kwargs) -> List[Tuple[Any, torch.Tensor]]:
    """(slot, tensor) for the tensor arguments: slot is an int or a name."""
    out: List[Tuple[Any, torch.Tensor]] = [(i, a) for i, a in enumerate(args)
                                           if isinstance(a, torch.Tensor)]
    out += [(k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    return out


def _links(prev: _Call, nxt: _Call) -> List[Tuple[Any, int]]:
    """(slot of nxt, index of the tensor leaf of prev's output) it receives,
    unchanged since prev returned it."""
    leaves = [x for x in pytree.tree_leaves(prev.output)]
    ids = {id(x): i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)}
    return [(slot, ids[id(t)]) for slot, t in tensor_slots(nxt.args, nxt.kwargs)
            if id(t) in ids and nxt.arg_versions.get(id(t)) == prev.out_versions.get(id(t))]


def _expand(calls: List[_Call], idx: List[int]) -> List[int]:
    """Replaces containers whose children chain from its input to its output
    by those children (recursively)."""
    out: List[int] = []
    for i in idx:
        c = calls[i]
        kids = c.children
        if len(kids) >= 2 and _chains(calls, kids) and _enters(c, calls[kids[0]]) \
                and _leaves_as(calls[kids[-1]], c):
            out.extend(_expand(calls, kids))
        else:
            out.append(i)
    return out


def _chains(calls: List[_Call], idx: Sequence[int]) -> bool:
    return all(_links(calls[a], calls[b]) for a, b in zip(idx, idx[1:]))


def _enters(parent: _Call, first: _Call) -> bool:
    ids = {id(t) for _, t in tensor_slots(parent.args, parent.kwargs)}
    return any(id(t) in ids and first.arg_versions.get(id(t)) == parent.arg_versions.get(id(t))
               for _, t in tensor_slots(first.args, first.kwargs))


def _leaves_as(last: _Call, parent: _Call) -> bool:
    a = [id(x) for x in pytree.tree_leaves(last.output) if isinstance(x, torch.Tensor)]
    b = [id(x) for x in pytree.tree_leaves(parent.output) if isinstance(x, torch.Tensor)]
    return bool(a) and a == b and last.out_versions == parent.out_versions


def _longest_run(calls: List[_Call]) -> List[int]:
    best: List[int] = []
    for c in calls:
        if not c.children:
            continue
        seq = _expand(calls, c.children)
        run = [seq[0]]
        for a, b in zip(seq, seq[1:]):
            if _links(calls[a], calls[b]):
                run.append(b)
            else:
                best = run if len(run) > len(best) else best
                run = [b]
        best = run if len(run) > len(best) else best
    return best


class Block:
    """Stage j: a block, which of its argument slots are the boundary, which
    output leaves make a[j], and which call of its module it was in the
    example (`nth`, from 0: a module may be called before its block call,
    or be several blocks)."""

    def __init__(self, index: int, module: nn.Module, name: str, in_slots: List[Any],
                 out_leaves: List[int], nth: int = 0) -> None:
        self.index, self.module, self.name = index, module, name
        self.in_slots, self.out_leaves = in_slots, out_leaves
        self.nth = nth


def distinct_modules(blocks: Sequence[Block]) -> List[nn.Module]:
    """The blocks' modules, each once, in block order."""
    out: List[nn.Module] = []
    for b in blocks:
        if not any(m is b.module for m in out):
            out.append(b.module)
    return out


def set_slots(args: Args, kwargs: Kwargs, slots: Sequence[Any], values: Sequence[Any]
               ) -> Tuple[Args, Kwargs]:
    a, kw = list(args), dict(kwargs)
    for s, v in zip(slots, values):
        if isinstance(s, int):
            a[s] = v
        else:
            kw[s] = v
    return tuple(a), kw


def get_slots(args: Args, kwargs: Kwargs, slots: Sequence[Any]) -> List[Any]:
    return [args[s] if isinstance(s, int) else kwargs[s] for s in slots]


def find_blocks(model: nn.Module, args: Args, kwargs: Kwargs) -> List[Block]:
    """The blocks of the longest run on the example input (the caller keeps
    buffers and the RNG as they were); CaptureError when there is none."""
    calls = record_calls(model, args, kwargs)
    run = _longest_run(calls)
    if len(run) < 2:
        raise CaptureError("no run of two or more submodules passing tensors one to the "
                           "next was found (found %d)" % len(run))
    blocks: List[Block] = []
    for k, i in enumerate(run):
        c = calls[i]
        if k + 1 < len(run):
            links = _links(c, calls[run[k + 1]])
            out_leaves = [leaf for _, leaf in links]
        else:
            leaves = pytree.tree_leaves(c.output)
            out_leaves = [j for j, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        in_slots = [s for s, _ in _links(calls[run[k - 1]], c)] if k else \
            [s for s, t in tensor_slots(c.args, c.kwargs) if t.is_floating_point()][:1]
        nth = sum(1 for d in calls[:i] if d.module is c.module)
        blocks.append(Block(k + 1, c.module, c.name or type(c.module).__name__,
                            in_slots, out_leaves, nth))
    for a, b in zip(blocks, blocks[1:]):
        if a.module is b.module:
            raise CaptureError("block %s is called twice in a row; remat needs distinct "
                               "blocks" % a.name)
    return blocks

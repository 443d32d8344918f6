"""The module path: when torch.export cannot capture the model (data-dependent
control flow, say), the stages are the longest run of blocks the model calls
in sequence.

Finding the run. Forward hooks record every submodule call on the example
input. Calls that are children of the same call form a list; a child whose
own children pass one to the next from its input to its output (an
nn.Sequential, a ResNet stage) is replaced by them. In each list, a run is a
stretch of calls where each call receives, as some of its arguments, the very
tensors the previous call returned (`h = layer(h, mask)`): those tensors
cross the boundary. The longest run, of at least two calls, gives stages
1..L; the code before it (embeddings) and after it (head, loss) runs as
usual, and what it keeps is counted as held. The other tensor arguments of
the blocks (masks, rotary tables, a time embedding) are read again, as held
values, by recomputations.

Running. The model's own forward runs; hooks on the blocks carry out the
schedule around each call, exactly as the graph path does around each stage.
A block called out of the profiled order, or given something other than
what the previous block returned, stops the step with an error.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from . import _graph as G
from ._graph import Args, Kwargs
from ._executor import Runner, Step, boundary, rng_state_bytes
from ._memory import PeakMeter
from ._profile import (RESERVE, RESERVE_PER_OP, StageRun, dense_bytes, keys_of, measure,
                       through_boundary,
                       unique_bytes)

FreeKey = Tuple[str, int]


def _fk(t: torch.Tensor) -> FreeKey:
    return (t.device.type, t.untyped_storage().data_ptr())


@dataclasses.dataclass
class _Call:
    module: nn.Module
    name: str
    parent: int
    args: Args
    kwargs: Kwargs
    output: Any = None
    children: List[int] = dataclasses.field(default_factory=list)


def _record_calls(model: nn.Module, args: Args, kwargs: Kwargs) -> List[_Call]:
    """Every submodule call of model(*args, **kwargs), in call order."""
    calls: List[_Call] = [_Call(model, "", -1, args, kwargs)]
    stack = [0]
    handles = []

    def pre(name: str) -> Any:
        def hook(mod: nn.Module, a: Tuple[Any, ...], kw: Kwargs) -> None:
            calls.append(_Call(mod, name, stack[-1], a, kw))
            calls[stack[-1]].children.append(len(calls) - 1)
            stack.append(len(calls) - 1)
        return hook

    def post(mod: nn.Module, a: Tuple[Any, ...], kw: Kwargs, out: Any) -> None:
        calls[stack.pop()].output = out

    for name, mod in model.named_modules():
        if mod is model:
            continue
        handles.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True, always_call=True))
    try:
        calls[0].output = model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return calls


def _tensor_slots(args: Args, kwargs: Kwargs) -> List[Tuple[Any, torch.Tensor]]:
    """(slot, tensor) for the tensor arguments: slot is an int or a name."""
    out: List[Tuple[Any, torch.Tensor]] = [(i, a) for i, a in enumerate(args)
                                           if isinstance(a, torch.Tensor)]
    out += [(k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    return out


def _links(prev: _Call, nxt: _Call) -> List[Tuple[Any, int]]:
    """(slot of nxt, index of the tensor leaf of prev's output) it receives."""
    leaves = [x for x in pytree.tree_leaves(prev.output)]
    ids = {id(x): i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)}
    return [(slot, ids[id(t)]) for slot, t in _tensor_slots(nxt.args, nxt.kwargs) if id(t) in ids]


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
    ids = {id(t) for _, t in _tensor_slots(parent.args, parent.kwargs)}
    return any(id(t) in ids for _, t in _tensor_slots(first.args, first.kwargs))


def _leaves_as(last: _Call, parent: _Call) -> bool:
    a = [id(x) for x in pytree.tree_leaves(last.output) if isinstance(x, torch.Tensor)]
    b = [id(x) for x in pytree.tree_leaves(parent.output) if isinstance(x, torch.Tensor)]
    return bool(a) and a == b


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


class _Block:
    """Stage j: a block, which of its argument slots are the boundary, and
    which output leaves make a[j]."""

    def __init__(self, index: int, module: nn.Module, name: str, in_slots: List[Any],
                 out_leaves: List[int]) -> None:
        self.index, self.module, self.name = index, module, name
        self.in_slots, self.out_leaves = in_slots, out_leaves


def _set_slots(args: Args, kwargs: Kwargs, slots: Sequence[Any], values: Sequence[Any]
               ) -> Tuple[Args, Kwargs]:
    a, kw = list(args), dict(kwargs)
    for s, v in zip(slots, values):
        if isinstance(s, int):
            a[s] = v
        else:
            kw[s] = v
    return tuple(a), kw


def _get_slots(args: Args, kwargs: Kwargs, slots: Sequence[Any]) -> List[Any]:
    return [args[s] if isinstance(s, int) else kwargs[s] for s in slots]


class ModuleRun(Runner):
    """A run of blocks as stages 1..L (see the module docstring)."""

    path = "modules"

    @classmethod
    def capture(cls, model: nn.Module, args: Args, kwargs: Kwargs) -> "ModuleRun":
        with _no_trace(model):
            calls = _record_calls(model, args, kwargs)
        run = _longest_run(calls)
        if len(run) < 2:
            raise G.CaptureError("no run of two or more submodules passing tensors one to the "
                                 "next was found (found %d)" % len(run))
        blocks: List[_Block] = []
        for k, i in enumerate(run):
            c = calls[i]
            if k + 1 < len(run):
                links = _links(c, calls[run[k + 1]])
                out_leaves = [leaf for _, leaf in links]
            else:
                leaves = pytree.tree_leaves(c.output)
                out_leaves = [j for j, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            in_slots = [s for s, _ in _links(calls[run[k - 1]], c)] if k else \
                [s for s, t in _tensor_slots(c.args, c.kwargs) if t.is_floating_point()][:1]
            blocks.append(_Block(k + 1, c.module, c.name or type(c.module).__name__,
                                 in_slots, out_leaves))
        for a, b in zip(blocks, blocks[1:]):
            if a.module is b.module:
                raise G.CaptureError("block %s is called twice in a row; remat needs distinct "
                                     "blocks" % a.name)
        return cls(model, blocks)

    def __init__(self, model: nn.Module, blocks: List[_Block]) -> None:
        self.model = model
        self.blocks = blocks
        self.n_stages = len(blocks)
        p = next(iter(model.parameters()), None)
        self._device = p.device if p is not None else torch.device("cpu")
        self.fixed_extra = 0

    @property
    def device(self) -> torch.device:
        return self._device

    def stage_names(self) -> List[str]:
        return ["%d:%s" % (b.index, b.name) for b in self.blocks]

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
        from ._executor import AutocastState
        return repr((h.hexdigest(), repr(self.model), leaves, params, self.stage_names(),
                     AutocastState().key(), repeat))

    # -- running ----------------------------------------------------------------------
    def run(self, module: nn.Module, entry: Any, args: Args, kwargs: Kwargs) -> Any:
        step = Step(self, entry.plan, set(), _cuda(self._device), entry.link)
        for p in list(self.model.parameters()) + list(self.model.buffers()):
            step.free_storages.add(_fk(p))
        for t in pytree.tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                step.free_storages.add(_fk(t))
                step.watch(t, "an input")
        step.ctx = {}
        state: Dict[str, Any] = {"next": 1, "out": None, "hooks": None}
        handles = []
        for blk in self.blocks:
            handles.append(blk.module.register_forward_pre_hook(
                self._pre(step, blk, state), with_kwargs=True))
            handles.append(blk.module.register_forward_hook(
                self._post(step, blk, state), with_kwargs=True))
        try:
            out = self.model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
            if state["hooks"] is not None:
                state["hooks"].__exit__(None, None, None)
        if state["next"] != self.n_stages + 1:
            raise G.CaptureError("remat: the model called %d of its %d blocks" % (
                state["next"] - 1, self.n_stages))
        step.finish_forward()
        return out

    def _pre(self, step: Step, blk: _Block, state: Dict[str, Any]) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs) -> Optional[Tuple[Args, Kwargs]]:
            j = blk.index
            if state["next"] != j or state["hooks"] is not None:
                raise G.CaptureError("remat: block %s was called out of the profiled order "
                                     "(expected block %d)" % (blk.name, state["next"]))
            ins = _get_slots(args, kwargs, blk.in_slots)
            if j > 1 and any(x is not y for x, y in zip(ins, state["out"])):
                raise G.CaptureError("remat: block %s did not receive what block %d returned; "
                                     "the code between blocks changed since profiling"
                                     % (blk.name, j - 1))
            if j == 1:
                step.set_input(ins)
                ins = boundary(step, 0, ins)
                args, kwargs = _set_slots(args, kwargs, blk.in_slots, ins)
            step.before_main(j)
            held = [(s, t) for s, t in _tensor_slots(args, kwargs) if s not in blk.in_slots]
            for _, t in held:
                step.free_storages.add(_fk(t))
                step.watch(t, "an argument of block %s" % blk.name)
            # The arguments recomputations read again; not the boundary (a[j-1]
            # comes from the schedule's store: holding it here would keep it).
            dargs, dkwargs = _set_slots(_detached(args), _detached(kwargs), blk.in_slots,
                                        [None] * len(blk.in_slots))
            step.ctx[j] = (dargs, dkwargs, [b.detach().clone() for b in blk.module.buffers()])
            step.record_rng(j)
            hooks = step.main_stage(j)
            hooks.__enter__()
            state["hooks"] = hooks
            return args, kwargs
        return hook

    def _post(self, step: Step, blk: _Block, state: Dict[str, Any]) -> Any:
        def hook(mod: nn.Module, args: Args, kwargs: Kwargs, out: Any) -> Any:
            j = blk.index
            state["hooks"].__exit__(None, None, None)
            state["hooks"] = None
            leaves, spec = pytree.tree_flatten(out)
            a = [leaves[i] for i in blk.out_leaves]
            if j < self.n_stages:
                a = boundary(step, j, a)
                for i, v in zip(blk.out_leaves, a):
                    leaves[i] = v
                out = pytree.tree_unflatten(leaves, spec)
            dargs, dkwargs, snaps = step.ctx[j]
            # Values, not versions: batch_norm updates its statistics in place
            # without moving their version counter.
            moved = [not torch.equal(b, s) for b, s in zip(blk.module.buffers(), snaps)]
            step.ctx[j] = (dargs, dkwargs, [s if m else None for s, m in zip(snaps, moved)])
            step.after_main(j, a)
            state["out"] = a
            state["next"] = j + 1
            return out
        return hook

    def recompute(self, step: Step, j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        blk = self.blocks[j - 1]
        dargs, dkwargs, snaps = step.ctx[j]
        ins = [t.detach().requires_grad_(keep and t.is_floating_point())
               if isinstance(t, torch.Tensor) else t for t in a_prev]
        args, kwargs = _set_slots(dargs, dkwargs, blk.in_slots, ins)
        with _buffers_as(blk.module, snaps):
            if not keep:
                with torch.no_grad():
                    out = blk.module(*args, **kwargs)
                return [pytree.tree_leaves(out)[i].detach() for i in blk.out_leaves], None
            saved: List[torch.Tensor] = []
            free = step.free_storages

            def pack(t: torch.Tensor) -> torch.Tensor:
                if _fk(t) in free or t.untyped_storage().data_ptr() == 0:
                    return t
                d = t.detach()
                saved.append(d)
                return d
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = blk.module(*args, **kwargs)
        leaves = pytree.tree_leaves(out)
        return [leaves[i].detach() for i in blk.out_leaves], saved

    # -- profiling ------------------------------------------------------------------
    def profile(self, module: nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                progress: Any) -> Tuple[List[Dict[str, Any]], int, int, int]:
        device = self._device
        with _no_trace(self.model):
            inputs = self._block_inputs(args, kwargs)
            plain = self._plain(args, kwargs, repeat)
            out: List[Dict[str, Any]] = []
            fall: List[int] = []
            for blk, (a, kw) in zip(self.blocks, inputs):
                run = _BlockRun(self, blk, a, kw)
                info = measure(run, repeat, device)
                info.pop("held_outputs")
                fall.append(info.pop("fall_overhead"))
                out.append(info)
                progress.update(blk.index, self.n_stages, "blocks profiled")
        t_blocks = sum(s["fwd_time"] + s["bwd_time"] for s in out)
        first_in = _get_slots(inputs[0][0], inputs[0][1], self.blocks[0].in_slots)
        in_bytes = unique_bytes([t for t in first_in if isinstance(t, torch.Tensor)])
        in_grad = dense_bytes([t for t in first_in if isinstance(t, torch.Tensor)])
        rest = max(0.0, plain["time"] - t_blocks)
        held = plain["prologue"] + plain["held_args"] + plain["outputs"]
        held += self.n_stages * rng_state_bytes(device) + RESERVE
        held += RESERVE_PER_OP * plain["ops"] + _tied_grads(self.model)
        epilogue = {"name": "epilogue", "fwd_time": rest / 3, "bwd_time": 2 * rest / 3,
                    "out_bytes": 0, "saved_bytes": plain["epilogue"],
                    "fwd_overhead": 0, "bwd_overhead": 0}
        # The epilogue (head, loss) is not measured alone. Its backward comes
        # first: the backward's peak above its start, less the gradient it
        # hands the last block, bounds it; and it gets what the chain misses
        # of the plain step's measured peak.
        epilogue["bwd_overhead"] = max(0, plain["backward_peak"] - out[-1]["grad_bytes"])
        chain = remat.Chain([dict(s, fwd_overhead=f) for s, f in zip(out, fall)] + [epilogue],
                            in_bytes, in_grad)
        predicted = remat.store_all_cost(chain)[0] + plain["prologue"] + plain["held_args"] \
            + plain["outputs"]
        epilogue["bwd_overhead"] += max(0, plain["peak"] - predicted)
        out.append(epilogue)
        self.fall_overheads = fall + [0]
        return out, in_bytes, in_grad, held

    def _block_inputs(self, args: Args, kwargs: Kwargs) -> List[Tuple[Args, Kwargs]]:
        """Each block's arguments on the example (no grad, state untouched)."""
        got: List[Tuple[Args, Kwargs]] = []
        handles = [b.module.register_forward_pre_hook(
            lambda m, a, kw: got.append((_detached(a), _detached(kw))), with_kwargs=True)
            for b in self.blocks]
        try:
            with torch.no_grad():
                self.model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        if len(got) != self.n_stages:
            raise G.CaptureError("the blocks were called %d times, %d expected" % (
                len(got), self.n_stages))
        return got

    def _plain(self, args: Args, kwargs: Kwargs, repeat: int) -> Dict[str, Any]:
        """Plain steps, split by the blocks' hooks into prologue, blocks and
        epilogue: what each part's operators save, the step's time and its
        measured peak. Parameters take part through proxies with a .grad made
        up front (gradients are added in place, as in training, and no hook of
        the real parameters fires); buffers through copies."""
        params = {n: p.detach().requires_grad_(p.requires_grad)
                  for n, p in self.model.named_parameters()}
        for q in params.values():
            if q.requires_grad:
                q.grad = torch.zeros_like(q)
        state = {**params, **{n: b.clone() for n, b in self.model.named_buffers()}}
        free = {_fk(t) for t in state.values()}
        free |= {_fk(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        part = ["prologue"]
        saved: Dict[str, List[torch.Tensor]] = {"prologue": [], "blocks": [], "epilogue": []}
        held_args: List[torch.Tensor] = []
        n_ops = [0]

        def pack(t: torch.Tensor) -> torch.Tensor:
            n_ops[0] += 1  # about one saved tensor per operator: enough for the reserve
            if _fk(t) not in free:
                saved[part[0]].append(t.detach())
            return t.detach()

        def pre(blk: _Block) -> Any:
            def hook(m: nn.Module, a: Tuple[Any, ...], kw: Kwargs) -> None:
                part[0] = "blocks"
                held_args.extend(t for s, t in _tensor_slots(a, kw) if s not in blk.in_slots)
            return hook

        def post(blk: _Block) -> Any:
            def hook(m: nn.Module, a: Tuple[Any, ...], kw: Kwargs, o: Any) -> None:
                if blk.index == self.n_stages:
                    part[0] = "epilogue"
            return hook

        sizes: Dict[str, int] = {}

        def run(meter: Optional[PeakMeter] = None) -> Any:
            for k in saved:
                saved[k] = []
            n_ops[0] = 0
            held_args.clear()
            part[0] = "prologue"
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = torch.func.functional_call(self.model, state, args, kwargs)
            out_ts = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            sizes.update(prologue=unique_bytes(saved["prologue"], free),
                         epilogue=unique_bytes(saved["epilogue"], free | keys_of(out_ts)),
                         held_args=unique_bytes(held_args, free),
                         outputs=unique_bytes(out_ts, free))
            for k in saved:  # let the backward free them, as eager does
                saved[k].clear()
            held_args.clear()
            loss = [t for t in out_ts if t.requires_grad and t.dim() == 0] or \
                [t for t in out_ts if t.requires_grad]
            if meter is not None:
                meter.mark()  # the backward starts: the epilogue's backward first
            torch.autograd.backward(loss, [torch.ones_like(t) for t in loss],
                                    inputs=[q for q in params.values() if q.requires_grad])
            return out
        handles = []
        for b in self.blocks:
            handles.append(b.module.register_forward_pre_hook(pre(b), with_kwargs=True))
            handles.append(b.module.register_forward_hook(post(b), with_kwargs=True))
        times = []
        try:
            for _ in range(max(1, repeat)):
                t0 = time.perf_counter()
                out = run()
                times.append((time.perf_counter() - t0) * 1e3)
                del out
            with PeakMeter(self._device) as meter:
                run(meter)
        finally:
            for h in handles:
                h.remove()
        return dict(sizes, time=sorted(times)[len(times) // 2], ops=n_ops[0], peak=meter.peak,
                    backward_peak=meter.peak_after_mark)


class _BlockRun(StageRun):
    def __init__(self, prog: ModuleRun, blk: _Block, args: Args, kwargs: Kwargs) -> None:
        self.prog, self.blk, self.args, self.kwargs = prog, blk, args, kwargs
        self.name = "%d:%s" % (blk.index, blk.name)
        self.free = {_fk(t) for t in list(prog.model.parameters()) + list(prog.model.buffers())}
        self.free |= {_fk(t) for s, t in _tensor_slots(args, kwargs) if s not in blk.in_slots}

    def fwd(self, grad: bool, keep: bool = True) -> StageRun.Result:
        blk = self.blk
        ins = [t.detach().requires_grad_(grad and t.is_floating_point())
               for t in _get_slots(self.args, self.kwargs, blk.in_slots)]
        args, kwargs = _set_slots(self.args, self.kwargs, blk.in_slots,
                                  through_boundary(ins) if grad else ins)
        params = {n: self.proxy(p) for n, p in blk.module.named_parameters()}
        bufs = {n: b.clone() for n, b in blk.module.named_buffers()}
        saved: List[torch.Tensor] = []
        free = self.free | keys_of(list(params.values()))

        def pack(t: torch.Tensor) -> Any:
            if _fk(t) in free:
                return t
            if not keep:  # as the main forward's Fn: autograd keeps a handle only
                return None
            d = t.detach()
            saved.append(d)
            return d
        call = torch.func.functional_call
        if grad:
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = call(blk.module, {**params, **bufs}, args, kwargs)
        else:
            with torch.no_grad():
                out = call(blk.module, {**params, **bufs}, args, kwargs)
        leaves = pytree.tree_leaves(out)
        a = [leaves[i] for i in blk.out_leaves]
        return StageRun.Result(a, saved, a, ins, free)


def _tied_grads(model: nn.Module) -> int:
    """Parameters registered under several names (tied embeddings): one
    gradient each is held through the backward (see _graphrun)."""
    count: Dict[int, int] = {}
    params: Dict[int, torch.Tensor] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        count[id(p)] = count.get(id(p), 0) + 1
        params[id(p)] = p
    return dense_bytes([params[k] for k, c in count.items() if c > 1 and params[k].requires_grad])


def _detached(x: Any) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), x)


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


@contextlib.contextmanager
def _no_trace(model: nn.Module) -> Any:
    """Discovery and profiling runs leave buffers and the RNG as they were."""
    bufs = [(b, b.detach().clone()) for b in model.buffers()]
    with torch.random.fork_rng(devices=_cuda(next(iter(model.parameters()),
                                                   torch.empty(0)).device)):
        try:
            yield
        finally:
            with torch.no_grad():
                for b, v in bufs:
                    b.copy_(v)


def _cuda(device: torch.device) -> List[int]:
    return [device.index or 0] if device.type == "cuda" else []


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


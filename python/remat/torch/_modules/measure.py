"""Measuring a ModuleProgram's blocks (the formulas are _measure's), and the
plain step around them: what the code before the blocks (embeddings) and
after them (head, loss) keeps, the step's time and its measured peak."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from .._measure import MODULE_RESERVE_PER_OP, StageProbe, measure, step_reserve, through_boundary
from .._memory import PeakMeter
from .._program import Args, CaptureError, Kwargs, Profile
from .._progress import Progress
from .._tensors import (dense_bytes, detached, free_key, keys_of, saving, tensors_in,
                        unique_bytes)
from .discover import Block, distinct_modules, get_slots, set_slots, tensor_slots


def profile_blocks(model: nn.Module, blocks: List[Block], device: torch.device, args: Args,
                   kwargs: Kwargs, repeat: int, progress: Progress) -> Profile:
    """Measures every block, then the plain step for what runs around them:
    the epilogue (head, loss) becomes the output stage. The caller keeps
    buffers and the RNG as they were."""
    inputs = _block_inputs(model, blocks, args, kwargs)
    plain = _plain(model, blocks, device, args, kwargs, repeat)
    out: List[Dict[str, Any]] = []
    for blk, (a, kw) in zip(blocks, inputs):
        run = BlockProbe(model, blk, a, kw)
        info = measure(run, repeat, device, stops=True)
        info.pop("held_outputs")
        out.append(info)
        progress.update(blk.index, len(blocks), "blocks profiled")
    t_blocks = sum(s["fwd_time"] + s["bwd_time"] for s in out)
    first_in = get_slots(inputs[0][0], inputs[0][1], blocks[0].in_slots)
    in_bytes = unique_bytes([t for t in first_in if isinstance(t, torch.Tensor)])
    in_grad = dense_bytes([t for t in first_in if isinstance(t, torch.Tensor)])
    rest = max(0.0, plain["time"] - t_blocks)
    held = plain["prologue"] + plain["held_args"] + plain["outputs"]
    held += step_reserve(device, len(blocks), plain["ops"], MODULE_RESERVE_PER_OP) + \
        _tied_grads(model)
    epilogue = {"name": "epilogue", "fwd_time": rest / 3, "bwd_time": 2 * rest / 3,
                "out_bytes": 0, "saved_bytes": plain["epilogue"],
                "fwd_overhead": 0, "bwd_overhead": 0}
    # The epilogue (head, loss) is not measured alone. Its backward comes
    # first: the backward's peak above its start, less the gradient it
    # hands the last block, bounds it; and it gets what the chain misses
    # of the plain step's measured peak.
    epilogue["bwd_overhead"] = max(0, plain["backward_peak"] - out[-1]["grad_bytes"])
    chain = remat.Chain(out + [epilogue], in_bytes, in_grad)
    predicted = remat.store_all_cost(chain)[0] + plain["prologue"] + plain["held_args"] \
        + plain["outputs"]
    epilogue["bwd_overhead"] += max(0, plain["peak"] - predicted)
    out.append(epilogue)
    return Profile(out, in_bytes, in_grad, held, [])


def _block_inputs(model: nn.Module, blocks: List[Block], args: Args, kwargs: Kwargs
                  ) -> List[Tuple[Args, Kwargs]]:
    """Each block's arguments on the example (no grad, state untouched): the
    calls of the blocks' modules in the profiled order (a module may be
    several blocks; its other calls are not blocks)."""
    got: List[Tuple[Args, Kwargs]] = []
    count: Dict[int, int] = {}

    def pre(m: nn.Module, a: Args, kw: Kwargs) -> None:
        if _is_next(blocks, len(got), m, count):
            got.append((detached(a), detached(kw)))
    handles = [m.register_forward_pre_hook(pre, with_kwargs=True)
               for m in distinct_modules(blocks)]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    if len(got) != len(blocks):
        raise CaptureError("%d of the %d blocks were called in the profiled order" % (
            len(got), len(blocks)))
    return got


def _plain(model: nn.Module, blocks: List[Block], device: torch.device, args: Args,
           kwargs: Kwargs, repeat: int) -> Dict[str, Any]:
    """Plain steps, split by the blocks' hooks into prologue, blocks and
    epilogue: what each part's operators save, the step's time and its
    measured peak. Parameters take part through proxies with a .grad made
    up front (gradients are added in place, as in training, and no hook of
    the real parameters fires); buffers through copies."""
    params = {n: p.detach().requires_grad_(p.requires_grad)
              for n, p in model.named_parameters()}
    for q in params.values():
        if q.requires_grad:
            q.grad = torch.zeros_like(q)
    state = {**params, **{n: b.clone() for n, b in model.named_buffers()}}
    free = keys_of(state.values())
    free |= keys_of(tensors_in((args, kwargs)))
    part = ["prologue"]
    saved: Dict[str, List[torch.Tensor]] = {"prologue": [], "blocks": [], "epilogue": []}
    held_args: List[torch.Tensor] = []
    n_ops = [0]

    def seen(t: torch.Tensor) -> None:
        n_ops[0] += 1  # about one saved tensor per operator: enough for the reserve
        if free_key(t) not in free:
            saved[part[0]].append(t.detach())

    # The calls of the blocks' modules: each is the next block when its
    # module is that block's (in the profiled order), else None.
    nxt = [0]
    frames: List[Optional[Block]] = []
    count: Dict[int, int] = {}

    def pre(m: nn.Module, a: Tuple[Any, ...], kw: Kwargs) -> None:
        blk = blocks[nxt[0]] if _is_next(blocks, nxt[0], m, count) else None
        frames.append(blk)
        if blk is not None:
            nxt[0] += 1
            part[0] = "blocks"
            held_args.extend(t for s, t in tensor_slots(a, kw) if s not in blk.in_slots)

    def post(m: nn.Module, a: Tuple[Any, ...], kw: Kwargs, o: Any) -> None:
        blk = frames.pop() if frames else None
        if blk is not None and blk.index == len(blocks):
            part[0] = "epilogue"

    sizes: Dict[str, int] = {}

    def run(meter: Optional[PeakMeter] = None) -> Any:
        for k in saved:
            saved[k] = []
        n_ops[0] = 0
        nxt[0] = 0
        frames.clear()
        count.clear()
        held_args.clear()
        part[0] = "prologue"
        with saving(frozenset(), seen=seen):
            out = torch.func.functional_call(model, state, args, kwargs)
        out_ts = tensors_in(out)
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
    for mod in distinct_modules(blocks):
        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True))
    times = []
    try:
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            out = run()
            times.append((time.perf_counter() - t0) * 1e3)
            del out
        with PeakMeter(device) as meter:
            run(meter)
    finally:
        for h in handles:
            h.remove()
    return dict(sizes, time=sorted(times)[len(times) // 2], ops=n_ops[0], peak=meter.peak,
                backward_peak=meter.peak_after_mark)


def _is_next(blocks: List[Block], k: int, m: nn.Module, count: Dict[int, int]) -> bool:
    """Whether this call of m (counted in `count`) is blocks[k]'s call, the
    example's calls being those of the profile."""
    n = count.get(id(m), 0)
    count[id(m)] = n + 1
    return k < len(blocks) and blocks[k].module is m and blocks[k].nth == n


class BlockProbe(StageProbe):
    """A block on the arguments it got in the example's forward."""

    def __init__(self, model: nn.Module, blk: Block, args: Args, kwargs: Kwargs) -> None:
        self.blk, self.args, self.kwargs = blk, args, kwargs
        self.name = "%d:%s" % (blk.index, blk.name)
        self.free = keys_of(list(model.parameters()) + list(model.buffers()))
        self.free |= {free_key(t) for s, t in tensor_slots(args, kwargs) if s not in blk.in_slots}

    def fwd(self, grad: bool, keep: bool = True) -> StageProbe.Result:
        blk = self.blk
        ins = [t.detach().requires_grad_(grad and t.is_floating_point())
               for t in get_slots(self.args, self.kwargs, blk.in_slots)]
        args, kwargs = set_slots(self.args, self.kwargs, blk.in_slots,
                                  through_boundary(ins) if grad else ins)
        params = {n: self.proxy(p) for n, p in blk.module.named_parameters()}
        bufs = {n: b.clone() for n, b in blk.module.named_buffers()}
        saved: List[torch.Tensor] = []
        free = self.free | keys_of(list(params.values()))
        call = torch.func.functional_call
        if grad:
            with torch.enable_grad(), self.hooks(free, saved, keep):
                out = call(blk.module, {**params, **bufs}, args, kwargs)
        else:
            with torch.no_grad():
                out = call(blk.module, {**params, **bufs}, args, kwargs)
        leaves = pytree.tree_leaves(out)
        a = [leaves[i] for i in blk.out_leaves]
        return StageProbe.Result(a, saved, a, ins, free)


def _tied_grads(model: nn.Module) -> int:
    """Parameters registered under several names (tied embeddings): one
    gradient each is held through the backward (see _graphrun)."""
    count: Dict[int, int] = {}
    params: Dict[int, torch.Tensor] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        count[id(p)] = count.get(id(p), 0) + 1
        params[id(p)] = p
    return dense_bytes([params[k] for k, c in count.items() if c > 1 and params[k].requires_grad])

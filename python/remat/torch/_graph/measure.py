"""Measuring a GraphProgram's stages (the formulas are _measure's): each
stage runs on the values the stages before it made."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set

import torch
import torch.utils._pytree as pytree
from torch import fx

from .._measure import (StageProbe, add_bwd_overhead, measure, rng_bytes, sizes_only,
                        step_reserve, through_boundary)
from .._program import Profile
from .._progress import Progress
from .._tensors import (FreeKey, cuda_devices, dense_bytes, detached_like, device_of, free_key,
                        keys_of, tensors_in, unique_bytes)
from .held import HeldRegistry
from .stages import GraphStage, call_stage

if TYPE_CHECKING:
    from .program import GraphProgram


class GraphStageProbe(StageProbe):
    """Stage j of a GraphProgram on the values the stages before it made."""

    def __init__(self, prog: "GraphProgram", st: GraphStage, env: Dict[fx.Node, Any],
                 prev: Sequence[fx.Node], base_free: Set[FreeKey]) -> None:
        self.prog, self.st, self.env, self.base_free = prog, st, env, base_free
        self.prev = set(prev)
        self.name = st.name
        self.last: Dict[fx.Node, Any] = {}
        # a compiled stage runs inductor's kernels: no operator to record or replay
        self.partial_saves = isinstance(st.gm, fx.GraphModule)
        # FakeTensors (the size pass): the storages of the clones of mutated
        # inputs are kept alive with the values, or a freed one's address,
        # a key in `free`, comes back for an output (real storages, made by
        # the allocator in other size classes, do not meet this)
        self.keep_clones = False
        self.clones: List[torch.Tensor] = []

    def fwd(self, grad: bool, keep: bool = True) -> StageProbe.Result:
        st = self.st
        args: List[Any] = []
        leaves: List[torch.Tensor] = []
        for a in st.inputs:
            v = self.env[a]
            if a in self.prev:
                v = v.detach()
                if grad and v.is_floating_point():
                    v.requires_grad_(True)
                leaves.append(v)
                v = through_boundary([v])[0] if grad else v
            elif a in st.mutated:
                v = v.clone()
            elif self.prog.ph_spec.get(a, ("",))[0] == "PARAMETER":
                v = self.proxy(v)
            args.append(v)
        # The copies of mutated buffers are free for the hooks; kept alive with
        # the result, so that no tensor of the run gets one's address (and is
        # taken for free) once the stage has done with it.
        clones = [x for a, x in zip(st.inputs, args) if a in st.mutated]
        free = set(self.base_free) | keys_of(clones)
        if self.keep_clones:
            self.clones = clones
        saved: List[torch.Tensor] = []
        held_leaves = [t for a, x in zip(st.inputs, args) if grad and a in self.prog.held
                       for t in tensors_in(x) if t.requires_grad]
        if grad:
            with torch.enable_grad(), self.hooks(free, saved, keep), HeldRegistry(free):
                outs = call_stage(st.gm, args)
        else:
            with torch.no_grad(), HeldRegistry(free):
                outs = call_stage(st.gm, args)
        self.last = dict(zip(st.outputs, outs))
        out_a: List[torch.Tensor] = [self.last[b] for b in (st.boundary or st.re_outputs)]
        graph_outs = out_a
        if not st.boundary:  # the last stage: backward from the loss if it returns one
            scalars = [t for t in out_a if t.dim() == 0 and t.requires_grad]
            graph_outs = scalars or out_a
        res = StageProbe.Result(out_a, saved, graph_outs, leaves, free)
        res.held_leaves = held_leaves
        res.alive = clones
        return res

    def redo(self) -> StageProbe.Result:
        last = self.last  # the next stages read the main run's values, not these
        try:
            return self.fwd(True)
        finally:
            self.last = last


def profile_graph(prog: "GraphProgram", model: torch.nn.Module, flat_inputs: Sequence[Any],
                  repeat: int, progress: Progress,
                  feeds: Optional[Dict[fx.Node, Any]] = None) -> Profile:
    """Measures every stage; the output stage (the caller's loss) comes last.
    Given `feeds` (a FakeTensor per placeholder, sizes symbolic: the size
    pass of _graph/sizes.py), only the sizes are taken (sizes_only), with the
    same bookkeeping; times and temporaries are then 0."""
    sizes = feeds is not None
    if feeds is None:
        feeds = prog.feeds(model, flat_inputs)
    env: Dict[fx.Node, Any] = {ph: v.clone() if isinstance(v, torch.Tensor) and
                               prog.ph_spec[ph][0] == "BUFFER" else v for ph, v in feeds.items()}
    free = {free_key(v) for v in env.values() if isinstance(v, torch.Tensor)}
    device = device_of(feeds.values())
    out: List[Dict[str, Any]] = []
    held_bytes = 0
    frees_out: List[List[int]] = []
    prev_out: Set[FreeKey] = set()
    with torch.random.fork_rng(devices=cuda_devices(feeds.values())):
        prev: Sequence[fx.Node] = prog.input_acts
        for st in prog.stages:
            run = GraphStageProbe(prog, st, env, prev, free)
            run.keep_clones = sizes
            if sizes:
                info = sizes_only(run, outputs_held=not st.boundary,
                                  loss_output=prog.returns_loss)
                info.update(fwd_time=0.0, bwd_time=0.0, fwd_overhead=0, bwd_overhead=0,
                            fall_overhead=0)
            else:
                info = measure(run, repeat, device, outputs_held=not st.boundary,
                               loss_output=prog.returns_loss, stops=True)
            held_bytes += info.pop("held_outputs")
            out.append(info)
            if not sizes:  # (a stage passing its input on keeps it alive: not freed)
                here = keys_of(t for b in st.boundary or () for t in tensors_in(run.last[b]))
                if frees_out and frees_out[-1][0] == st.index - 1 and prev_out & here:
                    frees_out.pop()
                if run.frees_out:
                    frees_out.append([st.index, run.released_by, info["out_bytes"]])
                prev_out = here
            for o, v in run.last.items():  # the values the next stages read
                env[o] = pytree.tree_map_only(
                    torch.Tensor, detached_like if o in prog.held else torch.Tensor.detach, v)
                if o in prog.held:
                    ts = tensors_in(env[o])
                    held_bytes += unique_bytes(ts, free)
                    free |= keys_of(ts)
                if st.boundary and o in prog.outputs and o in prog.acts and not prog.returns_loss:
                    # returned before the last stage: the caller's loss sends it a
                    # gradient at the start of the backward, alive until this stage's B
                    held_bytes += dense_bytes(tensors_in(env[o]))
            prev = st.boundary
            progress.update(st.index, prog.n_stages, "stages profiled")
    out.append({"name": "output", "fwd_time": 0.0, "bwd_time": 0.0, "out_bytes": 0,
                "saved_bytes": 0})  # the caller's loss: outside the model
    ins = [feeds[ph] for ph in prog.input_acts]
    snaps = {ph for st in prog.stages for ph in st.mutated}
    snap_bytes = sum(feeds[ph].untyped_storage().nbytes() for ph in snaps)
    held_bytes += snap_bytes
    backward_held = shared_param_grads(prog, feeds, out) + held_grads(prog, env)
    held_bytes += sum(b[0] for b in backward_held)
    random = sum(1 for st in prog.stages if st.random)
    held_bytes += step_reserve(device, random, len(prog.calls))
    return Profile(out, unique_bytes(ins), dense_bytes(ins), held_bytes, backward_held,
                   frees_out, rng_bytes(device, random) + snap_bytes)


def shared_param_grads(prog: "GraphProgram", feeds: Dict[fx.Node, Any],
                       stages: List[Dict[str, Any]]) -> List[List[int]]:
    """A parameter read by several stages (tied embeddings): autograd keeps
    the gradient of the latest reader in the parameter's input buffer until
    the earliest reader's backward adds to it: [bytes, latest, earliest].
    (The latest reader's backward makes it as a temporary, which that
    stage's profiled backward overhead counts.) Each other reader's backward
    may add its part out of place (a transposed head's gradient cannot take
    it in place): one more gradient while it runs, added to its overhead."""
    out = []
    for ph, (kind, _) in prog.ph_spec.items():
        v = feeds[ph]
        readers = {prog.stage_of[u] for u in ph.users if u in prog.stage_of}
        if kind == "PARAMETER" and v.requires_grad and len(readers) > 1:
            nbytes = dense_bytes([v])
            out.append([nbytes, max(readers), min(readers)])
            for r in sorted(readers)[:-1]:
                add_bwd_overhead(stages[r - 1], nbytes)
    return out


def held_grads(prog: "GraphProgram", env: Dict[fx.Node, Any]) -> List[List[int]]:
    """A held value that requires grad (an activation many layers read; T5's
    position bias, made from a parameter): autograd sums the readers' parts
    in its input buffer from the last reader's backward until its maker's
    backward takes it: [bytes, last reader, maker]."""
    out = []
    for a in sorted(prog.held, key=lambda n: prog.stage_of[n]):
        v = env.get(a)
        if not any(t.requires_grad for t in tensors_in(v)):
            continue
        readers = {prog.stage_of[u] for u in a.users if u in prog.stage_of}
        maker = prog.stage_of[a]
        if max(readers, default=maker) > maker:
            out.append([dense_bytes(tensors_in(v)), max(readers), maker])
    return out

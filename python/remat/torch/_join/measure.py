"""Measuring a JoinGraphProgram (the formulas are _measure's): each tower's
stages on the values its stages before made, then the head on every
tower's output; the result is a remat-join-2 network (docs/join.md)."""
from __future__ import annotations

from typing import Any, Dict, List, Set

import torch
import torch.utils._pytree as pytree
from torch import fx

import remat

from .._graph.measure import GraphStageProbe, held_grads
from .._measure import add_bwd_overhead, measure, step_reserve
from .._progress import Progress
from .._tensors import (FreeKey, cuda_devices, dense_bytes, detached_like, device_of, free_key,
                        keys_of, tensors_in, unique_bytes)
from .program import JoinGraphProgram


def profile_join(prog: JoinGraphProgram, model: torch.nn.Module, flat_inputs: List[Any],
                 repeat: int, progress: Progress, name: str) -> "remat.JoinProblem":
    """The network of `prog` on the example input. What is held for the whole
    step is in meta["profile"]["held_bytes"]: the held values, the model's
    outputs, snapshots, the RNG states, and what the chain path counts as
    held in the backward only (the gradients of parameters the towers share
    and of held values that require grad), here for the whole step."""
    feeds = prog.feeds(model, flat_inputs)
    env: Dict[fx.Node, Any] = {ph: v.clone() if isinstance(v, torch.Tensor) and
                               prog.ph_spec[ph][0] == "BUFFER" else v for ph, v in feeds.items()}
    free: Set[FreeKey] = {free_key(v) for v in env.values() if isinstance(v, torch.Tensor)}
    device = device_of(feeds.values())
    flat: List[Dict[str, Any]] = []  # every stage's dict, by flat index
    branches: List[Dict[str, Any]] = []
    held = 0
    done = 0
    with torch.random.fork_rng(devices=cuda_devices(feeds.values())):
        for b, view in enumerate(prog.views):
            prev: List[fx.Node] = list(view.input_acts)
            stages: List[Dict[str, Any]] = []
            for st in view.stages:
                # (a tower's last stage does not stop: as a chain's last, _executor)
                info, more = _stage(prog, st, env, prev, free, repeat, device, False,
                                    stops=st is not view.stages[-1])
                held += more
                stages.append(info)
                prev = st.boundary
                done += 1
                progress.update(done, prog.n_stages, "stages profiled")
            ins = [feeds[ph] for ph in view.input_acts]
            branches.append({"name": "tower %d" % (b + 1), "input_bytes": unique_bytes(ins),
                             "input_grad_bytes": dense_bytes(ins), "stages": stages})
            flat += stages
        exits = [a for v in prog.views for a in v.stages[-1].boundary]
        head, more = _stage(prog, prog.head, env, exits, free, repeat, device, True)
        held += more
        flat.append(head)
        progress.update(prog.n_stages, prog.n_stages, "stages profiled")
    held += _shared_params(prog, feeds, flat)
    held += sum(b[0] for b in held_grads(prog, env))
    snaps = {ph for st in prog.stages for ph in st.mutated}
    held += sum(feeds[ph].untyped_storage().nbytes() for ph in snaps)
    held += step_reserve(device, sum(1 for st in prog.stages if st.random), len(prog.calls))
    turn = {"name": head["name"], "fwd_time": head["fwd_time"], "bwd_time": head["bwd_time"],
            "out_bytes": 0, "saved_bytes": head["saved_bytes"],
            "fwd_overhead": head["fall_overhead"], "bwd_overhead": head["bwd_overhead"]}
    meta = {"profile": {"path": "join", "stages": prog.stage_names(), "held_bytes": held,
                        "torch": torch.__version__, "repeat": repeat, "device": str(device),
                        "shape": prog.shape()}}
    return remat.JoinProblem(branches, turn, name=name, time_unit="ms", meta=meta,
                             ordered=prog.towers.ordered)


def _stage(prog: JoinGraphProgram, st: Any, env: Dict[fx.Node, Any], prev: List[fx.Node],
           free: Set[FreeKey], repeat: int, device: torch.device, head: bool,
           stops: bool = False) -> "tuple[Dict[str, Any], int]":
    """A stage's dict (fall_overhead kept: the join model takes it) and what
    it adds to what is held; env gets the values later stages read."""
    run = GraphStageProbe(prog, st, env, prev, free)
    info = measure(run, repeat, device, outputs_held=head, loss_output=prog.returns_loss,
                   stops=stops)
    held = int(info.pop("held_outputs"))
    for o, v in run.last.items():
        env[o] = pytree.tree_map_only(
            torch.Tensor, detached_like if o in prog.held else torch.Tensor.detach, v)
        if o in prog.held:
            ts = tensors_in(env[o])
            held += unique_bytes(ts, free)
            free |= keys_of(ts)
        if not head and o in prog.outputs and o in prog.acts and not prog.returns_loss:
            held += dense_bytes(tensors_in(env[o]))  # the caller's loss sends it a gradient
    return info, held


def _shared_params(prog: JoinGraphProgram, feeds: Dict[fx.Node, Any],
                   stages: List[Dict[str, Any]]) -> int:
    """A parameter read by several stages (a siamese encoder's, read by every
    tower): autograd keeps its gradient's partial sum from the first reader's
    backward to the last one's, whatever the towers' order: counted as held
    for the whole step. A reader's backward may add its part out of place:
    one more gradient while it runs, added to each reader's overhead."""
    out = 0
    for ph, (kind, _) in prog.ph_spec.items():
        v = feeds[ph]
        readers = {prog.stage_of[u] for u in ph.users if u in prog.stage_of}
        if kind == "PARAMETER" and v.requires_grad and len(readers) > 1:
            nbytes = dense_bytes([v])
            out += nbytes
            for r in readers:
                add_bwd_overhead(stages[r - 1], nbytes)
    return out

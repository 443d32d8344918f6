"""JoinGraphProgram: an exported graph whose towers meet at a small head
(_graph/towers.py), cut into a join network (docs/join.md): each tower a
chain of stages by cut.py's rules, the head one stage, the turn.

The forward runs the stages in the join plan's order (a tower's forwards
may come between another's), each tower by its own _executor.Step over the
tower's ops of the plan, so that the chain executor's rules (saved-tensor
hooks, recomputation, the order autograd asks in) apply tower by tower.
The head runs last with plain autograd: the turn keeps what it saves until
its backward, which runs first. Autograd runs the backward; in the nested
schedules of the join solver it asks for the towers' stages in the
schedule's own order (last in, first out, as autograd orders nodes by
creation), and out of order the chain executor's fallbacks keep results
exact.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.utils._pytree as pytree
from torch import fx

import remat

from .._executor import RematRuntimeError, Step, boundary
from .._offload import HostLink
from .._program import Args, Kwargs
from .._tensors import FreeKey, cuda_devices, storage_key
from .._graph import cut as C
from .._graph.program import GraphProgram, GraphReplay, feed_free_keys
from .._graph.stages import call_stage
from .._graph.towers import Towers, find_towers

FORWARD_KINDS = ("Fn", "Fck", "Fall")
# The join solver's states grow as the product of (2 n_j + 1) over the
# towers: each tower's stages are capped so that it stays near this.
JOIN_STATES = 30000


def stage_cap(k: int, max_stages: int) -> int:
    """Stages per tower for k towers: the product of (2n + 1) near
    JOIN_STATES, and at most max_stages // k."""
    n = int((JOIN_STATES ** (1.0 / k) - 1) / 2)
    return max(1, min(n, max_stages // k))


class JoinGraphProgram(GraphProgram):
    """A GraphProgram cut as a join network: `branches` (flat stage indices,
    from 1, of each tower), the head as the last stage, `views` (each tower
    as a GraphProgram of its stages, for its per-step GraphReplay) and the
    `towers` found."""

    towers: Towers
    branches: List[List[int]]
    views: List[GraphProgram]
    size_nodes: List[fx.Node] = []  # the towers' size nodes, computed with the feeds
    # the last join plan run, with its towers' plans and main order (made once per plan)
    _plans: Optional[Tuple[Any, List["remat.Plan"], List[Tuple[int, int]]]] = None

    @classmethod
    def from_graph(cls, graph: GraphProgram, model: torch.nn.Module, args: Args,
                   kwargs: Kwargs, max_stages: int) -> Tuple[Optional["JoinGraphProgram"], str]:
        """The join cut of a captured graph (its export reused), or None and
        why the graph is one chain."""
        params = {ph for ph, (kind, _) in graph.ph_spec.items() if kind == "PARAMETER"}
        # first on the chain cut's facts (no buffer is checked there): most
        # models are one chain, and the join cut runs the graph once more
        towers, why = find_towers(graph.calls, graph.user_inputs, graph.acts, graph.facts, params,
                                  frozenset())
        if towers is None:
            return None, why
        self = cls.__new__(cls)
        self.__dict__.update(graph.__dict__)
        why = self._cut_join(model, pytree.tree_leaves((args, kwargs)), max_stages)
        return (None, why) if why else (self, "")

    # -- cutting ----------------------------------------------------------------
    def _cut_join(self, model: torch.nn.Module, flat_inputs: Sequence[Any],
                  max_stages: int) -> str:
        feeds = self.feeds(model, flat_inputs)
        scratch = {ph: v.clone() if isinstance(v, torch.Tensor) and self.ph_spec[ph][0] == "BUFFER"
                   else v for ph, v in feeds.items()}
        with torch.random.fork_rng(devices=cuda_devices(feeds.values())):
            facts = C.analyze(self.gm, self.calls, scratch)
        ph_storage = {ph: storage_key(v)[0] for ph, v in scratch.items()
                      if isinstance(v, torch.Tensor)}
        storage_of: Dict[fx.Node, Any] = dict(ph_storage)
        for n in self.calls:
            if facts[n].outputs:
                storage_of[n] = facts[n].outputs[0][0]
        dyn = C.dynamic_nodes(self.gm, set(self.user_inputs))
        acts = {n for n in self.calls if n in dyn and facts[n].requires_grad}
        input_acts = [ph for ph in self.user_inputs
                      if isinstance(scratch[ph], torch.Tensor) and scratch[ph].requires_grad]
        ph_keys = set(ph_storage.values())
        _, mutated_keys = C.pinned_positions(self.calls, facts, ph_keys)
        params = {ph for ph, (kind, _) in self.ph_spec.items() if kind == "PARAMETER"}
        towers, why = find_towers(self.calls, self.user_inputs, acts, facts, params, ph_keys)
        if towers is None:
            return why
        if not towers.head:
            return "the towers meet only in the caller's loss"
        out_set = {o for o in self.outputs if isinstance(o, fx.Node)}
        cap = stage_cap(len(towers.towers), max_stages)
        starts: List[int] = []
        bounds: List[List[fx.Node]] = []
        held: Set[fx.Node] = set()
        calls: List[fx.Node] = []
        sizes: List[int] = []
        ins_of: List[List[fx.Node]] = []
        for t, nodes in enumerate(towers.towers):
            ins = [ph for ph in input_acts if ph in towers.inputs[t]]
            s_t, b_t, h_t = _tower_cut(nodes, towers.head, facts, acts, ins, storage_of, ph_keys,
                                       out_set, cap)
            starts += [len(calls) + s for s in s_t]
            bounds += b_t
            held |= h_t
            calls += nodes
            sizes.append(len(s_t))
            ins_of.append(ins)
        starts.append(len(calls))
        bounds.append([])
        calls += towers.head
        self.calls = calls
        self.facts, self.acts, self.input_acts = facts, acts, input_acts
        self.held_acts = held
        self.towers = towers
        self.cut_reasons = {}
        self._build_stages(C.Cut(starts, bounds, {}), facts, acts, mutated_keys, ph_storage,
                           storage_of)
        # the sizes are fed: every tower may read them, in any order
        self.size_nodes = towers.shapes
        self.drop_after = {j: [a for a in drops if a not in self.size_nodes]
                           for j, drops in self.drop_after.items()}
        first = 1
        self.branches = []
        self.views = []
        for n_t, ins in zip(sizes, ins_of):
            idx = list(range(first, first + n_t))
            first += n_t
            self.branches.append(idx)
            view = copy.copy(self)  # the tower alone, for its GraphReplay
            view.stages = [self.stages[j - 1] for j in idx]
            view.input_acts = ins
            self.views.append(view)
        return ""

    def feeds(self, model: torch.nn.Module, flat_inputs: Sequence[Any]) -> Dict[fx.Node, Any]:
        """The placeholders' values, and the size nodes' from them."""
        out = super().feeds(model, flat_inputs)
        for n in self.size_nodes:
            args, kwargs = fx.node.map_arg((n.args, n.kwargs), out.__getitem__)
            out[n] = n.target(*args, **kwargs)  # type: ignore[operator]
        return out

    @property
    def head(self) -> Any:
        """The head's stage (the turn)."""
        return self.stages[-1]

    def shape(self) -> str:
        """The report's words: "join of 2 towers: vision_model (pixel_values)
        13 stages + text_model (input_ids) 11 stages, head of 13 nodes"."""
        parts = ["%s (%s) %d stages" % (_module_of(nodes), ", ".join(i.name for i in ins),
                                        len(b))
                 for nodes, ins, b in zip(self.towers.towers, self.towers.inputs, self.branches)]
        n = len(self.towers.head)
        text = "join of %d towers: %s, head of %d node%s" % (
            len(self.branches), " + ".join(parts), n, "" if n == 1 else "s")
        if self.towers.ordered:
            text += "; towers run in the model's order: %s" % self.towers.why_ordered
        return text

    def cache_key(self, module: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int) -> str:
        return "join|%d|" % self.towers.ordered + super().cache_key(module, args, kwargs, repeat)

    # -- running ----------------------------------------------------------------
    def forward(self, model: torch.nn.Module, plan: Any, link: Optional[HostLink],
                args: Args, kwargs: Kwargs) -> Any:
        """One training step's forward by the join plan (a remat.JoinPlan):
        the model's outputs."""
        feeds = self.feeds(model, pytree.tree_leaves((args, kwargs)))
        devices = cuda_devices(feeds.values())
        plans, order = self._tower_plans(plan)
        keys = feed_free_keys(feeds)
        env: Dict[fx.Node, Any] = dict(feeds)
        steps: List[Step] = []
        replays: List[GraphReplay] = []
        for b, view in enumerate(self.views):
            replay = GraphReplay(view, feeds)
            # Each tower's own free storages: a tower whose backward is done
            # frees its held values, and their addresses come back for
            # tensors another tower's recomputation must save.
            free: Set[FreeKey] = set()
            step = Step(replay, len(view.stages), plans[b], free, devices)
            replay.start(step, keys)
            if view.input_acts:
                vals = boundary(step, 0, [env[p] for p in view.input_acts])
                for ph, v in zip(view.input_acts, vals):
                    env[ph] = v
            steps.append(step)
            replays.append(replay)
        for b, i in order:
            bnd = self._run_main(steps[b], replays[b], i, self.branches[b][i - 1], env, feeds)
            steps[b].after_main(i, bnd)
            del bnd
        self._run_head(env, feeds)
        for step in steps:
            step.finish_forward()
        outs = [env[o] if isinstance(o, fx.Node) else o for o in self.outputs]
        return pytree.tree_unflatten(outs, self.out_spec)

    def _tower_plans(self, plan: Any) -> Tuple[List["remat.Plan"], List[Tuple[int, int]]]:
        """Each tower's plan and the main runs' order for the join plan (the
        Steps only read them: made once per plan, not per step)."""
        if self._plans is None or self._plans[0] is not plan:
            sizes = [len(v.stages) for v in self.views]
            self._plans = (plan, [branch_plan(plan, b + 1, n) for b, n in enumerate(sizes)],
                           main_order(plan, sizes))
        return self._plans[1], self._plans[2]

    def _run_head(self, env: Dict[fx.Node, Any], feeds: Dict[fx.Node, Any]) -> None:
        """The head, with plain autograd (the turn keeps what it saves)."""
        L = self.n_stages
        st = self.head
        args = [env[a] for a in st.inputs]
        for a in self.drop_after.get(L, ()):
            env.pop(a, None)
        outs = call_stage(st.gm, args)
        for o, v in zip(st.outputs, outs):
            env[o] = v
        self._buffer_updates(L, env, feeds)


def _module_of(nodes: List[fx.Node]) -> str:
    """The model's child that most of a tower's nodes run in (the others run
    in the model's own forward or in a projection), or "model"."""
    count: Dict[str, int] = {}
    for n in nodes:
        path = [str(v[0]) for v in (n.meta.get("nn_module_stack") or {}).values() if v[0]]
        if path:
            count[path[0]] = count.get(path[0], 0) + 1
    return max(count, key=lambda k: count[k]) if count else "model"


def _tower_cut(nodes: List[fx.Node], head: List[fx.Node], facts: Dict[fx.Node, C.NodeFacts],
               acts: Set[fx.Node], ins: List[fx.Node], storage_of: Dict[fx.Node, Any],
               ph_keys: Set[Any], outputs: Set[fx.Node], cap: int
               ) -> Tuple[List[int], List[List[fx.Node]], Set[fx.Node]]:
    """A tower's stages by cut.py's rules (positions in `nodes`), the
    activations crossing each stage's end (the last: those the head reads),
    and its held activations (cut.py's, and the model's outputs: the caller
    holds them). The head comes after the tower in the rules' view, so that
    what it reads is live to the tower's end."""
    ext = nodes + head
    fx_ext = {n: dataclasses.replace(facts[n], pos=p) for p, n in enumerate(ext)}
    pinned, _ = C.pinned_positions(ext, fx_ext, ph_keys)
    held = C.held_activations(ext, fx_ext, acts, ins, storage_of, pinned)
    held |= {n for n in nodes if n in outputs and n in acts}
    cut = C.choose_cuts(ext, fx_ext, acts, ins, storage_of, pinned, len(ext) + 1, held)
    starts = [s for s in cut.starts if s < len(nodes)]
    bounds = [list(b) for b in cut.boundaries[:len(starts) - 1]]
    head_set = set(head)
    bounds.append([n for n in nodes if n in acts and n not in held
                   and any(u in head_set for u in n.users)])
    starts, bounds = _without_pass_through(starts, bounds, nodes)
    starts, bounds = C._merge(starts, bounds, nodes, facts, cap)
    return starts, bounds, held


def _without_pass_through(starts: List[int], bounds: List[List[fx.Node]],
                          nodes: List[fx.Node]) -> Tuple[List[int], List[List[fx.Node]]]:
    """Joins each stage whose end boundary carries an activation made before
    it to the stage before: a stage's a[i] is made by the stage itself. (A
    tower can end in nodes that are no activations, such as an arange from
    the batch size that only the head reads: the head's input, made earlier,
    would pass through that last stage.)"""
    starts, bounds = list(starts), [list(b) for b in bounds]
    for k in range(len(starts) - 1, 0, -1):  # a joined stage is checked next
        end = starts[k + 1] if k + 1 < len(starts) else len(nodes)
        inside = set(nodes[starts[k]:end])
        if any(b not in inside for b in bounds[k]):
            del starts[k]
            del bounds[k - 1]  # the joined stage ends where stage k ended
    return starts, bounds


def main_order(plan: Any, sizes: List[int]) -> List[Tuple[int, int]]:
    """(tower from 0, stage from 1) of each stage's first forward, in the
    plan's order before the turn: the order of the main runs."""
    seen: Set[Tuple[int, int]] = set()
    out: List[Tuple[int, int]] = []
    for st in plan.steps[:plan.turn]:
        key = (st.branch - 1, st.index)
        if st.kind in FORWARD_KINDS and key not in seen:
            seen.add(key)
            out.append(key)
    for b, n in enumerate(sizes):
        for i in range(1, n + 1):
            if (b, i) not in seen:
                raise RematRuntimeError("remat: the join schedule never runs stage %d.%d forward"
                                        % (b + 1, i))
    return out


def branch_plan(plan: Any, b: int, n: int) -> "remat.Plan":
    """The ops of tower b (from 1) of a join plan as a chain plan of its n
    stages and an output stage n + 1 standing for the turn: T becomes
    `Fall n+1` (it reads a[n]) and `B n+1` (it frees a plain a[n] and makes
    d[n]), the first backward op. The tower's Step follows it."""
    steps: List[remat.Step] = []
    first = 0

    def add(kind: str, index: int, option: int, reads: List[Tuple[str, int]],
            creates: List[Tuple[str, int]], frees: List[Tuple[str, int]], src: Any) -> None:
        st = object.__new__(remat.Step)
        st.op = "%s %d" % (kind, index) if not option else "%s %d/%d" % (kind, index, option)
        st.kind, st.index, st.option, st.pos = kind, index, option, len(steps)
        st.reads, st.creates, st.frees = reads, creates, frees
        st.mem_during, st.mem_after = src.mem_during, src.mem_after
        st.start, st.end = src.start, src.end
        st.copy_at = len(steps)
        st.stops = src.stops  # (T's halves never stop)
        steps.append(st)

    def mine(refs: List[Tuple[str, int, int]]) -> List[Tuple[str, int]]:
        return [(k, i) for k, br, i in refs if br == b]

    for src in plan.steps:
        if src.kind == "T":
            a = mine(src.reads)
            add("Fall", n + 1, 0, a, [("abar", n + 1)], [], src)
            first = len(steps)
            add("B", n + 1, 0, [("d", n + 1), ("abar", n + 1)] + a, [("d", n)],
                [("abar", n + 1)] + [r for r in a if r[0] == "a"], src)
        elif src.branch == b:
            add(src.kind, src.index, src.option, mine(src.reads), mine(src.creates),
                mine(src.frees), src)
    p = remat.Plan.__new__(remat.Plan)
    p.steps = steps
    p.first_backward = first
    p.peak_bytes = plan.peak_bytes
    p.time = plan.time
    p.bandwidth = 0.0
    return p

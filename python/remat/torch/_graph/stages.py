"""Stage graphs: each stage of the cut becomes two GraphModules, its main
run (returns what later stages and the model's outputs read) and its
recomputation (returns a[j])."""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Any, Callable, Dict, List, Sequence, Set

from torch import fx

from .nodes import is_random


@dataclasses.dataclass
class GraphStage:
    index: int                     # 1-based
    name: str
    nodes: List[fx.Node]
    inputs: List[fx.Node]          # main run: values read from outside, placeholder order
    outputs: List[fx.Node]         # main run: values produced here and read later
    boundary: List[fx.Node]        # activations crossing the end of the stage
    re_inputs: List[fx.Node]       # recomputation: inputs, then held values made here
    re_outputs: List[fx.Node]      # recomputation: what it returns (a[j])
    mutated: List[fx.Node]         # placeholders the stage updates in place
    random: bool
    gm: fx.GraphModule
    gm_re: fx.GraphModule
    # an SDPA call whose mask requires grad: with grad, SDPA runs its math
    # kernel; a recomputation without grad must too, or its values differ
    sdpa_math: bool = False


def _subgraph(root: fx.GraphModule, name: str, nodes: Sequence[fx.Node],
              inputs: Sequence[fx.Node], outputs: Sequence[fx.Node],
              keep: Sequence[fx.Node] = ()) -> fx.GraphModule:
    """A GraphModule computing `outputs` from `inputs` with `nodes`, and the
    nodes in `keep` even if no output reads them. A node that is also an
    input is read, not computed, except a random one: it still runs, so the
    random numbers drawn after it stay the same."""
    g = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {a: g.placeholder(a.name) for a in inputs}
    for n in nodes:
        if n in env and not is_random(n):
            continue
        for a in n.all_input_nodes:
            if a.op == "get_attr" and a not in env:
                env[a] = g.node_copy(a)
        copy = g.node_copy(n, lambda a: env[a])
        env.setdefault(n, copy)
    g.output(tuple(env[o] for o in outputs))
    kept = {env[n] for n in keep}
    for n in reversed(list(g.nodes)):  # dead code, keeping side effects and draws
        if n.op not in ("placeholder", "output") and not n.users and not n.is_impure() \
                and not is_random(n) and n not in kept:
            g.erase_node(n)
    gm = fx.GraphModule(root, g, class_name=name)
    _box(gm)
    return gm


def _box(gm: fx.GraphModule) -> None:
    """Boxed calling convention where this torch has it: the module takes one
    list and empties it, so an input can be freed after its last use inside
    the stage, as in eager mode, instead of living until the stage returns."""
    codegen = getattr(fx.graph, "_BoxedCodeGen", None)
    gm.remat_boxed = False  # type: ignore[assignment]
    if codegen is None:
        return
    try:
        gm.graph.set_codegen(codegen())
        gm.recompile()
        gm.remat_boxed = True  # type: ignore[assignment]
    except Exception:  # an older torch whose codegen differs: plain calls
        gm.graph.set_codegen(fx.graph.CodeGen())
        gm.recompile()


def call_stage(gm: fx.GraphModule, args: List[Any]) -> Any:
    """Runs a stage module on `args` (emptied when the module is boxed)."""
    # A GraphModule's own forward, not its __call__: no module hooks to run,
    # and fx's call wrapper walks the traceback of every exception, such as
    # the StopRecompute that ends a recomputation early (BENCHMARKS,
    # "executor overhead"). A compiled stage is a plain callable.
    fn = gm.forward if isinstance(gm, fx.GraphModule) else gm
    if gm.remat_boxed:
        return fn(args)
    out = fn(*args)
    args.clear()
    return out


def build_stage(root: fx.GraphModule, index: int, name: str, nodes: List[fx.Node],
                read_later: Callable[[fx.Node], bool], boundary: List[fx.Node],
                re_outputs: List[fx.Node], held: Set[fx.Node], mutated: List[fx.Node],
                random: bool, remake: AbstractSet[fx.Node] = frozenset()) -> GraphStage:
    """Stage `index`: its main-run module (returns everything later stages or
    the model's outputs read) and its recomputation module (returns a[j]; the
    values of `held` it made in the main run are read, not recomputed; those
    of `remake` are made again even if a[j] does not need them)."""
    inside = set(nodes)
    inputs: List[fx.Node] = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a.op != "get_attr" and a not in inputs:
                inputs.append(a)
    outputs = [n for n in nodes if read_later(n)]
    held_here = [n for n in nodes if n in held]
    re_inputs = inputs + held_here
    gm = _subgraph(root, "Stage%d" % index, nodes, inputs, outputs)
    gm_re = _subgraph(root, "Stage%dRe" % index, nodes, re_inputs, re_outputs,
                      [n for n in nodes if n in remake])
    return GraphStage(index, name, nodes, inputs, outputs, boundary, re_inputs, re_outputs,
                      mutated, random, gm, gm_re)


def stage_name(index: int, nodes: Sequence[fx.Node]) -> str:
    """A readable name: the innermost module path common to the stage's nodes."""
    paths = []
    for n in nodes:
        st = n.meta.get("nn_module_stack")
        if st:
            paths.append(list(v[0] for v in st.values()))
    common: List[str] = []
    if paths:
        for level in zip(*paths):
            if all(x == level[0] for x in level):
                common.append(level[0])
            else:
                break
    where = common[-1] if common and common[-1] else (paths[0][-1] if paths else "graph")
    return "%d:%s" % (index, where or "model")

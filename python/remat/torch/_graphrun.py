"""The graph path: an exported program cut into stages, run stage by stage."""
from __future__ import annotations

import contextlib
import copy
import threading
from typing import AbstractSet, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
import torch.utils._pytree as pytree
from torch import fx

from . import _graph as G
from ._graph import Args, Kwargs
from ._executor import Runner, Step, boundary, rng_state_bytes
from ._profile import (RESERVE, RESERVE_PER_OP, StageRun, dense_bytes, keys_of, measure,
                       through_boundary,
                       unique_bytes)

_HELD = threading.local()


def _register_held(x: Any) -> Any:
    """Called by stage graphs right after a held value is made: from then on
    it is free for the saved-tensor hooks (held once for the whole step)."""
    reg = getattr(_HELD, "registry", None)
    if reg is not None:
        for t in G.tensors_in(x):
            reg.add((t.device.type, t.untyped_storage().data_ptr()))
            if isinstance(reg, KeepAlive):
                reg.alive.append(t)
    return x


class KeepAlive(set):  # type: ignore[type-arg]
    """A recomputation's free storages: the step's, and the held values it
    makes again, kept alive until it ends (a freed one's address could come
    back for a tensor the hooks must save)."""

    def __init__(self, free: Set[Tuple[str, int]]) -> None:
        super().__init__(free)
        self.alive: List[torch.Tensor] = []


class HeldRegistry:
    """Installs a set as the target of _register_held for a with-block."""

    def __init__(self, free: Set[Tuple[str, int]]) -> None:
        self.free = free

    def __enter__(self) -> "HeldRegistry":
        self.prev = getattr(_HELD, "registry", None)
        _HELD.registry = self.free
        return self

    def __exit__(self, *exc: Any) -> None:
        _HELD.registry = self.prev


def _insert_register(gm: fx.GraphModule, held: Set[str]) -> None:
    """Adds a _register_held call after each node named in `held`."""
    for n in list(gm.graph.nodes):
        if n.op != "placeholder" and n.name in held:
            with gm.graph.inserting_after(n):
                gm.graph.call_function(_register_held, (n,))
    gm.recompile()


class CompiledStage:
    """A stage's graph compiled by torch.compile, called as G.call calls a
    stage (unboxed: the compiled code takes the arguments themselves)."""

    remat_boxed = False

    def __init__(self, gm: fx.GraphModule) -> None:
        self.eager = gm  # the stage as it ran before (set_eager)
        g = copy.deepcopy(gm.graph)
        g.set_codegen(fx.graph.CodeGen())
        self.gm = fx.GraphModule(gm, g)
        self.fn = torch.compile(self.gm)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def _registers_held(gm: fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target is _register_held for n in gm.graph.nodes)


def _math_sdpa(on: bool) -> Any:
    """SDPA's math kernel only, when `on` (see GraphStage.sdpa_math)."""
    if not on:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.MATH)


def detached_like(t: torch.Tensor) -> torch.Tensor:
    """t cut from its graph, still requiring grad if t did. Stages read held
    values as the forward made them: SDPA, for one, picks another kernel
    (saving other tensors) for a mask that requires grad (T5's position
    bias, made from a parameter)."""
    d = t.detach()
    return d.requires_grad_(True) if t.requires_grad else d


def free_key(t: torch.Tensor) -> Tuple[str, int]:
    return (t.device.type, t.untyped_storage().data_ptr())


class GraphRun(Runner):
    """An ExportedProgram cut into stages (see _graph for the rules)."""

    path = "graph"
    fall_overheads: List[int] = []  # set by profile_graph
    compiled = 0  # stages whose graphs torch.compile runs (compile_stages)
    held_acts: AbstractSet[fx.Node] = frozenset()  # activations held for the step (_cut)

    def __init__(self, ep: Any, model: torch.nn.Module, flat_inputs: Sequence[Any],
                 max_stages: int, eager_sdpa: Sequence[G.EagerSdpa] = ()) -> None:
        self.ep = ep
        gm = ep.graph_module
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        specs = ep.graph_signature.input_specs
        if len(specs) != len(self.placeholders):
            raise G.CaptureError("the exported program's inputs do not match its signature")
        self.ph_spec = {ph: (s.kind.name, s.target) for ph, s in zip(self.placeholders, specs)}
        for ph, (kind, _) in self.ph_spec.items():
            if kind not in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR", "USER_INPUT"):
                raise G.CaptureError("the exported program has a %s input (%s), which remat "
                                     "cannot feed" % (kind.lower(), ph.name))
        self.user_inputs = [ph for ph in self.placeholders if self.ph_spec[ph][0] == "USER_INPUT"]
        out_node = nodes[-1]
        out_args = list(pytree.tree_leaves(out_node.args[0], is_leaf=lambda x: x is None))
        self.outputs: List[Any] = []
        self.buffer_updates: List[Tuple[fx.Node, fx.Node]] = []
        by_target = {t: ph for ph, (k, t) in self.ph_spec.items() if k == "BUFFER"}
        for spec, arg in zip(ep.graph_signature.output_specs, out_args):
            kind = spec.kind.name
            if kind == "USER_OUTPUT":
                self.outputs.append(arg)
            elif kind == "BUFFER_MUTATION":  # functional IR (older torch)
                self.buffer_updates.append((arg, by_target[spec.target]))
            else:
                raise G.CaptureError("the exported program has a %s output, which remat "
                                     "cannot run" % kind.lower())
        self.out_spec = ep.call_spec.out_spec
        self.returns_loss = _returns_loss(self.outputs, self.out_spec)
        consts = {ph: v for ph, v in self.feeds(model, flat_inputs).items()
                  if self.ph_spec[ph][0] == "CONSTANT_TENSOR"}
        self.causal_masks, self.gqa_calls = G.match_eager_sdpa(gm, consts, eager_sdpa)
        self.calls = [n for n in gm.graph.nodes if n.op in G.CALL_OPS]
        if not self.calls:
            raise G.CaptureError("the exported graph computes nothing")
        self._cut(model, flat_inputs, max_stages)
        self._device = _device_of(self.feeds(model, flat_inputs).values())

    @classmethod
    def capture(cls, model: torch.nn.Module, args: Args, kwargs: Kwargs,
                max_stages: int) -> "GraphRun":
        ep = G.export_model(model, args, kwargs)
        flat = pytree.tree_leaves((args, kwargs))
        eager = G.eager_sdpa_calls(model, args, kwargs) if G.has_sdpa_mask(ep.graph_module) \
            else []
        return cls(ep, model, flat, max_stages, eager)

    @property
    def device(self) -> torch.device:
        return self._device

    def differs_from_eager(self, model: torch.nn.Module, args: Args, kwargs: Kwargs
                           ) -> Optional[str]:
        """See _graph.first_difference."""
        return G.first_difference(model, self.ep.module(), args, kwargs)

    def stage_names(self) -> List[str]:
        return [st.name for st in self.stages]

    def compile_stages(self) -> int:
        """Compiles each stage's graphs (main run and recomputation) with
        torch.compile; a stage that registers held values (a Python call
        inside the graph) stays eager. Returns how many were compiled."""
        n = 0
        for st in self.stages:
            if _registers_held(st.gm) or _registers_held(st.gm_re):
                continue
            st.gm = CompiledStage(st.gm)  # type: ignore[assignment]
            st.gm_re = CompiledStage(st.gm_re)  # type: ignore[assignment]
            n += 1
        self.compiled = n
        return n

    def set_eager(self, indices: Sequence[int]) -> None:
        """Runs the stages at `indices` eager again (compile=True keeps a
        stage eager where that was faster); `compiled` counts the rest."""
        for i in indices:
            st = self.stages[i]
            if isinstance(st.gm, CompiledStage):
                st.gm = st.gm.eager
            if isinstance(st.gm_re, CompiledStage):
                st.gm_re = st.gm_re.eager
        self.compiled = len(self.compiled_stages())

    def compiled_stages(self) -> List[int]:
        """The indices of the stages that run compiled."""
        return [i for i, st in enumerate(self.stages) if isinstance(st.gm, CompiledStage)]

    @contextlib.contextmanager
    def eager_stages(self) -> Iterator[None]:
        """Every stage runs eager inside the block (to profile both variants)."""
        saved, compiled = [(st.gm, st.gm_re) for st in self.stages], self.compiled
        try:
            self.set_eager(range(len(self.stages)))
            yield
        finally:
            for st, (gm, gm_re) in zip(self.stages, saved):
                st.gm, st.gm_re = gm, gm_re
            self.compiled = compiled

    def cache_key(self, module: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int) -> str:
        """Covers the code that runs (the graph, cut into these stages), every
        input and parameter's shape, dtype and device, and the autocast state."""
        from ._executor import AutocastState
        feeds = self.feeds(module, pytree.tree_leaves((args, kwargs)))
        metas = [(ph.name, tuple(v.shape), str(v.dtype), str(v.device), v.requires_grad)
                 if isinstance(v, torch.Tensor) else (ph.name, repr(v)) for ph, v in feeds.items()]
        dev = self._device
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
        return repr((self.gm.code, metas, [[b.name for b in st.boundary] for st in self.stages],
                     AutocastState().key(), name, repeat, self.compiled))

    def profile(self, module: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                progress: Any) -> Tuple[List[Dict[str, Any]], int, int, int]:
        return profile_graph(self, module, pytree.tree_leaves((args, kwargs)), repeat, progress)

    def run(self, module: torch.nn.Module, entry: Any, args: Args, kwargs: Kwargs) -> Any:
        flat = pytree.tree_leaves((args, kwargs))
        feeds = self.feeds(module, flat)
        step = Step(self, entry.plan, set(), _cuda_devices(feeds.values()), entry.link)
        outs = self.forward(step, feeds)
        return pytree.tree_unflatten(outs, self.out_spec)

    # -- feeding placeholders ---------------------------------------------------
    def feeds(self, model: torch.nn.Module, flat_inputs: Sequence[Any]) -> Dict[fx.Node, Any]:
        params = dict(model.named_parameters(remove_duplicate=False))
        buffers = dict(model.named_buffers(remove_duplicate=False))
        device = next(iter(params.values())).device if params else None
        out: Dict[fx.Node, Any] = {}
        k = 0
        for ph in self.placeholders:
            kind, target = self.ph_spec[ph]
            if kind == "PARAMETER":
                out[ph] = params[target]
            elif kind == "BUFFER":
                out[ph] = buffers[target]
            elif kind == "CONSTANT_TENSOR":
                c = self.ep.constants[target]
                out[ph] = c.to(device) if device is not None and c.device != device else c
            else:
                out[ph] = flat_inputs[k]
                k += 1
        return out

    # -- cutting ----------------------------------------------------------------
    def _cut(self, model: torch.nn.Module, flat_inputs: Sequence[Any], max_stages: int) -> None:
        feeds = self.feeds(model, flat_inputs)
        scratch = {ph: v.clone() if isinstance(v, torch.Tensor) and self.ph_spec[ph][0] == "BUFFER"
                   else v for ph, v in feeds.items()}
        with torch.random.fork_rng(devices=_cuda_devices(feeds.values())):
            facts = G.analyze(self.gm, self.calls, scratch)
        ph_storage = {ph: G.storage_key(v)[0] for ph, v in scratch.items()
                      if isinstance(v, torch.Tensor)}
        storage_of: Dict[fx.Node, G.StorageKey] = dict(ph_storage)
        for n in self.calls:
            if facts[n].outputs:
                storage_of[n] = facts[n].outputs[0][0]
        dyn = G.dynamic_nodes(self.gm, set(self.user_inputs))
        acts = {n for n in self.calls if n in dyn and facts[n].requires_grad}
        self.input_acts = [ph for ph in self.user_inputs
                           if isinstance(scratch[ph], torch.Tensor) and scratch[ph].requires_grad]
        pinned, mutated_keys = G.pinned_positions(self.calls, facts, set(ph_storage.values()))
        self.held_acts = G.held_activations(self.calls, facts, acts, self.input_acts,
                                            storage_of, pinned)
        cut = G.choose_cuts(self.calls, facts, acts, self.input_acts, storage_of, pinned,
                            max_stages, self.held_acts)
        self.cut_reasons = cut.reasons
        self.facts = facts
        self.acts = acts
        self._build_stages(cut, facts, acts, mutated_keys, ph_storage, storage_of)

    def _build_stages(self, cut: G.Cut, facts: Dict[fx.Node, G.NodeFacts], acts: Set[fx.Node],
                      mutated_keys: Set[G.StorageKey], ph_storage: Dict[fx.Node, G.StorageKey],
                      storage_of: Dict[fx.Node, G.StorageKey]) -> None:
        ends = cut.starts[1:] + [len(self.calls)]
        stage_of: Dict[fx.Node, int] = {}
        for j, (s, e) in enumerate(zip(cut.starts, ends), 1):
            for p in range(s, e):
                stage_of[self.calls[p]] = j
        L = len(cut.starts)
        out_set = {o for o in self.outputs if isinstance(o, fx.Node)}
        update_srcs = {src for src, _ in self.buffer_updates}
        last_reader: Dict[fx.Node, int] = {}
        for n in self.calls:
            for a in n.all_input_nodes:
                last_reader[a] = max(last_reader.get(a, 0), stage_of[n])
        # Held: read by a later stage but not an activation, or returned
        # before the last stage. Recomputations read them, not recompute them.
        held = {n for n in self.calls if (n not in acts or n in self.held_acts)
                and last_reader.get(n, 0) > stage_of[n]}
        held |= {o for o in out_set if o in stage_of and stage_of[o] < L
                 and (o not in acts or last_reader.get(o, 0) <= stage_of[o])}
        self.held = held
        # A held value sharing storage with a recomputed activation (x.detach())
        # is not free for the hooks: autograd's copies of x must follow the plan.
        recomputed = {storage_of[n] for n in acts - held if n in storage_of}
        self.registered = {n for n in held if storage_of.get(n) not in recomputed}
        # The recomputation of a held value's maker makes it again when it
        # requires grad: the ops making it saved tensors for its backward
        # (T5's position bias: the bucket indices of its embedding), and a
        # recomputation must save what the main run saved. It is free for
        # the hooks there too (registered in a per-recomputation set).
        grad_held = {n for n in held if facts[n].requires_grad}
        key_to_ph = {k: ph for ph, k in ph_storage.items()}
        self.stages: List[G.GraphStage] = []
        for j, (s, e) in enumerate(zip(cut.starts, ends), 1):
            nodes = self.calls[s:e]
            inside = set(nodes)

            def read_later(n: fx.Node, j: int = j) -> bool:
                return last_reader.get(n, 0) > j or n in out_set or n in update_srcs

            mutated = sorted({key_to_ph[k] for n in nodes for k in facts[n].mutated
                              if k in mutated_keys and k in key_to_ph},
                             key=lambda ph: ph.name)
            if j < L:
                re_out = list(cut.boundaries[j - 1])
            else:
                re_out = [o for o in self.outputs if isinstance(o, fx.Node) and o in inside
                          and o in acts]
            st = G.build_stage(self.gm, j, G.stage_name(j, nodes), nodes, read_later,
                               list(cut.boundaries[j - 1]), re_out, held - grad_held, mutated,
                               any(facts[n].random for n in nodes), grad_held)
            st.sdpa_math = G.sdpa_mask_requires_grad(nodes, facts)
            _insert_register(st.gm, {n.name for n in nodes if n in self.registered})
            _insert_register(st.gm_re, {n.name for n in nodes
                                        if n in self.registered and n in grad_held})
            self.stages.append(st)
        self.n_stages = L
        self.stage_of = stage_of
        self.drop_after: Dict[int, List[fx.Node]] = {}
        keep_to_end = out_set | update_srcs
        for a, j in last_reader.items():
            if a not in keep_to_end:
                self.drop_after.setdefault(j, []).append(a)

    # -- running ----------------------------------------------------------------
    def start(self, step: Step, feeds: Dict[fx.Node, Any]) -> None:
        """Per-step values for recomputation: placeholders, snapshots of the
        placeholders the graph mutates, held values (filled by the run)."""
        vals: Dict[fx.Node, Any] = dict(feeds)
        snaps: Dict[fx.Node, torch.Tensor] = {}
        for st in self.stages:
            for ph in st.mutated:
                if ph not in snaps:
                    snaps[ph] = feeds[ph].detach().clone()
                    step.free_storages.add(free_key(snaps[ph]))
        step.ctx = (vals, snaps)
        for ph, v in feeds.items():
            if isinstance(v, torch.Tensor):
                step.free_storages.add(free_key(v))
                if self.ph_spec[ph][0] == "USER_INPUT":
                    step.watch(v, "input %r" % ph.name)
        step.set_input([feeds[ph] for ph in self.input_acts])

    def forward(self, step: Step, feeds: Dict[fx.Node, Any]) -> List[Any]:
        """The model's forward by the schedule; returns the flat outputs."""
        env: Dict[fx.Node, Any] = dict(feeds)
        self.start(step, feeds)
        vals = step.ctx[0]
        if self.input_acts:
            for ph, v in zip(self.input_acts, boundary(step, 0, [env[p] for p in self.input_acts])):
                env[ph] = v

        for j, st in enumerate(self.stages, 1):
            step.before_main(j)
            if st.random:
                step.record_rng(j)
            args = [env[a] for a in st.inputs]
            for a in self.drop_after.get(j, ()):
                env.pop(a, None)  # only `args` holds them now: freed inside the stage
            with step.main_stage(j), HeldRegistry(step.free_storages):
                outs = G.call(st.gm, args)
            for o, v in zip(st.outputs, outs):
                env[o] = v
                if o in self.held:
                    vals[o] = pytree.tree_map_only(torch.Tensor, detached_like, v)
                    if o in self.outputs:
                        for t in G.tensors_in(v):
                            step.watch(t, "output %r" % o.name)
            bnd = boundary(step, j, [env[b] for b in st.boundary])
            for b, v in zip(st.boundary, bnd):
                env[b] = v
            for src, ph in self.buffer_updates:
                if self.stage_of.get(src) == j:
                    with torch.no_grad():
                        feeds[ph].copy_(env[src])
            a_j = bnd if j < self.n_stages else [env[o] for o in st.re_outputs]
            del outs, bnd, v
            step.after_main(j, a_j)
            del a_j
        step.finish_forward()
        return [env[o] if isinstance(o, fx.Node) else o for o in self.outputs]

    def recompute(self, step: Step, j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        st = self.stages[j - 1]
        vals, snaps = step.ctx
        prev = {b: i for i, b in enumerate(self.stages[j - 2].boundary)} if j > 1 else \
            {ph: i for i, ph in enumerate(self.input_acts)}
        args = []
        for a in st.re_inputs:
            if a in prev:
                t = a_prev[prev[a]].detach()
                args.append(t.requires_grad_(keep) if keep and t.is_floating_point() else t)
            elif a in snaps:
                args.append(snaps[a].clone() if a in st.mutated else snaps[a])
            else:
                args.append(vals[a])
        mutated_clones = [x for a, x in zip(st.re_inputs, args) if a in st.mutated]
        for x in mutated_clones:
            step.free_storages.add(free_key(x))
        try:
            if not keep:
                with torch.no_grad(), HeldRegistry(set()), _math_sdpa(st.sdpa_math):
                    outs = G.call(st.gm_re, args)
                return [o.detach() for o in outs], None
            saved: List[torch.Tensor] = []
            free = KeepAlive(step.free_storages)  # plus the held values made again here

            def pack(t: torch.Tensor) -> torch.Tensor:
                if free_key(t) in free or t.untyped_storage().data_ptr() == 0:
                    return t
                d = t.detach()  # the tensor itself would make a cycle through its grad_fn
                saved.append(d)
                return d
            try:
                with torch.enable_grad(), \
                        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                        HeldRegistry(free):
                    outs = G.call(st.gm_re, args)
            finally:
                # The remade held values have this recomputation's graph, whose
                # nodes hold `pack`, hence `free`: a cycle through autograd's
                # C++ objects, which the garbage collector never frees.
                free.alive.clear()
            return [o.detach() for o in outs], saved
        finally:
            for x in mutated_clones:
                step.free_storages.discard(free_key(x))


def _returns_loss(outputs: List[Any], spec: Any) -> bool:
    """Whether an output named "loss" (a ModelOutput's, a dict's) is a scalar."""
    try:
        paths = [p for p, _ in pytree.tree_flatten_with_path(
            pytree.tree_unflatten(list(range(len(outputs))), spec))[0]]
    except Exception:  # an output type pytree cannot walk: assume none
        return False
    for path, o in zip(paths, outputs):
        names = [str(getattr(k, "key", getattr(k, "name", ""))) for k in path]
        val = o.meta.get("val") if isinstance(o, fx.Node) else None
        if names and names[-1] == "loss" and isinstance(val, torch.Tensor) and val.dim() == 0:
            return True
    return False


def _cuda_devices(values: Any) -> List[int]:
    devs = {t.device.index for t in values if isinstance(t, torch.Tensor) and t.is_cuda}
    return sorted(d for d in devs if d is not None)


class _StageRun(StageRun):
    """Stage j of a GraphRun on the values the stages before it made."""

    def __init__(self, prog: GraphRun, st: G.GraphStage, env: Dict[fx.Node, Any],
                 prev: Sequence[fx.Node], base_free: Set[Tuple[str, int]]) -> None:
        self.prog, self.st, self.env, self.base_free = prog, st, env, base_free
        self.prev = set(prev)
        self.name = st.name
        self.last: Dict[fx.Node, Any] = {}

    def fwd(self, grad: bool, keep: bool = True) -> StageRun.Result:
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
        free = set(self.base_free) | {free_key(x) for a, x in zip(st.inputs, args)
                                      if a in st.mutated}
        saved: List[torch.Tensor] = []

        def pack(t: torch.Tensor) -> Any:
            if free_key(t) in free:
                return t
            if not keep:  # as the main forward's Fn: autograd keeps a handle only
                return None
            d = t.detach()  # the tensor itself would make a cycle through its grad_fn
            saved.append(d)
            return d
        held_leaves = [t for a, x in zip(st.inputs, args) if grad and a in self.prog.held
                       for t in G.tensors_in(x) if t.requires_grad]
        if grad:
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(
                    pack, lambda t: t), HeldRegistry(free):
                outs = G.call(st.gm, args)
        else:
            with torch.no_grad(), HeldRegistry(free):
                outs = G.call(st.gm, args)
        self.last = dict(zip(st.outputs, outs))
        out_a: List[torch.Tensor] = [self.last[b] for b in (st.boundary or st.re_outputs)]
        graph_outs = out_a
        if not st.boundary:  # the last stage: backward from the loss if it returns one
            scalars = [t for t in out_a if t.dim() == 0 and t.requires_grad]
            graph_outs = scalars or out_a
        res = StageRun.Result(out_a, saved, graph_outs, leaves, free)
        res.held_leaves = held_leaves
        return res


def profile_graph(prog: GraphRun, model: torch.nn.Module, flat_inputs: Sequence[Any],
                  repeat: int, progress: Any) -> Tuple[List[Dict[str, Any]], int, int, int]:
    """Measures every stage: (stage dicts, the output stage's last, input
    bytes, input grad bytes, held bytes)."""
    feeds = prog.feeds(model, flat_inputs)
    env: Dict[fx.Node, Any] = {ph: v.clone() if isinstance(v, torch.Tensor) and
                               prog.ph_spec[ph][0] == "BUFFER" else v for ph, v in feeds.items()}
    free = {free_key(v) for v in env.values() if isinstance(v, torch.Tensor)}
    device = _device_of(feeds.values())
    out: List[Dict[str, Any]] = []
    fall: List[int] = []
    held_bytes = 0
    with torch.random.fork_rng(devices=_cuda_devices(feeds.values())):
        prev: Sequence[fx.Node] = prog.input_acts
        for st in prog.stages:
            run = _StageRun(prog, st, env, prev, free)
            info = measure(run, repeat, device, outputs_held=not st.boundary,
                           loss_output=prog.returns_loss)
            held_bytes += info.pop("held_outputs")
            fall.append(info.pop("fall_overhead"))
            out.append(info)
            for o, v in run.last.items():  # the values the next stages read
                env[o] = pytree.tree_map_only(
                    torch.Tensor, detached_like if o in prog.held else torch.Tensor.detach, v)
                if o in prog.held:
                    ts = G.tensors_in(env[o])
                    held_bytes += unique_bytes(ts, free)
                    free |= keys_of(ts)
                if st.boundary and o in prog.outputs and o in prog.acts and not prog.returns_loss:
                    # returned before the last stage: the caller's loss sends it a
                    # gradient at the start of the backward, alive until this stage's B
                    held_bytes += dense_bytes(G.tensors_in(env[o]))
            prev = st.boundary
            progress.update(st.index, prog.n_stages, "stages profiled")
    out.append({"name": "output", "fwd_time": 0.0, "bwd_time": 0.0, "out_bytes": 0,
                "saved_bytes": 0})  # the caller's loss: outside the model
    prog.fall_overheads = fall + [0]
    ins = [feeds[ph] for ph in prog.input_acts]
    snaps = {ph for st in prog.stages for ph in st.mutated}
    held_bytes += sum(feeds[ph].untyped_storage().nbytes() for ph in snaps)
    held_bytes += sum(1 for st in prog.stages if st.random) * rng_state_bytes(device)
    prog.backward_held = shared_param_grads(prog, feeds, out) + held_grads(prog, env)
    held_bytes += sum(b[0] for b in prog.backward_held)
    held_bytes += RESERVE + RESERVE_PER_OP * len(prog.calls)
    return out, unique_bytes(ins), dense_bytes(ins), held_bytes


def shared_param_grads(prog: GraphRun, feeds: Dict[fx.Node, Any],
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
                stages[r - 1]["bwd_overhead"] += nbytes
    return out


def held_grads(prog: GraphRun, env: Dict[fx.Node, Any]) -> List[List[int]]:
    """A held value that requires grad (an activation many layers read; T5's
    position bias, made from a parameter): autograd sums the readers' parts
    in its input buffer from the last reader's backward until its maker's
    backward takes it: [bytes, last reader, maker]."""
    out = []
    for a in sorted(prog.held, key=lambda n: prog.stage_of[n]):
        v = env.get(a)
        if not any(t.requires_grad for t in G.tensors_in(v)):
            continue
        readers = {prog.stage_of[u] for u in a.users if u in prog.stage_of}
        maker = prog.stage_of[a]
        if max(readers, default=maker) > maker:
            out.append([dense_bytes(G.tensors_in(v)), max(readers), maker])
    return out


def _device_of(values: Any) -> torch.device:
    for v in values:
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")

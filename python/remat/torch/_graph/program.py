"""GraphProgram: an exported program cut into stages, run stage by stage
in the training step, with a GraphReplay per step for recomputations."""
from __future__ import annotations

import contextlib
import copy
from typing import AbstractSet, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
import torch.utils._pytree as pytree
from torch import fx

import remat

from .._executor import RematRuntimeError, Step, boundary
from .._offload import HostLink
from .._program import Args, CaptureError, Kwargs, Profile
from .._progress import Progress
from .._tensors import (AutocastState, FreeKey, StopRecompute, StorageKey, cuda_devices,
                        detached_like, device_of, free_key, saving, storage_key, tensors_in)
from . import cut as C
from .export import custom_functions, dynamic_shapes, export_model, first_difference
from .guards import Guard, recording
from .held import HeldRegistry, KeepAlive, insert_register, registers_held
from .measure import profile_graph
from .moe import eager_grouped_calls, has_grouped_fallback, match_eager_grouped_mm
from .nodes import CALL_OPS
from .sdpa import EagerSdpa, eager_sdpa_calls, has_sdpa_mask, match_eager_sdpa, \
    sdpa_mask_requires_grad
from .stages import GraphStage, build_stage, call_stage, stage_name


class CompiledStage:
    """A stage's graph compiled by torch.compile, called as call_stage calls a
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


def _math_sdpa(on: bool) -> Any:
    """SDPA's math kernel only, when `on` (see GraphStage.sdpa_math)."""
    if not on:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.MATH)


class GraphProgram:
    """An ExportedProgram cut into stages (see cut.py for the rules); keeps
    the _program.Program contract."""

    path = "graph"
    compiled = 0  # stages whose graphs torch.compile runs (compile_stages)
    held_acts: AbstractSet[fx.Node] = frozenset()  # activations held for the step (_cut)
    grouped_mm = 0  # traced grouped-matmul fallbacks made eager's kernel (moe.py)
    guard: Optional[Guard] = None  # the Python state the capture read (guards.py)
    _walk: Optional["_FeedWalk"] = None  # feeds' way to the parameters and buffers

    def __init__(self, ep: Any, model: torch.nn.Module, flat_inputs: Sequence[Any],
                 max_stages: int, eager_sdpa: Sequence[EagerSdpa] = ()) -> None:
        self.ep = ep
        gm = ep.graph_module
        self.gm = gm
        nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        specs = ep.graph_signature.input_specs
        if len(specs) != len(self.placeholders):
            raise CaptureError("the exported program's inputs do not match its signature")
        self.ph_spec = {ph: (s.kind.name, s.target) for ph, s in zip(self.placeholders, specs)}
        for ph, (kind, _) in self.ph_spec.items():
            if kind not in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR", "USER_INPUT"):
                raise CaptureError("the exported program has a %s input (%s), which remat "
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
                raise CaptureError("the exported program has a %s output, which remat "
                                     "cannot run" % kind.lower())
        self.out_spec = ep.call_spec.out_spec
        self.returns_loss = _returns_loss(self.outputs, self.out_spec)
        feeds = self.feeds(model, flat_inputs)
        consts = {ph: v for ph, v in feeds.items() if self.ph_spec[ph][0] == "CONSTANT_TENSOR"}
        # A dynamic graph (dynamic shapes: sizes are symbols) runs other shapes too
        self.dynamic = any(isinstance(d, torch.SymInt) for ph in self.user_inputs
                           for t in tensors_in(ph.meta.get("val")) for d in t.shape)
        shapes = {ph: feeds[ph].shape for ph in self.user_inputs
                  if isinstance(feeds[ph], torch.Tensor)} if self.dynamic else None
        self.causal_masks, self.gqa_calls, self.causal_check = match_eager_sdpa(
            gm, consts, eager_sdpa, shapes)
        self.calls = [n for n in gm.graph.nodes if n.op in CALL_OPS]
        if not self.calls:
            raise CaptureError("the exported graph computes nothing")
        self._cut(model, flat_inputs, max_stages)
        self._device = device_of(self.feeds(model, flat_inputs).values())

    @classmethod
    def capture(cls, model: torch.nn.Module, args: Args, kwargs: Kwargs,
                max_stages: int, dynamic: bool = False) -> "GraphProgram":
        """dynamic: export with dynamic dimensions (export.dynamic_shapes),
        so that the program runs other input shapes too."""
        spec = dynamic_shapes(model, args, kwargs) if dynamic else None
        if dynamic and spec is None:
            raise CaptureError("this torch cannot export with dynamic shapes")
        with recording(model) as rec:  # the Python state export reads (guards.py)
            try:
                ep = export_model(model, args, kwargs, spec)
            except Exception as e:  # export raises many kinds
                if not _data_dependent(e):
                    raise
                raise CaptureError(
                    "data-dependent: the model's control flow or shapes depend on tensor values "
                    "(an `if` on a tensor, per-expert token lists of a mixture of experts, "
                    "nonzero, x[mask]), which one graph cannot hold (%s: %s)" % (
                        type(e).__name__, (str(e).strip().splitlines() or [""])[0])) from e
        flat = pytree.tree_leaves((args, kwargs))
        eager = eager_sdpa_calls(model, args, kwargs) if has_sdpa_mask(ep.graph_module) \
            else []
        grouped = match_eager_grouped_mm(ep.graph_module, eager_grouped_calls(
            model, args, kwargs)) if has_grouped_fallback(ep.graph_module) else 0
        prog = cls(ep, model, flat, max_stages, eager)
        prog.grouped_mm = grouped
        prog.guard = rec.guard()
        prog.guard.prune()  # (after the capture's own runs of the model)
        return prog

    @property
    def device(self) -> torch.device:
        return self._device

    def differs_from_eager(self, model: torch.nn.Module, args: Args, kwargs: Kwargs
                           ) -> Optional[str]:
        """None when the graph's gradients are eager's, else why not (see
        export.custom_functions and export.first_difference)."""
        funcs = custom_functions(model, args, kwargs)
        if funcs:
            return "the model calls custom autograd Functions (%s), whose own backward " \
                   "torch.export does not keep, so the graph's gradients would differ" \
                   % ", ".join(funcs)
        diff = first_difference(model, self.ep.module(), args, kwargs)
        if diff is None:
            return None
        return "the exported graph runs other kernels than eager (%s), so gradients would " \
               "differ in the last bits" % diff

    def stage_names(self) -> List[str]:
        return [st.name for st in self.stages]

    def compile_stages(self) -> int:
        """Compiles each stage's graphs (main run and recomputation) with
        torch.compile; a stage that registers held values (a Python call
        inside the graph) stays eager. Returns how many were compiled."""
        n = 0
        for st in self.stages:
            if registers_held(st.gm) or registers_held(st.gm_re):
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
        feeds = self.feeds(module, pytree.tree_leaves((args, kwargs)))
        metas = [(ph.name, tuple(v.shape), str(v.dtype), str(v.device), v.requires_grad)
                 if isinstance(v, torch.Tensor) else (ph.name, repr(v)) for ph, v in feeds.items()]
        dev = self._device
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
        return repr((self.gm.code, metas, [[b.name for b in st.boundary] for st in self.stages],
                     AutocastState().key(), name, repeat, self.compiled))

    def profile(self, module: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                progress: Progress) -> Profile:
        return profile_graph(self, module, pytree.tree_leaves((args, kwargs)), repeat, progress)

    def profile_sizes(self, module: torch.nn.Module, feeds: Dict[fx.Node, Any],
                      progress: Progress) -> Profile:
        """The profile's sizes from a value per placeholder (FakeTensors with
        symbolic sizes: sizes.SizeModel); times and temporaries 0."""
        return profile_graph(self, module, [], 1, progress, feeds=feeds)

    def dims_text(self) -> str:
        """The dynamic dimensions, by input ("input_ids.shape[0]"), or ""."""
        if not self.dynamic:
            return ""
        seen: Set[str] = set()
        out: List[str] = []
        ranges = {str(s): r for s, r in self.ep.range_constraints.items()}
        for ph in self.user_inputs:
            for t in tensors_in(ph.meta.get("val")):
                for i, d in enumerate(t.shape):
                    r = ranges.get(str(d))
                    if r is not None and r.lower == r.upper:
                        continue  # a symbol export fixed to one value
                    if isinstance(d, torch.SymInt) and str(d) not in seen:
                        seen.add(str(d))
                        out.append("%s.shape[%d]" % (ph.name, i))
        return ", ".join(out)

    def takes(self, flat_inputs: Sequence[Any]) -> bool:
        """Whether the SDPA calls made causal are so for these inputs too
        (sdpa.CausalCheck; the sizes' own conditions are sizes.SizeModel's)."""
        if self.causal_check is None:
            return True
        shapes = {ph.name: x.shape for ph, x in zip(self.user_inputs, flat_inputs)
                  if isinstance(x, torch.Tensor)}
        return self.causal_check.holds(shapes)

    def forward(self, model: torch.nn.Module, plan: "remat.Plan", link: Optional[HostLink],
                args: Args, kwargs: Kwargs) -> Any:
        """One training step's forward by `plan`: the model's outputs."""
        feeds = self.feeds(model, pytree.tree_leaves((args, kwargs)))
        replay = GraphReplay(self, feeds)
        step = Step(replay, self.n_stages, plan, set(), cuda_devices(feeds.values()), link,
                    outputs_last=True)
        outs = self._run_stages(step, replay, feeds)
        return pytree.tree_unflatten(outs, self.out_spec)

    def snapshot_placeholders(self) -> List[fx.Node]:
        """The placeholders the stages mutate, whose values at the step's
        start recomputations read (cached for this list of stages: a join's
        tower views have their own)."""
        got = self.__dict__.get("_snapshot_phs")
        if got is None or got[0] is not self.stages:
            phs = list(dict.fromkeys(ph for st in self.stages for ph in st.mutated))
            got = self._snapshot_phs = (self.stages, phs)
        out: List[fx.Node] = got[1]
        return out

    # -- feeding placeholders ---------------------------------------------------
    def feeds(self, model: torch.nn.Module, flat_inputs: Sequence[Any]) -> Dict[fx.Node, Any]:
        """Each placeholder's value: the model's parameter or buffer of its
        name, the program's constant, or the next input. Read through the
        modules' own dicts along each name (the walk named_parameters makes,
        run in every step), once checked against named_parameters; a
        missing name reads them from named_parameters."""
        walk = self._walk
        if walk is None:
            full = self._feeds(model, flat_inputs)
            walk = self._walk = _FeedWalk(self.placeholders, self.ph_spec)
            fast = walk.feeds(model, flat_inputs, self.ep.constants)
            walk.ok = fast is not None and len(fast) == len(full) and all(
                fast[ph] is v for ph, v in full.items())
            return full
        if walk.ok:
            fast = walk.feeds(model, flat_inputs, self.ep.constants)
            if fast is not None:
                return fast
        return self._feeds(model, flat_inputs)

    def _feeds(self, model: torch.nn.Module, flat_inputs: Sequence[Any]) -> Dict[fx.Node, Any]:
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
        with torch.random.fork_rng(devices=cuda_devices(feeds.values())):
            facts = C.analyze(self.gm, self.calls, scratch)
        ph_storage = {ph: storage_key(v)[0] for ph, v in scratch.items()
                      if isinstance(v, torch.Tensor)}
        storage_of: Dict[fx.Node, StorageKey] = dict(ph_storage)
        for n in self.calls:
            if facts[n].outputs:
                storage_of[n] = facts[n].outputs[0][0]
        dyn = C.dynamic_nodes(self.gm, set(self.user_inputs))
        acts = {n for n in self.calls if n in dyn and facts[n].requires_grad}
        self.input_acts = [ph for ph in self.user_inputs
                           if isinstance(scratch[ph], torch.Tensor) and scratch[ph].requires_grad]
        pinned, mutated_keys = C.pinned_positions(self.calls, facts, set(ph_storage.values()))
        self.held_acts = C.held_activations(self.calls, facts, acts, self.input_acts,
                                            storage_of, pinned)
        cut = C.choose_cuts(self.calls, facts, acts, self.input_acts, storage_of, pinned,
                            max_stages, self.held_acts)
        self.cut_reasons = cut.reasons
        self.facts = facts
        self.acts = acts
        self._build_stages(cut, facts, acts, mutated_keys, ph_storage, storage_of)

    def _build_stages(self, cut: C.Cut, facts: Dict[fx.Node, C.NodeFacts], acts: Set[fx.Node],
                      mutated_keys: Set[StorageKey], ph_storage: Dict[fx.Node, StorageKey],
                      storage_of: Dict[fx.Node, StorageKey]) -> None:
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
        self.stages: List[GraphStage] = []
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
            st = build_stage(self.gm, j, stage_name(j, nodes), nodes, read_later,
                               list(cut.boundaries[j - 1]), re_out, held - grad_held, mutated,
                               any(facts[n].random for n in nodes), grad_held)
            st.sdpa_math = sdpa_mask_requires_grad(nodes, facts)
            insert_register(st.gm, {n.name for n in nodes if n in self.registered})
            insert_register(st.gm_re, {n.name for n in nodes
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
    def _run_stages(self, step: Step, replay: "GraphReplay", feeds: Dict[fx.Node, Any]
                    ) -> List[Any]:
        """The model's forward by the schedule; returns the flat outputs."""
        env: Dict[fx.Node, Any] = dict(feeds)
        replay.start(step)
        if self.input_acts:
            for ph, v in zip(self.input_acts, boundary(step, 0, [env[p] for p in self.input_acts])):
                env[ph] = v

        for j, st in enumerate(self.stages, 1):
            bnd = self._run_main(step, replay, j, j, env, feeds)
            a_j = bnd if j < self.n_stages else [env[o] for o in st.re_outputs]
            del bnd
            step.after_main(j, a_j)
            del a_j
        step.finish_forward()
        return [env[o] if isinstance(o, fx.Node) else o for o in self.outputs]

    def _run_main(self, step: Step, replay: "GraphReplay", i: int, j: int,
                  env: Dict[fx.Node, Any], feeds: Dict[fx.Node, Any]) -> List[Any]:
        """The main run of stage j of the program, stage i of the step's
        chain (a join's tower runs its own stages i = 1.. of the program's
        j): its values into env; returns its boundary values."""
        st = self.stages[j - 1]
        step.before_main(i)
        if st.random:
            step.record_rng(i)
        args = [env[a] for a in st.inputs]
        for a in self.drop_after.get(j, ()):
            env.pop(a, None)  # only `args` holds them now: freed inside the stage
        with step.main_stage(i), HeldRegistry(step.free_storages):
            outs = call_stage(st.gm, args)
        for o, v in zip(st.outputs, outs):
            env[o] = v
            if o in self.held:
                replay.vals[o] = pytree.tree_map_only(torch.Tensor, detached_like, v)
                if o in self.outputs:
                    for t in tensors_in(v):
                        step.watch(t, "output %r" % o.name)
        bnd = boundary(step, i, [env[b] for b in st.boundary])
        for b, v in zip(st.boundary, bnd):
            env[b] = v
        self._buffer_updates(j, env, feeds)
        del outs, v
        return bnd

    def _buffer_updates(self, j: int, env: Dict[fx.Node, Any], feeds: Dict[fx.Node, Any]) -> None:
        """The buffers stage j updates (BatchNorm statistics), copied into the model's."""
        for src, ph in self.buffer_updates:
            if self.stage_of.get(src) == j:
                with torch.no_grad():
                    feeds[ph].copy_(env[src])


def feed_free_keys(feeds: Dict[fx.Node, Any]) -> Set[FreeKey]:
    """The free keys of the placeholders' tensors."""
    return {free_key(v) for v in feeds.values() if isinstance(v, torch.Tensor)}


class GraphReplay:
    """One training step of a GraphProgram: what its recomputations read
    (the placeholders' values, snapshots of those the graph mutates, the held
    values the forward made) and how they run a stage again."""

    def __init__(self, prog: GraphProgram, feeds: Dict[fx.Node, Any]) -> None:
        self.prog = prog
        self.feeds = feeds
        self.vals: Dict[fx.Node, Any] = dict(feeds)  # held values join as the forward makes them
        self.snaps = Snapshots([])

    def start(self, step: Step, feed_keys: Optional[Set[FreeKey]] = None) -> None:
        """Snapshots of the mutated placeholders; every placeholder and
        snapshot free for the hooks; user inputs watched; a[0] given.
        feed_keys: the placeholders' free keys, when the caller has them
        (a join's towers share one step's feeds)."""
        prog, feeds = self.prog, self.feeds
        if not step.all_native:  # (else no hook and nothing runs a stage again)
            self.snaps = Snapshots([(ph, feeds[ph]) for ph in prog.snapshot_placeholders()])
            step.free_storages |= self.snaps.keys()
            step.free_storages |= feed_keys if feed_keys is not None else feed_free_keys(feeds)
        for ph, v in feeds.items():
            if isinstance(v, torch.Tensor) and prog.ph_spec[ph][0] == "USER_INPUT":
                step.watch(v, "input %r" % ph.name)
        step.set_input([feeds[ph] for ph in prog.input_acts])

    def recompute(self, step: Step, j: int, a_prev: List[torch.Tensor], keep: bool
                  ) -> Tuple[List[torch.Tensor], Optional[List[torch.Tensor]]]:
        prog = self.prog
        st = prog.stages[j - 1]
        prev = {b: i for i, b in enumerate(prog.stages[j - 2].boundary)} if j > 1 else \
            {ph: i for i, ph in enumerate(prog.input_acts)}
        args = []
        for a in st.re_inputs:
            if a in prev:
                t = a_prev[prev[a]].detach()
                args.append(t.requires_grad_(keep) if keep and t.is_floating_point() else t)
            elif a in self.snaps:
                snap = self.snaps.get(a)
                args.append(snap.clone() if a in st.mutated else snap)
            else:
                args.append(self.vals[a])
        mutated_clones = [x for a, x in zip(st.re_inputs, args) if a in st.mutated]
        for x in mutated_clones:
            step.free_storages.add(free_key(x))
        try:
            if not keep:
                with torch.no_grad(), HeldRegistry(set()), _math_sdpa(st.sdpa_math):
                    outs = call_stage(st.gm_re, args)
                return [o.detach() for o in outs], None
            saved: List[torch.Tensor] = []
            free = KeepAlive(step.free_storages)  # plus the held values made again here
            try:
                with torch.enable_grad(), \
                        saving(free, saved, keeps=step.keeps, stop=step.stop_after), \
                        HeldRegistry(free):
                    outs = call_stage(st.gm_re, args)
            except StopRecompute:  # the caller reads only the saved tensors
                return [], saved
            finally:
                # The remade held values have this recomputation's graph, whose
                # nodes hold the hooks, hence `free`: a cycle through autograd's
                # C++ objects, which the garbage collector never frees.
                free.alive.clear()
            return [o.detach() for o in outs], saved
        finally:
            for x in mutated_clones:
                step.free_storages.discard(free_key(x))


class Snapshots:
    """Copies of tensors at one moment (the mutated placeholders at the
    step's start), taken in one copy per dtype and device: the group's
    contiguous tensors are concatenated into one flat tensor (one kernel,
    not one clone each: ResNet-50 has 159 BatchNorm buffers), and a copy is
    a view of it with the tensor's sizes and strides, made when a
    recomputation first reads it. A tensor that is not contiguous gets a
    clone of its own (same strides)."""

    def __init__(self, items: Sequence[Tuple[Any, torch.Tensor]]) -> None:
        by_kind: Dict[Tuple[torch.dtype, int], List[Tuple[Any, torch.Tensor]]] = {}
        self.own: Dict[Any, torch.Tensor] = {}
        with torch.no_grad():
            for name, t in items:
                if t.is_contiguous():
                    by_kind.setdefault((t.dtype, t.get_device()), []).append((name, t))
                else:
                    self.own[name] = t.detach().clone()
            # each group: its flat copy and its (name, tensor) in that order
            self.groups: List[Tuple[torch.Tensor, List[Tuple[Any, torch.Tensor]]]] = []
            for group in by_kind.values():
                ts = [t for _, t in group]
                # (flatten_dense_tensors of one tensor is a view of it, not a copy)
                flat = torch._C._nn.flatten_dense_tensors(ts) if len(ts) > 1 else \
                    ts[0].detach().reshape(-1).clone()
                self.groups.append((flat, group))
        self.group_of = {name: g for g, (_, group) in enumerate(self.groups)
                         for name, _ in group}
        self.views: Dict[Any, torch.Tensor] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.group_of or name in self.own

    def keys(self) -> Set[FreeKey]:
        """The copies' storages (free for the hooks)."""
        return {free_key(t) for t in (*(f for f, _ in self.groups), *self.own.values())}

    def get(self, name: Any) -> torch.Tensor:
        """The copy of `name`, with the sizes and strides of the tensor."""
        got = self.own.get(name, self.views.get(name))
        if got is not None:
            return got
        flat, group = self.groups[self.group_of[name]]
        offset, views = 0, {}
        for other, t in group:  # the group's views at once: a stage reads several
            views[other] = flat.as_strided(t.shape, t.stride(), offset)
            offset += t.numel()
        if offset != flat.numel():
            raise RematRuntimeError("remat: a mutated buffer was resized during the step")
        self.views.update(views)
        return views[name]


class _FeedWalk:
    """The placeholders' parameters and buffers reached by their names: the
    modules along each name, from the root through each module's _modules,
    then the module's _parameters or _buffers (what named_parameters and
    named_buffers walk). ok: it gave what they give (checked once)."""

    def __init__(self, placeholders: Sequence[fx.Node],
                 ph_spec: Dict[fx.Node, Tuple[str, Any]]) -> None:
        self.ok = False
        index: Dict[Tuple[str, ...], int] = {(): 0}
        # modules[i] = modules[parent]._modules[name], parents first
        self.path: List[Tuple[int, str]] = []
        # (placeholder, 0 parameter / 1 buffer / 2 constant / 3 input, module, name)
        self.leaves: List[Tuple[fx.Node, int, int, Any]] = []
        self.constants = False
        for ph in placeholders:
            kind, target = ph_spec[ph]
            code = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR").index(kind) \
                if kind != "USER_INPUT" else 3
            if code > 1:
                self.constants = self.constants or code == 2
                self.leaves.append((ph, code, 0, target))
                continue
            parts = tuple(str(target).split("."))
            for i in range(1, len(parts)):
                if parts[:i] not in index:
                    index[parts[:i]] = len(index)
                    self.path.append((index[parts[:i - 1]], parts[i - 1]))
            self.leaves.append((ph, code, index[parts[:-1]], parts[-1]))

    def feeds(self, model: torch.nn.Module, flat_inputs: Sequence[Any], constants: Dict[str, Any]
              ) -> Optional[Dict[fx.Node, Any]]:
        """As GraphProgram._feeds, or None where a name is missing."""
        mods: List[Any] = [model]
        try:
            for parent, name in self.path:
                mods.append(mods[parent]._modules[name])
        except (KeyError, AttributeError):
            return None
        device = None
        if self.constants:
            first = next(model.parameters(), None)
            device = first.device if first is not None else None
        out: Dict[fx.Node, Any] = {}
        k = 0
        for ph, code, i, name in self.leaves:
            if code == 0:
                v = mods[i]._parameters.get(name)
            elif code == 1:
                v = mods[i]._buffers.get(name)
            elif code == 2:
                c = constants[name]
                v = c.to(device) if device is not None and c.device != device else c
            else:
                v = flat_inputs[k]
                k += 1
            if v is None and code < 2:
                return None
            out[ph] = v
        return out


def _data_dependent(e: BaseException) -> bool:
    """Whether export failed on a value-dependent branch or shape (torch's
    GuardOnDataDependentSymNode and DataDependentOutputException)."""
    return any("DataDependent" in c.__name__ for c in type(e).__mro__)


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

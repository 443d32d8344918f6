"""remat.torch.checkpoint(): any model, a byte budget, eager training."""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, Union

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from . import _graph as G
from ._graph import Args, Kwargs
from ._executor import AutocastState
from ._memory import fd2_to
from ._offload import OFFLOAD_ALGORITHMS, HostLink
from ._progress import Progress

Memory = Union[int, float, str]
Bandwidth = Union[None, int, float, str]
PORTFOLIO = ("sequential", "revolve")  # tried with optimal when held in the backward only
ROOMIER_STEPS = 8  # solves at most, when part of `held` is held in the backward only
PROFILE_VERSION = 3  # bump when what a profile measures changes: old cache files go stale


class InputChanged(RuntimeError):
    """An input differs from every profiled one and on_new_input="error"."""


def _normalize(args: Sequence[Any], kwargs: Optional[Dict[str, Any]]
               ) -> Tuple[Args, Kwargs]:
    """Keyword arguments in a fixed (sorted) order, so flattening is stable."""
    kw = kwargs or {}
    return tuple(args), {k: kw[k] for k in sorted(kw)}


def _training_kwargs(model: nn.Module, kwargs: Kwargs, warn: bool = False) -> Kwargs:
    """kwargs with use_cache=False for a Hugging Face model whose config asks
    for a key/value cache, as its own gradient checkpointing does: in
    training the cache's tensors keep every layer's graph alive through the
    output, and the cache object changes between calls of a layer. A
    use_cache the caller passes is kept."""
    if "use_cache" in kwargs or getattr(getattr(model, "config", None), "use_cache", False) \
            is not True or not _takes_use_cache(type(model)):
        return kwargs
    if warn:
        warnings.warn("remat: the model's config has use_cache=True; training with "
                      "use_cache=False, as Hugging Face's gradient checkpointing does (pass "
                      "use_cache explicitly to choose)", stacklevel=3)
    return _normalize((), {**kwargs, "use_cache": False})[1]


_TAKES_USE_CACHE: Dict[type, bool] = {}


def _takes_use_cache(cls: Type[nn.Module]) -> bool:
    """Whether cls.forward has a use_cache parameter (looked up once per
    class: this runs in every training step)."""
    found = _TAKES_USE_CACHE.get(cls)
    if found is None:
        try:
            found = "use_cache" in inspect.signature(cls.forward).parameters
        except (TypeError, ValueError):
            found = False
        _TAKES_USE_CACHE[cls] = found
    return found


def _leaf_key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), str(x.dtype), str(x.device), x.requires_grad,
                x.is_floating_point() and x.requires_grad)
    if x is None or isinstance(x, (bool, int, float, str)):
        return ("V", type(x).__name__, x)
    return ("O", type(x).__qualname__)


def _state_key(model: nn.Module) -> Tuple[Any, ...]:
    """What changes the graph or its sizes besides the inputs."""
    params = tuple((n, tuple(p.shape), str(p.dtype), str(p.device), p.requires_grad)
                   for n, p in model.named_parameters())
    bufs = tuple((n, str(b.dtype), str(b.device)) for n, b in model.named_buffers())
    modes = tuple(m.training for m in model.modules())
    return params, bufs, modes


def _cache_dir(cache: Union[bool, str, "os.PathLike[str]", None]) -> Optional[str]:
    if cache is None or cache is False:
        return None
    if cache is True:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "remat")
    return os.fspath(cache)


def _human(n: float) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if abs(n) >= 1 << k:
            return "%.2f %s" % (n / (1 << k), unit)
    return "%d B" % n


class Entry:
    """Everything prepared for one input signature: the captured program, the
    profiled chain, the schedule and its execution plan."""

    def __init__(self, program: Any, chain: "remat.Chain", held: int, info: Dict[str, Any]):
        self.program = program
        self.chain = chain
        self.held = held
        self.info = info
        self.schedule: Optional[remat.Schedule] = None
        self.plan: Optional[remat.Plan] = None
        self.limit = 0
        self.predicted_peak = 0
        # Held only in the backward ([bytes, from, until], see Runner): the
        # rest of `held` is held for the whole step.
        self.backward_held = [tuple(int(x) for x in b) for b in
                              chain.meta.get("profile", {}).get("backward_held", [])]
        self.step_held = held - sum(b[0] for b in self.backward_held)
        self.chain_fall = self._fall_chain()
        self._plain_peak: Optional[int] = None
        self.bandwidth = 0.0   # the host link of the schedule, bytes per chain time unit
        self.link: Optional[HostLink] = None  # its copy engine, made for offload schedules

    def _fall_chain(self) -> "remat.Chain":
        """The chain with each stage's forward overhead as a Fall pays it.
        The SPEC gives a stage one forward overhead, so the solver's chain
        carries the larger of what Fall and Fn/Fck need (a stage whose
        intermediates are all alive at once, like attention, holds them as
        temporaries when it keeps none); predictions take each op's own."""
        fall = self.chain.meta.get("profile", {}).get("fall_overheads")
        stages = self.chain.stages
        if not fall or len(fall) != len(stages):
            return self.chain
        for s, f in zip(stages, fall):
            s["fwd_overhead"] = min(s["fwd_overhead"], int(f))
        return remat.Chain(stages, self.chain.input_bytes, self.chain.input_grad_bytes,
                           name=self.chain.name, time_unit=self.chain.time_unit)

    def _store_all(self) -> "remat.Schedule":
        return remat.solve(self.chain_fall, remat.store_all_cost(self.chain_fall)[0],
                           algorithm="store-all")

    @property
    def plain_peak(self) -> int:
        """Predicted activation peak of plain autograd (store everything)."""
        if self._plain_peak is None:
            self._plain_peak = self._predict(self._store_all())
        return self._plain_peak

    def _backward_held(self, ops: Sequence[str]) -> List[int]:
        """What backward_held adds while each op runs (see Runner)."""
        alive: Dict[int, int] = {}
        out = []
        for op in ops:
            kind, _, rest = op.partition(" ")
            j = int(rest.split()[0]) if kind == "B" else -1
            out.append(sum(alive.values()))
            for k, (b, first, last) in enumerate(self.backward_held):
                if last == j:
                    alive.pop(k, None)
                elif first == j:
                    alive[k] = b
        return out

    def _predict(self, sched: "remat.Schedule") -> int:
        """Peak of `sched`, each op with its own forward overhead (libremat's
        simulator on both chains; ops other than Fall are the same in both),
        plus what is held: for the whole step, and in the backward while it
        lives."""
        every = remat.simulate(self.chain, sched, self.bandwidth)
        fall = remat.simulate(self.chain_fall, sched, self.bandwidth)
        kinds = [op.split()[0] for op in sched.ops]
        during = [(f if k == "Fall" else e) + b for k, e, f, b in
                  zip(kinds, every.mem_during, fall.mem_during, self._backward_held(sched.ops))]
        return int(max(during + [self.chain.input_bytes])) + self.step_held

    def link_bandwidth(self, bandwidth: Bandwidth) -> float:
        """Bytes per time unit of the chain: `bandwidth` given in bytes per
        second or as "24GB/s", or measured ("auto", None) once and kept in the
        profile's metadata (and its cache file)."""
        if isinstance(bandwidth, str) and bandwidth != "auto":
            return remat.bandwidth_per_unit(bandwidth, self.chain.time_unit)
        if bandwidth is not None and bandwidth != "auto":
            return remat.bandwidth_per_unit("%d/s" % int(bandwidth), self.chain.time_unit)
        prof = self.chain.meta.setdefault("profile", {})
        if not prof.get("link"):
            prof["link"] = self._link().measure()
            path = self.info.get("profile_path")
            if path:
                try:
                    self.chain.save(path)
                except (OSError, remat.RematError) as e:
                    warnings.warn("remat: cannot update the profile cache %s: %s" % (path, e),
                                  stacklevel=4)
        return remat.bandwidth_per_unit("%d/s" % int(prof["link"]["bytes_per_s"]),
                                        self.chain.time_unit)

    def _link(self) -> HostLink:
        if self.link is None:
            self.link = HostLink(self.program.device)
        return self.link

    def _roomier(self, sched: Optional["remat.Schedule"], limit: int, algorithm: str,
                 slots: Optional[int], segments: Optional[int], bw: Optional[float]
                 ) -> Optional["remat.Schedule"]:
        """`sched` (None: infeasible) was solved as if backward_held were held
        for the whole step. The solver cannot see that it is held in the
        backward only, so budgets up to the one that leaves out backward_held
        are tried (bisection on the budget); a schedule is taken if it is
        faster and its prediction, which counts backward_held op by op, fits."""
        lo, hi = limit - self.held, limit - self.step_held
        if not self.backward_held or hi <= 0:
            return sched
        best, budget, roomiest = sched, hi, hi
        for _ in range(ROOMIER_STEPS):
            try:
                cand = remat.solve(self.chain, budget, algorithm=algorithm, slots=slots,
                                   segments=segments, bandwidth=bw)
            except remat.InfeasibleError:  # so is every smaller budget
                cand = None
            if cand is not None and self._predict(cand) > limit:
                hi = budget
            else:
                lo = budget
                if cand is not None and (best is None or cand.time < best.time):
                    best = cand
                if budget == roomiest:
                    break
            if hi - lo <= max(1, limit >> 10):
                break
            budget = (lo + hi) // 2
        return best

    def _fitting(self, limit: int, algorithm: str, slots: Optional[int],
                 segments: Optional[int], bw: Optional[float]
                 ) -> Tuple[Optional["remat.Schedule"], int]:
        """(the fastest schedule of `algorithm` found to fit `limit`, 0) or
        (None, the smallest limit it meets). That limit is the chain's
        smallest budget plus all held, or less, the prediction of the
        schedule at that budget, which counts backward_held in the backward
        only; that schedule is taken when nothing else fits (its chain peak
        may pass the limit, its prediction not)."""
        budget = limit - self.held
        sched: Optional[remat.Schedule] = None
        floor = 0
        try:
            if budget < 0:
                raise remat.InfeasibleError("", remat.min_memory(self.chain, algorithm, slots,
                                                                 bandwidth=bw))
            sched = remat.solve(self.chain, budget, algorithm=algorithm, slots=slots,
                                segments=segments, bandwidth=bw)
        except remat.InfeasibleError as e:
            floor = e.min_memory or 0
        sched = self._roomier(sched, limit, algorithm, slots, segments, bw)
        if sched is not None:
            return sched, 0
        need = floor + self.held
        if self.backward_held and floor:
            try:
                at_floor = remat.solve(self.chain, floor, algorithm=algorithm, slots=slots,
                                       segments=segments, bandwidth=bw)
            except remat.InfeasibleError:
                pass
            else:
                peak = self._predict(at_floor)
                if peak <= limit:
                    return at_floor, 0
                need = min(need, peak)
        return None, min(need, self.plain_peak)

    def solve(self, memory: Memory, algorithm: str, slots: Optional[int],
              segments: Optional[int], progress: Progress, bandwidth: Bandwidth = None) -> None:
        offload = algorithm in OFFLOAD_ALGORITHMS
        bw = self.link_bandwidth(bandwidth) if offload else None
        self.bandwidth = bw or 0.0
        if isinstance(memory, float):
            if not memory > 0:
                raise ValueError("remat.torch.checkpoint: memory=%r: a fraction must be > 0"
                                 % memory)
            limit = int(memory * self.plain_peak)
        else:
            limit = remat.parse_size(memory)
        # The solver sees Fall at the larger overhead (see _fall_chain); when
        # everything fits by each op's own overhead, keeping everything is the
        # fastest schedule, so it is a candidate too.
        every = self._store_all()
        every_fits = self._predict(every) <= limit
        sched, need = self._fitting(limit, algorithm, slots, segments, bw)
        if algorithm == "optimal" and self.backward_held:
            # The solver cannot see memory held in the backward only, so its
            # optimum may not be the fastest schedule that fits: near the
            # smallest limits, sequential's (whose peak falls in the forward)
            # can be faster. Take the fastest of the three.
            for other in PORTFOLIO:
                cand, low = self._fitting(limit, other, None, None, bw)
                if cand is not None and (sched is None or cand.time < sched.time):
                    sched = cand
                if cand is None:
                    need = min(need, low)
        if sched is None:
            if not every_fits:
                raise remat.InfeasibleError(
                    "remat.torch.checkpoint: a memory limit of %s (%d bytes) is below the "
                    "smallest this model can train in with %s: %s (%d bytes, %s of it held for "
                    "the whole step). Plain autograd needs %s." % (
                        _human(limit), limit, algorithm, _human(need), need,
                        _human(self.step_held), _human(self.plain_peak)), need) from None
            sched = every
        if every_fits and every.time <= sched.time:
            sched = every
        peak = self._predict(sched)
        self.schedule = sched
        self.plan = remat.plan(self.chain, sched, bandwidth=bw)
        if offload:
            self._link()
        self.limit = limit
        self.predicted_peak = peak


class RematModule(nn.Module):
    """A model trained by a checkpointing schedule within a memory limit.

    Drop-in: it shares the wrapped model's parameters, buffers and submodules
    (same state_dict() keys), follows train()/eval() and .to(), runs the model
    itself under torch.no_grad(), and passes other attribute lookups (e.g.
    .config, .generate) to the model. Build it with remat.torch.checkpoint().
    """

    def __init__(self, model: nn.Module, config: Dict[str, Any]) -> None:
        super().__init__()
        object.__setattr__(self, "_remat_model", model)
        self.__dict__["_parameters"] = model._parameters
        self.__dict__["_buffers"] = model._buffers
        self.__dict__["_modules"] = model._modules
        self.__dict__["_non_persistent_buffers_set"] = model._non_persistent_buffers_set
        self.training = model.training
        self.remat_config = dict(config)
        self._remat_entries: Dict[Any, Entry] = {}
        self.last_entry: Optional[Entry] = None

    # -- drop-in behaviour --------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_remat_model")
            if model is None:
                raise
            return getattr(model, name)

    def train(self, mode: bool = True) -> "RematModule":
        super().train(mode)
        self._remat_model.training = mode
        return self

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_remat_entries"] = {}   # captured graphs and libremat handles: rebuilt on use
        state["last_entry"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def extra_repr(self) -> str:
        c = self.remat_config
        return "memory=%r, algorithm=%r" % (c["memory"], c["algorithm"])

    # -- forward ----------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        model = self._remat_model
        if not torch.is_grad_enabled() or not self._wants_grad(args, kwargs):
            return model(*args, **kwargs)
        args, kwargs = _normalize(args, kwargs)
        kwargs = _training_kwargs(model, kwargs)
        entry = self._entry(args, kwargs)
        self.last_entry = entry
        return entry.program.run(self, entry, args, kwargs)

    def _wants_grad(self, args: Sequence[Any], kwargs: Kwargs) -> bool:
        if any(p.requires_grad for p in self.parameters()):
            return True
        return any(t.requires_grad for t in pytree.tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor))

    def _key(self, args: Args, kwargs: Kwargs) -> Tuple[Any, ...]:
        flat, spec = pytree.tree_flatten((args, kwargs))
        return (str(spec), tuple(_leaf_key(x) for x in flat), _state_key(self),
                AutocastState().key())

    def _entry(self, args: Args, kwargs: Kwargs) -> Entry:
        key = self._key(args, kwargs)
        entry = self._remat_entries.get(key)
        if entry is not None:
            return entry
        cfg = self.remat_config
        if self._remat_entries and cfg["on_new_input"] == "error":
            raise InputChanged(
                "remat: this input (shapes, dtypes, devices, autocast or parameter state) was "
                "not profiled, and on_new_input='error'. Call with the profiled input, or pass "
                "on_new_input='profile' to profile each new one.")
        entry = prepare(self, args, kwargs, cfg)
        self._remat_entries[key] = entry
        return entry

    def set_memory(self, memory: Memory, algorithm: Optional[str] = None,
                   slots: Optional[int] = None, segments: Optional[int] = None,
                   bandwidth: Bandwidth = None) -> None:
        """Solves again for another limit (and algorithm, host link), keeping
        the profiles: every input prepared so far, and those to come, run by it.
        An option left None keeps the value last given (to checkpoint() or here)."""
        cfg = self.remat_config
        cfg.update(memory=memory, algorithm=algorithm or cfg["algorithm"],
                   slots=slots if slots is not None else cfg["slots"],
                   segments=segments if segments is not None else cfg["segments"],
                   bandwidth=_check_bandwidth(bandwidth) if bandwidth is not None
                   else cfg["bandwidth"])
        progress = Progress("solving", cfg["progress"])
        for entry in self._remat_entries.values():
            entry.solve(cfg["memory"], cfg["algorithm"], cfg["slots"], cfg["segments"], progress,
                        cfg["bandwidth"])
        progress.close()

    # -- what happened ------------------------------------------------------------------
    def remat_report(self) -> str:
        """A few lines on the last prepared input: the capture path and why,
        stages, the limit, the predicted and plain peaks."""
        e = self.last_entry or next(iter(self._remat_entries.values()), None)
        if e is None:
            return "remat: nothing prepared yet"
        i = e.info
        lines = ["remat: %s path (%s); %d stages" % (i["path"], i["why"], e.chain.n - 1)]
        if e.schedule is not None:
            lines.append("limit %s; predicted peak %s (%s held for the whole step); plain "
                         "autograd %s; predicted step time %.4g %s vs %.4g" % (
                             _human(e.limit), _human(e.predicted_peak), _human(e.held),
                             _human(e.plain_peak), e.schedule.time, e.chain.time_unit,
                             remat.store_all_cost(e.chain)[1]))
        if e.bandwidth and e.plan is not None:
            n_off = sum(1 for st in e.plan.steps if st.kind == "Off")
            lines.append("host link %s/s (%s); %d offloads per step" % (
                _human(e.bandwidth / remat.bandwidth_per_unit("1/s", e.chain.time_unit)),
                "measured" if e.chain.meta.get("profile", {}).get("link") else "given", n_off))
        return "\n".join(lines)


def prepare(module: RematModule, args: Args, kwargs: Kwargs, cfg: Dict[str, Any]) -> Entry:
    """Capture, profile (or load the cached profile) and solve for one input.
    Capture runs under the caller's autocast state, as the step will."""
    progress = Progress("profiling", cfg["progress"])
    program, why, export_log = _capture(module._remat_model, args, kwargs, cfg)
    progress.note("%s path: %s" % (program.path, why))
    if cfg.get("compile"):
        _compile(program)
    chain, held, info = _profiled(program, module, args, kwargs, cfg, progress)
    info.update(path=program.path, why=why, export_log=export_log)
    entry = Entry(program, chain, held, info)
    entry.solve(cfg["memory"], cfg["algorithm"], cfg["slots"], cfg["segments"], progress,
                cfg["bandwidth"])
    progress.close()
    return entry


def _compile(program: Any) -> None:
    """compile=True: the graph path's stages run compiled (the module path's
    blocks stay eager, with a warning)."""
    if program.path != "graph":
        warnings.warn("remat: compile=True compiles the graph path's stages; this model runs "
                      "on the module path, whose blocks stay eager", stacklevel=5)
        return
    if program.compile_stages() < len(program.stages):
        warnings.warn("remat: compile=True: %d of %d stages compiled (a stage that makes a "
                      "held value stays eager)" % (program.compiled, len(program.stages)),
                      stacklevel=5)


def _capture(model: nn.Module, args: Args, kwargs: Kwargs, cfg: Dict[str, Any]
             ) -> Tuple[Any, str, str]:
    """(program, why this path, what a failed export printed). The graph
    path when torch.export captures the model and the graph runs what eager
    runs; else the module path; else the graph anyway (with a warning: its
    gradients may differ from eager in the last bits); else an error that
    gives both reasons."""
    from ._graphrun import GraphRun
    from ._modules import ModuleRun
    mode = cfg["capture"]
    graph: Any = None
    why = "capture='modules'"
    log = ""
    if mode in ("auto", "graph"):
        with tempfile.TemporaryFile("w+") as f:
            try:
                with fd2_to(f):  # a failed export prints whole graphs there
                    graph = GraphRun.capture(model, args, kwargs, cfg["max_stages"])
            except Exception as e:  # export raises many kinds; the fallback says why
                if mode == "graph":
                    raise G.CaptureError("remat: torch.export failed: %s" % _first_line(e)) from e
                why = "torch.export failed: %s" % _first_line(e)
            f.seek(0)
            log = f.read()
        if graph is not None:
            if log:  # what a successful export printed (the model's own warnings)
                sys.stderr.write(log)
                log = ""
            diff = graph.differs_from_eager(model, args, kwargs) if mode == "auto" else None
            if diff is None:
                return graph, "torch.export captured the whole model", ""
            why = "the exported graph runs other kernels than eager (%s), so gradients would " \
                  "differ in the last bits; the model's own code runs instead" % diff
    try:
        program = ModuleRun.capture(model, args, kwargs)
    except G.CaptureError as e:
        if graph is None:
            raise G.CaptureError("remat: cannot run this model: %s; and %s" % (why, e)) from None
        why += "; but no run of blocks was found (%s), so the graph runs" % e
        warnings.warn("remat: %s" % why, stacklevel=4)
        return graph, why, log
    if graph is None and mode == "auto":
        warnings.warn("remat: fell back to module-level stages: %s" % why, stacklevel=4)
    return program, why, log


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0] if text else "")


# A stage stays compiled when its profile is faster than COMPILED_GAIN x
# eager's. Measured (BENCHMARKS.md): asking 5 % threw away most of GPT-2's
# gain, whose stages each gain a few percent; 1.0 keeps it, and ResNet-50,
# whose batch norms run slower compiled, then runs about as fast as eager.
COMPILED_GAIN = 1.0


def faster_eager(compiled: Sequence[Dict[str, Any]], eager: Sequence[Dict[str, Any]],
                 candidates: Sequence[int]) -> List[int]:
    """The stages among `candidates` whose compiled forward + backward was not
    faster than COMPILED_GAIN x eager's, by the two profiles' stage dicts."""
    def t(st: Dict[str, Any]) -> float:
        return float(st["fwd_time"]) + float(st["bwd_time"])
    return [i for i in candidates if not t(compiled[i]) < COMPILED_GAIN * t(eager[i])]


def _keep_faster(program: Any, module: RematModule, args: Args, kwargs: Kwargs, repeat: int,
                 progress: Progress, stages: List[Dict[str, Any]]) -> List[int]:
    """compile=True: profiles the stages eager too, and runs eager each stage
    that compiling did not make faster (faster_eager; inductor's code is not
    always faster: a training-mode batch norm on CPU, for one). Such a
    stage's dict in `stages` and its Fall overhead become the eager ones, so
    the chain describes what runs; what is held for the step does not
    depend on it. Returns those stages."""
    fall, bheld = list(program.fall_overheads), program.backward_held
    with program.eager_stages():
        plain = program.profile(module, args, kwargs, repeat, progress)[0]
    compiled = program.compiled_stages()
    keep = faster_eager(stages, plain, compiled)
    for i in keep:
        stages[i] = plain[i]
        fall[i] = program.fall_overheads[i]
    program.fall_overheads, program.backward_held = fall, bheld
    program.set_eager(keep)
    if keep:
        progress.note("%d of %d compiled stages run eager: not faster compiled" % (
            len(keep), len(compiled)))
    return keep


def _profiled(program: Any, module: RematModule, args: Args, kwargs: Kwargs,
              cfg: Dict[str, Any], progress: Progress) -> Tuple["remat.Chain", int, Dict[str, Any]]:
    """The program's chain: from the cache when its key matches, else measured."""
    key = program.cache_key(module, args, kwargs, cfg["repeat"])
    key = hashlib.sha256(("%d|%s|%s|%s" % (PROFILE_VERSION, key, torch.__version__,
                                           remat.__version__)).encode()).hexdigest()[:40]
    cdir = _cache_dir(cfg["cache"])
    path = os.path.join(cdir, "profile-%s.json" % key) if cdir else None
    if path and os.path.exists(path):
        try:
            chain = remat.Chain.load(path)
            p = chain.meta.get("profile", {})
            if p.get("key") == key and p.get("stages") == program.stage_names():
                if p.get("eager_stages"):
                    program.set_eager([int(i) for i in p["eager_stages"]])
                return chain, int(p["held_bytes"]), {"cached": path, "profile_path": path}
        except (remat.RematError, KeyError, ValueError):
            pass
    if getattr(program, "compiled", 0):  # the first run compiles every variant of a stage
        program.profile(module, args, kwargs, 1, progress)
    stages, in_bytes, in_grad, held = program.profile(module, args, kwargs, cfg["repeat"],
                                                      progress)
    eager: List[int] = []
    if getattr(program, "compiled", 0):
        eager = _keep_faster(program, module, args, kwargs, cfg["repeat"], progress, stages)
    meta = {"profile": {"key": key, "path": program.path, "stages": program.stage_names(),
                        "held_bytes": held, "torch": torch.__version__,
                        "fall_overheads": program.fall_overheads,
                        "backward_held": program.backward_held,
                        "repeat": cfg["repeat"], "device": str(program.device)}}
    if eager:
        meta["profile"]["eager_stages"] = eager
    chain = remat.Chain(stages, in_bytes, in_grad, name=type(module._remat_model).__name__,
                        time_unit="ms", meta=meta)
    if path and cdir:
        try:
            os.makedirs(cdir, exist_ok=True)
            chain.save(path)  # atomic: a reader never sees half a profile
        except (OSError, remat.RematError) as e:
            warnings.warn("remat: cannot write the profile cache %s: %s" % (path, e), stacklevel=4)
    return chain, held, {"cached": None, "profile_path": path}


def checkpoint(model: nn.Module, example_args: Any = (), example_kwargs: Optional[Kwargs] = None,
               memory: Memory = "8GiB", algorithm: str = "optimal", *,
               slots: Optional[int] = None, segments: Optional[int] = None,
               max_stages: int = 256, repeat: int = 3, cache: Union[bool, str, None] = True,
               progress: Optional[bool] = None, on_new_input: str = "profile",
               capture: str = "auto", bandwidth: Bandwidth = None,
               compile: bool = False) -> RematModule:
    """`model` wrapped to train within `memory` by a checkpointing schedule.

    memory: bytes (int), a size such as "8GiB", or a float: that fraction of
    plain autograd's activation peak (0.5 = half). It bounds activations,
    their gradients and temporaries; parameters, their gradients and the
    optimizer state are outside it, as are the user's inputs.
    algorithm: a remat chain solver ("optimal", "revolve", "sequential", ...).
    example_args / example_kwargs: an input like the ones you will train on;
    it is captured, profiled and solved for now. A later call whose shapes,
    dtypes, devices, autocast or parameter state differ is profiled again
    (on_new_input="profile") or refused (on_new_input="error").
    capture: "auto" (torch.export, else module-level stages), "graph", "modules".
    bandwidth: the host link of the offloading algorithms ("pofo",
    "offload-only", "opportunist", "autocapper"): "auto" or None (measured
    once, pinned copies on CUDA, the copy worker on CPU, and kept with the
    profile), bytes per second, or a text such as "24GB/s".
    compile: run each stage's graph compiled by torch.compile (graph path;
    fused kernels, as torch.compile's own; profiled compiled, so the first
    profile also compiles). A stage whose profile was not faster compiled
    than eager runs eager. Gradients then match eager to rounding, not bit
    for bit.
    max_stages: longer chains are shortened by merging adjacent stages.
    cache: True (~/.cache/remat, or $XDG_CACHE_HOME/remat), a directory, or
    False: where profiles are kept on disk.
    progress: None (a progress line on stderr when it is a terminal and a
    step takes over ~2 s), True (always), False (never).
    """
    if on_new_input not in ("profile", "error"):
        raise ValueError("remat.torch.checkpoint: on_new_input must be 'profile' or 'error'")
    if capture not in ("auto", "graph", "modules"):
        raise ValueError("remat.torch.checkpoint: capture must be 'auto', 'graph' or 'modules'")
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    cfg = {"memory": memory, "algorithm": algorithm, "slots": slots, "segments": segments,
           "max_stages": int(max_stages), "repeat": int(repeat), "cache": cache,
           "progress": progress, "on_new_input": on_new_input, "capture": capture,
           "bandwidth": _check_bandwidth(bandwidth), "compile": bool(compile)}
    wrapped = RematModule(model, cfg)
    if example_args or example_kwargs:
        args, kwargs = _normalize(example_args, example_kwargs)
        kwargs = _training_kwargs(model, kwargs, warn=True)
        with torch.enable_grad():
            entry = wrapped._entry(args, kwargs)
        wrapped.last_entry = entry
    return wrapped


def profile(model: nn.Module, example_args: Any = (), example_kwargs: Optional[Kwargs] = None, *,
            max_stages: int = 256, repeat: int = 3, cache: Union[bool, str, None] = True,
            progress: Optional[bool] = None, capture: str = "auto") -> "remat.Chain":
    """The chain of `model` on the example input, as checkpoint() measures it
    (capture, cut, profile; see docs/python.md), for the command line
    (`remat curve`, `remat plot`) or remat.solve. Sizes in bytes, times in
    ms. What is held for the whole step is in chain.meta["profile"]
    ["held_bytes"]: add it to the chain's peaks to get the model's. Buffers,
    gradients and the RNG are left as they were."""
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    cfg = {"memory": 1.0, "algorithm": "store-all", "slots": None, "segments": None,
           "max_stages": int(max_stages), "repeat": int(repeat), "cache": cache,
           "progress": progress, "on_new_input": "profile", "capture": capture,
           "bandwidth": None}
    args, kwargs = _normalize(example_args, example_kwargs)
    kwargs = _training_kwargs(model, kwargs, warn=True)
    module = RematModule(model, cfg)
    prog = Progress("profiling", progress)
    with torch.enable_grad():
        program, why, _ = _capture(model, args, kwargs, cfg)
        chain, _, _ = _profiled(program, module, args, kwargs, cfg, prog)
    prog.close()
    return chain


def _check_bandwidth(bandwidth: Bandwidth) -> Bandwidth:
    """bandwidth as checkpoint() takes it: None, "auto", bytes per second > 0,
    or a "SIZE/s" text (checked by libremat's size rules)."""
    if bandwidth is None or bandwidth == "auto":
        return bandwidth
    if isinstance(bandwidth, str):
        remat.bandwidth_per_unit(bandwidth, "s")  # raises remat.InputError naming it
        if not bandwidth.strip().endswith("/s"):
            raise ValueError("remat.torch.checkpoint: bandwidth=%r: give \"auto\", bytes per "
                             "second, or a text such as \"24GB/s\"" % bandwidth)
        return bandwidth
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or \
            not 0 < bandwidth < 1e300:
        raise ValueError("remat.torch.checkpoint: bandwidth=%r: give \"auto\", bytes per "
                         "second > 0, or a text such as \"24GB/s\"" % (bandwidth,))
    return bandwidth


def _json(obj: Any) -> str:
    text: str = json.dumps(obj, sort_keys=True, default=str)
    return text

"""remat.torch.checkpoint(): any model, a byte budget, eager training.

The public API: checkpoint(), profile() and the RematModule they return.
Each new input signature goes through the pipeline once (_prepare:
capture, cut, measure, solve); every training step then runs the prepared
program by its schedule (_executor).
"""
from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import operator
import warnings
import weakref
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Type

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from ._budget import human
from ._config import Bandwidth, CacheSetting, Config, Memory, check_bandwidth, check_memory
from ._graph.guards import entry_key
from . import _prepare
from ._memory import BEFORE_METER, PeakMeter, Rider
from ._prepare import Prepared, profiled
from ._saves import describe
from ._shapes import Counts, ShapeSet, Signature, leaf_key, entry_for, family_key
from ._program import Args, Kwargs
from ._progress import Progress
from ._tensors import AutocastState


class InputChanged(RuntimeError):
    """An input differs from every profiled one and on_new_input="error"."""


def _normalize(args: Sequence[Any], kwargs: Optional[Dict[str, Any]]
               ) -> Tuple[Args, Kwargs]:
    """Keyword arguments in a fixed (sorted) order, so flattening is stable."""
    kw = kwargs or {}
    return tuple(args), {k: kw[k] for k in sorted(kw)}


def _training_kwargs(model: nn.Module, kwargs: Kwargs, warn: bool = False,
                     stacklevel: int = 3) -> Kwargs:
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
                      "use_cache explicitly to choose)", stacklevel=stacklevel)
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


def _state_key(model: nn.Module) -> Tuple[Any, ...]:
    """What changes the graph or its sizes besides the inputs."""
    params = tuple((n, tuple(p.shape), str(p.dtype), str(p.device), p.requires_grad)
                   for n, p in model.named_parameters())
    bufs = tuple((n, str(b.dtype), str(b.device)) for n, b in model.named_buffers())
    modes = tuple(m.training for m in model.modules())
    return params, bufs, modes


_MODULE_WALK = (nn.Module.named_modules, nn.Module.named_parameters, nn.Module.named_buffers,
                nn.Module.modules, nn.Module._named_members)


class _StateWatch:
    """_state_key(model), computed again only when what it reads may have
    changed (it runs in every training step). What it reads is fixed by the
    modules' classes and training flags, the names and identities of the
    values in each module's _parameters, _buffers and _modules (the walk
    and its names), and each parameter's shape, dtype, device and
    requires_grad and each buffer's dtype and device: one pass compares
    these with the last ones; any difference (a .to() or .double(), a
    replaced or injected module or parameter, train()/eval(), a
    requires_grad flip) computes the key again. A model whose classes walk
    their members their own way gets the full key every time. The pass
    builds each of these as one flat tuple, by iterators that run in C,
    and compares the tuples."""

    __slots__ = ("key", "root", "mods", "state", "held", "params", "param_meta", "bufs",
                 "buf_meta")

    def __init__(self) -> None:
        self.key: Optional[Tuple[Any, ...]] = None
        self.root: Any = None
        self.mods: List[nn.Module] = []  # the modules but the root, in modules() order
        self.state: Tuple[Any, ...] = ()  # _walk_state's
        self.held: Tuple[Any, ...] = ()  # the members, so that their ids stay theirs
        self.params: List[torch.Tensor] = []
        self.param_meta: Tuple[Any, ...] = ()
        self.bufs: List[torch.Tensor] = []
        self.buf_meta: Tuple[Any, ...] = ()

    def get(self, model: nn.Module) -> Tuple[Any, ...]:
        if self.key is not None and self.root() is model and self._same(model):
            return self.key
        key = _state_key(model)
        self._record(model, key)
        return key

    def _record(self, model: nn.Module, key: Tuple[Any, ...]) -> None:
        self.key, self.root, self.mods, self.params, self.bufs = None, None, [], [], []
        mods = list(model.modules())
        if any(getattr(type(m), f.__name__) is not f for m in mods for f in _MODULE_WALK):
            return
        # (the root is given to _same: holding it would tie it to itself)
        self.mods = mods[1:]
        self.state, self.held = _walk_state(mods, hold=True)
        self.params = [p for m in mods for p in m._parameters.values() if p is not None]
        self.param_meta = tuple(map(_PARAM_META, self.params))
        self.bufs = [b for m in mods for b in m._buffers.values() if b is not None]
        self.buf_meta = tuple(map(_BUF_META, self.bufs))
        self.root = weakref.ref(model)
        self.key = key

    def _same(self, model: nn.Module) -> bool:
        mods = [model, *self.mods]
        return (_walk_state(mods)[0] == self.state
                and tuple(map(_PARAM_META, self.params)) == self.param_meta
                and tuple(map(_BUF_META, self.bufs)) == self.buf_meta)


_PARAM_META = operator.attrgetter("requires_grad", "dtype", "device", "shape")
_BUF_META = operator.attrgetter("dtype", "device")
_MEMBERS = (operator.attrgetter("_parameters"), operator.attrgetter("_buffers"),
            operator.attrgetter("_modules"))


def _walk_state(mods: Sequence[nn.Module], hold: bool = False
                ) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
    """What _StateWatch compares of the modules: their classes, training
    flags, the sizes and names of their _parameters, _buffers and
    _modules and the ids of the values in them; and, hold: those values."""
    dicts = [d for get in _MEMBERS for d in map(get, mods)]
    values = tuple(itertools.chain.from_iterable(map(_VALUES, dicts))) if hold else ()
    ids = tuple(map(id, values if hold else itertools.chain.from_iterable(map(_VALUES, dicts))))
    state = (tuple(map(type, mods)), tuple(map(_TRAINING, mods)), tuple(map(len, dicts)),
             tuple(itertools.chain.from_iterable(dicts)), ids)
    return state, values


_TRAINING = operator.attrgetter("training")
_VALUES = operator.methodcaller("values")


class RematModule(nn.Module):
    """A model trained by a checkpointing schedule within a memory limit.

    Drop-in: it shares the wrapped model's parameters, buffers and submodules
    (same state_dict() keys), follows train()/eval() and .to(), runs the model
    itself under torch.no_grad(), and passes other attribute lookups (e.g.
    .config, .generate) to the model. Build it with remat.torch.checkpoint().
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> "RematModule":
        # Each model class gets a subclass whose forward shows that class's
        # signature, for the tools that read it from the class (Trainer).
        # (No arguments: pickle and deepcopy, which keep the class.)
        model = args[0] if args else kwargs.get("model")
        if cls is RematModule and model is not None:
            cls = _signed_class(type(model))
        return super().__new__(cls)

    def __init__(self, model: nn.Module, config: Config) -> None:
        super().__init__()
        object.__setattr__(self, "_remat_model", model)
        self.__dict__["_parameters"] = model._parameters
        self.__dict__["_buffers"] = model._buffers
        self.__dict__["_modules"] = model._modules
        self.__dict__["_non_persistent_buffers_set"] = model._non_persistent_buffers_set
        self.training = model.training
        self.remat_config = dataclasses.replace(config)
        self.last_entry: Optional[Prepared] = None
        self._remat_reset()

    def _remat_reset(self) -> None:
        """What is prepared per input (rebuilt after a copy or unpickling)."""
        self._remat_entries: Dict[Any, Prepared] = {}
        self._remat_sigs: Dict[Any, Signature] = {}   # each entry's input, for messages
        self._remat_shapes: Dict[Any, List[ShapeSet]] = {}  # by family_key
        self._remat_last_key: Any = None
        self._remat_peak = 0        # the largest plain-autograd peak prepared
        self._remat_warned: Set[Any] = set()
        self.remat_counts = Counts()
        self._remat_state = _StateWatch()  # _state_key(self), kept while nothing changes
        # the caller's loss: (bytes beyond the prediction, plain peak of that input)
        self._remat_caller: Optional[Tuple[int, int]] = None
        self._remat_meter: Optional[_CallerMeter] = None

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
        # captured graphs and libremat handles: rebuilt on use
        for k in PER_INPUT:
            state.pop(k, None)
        state["last_entry"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._remat_reset()

    def extra_repr(self) -> str:
        c = self.remat_config
        return "memory=%r, algorithm=%r" % (c.memory, c.algorithm)

    # -- forward ----------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        model = self._remat_model
        if self._remat_meter is not None:  # a step that never reached its backward
            self._remat_meter.close()
        loss = self.remat_config.loss
        if not torch.is_grad_enabled() or not self._wants_grad(args, kwargs):
            if loss is None:
                return model(*args, **kwargs)
            loss_args = kwargs.pop("loss_args", ())
            return loss(model(*args, **kwargs), *loss_args)
        args, kwargs = _normalize(args, kwargs)
        kwargs = self._call_kwargs(kwargs)
        entry = self._entry(args, kwargs)
        self.last_entry = entry
        out = entry.forward(self if loss is None else self._remat_target(), args, kwargs)
        if self._remat_caller is None and loss is None and _CallerMeter.can_start(entry):
            self._remat_meter = _CallerMeter(self, entry, out)
        return out

    def _call_kwargs(self, kwargs: Kwargs, warn: bool = False) -> Kwargs:
        """kwargs as the programs take them: use_cache=False for a Hugging Face
        model asking for a cache (_training_kwargs), and with loss= always a
        tuple loss_args."""
        kwargs = _training_kwargs(self._remat_model, kwargs, warn, stacklevel=5)
        if self.remat_config.loss is not None:
            kwargs = _normalize((), dict(kwargs, loss_args=tuple(kwargs.get("loss_args", ()))))[1]
        return kwargs

    def _remat_target(self) -> nn.Module:
        """What the programs run: the model, or with loss= the model and the
        loss as one module (its parameters named "model.*")."""
        if self.remat_config.loss is None:
            model: nn.Module = self._remat_model
            return model
        t = self.__dict__.get("_remat_with_loss")
        if t is None:
            t = _WithLoss(self._remat_model, self.remat_config.loss)
            self.__dict__["_remat_with_loss"] = t
        return t

    def _wants_grad(self, args: Sequence[Any], kwargs: Kwargs) -> bool:
        if any(p.requires_grad for p in self.parameters()):
            return True
        return any(t.requires_grad for t in pytree.tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor))

    def _key(self, args: Args, kwargs: Kwargs) -> Tuple[Any, ...]:
        flat, spec = pytree.tree_flatten((args, kwargs))
        return (str(spec), tuple(leaf_key(x) for x in flat), self._remat_state.get(self),
                AutocastState().key())

    def _entry(self, args: Args, kwargs: Kwargs) -> Prepared:
        """The prepared entry of this input: the one of its signature, else one
        made for it (_shapes.entry_for: derived from the formulas of its
        family's dynamic graph, its bucket's, or captured and profiled),
        solved for the limit."""
        key = self._key(args, kwargs)
        key = entry_key(self._remat_entries, key)  # a changed flag: another entry
        entry = self._remat_entries.get(key)
        if entry is not None:
            if entry.solved_for != self._solve_target(entry):
                self._solve(entry, key)  # the limit moved (a larger input, the caller's loss)
            self._remat_last_key = key
            return entry
        cfg = self.remat_config
        sig = Signature(self._remat_model, args, kwargs, key[2])
        old = self._remat_sigs.get(self._remat_last_key)
        if self._remat_entries and cfg.on_new_input == "error":
            raise InputChanged(
                "remat: this input differs from the last one (%s) and was not profiled, and "
                "on_new_input='error'. Call with a profiled input, or pass "
                "on_new_input='profile' to prepare each new one." % (
                    sig.change_from(old) if old is not None else "a new signature"))
        sets = self._remat_shapes.setdefault(family_key(key), [])
        entry = entry_for(sets, self._remat_target(), args, kwargs, cfg, self.remat_counts)
        self._remat_sigs[key] = sig
        self._remat_peak = max(self._remat_peak, entry.plain_peak)
        self._solve(entry, key)
        self._remat_entries[key] = entry
        self._remat_last_key = key
        return entry

    # -- the limit ------------------------------------------------------------------
    def _limit(self) -> int:
        """The limit in bytes: as given, or the fraction of the largest plain
        autograd peak among the inputs prepared so far."""
        memory = self.remat_config.memory
        if isinstance(memory, float):
            return int(memory * self._remat_peak)
        return remat.parse_size(memory)

    def _caller_bytes(self, entry: Prepared) -> int:
        """What the caller's loss takes beyond the prediction, for this input:
        measured on the first step, scaled by plain autograd's peak."""
        if self._remat_caller is None:
            return 0
        extra, peak = self._remat_caller
        return int(math.ceil(extra * entry.plain_peak / max(1, peak)))

    def _solve_target(self, entry: Prepared) -> Tuple[int, int]:
        return self._limit(), self._caller_bytes(entry)

    def _solve(self, entry: Prepared, key: Any, progress: Optional[Progress] = None) -> None:
        """Solves entry for the limit less the caller's loss. When no schedule
        fits: an InfeasibleError that names what changed in the input, or
        (on_infeasible="fallback") the schedule at the smallest limit that
        fits, with a warning once per input."""
        cfg = self.remat_config
        limit, caller = target = self._solve_target(entry)
        own = progress is None
        prog = progress or Progress("solving", cfg.progress)
        try:
            try:
                entry.solve(limit - caller, cfg.algorithm, cfg.slots, cfg.segments, prog,
                            cfg.bandwidth)
                entry.fallback = 0
            except remat.InfeasibleError as e:
                need = e.min_memory or 0
                if cfg.on_infeasible != "fallback" or need <= 0:
                    raise remat.InfeasibleError(self._infeasible(e, key, caller), need) \
                        from None
                entry.solve(need, cfg.algorithm, cfg.slots, cfg.segments, prog, cfg.bandwidth)
                entry.fallback = need
                if key not in self._remat_warned:
                    self._remat_warned.add(key)
                    warnings.warn("remat: %s; on_infeasible='fallback': it runs at the smallest "
                                  "limit remat finds for it, %s" % (
                                      self._infeasible_what(key, limit, caller), human(need)),
                                  stacklevel=5)
        finally:
            if own:
                prog.close()
        entry.solved_for = target

    def _infeasible_what(self, key: Any, limit: int, caller: int) -> str:
        sig = self._remat_sigs.get(key)
        old = self._remat_sigs.get(self._remat_last_key)
        what = "this input"
        if sig is not None and old is not None and old is not sig:
            what = "this input (%s)" % sig.change_from(old)
        lowered = " less %s for the loss computed outside the model" % human(caller) \
            if caller else ""
        return "%s cannot train within the limit of %s%s" % (what, human(limit), lowered)

    def _infeasible(self, e: "remat.InfeasibleError", key: Any, caller: int) -> str:
        text = str(e)
        sig = self._remat_sigs.get(key)
        old = self._remat_sigs.get(self._remat_last_key)
        if sig is not None and old is not None and old is not sig:
            text = "remat.torch.checkpoint: a new input (%s) cannot train within the limit. " \
                   "%s" % (sig.change_from(old), text.replace("remat.torch.checkpoint: ", "", 1))
        if caller:
            text += " The limit was lowered by %s for the loss computed outside the model " \
                    "(measured on the first step)." % human(caller)
        return text + " Pass on_infeasible='fallback' to run such an input at its smallest " \
                      "limit (with a warning), or give a larger memory."

    def set_memory(self, memory: Memory, algorithm: Optional[str] = None,
                   slots: Optional[int] = None, segments: Optional[int] = None,
                   bandwidth: Bandwidth = None) -> None:
        """Solves again for another limit (and algorithm, host link), keeping
        the profiles: every input prepared so far, and those to come, run by it.
        An option left None keeps the value last given (to checkpoint() or here)."""
        if self._remat_meter is not None:
            self._remat_meter.close()
        cfg = self.remat_config
        cfg.memory = check_memory(memory)
        cfg.algorithm = algorithm or cfg.algorithm
        cfg.slots = slots if slots is not None else cfg.slots
        cfg.segments = segments if segments is not None else cfg.segments
        cfg.bandwidth = check_bandwidth(bandwidth) if bandwidth is not None else cfg.bandwidth
        progress = Progress("solving", cfg.progress)
        try:
            done: Set[int] = set()
            for key, entry in self._remat_entries.items():
                if id(entry) not in done:  # inputs of one bucket share their entry
                    done.add(id(entry))
                    self._solve(entry, key, progress)
        finally:
            progress.close()

    # -- what happened ------------------------------------------------------------------
    def remat_report(self) -> str:
        """A few lines on the last prepared input: the capture path and why,
        stages, the limit, the predicted and plain peaks."""
        if self._remat_meter is not None:
            self._remat_meter.close()
        e = self.last_entry or next(iter(self._remat_entries.values()), None)
        if e is None:
            return "remat: nothing prepared yet"
        i = e.info
        lines = ["remat: %s path (%s); %d stages" % (i["path"], i["why"], e.chain.n - 1)]
        if e.schedule is not None:
            lines.append("limit %s; predicted peak %s (%s held for the whole step); plain "
                         "autograd %s; predicted step time %.4g %s vs %.4g" % (
                             human(e.limit), human(e.predicted_peak), human(e.held),
                             human(e.plain_peak), e.schedule.time, e.chain.time_unit,
                             remat.store_all_cost(e.chain)[1]))
        if e.plan is not None and any(st.option for st in e.plan.steps):
            lines.append("saves: %s (forwards that keep what the backward needs: all of it, the "
                         "matmul outputs only, or only the stage input)" % describe(e.plan.steps))
        if e.fallback:
            lines.append("on_infeasible='fallback': this input runs at %s, the smallest limit "
                         "remat finds for it, above the limit" % human(e.fallback))
        lines += self._shapes_report(e)
        if self._remat_caller is not None and self._remat_caller[0]:
            lines.append("the loss computed outside the model took %s beyond the prediction on "
                         "the first step (measured from the end of the model's forward to the "
                         "first gradient at its outputs); from the second step on the limit "
                         "is lowered by it, for this input by %s: the model runs within %s" % (
                             human(self._remat_caller[0]), human(self._caller_bytes(e)),
                             human(e.limit)))
        elif self._remat_caller is not None:
            lines.append("the first step used nothing measurable beyond the prediction between "
                         "the model's forward and its backward (the loss)")
        if e.bandwidth and e.plan is not None:
            n_off = sum(1 for st in e.plan.steps if st.kind == "Off")
            lines.append("host link %s/s (%s); %d offloads per step" % (
                human(e.bandwidth / remat.bandwidth_per_unit("1/s", e.chain.time_unit)),
                "measured" if e.chain.meta.get("profile", {}).get("link") else "given", n_off))
        return "\n".join(lines)

    def _shapes_report(self, e: Prepared) -> List[str]:
        """How the inputs were prepared (see _shapes)."""
        c = self.remat_counts
        lines = []
        if "derived" in e.info:
            lines.append("this input (%s) was derived from the graph's size formulas, no "
                         "profile" % e.info["derived"])
        elif "bucket" in e.info:
            lines.append("this input runs by the profile of its bucket's top, %s (sizes "
                         "rounded up to powers of two)" % e.info["bucket"])
        elif "exact" in e.info:
            lines.append("this input was profiled as it is: %s" % e.info["exact"])
        n = len(self._remat_entries)
        if n > 1 or c.derived or c.bucketed:
            lines.append("%d inputs: %d captures, %d profiles (%d from the disk cache), %d "
                         "derived, %d by bucket" % (n, c.captures, c.profiles, c.cached,
                                                    c.derived, c.bucketed))
        for sets in self._remat_shapes.values():
            for ss in sets:
                if ss.program is not e.program:
                    continue
                if ss.verdict:
                    lines.append("new shapes: %s" % ss.verdict)
                elif ss.sizes_failed:
                    lines.append("new shapes: profiled per bucket (no size formulas: %s)"
                                 % ss.sizes_failed)
                elif not ss.dynamic:
                    lines.append("new shapes: profiled per bucket (sizes rounded up to "
                                 "powers of two; %s)" % (
                                     "the module path runs the model's own code"
                                     if ss.program.path == "modules" else
                                     "a join of towers has no size formulas" if ss.join else
                                     "the graph was exported with fixed sizes"))
        if isinstance(self.remat_config.memory, float):
            lines.append("memory=%g: a fraction of the largest plain-autograd peak among the "
                         "inputs prepared so far (%s)" % (self.remat_config.memory,
                                                           human(self._remat_peak)))
        return lines


# What _remat_reset rebuilds: dropped by copies and pickles (the rest, a
# subclass's own state included, is kept).
PER_INPUT = ("_remat_entries", "_remat_sigs", "_remat_shapes", "_remat_last_key",
             "_remat_peak", "_remat_warned", "remat_counts", "_remat_caller", "_remat_meter",
             "_remat_with_loss", "_remat_state")


class _WithLoss(nn.Module):
    """checkpoint(..., loss=fn): the model and the caller's loss as one module,
    so the loss is captured (or, on the module path, runs after the blocks)
    and counted in the limit. Called as the model is, plus loss_args."""

    def __init__(self, model: nn.Module, loss: Any) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, *args: Any, loss_args: Tuple[Any, ...] = (), **kwargs: Any) -> Any:
        return self.loss(self.model(*args, **kwargs), *loss_args)


class _CallerMeter:
    """Measures, once, what the first step uses between the end of the
    model's forward and the arrival of the first gradient at its outputs,
    beyond those gradients: the caller's loss (its saved tensors, a .float()
    copy of the logits, their gradients). A PeakMeter marked at the end of
    the forward and, by a hook on the outputs, at the arrival. A profiler
    cannot be stopped inside a backward (autograd restores the thread's
    state after it), so on CPU the meter stops at the next call of the
    model, of remat_report() or of a PeakMeter. Inside the user's own
    PeakMeter on CPU it rides that meter's profiler (a Rider: the measure
    comes when that meter ends); under another profiler it is not started,
    and the next step tries again."""

    def __init__(self, owner: "RematModule", entry: Prepared, out: Any) -> None:
        self.owner, self.entry = owner, entry
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)
                and t.requires_grad]
        self.grads = sum(t.numel() * t.element_size() for t in outs)
        self.marked = False
        self.meter: Optional[PeakMeter] = None
        self.rider: Optional[Rider] = None
        host = Rider.host(entry.device)
        if host is not None:
            self.rider = Rider(host, self._rode)
            self.rider.mark()
        else:
            self.meter = PeakMeter(entry.device)
            self.meter._rideable = False
            self.meter.__enter__()
            BEFORE_METER.append(self.close)
            self.meter.mark()
        self.handles = [t.register_hook(self._arrived)  # type: ignore[no-untyped-call]
                        for t in outs]

    @staticmethod
    def can_start(entry: Prepared) -> bool:
        return (not torch.autograd._profiler_enabled()  # type: ignore[attr-defined]
                or Rider.host(entry.device) is not None)

    def _arrived(self, grad: torch.Tensor) -> None:
        marker = self.meter or self.rider
        if not self.marked and marker is not None:
            self.marked = True
            marker.mark()

    def _take(self, segment: int) -> None:
        if self.owner._remat_caller is None:
            extra = max(0, segment - self.grads)
            self.owner._remat_caller = (extra if extra > CALLER_MIN else 0,
                                        self.entry.plain_peak)

    def _rode(self, segments: List[int], marks: int) -> None:
        if marks >= 2 and segments:
            self._take(segments[0])

    def close(self) -> None:
        """Stops the meter; takes the measure if the gradient arrived (a
        rider's comes when its host meter ends)."""
        if self.close in BEFORE_METER:
            BEFORE_METER.remove(self.close)
        for h in self.handles:
            h.remove()
        self.handles = []
        meter, self.meter = self.meter, None
        if self.owner._remat_meter is self:
            self.owner._remat_meter = None
        if meter is None:
            return
        meter.__exit__(None, None, None)
        if self.marked and meter.segment_peaks:
            self._take(meter.segment_peaks[0])


# Below this, what the caller's loss takes is the small tensors the step
# reserve already counts (_measure.RESERVE: the loss scalar, its seed).
CALLER_MIN = 4096


# -- the model's signature -------------------------------------------------------------
#
# Trainer keeps the dataset columns that model.forward's signature names and
# finds the labels by the signature of type(model).forward; PEFT and
# accelerate read it too. RematModule.forward(*args, **kwargs) would hide it,
# so checkpoint() returns an instance of a subclass made once per model class,
# whose forward carries that class's signature (inspect.signature sees it on
# the instance and on the class) and runs RematModule.forward.

_SIGNED: Dict[type, Type[RematModule]] = {}


def _signed_class(model_cls: type) -> Type[RematModule]:
    """RematModule's subclass for models of model_cls (RematModule itself
    when that class's forward has no signature to show)."""
    cls = _SIGNED.get(model_cls)
    if cls is not None:
        return cls
    try:
        sig = inspect.signature(model_cls.forward)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return RematModule

    def forward(self: RematModule, *args: Any, **kwargs: Any) -> Any:
        return RematModule.forward(self, *args, **kwargs)

    forward.__signature__ = sig  # type: ignore[attr-defined]
    forward.__qualname__ = "RematModule.forward"
    forward.__doc__ = getattr(model_cls.forward, "__doc__", None)  # type: ignore[attr-defined]
    cls = type("RematModule", (RematModule,), {
        "forward": forward, "__reduce_ex__": _reduce_signed, "__module__": __name__,
        "__qualname__": "RematModule", "__doc__": RematModule.__doc__,
        "_remat_signed_for": model_cls})
    _SIGNED[model_cls] = cls
    return cls


def _reduce_signed(self: RematModule, protocol: int) -> Tuple[Any, ...]:
    """pickle and deepcopy: the subclass is made again from the model's class
    (it has no importable name of its own), then __setstate__."""
    return (_new_signed, (type(self).__dict__["_remat_signed_for"],), self.__getstate__())


def _new_signed(model_cls: type) -> RematModule:
    cls = _signed_class(model_cls)
    return nn.Module.__new__(cls)


def checkpoint(model: nn.Module, example_args: Any = (), example_kwargs: Optional[Kwargs] = None,
               memory: Memory = "8GiB", algorithm: str = "optimal", *,
               slots: Optional[int] = None, segments: Optional[int] = None,
               max_stages: int = 256, repeat: int = 3, cache: CacheSetting = True,
               progress: Optional[bool] = None, on_new_input: str = "profile",
               capture: str = "auto", bandwidth: Bandwidth = None,
               compile: bool = False, on_infeasible: str = "error",
               loss: Optional[Any] = None) -> RematModule:
    """`model` wrapped to train within `memory` by a checkpointing schedule.

    memory: bytes (int), a size such as "8GiB", or a float: that fraction of
    plain autograd's activation peak (0.5 = half), of the largest input
    prepared so far. It bounds activations, their gradients, temporaries and
    the loss (see loss); parameters, their gradients and the optimizer
    state are outside it, as are the user's inputs.
    algorithm: a remat chain solver ("optimal", "revolve", "sequential", ...).
    example_args / example_kwargs: an input like the ones you will train on;
    it is captured (with dynamic batch and sequence sizes where torch.export
    allows), profiled and solved for now. A later call whose sizes differ is
    derived from the graph's size formulas, verified in the first call on
    the example with its dynamic sizes halved (no profile), else (a join
    of towers among them) profiled once per bucket of sizes (rounded up to
    powers of two); one whose dtypes, devices, autocast or parameter state
    differ is profiled again (on_new_input="profile") or refused
    (on_new_input="error", an InputChanged naming the change).
    on_infeasible: "error" (an InfeasibleError naming what changed in the
    input and the smallest limit it needs) or "fallback" (that input runs at
    the smallest limit remat finds for it, with a warning once per input).
    loss: None, or fn(output, *loss_args) -> scalar: the loss is captured
    with the model and counted in the limit; the wrapped model then takes
    loss_args=(targets, ...) and returns the loss. Without it, a loss
    computed outside the model is measured on the first step and the limit
    lowered by what it takes, from the second step on.
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
    cfg = Config(memory=memory, algorithm=algorithm, slots=slots, segments=segments,
                 max_stages=max_stages, repeat=repeat, cache=cache, progress=progress,
                 on_new_input=on_new_input, capture=capture, bandwidth=bandwidth,
                 compile=compile, on_infeasible=on_infeasible, loss=loss)
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    wrapped = RematModule(model, cfg)
    if example_args or example_kwargs:
        args, kwargs = _normalize(example_args, example_kwargs)
        kwargs = wrapped._call_kwargs(kwargs, warn=True)
        with torch.enable_grad():
            entry = wrapped._entry(args, kwargs)
        wrapped.last_entry = entry
    return wrapped


def profile(model: nn.Module, example_args: Any = (), example_kwargs: Optional[Kwargs] = None, *,
            max_stages: int = 256, repeat: int = 3, cache: CacheSetting = True,
            progress: Optional[bool] = None, capture: str = "auto") -> "remat.Chain":
    """The chain of `model` on the example input, as checkpoint() measures it
    (capture, cut, profile; see docs/python.md), for the command line
    (`remat curve`, `remat plot`) or remat.solve. Sizes in bytes, times in
    ms. What is held for the whole step is in chain.meta["profile"]
    ["held_bytes"]: add it to the chain's peaks to get the model's. Buffers,
    gradients and the RNG are left as they were."""
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    cfg = Config(memory=1.0, algorithm="store-all", max_stages=max_stages, repeat=repeat,
                 cache=cache, progress=progress, capture=capture)
    args, kwargs = _normalize(example_args, example_kwargs)
    kwargs = _training_kwargs(model, kwargs, warn=True)
    prog = Progress("profiling", progress)
    with torch.enable_grad():
        program, _, _ = _prepare.capture(model, args, kwargs, cfg)
        chain = profiled(program, model, args, kwargs, cfg, prog)[0]
    prog.close()
    return chain

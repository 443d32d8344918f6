"""remat.torch.checkpoint(): any model, a byte budget, eager training.

The public API: checkpoint(), profile() and the RematModule they return.
Each new input signature goes through the pipeline once (_prepare:
capture, cut, measure, solve); every training step then runs the prepared
program by its schedule (_executor).
"""
from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple, Type

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from ._budget import human
from ._config import Bandwidth, CacheSetting, Config, Memory, check_bandwidth, check_memory
from . import _prepare
from ._prepare import Prepared, prepare, profiled
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
        self._remat_entries: Dict[Any, Prepared] = {}
        self.last_entry: Optional[Prepared] = None

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
        return "memory=%r, algorithm=%r" % (c.memory, c.algorithm)

    # -- forward ----------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        model = self._remat_model
        if not torch.is_grad_enabled() or not self._wants_grad(args, kwargs):
            return model(*args, **kwargs)
        args, kwargs = _normalize(args, kwargs)
        kwargs = _training_kwargs(model, kwargs)
        entry = self._entry(args, kwargs)
        self.last_entry = entry
        return entry.forward(self, args, kwargs)

    def _wants_grad(self, args: Sequence[Any], kwargs: Kwargs) -> bool:
        if any(p.requires_grad for p in self.parameters()):
            return True
        return any(t.requires_grad for t in pytree.tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor))

    def _key(self, args: Args, kwargs: Kwargs) -> Tuple[Any, ...]:
        flat, spec = pytree.tree_flatten((args, kwargs))
        return (str(spec), tuple(_leaf_key(x) for x in flat), _state_key(self),
                AutocastState().key())

    def _entry(self, args: Args, kwargs: Kwargs) -> Prepared:
        key = self._key(args, kwargs)
        entry = self._remat_entries.get(key)
        if entry is not None:
            return entry
        cfg = self.remat_config
        if self._remat_entries and cfg.on_new_input == "error":
            raise InputChanged(
                "remat: this input (shapes, dtypes, devices, autocast or parameter state) was "
                "not profiled, and on_new_input='error'. Call with the profiled input, or pass "
                "on_new_input='profile' to profile each new one.")
        entry = prepare(self._remat_model, args, kwargs, cfg)
        self._remat_entries[key] = entry
        return entry

    def set_memory(self, memory: Memory, algorithm: Optional[str] = None,
                   slots: Optional[int] = None, segments: Optional[int] = None,
                   bandwidth: Bandwidth = None) -> None:
        """Solves again for another limit (and algorithm, host link), keeping
        the profiles: every input prepared so far, and those to come, run by it.
        An option left None keeps the value last given (to checkpoint() or here)."""
        cfg = self.remat_config
        cfg.memory = check_memory(memory)
        cfg.algorithm = algorithm or cfg.algorithm
        cfg.slots = slots if slots is not None else cfg.slots
        cfg.segments = segments if segments is not None else cfg.segments
        cfg.bandwidth = check_bandwidth(bandwidth) if bandwidth is not None else cfg.bandwidth
        progress = Progress("solving", cfg.progress)
        for entry in self._remat_entries.values():
            entry.solve(cfg.memory, cfg.algorithm, cfg.slots, cfg.segments, progress,
                        cfg.bandwidth)
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
                             human(e.limit), human(e.predicted_peak), human(e.held),
                             human(e.plain_peak), e.schedule.time, e.chain.time_unit,
                             remat.store_all_cost(e.chain)[1]))
        if e.bandwidth and e.plan is not None:
            n_off = sum(1 for st in e.plan.steps if st.kind == "Off")
            lines.append("host link %s/s (%s); %d offloads per step" % (
                human(e.bandwidth / remat.bandwidth_per_unit("1/s", e.chain.time_unit)),
                "measured" if e.chain.meta.get("profile", {}).get("link") else "given", n_off))
        return "\n".join(lines)


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
    cfg = Config(memory=memory, algorithm=algorithm, slots=slots, segments=segments,
                 max_stages=max_stages, repeat=repeat, cache=cache, progress=progress,
                 on_new_input=on_new_input, capture=capture, bandwidth=bandwidth,
                 compile=compile)
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    wrapped = RematModule(model, cfg)
    if example_args or example_kwargs:
        args, kwargs = _normalize(example_args, example_kwargs)
        kwargs = _training_kwargs(model, kwargs, warn=True)
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

"""remat.torch.enable(model): remat switched on in place, as Hugging Face's
gradient_checkpointing_enable() does, so the model keeps its own class.

The model's `forward` becomes an instance attribute (a RematForward) that
runs the step through an EnabledRemat: the same RematModule that
checkpoint() returns, sharing the model's parameters, buffers and
submodules. When remat itself runs the model (capture, the module path's
step, a call without grad), that attribute calls the model's own forward.
"""
from __future__ import annotations

import inspect
import types
import warnings
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional

import torch
from torch import nn

from ._api import RematModule, _normalize, _training_kwargs
from ._config import Config, Memory
from ._program import Kwargs

# What Module.__call__ runs around forward on the model itself.
_ROOT_HOOKS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
               "_backward_pre_hooks", "_backward_hooks")


class EnabledRemat(RematModule):
    """The RematModule behind an enabled model (what enable() and enabled()
    return): set_memory(), remat_report(), last_entry, as for checkpoint()'s."""

    def __init__(self, model: nn.Module, config: Config,
                 own_forward: Optional[Callable[..., Any]]) -> None:
        super().__init__(model, config)
        self._remat_own_forward = own_forward  # an instance-level forward the model had
        self._remat_inside = False

    def model_forward(self) -> Callable[..., Any]:
        """The model's own forward, bound to it."""
        own = self._remat_own_forward
        if own is not None:
            return own
        model = self._remat_model
        return types.MethodType(type(model).forward, model)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._remat_inside:  # remat runs the model: its own code
            return self.model_forward()(*args, **kwargs)
        self._remat_inside = True
        try:
            return super().forward(*args, **kwargs)
        finally:
            self._remat_inside = False

    def __getstate__(self) -> Dict[str, Any]:
        state = super().__getstate__()
        state["_remat_inside"] = False
        return state


class RematForward:
    """model.forward while remat is enabled. Module.__call__ has run the
    model's own hooks around it, and the wrappers put around it since (a
    bound method, functools.wraps: accelerate's autocast) have run too, so
    while remat calls the model again both are set aside and model.forward
    is the model's own. inspect.signature sees the model's own forward. `on`
    is False after disable() when a wrapper was put around it: it then only
    calls the model's own forward."""

    def __init__(self, handle: EnabledRemat) -> None:
        self.handle = handle
        self.on = True

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.handle.model_forward())

    @property
    def __code__(self) -> types.CodeType:  # torch.export names its shape symbols after it
        code = getattr(self.handle.model_forward(), "__code__", None)
        return code if isinstance(code, types.CodeType) else RematForward.__call__.__code__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        h = self.handle
        if h._remat_inside or not self.on or not torch.is_grad_enabled():
            return h.model_forward()(*args, **kwargs)
        model = h._remat_model
        h.training = model.training
        with _hooks_set_aside(model), _own_forward(model, h._remat_own_forward):
            return h.forward(*args, **kwargs)


class _own_forward:
    """While remat runs the model, model.forward is the model's own: remat's
    calls of the model go neither through remat again nor through wrappers
    put around it (accelerate's autocast entered twice leaves autocast on:
    the gradients of the first step differed)."""

    def __init__(self, model: nn.Module, own: Optional[Callable[..., Any]]) -> None:
        self.model, self.own = model, own

    def __enter__(self) -> None:
        d = self.model.__dict__
        self.before = d.get("forward")
        if self.own is None:
            d.pop("forward", None)
        else:
            d["forward"] = self.own

    def __exit__(self, *exc: Any) -> None:
        d = self.model.__dict__
        if self.before is None:
            d.pop("forward", None)
        else:
            d["forward"] = self.before


class _hooks_set_aside:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.saved = {n: getattr(model, n) for n in _ROOT_HOOKS if getattr(model, n, None)}

    def __enter__(self) -> None:
        for n in self.saved:
            setattr(self.model, n, OrderedDict())

    def __exit__(self, *exc: Any) -> None:
        for n, hooks in self.saved.items():
            setattr(self.model, n, hooks)


def enable(model: nn.Module, memory: Memory = "8GiB", algorithm: str = "optimal", *,
           example_args: Any = (), example_kwargs: Optional[Kwargs] = None,
           **options: Any) -> EnabledRemat:
    """Trains `model` itself within `memory` from now on, keeping its class.

    The in-place form of checkpoint(), as gradient_checkpointing_enable() is
    for Hugging Face models: afterwards model(...) with grad runs by remat's
    schedule, isinstance(model, ItsClass) holds, inspect.signature(
    model.forward) is the model's own, state_dict() is unchanged, and
    disable(model) undoes it. Returns the RematModule that runs it (also
    enabled(model)): set_memory(), remat_report(), last_entry.

    memory, algorithm: as for checkpoint(). example_args / example_kwargs:
    an input to capture, profile and solve for now; without one, the first
    training call prepares its input. options: checkpoint()'s keyword
    options (slots, segments, max_stages, repeat, cache, progress,
    on_new_input, capture, bandwidth, compile, on_infeasible, loss).
    Enabling an enabled model replaces its settings (its profiles are
    dropped). A model already using Hugging Face's gradient checkpointing
    is refused: remat chooses what to recompute itself.
    """
    if not isinstance(model, nn.Module):
        raise TypeError("remat.torch.enable: model must be a torch.nn.Module, not %s"
                        % type(model).__name__)
    if isinstance(model, RematModule):
        raise TypeError("remat.torch.enable: this model is already a RematModule from "
                        "remat.torch.checkpoint(); enable the model it wraps, or use it as it is")
    if _hf_checkpointing(model):
        raise ValueError("remat.torch.enable: the model uses Hugging Face's gradient "
                         "checkpointing; remat chooses what to recompute itself: call "
                         "model.gradient_checkpointing_disable() first")
    try:
        cfg = Config(memory=memory, algorithm=algorithm, **options)
    except TypeError as e:
        raise TypeError("remat.torch.enable: %s (the options are checkpoint()'s keyword "
                        "options)" % e) from None
    found = _remat_forward(model)
    if found is not None and model.__dict__.get("forward") is found:
        disable(model)
        found = None
    if found is None:
        own = model.__dict__.get("forward")
        if "_original_forward" in model.__dict__:
            warnings.warn("remat.torch.enable: accelerate's mixed-precision forward runs inside "
                          "remat's step, and recomputations do not enter the autocast it "
                          "enters; enable remat before accelerator.prepare()", stacklevel=2)
        handle = EnabledRemat(model, cfg, own)
        model.forward = RematForward(handle)
    else:  # inside another wrapper put around it since: stay there, in the same order
        handle = EnabledRemat(model, cfg, found.handle._remat_own_forward)
        found.handle, found.on = handle, True
    if not isinstance(example_args, tuple):
        example_args = (example_args,)
    if example_args or example_kwargs:
        args, kwargs = _normalize(example_args, example_kwargs)
        kwargs = _training_kwargs(model, kwargs, warn=True)
        with torch.enable_grad():
            handle.last_entry = handle._entry(args, kwargs)
    return handle


def enabled(model: nn.Module) -> Optional[EnabledRemat]:
    """The RematModule running `model` since enable(model), or None."""
    f = _remat_forward(model)
    return f.handle if f is not None and f.on else None


def disable(model: nn.Module) -> None:
    """Undoes enable(model): the model's own forward runs again (and an
    instance-level forward it had before is put back; when a wrapper was put
    around remat's since, as accelerate's prepare() does, remat's part of it
    only calls the model's own forward). Nothing happens to a model that is
    not enabled."""
    f = _remat_forward(model)
    if f is None:
        return
    own = f.handle._remat_own_forward
    if model.__dict__.get("forward") is not f:
        f.on = False
        return
    if own is None:
        del model.__dict__["forward"]
    else:
        model.__dict__["forward"] = own


def _remat_forward(model: nn.Module) -> Optional[RematForward]:
    """The RematForward in model.forward, also inside wrappers put around it
    since (functools.wraps' __wrapped__, a bound method's __func__)."""
    f = model.__dict__.get("forward")
    for _ in range(64):  # a wrapper chain, never a cycle
        if f is None or isinstance(f, RematForward):
            return f
        f = getattr(f, "__wrapped__", None) or getattr(f, "__func__", None)
    return None


def _hf_checkpointing(model: nn.Module) -> bool:
    """Whether Hugging Face's gradient checkpointing is on (its layers carry
    a gradient_checkpointing flag)."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())

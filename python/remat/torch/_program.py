"""The contract between the pipeline's steps: what a captured program
provides (the graph path's GraphProgram and the module path's
ModuleProgram both keep it) and what its profile gives the solver. What a
training step asks of a program's per-step replay is _executor.StageReplay."""
from __future__ import annotations

import dataclasses
from typing import (TYPE_CHECKING, Any, ContextManager, Dict, List, Optional, Protocol,
                    Sequence, Tuple)

import torch

if TYPE_CHECKING:
    import remat

    from ._offload import HostLink
    from ._progress import Progress

Args = Tuple[Any, ...]  # positional arguments of a call
Kwargs = Dict[str, Any]  # keyword arguments of a call


class CaptureError(RuntimeError):
    """The model cannot be run by remat: the message says why."""


@dataclasses.dataclass
class Profile:
    """What measuring a program gives (see _measure): the chain's stage dicts
    (the output stage last), a[0] and d[0], and what the chain cannot say."""
    stages: List[Dict[str, Any]]
    input_bytes: int
    input_grad_bytes: int
    held_bytes: int               # held for the whole step (backward_held included)
    # Held in the backward only: [bytes, from, until], alive from the end of
    # B `from` to the end of B `until` (chain stages)
    backward_held: List[List[int]]
    # For a step run as plain autograd (memory=1.0's store-all plan, no
    # hooks: _budget.Budget.predict): the stages whose output autograd frees
    # at the next stage's backward (stage i saves none of a[i]; the chain
    # holds it until B i), as [i, what B i's measured peak already left out
    # of a[i] (_measure: the outputs go at the last unpack), a[i]'s bytes],
    # and what held_bytes counts for replaying stages (RNG states, snapshots
    # of mutated buffers), which such a step does not keep.
    frees_out: List[List[int]] = dataclasses.field(default_factory=list)
    replay_bytes: int = 0


class Program(Protocol):
    """A model captured and cut into stages 1..n_stages."""

    path: str          # "graph" or "modules": the capture path, for reports
    n_stages: int      # L: stages 1..L run by the model; stage L + 1 is the output
    compiled: int      # stages run compiled (compile=True; graph path)

    @property
    def device(self) -> torch.device: ...

    def stage_names(self) -> List[str]: ...

    def cache_key(self, model: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int
                  ) -> str:
        """Whatever decides the profile: the code that runs, input and
        parameter metadata, autocast, the device."""

    def profile(self, model: torch.nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                progress: "Progress") -> Profile: ...

    def forward(self, model: torch.nn.Module, plan: "remat.Plan", link: Optional["HostLink"],
                args: Args, kwargs: Kwargs) -> Any:
        """The model's forward as one training step of `plan`: its outputs,
        with autograd's graph behind them."""

    # compile=True (the module path compiles nothing)
    def compile_stages(self) -> int: ...

    def compiled_stages(self) -> List[int]: ...

    def set_eager(self, indices: Sequence[int]) -> None: ...

    def eager_stages(self) -> ContextManager[None]: ...

    def differs_from_eager(self, model: torch.nn.Module, args: Args, kwargs: Kwargs
                           ) -> Optional[str]:
        """None when the program's gradients are the model's own (its
        kernels, its custom autograd Functions); else why not (the capture
        choice falls back on the module path)."""

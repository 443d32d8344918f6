"""What checkpoint() and profile() are told: one Config, checked once."""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Optional, Union

import remat

Memory = Union[int, float, str]
Bandwidth = Union[None, int, float, str]
CacheSetting = Union[bool, str, "os.PathLike[str]", None]

CAPTURES = ("auto", "graph", "modules")
ON_NEW_INPUT = ("profile", "error")
ON_INFEASIBLE = ("error", "fallback")


@dataclasses.dataclass
class Config:
    """checkpoint()'s settings (see its docstring); RematModule.remat_config."""
    memory: Memory = "8GiB"
    algorithm: str = "optimal"
    slots: Optional[int] = None
    segments: Optional[int] = None
    max_stages: int = 256
    repeat: int = 3
    cache: CacheSetting = True
    progress: Optional[bool] = None
    on_new_input: str = "profile"
    capture: str = "auto"
    bandwidth: Bandwidth = None
    compile: bool = False
    on_infeasible: str = "error"
    loss: Optional[Callable[..., Any]] = None

    def __post_init__(self) -> None:
        if self.on_new_input not in ON_NEW_INPUT:
            raise ValueError("remat.torch.checkpoint: on_new_input must be 'profile' or 'error'")
        if self.on_infeasible not in ON_INFEASIBLE:
            raise ValueError("remat.torch.checkpoint: on_infeasible must be 'error' or "
                             "'fallback'")
        if self.loss is not None and not callable(self.loss):
            raise TypeError("remat.torch.checkpoint: loss must be a callable (output, "
                            "*loss_args) -> scalar tensor, or None")
        if self.capture not in CAPTURES:
            raise ValueError("remat.torch.checkpoint: capture must be 'auto', 'graph' or "
                             "'modules'")
        check_memory(self.memory)
        self.bandwidth = check_bandwidth(self.bandwidth)
        self.max_stages, self.repeat = int(self.max_stages), int(self.repeat)
        self.compile = bool(self.compile)


def check_memory(memory: Memory) -> Memory:
    """memory as checkpoint() takes it: bytes (an int >= 0 or a size text, by
    libremat's size rules) or a fraction of plain autograd's peak (a finite
    float > 0)."""
    if isinstance(memory, bool):
        raise TypeError("remat.torch.checkpoint: memory=%r: give bytes (an int or a text such "
                        "as \"2GiB\") or a fraction of plain autograd's peak (a float)" % memory)
    if isinstance(memory, float):
        if not (memory > 0 and math.isfinite(memory)):
            raise ValueError("remat.torch.checkpoint: memory=%r: a fraction of plain autograd's "
                             "peak must be a finite number > 0" % memory)
        return memory
    what = "remat.torch.checkpoint: memory=%r" % (memory,)
    try:
        remat.parse_size(memory)
    except TypeError as e:
        raise TypeError("%s: %s" % (what, e)) from None
    except remat.InputError as e:
        raise remat.InputError("%s: %s" % (what, e)) from None
    return memory


def check_bandwidth(bandwidth: Bandwidth) -> Bandwidth:
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

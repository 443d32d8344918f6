"""The module path (fallback): stages are a run of blocks called in sequence."""
from __future__ import annotations

from typing import Any

from . import _graph as G


class ModuleRun:
    path = "modules"

    @classmethod
    def capture(cls, model: Any, args: tuple, kwargs: dict) -> "ModuleRun":
        raise G.CaptureError("module-level capture is not implemented yet")

"""One input → a prepared program: capture (the graph path or the module
path, and why), compile=True's choice of stages, the profile (from the
disk cache or measured), and the budget solved for the limit."""
from __future__ import annotations

import sys
import tempfile
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

import remat

from ._budget import Budget
from ._cache import ProfileCache
from ._config import Config
from ._graph.export import dynamic_shapes
from ._graph.program import GraphProgram
from ._memory import fd2_to
from ._modules.program import ModuleProgram
from ._program import Args, CaptureError, Kwargs, Profile, Program
from ._progress import Progress

AnyProgram = Union[GraphProgram, ModuleProgram]


class Prepared(Budget):
    """Everything prepared for one input signature: the budget of its
    profiled chain (schedule, plan, predictions), the program that runs it,
    and `info`: the capture path and why ("path", "why", "export_log"),
    whether the profile came from the cache ("cached": its file, or None),
    and for another shape of a family (_shapes) "derived" (the dimensions
    its chain was derived at), "bucket" (the top shape its profile ran at)
    or "exact" (why it was profiled as it is)."""

    def __init__(self, program: AnyProgram, chain: "remat.Chain", held: int,
                 info: Dict[str, Any], cache: Optional[ProfileCache] = None) -> None:
        super().__init__(chain, held, program.device, cache)
        self.program = program
        self.info = info
        self.solved_for: Any = None  # (limit, caller's bytes) the schedule was solved for
        self.fallback = 0  # on_infeasible="fallback": the smallest limit it was solved at

    def forward(self, model: nn.Module, args: Args, kwargs: Kwargs) -> Any:
        """One training step's forward by the schedule."""
        if self.plan is None:
            raise RuntimeError("remat: forward before solve()")
        return self.program.forward(model, self.plan, self.link, args, kwargs)


# Other shapes of model than a chain, each tried on the captured program
# before it is profiled as a chain: (program, model, args, kwargs, cfg, why,
# progress) -> (a prepared entry or None, a note on why for the report).
# remat.torch._join registers the join of several towers (it imports this
# module, so it is called through this list).
Shape = Callable[[AnyProgram, nn.Module, Args, Kwargs, Config, str, Progress],
                 Tuple[Optional["Prepared"], str]]
SHAPES: List[Shape] = []


def prepare(model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
            dynamic: bool = True) -> Prepared:
    """Capture and profile (or load the cached profile) one input; the
    caller solves (RematModule: the limit depends on every input prepared).
    Capture runs under the caller's autocast state, as the step will.
    dynamic: try torch.export with dynamic dimensions first."""
    progress = Progress("profiling", cfg.progress)
    program, why, export_log = capture(model, args, kwargs, cfg, dynamic)
    progress.note("%s path: %s" % (program.path, why))
    for shape in SHAPES:
        found, note = shape(program, model, args, kwargs, cfg, why, progress)
        if found is not None:
            progress.close()
            return found
        why += note
    if cfg.compile:
        _compile(program)
    entry = profile_on(program, model, args, kwargs, cfg, progress,
                       {"path": program.path, "why": why, "export_log": export_log})
    progress.close()
    return entry


def profile_on(program: AnyProgram, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
               progress: Progress, info: Dict[str, Any]) -> Prepared:
    """A Prepared entry of `program` profiled on this input (or its cached
    profile); info["cached"] says which."""
    chain, held, cache, cached = profiled(program, model, args, kwargs, cfg, progress)
    return Prepared(program, chain, held, dict(info, cached=cached), cache)


def capture(model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config, dynamic: bool = False
            ) -> Tuple[AnyProgram, str, str]:
    """(program, why this path, what a failed export printed). The graph
    path when torch.export captures the model and the graph runs what eager
    runs (with dynamic dimensions first, when asked and this torch can,
    then with the example's sizes); else the module path; else the graph
    anyway (with a warning: its gradients may differ from eager in the last
    bits); else an error that gives both reasons."""
    mode = cfg.capture
    graph: Optional[GraphProgram] = None
    why = "capture='modules'"
    log = ""
    if mode in ("auto", "graph"):
        tries = [True, False] if dynamic and dynamic_shapes(model, args, kwargs) is not None \
            else [False]
        for dyn in tries:
            found, why_not, log = _export(model, args, kwargs, cfg, dyn)
            if found is None:
                why = why_not
                if _data_dependent(why_not):
                    break  # the fixed sizes read the same values
                continue
            graph = found
            diff = graph.differs_from_eager(model, args, kwargs) if mode == "auto" else None
            if diff is None:
                dims = graph.dims_text()
                return graph, "torch.export captured the whole model" + (
                    ", dynamic in %s" % dims if dims else ""), ""
            why = diff + "; the model's own code runs instead"
        if graph is None and mode == "graph":
            raise CaptureError("remat: %s" % why)
    try:
        program = ModuleProgram.capture(model, args, kwargs)
    except CaptureError as e:
        if graph is None:
            raise CaptureError("remat: cannot run this model: %s; and %s" % (why, e)) from None
        why += "; but no run of blocks was found (%s), so the graph runs" % e
        warnings.warn("remat: %s" % why, stacklevel=4)
        return graph, why, log
    if graph is None and mode == "auto":
        warnings.warn("remat: fell back to module-level stages: %s" % why, stacklevel=4)
    return program, why, log


def _export(model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config, dynamic: bool
            ) -> Tuple[Optional[GraphProgram], str, str]:
    """(the graph program or None, why not, what a failed export printed)."""
    with tempfile.TemporaryFile("w+") as f:
        try:
            with fd2_to(f):  # a failed export prints whole graphs there
                graph = GraphProgram.capture(model, args, kwargs, cfg.max_stages, dynamic)
        except Exception as e:  # export raises many kinds; the fallback says why
            f.seek(0)
            return None, "torch.export failed: %s" % _first_line(e), f.read()
        f.seek(0)
        log = f.read()
    if log:  # what a successful export printed (the model's own warnings)
        sys.stderr.write(log)
    return graph, "", ""


def _data_dependent(why: str) -> bool:
    """An export failure on a tensor's value (not on a size): exporting with
    the example's fixed sizes would fail the same way."""
    low = why.lower()
    return "datadependent" in low.replace("_", "").replace("-", "").replace(" ", "") or \
        "data dependent" in low or "data-dependent" in low


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0] if text else "")


# -- compile=True ------------------------------------------------------------------------

# A stage stays compiled when its profile is faster than COMPILED_GAIN x
# eager's. Measured (BENCHMARKS.md): asking 5 % threw away most of GPT-2's
# gain, whose stages each gain a few percent; 1.0 keeps it, and ResNet-50,
# whose batch norms run slower compiled, then runs about as fast as eager.
COMPILED_GAIN = 1.0


def _compile(program: Program) -> None:
    """compile=True: the graph path's stages run compiled (the module path's
    blocks stay eager, with a warning)."""
    n = program.compile_stages()
    if program.path != "graph":
        warnings.warn("remat: compile=True compiles the graph path's stages; this model runs "
                      "on the module path, whose blocks stay eager", stacklevel=5)
    elif n < program.n_stages:
        warnings.warn("remat: compile=True: %d of %d stages compiled (a stage that makes a "
                      "held value stays eager)" % (n, program.n_stages), stacklevel=5)


def faster_eager(compiled: Sequence[Dict[str, Any]], eager: Sequence[Dict[str, Any]],
                 candidates: Sequence[int]) -> List[int]:
    """The stages among `candidates` whose compiled forward + backward was not
    faster than COMPILED_GAIN x eager's, by the two profiles' stage dicts."""
    def t(st: Dict[str, Any]) -> float:
        return float(st["fwd_time"]) + float(st["bwd_time"])
    return [i for i in candidates if not t(compiled[i]) < COMPILED_GAIN * t(eager[i])]


def _keep_faster(program: Program, model: nn.Module, args: Args, kwargs: Kwargs, repeat: int,
                 progress: Progress, prof: Profile) -> List[int]:
    """compile=True: profiles the stages eager too, and runs eager each stage
    that compiling did not make faster (faster_eager; inductor's code is not
    always faster: a training-mode batch norm on CPU, for one). Such a
    stage's dict in `prof` becomes the eager one, so
    the chain describes what runs; what is held for the step does not
    depend on it. Returns those stages."""
    with program.eager_stages():
        plain = program.profile(model, args, kwargs, repeat, progress)
    compiled = program.compiled_stages()
    keep = faster_eager(prof.stages, plain.stages, compiled)
    for i in keep:
        prof.stages[i] = plain.stages[i]
    program.set_eager(keep)
    if keep:
        progress.note("%d of %d compiled stages run eager: not faster compiled" % (
            len(keep), len(compiled)))
    return keep


# -- the profile -------------------------------------------------------------------------


def profiled(program: Program, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
             progress: Progress) -> Tuple["remat.Chain", int, ProfileCache, Optional[str]]:
    """The program's chain, what it holds for the whole step, its cache entry,
    and the cache file it came from (None: measured now, and cached)."""
    cache = ProfileCache(cfg.cache, program.cache_key(model, args, kwargs, cfg.repeat))
    chain = cache.load(program.stage_names())
    if chain is not None:
        p = chain.meta["profile"]
        if p.get("eager_stages"):
            program.set_eager([int(i) for i in p["eager_stages"]])
        return chain, int(p["held_bytes"]), cache, cache.path
    if program.compiled:  # the first run compiles every variant of a stage
        program.profile(model, args, kwargs, 1, progress)
    prof = program.profile(model, args, kwargs, cfg.repeat, progress)
    eager: List[int] = []
    if program.compiled:
        eager = _keep_faster(program, model, args, kwargs, cfg.repeat, progress, prof)
    meta = {"profile": {"key": cache.key, "path": program.path, "stages": program.stage_names(),
                        "held_bytes": prof.held_bytes, "torch": torch.__version__,
                        "backward_held": prof.backward_held,
                        "frees_out": prof.frees_out, "replay_bytes": prof.replay_bytes,
                        "repeat": cfg.repeat, "device": str(program.device)}}
    if eager:
        meta["profile"]["eager_stages"] = eager
    chain = remat.Chain(prof.stages, prof.input_bytes, prof.input_grad_bytes,
                        name=type(model).__name__, time_unit="ms", meta=meta)
    cache.save(chain)
    return chain, prof.held_bytes, cache, None

"""New input shapes without a profile each.

Inputs that differ only in tensor sizes (same structure, dtypes, devices,
other values, parameter state, autocast) form a family. Its first input is
captured with dynamic dimensions where torch.export allows (batch,
sequence: _prepare.capture) and profiled. For a later shape of a dynamic
graph:

- sizes (a[i], abar[i], d[i], held, a[0]) are the graph's formulas
  (_graph/sizes.SizeModel) evaluated at the new dimensions: exact;
- temporaries (Fn/Fck, Fall and B overheads) grow at most as fast as the
  stage's fastest-growing tensor: v * g from a profile, g the largest ratio
  of a tensor's size (new / profiled, at least 1), the tightest such bound
  over the profiles (an upper bound when the temporaries are a constant
  plus terms that each grow like one of the stage's tensors);
- times scale with a FLOP-like count W: t * W / W_p from one profile, the
  line through two.

In the first call, the first input with each dynamic dimension halved
(ShapeSet.verify_now; the family's second shape where that input does not
bind or run) is profiled for real and compared with what the first profile
derives for it (sizes exactly; each overhead within 5 % + 64 KiB above the
bound); only then are later shapes derived (a solve of milliseconds), so
no shape after the first call pays for a profile. Where it does not
verify, or the model has no dynamic graph (module path, a failed dynamic
export, torch before 2.6), shapes are profiled per bucket: each size that
differs from the family's first input rounded up to a power of two,
profiled once on an input made by repeating the batch's own data up to
that size (the user's batch is never padded), and that profile used for
every shape in the bucket (an upper bound: the smaller shape needs less).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch import nn

import remat

from ._budget import human
from ._config import Config
from ._graph.sizes import Binding, SizeModel
from ._join.prepared import join_profile_on
from ._join.program import JoinGraphProgram
from ._prepare import Prepared, capture, prepare, profile_on
from ._program import Args, Kwargs
from ._progress import Progress
from ._tensors import AutocastState

SIZE_TOLERANCE = 0.0          # sizes are formulas: derived and measured agree exactly
OVERHEAD_TOLERANCE = (0.05, 64 << 10)  # measured may pass the derived bound by 5 % + 64 KiB


@dataclasses.dataclass
class Counts:
    """What preparing the inputs so far cost (RematModule.remat_counts)."""
    captures: int = 0   # torch.export or block discovery runs
    profiles: int = 0   # profiles measured (not read from the disk cache)
    cached: int = 0     # profiles read from the disk cache
    derived: int = 0    # inputs whose chain came from the formulas, no profile
    bucketed: int = 0   # inputs run by their bucket's profile


# -- signatures: what an input is, and what changed --------------------------------------

def leaf_key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), str(x.dtype), str(x.device), x.requires_grad,
                x.is_floating_point() and x.requires_grad)
    if x is None or isinstance(x, (bool, int, float, str)):
        return ("V", type(x).__name__, x)
    return ("O", type(x).__qualname__)


def family_key(key: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """An input signature (RematModule._key) less its tensors' sizes (their
    number of dimensions stays); a guard's variant of one (guards.entry_key:
    a flag changed) is a family of its own."""
    if len(key) == 3 and key[1] == "guard":
        return (family_key(key[0]), "guard", key[2])
    spec, leaves, state, autocast = key
    return (spec, tuple(("T", len(k[1])) + k[2:] if k[0] == "T" else k for k in leaves),
            state, autocast)


def _param_names(model: nn.Module) -> List[str]:
    import inspect
    try:
        ps = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    out = []
    for p in ps:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            break
        out.append(p.name)
    return out


def _path_name(path: Sequence[Any], positional: Sequence[str]) -> str:
    """A leaf's path in (args, kwargs) as the caller wrote it: input_ids,
    labels, args[2], batch['mask']."""
    if not path:
        return "input"
    head, rest = path[0], list(path[1:])
    text = ""
    if getattr(head, "idx", None) == 0 and rest:      # args
        i = getattr(rest[0], "idx", 0)
        text = positional[i] if i < len(positional) else "args[%d]" % i
        rest = rest[1:]
    elif rest:                                         # kwargs
        text = str(getattr(rest[0], "key", rest[0]))
        rest = rest[1:]
    for k in rest:
        if hasattr(k, "idx"):
            text += "[%d]" % k.idx
        elif hasattr(k, "key"):
            text += "[%r]" % (k.key,)
        else:
            text += ".%s" % getattr(k, "name", k)
    return text


class Signature:
    """One input as remat tells it apart, with names for messages."""

    def __init__(self, model: nn.Module, args: Args, kwargs: Kwargs, state: Any) -> None:
        flat, spec = pytree.tree_flatten_with_path((args, kwargs))
        names = _param_names(model)
        self.names = [_path_name(p, names) for p, _ in flat]
        self.leaves = [leaf_key(x) for _, x in flat]
        self.spec = str(spec)
        self.state = state
        self.autocast = AutocastState().key()

    def change_from(self, old: "Signature") -> str:
        """What differs from `old`, argument by argument ("input_ids: shape
        (2, 64) -> (2, 128)"), or that nothing does."""
        out: List[str] = []
        if self.spec != old.spec:
            out.append("the arguments' structure (%s -> %s)" % (
                ", ".join(old.names) or "none", ", ".join(self.names) or "none"))
        else:
            for name, a, b in zip(self.names, old.leaves, self.leaves):
                if a != b:
                    out.append("%s: %s" % (name, _leaf_change(a, b)))
        if self.autocast != old.autocast:
            out.append("autocast %s -> %s" % (_autocast_text(old.autocast),
                                               _autocast_text(self.autocast)))
        if self.state != old.state:
            out.append(_state_change(old.state, self.state))
        return "; ".join(out) or "nothing remat tells apart"


def _leaf_change(a: Any, b: Any) -> str:
    if a[0] != b[0] or a[0] == "O":
        return "%s -> %s" % (_leaf_text(a), _leaf_text(b))
    if a[0] == "V":
        return "%r -> %r" % (a[2], b[2])
    parts = []
    for i, what in ((1, "shape"), (2, "dtype"), (3, "device"), (4, "requires_grad")):
        if a[i] != b[i]:
            x, y = (tuple(a[i]), tuple(b[i])) if i == 1 else (a[i], b[i])
            parts.append("%s %s -> %s" % (what, x, y))
    return ", ".join(parts)


def _leaf_text(k: Any) -> str:
    if k[0] == "T":
        return "a tensor of shape %s" % (tuple(k[1]),)
    if k[0] == "V":
        return repr(k[2])
    return "a %s" % k[1]


def _autocast_text(key: Any) -> str:
    return ", ".join("%s %s" % (d, t.replace("torch.", "")) for d, _, t in key) or "off"


def _state_change(old: Any, new: Any) -> str:
    (p0, b0, m0), (p1, b1, m1) = old, new
    for x, y in zip(p0, p1):
        if x != y:
            return "parameter %s: %s -> %s" % (x[0], x[1:], y[1:])
    for x, y in zip(b0, b1):
        if x != y:
            return "buffer %s: %s -> %s" % (x[0], x[1:], y[1:])
    if m0 != m1:
        return "training flags (train()/eval() of some modules)"
    return "the parameters or buffers (names or number)"


# -- buckets ------------------------------------------------------------------------------

def rounded(n: int) -> int:
    """n rounded up to a power of two (a bucket's top)."""
    return 1 << max(0, int(n) - 1).bit_length()


def _shapes(flat: Sequence[Any]) -> Tuple[Optional[Tuple[int, ...]], ...]:
    return tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in flat)


def bucket_input(args: Args, kwargs: Kwargs, ref: Sequence[Optional[Tuple[int, ...]]]
                 ) -> Tuple[Args, Kwargs, Tuple[Any, ...]]:
    """(args, kwargs) with each size that differs from `ref` grown to its
    bucket's top by repeating the tensor's own entries along that dimension
    (a new tensor: the caller's is left alone), and the top shapes."""
    flat, spec = pytree.tree_flatten((args, kwargs))
    out: List[Any] = []
    tops: List[Optional[Tuple[int, ...]]] = []
    for x, r in zip(flat, ref):
        if not isinstance(x, torch.Tensor) or r is None or len(r) != x.dim():
            out.append(x)
            tops.append(tuple(x.shape) if isinstance(x, torch.Tensor) else None)
            continue
        top = tuple(n if n == m else rounded(n) for n, m in zip(x.shape, r))
        y = x
        with torch.no_grad():
            for d, n in enumerate(top):
                if n != y.shape[d] and y.shape[d] > 0:
                    idx = torch.arange(n, device=y.device) % y.shape[d]
                    y = y.index_select(d, idx)
        if y is not x and x.requires_grad:
            y = y.detach().requires_grad_(True)
        out.append(y)
        tops.append(top)
    a, k = pytree.tree_unflatten(out, spec)
    return tuple(a), dict(k), tuple(tops)


@contextlib.contextmanager
def _fake_errors_unlogged() -> Iterator[None]:
    """FakeTensor logs every operator whose meta kernel rejects its inputs,
    at ERROR with a whole traceback, before it raises (aten._grouped_mm
    takes only bfloat16 there: every float32 Hugging Face mixture of
    experts). The size pass catches that and each new shape is profiled
    instead (sizes_failed, in remat_report): the log is noise to the user."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def smaller_input(sizes: SizeModel, program: Any, args: Args, kwargs: Kwargs, b: Binding
                  ) -> Optional[Tuple[Args, Kwargs, Binding]]:
    """(args, kwargs) with each dynamic dimension of binding b halved (at
    least 2: export specializes 0 and 1), every input tensor sliced to the
    sizes that gives (its own leading entries), and their binding; None when
    no dimension can shrink or the graph does not take the result."""
    small = {sym: max(2, n // 2) if n > 2 else n for sym, n in b.items()}
    if small == b:
        return None
    flat, spec = pytree.tree_flatten((args, kwargs))
    if len(flat) != len(program.user_inputs):
        return None
    out: List[Any] = []
    for ph, x in zip(program.user_inputs, flat):
        v = ph.meta.get("val")
        if not isinstance(x, torch.Tensor) or not isinstance(v, torch.Tensor):
            out.append(x)
            continue
        y = x
        with torch.no_grad():
            for d, dim in enumerate(v.shape):
                n = sizes.dim_at(dim, small)
                if n != y.shape[d]:
                    if n > y.shape[d]:
                        return None
                    y = y.narrow(d, 0, n).contiguous()
        if y is not x and x.requires_grad:
            y = y.detach().requires_grad_(True)
        out.append(y)
    got = sizes.bind(program, out)
    if got is None:
        return None
    a, k = pytree.tree_unflatten(out, spec)
    return tuple(a), dict(k), got


# -- derivation ---------------------------------------------------------------------------

@dataclasses.dataclass
class Point:
    """A real profile of a dynamic program: its dimensions, chain, scales."""
    binding: Binding
    chain: "remat.Chain"
    held: int
    tensors: List[List[int]]
    work: List[int]

    def __post_init__(self) -> None:
        self.stages = [{"fwd_overhead": st["fwd_overhead"], "bwd_overhead": st["bwd_overhead"],
                        "fall": _fall(st), "fwd_time": st["fwd_time"], "bwd_time": st["bwd_time"],
                        "options": list(st.get("options") or []),
                        "stop": {k: st[k] for k in STOP_FIELDS if k in st}}
                       for st in self.chain.stages]
        self.names = [st["name"] for st in self.chain.stages]


def _options(got: Sequence[Tuple[float, int, Dict[str, Any]]], work: int, out_bytes: int
             ) -> List[Dict[str, Any]]:
    """A stage's partial saves (_saves) at a new shape from (growth, work,
    stage) of each profile: what an option keeps is some of the stage's
    tensors and its temporaries are too, so each is bounded like the full
    save's temporaries (overhead), never below a[i]; its B's time scales
    like the stage's. An empty list when the profiles measured different options."""
    names = [[o.get("name") for o in s["options"]] for _, _, s in got]
    if not names[0] or any(n != names[0] for n in names):
        return []
    out = []
    for k, name in enumerate(names[0]):
        o: Dict[str, Any] = {"saved_bytes": max(out_bytes, overhead(
            [(g, s["options"][k]["saved_bytes"]) for g, _, s in got]))}
        for f in ("fall_overhead", "bwd_overhead"):
            o[f] = overhead([(g, s["options"][k].get(f, 0)) for g, _, s in got])
        o["bwd_time"] = duration([(W, s["options"][k]["bwd_time"]) for _, W, s in got], work)
        if name is not None:
            o["name"] = name
        out.append(o)
    return out


STOP_FIELDS = ("stop_time", "stop_saved_bytes", "stop_overhead")


def _stopped(got: Sequence[Tuple[float, int, Dict[str, Any]]], work: int, d: Dict[str, Any]
             ) -> Dict[str, Any]:
    """A stage's stopped Fall at a new shape (see _measure._stopped), bounded
    like its partial saves: what it saves is some of the stage's tensors,
    never more than the full save's; its time scales like the stage's. Empty
    unless every profile measured it."""
    if not all(len(s["stop"]) == len(STOP_FIELDS) for _, _, s in got):
        return {}
    saved = overhead([(g, s["stop"]["stop_saved_bytes"]) for g, _, s in got])
    return {"stop_saved_bytes": min(int(d["saved_bytes"]), saved),
            "stop_overhead": overhead([(g, s["stop"]["stop_overhead"]) for g, _, s in got]),
            "stop_time": min(float(d["fwd_time"]),
                             duration([(W, s["stop"]["stop_time"]) for _, W, s in got], work))}


def _fall(stage: Dict[str, Any]) -> int:
    """Fall's temporaries: its own where measured, else Fn's."""
    return int(stage.get("fall_overhead", stage["fwd_overhead"]))


def _line(xs: Sequence[Tuple[float, float]], x: float) -> Optional[float]:
    """The line through the points of smallest and largest abscissa, at x;
    None with fewer than two distinct abscissas or a negative intercept or
    slope (the model C + K * x does not hold)."""
    if len(xs) < 2:
        return None
    lo, hi = min(xs), max(xs)
    if hi[0] <= lo[0]:
        return None
    k = (hi[1] - lo[1]) / (hi[0] - lo[0])
    c = lo[1] - k * lo[0]
    if k < 0 or c < -1e-9 * max(1.0, abs(lo[1])):
        return None
    return max(0.0, c) + k * x


def growth(new: Sequence[int], old: Sequence[int]) -> float:
    """How much a stage's tensors grew from one shape (old) to another: the
    largest ratio of a tensor's size, at least 1."""
    return max([1.0] + [n / o for n, o in zip(new, old) if o > 0])


def overhead(points: Sequence[Tuple[float, float]]) -> int:
    """A stage's temporaries from (growth since a profile, measured there)
    pairs: the tightest of the bounds v * growth. An upper bound when the
    temporaries are a constant plus terms that each grow like one of the
    stage's tensors (a kernel's workspace, a copy, attention's scores);
    the largest tensor's growth alone is not one (scores grow with the
    square of the sequence while the largest tensor grows linearly), nor
    a line through two profiles away from the direction they span."""
    return int(math.ceil(min(v * g for g, v in points)))


def duration(points: Sequence[Tuple[float, float]], work: float) -> float:
    """A stage's time at `work` from (work, measured) pairs: the line
    through two, else proportional to the nearest."""
    fit = _line(points, work)
    if fit is not None:
        return fit
    s, v = min(points, key=lambda p: abs(math.log((p[0] or 1.0) / (work or 1.0))))
    return v * work / s if s > 0 and work > 0 else v


class ShapeSet:
    """The inputs of a family one program runs: its real profiles (points),
    whether the derivation is trusted, and the bucket profiles."""

    def __init__(self, first: Prepared, flat: Sequence[Any]) -> None:
        self.first = first
        self.program = first.program
        self.ref = _shapes(flat)
        # the first input without its data (meta tensors), to bind it later
        self.ref_flat = [torch.empty(x.shape, dtype=x.dtype, device="meta")
                         if isinstance(x, torch.Tensor) else x for x in flat]
        self.sizes: Optional[SizeModel] = None
        self.sizes_failed = ""   # why the formulas could not be made
        self.points: List[Point] = []
        self.trusted: Optional[bool] = None  # None: not verified yet
        self.verdict = ""        # the verification's result, for the report
        self.buckets: Dict[Tuple[Any, ...], Prepared] = {}
        tops = tuple(tuple(rounded(n) for n in s) if s is not None else None for s in self.ref)
        if tops == self.ref:
            self.buckets[tops] = first

    @property
    def join(self) -> bool:
        """A join of towers: its network has no size formulas (the towers'
        stages are not the size model's), so it is profiled per bucket."""
        return isinstance(self.program, JoinGraphProgram)

    @property
    def dynamic(self) -> bool:
        """Whether new shapes are derived from the size formulas."""
        return self.program.path == "graph" and bool(getattr(self.program, "dynamic", False)) \
            and not self.join

    @property
    def any_shape(self) -> bool:
        """Whether the program runs every shape (bucket entries share it)."""
        return self.program.path == "modules" or self.dynamic or (
            self.join and bool(getattr(self.program, "dynamic", False)))

    def _model(self, model: nn.Module) -> Optional[SizeModel]:
        if self.sizes is None and not self.sizes_failed:
            try:
                with _fake_errors_unlogged():
                    self.sizes = SizeModel(self.program, model)
                    b = self.sizes.bind(self.program, self.ref_flat)
                if b is None:
                    raise ValueError("the first input does not bind")
                self.points.append(self._point(self.first, b))
            except Exception as e:  # a size pass the FakeTensors cannot run
                self.sizes = None
                self.sizes_failed = "%s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                                if str(e) else "")
        return self.sizes

    def _point(self, entry: Prepared, b: Binding) -> Point:
        assert self.sizes is not None
        tensors, work = self.sizes.scales(b)
        return Point(b, entry.chain, entry.held, tensors, work)

    def binding(self, model: nn.Module, flat: Sequence[Any]) -> Optional[Binding]:
        """The input's dimensions when the dynamic graph runs it, else None."""
        sizes = self._model(model)
        if sizes is None or not self.program.takes(flat):  # type: ignore[union-attr]
            return None
        return sizes.bind(self.program, flat)

    def derive(self, b: Binding, points: Optional[Sequence[Point]] = None) -> Prepared:
        """A Prepared entry for dimensions `b`, its chain from the formulas
        and the points (all real profiles so far, or those given)."""
        assert self.sizes is not None
        pts = list(points if points is not None else self.points)
        prof = self.sizes.sizes(b)
        tensors, work = self.sizes.scales(b)
        ref = pts[0].chain
        stages = []
        for i, st in enumerate(prof.stages):
            got = [(growth(tensors[i], p.tensors[i]), p.work[i], p.stages[i]) for p in pts]
            d = dict(name=pts[0].names[i], out_bytes=st["out_bytes"],
                     saved_bytes=st["saved_bytes"], grad_bytes=st["grad_bytes"])
            for k in ("fwd_overhead", "bwd_overhead", "fall"):
                d["fall_overhead" if k == "fall" else k] = overhead([(g, s[k]) for g, _, s in got])
            for k in ("fwd_time", "bwd_time"):
                d[k] = duration([(W, s[k]) for _, W, s in got], work[i])
            options = _options(got, work[i], st["out_bytes"])
            if options:
                d["options"] = options
            d.update(_stopped(got, work[i], d))
            stages.append(d)
        meta = dict(ref.meta.get("profile", {}))
        meta.update(held_bytes=prof.held_bytes,
                    backward_held=prof.backward_held, derived=self.sizes.describe(b))
        chain = remat.Chain(stages, prof.input_bytes, prof.input_grad_bytes, name=ref.name,
                            time_unit="ms", meta={"profile": meta})
        info = dict(self.first.info, cached=None, derived=self.sizes.describe(b))
        return Prepared(self.program, chain, prof.held_bytes, info, None)

    def verify(self, entry: Prepared, b: Binding) -> None:
        """Compares a real profile at `b` with what the points so far derive
        for it; trusted when sizes agree and no overhead passes its bound.
        The profile then joins the points."""
        derived = self.derive(b)
        problems = _differences(derived, entry)
        self.trusted = not problems
        where = self.sizes.describe(b) if self.sizes is not None else ""
        self.verdict = ("verified at %s: sizes exact, temporaries within their bounds, the "
                        "step's time %+.0f %%" % (where, 100 * _time_error(derived, entry))
                        if self.trusted else "not verified at %s (%s)" % (where, problems[0]))
        self.points.append(self._point(entry, b))

    def verify_now(self, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
                   counts: Counts) -> None:
        """The verification of the formulas, in the first call: a profile of
        the first input with each dynamic dimension halved (its own entries,
        sliced), so that no later shape pays for a profile. Left to the
        second shape when such an input does not bind or does not run."""
        flat = pytree.tree_leaves((args, kwargs))
        b = self.binding(model, flat)
        if b is None or self.sizes is None:
            return
        made = smaller_input(self.sizes, self.program, args, kwargs, b)
        if made is None:
            return
        small_args, small_kwargs, small = made
        progress = Progress("profiling", cfg.progress)
        try:
            entry = profile_on(self.program, model, small_args, small_kwargs, cfg, progress,
                               dict(self.first.info))
        except Exception:  # the smaller input does not run (a minimum length)
            return
        finally:
            progress.close()
        _count(entry, counts)
        self.verify(entry, small)

    # -- buckets --------------------------------------------------------------------
    def bucket(self, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
               counts: Counts) -> Prepared:
        """The entry of this input's bucket (profiled at its top once); an
        input the top cannot be made for is profiled as it is."""
        top_args, top_kwargs, top = bucket_input(args, kwargs, self.ref)
        entry = self.buckets.get(top)
        if entry is None:
            try:
                entry = self._profile(model, top_args, top_kwargs, cfg, counts, top)
            except Exception as e:  # the grown input does not run (a length limit)
                return self._exact(model, args, kwargs, cfg, counts,
                                   "its bucket's top %s does not run (%s)" % (
                                       _shape_text(top), type(e).__name__))
            self.buckets[top] = entry
        counts.bucketed += 1
        if self.any_shape:
            return entry
        # a graph of fixed sizes: captured again for this shape, run by the
        # bucket's profile when the stages are the same
        program, why, log = capture(model, args, kwargs, cfg, dynamic=False)
        counts.captures += 1
        if program.stage_names() == entry.program.stage_names():
            return Prepared(program, entry.chain, entry.held,
                            dict(entry.info, why=why), entry.cache)
        counts.bucketed -= 1
        return self._exact(model, args, kwargs, cfg, counts, "its stages differ from the "
                           "bucket's", program)

    def _profile(self, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
                 counts: Counts, top: Tuple[Any, ...]) -> Prepared:
        progress = Progress("profiling", cfg.progress)
        if self.any_shape:
            entry = _profile_on(self.program, model, args, kwargs, cfg, progress,
                                dict(self.first.info))
        else:
            entry = prepare(model, args, kwargs, cfg, dynamic=False)
            counts.captures += 1
        progress.close()
        _count(entry, counts)
        entry.info["bucket"] = _shape_text(top)
        return entry

    def _exact(self, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config, counts: Counts,
               why: str, program: Any = None) -> Prepared:
        progress = Progress("profiling", cfg.progress)
        if program is None and self.any_shape:
            program = self.program
        if program is not None:
            entry = _profile_on(program, model, args, kwargs, cfg, progress,
                                dict(self.first.info))
        else:
            entry = prepare(model, args, kwargs, cfg, dynamic=False)
            counts.captures += 1
        progress.close()
        _count(entry, counts)
        entry.info["exact"] = why
        return entry


def _profile_on(program: Any, model: nn.Module, args: Args, kwargs: Kwargs, cfg: Config,
                progress: Progress, info: Dict[str, Any]) -> Prepared:
    """_prepare.profile_on, or the join network's profile for a join."""
    if isinstance(program, JoinGraphProgram):
        return join_profile_on(program, model, args, kwargs, cfg, progress, info)
    return profile_on(program, model, args, kwargs, cfg, progress, info)


def _count(entry: Prepared, counts: Counts) -> None:
    if entry.info.get("cached"):
        counts.cached += 1
    else:
        counts.profiles += 1


def _shape_text(top: Sequence[Any]) -> str:
    return ", ".join(str(tuple(s)) for s in top if s is not None)


def _differences(derived: Prepared, measured: Prepared) -> List[str]:
    """Where a derived chain is off: a size that differs, an overhead above
    its bound by more than OVERHEAD_TOLERANCE."""
    out: List[str] = []
    a, b = derived.chain, measured.chain
    if a.n != b.n:
        return ["%d stages derived, %d measured" % (a.n, b.n)]

    def size(what: str, x: int, y: int) -> None:
        if abs(x - y) > SIZE_TOLERANCE * max(abs(y), 1):
            out.append("%s: derived %s, measured %s" % (what, human(x), human(y)))
    size("held", derived.held, measured.held)
    size("a[0]", a.input_bytes, b.input_bytes)
    fa = [_fall(st) for st in a.stages]
    fb = [_fall(st) for st in b.stages]
    rel, slack = OVERHEAD_TOLERANCE
    for i, (x, y) in enumerate(zip(a.stages, b.stages)):
        for k in ("out_bytes", "saved_bytes", "grad_bytes"):
            size("stage %s %s" % (y["name"], k), int(x.get(k, 0)), int(y.get(k, 0)))
        for k, u, v in (("fwd_overhead", x.get("fwd_overhead", 0), y.get("fwd_overhead", 0)),
                        ("bwd_overhead", x.get("bwd_overhead", 0), y.get("bwd_overhead", 0)),
                        ("fall overhead", fa[i], fb[i])):
            if v > u * (1 + rel) + slack:
                out.append("stage %s %s: measured %s above the derived bound %s" % (
                    y["name"], k, human(v), human(u)))
        for k in ("stop_saved_bytes", "stop_overhead"):
            if k in x and k in y and int(y[k]) > int(x[k]) * (1 + rel) + slack:
                out.append("stage %s %s: measured %s above the derived bound %s" % (
                    y["name"], k, human(int(y[k])), human(int(x[k]))))
        for o, p in zip(x.get("options") or [], y.get("options") or []):
            for k in ("saved_bytes", "fall_overhead", "bwd_overhead"):
                u, v = int(o.get(k, 0)), int(p.get(k, 0))
                if v > u * (1 + rel) + slack:
                    out.append("stage %s partial save %s %s: measured %s above the derived "
                               "bound %s" % (y["name"], p.get("name", "?"), k, human(v), human(u)))
    return out


def _time_error(derived: Prepared, measured: Prepared) -> float:
    """The derived step time (every stage's forward and backward) against
    the measured, relative."""
    def total(c: "remat.Chain") -> float:
        return sum(float(s["fwd_time"]) + float(s["bwd_time"]) for s in c.stages)
    t = total(measured.chain)
    return (total(derived.chain) - t) / t if t > 0 else 0.0


def entry_for(sets: List[ShapeSet], model: nn.Module, args: Args, kwargs: Kwargs,
              cfg: Config, counts: Counts) -> Prepared:
    """The Prepared entry of a new input of a family whose shape sets are
    `sets` (appended to when the input needs a new capture)."""
    flat = pytree.tree_leaves((args, kwargs))
    for ss in sets:
        guard = getattr(ss.program, "guard", None)
        if guard is not None and not guard.holds():
            continue  # a flag changed since its capture: never a stale graph
        if ss.dynamic:
            b = ss.binding(model, flat)
            if b is None:
                if ss.sizes is not None:
                    continue  # a shape this graph does not take: another capture
            elif ss.trusted:
                counts.derived += 1
                return ss.derive(b)
            elif ss.trusted is None:
                progress = Progress("profiling", cfg.progress)
                entry = profile_on(ss.program, model, args, kwargs, cfg, progress,
                                   dict(ss.first.info))
                progress.close()
                _count(entry, counts)
                ss.verify(entry, b)
                return entry
        return ss.bucket(model, args, kwargs, cfg, counts)
    entry = prepare(model, args, kwargs, cfg)
    counts.captures += 1
    _count(entry, counts)
    ss = ShapeSet(entry, flat)
    sets.append(ss)
    if ss.dynamic:
        ss.verify_now(model, args, kwargs, cfg, counts)
    return entry

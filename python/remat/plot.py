"""Pictures of the trade-offs and schedules libremat computes.

    fig = remat.plot.curve("chain.json", ["optimal", "revolve"])   # time against memory
    fig = remat.plot.timeline(chain, schedule, bandwidth="12GB/s")  # memory over time, lanes
    fig = remat.plot.join("problem.json", compare=True)             # makespan against slots
    fig = remat.plot.join("clip-like.json", compare=True)           # remat-join-2: bytes
    fig.savefig("curve.png")

Every function returns a matplotlib Figure drawn on the Agg canvas: nothing
is shown on screen and pyplot's global state is untouched. The numbers come
from the library (remat.curve, remat.timeline, remat.join_curve); this module
only draws. `remat plot ...` on the command line calls these functions.
Needs matplotlib (pip install 'remat[plot]').

Artists carry a gid so that tests and users can find them: "curve" (one line
per algorithm), "min-memory" (the smallest feasible memory of each line),
"store-all" (plain autograd's point), "limit" and "peak" on timelines.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from . import Chain, JoinProblem, Schedule, curve as _curve, join_curve as _join_curve, \
    parse_size, store_all_cost, timeline as _timeline
from ._convert import _read_text
from ._join import join_problem
from ._curves import LANES, SECONDS_PER_UNIT, PathLike

__all__ = ["curve", "timeline", "join", "human_bytes", "memory_unit"]

_UNITS = (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10))
_KIND_COLORS = {"forward": "#4C72B0", "recompute": "#DD8452", "backward": "#55A868",
                "offload": "#8172B3", "prefetch": "#C44E52"}


def memory_unit(max_bytes: float) -> tuple[str, int]:
    """The binary unit ("GiB", 2**30) in which `max_bytes` reads best."""
    for name, shift in _UNITS:
        if max_bytes >= 1 << shift:
            return name, 1 << shift
    return "B", 1


def human_bytes(n: float) -> str:
    """Bytes as a person reads them: "1.76 GiB", "512 B"."""
    name, scale = memory_unit(n)
    return "%.3g %s" % (n / scale, name) if scale > 1 else "%d B" % n


class _ScaledLocator(MaxNLocator):
    """Round ticks in a unit (1, 2, 2.5, 5 GiB) on an axis kept in bytes."""

    def __init__(self, scale: int) -> None:
        # plain bytes: whole numbers only
        super().__init__(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=scale == 1)
        self.scale = scale

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        return [t * self.scale for t in super().tick_values(vmin / self.scale,
                                                            vmax / self.scale)]


def _memory_axis(axis: Axis, max_bytes: float) -> str:
    """Ticks of a byte axis in human units; returns the unit's name."""
    name, scale = memory_unit(max_bytes)
    axis.set_major_locator(_ScaledLocator(scale))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: "%g" % round(x / scale, 6)))
    return name


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _legend_below(fig: Figure, ax: Axes) -> None:
    """The legend under the axes, where no line can run through it."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)),
               fontsize=9, frameon=False)


def _as_chain(chain: Chain | PathLike) -> Chain:
    return chain if isinstance(chain, Chain) else Chain.load(os.fspath(chain))


def _as_schedule(schedule: Schedule | PathLike) -> Schedule:
    return schedule if isinstance(schedule, Schedule) else Schedule.load(os.fspath(schedule))


def curve(chain: Chain | PathLike, algorithms: str | Iterable[str] = ("optimal",),
          *, points: int = 0, memory: int | str | None = None,
          slots: int | None = None, segments: int | None = None,
          bandwidth: float | str | None = None, title: str | None = None) -> Figure:
    """Time per step against the memory limit, one line per algorithm (the
    best time within each limit, a step function), with the store-all point
    (plain autograd: its peak and time) and each algorithm's smallest feasible
    memory marked. Memory in binary units; the right axis gives the slowdown
    against store-all."""
    chain = _as_chain(chain)
    algs = [algorithms] if isinstance(algorithms, str) else list(algorithms)
    if not algs:
        raise ValueError("curve: no algorithm given")
    curves = [_curve(chain, a, points=points, memory=memory, slots=slots, segments=segments,
                     bandwidth=bandwidth) for a in algs]
    peak, base = store_all_cost(chain)
    unit = chain.time_unit
    fig = _figure(8.5, 5.8)
    ax = fig.add_subplot()
    # The curves run up to the store-all peak (or `memory`); a curve lists only
    # the limits where the time improves, so each line is drawn on to the top.
    top = max([parse_size(memory) if memory is not None else peak] +
              [cv.points[-1][0] for cv in curves])
    for cv in curves:
        xs = [m for m, _ in cv.points] + [top]
        ys = [t for _, t in cv.points] + [cv.points[-1][1]]
        (line,) = ax.step(xs, ys, where="post", linewidth=1.8, gid="curve",
                          label="%s (from %s)" % (cv.algorithm, human_bytes(xs[0])))
        ax.plot(xs[:1], ys[:1], marker="o", markersize=7, color=line.get_color(),
                linestyle="none", gid="min-memory", zorder=4)
    ax.plot([peak], [base], marker="*", markersize=16, color="black", linestyle="none",
            gid="store-all", zorder=5,
            label="store-all: %s, %.4g %s" % (human_bytes(peak), base, unit))
    lo = min(cv.min_memory for cv in curves)
    ax.axvline(lo, color="0.45", linestyle=":", linewidth=1, gid="min-memory-line",
               label="smallest feasible memory: %s" % human_bytes(lo))
    ax.set_xlim(lo - 0.04 * (top - lo) - 1, top + 0.04 * (top - lo) + 1)
    ax.set_xlabel("memory limit (%s)" % _memory_axis(ax.xaxis, top))
    ax.set_ylabel("time per step (%s)" % unit)
    if base > 0:
        def slowdown(t: Any) -> Any:
            return t / base

        def time_of(x: Any) -> Any:
            return x * base

        sec = ax.secondary_yaxis("right", functions=(slowdown, time_of))
        sec.set_ylabel("slowdown against store-all")
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    ax.set_title(title if title is not None else "%s: time against memory" % chain.name)
    return fig


def _kind(text: str, seen: set[str]) -> str:
    """forward, recompute (a stage's forward after its first), backward,
    offload or prefetch, from an op text such as "Fck 3"."""
    name, _, arg = text.partition(" ")
    if name == "B":
        return "backward"
    if name == "Off":
        return "offload"
    if name == "Pre":
        return "prefetch"
    if arg in seen:
        return "recompute"
    seen.add(arg)
    return "forward"


def _bandwidth_text(bw: float, time_unit: str) -> str:
    spu = SECONDS_PER_UNIT.get(time_unit or "ms")
    if spu is None:
        return "%.4g bytes/%s" % (bw, time_unit)
    return "%.3g GB/s" % (bw / spu / 1e9)


def _memory_steps(memory: Sequence[tuple[float, int]],
                  end: float) -> tuple[list[float], list[int]]:
    """The step path of (time, bytes from then on) points up to `end`. Several
    points at one instant become the highest and the last: spikes stay
    visible, zero-length dips (a free and an allocation at the same time) go."""
    ts: list[float] = []
    bs: list[int] = []
    k = 0
    while k < len(memory):
        j = k
        while j + 1 < len(memory) and memory[j + 1][0] == memory[k][0]:
            j += 1
        high = max(b for _, b in memory[k:j + 1])
        for b in ([high] if high == memory[j][1] else [high, memory[j][1]]):
            ts.append(memory[k][0])
            bs.append(b)
        k = j + 1
    ts.append(end)
    bs.append(bs[-1] if bs else 0)
    return ts, bs


def _draw_lanes(ax: Axes, lanes: Sequence[str], bars: list[tuple[str, str, float, float]],
                total: float) -> None:
    """Gantt rows, one per lane (top: compute); bars are (lane, kind, start, end).
    Bars wide enough carry their op text."""
    rows = {lane: len(lanes) - 1 - k for k, lane in enumerate(lanes)}
    for lane, kind, start, end in bars:
        ax.broken_barh([(start, end - start)], (rows[lane] - 0.4, 0.8),
                       facecolors=_KIND_COLORS[kind], edgecolor="white", linewidth=0.3)
    ax.set_yticks([rows[lane] for lane in lanes])
    names = {"compute": "compute", "offload": "offload\n(to host)",
             "prefetch": "prefetch\n(from host)"}
    ax.set_yticklabels([names[lane] for lane in lanes])
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    kinds = sorted({k for _, k, _, _ in bars}, key=list(_KIND_COLORS).index)
    ax.legend(handles=[Patch(color=_KIND_COLORS[k], label=k) for k in kinds],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_xlim(0, total * 1.005 if total > 0 else 1)


def timeline(chain: Chain | PathLike, schedule: Schedule | PathLike,
             bandwidth: float | str = 0.0, *, title: str | None = None) -> Figure:
    """Memory in use over time while `schedule` runs, from the timed
    simulator, with the schedule's memory limit and its peak; below, what the
    compute lane runs (forward, recomputation, backward) and, for schedules
    that offload, what the links to and from the host carry."""
    chain = _as_chain(chain)
    schedule = _as_schedule(schedule)
    tl = _timeline(chain, schedule, bandwidth)
    lanes = list(LANES) if tl.offloads else ["compute"]
    fig = _figure(10.5, 4.6 + 0.55 * len(lanes))
    grid = fig.add_gridspec(2, 1, height_ratios=[3.2, 0.3 + 0.5 * len(lanes)])
    ax = fig.add_subplot(grid[0])
    lax = fig.add_subplot(grid[1], sharex=ax)
    ts, bs = _memory_steps(tl.memory, tl.time)
    ax.fill_between(ts, bs, step="post", alpha=0.25, color="#4C72B0", linewidth=0)
    ax.step(ts, bs, where="post", color="#4C72B0", linewidth=1.2, gid="memory",
            label="memory in use")
    top = max([tl.peak_bytes, tl.memory_limit] + bs)
    if tl.memory_limit > 0:
        ax.axhline(tl.memory_limit, color="#C44E52", linestyle="--", linewidth=1.2, gid="limit",
                   label="limit %s" % human_bytes(tl.memory_limit))
    ax.axhline(tl.peak_bytes, color="black", linestyle=":", linewidth=1, gid="peak",
               label="peak %s" % human_bytes(tl.peak_bytes))
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    ax.set_ylabel("memory in use (%s)" % _memory_axis(ax.yaxis, top))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9, frameon=False)
    ax.tick_params(labelbottom=False)
    seen: set[str] = set()
    bars = [(e.lane, _kind(e.text, seen), e.start, e.end)
            for e in sorted(tl.events, key=lambda e: e.op)]
    _draw_lanes(lax, lanes, bars, tl.time)
    lax.set_xlabel("time (%s)" % chain.time_unit)
    head = "%s: %s schedule, time %.4g %s" % (chain.name, schedule.algorithm, tl.time,
                                              chain.time_unit)
    if tl.offloads:
        head += ", link %s, compute idle %.3g %s" % (
            _bandwidth_text(tl.bandwidth, chain.time_unit), tl.compute_idle, chain.time_unit)
    ax.set_title(title if title is not None else head)
    return fig


def _as_join2(problem: Any) -> JoinProblem | None:
    """The problem as a JoinProblem when it is a "remat-join-2" one, else None."""
    if isinstance(problem, JoinProblem):
        return problem
    if isinstance(problem, dict):
        return join_problem(problem) if problem.get("format") == "remat-join-2" else None
    text = _read_text(problem)
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("format") == "remat-join-2":
        return JoinProblem.from_json(text, os.fsdecode(problem))
    return None


def _join2(net: JoinProblem, compare: bool, slots: int | None, title: str | None) -> Figure:
    """Time against memory in bytes for a remat-join-2 network: the join
    solver and, with compare, optimal on the network flattened to one chain."""
    cv = net.curve(slots=slots)
    peak, base = net.store_all_cost()
    lines = [("join solver", cv)]
    if compare:
        lines.append(("flat chain (optimal)", _curve(net.flatten(), "optimal", slots=slots)))
    top = max([peak] + [c.points[-1][0] for _, c in lines])
    fig = _figure(8.5, 5.8)
    ax = fig.add_subplot()
    for label, c in lines:
        xs = [m for m, _ in c.points] + [top]
        ys = [t for _, t in c.points] + [c.points[-1][1]]
        (line,) = ax.step(xs, ys, where="post", linewidth=1.8, gid="curve",
                          label="%s (from %s)" % (label, human_bytes(xs[0])))
        ax.plot(xs[:1], ys[:1], marker="o", markersize=7, color=line.get_color(),
                linestyle="none", gid="min-memory", zorder=4)
    ax.plot([peak], [base], marker="*", markersize=16, color="black", linestyle="none",
            gid="store-all", zorder=5,
            label="store-all: %s, %.4g %s" % (human_bytes(peak), base, net.time_unit))
    lo = min(c.points[0][0] for _, c in lines)
    ax.set_xlim(lo - 0.04 * (top - lo) - 1, top + 0.04 * (top - lo) + 1)
    ax.set_xlabel("memory limit (%s)" % _memory_axis(ax.xaxis, top))
    ax.set_ylabel("time per step (%s)" % net.time_unit)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    shape = " + ".join(str(len(b["stages"])) for b in net.branches)
    ax.set_title(title if title is not None else
                 "%s: join of %d branches (%s stages), time against memory"
                 % (net.name, net.k, shape))
    return fig


def join(problem: PathLike | dict[str, Any] | JoinProblem, compare: bool = False, *,
         title: str | None = None, slots: int | None = None) -> Figure:
    """A join problem's curve. For "remat-join-1" (the homogeneous model):
    makespan against memory in slots, from c_min to full storage, the optimal
    schedule's (Theorem 3) and, with compare, EQUIV-CHAIN's; Span* (everything
    stored) as the floor, c_min and full storage marked. For "remat-join-2"
    (a remat.JoinProblem, its path or document): time against memory in
    bytes of the join solver (`slots` as optimal) and, with compare, of
    optimal on the network flattened to one chain; store-all marked."""
    net = _as_join2(problem)
    if net is not None:
        return _join2(net, compare, slots, title)
    if isinstance(problem, JoinProblem):
        raise TypeError("join: unreachable")
    jc = _join_curve(problem, compare)
    fig = _figure(8.5, 5.8)
    ax = fig.add_subplot()
    xs = [s for s, _, _ in jc.points]
    ys = [m for _, m, _ in jc.points]
    ax.step(xs, ys, where="post", linewidth=1.8, gid="curve", label="optimal (Theorem 3)")
    if compare:
        eq = [e if e is not None else math.nan for _, _, e in jc.points]
        ax.step(xs, eq, where="post", linewidth=1.5, linestyle="--", gid="curve",
                label="EQUIV-CHAIN")
    ax.axhline(jc.span_star, color="0.45", linestyle=":", linewidth=1,
               label="Span* = %.6g (all stored)" % jc.span_star)
    ax.plot(xs[:1], ys[:1], marker="o", markersize=7, color="C0", linestyle="none",
            gid="min-memory", label="c_min = %d slots" % jc.min_slots, zorder=4)
    ax.plot([jc.full_slots], [jc.span_star], marker="*", markersize=16, color="black",
            linestyle="none", gid="store-all", zorder=5,
            label="full storage = %d slots" % jc.full_slots)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("memory (slots)")
    ax.set_ylabel("makespan (time units)")
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    shape = " + ".join(str(n) for n in jc.lengths)
    ax.set_title(title if title is not None else
                 "join of %d branches (%s steps): makespan against memory"
                 % (len(jc.lengths), shape))
    return fig

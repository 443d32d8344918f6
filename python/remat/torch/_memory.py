"""Memory measured outside remat's own bookkeeping.

CUDA: the caching allocator's statistics (memory_allocated at the start,
max_memory_allocated after a reset of the peak).

CPU: PyTorch's profiler with profile_memory=True records every allocation
and free of the CPU allocator as a "[memory]" event with its size (negative
for a free) and a timestamp. Summing them in time order gives the bytes in
use over time; the peak of that running sum is the peak above the start.
A block allocated before the profiler started has no recorded size, so its
free is missed: measure work together with what made its inputs, and use
mark() to read the peak of the part after it. The profiler costs time, so
timing runs never use it.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from typing import Any, Callable, Iterator, List, Tuple

import torch

__all__ = ["PeakMeter", "measure_peak"]

_MARK = "remat::peak_meter_mark"

# Called before a meter starts: a meter left running (remat.torch's
# measure of the caller's loss, which can only stop outside a backward) is
# stopped first, as two profilers cannot run at once.
BEFORE_METER: List[Callable[[], None]] = []

# The meters inside their with-block, innermost last: on CUDA a meter's
# reset of the peak statistics first folds the peak so far into every other
# one; on CPU a Rider reads its marks from the innermost one's profiler.
_ACTIVE: List["PeakMeter"] = []
_rider_ids = itertools.count()


def _reset_cuda_peak(device: torch.device) -> None:
    """reset_peak_memory_stats, keeping the peak so far of every meter."""
    top = torch.cuda.max_memory_allocated(device)
    for m in _ACTIVE:
        if m.device == device:
            m._top = max(m._top, top)
    torch.cuda.reset_peak_memory_stats(device)


class Rider:
    """Marks in the innermost running CPU PeakMeter's profile (a second
    profiler cannot start inside one). When that meter ends, on_done gets
    the rider's segment peaks (as PeakMeter.segment_peaks, between its own
    marks only) and the number of its marks."""

    def __init__(self, host: "PeakMeter", on_done: Callable[[List[int], int], None]) -> None:
        self.tag = "%s#%d" % (_MARK, next(_rider_ids))
        self.on_done = on_done
        host._riders.append(self)

    @staticmethod
    def host(device: Any) -> "PeakMeter | None":
        """The running CPU meter a Rider would read from, if any: the user's,
        never remat's own meter of another model's loss (that one stops at
        that model's next call, maybe never)."""
        if torch.device(device).type != "cpu":
            return None
        meters = [m for m in _ACTIVE if m._prof is not None and m._rideable]
        return meters[-1] if meters else None

    def mark(self) -> None:
        with torch.profiler.record_function(self.tag):
            pass


class PeakMeter:
    """Peak bytes allocated on `device` above what was allocated at the start
    of the with-block: `.peak` after it (and `.timeline` on CPU: the running
    sum after each allocation event, in time order). mark() inside the block
    cuts the time into segments: `.segment_peaks[k]` is the peak of the
    segment after the k-th mark above the bytes in use at that mark
    (`.peak_after_mark` is the last one's); `.mark_levels[k]` is the bytes in
    use at the k-th mark, above the start."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = torch.device(device)
        self.peak = 0
        self.end = 0
        self.peak_after_mark = 0
        self.segment_peaks: List[int] = []
        self.mark_levels: List[int] = []
        self.timeline: List[int] = []
        self._prof: Any = None
        self._start = 0
        self._mark_at: Any = None
        self._top = 0  # CUDA: the peak before another meter's reset
        self._riders: List[Rider] = []
        self._rideable = True  # False: remat's own meter of the caller's loss

    def mark(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            top = max(torch.cuda.max_memory_allocated(self.device), self._top)
            self.peak = max(self.peak, top - self._start)
            if self._mark_at is not None:
                self.segment_peaks.append(top - self._mark_at)
            self._mark_at = torch.cuda.memory_allocated(self.device)
            self.mark_levels.append(self._mark_at - self._start)
            _reset_cuda_peak(self.device)
            self._top = 0
        else:
            with torch.profiler.record_function(_MARK):
                pass

    def __enter__(self) -> "PeakMeter":
        for settle in list(BEFORE_METER):
            settle()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            _reset_cuda_peak(self.device)
            self._top = 0
        else:
            from torch.profiler import ProfilerActivity, profile
            _prime()
            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_stderr():
                self._prof.__enter__()
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            top = max(torch.cuda.max_memory_allocated(self.device), self._top)
            self.peak = max(self.peak, top - self._start)
            self.end = torch.cuda.memory_allocated(self.device) - self._start
            if self._mark_at is not None:
                self.segment_peaks.append(top - self._mark_at)
                self.peak_after_mark = self.segment_peaks[-1]
            return
        with _quiet_stderr():
            self._prof.__exit__(*exc)
        events = self._cpu_events()
        events.sort(key=lambda x: x[0])
        self.segment_peaks, self.mark_levels, timeline = _segments(events, _MARK)
        self.peak = max(0, max(timeline, default=0))
        self.end = timeline[-1] if timeline else 0
        self.timeline = timeline
        self.peak_after_mark = self.segment_peaks[-1] if self.segment_peaks else 0
        self._prof = None
        riders, self._riders = self._riders, []
        for r in riders:
            segments, levels, _ = _segments(events, r.tag)
            r.on_done(segments, len(levels))

    def _cpu_events(self) -> List[Tuple[int, Any]]:
        """(time, bytes) of each allocation and free, (time, name) of each mark."""
        out: List[Tuple[int, Any]] = []
        for e in self._prof.profiler.kineto_results.events():
            if e.name() == "[memory]" and str(e.device_type()).endswith("CPU"):
                out.append((e.start_ns(), e.nbytes()))
            elif e.name().startswith(_MARK):
                out.append((e.start_ns(), e.name()))
        return out


def _segments(events: List[Tuple[int, Any]],
              tag: str) -> Tuple[List[int], List[int], List[int]]:
    """From events in time order: the peak of each segment after a mark
    named tag above the bytes in use at it, the bytes in use at each such
    mark, and the running sum after each allocation event."""
    cur = 0
    at_mark = None
    after = 0
    timeline: List[int] = []
    segments: List[int] = []
    levels: List[int] = []
    for _, nb in events:
        if isinstance(nb, str):
            if nb != tag:
                continue
            if at_mark is not None:
                segments.append(after - at_mark)
            at_mark = after = cur
            levels.append(cur)
            continue
        cur += nb
        timeline.append(cur)
        if at_mark is not None:
            after = max(after, cur)
    if at_mark is not None:
        segments.append(after - at_mark)
    return segments, levels, timeline


def measure_peak(fn: Callable[[], Any], device: Any = "cpu") -> Tuple[Any, int]:
    """(fn(), peak bytes allocated on `device` above the start while it ran)."""
    with PeakMeter(device) as m:
        out = fn()
    return out, m.peak


@contextlib.contextmanager
def fd2_to(f: Any = None) -> Iterator[None]:
    """File descriptor 2 into the open file f, or /dev/null: C++ code
    (Kineto, a failed export) writes there, past sys.stderr."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with contextlib.ExitStack() as stack:
            target = f if f is not None else stack.enter_context(open(os.devnull, "w"))
            os.dup2(target.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _quiet_stderr() -> Any:
    """Kineto prints a line to file descriptor 2 at every profiler start and
    stop, whatever its log level; keep those out of the user's terminal."""
    return fd2_to()


_primed = False


def _prime() -> None:
    """PyTorch warns once per process, on stderr, when a block allocated
    before a profiling session is freed during it, which is what a meter
    session does by design: have that once-only warning happen quietly."""
    global _primed
    if _primed:
        return
    _primed = True
    from torch.profiler import ProfilerActivity, profile
    block = torch.empty(1024)
    with _quiet_stderr():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
            del block

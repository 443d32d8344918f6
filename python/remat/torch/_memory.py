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

    def mark(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            top = torch.cuda.max_memory_allocated(self.device)
            self.peak = max(self.peak, top - self._start)
            if self._mark_at is not None:
                self.segment_peaks.append(top - self._mark_at)
            self._mark_at = torch.cuda.memory_allocated(self.device)
            self.mark_levels.append(self._mark_at - self._start)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            with torch.profiler.record_function(_MARK):
                pass

    def __enter__(self) -> "PeakMeter":
        for settle in list(BEFORE_METER):
            settle()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile
            _prime()
            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_stderr():
                self._prof.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            top = torch.cuda.max_memory_allocated(self.device)
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
        cur = peak = 0
        at_mark = None
        after = 0
        timeline = []
        segments = []
        levels = []
        for _, nb in events:
            if nb is None:  # a mark
                if at_mark is not None:
                    segments.append(after - at_mark)
                at_mark = after = cur
                levels.append(cur)
                continue
            cur += nb
            timeline.append(cur)
            peak = max(peak, cur)
            if at_mark is not None:
                after = max(after, cur)
        if at_mark is not None:
            segments.append(after - at_mark)
        self.peak, self.end, self.timeline = peak, cur, timeline
        self.segment_peaks = segments
        self.mark_levels = levels
        self.peak_after_mark = segments[-1] if segments else 0
        self._prof = None

    def _cpu_events(self) -> List[Tuple[int, Any]]:
        out: List[Tuple[int, Any]] = []
        for e in self._prof.profiler.kineto_results.events():
            if e.name() == "[memory]" and str(e.device_type()).endswith("CPU"):
                out.append((e.start_ns(), e.nbytes()))
            elif e.name() == _MARK:
                out.append((e.start_ns(), None))
        return out


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

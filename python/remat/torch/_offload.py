"""Offloading in the executor: the Off, Pre and Wait ops of a timed plan.

SPEC section 2: `Off X` starts copying X (a[i], or abar[i]: the boundary
tensors and the tensors autograd saved) to host memory; ops may read X while
the copy runs, and X's device memory is released once the copy has ended and
those reads are done. `Pre X` starts copying X back, once its device copy
has been released, and takes its memory when it starts; X is usable when
the copy ends. `Wait X` waits for X's latest copy.

Where each release and each prefetch start happens comes from the C plan
(remat_exec_plan_create_timed, step.copy_at): before step k the executor
releases the offloads whose copy_at is k, waiting for a copy that is not
over yet, and starts the prefetches whose copy_at is k. So it never holds
more, op by op, than the timed simulator predicts, whatever the link really
does; a slower link only costs time. A step that reads a value being
prefetched waits for its copy; a value autograd needs that is still on the
host (nobody prefetched it: a backward off the plan) is copied back at once.

Copies go storage by storage: a value's tensors are views of a few
storages (a ReLU's output and the next op's saved input are one), so each
storage is copied once and the views are rebuilt on the copy. Storages held
anyway (parameters, inputs, held values, the model's outputs) are never
copied. A saved tensor of stage j that is a view of its input a[j-1] is
kept as a _Link, resolved against the a[j-1] held when autograd unpacks it
(SPEC: B j reads a[j-1]), so that offloading or freeing a[j-1] really frees
its memory and offloading abar[j] does not copy a[j-1] again.

CUDA: one side stream per direction. A copy waits for the compute stream
(its source was computed there, or its destination allocated there), an
event marks its end; compute waits for a prefetch's event before it reads
the value. The device source of an offload is held (the executor's
reference) until its event has completed, which is when the SPEC releases
it, so the caching allocator cannot hand its memory out while the copy
reads it; a prefetch's destination is record_stream'ed on the copy stream.
Host buffers are pinned, from a pool reused across steps (a buffer goes
back when the copy that reads it has ended).

CPU: the same code with one copy worker thread per direction and a host
pool of anonymous memory maps, outside the CPU allocator that remat's limit
and PeakMeter count (as pinned memory is outside CUDA's). This exercises
the ordering and release rules without a GPU.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import mmap
import statistics
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch

import remat

from ._tensors import FreeKey, free_key

Ref = Tuple[str, int]
OFFLOAD_OPS = ("Off", "Pre", "Wait")
# libremat's solvers whose schedules move values to the host (docs/offload.md).
OFFLOAD_ALGORITHMS = remat.offload_algorithms()


def _bytes_of(storage: Any, device: torch.device) -> torch.Tensor:
    """A storage as a flat uint8 tensor (no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage)


def _view(storage: Any, device: torch.device, dtype: torch.dtype, size: Sequence[int],
          stride: Sequence[int], offset: int) -> torch.Tensor:
    return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, size, stride)


class Link:
    """A saved tensor that is a view of the stage's input a[j-1]: its
    position in a[j-1] and its geometry, resolved when autograd unpacks it."""

    __slots__ = ("pos", "dtype", "size", "stride", "offset")

    def __init__(self, pos: int, t: torch.Tensor) -> None:
        self.pos, self.dtype = pos, t.dtype
        self.size, self.stride, self.offset = tuple(t.shape), t.stride(), int(t.storage_offset())

    def resolve(self, a_prev: Sequence[torch.Tensor]) -> torch.Tensor:
        base = a_prev[self.pos]
        return _view(base.untyped_storage(), base.device, self.dtype, self.size, self.stride,
                     self.offset)


def make_links(saved: List[Any], inputs: Sequence[torch.Tensor]) -> List[Any]:
    """saved, with the views of an input's storage replaced by Links."""
    pos = {free_key(t): i for i, t in enumerate(inputs) if t.untyped_storage().data_ptr() != 0}
    return [Link(pos[free_key(t)], t) if isinstance(t, torch.Tensor) and free_key(t) in pos else t
            for t in saved]


# -- test probes -------------------------------------------------------------------------

@dataclasses.dataclass
class Probes:
    """Hooks for tests, all off in production: `delay` (seconds each copy
    sleeps first, on CPU), `poison` (host buffers given back to the pool are
    filled with 0xFF, so a late reader shows), `log` (a list: (seq, what,
    ids) events, ids the data pointers a copy reads and writes, a release
    frees or the pool lends or takes back), `on_step` (called with k when the
    executor reaches step k, after the releases and prefetch starts due
    there)."""
    delay: float = 0.0
    poison: bool = False
    log: Optional[List[Tuple[int, str, Tuple[int, ...]]]] = None
    on_step: Optional[Callable[[int], None]] = None

    def __post_init__(self) -> None:
        self._seq = itertools.count()

    def note(self, what: str, ids: Sequence[int]) -> None:
        if self.log is not None:
            self.log.append((next(self._seq), what, tuple(ids)))


# -- the host pool ---------------------------------------------------------------------

def host_buffer(nbytes: int, pinned: bool) -> torch.Tensor:
    """nbytes of host memory: pinned (CUDA), or an anonymous map (CPU)."""
    if pinned:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    return torch.frombuffer(mmap.mmap(-1, max(1, nbytes)), dtype=torch.uint8)[:nbytes]


class HostPool:
    """Host buffers by size, reused across steps: pinned on CUDA, anonymous
    memory maps on CPU (not the CPU allocator's memory). `allocations` and
    `allocated_bytes` count what was ever allocated."""

    def __init__(self, device: torch.device, probes: Probes) -> None:
        self.pinned = device.type == "cuda"
        self.free: Dict[int, List[torch.Tensor]] = {}
        self.allocations = 0
        self.allocated_bytes = 0
        self.lent = 0
        self.probes = probes
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> torch.Tensor:
        with self._lock:
            spare = self.free.get(nbytes)
            self.lent += 1
            if spare:
                return spare.pop()
            self.allocations += 1
            self.allocated_bytes += nbytes
        return host_buffer(nbytes, self.pinned)

    def give(self, buf: torch.Tensor) -> None:
        if self.probes.poison:
            buf.fill_(0xFF)
        with self._lock:
            self.lent -= 1
            self.free.setdefault(buf.numel(), []).append(buf)


# -- copies in flight ------------------------------------------------------------------

class Ticket:
    """One copy in flight: done() without blocking, wait() blocks the host,
    ready() lets compute read the copy's destination."""

    def done(self) -> bool:
        raise NotImplementedError

    def wait(self) -> None:
        raise NotImplementedError

    def ready(self) -> None:
        self.wait()


class _CpuTicket(Ticket):
    def __init__(self, fut: "concurrent.futures.Future[None]") -> None:
        self.fut = fut

    def done(self) -> bool:
        return self.fut.done()

    def wait(self) -> None:
        self.fut.result()


class _CudaTicket(Ticket):
    def __init__(self, event: Any, device: torch.device) -> None:
        self.event, self.device = event, device

    def done(self) -> bool:
        return bool(self.event.query())

    def wait(self) -> None:
        self.event.synchronize()

    def ready(self) -> None:  # compute waits on the GPU, the host goes on
        torch.cuda.current_stream(self.device).wait_event(self.event)


class _Done(Ticket):
    def done(self) -> bool:
        return True

    def wait(self) -> None:
        pass


class HostLink:
    """The copy engine of one device: a copy lane per direction, copies run
    in the order issued (SPEC section 2), and the host pool. Shared by the
    steps of one prepared input. `probes`: the tests' hooks (Probes)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.probes = Probes()
        self.pool = HostPool(device, self.probes)
        if device.type == "cuda":
            self._streams = (torch.cuda.Stream(device),  # type: ignore[no-untyped-call]
                             torch.cuda.Stream(device))  # type: ignore[no-untyped-call]
        else:
            self._lanes = tuple(concurrent.futures.ThreadPoolExecutor(1, "remat-" + n)
                                for n in ("d2h", "h2d"))
            for lane in self._lanes:
                weakref.finalize(self, lane.shutdown, wait=False)

    def note(self, what: str, ids: Sequence[int]) -> None:
        self.probes.note(what, ids)

    def copy(self, direction: int, srcs: List[torch.Tensor], dsts: List[torch.Tensor],
             after: Optional[Ticket] = None) -> Ticket:
        """dsts[i].copy_(srcs[i]) on lane `direction` (0: to the host, 1: to the
        device), after the compute issued so far and after `after`."""
        name = ("d2h", "h2d")[direction]
        srcs, dsts = list(srcs), list(dsts)  # (the worker empties its own lists)
        ids = [t.data_ptr() for t in srcs + dsts]
        if self.device.type == "cuda":
            stream = self._streams[direction]
            stream.wait_stream(torch.cuda.current_stream(self.device))
            if isinstance(after, _CudaTicket):
                stream.wait_event(after.event)
            with torch.cuda.stream(stream):
                for s, d in zip(srcs, dsts):
                    d.copy_(s, non_blocking=True)
                    if direction:
                        d.record_stream(stream)
                ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
                ev.record(stream)
            self.note(name + " issued", ids)
            return _CudaTicket(ev, self.device)

        def run() -> None:
            if after is not None:
                after.wait()
            if self.probes.delay:
                time.sleep(self.probes.delay)
            self.note(name + " start", ids)
            for s, d in zip(srcs, dsts):
                d.copy_(s)
            # Drop the tensors before the future completes: the worker keeps
            # this function a little longer, and the waiting release expects
            # its reference to be the last one.
            srcs.clear()
            dsts.clear()
            self.note(name + " end", ids)
        return _CpuTicket(self._lanes[direction].submit(run))

    def measure(self, nbytes: int = 32 << 20, repeat: int = 3) -> Dict[str, Any]:
        """Bytes per second of each direction: median of `repeat` copies of
        `nbytes` through this link (pinned buffers and side streams on CUDA,
        the copy workers on CPU)."""
        dev = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        host = host_buffer(nbytes, self.pool.pinned)
        rates = []
        for direction in (0, 1):
            src, dst = (dev, host) if direction == 0 else (host, dev)
            times = []
            for _ in range(max(1, repeat) + 1):  # the first run warms the lane up
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                t0 = time.perf_counter()
                self.copy(direction, [src], [dst]).wait()
                times.append(time.perf_counter() - t0)
            rates.append(nbytes / max(statistics.median(times[1:]), 1e-9))
        return {"bytes_per_s": min(rates), "d2h": rates[0], "h2d": rates[1],
                "probe_bytes": nbytes, "how": "pinned copies on side streams"
                if self.device.type == "cuda" else "the copy worker threads"}


# -- one step's copies -----------------------------------------------------------------

class _Layout:
    """How a value's tensors sit on the storages it copies: per flat slot,
    ("keep", object) for what is not copied (None, a Link, a tensor on a
    storage held anyway or on another device, such as a CPU tensor beside a
    CUDA model's activations) or ("view", storage index, dtype, size,
    stride, offset)."""

    def __init__(self, flat: Sequence[Any], keep: Set[FreeKey], device: torch.device) -> None:
        self.slots: List[Tuple[Any, ...]] = []
        self.storages: List[Any] = []
        index: Dict[FreeKey, int] = {}
        for t in flat:
            if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() == 0 or \
                    not _on(t, device) or free_key(t) in keep:
                self.slots.append(("keep", t))
                continue
            k = free_key(t)
            if k not in index:
                index[k] = len(self.storages)
                self.storages.append(t.untyped_storage())
            self.slots.append(("view", index[k], t.dtype, tuple(t.shape), t.stride(),
                               t.storage_offset()))
        self.nbytes = [s.nbytes() for s in self.storages]

    def build(self, storages: Sequence[Any], device: torch.device) -> List[Any]:
        out = []
        for sl in self.slots:
            if sl[0] == "keep":
                out.append(sl[1])
            else:
                _, i, dtype, size, stride, offset = sl
                out.append(_view(storages[i], device, dtype, size, stride, offset))
        return out


def _on(t: torch.Tensor, device: torch.device) -> bool:
    """Whether t lives on the link's device ("cuda" means the current one)."""
    if t.device.type != device.type:
        return False
    return device.index is None or t.device.index in (None, device.index)


def _flatten(value: Any) -> Tuple[List[Any], Callable[[List[Any]], Any]]:
    """A stored value (a list of tensors, or an abar with .a and .saved) as a
    flat list, and how to rebuild it from one."""
    if isinstance(value, list):
        return list(value), lambda flat: flat
    n, cls = len(value.a), type(value)  # (not value: the rebuild must not hold the device copy)
    return list(value.a) + list(value.saved), lambda flat: cls(flat[:n], flat[n:])


class _Rec:
    """A value's copies in this step. state: "offloading" (the device copy is
    still held), "host" (released), "prefetching" (copying back), "device"."""

    __slots__ = ("ref", "layout", "rebuild", "host", "off", "pre", "state")

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.layout: Optional[_Layout] = None
        self.rebuild: Optional[Callable[[List[Any]], Any]] = None
        self.host: List[torch.Tensor] = []
        self.off: Ticket = _Done()
        self.pre: Ticket = _Done()
        self.state = "device"


class StepCopies:
    """The offload ops of one training step, carried out on `store` (the
    executor's values) as the plan says (see the module docstring)."""

    def __init__(self, link: HostLink, plan: Any, store: Callable[[], Dict[Ref, Any]],
                 keep: Set[FreeKey]) -> None:
        self.link = link
        self.store = store
        self.keep = keep          # storages never copied (held anyway)
        self.pinned: Set[FreeKey] = set()  # and the model's outputs (the caller holds them)
        self.n_steps = len(plan.steps)
        self.due: Dict[int, List[Any]] = {}
        for st in plan.steps:
            if st.kind in ("Off", "Pre"):
                self.due.setdefault(st.copy_at, []).append(st)
        self.recs: Dict[Ref, _Rec] = {}
        self.returning: List[Tuple[Ticket, List[torch.Tensor]]] = []
        self.next = 0
        self.enabled = True
        self.on_release: Optional[Callable[[Ref], None]] = None
        self.probes = link.probes

    # -- the plan's points ---------------------------------------------------------
    def before(self, k: int) -> None:
        """Releases and prefetch starts due before step k (and those of any
        step skipped on the way), then waits for the prefetches step k reads."""
        if not self.enabled:
            return
        while self.next <= min(k, self.n_steps):
            for st in self.due.get(self.next, ()):
                if st.kind == "Off":
                    self.release(st.value)
                elif self.next < self.n_steps:  # at n_steps: never needed
                    self.prefetch(st.value)
            if self.probes.on_step is not None:
                self.probes.on_step(self.next)
            self.next += 1
        self._give_back(block=False)

    def apply(self, st: Any) -> None:
        """The op itself: Off starts the copy, Wait waits, Pre only marks
        (its copy starts at its copy_at)."""
        if not self.enabled:
            return
        if st.kind == "Off":
            self.offload(st.value)
        elif st.kind == "Wait":
            rec = self.recs.get(st.value)
            if rec is not None and rec.state == "prefetching":
                self._ready(rec)
            elif rec is not None:
                rec.off.wait()

    # -- copies ------------------------------------------------------------------------
    def offload(self, ref: Ref) -> None:
        store = self.store()
        value = store.get(ref)
        if value is None:  # not on the device (a backward off the plan): nothing to copy
            return
        old = self.recs.get(ref)
        if old is not None:
            self._drop_host(old)
        rec = _Rec(ref)
        flat, rec.rebuild = _flatten(value)
        rec.layout = _Layout(flat, self.keep | self.pinned, self.link.device)
        srcs = [_bytes_of(s, self.link.device) for s in rec.layout.storages]
        rec.host = [self.link.pool.take(n) for n in rec.layout.nbytes]
        self.link.note("take", [h.data_ptr() for h in rec.host])
        rec.off = self.link.copy(0, srcs, rec.host)
        rec.state = "offloading"
        self.recs[ref] = rec

    def release(self, ref: Ref) -> None:
        """SPEC: the device copy goes once the copy has ended (and the reads
        before this step are done: they ran before it)."""
        rec = self.recs.get(ref)
        if rec is None or rec.state != "offloading":
            return
        rec.off.wait()
        if rec.layout is not None:
            self.link.note("release", [s.data_ptr() for s in rec.layout.storages])
            rec.layout.storages = []  # the last references of the executor to the device copy
        self.store().pop(ref, None)
        rec.state = "host"
        if self.on_release is not None:
            self.on_release(ref)

    def prefetch(self, ref: Ref) -> None:
        """Takes the value's device memory and starts copying it back."""
        rec = self.recs.get(ref)
        if rec is None or rec.state != "host" or rec.layout is None or rec.rebuild is None:
            return
        dev = self.link.device
        dsts = [torch.empty(n, dtype=torch.uint8, device=dev) for n in rec.layout.nbytes]
        rec.pre = self.link.copy(1, rec.host, dsts, after=rec.off)
        storages = [d.untyped_storage() for d in dsts]
        self.store()[ref] = rec.rebuild(rec.layout.build(storages, dev))
        rec.state = "prefetching"

    def _ready(self, rec: _Rec) -> None:
        rec.pre.ready()
        rec.state = "device"
        self.returning.append((rec.pre, rec.host))
        rec.host = []
        self._give_back(block=False)

    def get(self, ref: Ref) -> Any:
        """The stored value of `ref`, ready to read: its prefetch waited for,
        or, on the host with nothing stored (a read off the plan), copied
        back now. None when it is neither stored nor on the host."""
        rec = self.recs.get(ref)
        if rec is not None and rec.state == "host" and ref not in self.store():
            self.prefetch(ref)
        if rec is not None and rec.state == "prefetching":
            self._ready(rec)
        return self.store().get(ref)

    def pin(self, tensors: Sequence[torch.Tensor]) -> None:
        """Storages the caller holds (the outputs): never copied."""
        self.pinned |= {free_key(t) for t in tensors if isinstance(t, torch.Tensor)}

    def on_host(self, ref: Ref) -> bool:
        rec = self.recs.get(ref)
        return rec is not None and rec.state == "host"

    def reads_ready(self, refs: Sequence[Ref]) -> None:
        for ref in refs:
            rec = self.recs.get(tuple(ref))  # type: ignore[arg-type]
            if rec is not None and rec.state == "prefetching":
                self._ready(rec)

    # -- host buffers ----------------------------------------------------------------
    def _drop_host(self, rec: _Rec) -> None:
        if rec.host:
            self.returning.append((_Both(rec.off, rec.pre), rec.host))
            rec.host = []

    def _give_back(self, block: bool) -> None:
        keep = []
        for ticket, bufs in self.returning:
            if block:
                ticket.wait()
            if block or ticket.done():
                self.link.note("give", [b.data_ptr() for b in bufs])
                for b in bufs:
                    self.link.pool.give(b)
            else:
                keep.append((ticket, bufs))
        self.returning = keep

    def finish(self, keep_host: Sequence[Ref] = ()) -> None:
        """The end of a backward pass: the releases due after the last step,
        every copy waited for, host buffers back in the pool (but those of
        `keep_host`, still needed)."""
        if self.enabled:
            self.before(self.n_steps)
        for rec in self.recs.values():
            rec.off.wait()
            rec.pre.wait()
            if rec.ref not in keep_host:
                self._drop_host(rec)
        self._give_back(block=True)

    def close(self) -> None:
        self.finish()
        self.recs = {}


class _Both(Ticket):
    """Both copies of a value are over (its host buffers are free)."""

    def __init__(self, a: Ticket, b: Ticket) -> None:
        self.a, self.b = a, b

    def done(self) -> bool:
        return self.a.done() and self.b.done()

    def wait(self) -> None:
        self.a.wait()
        self.b.wait()

"""Offload schedules (pofo, offload-only, opportunist, autocapper) run by the
executor with asynchronous copies (CPU: copy worker threads): gradients
bitwise equal to plain autograd, the measured peak within the limit, the
SPEC's release rules under slowed-down copies, the memory of every op
against the timed simulator's prediction, and the bandwidth option."""
import pytest
import torch

import models as M
import remat
import remat.torch as rt
from remat.torch._offload import OFFLOAD_ALGORITHMS, _Layout
from torchkit import (assert_same, between, bounds, copies, measured_peak, same_step, state, step,
                      two_backwards, wrap, zero_grads)

BANDWIDTH = "1GB/s"  # given, so that the schedules do not depend on this machine
# How far from the algorithm's smallest limit to plain autograd's peak.
STEPS = (0.1, 0.3, 0.5, 0.7, 0.9)
_MODELS = {}


def _model(name):
    """(plain model, wrapped copy, args, kwargs), profiled once per module."""
    if name not in _MODELS:
        torch.manual_seed(0)
        model, args, kwargs = M.ALL[name]()
        ref, base = copies(model)
        _MODELS[name] = (ref, wrap(base, args, kwargs), args, kwargs)
    return _MODELS[name]


def _offloading(w, algorithm, bandwidth=BANDWIDTH):
    """Solves with the first limit (STEPS of the way from the algorithm's
    smallest to plain autograd's peak) at which the algorithm's schedule
    moves something to the host."""
    low, plain = bounds(w, algorithm, bandwidth)
    for t in STEPS:
        w.set_memory(between(low, plain, t), algorithm=algorithm, bandwidth=bandwidth)
        e = w.last_entry
        if any(st.kind == "Off" for st in e.plan.steps):
            return e
    pytest.fail("%s offloads nothing at %s of the way from %d to %d bytes" % (
        algorithm, STEPS, low, plain))


@pytest.mark.parametrize("algorithm", OFFLOAD_ALGORITHMS)
@pytest.mark.parametrize("name", ["gpt2", pytest.param("resnet50", marks=pytest.mark.kernels),
                                  "pairnet"])
def test_offload_schedule_runs(name, algorithm):
    ref, w, args, kwargs = _model(name)
    e = _offloading(w, algorithm)
    assert e.bandwidth == pytest.approx(1e6)  # 1 GB/s in bytes per ms
    same_step(ref, w, args, kwargs)
    same_step(ref, w, args, kwargs)  # host buffers reused from the pool
    allocated = e.link.pool.allocations
    peak = measured_peak(w, args, kwargs)
    measured_peak(ref, args, kwargs)  # the same number of steps: BatchNorm stays in step
    assert peak <= e.limit, "%s/%s: measured %d > limit %d" % (name, algorithm, peak, e.limit)
    assert e.link.pool.allocations == allocated, "a step allocated host buffers again"
    assert e.link.pool.lent == 0


def _open_copies_ok(log):
    """No release of a device buffer and no return of a host buffer to the
    pool while a copy that reads or writes it has started and not ended; a
    host buffer is lent again only after its copies ended."""
    open_ = {}
    checked = 0
    for _, what, ids in log:
        if what.endswith(" start"):
            for p in ids:
                open_[p] = open_.get(p, 0) + 1
        elif what.endswith(" end"):
            for p in ids:
                open_[p] -= 1
        else:  # release, give, take
            busy = [p for p in ids if open_.get(p, 0)]
            assert not busy, "%s of %s while a copy uses it" % (what, busy)
            checked += len(ids)
    return checked


def test_slow_copies_keep_the_rules():
    """Copies slowed down (each sleeps 20 ms first) widen every race window:
    the executor must still wait for an offload before releasing its device
    copy, for the host copy before a prefetch reads it, for a prefetch
    before compute reads it, and for a prefetch before its host buffer goes
    back to the pool (which the test fills with 0xFF, so a late reader
    shows); the gradients stay bitwise equal."""
    ref, w, args, kwargs = _model("gpt2")
    e = _offloading(w, "pofo")
    link = e.link
    probes = link.probes
    probes.delay, probes.log, probes.poison = 0.02, [], True
    try:
        for _ in range(2):
            same_step(ref, w, args, kwargs)
    finally:
        probes.delay, probes.poison = 0.0, False
    log, probes.log = probes.log, None
    n_off = sum(1 for st in e.plan.steps if st.kind == "Off")
    assert sum(1 for _, what, _ in log if what == "d2h end") == 2 * n_off
    assert sum(1 for _, what, _ in log if what == "release") == 2 * n_off
    assert _open_copies_ok(log) > 0


def test_unpack_of_a_value_not_prefetched():
    """A value autograd needs that no Pre brought back is copied at once."""
    ref, w, args, kwargs = _model("pairnet")
    e = _offloading(w, "pofo")
    pres = [st for st in e.plan.steps if st.kind == "Pre"]
    assert pres
    for st in pres:  # never started
        st.copy_at = len(e.plan.steps)
    try:
        same_step(ref, w, args, kwargs)
    finally:
        w.set_memory(1.0, algorithm="optimal")


def test_tensors_on_another_device_are_not_copied():
    """A value of a CUDA model may hold a CPU tensor (found on an H100 with
    GPT-2: 'Attempted to set the storage of a tensor on device cuda:0 to a
    storage on different device cpu'); only the link's device is copied."""
    cpu, meta = torch.arange(6.0), torch.empty(4, device="meta")
    lay = _Layout([cpu, meta, None], set(), torch.device("cuda"))
    assert lay.storages == [] and [sl[0] for sl in lay.slots] == ["keep"] * 3
    assert lay.build([], torch.device("cuda"))[0] is cpu
    lay = _Layout([cpu, cpu[2:]], set(), torch.device("cpu"))
    assert len(lay.storages) == 1 and [sl[0] for sl in lay.slots] == ["view", "view"]


def test_an_offloaded_partial_save_takes_its_kept_matmul_outputs_along():
    """abar[j] of a 'matmuls' partial save holds matmul outputs in its op
    cache beside the saved tensors. Offloading it must copy them and, once
    released, hold none on the device (found as a flaky 1-3 % excess of
    autocapper on ResNet-50: the cache kept them while the plan counted them
    on the host); the abar rebuilt after the prefetch keeps its partial save
    (B then replays the outputs instead of running the matmuls again)."""
    import weakref

    from remat.torch._executor import _Abar
    from remat.torch._offload import _flatten
    from remat.torch._saves import MISSING, PartialSave
    part = PartialSave("matmuls")
    mm, out2 = torch.randn(3, 4), torch.randn(2)
    part.cache.outs = [mm, (out2, None)]
    a, saved = [torch.randn(5)], [mm[1:], MISSING]
    gone = [weakref.ref(mm), weakref.ref(out2)]
    flat, rebuild, drop = _flatten(_Abar(a, saved, part))
    assert any(t is mm for t in flat) and any(t is out2 for t in flat)
    copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in flat]
    del mm, out2, saved, flat
    drop()
    assert [r() for r in gone] == [None, None], "the device copies outlive the release"
    back = rebuild(copies)
    assert back.part is part and back.a[0] is copies[0] and back.saved[1] is MISSING
    assert part.cache.outs[0] is copies[3] and part.cache.outs[1][0] is copies[4]


def test_a_prefetched_partial_save_lets_go_of_its_outputs_after_its_backward():
    """After the prefetch, the offload's rebuild has put the copies in the op
    cache and keeps holding the cache (it stays in the step's records).
    B j's drop must free them: they stayed taken until the end of the step
    while the plan counted them freed by B j (see the GPT-2 test below)."""
    import weakref

    from remat.torch._executor import _Abar
    from remat.torch._offload import _flatten
    from remat.torch._saves import MISSING, PartialSave
    part = PartialSave("matmuls")
    part.cache.outs = [torch.randn(3, 4), (torch.randn(2), None)]
    flat, rebuild, drop = _flatten(_Abar([torch.randn(5)], [MISSING], part))
    copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in flat]
    del flat
    drop()
    back = rebuild(copies)
    gone = [weakref.ref(copies[2]), weakref.ref(copies[3])]
    assert back.part.cache.outs[0] is copies[2]
    del copies, back
    assert all(r() is not None for r in gone)  # the cache holds them until B
    part.drop()
    assert [r() for r in gone] == [None, None], "the prefetched outputs outlive B"


# Stage times (ms: forward, backward, each partial save's backward) of one
# GPT-2 profile on the loaded CPU, at which autocapper's schedule near its
# smallest limit offloads a 'matmuls' partial save and prefetches it. Fixed,
# so that the schedule does not depend on this machine's timings.
_GPT2_TIMES = [(6.4, 1.0, (6.2, 6.2)), (2.4, 14.2, (348.6, 438.1)),
               (142.7, 283.4, (396.2, 439.6)), (117.3, 199.3, (205.3, 284.6)),
               (11.1, 95.6, (113.7, 95.6)), (11.1, 70.7, (136.6, 70.7)),
               (10.6, 118.6, (118.6, 118.6)), (14.4, 0.4, (28.7, 28.7)),
               (32.6, 33.9, (33.9, 33.9)), (0, 0, ())]


def _offloaded_matmul_saves(plan):
    """The stages whose 'matmuls' partial save (Fall j/1) the plan offloads."""
    parts = {int(st.op.split()[1].split("/")[0]) for st in plan.steps
             if st.kind == "Fall" and st.op.endswith("/1")}
    offloaded = [int(st.op[len("Off abar["):-1]) for st in plan.steps
                 if st.op.startswith("Off abar[")]
    return [j for j in offloaded if j in parts]


def test_an_offloaded_matmuls_save_is_freed_by_its_backward():
    """GPT-2 under autocapper with fixed stage times: a schedule that offloads
    a 'matmuls' partial save, prefetches it and runs its B measures within its
    limit (it measured 0.3 % over, flakily in test_offload_schedule_runs as
    the measured times changed the schedule: the prefetched matmul outputs
    stayed held after B until the end of the step)."""
    torch.manual_seed(0)
    model, args, kwargs = M.ALL["gpt2"]()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    e = w.last_entry
    stages = e.chain.stages
    assert len(stages) == len(_GPT2_TIMES)
    for st, (fwd, bwd, opts) in zip(stages, _GPT2_TIMES):
        st["fwd_time"], st["bwd_time"] = fwd, bwd
        if "stop_time" in st:  # (fixed too: a measured one may exceed fwd)
            st["stop_time"] = fwd
        for opt, t in zip(st.get("options", []), opts):
            opt["bwd_time"] = t
    c = e.chain
    e.chain = remat.Chain(stages, c.input_bytes, c.input_grad_bytes, name=c.name,
                          time_unit=c.time_unit, meta=c.meta)
    low, plain = bounds(w, "autocapper", BANDWIDTH)
    ran = 0
    # (solving is cheap: a fine sweep finds the limits where such a schedule
    # is chosen, which move with the profile's figures; the first three run)
    for t in [k / 50 for k in range(1, 50)]:
        if ran == 3:
            break
        w.set_memory(between(low, plain, t), algorithm="autocapper", bandwidth=BANDWIDTH)
        e = w.last_entry
        if not _offloaded_matmul_saves(e.plan):
            continue
        same_step(ref, w, args, kwargs)
        peak = measured_peak(w, args, kwargs)
        measured_peak(ref, args, kwargs)
        assert peak <= e.limit, "at %s: measured %d > limit %d" % (t, peak, e.limit)
        ran += 1
    assert ran, "no schedule offloads a 'matmuls' partial save"


def test_a_prefetch_holds_its_destination_until_waited_for():
    """CUDA: a prefetch's destination stays referenced by its ticket until
    compute (ready) or the host (wait) has waited for the copy, instead of
    record_stream (see _CudaTicket). The event is a stand-in: no GPU here."""
    import weakref

    from remat.torch._offload import _CudaTicket

    class Event:
        synced = 0

        def synchronize(self):
            Event.synced += 1

        def query(self):
            return Event.synced > 0
    dst = torch.empty(8)
    gone = weakref.ref(dst)
    ticket = _CudaTicket(Event(), torch.device("cuda"), [dst])
    del dst
    assert gone() is not None and not ticket.done()
    ticket.wait()
    assert gone() is None and ticket.done()


def test_second_backward_with_retain_graph():
    ref, w, args, kwargs = _model("gpt2")
    _offloading(w, "pofo")
    two_backwards([ref, w], args, kwargs)
    assert_same(state(ref), state(w))


def _per_op(w, args, kwargs):
    """Measured memory per step of the plan: (bytes in use at the step's start,
    peak until the next step), above the step's start, from the profiler's
    allocation events (PeakMeter), one mark where the executor reaches each step."""
    e = w.last_entry
    step(w, args, kwargs)
    zero_grads(w)
    with rt.PeakMeter() as m:
        e.link.probes.on_step = lambda k: m.mark()
        try:
            step(w, args, kwargs)
        finally:
            e.link.probes.on_step = None
    n = len(e.plan.steps)
    return [(m.mark_levels[k], m.mark_levels[k] + m.segment_peaks[k]) for k in range(n)], m.peak


def _predicted_per_op(e):
    """The timed simulator's memory while each op runs (each op at its own
    overhead, as the prediction of remat_report), plus what is held."""
    sim = remat.simulate(e.chain, e.schedule, e.bandwidth)
    return [m + e.held for m in sim.mem_during]


@pytest.mark.parametrize("name", ["gpt2", pytest.param("resnet50", marks=pytest.mark.kernels)])
def test_prediction_op_by_op(name):
    """The memory of every compute op (the peak between the executor reaching
    it and reaching the next step), measured, against the timed simulator's
    prediction: never above it by more than 2% of the peak (the
    executor releases and takes memory where the plan says, so it holds a
    subset of what the simulator holds), on average within 10% of the peak,
    and the whole step's peak within 5% of the predicted peak."""
    ref, w, args, kwargs = _model(name)
    e = _offloading(w, "pofo")
    tl = remat.timeline(e.chain, e.schedule, bandwidth=e.bandwidth)
    assert tl.peak_bytes == e.plan.peak_bytes
    assert tl.offloads
    got, peak = _per_op(w, args, kwargs)
    want = _predicted_per_op(e)
    # Compute ops, but the loss stage's forward: the executor does not run it,
    # and its segment holds the caller's loss and the start of its backward.
    n = e.chain.n
    compute = [k for k, st in enumerate(e.plan.steps)
               if st.kind == "B" or (st.kind in ("Fn", "Fck", "Fall") and st.index < n)]
    errors = [(got[k][1] - want[k]) / e.predicted_peak for k in compute]
    assert max(errors) <= 0.02, "op %s measured above the prediction by %.1f%% of the peak" % (
        e.plan.steps[compute[errors.index(max(errors))]].op, 100 * max(errors))
    assert sum(abs(x) for x in errors) / len(errors) <= 0.10, errors
    assert peak <= e.limit
    assert abs(peak - e.predicted_peak) <= 0.05 * e.predicted_peak, (peak, e.predicted_peak)


def test_bandwidth_auto_is_measured_and_cached(tmp_path):
    model, args, kwargs = M.pairnet()
    w = wrap(model, args, kwargs, algorithm="pofo", bandwidth="auto", cache=str(tmp_path))
    e = w.last_entry
    link = e.chain.meta["profile"]["link"]
    assert link["bytes_per_s"] > 1e6 and link["how"] == "the copy worker threads"
    assert e.bandwidth == pytest.approx(
        remat.bandwidth_per_unit("%d/s" % int(link["bytes_per_s"]), e.chain.time_unit))
    assert "host link" in w.remat_report()
    again = wrap(model, args, kwargs, algorithm="pofo", cache=str(tmp_path))
    e2 = again.last_entry
    assert e2.info["cached"] and e2.chain.meta["profile"]["link"] == link
    assert e2.bandwidth == e.bandwidth


def test_bandwidth_values():
    model, args, kwargs = M.pairnet()
    w = wrap(model, args, kwargs, algorithm="pofo", bandwidth="24GB/s")
    assert w.last_entry.bandwidth == pytest.approx(24e6)
    w.set_memory(1.0, bandwidth=3e9)  # bytes per second
    assert w.last_entry.bandwidth == pytest.approx(3e6)
    w.set_memory(1.0, algorithm="optimal")  # no link for recomputation only
    assert w.last_entry.bandwidth == 0 and w.last_entry.plan.bandwidth == 0
    for bad in ("fast", "24GB", -1, 0, float("nan"), True):
        with pytest.raises((ValueError, remat.InputError)):
            wrap(model, args, kwargs, algorithm="pofo", bandwidth=bad)

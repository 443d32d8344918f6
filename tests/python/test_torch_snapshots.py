"""The graph path's snapshots of the buffers a step mutates (BatchNorm's
statistics): one copy per dtype and device at the step's start, read by
every recomputation, on the plan or off it (a second backward with
retain_graph, a pruned backward), with plain autograd's gradients and
buffers bitwise."""
from __future__ import annotations


import pytest
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

import models as M
from remat.torch._graph.program import Snapshots
from torchkit import (assert_same, copies, limit_at, measured_peak, recomputes, same_step, state,
                      wrap, zero_grads)


def small_resnet() -> nn.Module:
    return M.ResNet(layers=(1, 2, 1, 1), base=8).train()


class Scaled(nn.Module):
    """Layers whose buffer is updated in place and then read: a
    recomputation that read the buffer's current value, not its value at
    the step's start, would compute other activations."""

    def __init__(self, width: int = 16, depth: int = 6) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        for i in range(depth):
            self.register_buffer("scale%d" % i, torch.ones(width))
            self.register_buffer("count%d" % i, torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.layers):
            scale, count = getattr(self, "scale%d" % i), getattr(self, "count%d" % i)
            scale.mul_(1.25)
            count.add_(1)
            x = torch.tanh(lin(x) * scale + count)
        return x


def two_backwards_sum(models, args, seed: int = 5) -> None:
    for m in models:
        zero_grads(m)
        torch.manual_seed(seed)
        loss = m(*args).sum()
        loss.backward(retain_graph=True)
        loss.backward()


def test_snapshots_keep_values_sizes_and_strides():
    torch.manual_seed(0)
    odd = torch.randn(3, 1).as_strided((3, 1), (1, 7))  # contiguous, odd size-1 stride
    items = [("a", torch.randn(5)), ("b", torch.zeros((), dtype=torch.long)),
             ("c", torch.randn(2, 3)), ("d", torch.randn(4, 3).t()), ("e", odd),
             ("f", torch.tensor([1, 2], dtype=torch.int32))]
    before = {n: t.clone() for n, t in items}
    snaps = Snapshots(items)
    assert len(snaps.groups) == 3  # float32, int64, int32; "d" is not contiguous
    for _, t in items:
        t.add_(1)  # the originals move on; the copies do not
    assert len(snaps.keys()) == 4
    for n, t in items:
        got = snaps.get(n)
        assert torch.equal(got, before[n]), n
        assert got.shape == t.shape and got.stride() == t.stride() and got.dtype == t.dtype, n
        assert got.untyped_storage().data_ptr() != t.untyped_storage().data_ptr(), n
        assert snaps.get(n) is got  # made once
    assert "a" in snaps and "z" not in snaps
    one = torch.randn(3)
    was = one.clone()
    alone = Snapshots([("x", one)])  # a group of one tensor is copied too
    one.add_(1)
    assert torch.equal(alone.get("x"), was)


def _clones(model: nn.Module, x: torch.Tensor) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    return sum(e.count for e in prof.key_averages() if e.key == "aten::clone")


def test_store_all_copies_the_buffers_at_once():
    """At memory=1.0 a step copies BatchNorm's statistics in one go per
    dtype, not with a clone per buffer (ResNet-50 has 159)."""
    torch.manual_seed(0)
    model = small_resnet()
    x = torch.randn(2, 3, 32, 32)
    ref, base = copies(model)
    w = wrap(base, (x,), {})
    assert w.last_entry.info["path"] == "graph"
    n_buffers = sum(1 for _ in model.buffers())
    assert n_buffers >= 30
    assert _clones(w, x) <= _clones(ref, x) + 2
    same_step(ref, w, (x,), {})
    assert measured_peak(w, (x,), {}) <= w.last_entry.limit


@pytest.mark.parametrize("at,capture", [
    (None, "graph"), (0.3, "graph"), (None, "modules"), (0.3, "modules")])
def test_batchnorm_second_backward_reads_the_snapshots(at, capture):
    """The second backward (retain_graph) recomputes every stage off the
    plan, after the main run has updated the statistics; at memory=1.0
    (no hooks: autograd keeps what it saves) it is plain autograd's."""
    torch.manual_seed(0)
    model = small_resnet()
    x = torch.randn(2, 3, 32, 32)
    ref, base = copies(model)
    w = wrap(base, (x,), {}, capture=capture)
    assert w.last_entry.info["path"] == capture
    if at is not None:
        limit_at(w, at)
        assert recomputes(w.last_entry.schedule)
    two_backwards_sum([ref, w], (x,))
    assert_same(state(ref), state(w))
    same_step(ref, w, (x,), {})


def test_batchnorm_pruned_backward():
    """backward(inputs=...) to the first layers only, at a recomputing limit."""
    torch.manual_seed(0)
    model = small_resnet()
    x = torch.randn(2, 3, 32, 32)
    ref, base = copies(model)
    w = wrap(base, (x,), {})
    limit_at(w, 0.2)
    for m in (ref, w):
        zero_grads(m)
        torch.manual_seed(3)
        m(x).sum().backward(inputs=[m.conv1.weight, m.bn1.weight])
    assert_same(state(ref), state(w))


@pytest.mark.parametrize("at", [None, 0.0, 0.5])
def test_buffer_read_after_its_update(at):
    """Recomputations, on the plan and in a second backward, read each
    buffer as it was at the step's start, then update and read it as the
    main run did."""
    torch.manual_seed(0)
    model = Scaled()
    x = torch.randn(4, 16)
    ref, base = copies(model)
    w = wrap(base, (x,), {}, capture="graph")
    assert w.last_entry.program.n_stages > 2
    if at is not None:
        limit_at(w, at)
        assert recomputes(w.last_entry.schedule)
    for _ in range(2):
        same_step(ref, w, (x,), {})
    two_backwards_sum([ref, w], (x,))
    assert_same(state(ref), state(w))
    assert int(ref.count0) == 3  # two steps and a forward

"""New input shapes in a training loop (issue 25), on models the other
tests never use: a graph captured once with dynamic dimensions whose later
shapes are derived from its size formulas (no profile), buckets where that
cannot be, the limit per shape (a fraction of the largest input, errors that
name the input change, on_infeasible="fallback"), and the caller's loss
counted in the limit (loss=, or measured on the first step).

No test is timed (the project's rule): what proves that no profile ran is
RematModule.remat_counts; the time a new shape costs is in BENCHMARKS.md
(bench/shapes_bench.py)."""
import random
import warnings

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch import nn

import remat
import remat.torch as rt
from remat.torch import _shapes
from remat.torch._graph.sizes import _compile
from torchkit import copies, fraction_at, limits, limits_of_largest, measured_peak, same_step, \
    step, wrap, zero_grads

VOCAB = 512


def neox(layers=2, width=64, batch=2, seq=64, vocab=VOCAB):
    """A GPT-NeoX (rotary embeddings, parallel attention and MLP) from a config."""
    import transformers
    transformers.logging.set_verbosity_error()
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=2 * width,
                        num_attention_heads=4, vocab_size=vocab, max_position_embeddings=seq,
                        use_cache=False, bos_token_id=0, eos_token_id=0,
                        hidden_dropout=0.1, attention_dropout=0.1)
    torch.manual_seed(0)
    return GPTNeoXForCausalLM(cfg).train(), torch.randint(0, vocab, (batch, seq))


class _Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, h):
        b, s, d = h.shape
        q, k, v = self.qkv(self.norm(h)).view(b, s, 3, 2, d // 2).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + a.transpose(1, 2).reshape(b, s, d)
        return h + self.down(F.gelu(self.up(h)))


class Gate(nn.Module):
    """A language model whose forward reads a value (torch.export cannot
    capture it): it runs on the module path."""

    def __init__(self, d=64, n=4, vocab=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(_Block(d) for _ in range(n))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.emb(ids)
        if h.abs().sum() > 0:  # a branch on a value
            h = h * 0.5
        for blk in self.blocks:
            h = blk(h)
        return self.head(h)


def cut(ids, n):
    return ids[:, :n].contiguous()


def one_step(model, ids, seed=7):
    return step(model, (ids,), {"labels": ids}, seed)


# -- the size formulas and the models fitted to them -----------------------------------------

def test_compiled_formulas_agree_with_sympy():
    """The formulas a new shape evaluates (compiled from sympy, exact
    integers) give sympy's own values."""
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    from torch.utils._sympy.functions import FloorDiv, Max
    exprs = [s0 * s1 * 128 + 4096, 32 * s1 * (s0 - 1) + 32 * s1, Max(64 * s0 * s1, 4 * s1 ** 2),
             FloorDiv(s0 * s1, 3) + s1 ** 2 * s0, sympy.Rational(3, 2) * s0 * s1 * 2]
    rng = random.Random(0)
    for _ in range(200):
        b = {s0: rng.randint(2, 4096), s1: rng.randint(2, 4096)}
        for e in exprs:
            assert _compile(e)(b) == int(e.xreplace(b)), e


def test_overhead_and_time_models():
    # a stage's growth is its fastest-growing tensor's (at least 1): here
    # attention's scores, quadratic in the length, while the largest tensor
    # grows linearly
    linear, scores = 8 * 32 * 64, 8 * 32 * 32
    assert _shapes.growth([3 * linear, 3 * 4 * scores], [linear, scores]) == 12
    assert _shapes.growth([linear // 2], [linear]) == 1
    # temporaries: the tightest of the bounds v * growth over the profiles
    assert _shapes.overhead([(2.0, 1000)]) == 2000
    assert _shapes.overhead([(1.0, 1000)]) == 1000
    assert _shapes.overhead([(3.0, 1000), (12.0, 300)]) == 3000
    assert _shapes.overhead([(3.0, 1000), (6.0, 300)]) == 1800
    assert _shapes.duration([(10, 1.0)], 30) == pytest.approx(3.0)
    assert _shapes.duration([(10, 1.0), (20, 1.5)], 30) == pytest.approx(2.0)


def test_buckets_grow_only_what_changed_from_the_users_own_data():
    ids = torch.arange(2 * 40).view(2, 40)
    mask = torch.ones(2, 40, dtype=torch.long)
    ref = ((2, 64), (2, 64))
    a, k, top = _shapes.bucket_input((ids,), {"attention_mask": mask}, ref)
    assert top == ((2, 64), (2, 64))
    assert a[0].shape == (2, 64) and torch.equal(a[0][:, :40], ids)
    assert torch.equal(a[0][:, 40:], ids[:, :24])  # repeated, not padded
    assert k["attention_mask"].shape == (2, 64) and ids.shape == (2, 40)
    assert [_shapes.rounded(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]


# -- shapes without stalls ------------------------------------------------------------------

def test_eight_lengths_derived_exact_and_within_the_limit():
    """One capture and two profiles in the first call (the first input's,
    and the one that verifies the formulas, at half its length), then every
    new length is derived: no capture or profile runs, each step has bitwise
    the gradients of plain autograd and its measured peak stays within the
    limit."""
    model, ids = neox(seq=64)
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids})
    low, mid, plain = limits(w)
    w.set_memory(mid)
    assert w.last_entry.program.dynamic
    c = w.remat_counts
    assert (c.captures, c.profiles + c.cached, c.derived) == (1, 2, 0), c
    # 64 is the first input's length
    lengths = (48, 40, 64, 33, 57, 20, 31, 50)
    derived = (1, 2, 2, 3, 4, 5, 6, 7)
    for length, n in zip(lengths, derived):
        x = cut(ids, length)
        same_step(ref, w, (x,), {"labels": x})
        assert measured_peak(w, (x,), {"labels": x}) <= w.last_entry.limit, length
        c = w.remat_counts
        assert (c.captures, c.profiles + c.cached, c.derived) == (1, 2, n), (length, c)
        assert ("derived" in w.last_entry.info) == (length != 64)
    assert "verified at" in w.remat_report() and "derived" in w.remat_report()


def test_derived_chain_equals_a_real_profile():
    """What the formulas give for a shape is what profiling it measures:
    sizes exactly, temporaries within their bounds."""
    model, ids = neox(seq=64)
    w = wrap(model, (ids,), {"labels": ids})
    for length in (40, 24):  # verified in the first call; 24 is then profiled to compare
        x = cut(ids, length)
        one_step(w, x)
    ss = w._remat_shapes[next(iter(w._remat_shapes))][0]
    assert ss.trusted and w.remat_counts.derived == 2
    x = cut(ids, 24)
    derived = w.last_entry
    from remat.torch._prepare import profile_on
    from remat.torch._progress import Progress
    real = profile_on(ss.program, w._remat_model, (x,), {"labels": x}, w.remat_config,
                      Progress("", False), {})
    assert _shapes._differences(derived, real) == []
    assert derived.held == real.held
    assert [s["saved_bytes"] for s in derived.chain.stages] == \
        [s["saved_bytes"] for s in real.chain.stages]


def test_a_derivation_that_does_not_verify_profiles_per_bucket(monkeypatch):
    monkeypatch.setattr(_shapes, "OVERHEAD_TOLERANCE", (-1.0, -1))  # nothing verifies
    model, ids = neox(seq=64)
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids})
    for length in (40, 36, 50, 20):
        x = cut(ids, length)
        same_step(ref, w, (x,), {"labels": x})
    c = w.remat_counts
    assert c.derived == 0 and c.bucketed == 4
    # 64 (the first input) and 32 (the failed verification, in the first
    # call); 40..50's bucket is 64's own: no profile; 20 -> its bucket's
    # top, 32
    assert c.profiles + c.cached == 3 and "(2, 32)" in w.last_entry.info["bucket"]
    assert "not verified" in w.remat_report()


def test_module_path_profiles_once_per_bucket():
    torch.manual_seed(0)
    model = Gate()
    ids = torch.randint(0, 128, (2, 64))
    ref, base = copies(model)
    w = wrap(base, (ids,), {})
    assert w.last_entry.info["path"] == "modules"
    w.set_memory(limits(w)[1])  # halfway: shorter inputs need less
    lengths = (40, 33, 64, 20, 17)
    for length in lengths:
        x = cut(ids, length)
        zero_grads(ref)
        zero_grads(w)
        torch.manual_seed(1)
        ref(x).sum().backward()
        torch.manual_seed(1)
        w(x).sum().backward()
        assert all(torch.equal(p.grad, q.grad) for p, q in zip(ref.parameters(),
                                                               w.parameters()))
        zero_grads(w)
        with rt.PeakMeter() as m:
            w(x).sum().backward()
        assert m.peak <= w.last_entry.limit
    c = w.remat_counts
    # 40, 33 and 64 share (2, 64), the first input's; 20 and 17 share (2, 32)
    assert (c.profiles + c.cached, c.bucketed, c.captures) == (2, 4, 1)
    assert "profiled per bucket" in w.remat_report()


# -- limits per shape -------------------------------------------------------------------------

def test_a_fraction_is_of_the_largest_input_prepared():
    model, ids = neox(seq=32)
    big = torch.cat([ids, ids])
    # halfway from the smallest limit to plain autograd's peak, for
    # whichever of the two inputs needs more
    frac = fraction_at(0.5, *(wrap(copies(model)[0], (x,), {"labels": x}) for x in (ids, big)))
    w = wrap(model, (ids,), {"labels": ids}, memory=frac)
    first = w.last_entry
    assert first.limit == int(frac * first.plain_peak)
    one_step(w, big)
    e = w.last_entry
    assert e.plain_peak > first.plain_peak and e.limit == int(frac * e.plain_peak)
    one_step(w, ids)  # the small input is solved again for the larger limit
    assert first.limit == e.limit


def test_an_input_the_limit_cannot_take_names_the_change():
    model, ids = neox(seq=32)
    w = wrap(model, (ids,), {"labels": ids})
    low = limits(w)[0]
    w.set_memory(low)
    big = torch.cat([ids, ids, ids])
    with pytest.raises(remat.InfeasibleError) as e:
        one_step(w, big)
    msg = str(e.value)
    assert "input_ids: shape (2, 32) -> (6, 32)" in msg and "labels: shape" in msg
    assert e.value.min_memory > low and "on_infeasible='fallback'" in msg


def test_on_infeasible_fallback_runs_at_the_smallest_limit_with_one_warning():
    model, ids = neox(seq=32)
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids}, on_infeasible="fallback")
    w.remat_config.on_infeasible = "error"
    low = limits(w)[0]
    w.remat_config.on_infeasible = "fallback"
    w.set_memory(low)
    big = torch.cat([ids, ids, ids])
    with pytest.warns(UserWarning, match=r"input_ids: shape \(2, 32\) -> \(6, 32\).*"
                                         "on_infeasible='fallback'"):
        same_step(ref, w, (big,), {"labels": big})
    e = w.last_entry
    assert e.fallback > low and e.limit == e.fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per input
        peak = measured_peak(w, (big,), {"labels": big})
    assert peak <= e.fallback
    assert "on_infeasible='fallback'" in w.remat_report()


def test_a_shape_four_times_the_profiled_stays_within_its_limit():
    """Profiled at (2, 32) and (2, 16) (the first call), derived at (8, 32):
    4x the batch, which the two profiles do not vary (their line in the
    length, where attention's scores grow with its square, put the layers'
    forward temporaries low). At every limit of the derived shape (the
    smallest, halfway, plain), bitwise gradients and the measured peak
    within the limit."""
    model, ids = neox(batch=8, seq=32)
    ref, base = copies(model)
    first, big = ids[:2].contiguous(), ids
    w = wrap(base, (first,), {"labels": first}, memory=1 << 40)  # bytes: any shape fits
    same_step(ref, w, (big,), {"labels": big})
    c = w.remat_counts
    assert (c.captures, c.profiles + c.cached, c.derived) == (1, 2, 1), c
    assert "derived" in w.last_entry.info
    for lim in limits_of_largest(w):
        w.set_memory(lim)
        same_step(ref, w, (big,), {"labels": big})
        peak = measured_peak(w, (big,), {"labels": big})
        assert peak <= lim, "measured %d over the limit %d" % (peak, lim)


def test_derived_shapes_keep_their_partial_saves():
    """A derived chain has the profiled chain's partial saves (_saves), each
    an upper bound of what a real profile at that shape measures."""
    model, ids = neox(seq=64)
    short = cut(ids, 16)
    w = wrap(model, (short,), {"labels": short})
    one_step(w, ids)
    derived = w.last_entry
    assert "derived" in derived.info
    from remat.torch._prepare import profile_on
    from remat.torch._progress import Progress
    ss = w._remat_shapes[next(iter(w._remat_shapes))][0]
    real = profile_on(ss.program, w._remat_model, (ids,), {"labels": ids}, w.remat_config,
                      Progress("", False), {})
    n = 0
    for x, y in zip(derived.chain.stages, real.chain.stages):
        got, want = x.get("options") or [], y.get("options") or []
        assert [o.get("name") for o in got] == [o.get("name") for o in want], y["name"]
        for o, r in zip(got, want):
            n += 1
            assert o["saved_bytes"] >= r["saved_bytes"], (y["name"], o, r)
    assert n > 0
    assert _shapes._differences(derived, real) == []


def test_on_new_input_error_names_the_change():
    model, ids = neox(seq=32)
    w = wrap(model, (ids,), {"labels": ids}, on_new_input="error")
    x = cut(ids, 16)
    with pytest.raises(rt.InputChanged, match=r"input_ids: shape \(2, 32\) -> \(2, 16\)"):
        one_step(w, x)
    with pytest.raises(rt.InputChanged, match="autocast off -> cpu bfloat16"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            one_step(w, ids)


# -- the caller's loss ----------------------------------------------------------------------

LOSSES = {
    "cross_entropy": lambda out, y: F.cross_entropy(out.logits.view(-1, VOCAB), y.view(-1)),
    "float_pow": lambda out, y: out.logits.float().pow(2).mean(),
}


@pytest.mark.parametrize("name,metered", [("cross_entropy", False), ("float_pow", False),
                                          ("cross_entropy", True)])
def test_a_loss_outside_the_model_stays_within_the_limit_from_the_second_step(name, metered):
    """The first step measures what the loss takes between the model's
    forward and its backward; from the second step on, the step as the
    user writes it (model, loss, backward) stays within the limit.
    metered: the first step inside the user's own PeakMeter, whose profiler
    the measure then rides."""
    fn = LOSSES[name]
    model, ids = neox(width=32, seq=64)
    y = torch.randint(0, VOCAB, ids.shape)
    ref, base = copies(model)
    w = wrap(base, (ids,), {})
    low, mid, plain = limits(w)
    w.set_memory(2 * plain)  # room for any loss while it is measured

    def user_step(m):
        torch.manual_seed(3)
        loss = fn(m(ids), y)
        loss.backward()
        return loss.detach()

    zero_grads(w)
    if metered:
        with rt.PeakMeter() as first:
            user_step(w)
        assert first.peak > 0
    else:
        user_step(w)  # measured by remat's own meter
    w(ids)  # the next call ends the measure and lowers the limit
    assert w._remat_caller is not None and w._remat_caller[0] > 0
    extra = w._caller_bytes(w.last_entry)
    # the model's share halfway between its smallest limit and plain
    # autograd, the loss's share what the first step measured
    w.set_memory(mid + extra)
    assert w.last_entry.limit == mid
    for m in (ref, w):
        zero_grads(m)
    assert torch.equal(user_step(ref), user_step(w))
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(ref.parameters(), w.parameters()))
    zero_grads(w)
    with rt.PeakMeter() as meter:
        user_step(w)
    assert meter.peak <= mid + extra  # the limit the user gave
    assert "outside the model took" in w.remat_report()


def test_a_loss_given_to_checkpoint_is_inside_the_limit_from_the_first_step():
    """loss=fn: the wrapped call takes the targets as loss_args and returns
    fn(output, *loss_args), captured with the model (the graph's last
    stage), so the first step is within the limit already."""
    model, ids = neox(width=32, seq=64)
    y = torch.randint(0, VOCAB, ids.shape)
    ref, base = copies(model)
    fn = LOSSES["cross_entropy"]
    w = wrap(base, (ids,), {"loss_args": (y,)}, loss=fn)
    w.set_memory(limits(w)[0])
    zero_grads(w)
    with rt.PeakMeter() as meter:
        torch.manual_seed(3)
        loss = w(ids, loss_args=(y,))
        loss.backward()
    assert loss.dim() == 0 and meter.peak <= w.last_entry.limit
    zero_grads(ref)
    torch.manual_seed(3)
    fn(ref(ids), y).backward()
    zero_grads(w)
    torch.manual_seed(3)
    w(ids, loss_args=(y,)).backward()
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(ref.parameters(), w.parameters()))
    assert w._remat_caller is None  # nothing to measure outside the model
    with torch.no_grad():
        torch.manual_seed(4)
        a = w(ids, loss_args=(y,))
        torch.manual_seed(4)
        assert torch.equal(a, fn(ref(ids), y))
    assert list(w.state_dict()) == list(ref.state_dict())

"""remat.torch.checkpoint on the models the issue names: bitwise-equal
gradients (and BatchNorm statistics, dropout masks), and at three limits from
the smallest feasible to plain autograd's peak, a measured peak within the
limit and within 2% of the prediction (5% on the module path, whose
epilogue is calibrated from whole steps)."""
import os

import pytest
import torch

import models as M
import remat
import remat.torch as rt
from remat.torch._tensors import dense_bytes
from torchkit import copies, hookless, limit_at, limits, measured_peak, \
    recomputes, same_step, state, step, wrap

PLAIN = os.environ.get("REMAT_TEST_KERNELS") == "plain"
# On ATen's plain kernels a convolution's backward is the peak (U-Net: its
# im2col workspace is 1.2 MB), and a convolution's output that only the next
# stage's BatchNorm saves was counted through it: U-Net was predicted 4.4 %
# high, ResNet-50 at its smallest limit 1.9-2.3 %. B is now measured with the
# outputs let go at the stage's last unpack (U-Net 0.3 % here); those models
# may still be predicted up to 5 % high there, on other CPUs' kernels, and at
# most 2 % low everywhere.
HIGH = 0.05 if PLAIN else 0.0
CONV_BN = {"resnet50", "unet", "densenet121"}
MODELS = ["gpt2", "llama", "bert", "t5", pytest.param("vit", marks=pytest.mark.kernels),
          pytest.param("resnet50", marks=pytest.mark.kernels),
          pytest.param("densenet121", marks=pytest.mark.kernels),
          pytest.param("unet", marks=pytest.mark.kernels), "pairnet", "llama/modules"]


@pytest.mark.parametrize("name", MODELS)
def test_model_at_three_limits(name):
    """name/modules: the module path (decoder layers as stages), forced."""
    torch.manual_seed(0)
    model_name, _, path = name.partition("/")
    model, args, kwargs = M.ALL[model_name]()
    ref, base = copies(model)
    w = wrap(base, args, kwargs, capture=path or "auto")
    info = w.last_entry.info
    assert info["path"] == (path or "graph"), info["why"]
    for limit in limits(w):
        w.set_memory(limit)
        e = w.last_entry
        same_step(ref, w, args, kwargs)
        peak = measured_peak(w, args, kwargs)
        measured_peak(ref, args, kwargs)  # the same number of steps: BatchNorm stays in step
        assert peak <= e.limit, "%s: measured %d > limit %d" % (name, peak, e.limit)
        # 5 %: the module path's epilogue is calibrated from whole steps. T5's
        # encoder output is its final norm's output, counted twice while both
        # are alive (docs/python.md, "Known gaps"): its bytes more, never less.
        tol = 0.05 if info["path"] == "modules" else 0.02
        twice = sum(dense_bytes([a.meta["val"]]) for a in e.program.held_acts) \
            if model_name == "t5" else 0
        high = max(tol, HIGH) if model_name in CONV_BN else tol
        assert -tol * e.predicted_peak <= e.predicted_peak - peak <= \
            high * e.predicted_peak + twice, \
            "%s: measured %d, predicted %d" % (name, peak, e.predicted_peak)


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_plain_autograd_step_predicted_as_such(name):
    """memory=1.0 runs plain autograd, without hooks: its prediction keeps
    no RNG state (BERT draws dropout masks) and frees a stage's output that
    the stage saves none of after the next stage's backward. Within 2 % and
    at or above the measured peak (both were 2.5 % and 1.3 % high)."""
    torch.manual_seed(0)
    model, args, kwargs = M.ALL[name]()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    w.set_memory(1.0)
    e = w.last_entry
    assert hookless(w)
    assert e.chain.meta["profile"]["frees_out"]
    same_step(ref, w, args, kwargs)
    peak = measured_peak(w, args, kwargs)
    assert peak <= e.predicted_peak <= e.limit
    assert e.predicted_peak - peak <= 0.02 * e.predicted_peak, (peak, e.predicted_peak)


def test_tied_embedding_gradient_held_in_the_backward_only():
    """GPT-2's head reuses the embedding: its gradient waits in autograd's
    buffer from the head's backward to the embedding's, not in the forward.
    Counting it for the whole step over-predicted every peak by its size."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    e = w.last_entry
    wte = base.transformer.wte.weight
    assert [b for b, _, _ in e.backward_held] == [wte.numel() * wte.element_size()]
    _, last, first = e.backward_held[0]
    assert last > first
    # (just under plain autograd's memory: the executor's hooks run, whose
    # store the chain models exactly; at 1.0 the step runs as plain autograd)
    limit_at(w, 0.98)
    assert not hookless(w)
    same_step(ref, w, args, kwargs)
    peak = measured_peak(w, args, kwargs)
    assert abs(peak - w.last_entry.predicted_peak) <= 0.01 * peak
    # The smallest limit is never above the chain's smallest budget plus
    # everything held (the gradient counted for the whole step), and is met as
    # measured. (With each op's own overhead in the chain, the tightest
    # schedule's peak falls in the head's backward, where the gradient lives:
    # how much the backward-only count saves there depends on the model.)
    low = limits(w)[0]
    assert low <= remat.min_memory(e.chain) + e.held
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    assert measured_peak(w, args, kwargs) <= low


@pytest.mark.kernels
def test_unet_skips_leave_little_to_save():
    """No boundary falls inside a long skip connection, so the smallest
    feasible memory stays close to plain autograd's."""
    model, args, kwargs = M.unet()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    low = limits(w)[0]
    assert low > 0.6 * w.last_entry.plain_peak
    same_step(ref, w, args, kwargs)


def test_pair_block_has_a_two_tensor_boundary():
    model, args, kwargs = M.pairnet()
    w = wrap(model, args, kwargs)
    assert any(len(st.boundary) == 2 for st in w.last_entry.program.stages)


def test_last_stage_recomputed_keeps_no_second_output():
    """revolve at its smallest limit recomputes GPT-2's head and loss after
    the output stage's backward; the logits it makes again are dropped at
    once, as the chain (which counts the model's outputs once) predicts."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(vocab=4096)  # logits (2 MiB) a large part of the peak
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    low = limits(w, "revolve")[0]
    w.set_memory(low, algorithm="revolve")
    e = w.last_entry
    n = e.chain.n
    ops = list(e.schedule.ops)
    assert ops.index("Fall %d" % (n - 1), ops.index("B %d" % n)) > 0
    same_step(ref, w, args, kwargs)
    peak = measured_peak(w, args, kwargs)
    assert peak <= e.limit
    assert abs(peak - e.predicted_peak) <= 0.01 * peak


@pytest.mark.parametrize("name,gqa", [("gpt2", 0), ("llama", 3)])
def test_attention_runs_as_eager_runs(name, gqa):
    """Traced, Hugging Face builds the causal mask as a tensor, which SDPA
    converts to float and saves in every layer, and with a mask Llama repeats
    its key/value heads; eager passes is_causal and enable_gqa. The graph
    calls SDPA as eager does, so with everything stored the forward leaves
    what plain autograd's does (without dropout, whose RNG states remat
    keeps), and gradients are bitwise eager's."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(dropout=0.0) if name == "gpt2" else M.llama()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    assert w.last_entry.info["path"] == "graph", w.last_entry.info["why"]
    assert w.last_entry.program.causal_masks == 3
    assert w.last_entry.program.gqa_calls == gqa
    w.set_memory(1.0)
    same_step(ref, w, args, kwargs)

    def held_after_forward(m):
        with rt.PeakMeter() as meter:
            out = m(*args, **kwargs)
            meter.mark()
            out.loss.backward()
            del out
        return meter.mark_levels[0]
    assert held_after_forward(w) == held_after_forward(ref)


def test_encoder_output_held_so_the_decoder_is_cut_into_layers():
    """Every T5 decoder layer's cross-attention reads the encoder's output:
    passed from stage to stage, it kept the whole decoder in one stage (the
    smallest limit was half of plain autograd's peak). Held for the step, it
    lets a boundary fall after each decoder sub-layer; its gradient, summed
    over the layers, is counted from the last decoder stage's backward to
    the encoder's. T5's position bias (made from a parameter in the first
    layer, read by the others) requires grad too: recomputing its maker
    makes it again, so the recomputation saves what the forward saved."""
    torch.manual_seed(0)
    model, args, kwargs = M.t5()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    e = w.last_entry
    prog = e.program
    assert len(prog.held_acts) == 1
    (enc,) = prog.held_acts
    maker = prog.stage_of[enc]
    readers = {prog.stage_of[u] for u in enc.users if u in prog.stage_of}
    assert len(readers) == 3 and min(readers) > maker + 1
    v = enc.meta["val"]
    assert (v.numel() * v.element_size(), max(readers), maker) in e.backward_held
    # the bias requires grad, so SDPA runs its math kernel in the forward,
    # and recomputations without grad are held to it (else bits differ)
    assert any(st.sdpa_math for st in prog.stages)
    decoder = [s for s in e.chain.stages if s["name"].partition(":")[2].startswith("decoder.block")]
    assert len(decoder) >= 6
    low = limits(w)[0]
    assert low < 0.4 * e.plain_peak
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    peak = measured_peak(w, args, kwargs)
    assert peak <= w.last_entry.limit
    # With dropout 0 the encoder's output is its final norm's output, a
    # boundary value too: counted twice while both are alive (docs/python.md,
    # "Known gaps"), never less than measured.
    over = w.last_entry.predicted_peak - peak
    assert 0 <= over <= 0.02 * peak + v.numel() * v.element_size()


def test_optimal_takes_the_fastest_schedule_that_fits_with_a_tied_gradient():
    """The solver cannot see memory held in the backward only (a tied
    embedding's gradient, 2 MiB here): its optimum at the chain's budget
    may not fit by the op-by-op prediction where sequential's or revolve's
    does. optimal takes the fastest of the three that fits, so it is never
    slower, and its smallest limit is never above theirs (it was 14 %
    above revolve's on this model)."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=4, vocab=4096)
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    assert w.last_entry.backward_held
    low = {a: limits(w, a)[0] for a in ("optimal", "sequential", "revolve")}
    assert low["optimal"] <= min(low["sequential"], low["revolve"])
    for limit in (low["optimal"], int(low["optimal"] * 1.1), int(low["optimal"] * 1.3)):
        w.set_memory(limit, algorithm="optimal")  # (the algorithm is kept from call to call)
        best = w.last_entry.schedule.time
        for other in ("sequential", "revolve"):
            try:
                w.set_memory(limit, algorithm=other)
            except remat.InfeasibleError:
                continue
            assert best <= w.last_entry.schedule.time
    w.set_memory(low["optimal"], algorithm="optimal")
    same_step(ref, w, args, kwargs)
    assert measured_peak(w, args, kwargs) <= low["optimal"]


@pytest.mark.kernels
def test_whisper_encoder_output_made_again_by_its_stage():
    """Whisper's encoder ends in a norm whose output only the decoder reads
    (held): the recomputation of its stage returns a[j] without it, so it
    was left out as dead code, and the norm's saved tensors were missing
    ("recomputing stage 11 saved 0 tensors, the forward saved 3", on the
    schedules that recompute that stage keeping its tensors). The output
    made again had that recomputation's graph, which held it back through
    the saved-tensor hooks: a cycle the garbage collector never frees, so
    each step leaked it (66 KB here) and limits were exceeded by up to 3 %.
    Its head shares the decoder's embedding: the embedding's backward adds
    its gradient to the head's out of place, one more table (256 KB) than
    the profile of the embedding's stage alone saw (18 % over the limit)."""
    torch.manual_seed(0)
    model, args, kwargs = M.whisper(vocab=512)
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    prog = w.last_entry.program
    (enc,) = prog.held_acts
    maker = prog.stage_of[enc]
    assert enc.name in {n.name for n in prog.stages[maker - 1].gm_re.graph.nodes}
    remade = 0
    for algorithm in ("optimal", "revolve", "sequential"):
        for limit in limits(w, algorithm)[:2]:
            w.set_memory(limit, algorithm=algorithm)
            ops = w.last_entry.schedule.ops
            remade += "Fall %d" % maker in ops[ops.index("B %d" % (maker + 1)):]
            same_step(ref, w, args, kwargs)
            assert measured_peak(w, args, kwargs) <= w.last_entry.predicted_peak
            with rt.PeakMeter() as meter:
                for _ in range(2):
                    step(w, args, kwargs)
                    meter.mark()
            assert meter.mark_levels == [0, 0]  # nothing outlives a step
    assert remade  # some schedule makes the encoder's output again


def test_use_cache_config_trains_without_the_cache():
    """Causal LMs' configs ask for a key/value cache by default. remat trains
    with use_cache=False, as Hugging Face's gradient checkpointing does: with
    the cache, export failed on the cache object in the output, and the
    module path's profile ran each layer again on a cache that kept growing
    (OPT crashed there)."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2()
    model.config.use_cache = True
    ref, base = copies(model)
    with pytest.warns(UserWarning, match="use_cache=False"):
        w = rt.checkpoint(base, args, kwargs, memory=1.0, cache=False, repeat=1, progress=False)
    assert w.last_entry.info["path"] == "graph"
    limit_at(w, 0.3)
    same_step(ref, w, args, kwargs)
    assert w(*args, **kwargs).past_key_values is None


@pytest.mark.kernels
def test_compiled_stages():
    """compile=True runs each stage's graph compiled by torch.compile and
    profiles it compiled: the step stays within the limit, the prediction
    holds, and gradients match eager to rounding (other kernels)."""
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=2, width=64, seq=32, dropout=0.0)
    ref, base = copies(model)
    w = wrap(base, args, kwargs, compile=True)
    limit_at(w, 0.3)
    e = w.last_entry
    assert recomputes(e.schedule)
    assert e.info["path"] == "graph"
    # every stage but the embedding (it makes a held value) was compiled; those
    # not made faster so run eager again, and the profile says which
    eager = e.chain.meta["profile"].get("eager_stages", [])
    assert e.program.compiled + len(eager) >= len(e.program.stages) - 1
    assert not set(eager) & set(e.program.compiled_stages())
    l0, l1 = step(ref, args, kwargs), step(w, args, kwargs)
    assert torch.allclose(l0, l1, rtol=1e-5)
    a, b = state(ref), state(w)
    assert all(torch.allclose(a[k], b[k], rtol=1e-3, atol=1e-5) for k in a)
    peak = measured_peak(w, args, kwargs)
    assert peak <= e.limit
    assert abs(peak - e.predicted_peak) <= 0.1 * e.predicted_peak


def test_compiled_stages_slower_than_eager_run_eager():
    """compile=True keeps a stage compiled only when its profile is faster
    than eager's."""
    from remat.torch._prepare import faster_eager

    def st(f, b):
        return {"fwd_time": f, "bwd_time": b}
    compiled = [st(1.0, 2.0), st(4.0, 8.0), st(1.0, 1.0), st(9.0, 9.0), st(0.0, 0.0)]
    eager = [st(2.0, 2.0), st(4.0, 7.0), st(1.0, 1.04), st(1.0, 1.0), st(0.0, 0.0)]
    # 3 < 4 and 2 < 2.04 stay compiled; 12 > 11 and a tie run eager; stage 3
    # is not a candidate (it was never compiled)
    assert faster_eager(compiled, eager, [0, 1, 2, 4]) == [1, 4]


@pytest.mark.kernels
def test_compiled_stage_choice_is_cached(tmp_path, monkeypatch):
    """The stages that run eager under compile=True are part of the cached
    profile: a second wrap reads them instead of profiling again. (Every
    compiled stage runs eager here: no compiled stage can be faster than
    0 x eager. A stage that makes a held value is never compiled: the
    embedding's, and under the dynamic export the one making what comes
    from the input's sizes alone, the causal mask.)"""
    import remat.torch._prepare as P
    from remat.torch._graph.held import registers_held
    monkeypatch.setattr(P, "COMPILED_GAIN", 0.0)
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=1, width=32, seq=16, dropout=0.0)
    ref, a = copies(model)
    _, b = copies(model)
    w1 = wrap(a, args, kwargs, compile=True, cache=str(tmp_path))
    w2 = wrap(b, args, kwargs, compile=True, cache=str(tmp_path))
    assert w1.last_entry.info["cached"] is None and w2.last_entry.info["cached"]
    eager = w1.last_entry.chain.meta["profile"]["eager_stages"]
    stages = w1.last_entry.program.stages
    makers = [i for i, st in enumerate(stages) if registers_held(st.gm)]
    assert makers and sorted(eager + makers) == list(range(len(stages)))
    for w in (w1, w2):
        assert w.last_entry.program.compiled == 0
        assert w.last_entry.program.compiled_stages() == []
    same_step(ref, w2, args, kwargs)  # eager stages: bitwise as plain autograd

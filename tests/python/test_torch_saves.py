"""Issue 24 in the PyTorch front-end: each op's own overhead in the chain,
the smallest limit an InfeasibleError names (accepted and met), partial
saves (measured, chosen, carried out bitwise), and finer cuts (a running
auxiliary loss, a small embedding read after a whole tower).

Limits come from each model's own profile (torchkit.limits), never fixed
fractions; memory is measured by PeakMeter (the profiler's allocation
events), not by remat's bookkeeping."""
import warnings

import pytest
import torch

import remat
import models as M
from remat.torch._saves import SAVES
from torchkit import bounds, copies, measured_peak, same_step, wrap, zero_grads


def _model(name, **kw):
    torch.manual_seed(0)
    fn = M.ALL.get(name) or M.ISSUE24[name]
    m, args, kwargs = fn(**kw)
    ref, mine = copies(m)
    return ref, wrap(mine, args, kwargs), args, kwargs


def _smallest(w):
    """The smallest limit an InfeasibleError names for optimal."""
    low, _ = bounds(w)
    assert 1 < low
    return low


def _use(w, ops):
    """Runs the model by a schedule given as op texts (checked by libremat)."""
    e = w.last_entry
    sched = remat.Schedule.from_ops(ops)
    sim = remat.simulate(e.chain, sched)
    assert sim.valid, sim.reason
    e.schedule, e.plan = sched, remat.plan(e.chain, sched)
    e.predicted_peak = e.predict(sched)
    e.limit = e.predicted_peak


def _same_step(ref, w, args, kwargs):
    """torchkit.same_step from the same buffers (a measured step of w alone
    moved its BatchNorm statistics)."""
    with torch.no_grad():
        for b, r in zip(w.buffers(), ref.buffers()):
            b.copy_(r)
    same_step(ref, w, args, kwargs)


# The step's reserve for small tensors no stage measures (_measure.step_reserve:
# 4 KiB and 64 bytes per operator, 20 to 40 KB here) is in every prediction;
# a step may not use it, which on these sub-MiB models is up to 3% of the peak.
RESERVE_SLACK = 48 << 10


def _met(w, args, kwargs, limit, below=0.02, over=0.005):
    """The measured peak of a step is at or under `limit`, and under the
    prediction by at most `below` of it (or the step's reserve), over it by
    at most `over`."""
    e = w.last_entry
    peak = measured_peak(w, args, kwargs)
    assert peak <= limit, "measured %d over the limit %d" % (peak, limit)
    slack = max(e.predicted_peak * below, RESERVE_SLACK)
    assert e.predicted_peak - slack <= peak <= e.predicted_peak * (1 + over), \
        "measured %d, predicted %d" % (peak, e.predicted_peak)
    return peak


def _hf_checkpointing_peak(name):
    """Hugging Face's per-layer checkpointing (non-reentrant), measured."""
    torch.manual_seed(0)
    fn = M.ALL.get(name) or M.ISSUE24[name]
    m, args, kwargs = fn()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return measured_peak(m, args, kwargs)


# -- each op's own overhead; the smallest limit ------------------------------------------

def test_each_op_own_overhead():
    """The chain carries Fall's temporary memory apart from Fn's: an
    attention stage keeps its intermediates as temporaries in Fn and as
    saved tensors in Fall, so Fall's is smaller there."""
    _, w, _, _ = _model("gpt2")
    stages = w.last_entry.chain.stages[:-1]
    assert all("fall_overhead" in st for st in stages)
    assert any(st["fall_overhead"] < st["fwd_overhead"] for st in stages)
    assert "fall_overheads" not in w.last_entry.chain.meta["profile"]


@pytest.mark.parametrize("name", ["gpt2", "t5", "moestack", "neox"])
def test_smallest_limit_accepted_and_met(name):
    """The limit an InfeasibleError names is accepted by set_memory, gives
    bitwise plain autograd's gradients, and is met by the measured peak
    (GPT-2 has a tied embedding, T5 a position bias that requires grad:
    both hold memory in the backward only)."""
    ref, w, args, kwargs = _model(name)
    low = _smallest(w)
    w.set_memory(low)
    assert w.last_entry.predicted_peak <= low
    same_step(ref, w, args, kwargs)
    _met(w, args, kwargs, low)
    with pytest.raises(remat.InfeasibleError):
        w.set_memory(low - 1)


# -- partial saves -----------------------------------------------------------------------

def test_options_measured():
    """Every stage that saves more than its output has the partial saves of
    SAVES, in order; "input" keeps a[i] only, "matmuls" at most the full
    save; B takes longer when it makes again what was not kept."""
    _, w, _, _ = _model("gpt2")
    chain = w.last_entry.chain
    with_opts = [st for st in chain.stages if st.get("options")]
    assert with_opts
    for st in chain.stages:
        opts = st.get("options", [])
        if st["saved_bytes"] > st["out_bytes"]:
            assert [o["name"] for o in opts] == list(SAVES), st["name"]
        for o in opts:
            assert st["out_bytes"] <= o["saved_bytes"] <= st["saved_bytes"]
        if opts:
            assert opts[1]["saved_bytes"] == st["out_bytes"]
    # attention and MLP stages keep their matmul outputs: between the two
    assert any(st["out_bytes"] < st["options"][0]["saved_bytes"] < st["saved_bytes"]
               for st in with_opts)



def test_no_partial_save_at_plain_memory():
    """A partial save's B runs the full save's backward and makes again what
    the save did not keep, so its time is never below the full save's (one
    measured below it is noise: Llama's "input" save was, and the solver
    took it at plain autograd's memory, where everything fits)."""
    _, w, _, _ = _model("llama")
    e = w.last_entry
    for st in e.chain.stages:
        for o in st.get("options", []):
            assert o["bwd_time"] >= st["bwd_time"], (st["name"], o["name"])
    w.set_memory(1.0)
    assert not [op for op in w.last_entry.schedule.ops if "/" in op]

def _store_all(chain, k):
    """Every stage Fall'd with partial save k (0: the full save) where it has one."""
    n = chain.n
    return ["Fall %d%s" % (i, "/%d" % k if k and chain.stages[i - 1].get("options") else "")
            for i in range(1, n + 1)] + ["B %d" % i for i in range(n, 0, -1)]


def _recompute_all(chain, k):
    """Every input kept in the forward, every stage made again with partial
    save k just before its backward (the recomputation path of the executor)."""
    n = chain.n
    part = ["Fall %d%s" % (i, "/%d" % k if k and chain.stages[i - 1].get("options") else "")
            for i in range(1, n)]
    ops = ["Fck %d" % i for i in range(1, n)] + ["Fall %d" % n, "B %d" % n]
    for i in range(n - 1, 0, -1):
        ops += [part[i - 1], "B %d" % i]
    return ops


@pytest.mark.parametrize("name", ["gpt2", "resnet50", "moestack", "mixtral"])
def test_every_option_bitwise(name):
    """Each partial save, made in the model's forward and in a
    recomputation: gradients, losses and buffers bitwise those of plain
    autograd (dropout, BatchNorm statistics, the module path's blocks); the
    measured peak at most the prediction, and close under it."""
    ref, w, args, kwargs = _model(name)
    chain = w.last_entry.chain
    assert any(st.get("options") for st in chain.stages)
    # Mixtral on the module path: a recomputing schedule measures 0.8% (7 KB)
    # over its prediction with full saves only as well, and the "matmuls"
    # save's B is measured 13% above what the executor then uses (not yet
    # explained; safe, not tight). A partial save's B is floored at the full
    # save's (_measure): GPT-2's then predicts up to 3% above what it measures.
    over, below = (0.01, 0.15) if name == "mixtral" else (0.005, 0.05)
    for k in range(len(SAVES) + 1):
        for ops in (_store_all(chain, k), _recompute_all(chain, k)):
            _use(w, ops)
            _same_step(ref, w, args, kwargs)
            _met(w, args, kwargs, w.last_entry.predicted_peak * (1 + over),
                 below if k else 0.02, over)


def test_matmuls_replayed_not_recomputed():
    """B of a "matmuls" save makes again the element-wise ops only: the
    matmul outputs it kept are replayed (no mm runs in the backward's
    recomputation), and the values are bitwise the forward's."""
    ref, w, args, kwargs = _model("gpt2")
    chain = w.last_entry.chain
    _use(w, _store_all(chain, 1))
    # the backward's own matmuls (gradients) run; none for the recomputation:
    # as many as plain autograd's backward has
    n_mm, loss = _backward_matmuls(w, args, kwargs)
    n_ref, loss_ref = _backward_matmuls(ref, args, kwargs)
    assert n_mm == n_ref
    assert torch.equal(loss, loss_ref)


def _backward_matmuls(model, args, kwargs):
    """(the mm, addmm and bmm calls of one backward of model, its
    recomputations included; the loss)."""
    calls = []

    class Count(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))
    zero_grads(model)
    torch.manual_seed(7)
    out = model(*args, **kwargs)
    with Count():
        out.loss.backward()
    mm = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
          torch.ops.aten.bmm.default}
    return sum(1 for f in calls if f in mm), out.loss.detach()


def test_options_chosen():
    """The solver uses partial saves: with them the chain's smallest limit
    is at most that of the same chain without them, and when recomputing
    part of a stage costs less than its whole forward (as on a GPU, where
    element-wise ops are almost free) some limit between the smallest and
    plain autograd's peak gets a schedule with one. The measured bytes are
    kept; the times are set (on this small model, Python's overhead per
    recomputed op can make every option slower than a whole recomputation,
    and which one wins is then the CPU's choice)."""
    _, w, _, _ = _model("gpt2")
    chain = w.last_entry.chain
    bare = remat.Chain([{k: v for k, v in st.items() if k != "options"} for st in chain.stages],
                       chain.input_bytes, chain.input_grad_bytes, time_unit=chain.time_unit)
    assert remat.min_memory(chain, "optimal") <= remat.min_memory(bare, "optimal")

    def timed(st):
        st = dict(st, fwd_time=1.0, bwd_time=2.0)
        if "stop_time" in st:
            st["stop_time"] = 1.0
        if "options" in st:
            st["options"] = [dict(o, bwd_time=2.5) for o in st["options"]]
        return st

    fixed = remat.Chain([timed(st) for st in chain.stages],
                        chain.input_bytes, chain.input_grad_bytes, time_unit=chain.time_unit)
    low, top = remat.min_memory(fixed, "optimal"), remat.store_all_cost(fixed)[0]
    used = []
    for i in range(9):
        sched = remat.solve(fixed, low + (top - low) * i // 8)
        assert remat.simulate(fixed, sched).valid
        used += [op for op in sched.ops if "/" in op]
    assert used


# -- finer cuts --------------------------------------------------------------------------

def test_aux_loss_one_stage_per_block():
    """A stack of blocks threading (hidden, aux): the running auxiliary loss
    is small, so it crosses block boundaries, and each block is a stage (it
    was one stage for the whole stack)."""
    ref, w, args, kwargs = _model("moestack")
    e = w.last_entry
    names = e.program.stage_names()
    blocks = len(w.blocks)
    for b in range(1, blocks):
        assert any(n.endswith("blocks.%d" % b) for n in names), names
    crossing = [b for st in e.program.stages for b in st.boundary
                if e.program.facts[b].outputs[0][1] <= 8]
    assert len(crossing) >= blocks - 1  # the scalar crosses each block's end
    low = _smallest(w)
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    _met(w, args, kwargs, low)


@pytest.mark.xfail(strict=True, reason="with the small image embedding held, the step "
                   "measured 2.6% (7 KB) over the smallest limit: CLIP as one chain "
                   "measures about 7 KB over the prediction in its vision tower's "
                   "recomputations with or without held values (cause open)")
def test_small_embedding_held(monkeypatch):
    """CLIP as one chain (its towers not joined: remat.torch._join is kept
    out of _prepare.SHAPES; with it, each tower is a chain of its own and
    nothing crosses the other): the image embedding (batch x projection) is
    read after the whole text tower; held for the step, it no longer joins
    the text layers into one stage."""
    from remat.torch import _prepare
    from remat.torch._graph import cut
    monkeypatch.setattr(cut, "SMALL_HELD", 32)
    monkeypatch.setattr(_prepare, "SHAPES", [])
    ref, w, args, kwargs = _model("clip")
    e = w.last_entry
    names = e.program.stage_names()
    assert sum("text_model.encoder.layers" in n for n in names) >= 2, names
    assert e.program.held_acts
    low = _smallest(w)
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    _met(w, args, kwargs, low)


def test_parallel_residual_per_layer():
    """GPT-NeoX's parallel residual reads the layer's input at its end, so a
    cut between attention and MLP would carry the input a second time
    (counted twice): each layer is one stage, the partial saves split it
    instead."""
    _, w, _, _ = _model("neox")
    e = w.last_entry
    names = e.program.stage_names()
    layers = len(w.gpt_neox.layers)
    for i in range(1, layers):
        assert sum(n.endswith("layers.%d" % i) for n in names) == 1, names
    assert e.program.cut_reasons["shared with previous"] > 0


# -- the issue's table: never above a peer -----------------------------------------------

def _above(name, gap):
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=(
        "remat's smallest limit is still %s above Hugging Face checkpointing's measured "
        "peak here (issue 24, open)" % gap)))


@pytest.mark.parametrize("name", ["neox", "clip", "mixtral", "qwen2moe", _above("mamba", "6%")])
def test_not_above_hf_checkpointing(name):
    """remat's smallest accepted limit is at or below the measured peak of
    Hugging Face's per-layer checkpointing (non-reentrant), and met. (CLIP:
    its two towers joined, remat.torch._join, each a chain of its own.)"""
    ref, w, args, kwargs = _model(name)
    low = _smallest(w)
    hf = _hf_checkpointing_peak(name)
    assert low <= hf, "remat's smallest limit %d, HF checkpointing measured %d" % (low, hf)
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    _met(w, args, kwargs, low)


def test_module_path_options():
    """On the module path (capture="modules"), blocks get partial saves too
    and the executor carries them out bitwise."""
    torch.manual_seed(0)
    m, args, kwargs = M.gpt2()
    ref, mine = copies(m)
    w = wrap(mine, args, kwargs, capture="modules")
    chain = w.last_entry.chain
    assert w.last_entry.info["path"] == "modules"
    assert any(st.get("options") for st in chain.stages)
    for k in (1, 2):
        _use(w, _recompute_all(chain, k))
        same_step(ref, w, args, kwargs)


# -- early stop --------------------------------------------------------------------------

@pytest.mark.parametrize("capture", ["auto", "modules"])
def test_recomputation_stops_early(monkeypatch, capture):
    """A recomputation whose outputs nobody reads (B i of an "input" save,
    and the Fall i right before B i: the plan's `stops`) stops at the
    stage's last saved tensor: GPT-2's stages end in a matmul whose input
    autograd saves before the kernel runs, so that matmul is skipped, as
    torch.utils.checkpoint's early stop skips it. Gradients and buffers stay
    bitwise plain autograd's. The chain knows the stopped Fall (its
    stop_time, stop_saved_bytes, stop_overhead), so on the graph path the
    steps stay within 2% of the prediction."""
    import remat.torch._executor as EX
    torch.manual_seed(0)
    m, args, kwargs = M.gpt2(dropout=0.0)  # (a dropout mask is saved after its matmul)
    ref, mine = copies(m)
    w = wrap(mine, args, kwargs, capture=capture)
    chain = w.last_entry.chain
    stopping = [i for i, st in enumerate(chain.stages, start=1) if "stop_saved_bytes" in st]
    assert stopping and all(chain.stages[i - 1]["stop_time"] <= chain.stages[i - 1]["fwd_time"]
                            for i in stopping)
    assert any(chain.stages[i - 1]["stop_saved_bytes"] < chain.stages[i - 1]["saved_bytes"]
               for i in stopping)
    for k in (len(SAVES), 0):  # "input" saves; full saves
        _use(w, _recompute_all(chain, k))
        if k == 0:
            assert {st.index for st in w.last_entry.plan.steps if st.stops} >= set(stopping)
        counts = {}
        for stop in (False, True):
            monkeypatch.setattr(EX, "STOP_EARLY", stop)
            _same_step(ref, w, args, kwargs)
            counts[stop] = _backward_matmuls(w, args, kwargs)[0]
        assert counts[True] < counts[False], counts
        # (5 % on the module path, whose epilogue is calibrated from whole
        # steps, as in test_torch_models: its B of an "input" save and its
        # full saves measured 2.6 % under)
        _met(w, args, kwargs, w.last_entry.predicted_peak,
             below=0.05 if capture == "modules" else 0.02)

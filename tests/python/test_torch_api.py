"""remat.torch.checkpoint as a drop-in module: state_dict, modes, inference,
device and dtype moves, inputs and outputs of any structure, and autograd's
own features (autograd.grad, backward(inputs=...), retain_graph, hooks,
gradient accumulation) exactly as in plain autograd."""
import copy
import io
import pickle

import pytest
import torch
from torch import nn

import models as M
import remat
import remat.torch as rt
from torchkit import assert_same, copies, fraction_at, limit_at, loss_of, measured_peak, \
    recomputes, same_step, state, step, two_backwards, wrap, zero_grads


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return M.gpt2(layers=2, width=64, seq=32)


def wrapped(example, t=0.3, **kw):
    """(plain model, wrapped copy, args, kwargs), the copy solved for the
    limit t of the way from its smallest to plain autograd's peak."""
    model, args, kwargs = example
    ref, base = copies(model)
    w = wrap(base, args, kwargs, **kw)
    limit_at(w, t)
    return ref, w, args, kwargs


def test_same_state_dict_parameters_and_training_flags(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    assert list(w.state_dict().keys()) == list(ref.state_dict().keys())
    assert [n for n, _ in w.named_parameters()] == [n for n, _ in ref.named_parameters()]
    w.load_state_dict(ref.state_dict())
    w.eval()
    assert not w.training and all(not m.training for m in w.modules())
    w.train()
    assert w.training and all(m.training for m in w.modules())
    assert w.config is w._remat_model.config  # attributes pass through to the model


def test_no_grad_runs_the_model_itself(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    prepared = len(w._remat_entries)
    ref.eval()
    w.eval()
    with torch.no_grad():
        a, b = ref(*args, **kwargs), w(*args, **kwargs)
    assert type(a) is type(b) and torch.equal(a.logits, b.logits)
    assert len(w._remat_entries) == prepared


def test_outputs_keep_their_structure(gpt):
    _, w, args, kwargs = wrapped(gpt)
    out = w(*args, **kwargs)
    assert type(out).__name__ == "CausalLMOutputWithCrossAttentions"
    assert out.loss.dim() == 0 and out.logits.shape[:2] == args[0].shape
    model, pargs, pkw = M.pairnet()
    w2 = wrap(model, pargs, pkw)
    out = w2(*pargs)
    assert set(out) == {"out", "aux"} and isinstance(out["aux"], tuple)


def test_keyword_order_and_positional_mix(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    ids = args[0]
    zero_grads(ref)
    zero_grads(w)
    torch.manual_seed(3)
    ref(input_ids=ids, labels=ids).loss.backward()
    torch.manual_seed(3)
    w(labels=ids, input_ids=ids).loss.backward()
    assert_same(state(ref), state(w))


def test_to_double_after_wrapping_profiles_again_and_stays_exact(gpt):
    model, args, kwargs = gpt
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    w.set_memory(fraction_at(0.3, w, wrap(copy.deepcopy(model).double(), args, kwargs)))
    ref.double()
    w.double()
    same_step(ref, w, args, kwargs)
    assert len(w._remat_entries) == 2
    e = w.last_entry
    assert e.chain.stages[1]["out_bytes"] > 0 and recomputes(e.schedule)
    peak = measured_peak(w, args, kwargs)
    assert peak <= e.limit


class _Adapter(nn.Module):
    """A LoRA-like adapter around a layer (new parameters, new names)."""

    def __init__(self, base: nn.Module, width: int) -> None:
        super().__init__()
        self.base = base
        self.down = nn.Linear(width, 4, bias=False)
        self.up = nn.Linear(4, width, bias=False)

    def forward(self, x):
        return self.base(x) + self.up(self.down(x))


def test_state_changes_after_wrapping_are_seen_and_stay_exact(gpt):
    """What each step reads of the model (the state key, the graph's feeds)
    is cached between steps; every change to the model after wrapping is
    seen: the same key as computed afresh, gradients on the model's current
    parameters, bitwise equal to plain autograd's."""
    from remat.torch._api import _state_key
    ref, w, args, kwargs = wrapped(gpt)
    same_step(ref, w, args, kwargs)
    n = len(w._remat_entries)
    assert w._remat_state.mods and w.last_entry.program._walk.ok  # (the cached ways in use)

    def changed(f, new_entry):
        """new_entry: whether the change makes a new entry (None: the
        capture's guard decides, guards.py)."""
        nonlocal n
        f(ref)
        f(w)
        same_step(ref, w, args, kwargs)
        assert w._remat_state.get(w) == _state_key(w)
        if new_entry is not None:
            assert len(w._remat_entries) == n + new_entry
        n = len(w._remat_entries)

    def swap(m):  # another Parameter object in the same place: same key, read anew
        fc = m.transformer.h[0].mlp.c_fc
        fc.weight = nn.Parameter(fc.weight.detach() * 2)

    changed(swap, 0)
    assert w.transformer.h[0].mlp.c_fc.weight.grad is not None

    def dict_write(m):  # past __setattr__, into the module's own dict
        b = m.transformer.h[1].attn.c_attn
        b._parameters["bias"] = nn.Parameter(b.bias.detach() + 1)

    changed(dict_write, 0)
    assert w.transformer.h[1].attn.c_attn.bias.grad is not None

    def new_layer(m):  # another module object with the same names and shapes
        old = m.transformer.h[1].mlp.c_proj
        m.transformer.h[1].mlp.c_proj = copy.deepcopy(old)

    changed(new_layer, None)  # (the guard holds the module it read)
    changed(lambda m: m.transformer.h[0].attn.c_proj.weight.requires_grad_(False), 1)
    changed(lambda m: m.transformer.h[1].eval(), 1)
    torch.manual_seed(5)
    adapter = _Adapter(ref.transformer.h[0].attn.c_proj, 64)

    def inject(m):  # (the adapter's layer: a copy, equal to each model's own)
        m.transformer.h[0].attn.c_proj = copy.deepcopy(adapter)

    changed(inject, 1)
    assert w.transformer.h[0].attn.c_proj.up.weight.grad is not None


def test_autograd_grad_matches_and_leaves_grad_alone(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    outs = []
    for m in (ref, w):
        for p in m.parameters():
            p.grad = None
        torch.manual_seed(5)
        loss = m(*args, **kwargs).loss
        outs.append(torch.autograd.grad(loss, list(m.parameters())))
        assert all(p.grad is None for p in m.parameters())
    assert all(torch.equal(a, b) for a, b in zip(*outs))


def test_backward_inputs_computes_only_those(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    grads = []
    for m in (ref, w):
        for p in m.parameters():
            p.grad = None
        some = [m.transformer.h[0].attn.c_attn.weight, m.transformer.wpe.weight]
        torch.manual_seed(5)
        m(*args, **kwargs).loss.backward(inputs=some)
        assert sum(p.grad is not None for p in m.parameters()) == 2
        grads.append([p.grad for p in some])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_retain_graph_second_backward(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    two_backwards([ref, w], args, kwargs)
    assert_same(state(ref), state(w))


def test_hooks_on_tensors_and_parameters(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    seen = []
    for m in (ref, w):
        got = {}
        zero_grads(m)
        h = m.transformer.h[1].mlp.c_fc.weight.register_hook(
            lambda g, got=got: got.setdefault("param", g.clone()))
        torch.manual_seed(5)
        out = m(*args, **kwargs)
        out.logits.register_hook(lambda g, got=got: got.setdefault("logits", g.clone()))
        out.loss.backward()
        h.remove()
        seen.append(got)
    assert seen[0].keys() == seen[1].keys() == {"param", "logits"}
    assert all(torch.equal(seen[0][k], seen[1][k]) for k in seen[0])


def test_gradient_accumulation_over_micro_batches(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    ids = args[0]
    for m in (ref, w):
        zero_grads(m)
        for k in range(2):
            torch.manual_seed(k)
            part = ids[k:k + 1]
            m(part, labels=part).loss.backward()
    assert_same(state(ref), state(w))


def test_double_backward_is_refused_not_wrong(gpt):
    _, w, args, kwargs = wrapped(gpt)
    loss = w(*args, **kwargs).loss
    with pytest.raises(rt.RematRuntimeError, match="create_graph"):
        torch.autograd.grad(loss, list(w.parameters()), create_graph=True)


def test_input_mutated_before_backward_is_refused():
    model, args, kwargs = M.bert(layers=2, width=64, seq=32)
    mask = kwargs["attention_mask"].clone()
    w = wrap(model, args, {"attention_mask": mask})
    limit_at(w, 0.3)
    assert recomputes(w.last_entry.schedule)
    out = w(*args, attention_mask=mask)
    mask[1, :4] = 0  # changed after the forward: the recomputation would see it
    with pytest.raises(rt.RematRuntimeError, match="modified in place"):
        loss_of(out).backward()


def test_deepcopy_and_torch_save(gpt):
    ref, w, args, kwargs = wrapped(gpt)
    for clone in (copy.deepcopy(w), _save_load(w)):
        r2 = copy.deepcopy(ref)
        assert clone._remat_entries == {}
        same_step(r2, clone, args, kwargs)
        assert len(clone._remat_entries) == 1


def _save_load(m):
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def test_pickle_of_chain_and_schedule_travels():
    c = remat.Chain([{"name": "a", "fwd_time": 1, "bwd_time": 1, "out_bytes": 4,
                      "saved_bytes": 8}, {"name": "l", "fwd_time": 0, "bwd_time": 0,
                                          "out_bytes": 0, "saved_bytes": 0}], 4)
    assert pickle.loads(pickle.dumps(c)).stages == c.stages


def test_new_batch_size_is_profiled_and_limit_holds(gpt):
    model, args, kwargs = gpt
    big = torch.cat([args[0]] * 4)
    w = wrap(copy.deepcopy(model), args, kwargs)
    w.set_memory(fraction_at(0.3, w, wrap(copy.deepcopy(model), (big,), {"labels": big})))
    zero_grads(w)
    peak = measured_peak(w, (big,), {"labels": big})
    e = w.last_entry
    assert len(w._remat_entries) == 2 and e.chain.stages[1]["out_bytes"] > 0
    assert peak <= e.limit


def test_new_input_refused_on_request(gpt):
    model, args, kwargs = gpt
    w = wrap(copy.deepcopy(model), args, kwargs, on_new_input="error")
    ids = args[0][:1]
    with pytest.raises(rt.InputChanged):
        w(ids, labels=ids)


def test_autocast_is_replayed_and_profiled():
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=2, width=64, seq=32)
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        probe = wrap(copy.deepcopy(model), args, kwargs)
    w.set_memory(fraction_at(0.3, w, probe))
    fp32 = w.last_entry
    for m in (ref, w):
        zero_grads(m)
        torch.manual_seed(5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(*args, **kwargs)
        out.loss.backward()
    assert_same(state(ref), state(w))
    bf16 = w.last_entry
    # (no recomputation asserted: a fraction is of the largest plain peak
    # among the inputs, fp32's here, so bf16's smaller step may fit whole)
    assert bf16 is not fp32
    assert bf16.chain.stages[2]["saved_bytes"] < fp32.chain.stages[2]["saved_bytes"]


@pytest.mark.kernels
def test_dropout_and_batchnorm_as_plain():
    torch.manual_seed(0)
    model, args, kwargs = M.resnet50(image=32)
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    limit_at(w, 0.3)
    assert recomputes(w.last_entry.schedule)
    for _ in range(2):
        same_step(ref, w, args, kwargs)
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=2, width=64, seq=32)  # dropout 0.1 everywhere
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    limit_at(w, 0.3)
    assert recomputes(w.last_entry.schedule)
    same_step(ref, w, args, kwargs)


def test_cache_reuses_and_tells_different_code_apart(tmp_path):
    torch.manual_seed(0)
    model, args, kwargs = M.convnext(image=32)
    a = wrap(copy.deepcopy(model), args, kwargs, cache=str(tmp_path))
    assert a.last_entry.info["cached"] is None
    b = wrap(copy.deepcopy(model), args, kwargs, cache=str(tmp_path))
    assert b.last_entry.info["cached"] and b.last_entry.chain.stages == a.last_entry.chain.stages

    class Wider(M.ConvNeXt):  # same modules and parameters, other forward code
        def forward(self, x):
            x = torch.cat([x, x], 0)
            return super().forward(x)
    c = wrap(Wider(), args, kwargs, cache=str(tmp_path))
    assert c.last_entry.info["cached"] is None
    first = [e.last_entry.chain.stages[0]["out_bytes"] for e in (a, c)]
    assert first[1] == 2 * first[0]
    before = sorted(tmp_path.iterdir())
    wrap(copy.deepcopy(model), args, kwargs, cache=False)
    assert sorted(tmp_path.iterdir()) == before


def test_progress_lines(capsys, monkeypatch):
    from remat.torch import _progress
    monkeypatch.setattr(_progress, "DELAY", 0.0)
    model, args, kwargs = M.mlp()
    wrap(model, args, kwargs, progress=True)
    err = capsys.readouterr().err
    assert "remat: profiling" in err and "stages profiled" in err
    wrap(copy.deepcopy(model), args, kwargs, progress=False)
    assert capsys.readouterr().err == ""


def test_report_and_infeasible_message(gpt):
    model, args, kwargs = gpt
    w = wrap(copy.deepcopy(model), args, kwargs)
    assert "graph path" in w.remat_report()
    with pytest.raises(remat.InfeasibleError) as e:
        w.set_memory(1024)
    assert e.value.min_memory > 1024 and "Plain autograd needs" in str(e.value)


@pytest.mark.parametrize("memory,error", [
    (float("inf"), ValueError), (float("nan"), ValueError), (-0.5, ValueError), (0.0, ValueError),
    (True, TypeError), ([1], TypeError), ("lots", remat.InputError), (-1, remat.InputError)])
def test_bad_memory_is_refused_before_any_work(memory, error):
    """A limit that is no size or fraction (memory=inf raised OverflowError
    after profiling) is refused at once, naming the argument; so is one
    given to set_memory, which keeps the limit it had."""
    model = torch.nn.Linear(4, 4)
    with pytest.raises(error, match="memory"):
        rt.checkpoint(model, memory=memory)
    w = rt.checkpoint(model, memory=0.5)
    with pytest.raises(error, match="memory"):
        w.set_memory(memory)
    assert w.remat_config.memory == 0.5


def test_step_outputs_are_unchanged_by_training(gpt):
    """Forward values equal plain autograd's, step after step."""
    ref, w, args, kwargs = wrapped(gpt)
    for _ in range(2):
        zero_grads(ref)
        zero_grads(w)
        assert torch.equal(step(ref, args, kwargs), step(w, args, kwargs))
        with torch.no_grad():
            for p, q in zip(ref.parameters(), w.parameters()):
                p -= 0.1 * p.grad
                q -= 0.1 * q.grad


class _Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_input_that_requires_grad_gets_its_gradient():
    m = _Mlp()
    x = torch.randn(4, 8, requires_grad=True)
    ref, base = copies(m)
    w = wrap(base, (x,), {})
    grads = []
    for mod in (ref, w):
        xx = x.detach().clone().requires_grad_()
        mod(xx).square().sum().backward()
        grads.append(xx.grad)
    assert torch.equal(*grads)


def test_a_rider_reads_its_own_marks_from_the_running_meter():
    """A second profiler cannot start inside a PeakMeter on CPU: a Rider's
    marks go into the running meter's profile, and its segments come when
    that meter ends, blind to the meter's own marks and to other riders'."""
    from remat.torch._memory import Rider
    got = {}
    own = rt.PeakMeter()  # remat's meter of a caller's loss: never a host
    own._rideable = False
    with own:
        assert Rider.host("cpu") is None
    with rt.PeakMeter() as host:  # it stops any meter left running first
        keep = torch.empty(1 << 18)  # 1 MiB
        assert Rider.host("cpu") is host
        r = Rider(host, lambda seg, n: got.update(seg=seg, n=n))
        r.mark()
        big = torch.empty(1 << 20)  # 4 MiB
        host.mark()
        del big
        r.mark()
        later = torch.empty(1 << 19)  # 2 MiB
        del later
        assert not got  # not before the meter ends
    assert Rider.host("cpu") is not host
    assert got["n"] == 2 and got["seg"] == [4 << 20, 2 << 20]
    assert host.peak == 5 << 20 and host.segment_peaks == [0]
    del keep


def test_nested_meters_on_cuda_keep_each_others_peak(monkeypatch):
    """On CUDA a meter resets the allocator's peak statistics at its start
    and marks: the peak an enclosing meter had seen so far must survive it
    (remat's measure of the caller's loss runs inside the user's meter).
    The allocator's statistics are simulated: no GPU here."""
    st = {"cur": 0, "top": 0}

    def alloc(n):
        st["cur"] += n
        st["top"] = max(st["top"], st["cur"])

    def reset(device=None):
        st["top"] = st["cur"]

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: st["cur"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: st["top"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    with rt.PeakMeter("cuda") as outer:
        alloc(100)
        alloc(-100)
        outer.mark()
        with rt.PeakMeter("cuda") as inner:
            alloc(30)
            alloc(-30)
            inner.mark()
            alloc(20)
        alloc(-20)
    assert inner.peak == 30 and inner.segment_peaks == [20]
    assert outer.peak == 100 and outer.segment_peaks == [30]

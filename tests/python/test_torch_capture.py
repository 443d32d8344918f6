"""How models become chains: the cut rules, merging long chains, the module
path and its reasons, refusal, and the limit holding in the cases the issue
found broken (outputs counted twice, CPU temporaries, held side values)."""
import copy
import warnings

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

import models as M
import remat
import remat.torch as rt
from remat.torch._config import Config
from remat.torch._graph.export import export_model
from remat.torch._graph.program import GraphProgram
from remat.torch._prepare import Prepared, profiled
from remat.torch._progress import Progress
from torchkit import between, bounds, copies, limit_at, limits, measured_peak, same_step, wrap, \
    zero_grads


def test_linear_relu_stages_are_not_counted_twice():
    """A Linear followed by a separate ReLU module: the Linear's output is
    kept by no one, so no boundary falls there and plain autograd's peak is
    predicted within a few percent (it was 94% over before)."""
    model, args, kwargs = M.mlp()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    e = w.last_entry
    assert e.chain.n - 1 == 7  # 6 Linear+ReLU pairs and the last Linear
    plain = measured_peak(ref, args, kwargs)
    assert plain <= e.plain_peak <= 1.2 * plain


@pytest.mark.kernels
def test_depthwise_temporaries_are_measured_on_cpu():
    """ConvNeXt's depthwise-convolution backward allocates more than its
    activations: at the smallest feasible limit the step still fits."""
    model, args, kwargs = M.convnext()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    assert max(s["bwd_overhead"] for s in w.last_entry.chain.stages) > 0
    for limit in limits(w)[:2]:
        w.set_memory(limit)
        same_step(ref, w, args, kwargs)
        assert measured_peak(w, args, kwargs) <= w.last_entry.limit
        measured_peak(ref, args, kwargs)


def test_held_side_values_are_counted():
    """GPT-2's mask, built from the attention mask the caller passes, is read
    by every layer: held once, counted in the prediction."""
    model, args, kwargs = M.gpt2(layers=3, width=64, seq=32)
    kwargs = dict(kwargs, attention_mask=torch.ones_like(args[0]))
    w = wrap(model, args, kwargs)
    assert w.last_entry.program.causal_masks == 0
    prog = w.last_entry.program
    assert prog.held and w.last_entry.held > 0
    names = {n.name for n in prog.held}
    readers = {st.index for st in prog.stages for a in st.inputs if a.name in names}
    assert len(readers) >= 2


class _MaskedAttention(nn.Module):
    """Self-attention layers. Like transformers, eager passes is_causal when a
    check that reads tensor values allows it (`eager="causal"`), and traced
    code (which cannot read values) builds the mask `traced` from arange.
    With `gqa`, keys and values have one head for the queries' two: passed
    as they are with enable_gqa where there is no mask, else repeated."""

    def __init__(self, eager: str, traced: str, gqa: bool = False, layers: int = 3,
                 width: int = 32) -> None:
        super().__init__()
        self.eager, self.traced, self.gqa = eager, traced, gqa
        self.qkv = nn.ModuleList(nn.Linear(width, (2 if gqa else 3) * width)
                                 for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, W = x.shape
        i = torch.arange(L, device=x.device)
        exporting = getattr(torch.compiler, "is_exporting", lambda: False)()
        mask, causal = None, True
        if exporting or self.eager != "causal" or not bool((i >= 0).all()):
            mask, causal = {"causal": i[:, None] >= i[None, :],
                            "upper": i[:, None] <= i[None, :],
                            "band": (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 4),
                            }[self.traced], False
        sdpa = torch.nn.functional.scaled_dot_product_attention
        for lin in self.qkv:
            if not self.gqa:
                q, k, v = lin(x).view(B, L, 3, 2, W // 2).permute(2, 0, 3, 1, 4)
                a = sdpa(q, k, v, attn_mask=mask, is_causal=causal)
            else:
                t = lin(x)
                q = t[..., :W].view(B, L, 2, W // 2).transpose(1, 2)
                k, v = (t[..., j:j + W // 2].view(B, L, 1, W // 2).transpose(1, 2)
                        for j in (W, W + W // 2))
                if mask is None:
                    a = sdpa(q, k, v, is_causal=causal, enable_gqa=True)
                else:  # transformers' repeat_kv
                    k, v = (h[:, :, None].expand(B, 1, 2, L, W // 2).reshape(B, 2, L, W // 2)
                            for h in (k, v))
                    a = sdpa(q, k, v, attn_mask=mask, is_causal=causal)
            x = x + a.transpose(1, 2).reshape(B, L, W)
        return x.square().mean()


_HAS_GQA = "enable_gqa" in str(torch.ops.aten.scaled_dot_product_attention.default._schema)


@pytest.mark.parametrize("gqa", [False, True])
@pytest.mark.parametrize("eager,traced,replaced", [
    ("causal", "causal", 3),  # transformers' case: the graph calls SDPA as eager does
    ("mask", "causal", 0),    # eager passes the mask itself: its kernels stay
    ("mask", "upper", 0),
    ("causal", "band", 0)])   # not the causal mask: never replaced
def test_sdpa_calls_become_what_eager_calls(eager, traced, replaced, gqa):
    """The mask becomes is_causal only where eager passes is_causal, and
    repeated key/value heads become enable_gqa only where eager passes that
    (with the same mask); then the graph runs eager's kernels, so the auto
    capture takes it."""
    if gqa and not _HAS_GQA:
        pytest.skip("SDPA's enable_gqa needs torch >= 2.5")
    torch.manual_seed(0)
    model = _MaskedAttention(eager, traced, gqa)
    args = (torch.randn(2, 16, 32, requires_grad=True),)
    ref, base = copies(model)
    w = wrap(base, args, {}, capture="graph")
    prog = w.last_entry.program
    assert prog.causal_masks == replaced
    assert prog.gqa_calls == (replaced if gqa else 0)
    if traced == "causal" or eager == "mask":  # the graph computes what eager does
        assert prog.differs_from_eager(base, args, {}) is None
        for limit in limits(w)[:2]:
            w.set_memory(limit)
            same_step(ref, w, args, {})


def test_long_chains_are_merged_to_max_stages():
    torch.manual_seed(0)
    model, args, kwargs = M.gpt2(layers=3, width=64, seq=32)
    ref, base = copies(model)
    full = wrap(copy.deepcopy(model), args, kwargs)
    w = wrap(base, args, kwargs, max_stages=4)
    assert full.last_entry.chain.n - 1 > 4 and w.last_entry.chain.n - 1 == 4
    limit_at(w, 0.3)
    same_step(ref, w, args, kwargs)


def test_data_dependent_control_flow_takes_the_module_path():
    model, args, kwargs = M.gated()
    ref, base = copies(model)
    with pytest.warns(UserWarning, match="torch.export failed"):
        w = rt.checkpoint(base, args, kwargs, memory=1.0, cache=False, repeat=1)
    e = w.last_entry
    assert e.info["path"] == "modules" and "data-dependent" in e.info["why"]
    assert e.chain.n - 1 >= 6  # the six residual blocks
    for limit in limits(w)[:2]:
        w.set_memory(limit)
        same_step(ref, w, args, kwargs)
        assert measured_peak(w, args, kwargs) <= w.last_entry.limit
        measured_peak(ref, args, kwargs)


class _Loop(nn.Module):
    """Data-dependent control flow and no run of blocks: neither path."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        while x.norm() < 10:
            x = self.a(x) * 2
        return x.sum()


def test_a_model_neither_path_can_run_is_refused_with_both_reasons():
    with pytest.raises(rt.CaptureError) as e:
        rt.checkpoint(_Loop(), (torch.ones(2, 8),), cache=False)
    msg = str(e.value)
    assert "torch.export failed" in msg and "no run of two or more" in msg


def test_capture_modes_can_be_forced():
    model, args, kwargs = M.mlp()
    w = wrap(model, args, kwargs, capture="modules")
    assert w.last_entry.info["path"] == "modules"
    with pytest.raises(rt.CaptureError, match="torch.export failed"):
        wrap(M.gated()[0], M.gated()[1], {}, capture="graph")


@pytest.mark.kernels
def test_buffers_updated_by_output_in_a_functional_graph():
    """Older torch exports a functional graph whose BatchNorm statistics come
    out as extra outputs (BUFFER_MUTATION): remat writes them back once per
    step, and recomputations leave them alone."""
    torch.manual_seed(0)
    model, args, kwargs = M.resnet50(image=32)
    ref = copy.deepcopy(model)
    ep = export_model(model, args, kwargs).run_decompositions({})
    kinds = {s.kind.name for s in ep.graph_signature.output_specs}
    assert "BUFFER_MUTATION" in kinds
    prog = GraphProgram(ep, model, pytree.tree_leaves((args, kwargs)), 64)
    cfg = Config(repeat=1, cache=False, progress=False)
    chain, held, _, _ = profiled(prog, model, args, kwargs, cfg, Progress("p", False))
    entry = Prepared(prog, chain, held, {})
    low = 1  # the smallest limit, then 0.3 of the way to plain autograd's peak
    try:
        entry.solve(1, "optimal", None, None, Progress("s", False))
    except remat.InfeasibleError as e:
        low = e.min_memory
    entry.solve(between(low, entry.plain_peak, 0.3), "optimal", None, None, Progress("s", False))
    assert any(op.startswith("Fn") for op in entry.schedule.ops)  # recomputation happens
    for m in (ref, model):
        zero_grads(m)
    torch.manual_seed(1)
    ref(*args).sum().backward()
    torch.manual_seed(1)
    entry.forward(model, args, kwargs).sum().backward()
    for (n, a), b in zip(ref.named_buffers(), model.buffers()):
        assert torch.allclose(a.float(), b.float(), atol=1e-5), n
    for (n, a), b in zip(ref.named_parameters(), model.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-4, rtol=1e-3), n


def test_every_schedule_of_the_chain_runs_exactly():
    """Solvers other than optimal (revolve, sequential) drive the same executor."""
    torch.manual_seed(0)
    model, args, kwargs = M.pairnet()
    ref, base = copies(model)
    w = wrap(base, args, kwargs)
    for alg in ("revolve", "sequential"):
        limit_at(w, 0.3, alg)  # below plain autograd's peak: not store-all
        assert w.last_entry.schedule.algorithm == alg
        same_step(ref, w, args, kwargs)


def test_infeasible_limit_names_the_minimum():
    model, args, kwargs = M.mlp()
    low, plain = bounds(wrap(copy.deepcopy(model), args, kwargs))
    frac = low / plain / 2  # half the smallest limit, as a fraction of plain autograd's peak
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(remat.InfeasibleError) as e:
            rt.checkpoint(model, args, kwargs, memory=frac, cache=False, repeat=1)
    assert e.value.min_memory > frac * plain and "smallest this model can train in" in \
        str(e.value)


def test_profile_gives_a_chain_the_command_line_reads(tmp_path):
    import os
    import subprocess
    model, args, kwargs = M.resnet50(image=32)
    chain = rt.profile(model, args, kwargs, cache=False, repeat=1)
    assert chain.n == wrap(copy.deepcopy(model), args, kwargs).last_entry.chain.n
    assert chain.meta["profile"]["held_bytes"] > 0
    path = tmp_path / "resnet50.json"
    chain.save(str(path))
    cli = os.environ.get("REMAT_CLI")
    if cli:
        out = subprocess.run([cli, "curve", str(path), "--points", "4"], capture_output=True,
                             text=True, check=True).stdout
        assert out.startswith("memory_bytes") and len(out.splitlines()) >= 3


class _RoundSTE(torch.autograd.Function):
    """A straight-through estimator: rounds in the forward, passes the
    gradient through unchanged (the forward's own derivative is zero)."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
        return g


class _QuantBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(_RoundSTE.apply(self.fc(x)))


def test_a_custom_autograd_function_keeps_its_own_backward():
    """torch.export keeps only a custom Function's forward: a graph of this
    model would back-propagate through round() (zero gradient) instead of
    the estimator's backward. The auto capture finds the Function and takes
    the module path, which calls it again: gradients stay plain autograd's."""
    torch.manual_seed(0)
    model = nn.Sequential(*[_QuantBlock(32) for _ in range(4)])
    args = (torch.randn(8, 32, requires_grad=True),)
    ref, base = copies(model)
    w = wrap(base, args, {})
    info = w.last_entry.info
    assert info["path"] == "modules", info
    assert "_RoundSTE" in info["why"] and "custom autograd Functions" in info["why"]
    for limit in limits(w):
        w.set_memory(limit)
        same_step(ref, w, args, {})
        assert measured_peak(w, args, {}) <= limit
    # the graph, forced, is what the check avoids: other gradients
    g_ref, g_base = copies(model)
    g = wrap(g_base, args, {}, capture="graph")
    with pytest.raises(AssertionError, match="differ from plain autograd"):
        same_step(g_ref, g, args, {})

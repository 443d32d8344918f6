"""Real training loops whose calls change (issue 25): a branch on tensor
values (module path), a flag changed after wrapping (graph path guards), and
mixtures of experts on the graph path. Every model here is new to the tests
(built from configs with random weights); every step is compared bitwise with
an unwrapped twin."""
from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any, List

import pytest
import torch
from torch import nn

import remat.torch as rt
from torchkit import copies, limits, measured_peak, recomputes, same_step, wrap

torch.manual_seed(0)


def train_twins(ref: nn.Module, w: nn.Module, batches: List[tuple], kwargs: Any = None) -> None:
    """AdamW steps of the plain twin and the wrapped model on the same
    batches: each step's losses, gradients and buffers equal bit for bit."""
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (ref, w)]
    for k, args in enumerate(batches):
        same_step(ref, w, args, kwargs(args) if callable(kwargs) else (kwargs or {}), seed=k)
        for o in opts:
            o.step()


# -- branches on the module path ------------------------------------------------------------


class _Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 3 * d)
        self.drop = nn.Dropout(0.1)
        self.down = nn.Linear(3 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.drop(torch.tanh(self.up(self.norm(x)))))


class BranchNet(nn.Module):
    """A stack whose path depends on the batch's values, so torch.export
    fails and the module path runs it. `kind` says what a batch with a
    positive mean does: "skip" leaves out block 3, "alt" runs another
    module in its place, "between" changes the code between blocks 2 and 3,
    "inplace" changes what block 2 returned in place before block 3 reads it."""

    def __init__(self, kind: str, d: int = 32, n: int = 6) -> None:
        super().__init__()
        self.kind = kind
        self.inp = nn.Linear(16, d)
        self.blocks = nn.ModuleList(_Block(d) for _ in range(n))
        self.alt = _Block(d)
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        flip = bool(x.mean() > 0)
        for i, b in enumerate(self.blocks):
            if i == 3 and flip and self.kind == "skip":
                continue
            if i == 3 and flip and self.kind == "alt":
                h = self.alt(h)
                continue
            if i == 3 and flip and self.kind == "between":
                h = h * 0.5
            if i == 3 and flip and self.kind == "inplace":
                h.mul_(0.5)
            h = b(h)
        return self.head(h)


@pytest.mark.parametrize("kind,change", [
    ("skip", "block 5 (blocks.3) was expected"),
    ("alt", "block 5 (blocks.3) was never called"),
    ("between", "did not receive what block 4 returned"),
    ("inplace", "what block 4 (blocks.2) returned was changed in place before block 5"),
])
def test_a_value_dependent_branch_trains_through_batches_that_flip_it(kind, change):
    torch.manual_seed(1)
    model = BranchNet(kind).train()
    example = torch.randn(8, 16) - 1  # takes the profiled path
    ref, base = copies(model)
    w = wrap(base, (example,), {})
    e = w.last_entry
    assert e.info["path"] == "modules" and "data-dependent" in e.info["why"]
    w.set_memory(limits(w)[0])  # the smallest limit: recomputation everywhere
    signs = [-1, 1, 1, -1, 1, -1]
    batches = [(torch.randn(8, 16) + s,) for s in signs]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        train_twins(ref, w, batches)
    msgs = [str(m.message) for m in seen if "differ from the profiled" in str(m.message)]
    assert len(msgs) == 1 and change in msgs[0], msgs  # once per change, saying what changed
    assert sum(e.program.left_plan.values()) == signs.count(1)
    # A batch on the profiled path is back on the plan, within the limit; one
    # that leaves it keeps at most what plain autograd keeps (on this model).
    assert measured_peak(w, (example,), {}) <= e.limit
    flipped = torch.randn(8, 16) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert measured_peak(w, (flipped,), {}) <= measured_peak(ref, (flipped,), {})


def test_a_block_module_called_at_two_places_of_the_run():
    """One module (a shared activation) is two blocks of the run, and the
    first block's module is called once before the run: its calls are told
    apart by the order, in the profile and in the step."""
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
            self.act = nn.GELU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            side = self.a(x).mean()  # not a block: nothing takes it on
            h = self.act(self.a(x))
            if h.mean() > 10:  # data-dependent: the module path
                h = h * 2
            return self.c(self.act(self.b(h))).sum() + side

    torch.manual_seed(2)
    model = Shared().train()
    x = torch.randn(16, 32)
    ref, base = copies(model)
    w = wrap(base, (x,), {})
    names = [s.split(":", 1)[1] for s in w.last_entry.program.stage_names()]
    assert names.count("act") == 2 and w.last_entry.program.blocks[0].nth == 1
    w.set_memory(limits(w)[0])
    train_twins(ref, w, [(x,), (torch.randn(16, 32),)])
    assert not w.last_entry.program.left_plan


def test_a_residual_read_by_a_later_block_is_saved_as_the_main_run_saved_it():
    """BERT with a padding mask on the module path: its blocks are the layers'
    parts, and a residual (what block j-1 received) is an argument of block
    j+1, so it is held, and free of the hooks, only from block j+1 on. The
    recomputation of block j must save it as block j's main run did (it once
    raised "recomputing stage ... saved 6 tensors, the forward saved 9")."""
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(4)
    cfg = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32)
    model = BertForMaskedLM(cfg).train()
    ids = torch.randint(0, 101, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    kw = {"attention_mask": mask, "labels": ids}
    ref, base = copies(model)
    w = wrap(base, (ids,), kw, capture="modules")
    assert w.last_entry.info["path"] == "modules"
    assert "bert.encoder.layer.0.attention.output" in [
        s.split(":", 1)[1] for s in w.last_entry.program.stage_names()]
    lims = limits(w)
    for limit in lims:
        w.set_memory(limit)
        assert recomputes(w.last_entry.schedule) or limit > lims[0]
        train_twins(ref, w, [(ids,), (torch.randint(0, 101, (2, 16)),)],
                    lambda args: dict(kw, labels=args[0]))
        assert measured_peak(w, (ids,), kw) <= w.last_entry.limit
    assert not w.last_entry.program.left_plan


def test_an_encoder_decoder_on_the_module_path_recomputes_as_its_forward_ran():
    """T5 on the module path: one dropout module is two blocks (the encoder's
    first and last), two blocks save nothing (dropout 0), and its
    self-attention gives other last bits under no_grad. A recomputation runs
    with grad as the main run did (saving nothing when the schedule keeps
    nothing), and a boundary's backward after the step let go of its saved
    tensors does nothing."""
    import models as M
    torch.manual_seed(5)
    model, args, kwargs = M.t5(layers=2, width=64, seq=16)
    ref, base = copies(model)
    w = wrap(base, args, kwargs, capture="modules")
    names = [s.split(":", 1)[1] for s in w.last_entry.program.stage_names()]
    assert names.count("encoder.dropout") == 2
    lims = limits(w)
    for limit in lims:
        w.set_memory(limit)
        assert recomputes(w.last_entry.schedule) or limit > lims[0]
        train_twins(ref, w, [args, args], kwargs)
        assert measured_peak(w, args, kwargs) <= w.last_entry.limit


def test_a_held_argument_requiring_grad_is_recomputed_requiring_grad():
    """PairNet on the module path: the first block's second stream is a held
    argument (a chunk of the stem's output) that requires grad, so the
    block's `y * sigmoid(...)` saves the sigmoid; its recomputation read the
    argument detached and saved one tensor fewer ("recomputing stage 1 saved
    4 tensors ..., the forward saved 5")."""
    import models as M
    torch.manual_seed(6)
    model, args, kwargs = M.pairnet()
    ref, base = copies(model)
    w = wrap(base, args, kwargs, capture="modules")
    assert w.last_entry.program.blocks[0].in_slots == [0]
    lims = limits(w)
    for limit in lims:
        w.set_memory(limit)
        assert recomputes(w.last_entry.schedule) or limit > lims[0]
        train_twins(ref, w, [args, (torch.randn(8, 32, 16),)])
        assert measured_peak(w, args, kwargs) <= w.last_entry.limit


def test_an_in_place_block_is_recomputed_on_an_input_that_is_no_leaf():
    """A block that is an in-place ReLU (DenseNet's): its recomputation's
    input requires grad, as in the forward, and is no leaf (autograd refuses
    an in-place op on a leaf that requires grad)."""
    torch.manual_seed(7)
    layers: List[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(64, 64), nn.ReLU(inplace=True)]
    model = nn.Sequential(*layers, nn.Linear(64, 4)).train()
    x = torch.randn(32, 64)
    ref, base = copies(model)
    w = wrap(base, (x,), {}, capture="modules")
    lims = limits(w)
    for limit in lims:
        w.set_memory(limit)
        assert recomputes(w.last_entry.schedule) or limit > lims[0]
        train_twins(ref, w, [(x,), (torch.randn(32, 64),)])


class _Bottleneck(nn.Module):
    """Children passing one to the next, with the residual added in place to
    the third's output before the fourth reads it (as in torchvision's ResNet
    bottleneck): a stage boundary between them would recompute the fourth
    from the third's output without the residual."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.a, self.norm, self.b = nn.Linear(d, d), nn.LayerNorm(d), nn.Linear(d, d)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.b(self.norm(self.a(x)))
        out += x
        return self.act(out)


def test_a_residual_added_in_place_between_two_children_keeps_them_one_stage():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(16, 32), *(_Bottleneck(32) for _ in range(4)),
                          nn.Linear(32, 4)).train()
    x = torch.randn(8, 16)
    ref, base = copies(model)
    w = wrap(base, (x,), {}, capture="modules")
    names = [b.name for b in w.last_entry.program.blocks]
    assert not any(n.endswith(".act") for n in names), names  # no boundary before `act`
    w.set_memory(limits(w)[0])
    assert recomputes(w.last_entry.schedule)
    train_twins(ref, w, [(x,), (torch.randn(8, 16),)])


# -- flags on the graph path ------------------------------------------------------------------

SHIFT = 0.0  # a global the forward reads


@dataclasses.dataclass
class FlagConfig:
    gate: bool = False
    act: str = "gelu"


class FlagBlock(nn.Module):
    def __init__(self, d: int, cfg: FlagConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.up, self.gate = nn.Linear(d, 2 * d), nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)
        self.double = False  # a module attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.cfg.gate:
            h = h * torch.sigmoid(self.gate(x))
        h = torch.relu(h) if self.cfg.act == "relu" else torch.nn.functional.gelu(h)
        if self.double:
            h = h * 2
        return x + self.down(h) + SHIFT


class FlagNet(nn.Module):
    def __init__(self, d: int = 32, n: int = 4) -> None:
        super().__init__()
        self.config = FlagConfig()
        self.blocks = nn.ModuleList(FlagBlock(d, self.config) for _ in range(n))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x).sum()


def test_a_flag_changed_after_wrapping_changes_the_result_as_in_plain_pytorch():
    global SHIFT
    torch.manual_seed(3)
    x = torch.randn(8, 32)
    ref, base = copies(FlagNet().train())
    w = wrap(base, (x,), {})
    e0 = w.last_entry
    assert e0.info["path"] == "graph"
    assert e0.program.guard is not None and e0.program.guard.holds()
    same_step(ref, w, (x,), {})

    def both(fn):
        fn(ref)
        fn(base)

    changes = [
        lambda m: setattr(m.blocks[2], "double", True),        # a module attribute
        lambda m: setattr(m.config, "gate", True),             # a config field
        lambda m: setattr(m.config, "act", "relu"),            # another, a string
        lambda m: setattr(m.blocks[1], "cfg", FlagConfig(gate=True, act="relu")),  # replaced
    ]
    try:
        for k, change in enumerate(changes):
            both(change)
            same_step(ref, w, (x,), {})          # as plain PyTorch: bitwise
            assert w.last_entry is not e0 and len(w._remat_entries) == k + 2
        SHIFT = 0.25                              # a global
        same_step(ref, w, (x,), {})
        assert len(w._remat_entries) == len(changes) + 2
        assert any("SHIFT" in c for c in e0.program.guard.changes())
    finally:
        SHIFT = 0.0
    # Everything back as it was: the first entry again, no new capture.
    both(lambda m: setattr(m.blocks[2], "double", False))
    both(lambda m: [setattr(m.config, "gate", False), setattr(m.config, "act", "gelu")])
    both(lambda m: setattr(m.blocks[1], "cfg", m.config))
    same_step(ref, w, (x,), {})
    assert w.last_entry is e0 and len(w._remat_entries) == len(changes) + 2


def _qwen2(layers: int = 3) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(num_hidden_layers=layers, hidden_size=64, intermediate_size=128,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                      max_position_embeddings=64, use_cache=False, bos_token_id=0,
                      eos_token_id=0, pad_token_id=0)
    return Qwen2ForCausalLM(cfg).train()


def test_a_hugging_face_config_field_and_module_attribute_changed_after_wrapping():
    """Qwen2 reads config.num_hidden_layers in its forward (the layers it
    runs) and each attention's `scaling` attribute."""
    torch.manual_seed(4)
    model = _qwen2()
    ids = torch.randint(0, 256, (2, 32))
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids})
    assert w.last_entry.info["path"] == "graph"
    same_step(ref, w, (ids,), {"labels": ids})
    for m in (ref, base):
        m.config.num_hidden_layers = 2
    same_step(ref, w, (ids,), {"labels": ids})
    assert w.last_entry.chain.n < next(iter(w._remat_entries.values())).chain.n
    for m in (ref, base):
        m.model.layers[0].self_attn.scaling = 0.125
    same_step(ref, w, (ids,), {"labels": ids})
    assert len(w._remat_entries) == 3


def test_the_guard_ignores_state_the_forward_changes():
    """A counter the forward increments is not a guard (it would fail every
    call)."""
    class Counting(FlagNet):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(x)

    torch.manual_seed(5)
    x = torch.randn(8, 32)
    ref, base = copies(Counting().train())
    w = wrap(base, (x,), {})
    g = w.last_entry.program.guard
    assert g.holds() and "calls" not in {r[1] for r in g.reads}
    train_twins(ref, w, [(x,), (x,), (x,)])
    assert len(w._remat_entries) == 1


def test_a_deep_copy_guards_its_own_model():
    """A flag changed on a deep copy of the wrapped model changes the copy's
    result, not the original's; the guards' checks (compiled at their first
    call, over the objects they watch) are not shared."""
    torch.manual_seed(6)
    x = torch.randn(8, 32)
    ref, base = copies(FlagNet().train())
    w = wrap(base, (x,), {})
    g = w.last_entry.program.guard
    assert g.holds()
    c = copy.deepcopy(w)
    for m in (ref, c._remat_model):
        m.blocks[0].double = True
    same_step(ref, c, (x,), {})
    assert c.last_entry.program.guard.holds() and g.holds()
    c._remat_model.blocks[0].double = False
    assert not c.last_entry.program.guard.holds() and g.holds()


# -- mixtures of experts on the graph path ----------------------------------------------------


def _mixtral() -> nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM
    cfg = MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.1,
                        max_position_embeddings=64, use_cache=False, bos_token_id=0,
                        eos_token_id=0, pad_token_id=0)
    return MixtralForCausalLM(cfg).train()


def _qwen3_moe_tied() -> nn.Module:
    """Qwen3-MoE with its routers zeroed: every token's expert scores tie."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    cfg = Qwen3MoeConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                         moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, num_experts=4,
                         num_experts_per_tok=2, max_position_embeddings=64, use_cache=False,
                         bos_token_id=0, eos_token_id=0, pad_token_id=0)
    m = Qwen3MoeForCausalLM(cfg).train()
    with torch.no_grad():
        for layer in m.model.layers:
            layer.mlp.gate.weight.zero_()
    return m


@pytest.mark.parametrize("make", [_mixtral, _qwen3_moe_tied], ids=["mixtral", "qwen3moe-ties"])
def test_a_mixture_of_experts_takes_the_graph_path_with_eager_grouped_matmuls(make):
    torch.manual_seed(6)
    model = make()
    ids = torch.randint(0, 256, (2, 32))
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids})
    e = w.last_entry
    assert e.info["path"] == "graph", e.info["why"]
    assert e.program.grouped_mm == 4  # two layers, two grouped matmuls each
    w.set_memory(limits(w)[0])
    batches = [(torch.randint(0, 256, (2, 32)),) for _ in range(3)]
    train_twins(ref, w, batches, lambda args: {"labels": args[0]})
    assert measured_peak(w, (ids,), {"labels": ids}) <= w.last_entry.limit


def test_experts_with_data_dependent_shapes_take_the_module_path_saying_why():
    """transformers' eager experts loop gives each expert its own token list
    (nonzero, where): shapes made from values, which one graph cannot hold."""
    torch.manual_seed(7)
    model = _mixtral()
    model.set_experts_implementation("eager")
    ids = torch.randint(0, 256, (2, 32))
    ref, base = copies(model)
    with pytest.raises(rt.CaptureError, match="shapes depend on tensor values"):
        wrap(copies(model)[0], (ids,), {"labels": ids}, capture="graph")
    w = wrap(base, (ids,), {"labels": ids})
    assert w.last_entry.info["path"] == "modules"
    assert "shapes depend on tensor values" in w.last_entry.info["why"]
    train_twins(ref, w, [(ids,), (torch.randint(0, 256, (2, 32)),)],
                lambda args: {"labels": args[0]})


def test_a_capacity_limited_router_routes_the_same_tokens_when_recomputed():
    """Switch Transformers: each expert takes at most `expert_capacity` tokens
    (64 tokens, 4 experts of 8: at least half the tokens are dropped) after router
    jitter noise; its export fails (module path, where one dropout module is
    two blocks of the run). Recomputations replay the RNG state, so they
    drop the same tokens: gradients equal plain autograd's bit for bit."""
    from transformers import (SwitchTransformersConfig,
                              SwitchTransformersForConditionalGeneration)
    cfg = SwitchTransformersConfig(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                   num_decoder_layers=2, num_heads=4, num_experts=4,
                                   expert_capacity=8, encoder_sparse_step=1,
                                   decoder_sparse_step=1, router_jitter_noise=0.01,
                                   use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    torch.manual_seed(8)
    model = SwitchTransformersForConditionalGeneration(cfg).train()
    ids = torch.randint(0, 256, (2, 32))
    ref, base = copies(model)
    w = wrap(base, (ids,), {"labels": ids})
    assert w.last_entry.info["path"] == "modules"
    w.set_memory(limits(w)[0])
    train_twins(ref, w, [(ids,), (torch.randint(0, 256, (2, 32)),)],
                lambda args: {"labels": args[0]})
    assert not w.last_entry.program.left_plan

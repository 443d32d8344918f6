"""What trying models no test used found (issue 24's "models your tests
never saw", bench/unseen_models.py), each on the smallest model that shows
it."""
import logging
import warnings

import torch

import models as M
from torchkit import bounds, copies, measured_peak, same_step, wrap


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_moe_size_pass_logs_no_error():
    """A float32 Hugging Face mixture of experts: FakeTensor's meta kernel of
    aten._grouped_mm takes only bfloat16, and FakeTensor logs that at ERROR
    with a whole traceback before raising. remat's size pass (new input
    shapes, issue 25) catches it and profiles new shapes instead; the user
    saw the traceback anyway."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    seen = _Records()
    log.addHandler(seen)
    try:
        torch.manual_seed(0)
        m, args, kwargs = M.ISSUE24["mixtral"]()
        w = wrap(m, args, kwargs)
    finally:
        log.removeHandler(seen)
    assert seen.messages == []
    # the size pass did fail here, so the test shows what it says
    assert "no size formulas" in w.remat_report()
    assert log.level == logging.NOTSET  # the logger's level is given back


def test_router_logits_held_one_stage_per_layer():
    """A mixture of experts with its load-balancing loss (OLMoE, GraniteMoE,
    Mixtral): each layer's router logits are read by the loss after the last
    layer, and a boundary may not carry what the one before it carried, so
    no cut fell after the first layer (4-layer OLMoE: smallest limit 2.2x
    Hugging Face checkpointing's peak). The logits are small: held for the
    step, every layer starts a stage, and the smallest limit is at or under
    HF checkpointing's measured peak, met, bitwise."""
    from test_torch_saves import _met
    torch.manual_seed(0)
    m, args, kwargs = M.mixtral(layers=3)
    ref, mine = copies(m)
    w = wrap(mine, args, kwargs)
    e = w.last_entry
    names = e.program.stage_names()
    for b in range(1, 3):
        assert any("layers.%d" % b in n for n in names), names
    assert e.program.held_acts
    low, _ = bounds(w)
    torch.manual_seed(0)
    m2, _, _ = M.mixtral(layers=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    hf = measured_peak(m2, args, kwargs)
    assert low <= hf, "remat's smallest limit %d, HF checkpointing measured %d" % (low, hf)
    w.set_memory(low)
    same_step(ref, w, args, kwargs)
    _met(w, args, kwargs, low)

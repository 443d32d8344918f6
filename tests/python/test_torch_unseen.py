"""What trying models no test used found (issue 24's "models your tests
never saw", bench/unseen_models.py), each on the smallest model that shows
it."""
import logging

import torch

import models as M
from torchkit import wrap


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

"""The CPU kernels the tests run on (conftest.py): this CPU's own, or with
REMAT_TEST_KERNELS=plain, oneDNN off and ATen's default capability. Checked
so that `make check`'s second run cannot pass on the first run's kernels."""
import os

import pytest
import torch
from torch import nn

import torchkit  # noqa: F401 (the switch)

PLAIN = os.environ.get("REMAT_TEST_KERNELS") == "plain"
pytestmark = pytest.mark.kernels


def _kernels_of_a_conv_step():
    torch.manual_seed(0)
    conv = nn.Conv2d(8, 8, 3).train()
    x = torch.randn(2, 8, 16, 16, requires_grad=True)
    with torch.profiler.profile() as prof:
        conv(x).sum().backward()
    return {e.name for e in prof.events()}


@pytest.mark.skipif(not PLAIN, reason="REMAT_TEST_KERNELS=plain only (make check's second run)")
def test_plain_kernels_are_other_kernels():
    assert torch.backends.cpu.get_cpu_capability() == "DEFAULT"
    assert not torch.backends.mkldnn.enabled
    names = _kernels_of_a_conv_step()
    assert "aten::_slow_conv2d_forward" in names, sorted(names)
    assert not any("mkldnn" in n for n in names), sorted(names)


@pytest.mark.skipif(PLAIN or not torch.backends.mkldnn.is_available(),
                    reason="native kernels with oneDNN only")
def test_native_kernels_are_onednn():
    """The first run's convolutions are oneDNN's, so the second run's differ."""
    assert torch.backends.mkldnn.enabled
    names = _kernels_of_a_conv_step()
    assert "aten::mkldnn_convolution" in names, sorted(names)

"""REMAT_TEST_KERNELS=plain runs the tests on other CPU kernels than this
CPU's own: oneDNN off (convolutions by ATen's im2col kernels, whose
workspaces differ) and ATen's default CPU capability (no AVX2 or AVX-512
code). Profiles, and so every limit a test derives from them, change with
the kernels; `make check` runs the PyTorch tests marked `kernels` both ways,
so a test that holds on one CPU's kernels only fails here first
(docs/python.md, "Tests")."""
import os
import tempfile

import pytest

KERNELS = os.environ.get("REMAT_TEST_KERNELS", "native")
if KERNELS == "plain":
    # ATen reads it once, at its first vectorized kernel: before torch loads.
    os.environ["ATEN_CPU_CAPABILITY"] = "default"
    # Inductor's own cache: code it generated on the native run, for this
    # CPU's vector instructions, was taken from there and failed to build
    # without them ("at::vec has not been declared").
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or \
        os.path.join(tempfile.gettempdir(), "torchinductor_%d" % os.getuid())
    os.environ["TORCHINDUCTOR_CACHE_DIR"] += "-plain-kernels"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kernels: what it measures depends on kernels the plain ones replace "
        "(convolutions, compiled code); make check runs it again on them (-m kernels)")
    if KERNELS not in ("native", "plain"):
        raise pytest.UsageError("REMAT_TEST_KERNELS=%s: give native or plain" % KERNELS)
    if KERNELS == "plain":
        import torch

        import torchkit  # noqa: F401 (turns oneDNN off)
        if torch.backends.cpu.get_cpu_capability() != "DEFAULT" or \
                torch.backends.mkldnn.enabled:
            raise pytest.UsageError("REMAT_TEST_KERNELS=plain: torch was loaded before "
                                    "conftest.py could choose its kernels")


def pytest_report_header(config: pytest.Config) -> str:
    if KERNELS == "native":
        return "kernels: native (this CPU's)"
    return "kernels: plain (oneDNN off, ATen CPU capability default)"

"""DDP and FSDP2 around a remat module (gloo, two processes on the CPU):
gradients equal those of the unwrapped model under the same wrapper."""
import os
import tempfile

import pytest
import torch
import torch.multiprocessing as mp

import distworker


def _run(how):
    with tempfile.TemporaryDirectory() as d:
        init = "file://" + os.path.join(d, "init")
        out = os.path.join(d, "res")
        mp.spawn(distworker.worker, args=(2, init, how, out), nprocs=2, join=True)
        return [torch.load("%s.%d" % (out, r)) for r in range(2)]


def test_ddp_gradients_equal_plain_ddp():
    res = _run("ddp")
    assert all(r["same"] and r["n"] > 0 for r in res)


def _fsdp2_available():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _fsdp2_available(), reason="torch.distributed.fsdp.fully_shard (FSDP2) "
                    "needs torch >= 2.6")
def test_fsdp2_gradients_equal_plain_fsdp2():
    res = _run("fsdp2")
    assert all(r["same"] and r["n"] > 0 for r in res)

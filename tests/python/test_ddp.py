"""Checkpointed inside DistributedDataParallel gives the gradients of plain
DDP: 2 CPU processes, gloo backend, a BatchNorm + dropout-free ResNet-ish
model and a GPT stack."""
import os
import socket
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out_dir):
    import copy
    import remat.torch as rt
    from helpers import gpt, loss_fn, recompute_all_schedule, resnet18, segment_schedule
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = {}
    try:
        cases = [("resnet18", lambda: rt.sequential(resnet18()), lambda g: torch.randn(
            2, 3, 32, 32, generator=g)),
                 ("gpt", lambda: gpt(dropout=0.0), lambda g: torch.randint(
                     0, 64, (2, 16), generator=g))]
        for name, make, data in cases:
            torch.manual_seed(0)  # same weights on both ranks
            seq = make()
            ref = copy.deepcopy(seq)
            g = torch.Generator().manual_seed(100 + rank)  # different data per rank
            x = data(g)
            chain = rt.profile(seq, x, repeat=1)
            for label, sched in (("recompute-all", recompute_all_schedule(chain.n)),
                                 ("segments", segment_schedule(chain.n, [chain.n // 2]))):
                model = rt.Checkpointed(seq, x, chain=chain, schedule=sched)
                ddp_c = torch.nn.parallel.DistributedDataParallel(model)
                ddp_r = torch.nn.parallel.DistributedDataParallel(ref)
                for m in (seq, ref):
                    for p in m.parameters():
                        p.grad = None
                loss_fn(ddp_r(x)).backward()
                loss_fn(ddp_c(x)).backward()
                ok = all(torch.equal(p.grad, q.grad)
                         for p, q in zip(seq.parameters(), ref.parameters()))
                ok = ok and all(torch.equal(a, b) for a, b in zip(seq.buffers(), ref.buffers()))
                results["%s/%s" % (name, label)] = ok
                del ddp_c, ddp_r
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%d.txt" % rank), "w") as f:
        for k, v in sorted(results.items()):
            f.write("%s %d\n" % (k, int(v)))


class DDPTest(unittest.TestCase):
    def test_ddp_gradients_match(self):
        if not dist.is_available() or not dist.is_gloo_available():
            self.skipTest("torch.distributed with gloo is not available")
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(_worker, args=(2, _free_port(), d), nprocs=2, join=True)
            for rank in range(2):
                lines = open(os.path.join(d, "rank%d.txt" % rank)).read().split("\n")
                lines = [ln for ln in lines if ln]
                self.assertEqual(len(lines), 4)
                for ln in lines:
                    case, ok = ln.split()
                    self.assertEqual(ok, "1", "rank %d: %s gradients differ" % (rank, case))


if __name__ == "__main__":
    unittest.main()

"""The worker of test_torch_distributed, in a module of its own so that the
spawned processes import it by a plain name."""
import datetime
import gc
import os

import torch
import torch.distributed as dist


def _grads(model, x, rank, how, use_remat):
    import models as M
    from torchkit import limit_at, loss_of, wrap
    torch.manual_seed(0)
    m = M.PairNet().train()
    m.load_state_dict(model.state_dict())
    if use_remat:
        m = wrap(m, (x,), {})
        limit_at(m, 0.3)
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        m = DistributedDataParallel(m)
    else:
        from torch.distributed.fsdp import fully_shard
        fully_shard(m)
    torch.manual_seed(1 + rank)
    loss_of(m(x)).backward()
    g = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
         for p in m.parameters()]
    return [t.detach().clone() for t in g]


def worker(rank, world, init, how, out):
    import models as M
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        torch.manual_seed(0)
        model, args, kwargs = M.pairnet(batch=4)
        x = args[0] + rank  # each rank its own data
        grads = [_grads(model, x, rank, how, use_remat) for use_remat in (False, True)]
        same = all(torch.equal(a, b) for a, b in zip(*grads))
        torch.save({"same": same, "n": len(grads[1])}, "%s.%d" % (out, rank))
        # Every rank done communicating before any rank tears gloo down.
        dist.barrier()
    finally:
        gc.collect()
        dist.destroy_process_group()
    # After DDP, C++ still holds the process group past destroy_process_group,
    # so gloo's threads would be torn down by the exit's static destructors,
    # which once aborted a rank in CI ("terminate called without an active
    # exception"). The results are saved: leave without that teardown.
    os._exit(0)

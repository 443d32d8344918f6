"""Shared helpers for the PyTorch tests: tiny models, hand-built schedules,
and the comparison with plain autograd."""
import copy
import sys

import torch
from torch import nn

import remat
import remat.torch as rt
from remat import models

torch.set_num_threads(1)


def segment_schedule(n_stages, bounds):
    """A persistent schedule like checkpoint_sequential: segments split at
    `bounds` (stage indices 0 < b < L); each segment's input is kept (Fck),
    the rest recomputed (Fall) before its backward. n_stages = L + 1."""
    L = n_stages - 1
    b = [0] + sorted(bounds) + [L]
    ops = []
    for s in range(len(b) - 2):
        ops += ["Fck %d" % (b[s] + 1)] + ["Fn %d" % i for i in range(b[s] + 2, b[s + 1] + 1)]
    ops += ["Fall %d" % i for i in range(b[-2] + 1, n_stages + 1)]
    ops += ["B %d" % i for i in range(n_stages, b[-2], -1)]
    for s in range(len(b) - 3, -1, -1):
        ops += ["Fall %d" % i for i in range(b[s] + 1, b[s + 1] + 1)]
        ops += ["B %d" % i for i in range(b[s + 1], b[s], -1)]
    return remat.Schedule.from_ops(ops, "segments")


def recompute_all_schedule(n_stages):
    """Keeps only a[0]: every backward recomputes its prefix (Fck 1, Fn ...)."""
    L = n_stages - 1
    ops = ["Fck 1"] + ["Fn %d" % i for i in range(2, n_stages)] + ["Fall %d" % n_stages,
                                                                  "B %d" % n_stages]
    for j in range(L, 0, -1):
        if j > 1:
            ops += ["Fck 1"] + ["Fn %d" % i for i in range(2, j)]
        ops += ["Fall %d" % j, "B %d" % j]
    return remat.Schedule.from_ops(ops, "recompute-all")


def schedules(chain, limits=3):
    """(name, schedule) pairs: store-all, hand-built ones, and the solvers
    (optimal, revolve, sequential) at `limits` limits between their minimum
    and the store-all peak. Solvers not built yet are left out."""
    peak, _ = remat.store_all_cost(chain)
    out = [("store-all", remat.solve(chain, peak, algorithm="store-all"))]
    if chain.n <= 20:  # quadratic in the length: short chains only
        out.append(("recompute-all", recompute_all_schedule(chain.n)))
    L = chain.n - 1
    if L >= 3:
        out.append(("segments", segment_schedule(chain.n, [L // 3, 2 * L // 3])))
    for alg in ("optimal", "revolve", "sequential"):
        lo = _lowest(chain, alg)
        if lo is None:
            continue
        for k in range(limits):
            mem = lo + (peak - lo) * k // max(1, limits - 1) if peak > lo else lo
            try:
                out.append(("%s@%d" % (alg, mem), remat.solve(chain, mem, algorithm=alg)))
            except remat.InfeasibleError:
                pass
            except remat.RematError as e:  # a solver bug: report, test the others
                sys.stderr.write("note: %s at %d: %s\n" % (alg, mem, e))
    return out


def _lowest(chain, alg):
    """The algorithm's minimum memory, or None when it is not available."""
    try:
        return remat.min_memory(chain, alg)
    except remat.RematError:
        pass
    try:
        remat.solve(chain, chain.input_bytes, algorithm=alg)
        return chain.input_bytes
    except remat.InfeasibleError as e:
        return e.min_memory or None
    except remat.RematError:
        return None


def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def densenet121():
    import torchvision
    return torchvision.models.densenet121(num_classes=10)


def vit(dropout=0.1):
    import torchvision
    return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=3,
                                               num_heads=2, hidden_dim=32, mlp_dim=64,
                                               dropout=dropout, attention_dropout=dropout,
                                               num_classes=10)


def gpt(dropout=0.1):
    return models.gpt(vocab=64, n_layer=3, n_head=2, d_model=32, seq_len=16, dropout=dropout)


def loss_fn(out):
    # A loss whose gradient is dense and not uniform.
    w = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    return (out * w).sum() + out.square().mean()


def grads(module):
    return [None if p.grad is None else p.grad.clone() for p in module.parameters()]


def reference_step(seq, x, seed):
    """Plain autograd: returns (output, param grads, input grad)."""
    xr = x.detach().clone().requires_grad_(x.requires_grad)
    torch.manual_seed(seed)
    out = seq(xr)
    loss_fn(out).backward()
    return out.detach(), grads(seq), xr.grad


def checkpointed_step(model, x, seed):
    xc = x.detach().clone().requires_grad_(x.requires_grad)
    torch.manual_seed(seed)
    out = model(xc)
    loss_fn(out).backward()
    return out.detach(), grads(model.seq), xc.grad


def fresh_pair(seq):
    """A deep copy for the reference, so BatchNorm statistics evolve apart."""
    return seq, copy.deepcopy(seq)


def zero_grads(module):
    for p in module.parameters():
        p.grad = None


__all__ = ["segment_schedule", "recompute_all_schedule", "schedules", "resnet18", "densenet121",
           "vit", "gpt", "loss_fn", "reference_step", "checkpointed_step", "fresh_pair",
           "zero_grads", "nn", "rt"]

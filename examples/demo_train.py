"""make demo: a small language model trained for a few steps under a memory
budget, against plain autograd.

Two copies of one Llama-style causal LM (random weights from a config,
nothing downloaded) train on the same batches with AdamW: one by plain
autograd, one by remat.torch.checkpoint at a fraction of plain autograd's
activation peak, taking turns at each batch. Prints each one's measured
peak (remat.torch.PeakMeter: the allocator's own records, independent of
remat's bookkeeping), the median time per step after the first, and whether
the losses and weights are equal bit for bit.

    python examples/demo_train.py [--memory 0.5] [--steps 6] [--layers 4]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from typing import Any, Callable, List, Tuple

import torch

import remat.torch as rt

MiB = 1 << 20


def build(layers: int, width: int, vocab: int, seq: int) -> torch.nn.Module:
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    transformers.logging.set_verbosity_error()
    cfg = LlamaConfig(num_hidden_layers=layers, hidden_size=width, intermediate_size=4 * width,
                      num_attention_heads=width // 32, num_key_value_heads=width // 64,
                      vocab_size=vocab, max_position_embeddings=seq, use_cache=False,
                      attention_dropout=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).train()


def train(models: List[torch.nn.Module], batches: List[torch.Tensor]
          ) -> List[Tuple[List[torch.Tensor], List[float], int]]:
    """AdamW steps on the batches, the models taking turns at each batch (so
    both see the same state of the process: allocator, caches, other load).
    For each model: its losses, its seconds per step, and the peak bytes of
    a measured extra step on the first batch, gradients allocated before it
    as after zero_grad(set_to_none=False)."""
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in models]
    runs: List[Tuple[List[torch.Tensor], List[float]]] = [([], []) for _ in models]

    def step(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
        loss = model(ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    for i, ids in enumerate(batches):
        for model, opt, (losses, times) in zip(models, opts, runs):
            torch.manual_seed(i)
            t = time.perf_counter()
            losses.append(step(model, ids))
            times.append(time.perf_counter() - t)
            opt.step()
            opt.zero_grad(set_to_none=False)
    return [(losses, times, measured(step, model, batches[0]))
            for model, (losses, times) in zip(models, runs)]


def measured(fn: Callable[..., Any], *args: Any) -> int:
    with rt.PeakMeter() as meter:
        fn(*args)
    return meter.peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory", type=float, default=0.5,
                    help="remat's limit, a fraction of plain autograd's peak (default 0.5)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    torch.manual_seed(0)
    vocab = 2048
    model = build(a.layers, a.width, vocab, a.seq)
    batches = [torch.randint(3, vocab, (a.batch, a.seq)) for _ in range(a.steps)]
    n_params = sum(p.numel() for p in model.parameters())
    print("remat demo: a %d-layer Llama-style LM, %.1f M parameters, batch %d x %d tokens, "
          "%d AdamW steps, CPU (threads: %d)" % (a.layers, n_params / 1e6, a.batch, a.seq,
                                                a.steps, torch.get_num_threads()))

    plain_model, remat_model = copy.deepcopy(model), copy.deepcopy(model)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = rt.checkpoint(remat_model, (batches[0],), {"labels": batches[0]}, memory=a.memory,
                          cache=False, progress=False)
    prepare_s = time.perf_counter() - t
    (p_loss, p_times, p_peak), (r_loss, r_times, r_peak) = train([plain_model, w], batches)
    e = w.last_entry

    p_step = statistics.median(p_times[1:] or p_times)
    r_step = statistics.median(r_times[1:] or r_times)
    print("plain autograd  peak %7.1f MiB   %.3f s/step" % (p_peak / MiB, p_step))
    print("remat           peak %7.1f MiB   %.3f s/step (%+.0f%%)   limit %.1f MiB "
          "(memory=%g of plain's)" % (r_peak / MiB, r_step, 100 * (r_step / p_step - 1),
                                      e.limit / MiB, a.memory))
    print("                %.0f%% of plain's peak; %s path, %d stages; capture and profile "
          "took %.1f s, once" % (100 * r_peak / p_peak, e.info["path"], e.chain.n - 1,
                                  prepare_s))
    same_loss = all(torch.equal(x, y) for x, y in zip(p_loss, r_loss))
    same_weights = all(torch.equal(x, y) for x, y in zip(plain_model.parameters(),
                                                           remat_model.parameters()))
    print("losses %s, weights after %d steps %s" % (
        "equal bit for bit" if same_loss else "DIFFER",
        a.steps, "equal bit for bit" if same_weights else "DIFFER"))
    if r_peak > e.limit or not (same_loss and same_weights):
        raise SystemExit("remat demo: FAILED (peak above the limit, or results differ)")


if __name__ == "__main__":
    main()

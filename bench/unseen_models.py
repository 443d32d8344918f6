#!/usr/bin/env python3
"""Issue 24's "models your tests never saw": Hugging Face models that no test
and no other benchmark builds (a mixture of experts, a state-space model,
parallel-residual decoders, soft-capping with sliding windows, an encoder),
small configs, random weights, nothing downloaded. For each, measured with
one meter (tests/python/torchkit.py: measured_peak, rt.PeakMeter around one
forward and backward, gradients allocated before it) in one run:

  plain     plain autograd
  hf-gc     gradient_checkpointing_enable, non-reentrant (torch_peers.hf_checkpointing)
  ckpt-seq  checkpoint_sequential over the layer stack, best segment count
            (torch_peers._stack_module; "fails" where the model's own code
            around its layer loop does not take the stack)
  sac       selective checkpointing around every layer, matmul outputs saved
            (torch_peers.sac_context, through hf_checkpointing)
  remat     remat.torch.checkpoint: its smallest accepted limit (the
            InfeasibleError's min_memory) and each peer's measured peak
            at or above it: the measured peak, remat's prediction and
            whether one step's gradients are bitwise plain autograd's

Prints a markdown table (BENCHMARKS.md, "Models no test uses") and
/proc/loadavg before and after.

    python bench/unseen_models.py                 # every model
    python bench/unseen_models.py --models olmoe,mamba2
"""
import argparse
import copy
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

MIB = float(1 << 20)
W, L, SEQ, BATCH, VOCAB = 128, 4, 64, 2, 512


def configs():
    """name -> (kind, a function building the model)."""
    import transformers as t
    common = dict(vocab_size=VOCAB, hidden_size=W, num_hidden_layers=L, use_cache=False,
                  bos_token_id=0, eos_token_id=0, pad_token_id=0)
    dec = dict(common, num_attention_heads=4, num_key_value_heads=2, intermediate_size=2 * W,
               max_position_embeddings=SEQ)

    def olmoe():
        return t.OlmoeForCausalLM(t.OlmoeConfig(**dec, num_experts=4, num_experts_per_tok=2,
                                                output_router_logits=True))

    def granitemoe():
        return t.GraniteMoeForCausalLM(t.GraniteMoeConfig(**dec, num_local_experts=4,
                                                          num_experts_per_tok=2,
                                                          output_router_logits=True))

    def mamba2():
        return t.Mamba2ForCausalLM(t.Mamba2Config(
            vocab_size=VOCAB, hidden_size=W, num_hidden_layers=L, num_heads=8, head_dim=32,
            expand=2, state_size=16, n_groups=1, chunk_size=16, use_cache=False,
            bos_token_id=0, eos_token_id=0, pad_token_id=0))

    def gptj():
        return t.GPTJForCausalLM(t.GPTJConfig(
            vocab_size=VOCAB, n_embd=W, n_layer=L, n_head=4, rotary_dim=16, n_positions=SEQ,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
            bos_token_id=0, eos_token_id=0))

    def falcon():
        return t.FalconForCausalLM(t.FalconConfig(
            vocab_size=VOCAB, hidden_size=W, num_hidden_layers=L, num_attention_heads=4,
            parallel_attn=True, new_decoder_architecture=False, multi_query=True, bias=False,
            hidden_dropout=0.0, attention_dropout=0.0, use_cache=False,
            bos_token_id=0, eos_token_id=0))

    def gemma2():
        return t.Gemma2ForCausalLM(t.Gemma2Config(**dec, head_dim=32, sliding_window=16,
                                                  attn_logit_softcapping=50.0,
                                                  final_logit_softcapping=30.0))

    def stablelm():
        return t.StableLmForCausalLM(t.StableLmConfig(**dec, partial_rotary_factor=0.25))

    def modernbert():
        return t.ModernBertForMaskedLM(t.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=W, num_hidden_layers=L, num_attention_heads=4,
            intermediate_size=2 * W, max_position_embeddings=SEQ, local_attention=16,
            global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=0, eos_token_id=0,
            cls_token_id=0, sep_token_id=0))

    return {"olmoe": ("mixture of experts, router loss on", olmoe),
            "granitemoe": ("mixture of experts, router loss on", granitemoe),
            "mamba2": ("state space", mamba2),
            "gptj": ("parallel residual", gptj),
            "falcon": ("parallel residual, multi-query", falcon),
            "gemma2": ("soft-capping, sliding window", gemma2),
            "stablelm": ("partial rotary", stablelm),
            "modernbert": ("encoder, masked LM", modernbert)}


class Task:
    """The interface of torch_peers.Task for its wrap_remat and min_limit."""
    hf = True

    def __init__(self, name, model, ids):
        self.name, self.model = name, model.train()
        self.args, self.kwargs = (ids,), {"labels": ids}

    def remat_kwargs(self):
        return self.kwargs

    def loss_fn(self):
        return None


def layer_stack(model):
    """(parent, attribute) of the model's largest ModuleList of alike blocks."""
    from torch import nn
    best = None
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) > 1 and \
                len({type(b) for b in mod}) == 1 and (best is None or len(mod) > len(best[1])):
            best = (name, mod)
    parent, _, attr = best[0].rpartition(".")
    return model.get_submodule(parent), attr


def measure(model, task):
    """One warm-up step, then the measured peak of one step (bytes)."""
    import torchkit
    torchkit.zero_grads(model)
    torchkit.step(model, task.args, task.kwargs)
    return torchkit.measured_peak(model, task.args, task.kwargs)


def peers(task, log):
    """{method: measured peak or an error line}."""
    from torch import nn
    from torch_peers import _stack_module, first_line, hf_checkpointing
    out = {}
    out["plain"] = measure(copy.deepcopy(task.model), task)
    for method, sac in (("hf-gc", False), ("sac", True)):
        m = copy.deepcopy(task.model)
        try:
            hf_checkpointing(m, 1, sac)
            out[method] = measure(m, task)
        except Exception as e:
            out[method] = first_line(e)
    m = copy.deepcopy(task.model)
    parent, attr = layer_stack(m)
    stack = _stack_module()(list(getattr(parent, attr)))
    setattr(parent, attr, nn.ModuleList([stack]))
    best = None
    for k in range(2, len(stack.blocks) + 1):
        stack.mode, stack.k = "seq", k
        try:
            p = measure(m, task)
        except Exception as e:
            best = first_line(e)
            break
        if best is None or p < best[0]:
            best = (p, k)
    out["ckpt-seq"] = best if isinstance(best, str) else best[0]
    out["ckpt-seq k"] = None if isinstance(best, str) else best[1]
    for k, v in out.items():
        if k != "ckpt-seq k":
            log("  %-9s %s" % (k, "%.3f MiB" % (v / MIB) if isinstance(v, int) else v))
    return out


def remat_at(task, w, ref, limit):
    """(measured peak, predicted peak, bitwise) of w solved for `limit`."""
    import torchkit
    w.set_memory(limit)
    pred = w.last_entry.predicted_peak
    try:
        torchkit.same_step(ref, w, task.args, task.kwargs)
        bitwise = True
    except AssertionError:
        bitwise = False
    return measure(w, task), pred, bitwise


def trial(name, build, log):
    import torch
    from torch_peers import first_line, min_limit, wrap_remat
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build()
    ids = torch.randint(1, VOCAB, (BATCH, SEQ))
    task = Task(name, model, ids)
    res = {"model": name}
    res.update(peers(task, log))
    try:
        w = wrap_remat(task, False, quick=True)
        low = min_limit(w, "optimal")
    except Exception as e:
        res["remat"] = first_line(e)
        log("  remat     %s" % res["remat"])
        return res
    e = w.last_entry
    res["path"] = "%s, %d stages" % (e.info["path"], e.chain.n - 1)
    res["low"] = low
    log("  remat     %s, smallest limit %.3f MiB" % (res["path"], low / MIB))
    ref = copy.deepcopy(task.model)
    res["at"] = {}
    targets = [("smallest", low)] + [(k, res[k]) for k in ("hf-gc", "ckpt-seq", "sac")
                                     if isinstance(res[k], int) and res[k] >= low]
    for label, limit in targets:
        try:
            peak, pred, bitwise = remat_at(task, w, ref, limit)
        except Exception as ex:
            res["at"][label] = first_line(ex)
            log("  remat at %-8s %s" % (label, res["at"][label]))
            continue
        res["at"][label] = (limit, peak, pred, bitwise)
        log("  remat at %-8s limit %.3f  measured %.3f  predicted %.3f (%+.2f %%)  %s" % (
            label, limit / MIB, peak / MIB, pred / MIB, 100.0 * (peak - pred) / pred,
            "bitwise" if bitwise else "NOT BITWISE"))
    return res


def mib(v):
    return "%.2f" % (v / MIB) if isinstance(v, int) else "fails"


def table(results, kinds):
    lines = ["| model | kind | plain | hf-gc | ckpt-seq (best k) | sac (mm saved) | "
             "remat smallest limit | measured at it | predicted at it | off | "
             "at every peer's peak: ≤ limit, within 2 %, bitwise |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        seq = mib(r["ckpt-seq"]) + (" (k=%d)" % r["ckpt-seq k"] if r["ckpt-seq k"] else "")
        head = "| %s | %s | %s | %s | %s | %s |" % (r["model"], kinds[r["model"]], mib(r["plain"]),
                                                  mib(r["hf-gc"]), seq, mib(r["sac"]))
        if "low" not in r:
            lines.append(head + " fails: %s | | | | |" % r.get("remat", ""))
            continue
        at = r["at"].get("smallest")
        if isinstance(at, tuple):
            _, peak, pred, _ = at
            low_cols = " %s | %s | %s | %+.2f %% |" % (mib(r["low"]), mib(peak), mib(pred),
                                                       100.0 * (peak - pred) / pred)
        else:
            low_cols = " %s | fails | | |" % mib(r["low"])
        checks = []
        for label, v in r["at"].items():
            if not isinstance(v, tuple):
                checks.append("%s: fails" % label)
                continue
            limit, peak, pred, bitwise = v
            ok = peak <= limit and abs(peak - pred) <= 0.02 * pred
            checks.append("%s: %s%s" % (label, "yes" if ok else "NO", "" if bitwise
                                        else ", not bitwise"))
        lines.append(head + low_cols + " " + "; ".join(checks) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    from torch_peers import loadavg
    cfgs = configs()
    names = [n for n in args.models.split(",") if n] or list(cfgs)
    bad = [n for n in names if n not in cfgs]
    if bad:
        print("unseen_models: unknown model %s (known: %s)" % (", ".join(bad), ", ".join(cfgs)),
              file=sys.stderr)
        return 2

    def log(s):
        print(s, flush=True)
    load0 = loadavg()
    results = []
    for n in names:
        t = time.perf_counter()
        log("%s (%s)" % (n, cfgs[n][0]))
        results.append(trial(n, cfgs[n][1], log))
        log("  (%.0f s)" % (time.perf_counter() - t))
    log("")
    log(table(results, {n: k for n, (k, _) in cfgs.items()}))
    log("")
    log("torch %s, transformers %s; /proc/loadavg before %s, after %s" % (
        torch.__version__, transformers.__version__, load0, loadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch's own activation checkpointing side by side with remat.torch
(issue 9): step time against peak activation memory, same models, same
batch, same run, same memory measure.

Models: a transformers GPT-2, Llama and Mixtral (a mixture of experts; from
configs, random weights, nothing downloaded; dropout 0; Mixtral's loss is the
plain LM loss, its router's auxiliary loss off as in its default config) and
a ResNet-50 (tests/python/models.py).
Methods, each on its own copy of the same initial weights:

  plain           plain autograd
  hf-gc           Hugging Face activation checkpointing (torch.utils.checkpoint,
                  non-reentrant) around every n-th layer; the ResNet: around
                  every n-th bottleneck
  ckpt-seq        torch.utils.checkpoint.checkpoint_sequential over the layer
                  stack, every segment count (the model's own embedding and
                  head code runs around it; non-reentrant)
  sac             selective activation checkpointing around every layer with
                  PyTorch's documented policy: save the outputs of matmuls
                  (mm, addmm, bmm, baddbmm, the experts' _grouped_mm;
                  convolution in the CNN), recompute the rest
  compile         torch.compile without a budget, and with
                  torch._functorch.config.activation_memory_budget 0.0 ... 1.0
  remat-optimal   remat.torch.checkpoint, profiled once; set_memory() solves
  remat-revolve   again for each limit: optimal at evenly spaced limits and at
  remat-sequential  each peer's measured memory; revolve and sequential
  remat-compiled  remat's optimal schedules with the stages' graphs compiled by
                  torch.compile, profiled compiled: checkpoint(compile=True) on
                  the graph path; on the module path a prototype that compiles
                  the blocks' forwards (see compile_stages(), reprofile())

Measures of every point:
  * step time, forward + backward + SGD step, and forward + backward alone
    (the same steps): medians over --rounds steps after warm-up. Each round
    runs every point once in a new random order, so machine noise hits all
    methods alike; the spread (min, max) and /proc/loadavg are recorded.
  * on CPU, glibc keeps freed blocks for reuse (--malloc keep, mallopt), as
    CUDA's caching allocator does: otherwise each step maps its large
    activations afresh, page faults included, and that cost depends on the
    order the points run in, not on the method.
  * remat's predicted forward + backward time, twice: from the profile
    remat.torch took before the rounds (what a user gets), and from one
    profile pass of remat.torch's own per round among the points (the
    per-stage medians, as the steps' medians), so the cost model is judged
    on stage times sampled at the moments the steps ran (ProfilePass).
  * peak activation memory: remat.torch.PeakMeter around one training step
    with the parameter gradients allocated before it (as after
    zero_grad(set_to_none=False)), the model's output object alive through
    the backward as in a training loop. CPU: the profiler's allocation
    events; CUDA: max_memory_allocated. The same meter for every method, not
    remat's bookkeeping.

Writes OUT/torch_peers_<model>.csv and .png (OUT: --out, default docs/img;
build/torch_peers with --quick) and prints the markdown tables of
BENCHMARKS.md and the prediction errors (MAPE) of remat's points.

    make peers                                  # every model, CPU sizes
    make peers PEERS_ARGS="--models mixtral"    # the mixture of experts alone
    python bench/torch_peers.py --quick         # logic check, tiny sizes
    python bench/torch_peers.py --device cuda   # the same on a GPU (sizes "gpu")
    python bench/torch_peers.py --plot-only     # PNGs and tables from the CSVs
"""
import argparse
import copy
import csv
import functools
import os
import random
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))  # models.py: the ResNet-50

MODELS = ("gpt2", "llama", "mixtral", "resnet50")
HF = ("gpt2", "llama", "mixtral")
FAMILIES = ("plain", "hf-gc", "ckpt-seq", "sac", "compile", "remat", "remat-compiled")
REMAT_ALGOS = ("optimal", "revolve", "sequential")
MIB = float(1 << 20)

# Sizes: a training step takes one to a few seconds on the 2-core CPU ("cpu"),
# GPU-sized models ("gpu"), and tiny ones for the logic check ("quick").
SIZES = {
    "cpu": {"gpt2": dict(layers=8, width=512, heads=8, batch=2, seq=256, vocab=8192),
            "llama": dict(layers=8, width=512, heads=8, batch=2, seq=256, vocab=8192),
            # smaller than the others: a run with compile budgets fits ~20 min on the shared host
            "mixtral": dict(layers=6, width=128, heads=4, batch=2, seq=128, vocab=2048,
                            experts=4, top=2, inter=256),
            "resnet50": dict(base=64, batch=4, image=160, blocks=(3, 4, 6, 3))},
    "gpu": {"gpt2": dict(layers=12, width=768, heads=12, batch=8, seq=1024, vocab=50257),
            "llama": dict(layers=16, width=1024, heads=16, batch=4, seq=1024, vocab=32000),
            "mixtral": dict(layers=12, width=1024, heads=16, batch=4, seq=1024, vocab=32000,
                            experts=8, top=2, inter=2048),
            "resnet50": dict(base=64, batch=64, image=224, blocks=(3, 4, 6, 3))},
    "quick": {"gpt2": dict(layers=3, width=64, heads=2, batch=2, seq=32, vocab=128),
              "llama": dict(layers=3, width=64, heads=2, batch=2, seq=32, vocab=128),
              "mixtral": dict(layers=3, width=64, heads=2, batch=2, seq=32, vocab=128,
                              experts=4, top=2, inter=64),
              "resnet50": dict(base=8, batch=2, image=32, blocks=(1, 1, 2, 1))},
}

CSV_FIELDS = ["model", "size", "device", "family", "setting", "status", "peak_bytes",
              "step_s", "step_min_s", "step_max_s", "fb_s", "fb_min_s", "fb_max_s", "n_steps",
              "limit_bytes", "pred_peak_bytes", "pred_fb_ms", "pred_fb_rounds_ms", "load_min",
              "load_max", "note", "saves", "torch", "date"]


def keep_freed_memory():
    """Has glibc keep freed blocks of up to 32 MiB for reuse (True if set).
    By default it unmaps a large block on free and maps it again at the next
    allocation, so every step pays page faults and zeroing for its
    activations, more the more a method's pattern of sizes changes between
    steps (switching remat's schedule between points cost up to 15 % of a
    step). CUDA's caching allocator never does this; on CPU PyTorch's tuning
    guide suggests jemalloc or tcmalloc for the same reason."""
    import ctypes
    import ctypes.util
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(M_TRIM_THRESHOLD, 1 << 30))


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [float("nan")] * 3


def first_line(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:200] if text else "")


# ---- models -----------------------------------------------------------------------------

class Task:
    """One model and its batch. forward(m) runs a training forward of m (the
    model, a wrapper or a compiled one) and returns (loss, output)."""

    def __init__(self, name, size, device, seed):
        import torch
        torch.manual_seed(seed)
        self.name, self.size, self.device = name, size, device
        self.hf = name in HF
        if self.hf:
            model = hf_model(name, size)
            ids = torch.randint(0, size["vocab"], (size["batch"], size["seq"]))
            self.args, self.kwargs = (ids.to(device),), {"labels": ids.to(device)}
        else:
            import models as M
            model = M.ResNet(layers=size["blocks"], base=size["base"], classes=1000)
            x = torch.randn(size["batch"], 3, size["image"], size["image"])
            self.args, self.kwargs = (x.to(device),), {}
            self.labels = torch.randint(0, 1000, (size["batch"],)).to(device)
        self.model = model.to(device).train()

    def forward(self, m):
        import torch.nn.functional as F
        out = m(*self.args, **self.kwargs)
        if self.hf:
            return out.loss, out
        return F.cross_entropy(out, self.labels), out

    def loss_fn(self):
        """For remat: the loss the CNN's caller computes, given as `loss=`, so
        that it is captured and counted with the model (docs/python.md)."""
        import torch.nn.functional as F
        return None if self.hf else F.cross_entropy

    def remat_kwargs(self):
        return self.kwargs if self.hf else dict(self.kwargs, loss_args=(self.labels,))

    def forward_remat(self, w):
        if self.hf:
            return self.forward(w)
        return w(*self.args, **self.remat_kwargs()), None


def hf_model(name, s):
    import transformers
    transformers.logging.set_verbosity_error()
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=s["layers"], n_embd=s["width"], n_head=s["heads"],
                         vocab_size=s["vocab"], n_positions=s["seq"], use_cache=False,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(cfg)
    if name == "mixtral":
        from transformers import MixtralConfig, MixtralForCausalLM
        cfg = MixtralConfig(num_hidden_layers=s["layers"], hidden_size=s["width"],
                            intermediate_size=s["inter"], num_attention_heads=s["heads"],
                            num_key_value_heads=max(1, s["heads"] // 2), vocab_size=s["vocab"],
                            max_position_embeddings=s["seq"], num_local_experts=s["experts"],
                            num_experts_per_tok=s["top"], use_cache=False,
                            output_router_logits=False, attention_dropout=0.0,
                            bos_token_id=0, eos_token_id=0, pad_token_id=0)
        return MixtralForCausalLM(cfg)
    from transformers import LlamaConfig, LlamaForCausalLM
    inter = max(64, int(s["width"] * 8 / 3) // 64 * 64)
    cfg = LlamaConfig(num_hidden_layers=s["layers"], hidden_size=s["width"],
                      intermediate_size=inter, num_attention_heads=s["heads"],
                      num_key_value_heads=max(1, s["heads"] // 2), vocab_size=s["vocab"],
                      max_position_embeddings=s["seq"], use_cache=False,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return LlamaForCausalLM(cfg)


def sac_context():
    """PyTorch's documented selective-checkpointing policy (torch.utils.checkpoint
    docs): keep what the matmuls compute, recompute everything else."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    aten = torch.ops.aten
    save = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
            aten.convolution.default}
    if hasattr(aten, "_grouped_mm"):  # the experts' matmuls of transformers' MoE models
        save.add(aten._grouped_mm.default)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def _stack_module():
    from torch import nn
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    def call_block(block, args, kwargs, h):
        out = block(h, *args, **kwargs)
        return out[0] if isinstance(out, tuple) else out

    class Stack(nn.Module):
        """The model's layer stack as one module: the layers' side arguments
        (masks, rotary tables) bound, then checkpoint_sequential over them
        (mode "seq", k segments), torch.utils.checkpoint around every k-th
        layer ("every"), SAC around every layer ("sac"), or plain ("plain")."""

        def __init__(self, blocks):
            super().__init__()
            self.blocks = nn.ModuleList(blocks)
            self.mode, self.k = "plain", 1

        def forward(self, h, *args, **kwargs):
            fns = [functools.partial(call_block, b, args, kwargs) for b in self.blocks]
            if self.mode == "seq":
                return checkpoint_sequential(fns, self.k, h, use_reentrant=False)
            for i, f in enumerate(fns):
                if self.mode == "every" and i % self.k == 0:
                    h = checkpoint(f, h, use_reentrant=False)
                elif self.mode == "sac":
                    h = checkpoint(f, h, use_reentrant=False, context_fn=sac_context)
                else:
                    h = f(h)
            return h
    return Stack


def staged(task, model):
    """A copy of `model` whose layer stack is one Stack module; the model's
    own forward (embeddings, masks, head, loss) runs around it."""
    from torch import nn
    Stack = _stack_module()
    m = copy.deepcopy(model)
    if task.hf:
        parent = m.transformer if task.name == "gpt2" else m.model
        attr = "h" if task.name == "gpt2" else "layers"
        stack = Stack(list(getattr(parent, attr)))
        setattr(parent, attr, nn.ModuleList([stack]))
    else:
        stack = Stack([b for layer in (m.layer1, m.layer2, m.layer3, m.layer4) for b in layer])
        m.layer1, m.layer2, m.layer3, m.layer4 = stack, nn.Identity(), nn.Identity(), nn.Identity()
    return m, stack


def hf_checkpointing(model, every, sac):
    """Hugging Face's own switch (activation_checkpointing_enable, or the older
    gradient_checkpointing_enable without every_n_layers), non-reentrant."""
    kw = {"use_reentrant": False}
    if sac:
        kw["context_fn"] = sac_context
    enable = getattr(model, "activation_checkpointing_enable", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if enable is not None:
            enable(activation_checkpointing_kwargs=kw, every_n_layers=every)
        elif every == 1:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        else:
            raise RuntimeError("this transformers has no every_n_layers")


# ---- points ---------------------------------------------------------------------------

class Copy:
    """A model copy and its optimizer (SGD without momentum: its step allocates
    nothing, so the step's peak is the forward and backward's)."""

    def __init__(self, model, params=None):
        import torch
        self.model = model
        self.opt = torch.optim.SGD(list(params if params is not None else model.parameters()),
                                   lr=1e-4)
        self.state = None  # what prepare() last set on it


class Point:
    def __init__(self, family, setting, cp, run, prepare=None):
        self.family, self.setting, self.cp, self.run, self.prepare = (
            family, setting, cp, run, prepare)
        self.status = "ok"
        self.peak = None
        self.fb, self.step, self.loads = [], [], []
        self.limit = self.pred_peak = self.pred_fb_ms = None
        self.schedule = None  # remat's points: the solved schedule
        self.pred_fb_rounds_ms = None  # its time on the stage times profiled in the rounds
        self.note = ""
        self.saves = ""

    def label(self):
        return "%s %s" % (self.family, self.setting)


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step(pt, device):
    """One step: (forward + backward seconds, whole step seconds)."""
    if pt.prepare:
        pt.prepare()
    pt.cp.opt.zero_grad(set_to_none=False)
    sync(device)
    t0 = time.perf_counter()
    loss, out = pt.run()
    loss.backward()
    sync(device)
    t1 = time.perf_counter()
    pt.cp.opt.step()
    sync(device)
    t2 = time.perf_counter()
    del loss, out
    return t1 - t0, t2 - t0


def measure_peak(pt, device):
    import remat.torch as rt
    if pt.prepare:
        pt.prepare()
    pt.cp.opt.zero_grad(set_to_none=False)
    with rt.PeakMeter(device) as m:
        loss, out = pt.run()
        loss.backward()
        pt.cp.opt.step()
        del loss, out
    return m.peak


def warm(points, device, steps, log):
    """Warm-up steps (compiles happen here), then the peak of one step."""
    for pt in points:
        t = time.perf_counter()
        try:
            for _ in range(steps):
                train_step(pt, device)
            pt.peak = measure_peak(pt, device)
        except Exception as e:  # a method that fails here is recorded, not fatal
            pt.status = "failed: " + first_line(e)
        log("  %-18s %-22s %s  (%.1f s)" % (pt.family, pt.setting,
                                            "%.1f MiB" % (pt.peak / MIB) if pt.status == "ok"
                                            else pt.status, time.perf_counter() - t))


def peer_points(task, which, budgets, device, log):
    import torch
    pts = []
    base = task.model
    if "plain" in which:
        cp = Copy(copy.deepcopy(base))
        pts.append(Point("plain", "", cp, functools.partial(task.forward, cp.model)))
    if which & {"ckpt-seq", "sac"} or ("hf-gc" in which and not task.hf):
        m, stack = staged(task, base)
        check_same_loss(task, base, m)
        cp = Copy(m)
        run = functools.partial(task.forward, m)

        def mode(mode, k, stack=stack):
            stack.mode, stack.k = mode, k
        L = len(stack.blocks)
        if "hf-gc" in which and not task.hf:
            for n in (1, 2, 4):
                pts.append(Point("hf-gc", "every %d" % n, cp, run,
                                 functools.partial(mode, "every", n)))
        if "ckpt-seq" in which:
            for k in range(2, L + 1):
                pts.append(Point("ckpt-seq", "k=%d" % k, cp, run,
                                 functools.partial(mode, "seq", k)))
        if "sac" in which and not task.hf:
            pts.append(Point("sac", "mm/conv saved", cp, run, functools.partial(mode, "sac", 1)))
    if task.hf and which & {"hf-gc", "sac"}:
        cp = Copy(copy.deepcopy(base))
        run = functools.partial(task.forward, cp.model)

        def hf(every, sac, cp=cp):
            if cp.state != (every, sac):
                hf_checkpointing(cp.model, every, sac)
                cp.state = (every, sac)
        if "hf-gc" in which:
            evs = (1, 2, 4) if hasattr(base, "activation_checkpointing_enable") else (1,)
            for n in evs:
                pts.append(Point("hf-gc", "every %d" % n, cp, run, functools.partial(hf, n, False)))
        if "sac" in which:
            pts.append(Point("sac", "mm saved", cp, run, functools.partial(hf, 1, True)))
    if "compile" in which:
        cp = Copy(copy.deepcopy(base))
        set_recompile_limit(4 * (len(budgets) + 2))
        for b in [None] + list(budgets):
            fn = torch.compile(cp.model, backend=budget_backend(b))
            pts.append(Point("compile", "default" if b is None else "budget %.1f" % b, cp,
                             functools.partial(task.forward, fn)))
    return pts


def check_same_loss(task, a, b):
    """The staged copy computes what the model does (same weights, no grad)."""
    import torch
    with torch.no_grad():
        la, lb = task.forward(a)[0], task.forward(b)[0]
    if not torch.allclose(la, lb, rtol=1e-5, atol=1e-6):
        raise RuntimeError("the staged %s computes loss %r, the model %r" % (task.name, lb, la))


def set_recompile_limit(n):
    """Every budget is a cache entry of the same forward code."""
    import torch._dynamo.config as dc
    for name in ("recompile_limit", "cache_size_limit"):
        try:
            if getattr(dc, name) < n:
                setattr(dc, name, n)
        except AttributeError:
            pass


def budget_backend(budget):
    """Inductor with the partitioner's activation budget set while it compiles.
    A backend object per budget: dynamo keys its cache on the backend, so the
    budgets get separate compiled graphs of the same model."""
    if budget is None:
        return "inductor"

    def backend(gm, example_inputs):
        import torch._functorch.config as fc
        from torch._inductor.compile_fx import compile_fx
        with fc.patch(activation_memory_budget=budget):
            return compile_fx(gm, example_inputs)
    return backend


# ---- remat ----------------------------------------------------------------------------

def wrap_remat(task, cache_dir, quick):
    import remat.torch as rt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.checkpoint(copy.deepcopy(task.model), task.args, task.remat_kwargs(), memory=1.0,
                             repeat=1 if quick else 5, cache=cache_dir, progress=False,
                             loss=task.loss_fn())


def min_limit(w, algorithm):
    """The smallest limit `algorithm` meets (libremat's answer)."""
    import remat
    try:
        w.set_memory(1, algorithm=algorithm)
    except remat.InfeasibleError as e:
        return int(e.min_memory)
    return 1


def spaced(low, high, n):
    if n <= 1:
        return [high]
    return [int(low + (high - low) * i / (n - 1)) for i in range(n)]


def remat_points(task, w, cp, family, limits_by_algo):
    """Points on one RematModule: prepare() solves for the point's limit."""
    from remat.torch._saves import describe  # the partial saves of each point's plan
    pts = []

    def solve(limit, algo):
        if cp.state != (limit, algo):
            w.set_memory(limit, algorithm=algo)
            cp.state = (limit, algo)
    run = functools.partial(task.forward_remat, w)
    for algo, limits in limits_by_algo.items():
        for lim in limits:
            fam = family if family != "remat" else "remat-" + algo
            pt = Point(fam, "%s %.1f MiB" % (algo, lim / MIB), cp, run,
                       functools.partial(solve, lim, algo))
            try:
                solve(lim, algo)
            except Exception as e:
                pt.status = "failed: " + first_line(e)
            else:
                e = w.last_entry
                pt.limit, pt.pred_peak, pt.pred_fb_ms = e.limit, e.predicted_peak, e.schedule.time
                pt.schedule = e.schedule
                pt.note = "%s path, %d stages" % (e.info["path"], e.chain.n - 1)
                pt.saves = describe(e.plan.steps)
            pts.append(pt)
    return pts


class ProfilePass:
    """remat.torch's own profile of one RematModule's stages, run once per
    round among the points (--pass-repeat runs of each stage). The one profile
    that remat.torch takes before the rounds samples the machine at one
    moment; on a shared host whose speed drifts by 20 % and more over
    minutes, that moment decides most of the time error. These passes sample
    the stage times at the moments the steps are timed, so predict() gives
    each point's schedule its time on the per-stage medians over the rounds:
    the cost model's error without the drift. Both predictions are
    reported."""

    def __init__(self, w, task, points, repeat):
        self.program, self.chain = w.last_entry.program, w.last_entry.chain
        self.w, self.task, self.points, self.repeat = w, task, points, repeat
        self.times = []  # per round: [(fwd ms, bwd ms)] of each stage

    def run(self):
        from remat.torch._progress import Progress
        stages = self.program.profile(self.w._remat_target(), self.task.args,
                                      self.task.remat_kwargs(), self.repeat,
                                      Progress("profiling", False)).stages
        self.times.append([(st["fwd_time"], st["bwd_time"], st.get("stop_time"))
                           for st in stages])

    def predict(self):
        import remat
        if not self.times:
            return
        stages = self.chain.stages
        for i, st in enumerate(stages):
            st["fwd_time"] = statistics.median(t[i][0] for t in self.times)
            st["bwd_time"] = statistics.median(t[i][1] for t in self.times)
            if "stop_time" in st:  # (the stopped Fall, never above the whole one)
                st["stop_time"] = min(st["fwd_time"], statistics.median(
                    t[i][2] if t[i][2] is not None else t[i][0] for t in self.times))
        med = remat.Chain(stages, self.chain.input_bytes, self.chain.input_grad_bytes,
                          time_unit="ms")
        for pt in self.points:
            if pt.schedule is not None:
                pt.pred_fb_rounds_ms = remat.simulate(med, pt.schedule).time


def matched_limits(peers, low, plain, n, tol):
    """Each peer's measured peak in [low, plain] (remat at the peer's own
    memory), remat's smallest limit, plus those of n evenly spaced limits
    not within tol of one of them."""
    lims = sorted({int(pt.peak) for pt in peers if pt.status == "ok" and low <= pt.peak <= plain}
                  | {int(low)})
    lims += [x for x in spaced(low, plain, n) if all(abs(x - y) > tol for y in lims)]
    return sorted(lims)


def compile_stages(w):
    """Compiles the stages of the RematModule's program in place, from the
    profile already cached. Graph path: what checkpoint(compile=True) does
    (GraphProgram.compile_stages); module path (prototype, no library option):
    each block's forward, the executor's hooks staying outside the compiled
    code. Returns (compiled, total)."""
    import torch
    prog = w.last_entry.program
    if prog.path == "graph":
        return prog.compile_stages(), len(prog.stages)
    for blk in prog.blocks:
        blk.module.forward = torch.compile(blk.module.forward)
    return len(prog.blocks), len(prog.blocks)


def reprofile(w, task):
    """Prototype: profiles the compiled stages and solves on that profile, as a
    compile option of remat.torch.checkpoint would; it uses remat.torch's
    private profiled and Prepared. The first profile compiles every variant of
    every stage (with and without grad) and is thrown away."""
    import dataclasses

    from remat.torch._prepare import Prepared, profiled
    from remat.torch._progress import Progress
    e = w.last_entry
    cfg = dataclasses.replace(w.remat_config, cache=False)
    for _ in range(2):
        chain, held, _, _ = profiled(e.program, w._remat_target(), task.args,
                                     task.remat_kwargs(), cfg,
                                     Progress("profiling", False))
    new = Prepared(e.program, chain, held, dict(e.info, cached=None))
    for key, entry in list(w._remat_entries.items()):
        if entry is e:
            w._remat_entries[key] = new
    w.last_entry = new


# ---- one model ------------------------------------------------------------------------

def run_model(name, args, device, log, save=None):
    """The model's points, measured; save(rows), when given, gets the rows after each round
    (a run stopped by a timeout keeps its finished rounds)."""
    sizes = SIZES[args.size][name]
    task = Task(name, sizes, device, args.seed)
    which = set(args.methods)
    log("== %s %s, %.1fM parameters, load %s" % (
        name, sizes, sum(p.numel() for p in task.model.parameters()) / 1e6, loadavg()))
    peers = peer_points(task, which, args.budgets, device, log)
    warm(peers, device, args.warmup, log)
    points = list(peers)
    passes = []
    cache = tempfile.TemporaryDirectory(prefix="remat-peers-")
    if which & {"remat", "remat-compiled"}:
        t = time.perf_counter()
        w = wrap_remat(task, cache.name, args.quick)
        e = w.last_entry
        log("  remat: %s path, %d stages, plain predicted %.1f MiB (profiled in %.1f s)" % (
            e.info["path"], e.chain.n - 1, e.plain_peak / MIB, time.perf_counter() - t))
        plain = e.plain_peak
        lows = {a: min_limit(w, a) for a in REMAT_ALGOS}
        span = plain - lows["optimal"]
        if "remat" in which:
            cp = Copy(w, w.parameters())
            lims = {"optimal": matched_limits(peers, lows["optimal"], plain, args.points,
                                              span * 0.04) if args.match
                    else spaced(lows["optimal"], plain, args.points)}
            for a in ("revolve", "sequential"):
                lims[a] = spaced(lows[a], plain, args.alt_points + 1)[:-1]
            mine = remat_points(task, w, cp, "remat", lims)
            warm(mine, device, args.warmup, log)
            points += mine
            passes.append(ProfilePass(w, task, mine, args.pass_repeat))
        if "remat-compiled" in which:
            t = time.perf_counter()
            wc = wrap_remat(task, cache.name, args.quick)  # the same profile, from the cache
            n, total = compile_stages(wc)
            reprofile(wc, task)
            e = wc.last_entry
            log("  remat-compiled: %d of %d stages compiled and profiled (%.1f s), plain "
                "predicted %.1f MiB" % (n, total, time.perf_counter() - t, e.plain_peak / MIB))
            cp = Copy(wc, wc.parameters())
            lims = spaced(min_limit(wc, "optimal"), e.plain_peak, args.compiled_points)
            mine = remat_points(task, wc, cp, "remat-compiled", {"optimal": lims})
            for pt in mine:
                pt.note += ", %d compiled" % n
            warm(mine, device, args.warmup, log)
            points += mine
            passes.append(ProfilePass(wc, task, mine, args.pass_repeat))
    live = [p for p in points if p.status == "ok"]
    rng = random.Random(args.seed)
    for r in range(args.rounds):
        order = live + passes
        rng.shuffle(order)
        load = loadavg()[0]
        t = time.perf_counter()
        for pt in order:
            if isinstance(pt, ProfilePass):
                pt.run()
                continue
            fb, st = train_step(pt, device)
            pt.fb.append(fb)
            pt.step.append(st)
            pt.loads.append(load)
        log("  round %d/%d: %.0f s, load %.2f" % (r + 1, args.rounds, time.perf_counter() - t,
                                                  load))
        if save is not None:
            save([row_of(task, args.size, device, pt) for pt in points])
    for ps in passes:
        ps.predict()
    cache.cleanup()
    return [row_of(task, args.size, device, pt) for pt in points]


def row_of(task, size, device, pt):
    import torch

    def med(xs):
        return "%.6f" % statistics.median(xs) if xs else ""

    def fmt(x):
        return "" if x is None else ("%.6f" % x if isinstance(x, float) else str(x))
    return {"model": task.name, "size": size, "device": str(device), "family": pt.family,
            "setting": pt.setting, "status": pt.status, "peak_bytes": fmt(pt.peak),
            "step_s": med(pt.step), "step_min_s": fmt(min(pt.step) if pt.step else None),
            "step_max_s": fmt(max(pt.step) if pt.step else None), "fb_s": med(pt.fb),
            "fb_min_s": fmt(min(pt.fb) if pt.fb else None),
            "fb_max_s": fmt(max(pt.fb) if pt.fb else None), "n_steps": len(pt.step),
            "limit_bytes": fmt(pt.limit), "pred_peak_bytes": fmt(pt.pred_peak),
            "pred_fb_ms": fmt(pt.pred_fb_ms), "pred_fb_rounds_ms": fmt(pt.pred_fb_rounds_ms),
            "load_min": fmt(min(pt.loads) if pt.loads else None),
            "load_max": fmt(max(pt.loads) if pt.loads else None), "note": pt.note,
            "saves": pt.saves,
            "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}


# ---- reading the results -------------------------------------------------------------------

def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("peak_bytes", "step_s", "step_min_s", "step_max_s", "fb_s", "fb_min_s",
                  "fb_max_s", "limit_bytes", "pred_peak_bytes", "pred_fb_ms", "pred_fb_rounds_ms",
                  "load_min", "load_max"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else None
    return rows


def ok(rows):
    return [r for r in rows if r["status"] == "ok" and r["step_s"] is not None]


def remat_at(rows, mem, family="remat-optimal"):
    """remat optimal's best median step time among its points that measured
    at most `mem`: (time, row), or None when all measured more."""
    fit = [r for r in ok(rows) if r["family"] == family and r["peak_bytes"] <= mem]
    if not fit:
        return None
    best = min(fit, key=lambda r: r["step_s"])
    return best["step_s"], best


def sec(x):
    return "%.3f" % x if x < 10 else "%.2f" % x


def spread(r):
    return "%s (%s–%s)" % (sec(r["step_s"]), sec(r["step_min_s"]), sec(r["step_max_s"]))


def table(rows):
    """Markdown: every peer point against remat optimal at no more memory."""
    good = ok(rows)
    lines = ["| method | setting | peak MiB | step s, median (min–max) | remat optimal at ≤ "
             "that memory: step s (its peak MiB) | remat ÷ peer | remat, compiled stages "
             "(prototype) at ≤ that memory: step s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    low = min((r["peak_bytes"] for r in good if r["family"] == "remat-optimal"), default=None)
    for r in sorted(good, key=lambda r: (FAMILY_ORDER.get(r["family"], 99), -r["peak_bytes"])):
        if r["family"].startswith("remat"):
            continue
        got = remat_at(rows, r["peak_bytes"])
        if got is None:
            cmp_ = "below remat's smallest (%.1f)" % (low / MIB) if low else "-"
            ratio = "-"
        else:
            cmp_ = "%s (%.1f)" % (sec(got[0]), got[1]["peak_bytes"] / MIB)
            ratio = "%.3f" % (got[0] / r["step_s"])
        comp = remat_at(rows, r["peak_bytes"], "remat-compiled")
        lines.append("| %s | %s | %.1f | %s | %s | %s | %s |" % (
            r["family"], r["setting"] or "-", r["peak_bytes"] / MIB, spread(r), cmp_, ratio,
            sec(comp[0]) if comp else "-"))
    for r in rows:
        if r["status"] != "ok":
            lines.append("| %s | %s | - | %s | - | - | - |" % (
                r["family"], r["setting"], r["status"]))
    return "\n".join(lines)


FAMILY_ORDER = {f: i for i, f in enumerate(
    ("plain", "hf-gc", "ckpt-seq", "sac", "compile", "remat-optimal", "remat-revolve",
     "remat-sequential", "remat-compiled"))}


def remat_table(rows):
    """Markdown: remat's points, predicted against measured."""
    lines = ["| algorithm | limit MiB | peak MiB: predicted | measured | fwd+bwd ms: predicted "
             "(profile before the rounds) | predicted (profiles in the rounds) | measured "
             "| step s (min–max) | forwards' saves |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in sorted(ok(rows), key=lambda r: (FAMILY_ORDER[r["family"]], r["limit_bytes"] or 0)):
        if not r["family"].startswith("remat"):
            continue
        rounds = r.get("pred_fb_rounds_ms")
        lines.append("| %s | %.1f | %.1f | %.1f | %.0f | %s | %.0f | %s | %s |" % (
            r["family"].replace("remat-", ""), r["limit_bytes"] / MIB,
            r["pred_peak_bytes"] / MIB, r["peak_bytes"] / MIB, r["pred_fb_ms"],
            "%.0f" % rounds if rounds else "-", r["fb_s"] * 1e3, spread(r),
            r.get("saves") or "-"))
    return "\n".join(lines)


def _predicted(rows, families, key="pred_fb_ms"):
    """The measured rows of `families` that carry a predicted time."""
    return [r for r in ok(rows) if r["family"] in families and r.get(key)]


def mape(rows, families=("remat-optimal", "remat-revolve", "remat-sequential"),
         key="pred_fb_ms"):
    """(time MAPE, memory MAPE, points): remat's predicted forward+backward time
    (key: from the profile before the rounds, or "pred_fb_rounds_ms", from
    the profiles in the rounds) and peak against the measured ones."""
    rs = _predicted(rows, families, key)
    if not rs:
        return None
    t = statistics.mean(abs(r[key] - r["fb_s"] * 1e3) / (r["fb_s"] * 1e3) for r in rs)
    m = statistics.mean(abs(r["pred_peak_bytes"] - r["peak_bytes"]) / r["peak_bytes"] for r in rs)
    return 100 * t, 100 * m, len(rs)


def level_and_shape(rows, families):
    """(k, MAPE of k x predicted time): k, the median of measured / predicted,
    is the level the one profile at the start sampled against the rounds
    (the machine's load drifts between them); what is left is how well the
    predictions rank and space the points, which is what a solver uses."""
    rs = _predicted(rows, families)
    if not rs:
        return None
    k = statistics.median(r["fb_s"] * 1e3 / r["pred_fb_ms"] for r in rs)
    t = statistics.mean(abs(k * r["pred_fb_ms"] - r["fb_s"] * 1e3) / (r["fb_s"] * 1e3) for r in rs)
    return k, 100 * t


STYLE = {  # family: (label, color, marker, line)
    "plain": ("plain autograd", "black", "*", False),
    "hf-gc": ("HF checkpointing (every n layers)", "tab:orange", "s", True),
    "ckpt-seq": ("checkpoint_sequential (k segments)", "tab:green", "^", True),
    "sac": ("selective AC (matmuls saved)", "tab:purple", "D", False),
    "compile": ("torch.compile + activation_memory_budget", "tab:red", "v", True),
    "remat-optimal": ("remat optimal", "tab:blue", "o", True),
    "remat-revolve": ("remat revolve", "tab:cyan", "x", True),
    "remat-sequential": ("remat sequential", "tab:olive", "+", True),
    "remat-compiled": ("remat optimal, compiled stages (prototype)", "tab:pink", "P", True),
}


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.8))
    good = ok(rows)
    for fam, (label, color, marker, line) in STYLE.items():
        rs = sorted((r for r in good if r["family"] == fam), key=lambda r: r["peak_bytes"])
        if not rs:
            continue
        x = [r["peak_bytes"] / MIB for r in rs]
        y = [r["step_s"] for r in rs]
        err = [[r["step_s"] - r["step_min_s"] for r in rs], [r["step_max_s"] - r["step_s"]
                                                             for r in rs]]
        size = 16 if fam == "plain" else 6
        ax.errorbar(x, y, yerr=err, color=color, marker=marker, ms=size,
                    ls="-" if line and len(rs) > 1 else "none", lw=1, capsize=2, label=label,
                    zorder=5 if fam == "plain" else 3)
        if fam == "compile":
            for r, xi, yi in zip(rs, x, y):
                ax.annotate(r["setting"].replace("budget ", ""), (xi, yi), fontsize=7,
                            color=color, textcoords="offset points", xytext=(3, 3))
        if fam == "ckpt-seq":
            for r, xi, yi in zip(rs, x, y):
                ax.annotate(r["setting"].replace("k=", ""), (xi, yi), fontsize=7,
                            color=color, textcoords="offset points", xytext=(3, -9))
    ax.set_xlabel("peak activation memory of a training step (MiB, measured)")
    ax.set_ylabel("step time: forward + backward + SGD (s, median; bars: min–max)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(name, rows, out, log):
    """The PNG and the markdown of one model's rows."""
    good = ok(rows)
    if not good:
        log("%s: no measured point" % name)
        return
    r0 = good[0]
    loads = [x for r in good for x in (r["load_min"], r["load_max"]) if x is not None]
    title = "%s, %s, %s (torch %s, %s); load %.1f–%.1f" % (
        name, r0["size"], r0["device"], r0["torch"], r0["date"], min(loads), max(loads))
    png = os.path.join(out, "torch_peers_%s.png" % name)
    plot(rows, png, title)
    print("\n### %s\n\n%s; %s\n" % (name, title, png))
    plain = [r for r in good if r["family"] == "plain"]
    if plain:
        print("plain autograd: %.1f MiB, %s s\n" % (plain[0]["peak_bytes"] / MIB, spread(plain[0])))
    print(table(rows))
    notes = sorted({r["note"] for r in good if r.get("note")})
    print("\nremat's points (%s):\n" % "; ".join(notes or ["-"]))
    print(remat_table(rows))
    for fams, what in ((("remat-optimal", "remat-revolve", "remat-sequential"), "remat"),
                       (("remat-compiled",), "remat-compiled (prototype)")):
        m = mape(rows, fams)
        if m:
            print("\nMAPE of %s over %d points: time %.1f%%, memory %.1f%%" % (
                what, m[2], m[0], m[1]))
            k, t = level_and_shape(rows, fams)
            print("measured / predicted time: median %.3f; time MAPE after that one factor: "
                  "%.1f%%" % (k, t))
            mr = mape(rows, fams, "pred_fb_rounds_ms")
            if mr:
                print("time MAPE with the stage times profiled in the rounds: %.1f%%" % mr[0])
    sys.stdout.flush()


# ---- main -----------------------------------------------------------------------------

def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated, from %s (default: all)" % ", ".join(MODELS))
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 2 rounds, few points: a logic check")
    p.add_argument("--size", choices=sorted(SIZES),
                   help="model sizes (default: cpu, gpu with --device cuda, quick with --quick)")
    p.add_argument("--methods", help="comma-separated families, from %s (default: all; "
                   "with --quick all but the two compiled ones, whose compiling takes about a "
                   "minute each)" % ", ".join(FAMILIES))
    p.add_argument("--rounds", type=int, help="timed steps per point, one per round (default 5)")
    p.add_argument("--pass-repeat", type=int, default=1,
                   help="runs of each stage in the profile pass of each round (default 1; "
                   "its median is the pass's time)")
    p.add_argument("--warmup", type=int, help="warm-up steps per point before the step that "
                   "measures its peak (default 1)")
    p.add_argument("--points", type=int, help="evenly spaced remat optimal limits (default 8)")
    p.add_argument("--alt-points", type=int, help="revolve and sequential limits (default 4)")
    p.add_argument("--compiled-points", type=int, help="remat-compiled limits (default 5)")
    p.add_argument("--no-match", dest="match", action="store_false",
                   help="no remat optimal limit at each peer's measured memory")
    p.add_argument("--budgets", help="compile budgets, comma-separated (default 0.0,0.1,...,1.0)")
    p.add_argument("--threads", type=int, help="CPU threads (default: all cores)")
    p.add_argument("--malloc", choices=("keep", "default"), default="keep",
                   help="CPU: keep (default) has glibc keep freed blocks for reuse, as a "
                   "caching allocator does; default leaves glibc's settings")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="folder of the CSVs and PNGs (default docs/img; "
                                 "build/torch_peers with --quick)")
    p.add_argument("--plot-only", action="store_true",
                   help="no measuring: the PNGs and tables from the CSVs in --out")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    if a.methods is None:
        a.methods = ",".join(f for f in FAMILIES if not (a.quick and "compile" in f))
    a.methods = [m for m in a.methods.split(",") if m]
    for m in a.models:
        if m not in MODELS:
            p.error("--models: unknown model %r (known: %s)" % (m, ", ".join(MODELS)))
    for m in a.methods:
        if m not in FAMILIES:
            p.error("--methods: unknown family %r (known: %s)" % (m, ", ".join(FAMILIES)))
    if a.device not in ("cpu", "cuda"):
        p.error("--device: cpu or cuda, not %r" % a.device)
    if a.pass_repeat < 1:
        p.error("--pass-repeat: at least 1")
    q = a.quick
    a.size = a.size or ("quick" if q else "gpu" if a.device == "cuda" else "cpu")
    a.rounds = a.rounds or (2 if q else 5)
    a.warmup = a.warmup if a.warmup is not None else 1
    a.points = a.points or (3 if q else 8)
    a.alt_points = a.alt_points or (2 if q else 4)
    a.compiled_points = a.compiled_points or (2 if q else 5)
    if a.budgets is None:
        a.budgets = [0.5] if q else [round(0.1 * i, 1) for i in range(11)]
    else:
        try:
            a.budgets = [float(b) for b in a.budgets.split(",") if b]
        except ValueError:
            p.error("--budgets: numbers between 0 and 1, comma-separated")
    if q:
        a.match = False
    if a.out is None:
        a.out = os.path.join(ROOT, *(("build", "torch_peers") if q else ("docs", "img")))
    return a


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    if args.plot_only:
        for name in args.models:
            path = os.path.join(args.out, "torch_peers_%s.csv" % name)
            if os.path.exists(path):
                report(name, read_csv(path), args.out, log)
        return 0
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_peers.py: --device cuda: CUDA is not available (torch %s); nothing measured"
              % torch.__version__, file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if device.type == "cpu" and args.malloc == "keep" and not keep_freed_memory():
        log("torch_peers: --malloc keep: mallopt is not available; glibc's defaults stay")
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    os.makedirs(args.out, exist_ok=True)
    log("torch_peers: torch %s, %d threads, device %s, malloc %s, load %s" % (
        torch.__version__, torch.get_num_threads(), device, args.malloc, loadavg()))
    for name in args.models:
        path = os.path.join(args.out, "torch_peers_%s.csv" % name)

        def save(rows, path=path):
            with open(path, "w", newline="") as f:
                wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
                wr.writeheader()
                wr.writerows(rows)
        save(run_model(name, args, device, log, save))
        log("wrote %s" % path)
        report(name, read_csv(path), args.out, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

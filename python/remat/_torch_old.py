"""PyTorch front-end: profile the stages of a sequential model, solve with
libremat, and train by the schedule.

    import remat.torch as rt
    seq = rt.sequential(torchvision.models.resnet50())
    model = rt.Checkpointed(seq, sample_input, memory="4GiB", algorithm="optimal")
    loss = criterion(model(x), y); loss.backward()

Chain mapping: the L children of the nn.Sequential are stages 1..L; the
chain's loss stage n = L + 1 is a zero-cost "output" stage whose forward is
the identity (a[n] aliases a[L]) and whose backward receives the gradient the
user's criterion sends back. Checkpointed returns a[L]; the criterion runs
outside, in plain autograd. The whole schedule runs as one autograd.Function:
the ops before the first B (which is always B n) run in forward, the rest in
its backward. Op semantics come from the C execution plan (remat.plan).
"""
import hashlib
import os
import statistics
import time

import torch
from torch import nn

import remat

__all__ = ["sequential", "profile", "Checkpointed", "StageError"]


class StageError(TypeError):
    """A stage returns or takes something the executor cannot handle."""


# --------------------------------------------------------------------------
# Turning models into nn.Sequential

class _Stage(nn.Sequential):
    """A group of modules run one after the other, as one stage."""


class _Flatten(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)


class _ReluPoolFlatten(nn.Module):
    """DenseNet head: relu, global average pool, flatten."""

    def forward(self, x):
        x = nn.functional.relu(x)
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, (1, 1)), 1)


class _PoolFlatten(nn.Module):
    def forward(self, x):
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, (1, 1)), 1)


class _DenseStep(nn.Module):
    """One DenseNet layer as a stage: x -> cat(x, layer(x)); the layer
    concatenates its inputs first, so feeding it the running concatenation
    gives the same values as torchvision's list form."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return torch.cat([x, self.layer([x])], 1)


class _InceptionInput(nn.Module):
    """Inception v3's transform_input, when enabled."""

    def __init__(self, model):
        super().__init__()
        self.model_transform = model._transform_input

    def forward(self, x):
        return self.model_transform(x)


class _ViTEmbed(nn.Module):
    """ViT patch embedding, class token, position embedding and dropout."""

    def __init__(self, vit):
        super().__init__()
        self.conv_proj = vit.conv_proj
        self.class_token = vit.class_token
        self.pos_embedding = vit.encoder.pos_embedding
        self.dropout = vit.encoder.dropout
        self.patch_size = vit.patch_size
        self.hidden_dim = vit.hidden_dim

    def forward(self, x):
        n, _, h, w = x.shape
        p = self.patch_size
        x = self.conv_proj(x).reshape(n, self.hidden_dim, (h // p) * (w // p)).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        return self.dropout(x + self.pos_embedding)


class _ViTHead(nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.ln = vit.encoder.ln
        self.heads = vit.heads

    def forward(self, x):
        return self.heads(self.ln(x)[:, 0])


def _group_inplace(mods):
    """Attaches each in-place activation to the stage before it, so no stage
    starts by overwriting its input (which a kept checkpoint may be)."""
    stages = []
    for m in mods:
        if getattr(m, "inplace", False) and stages:
            stages[-1].append(m)
        else:
            stages.append([m])
    return [s[0] if len(s) == 1 else _Stage(*s) for s in stages]


def _resnet(m):
    stem = _Stage(m.conv1, m.bn1, m.relu, m.maxpool)
    blocks = [b for layer in (m.layer1, m.layer2, m.layer3, m.layer4) for b in layer]
    return [stem] + blocks + [_Stage(m.avgpool, _Flatten(), m.fc)]


def _densenet(m):
    out = []
    for name, child in m.features.named_children():
        if name.startswith("denseblock"):
            out.extend(_DenseStep(layer) for layer in child.values())
        else:
            out.append(child)
    head = _Stage(_ReluPoolFlatten(), m.classifier)
    stem = _group_inplace(out[:4])
    return stem + out[4:] + [head]


def _vgg(m):
    return _group_inplace(list(m.features)) + [_Stage(m.avgpool, _Flatten())] + \
        _group_inplace(list(m.classifier))


def _inception(m):
    if m.aux_logits:
        raise ValueError("remat.torch.sequential: Inception v3 with aux_logits=True has two "
                         "outputs; build it with aux_logits=False (inception_v3(aux_logits="
                         "False, init_weights=...)) or pass your own nn.Sequential")
    names = ["Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1", "Conv2d_3b_1x1",
             "Conv2d_4a_3x3", "maxpool2", "Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a",
             "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"]
    stages = [_InceptionInput(m)] if m.transform_input else []
    stages += [getattr(m, n) for n in names]
    return stages + [_Stage(m.avgpool, m.dropout, _Flatten(), m.fc)]


def _mobilenet_v2(m):
    return list(m.features) + [_Stage(_PoolFlatten(), m.classifier)]


def _vit(m):
    return [_ViTEmbed(m)] + list(m.encoder.layers) + [_ViTHead(m)]


def _converters():
    try:
        import torchvision.models as tvm
    except ImportError:  # pragma: no cover - torchvision is optional
        return []
    conv = [(tvm.ResNet, _resnet), (tvm.DenseNet, _densenet), (tvm.VGG, _vgg),
            (tvm.Inception3, _inception), (tvm.MobileNetV2, _mobilenet_v2)]
    vit = getattr(tvm, "VisionTransformer", None)
    if vit is not None:
        conv.append((vit, _vit))
    return conv


def sequential(model):
    """An nn.Sequential of stages computing the same function as `model`.

    Known: torchvision ResNet (all depths), DenseNet, VGG, Inception v3 without
    aux logits, MobileNetV2, ViT, and any nn.Sequential (returned as is). The
    stages share the model's parameters and buffers."""
    if isinstance(model, nn.Sequential):
        return model
    for cls, fn in _converters():
        if isinstance(model, cls):
            return nn.Sequential(*fn(model))
    raise TypeError(
        "remat.torch.sequential: don't know how to split %s into stages. Pass your own "
        "nn.Sequential whose children are the stages, each taking one tensor and returning "
        "one tensor, e.g. nn.Sequential(model.stem, *model.blocks, model.head)."
        % type(model).__name__)


# --------------------------------------------------------------------------
# Memory accounting: bytes of distinct storages

def _storage_key(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()
    return (t.device.type, t.device.index, s.data_ptr()), s.nbytes()


def _dense_bytes(t):
    return t.numel() * t.element_size()


class _SavedRecorder:
    """saved_tensors_hooks that record the storages autograd keeps."""

    def __init__(self):
        self.storages = {}

    def pack(self, t):
        if isinstance(t, torch.Tensor):
            k, nb = _storage_key(t)
            self.storages[k] = nb
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def _param_keys(module):
    keys = set()
    for t in list(module.parameters()) + list(module.buffers()):
        keys.add(_storage_key(t)[0])
    return keys


def _check_output(i, y):
    if not isinstance(y, torch.Tensor):
        raise StageError("remat.torch: stage %d returned %s; every stage must return one tensor "
                         "(wrap stages that return tuples so they return a single tensor)"
                         % (i, type(y).__name__))


# --------------------------------------------------------------------------
# State that recomputation must not disturb

def _bn_modules(module):
    return [m for m in module.modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


class _BufferSnapshot:
    """Copies of BatchNorm running statistics, restored after a recompute so
    each stage updates them once per step, as plain autograd does."""

    def __init__(self, bns):
        self.saved = [(m, [(n, b.clone()) for n, b in m.named_buffers(recurse=False)
                           if b is not None]) for m in bns if m.training]

    def restore(self):
        with torch.no_grad():
            for m, bufs in self.saved:
                for n, b in bufs:
                    getattr(m, n).copy_(b)


def _autocast_state():
    """The autocast settings of the step's forward, so recomputations in the
    backward (outside the user's autocast block) compute the same thing."""
    gpu = {"enabled": torch.is_autocast_enabled(), "dtype": torch.get_autocast_gpu_dtype(),
           "cache_enabled": torch.is_autocast_cache_enabled()}
    cpu = {"enabled": torch.is_autocast_cpu_enabled(), "dtype": torch.get_autocast_cpu_dtype(),
           "cache_enabled": torch.is_autocast_cache_enabled()}
    return gpu, cpu


def _rng_devices(t):
    return [t.device.index if t.device.index is not None else torch.cuda.current_device()] \
        if t.device.type == "cuda" else []


def _get_rng(devices):
    return (torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices])


def _set_rng(state, devices):
    torch.set_rng_state(state[0])
    for d, s in zip(devices, state[1]):
        torch.cuda.set_rng_state(s, d)


def _snapshot_all(module):
    """Buffers, parameter grads and RNG, for profiling runs to leave no trace."""
    bufs = [(b, b.clone()) for b in module.buffers()]
    grads = [(p, p.grad) for p in module.parameters()]
    for p in module.parameters():
        p.grad = None
    rng = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and \
        torch.cuda.is_initialized() else None

    def restore():
        with torch.no_grad():
            for b, c in bufs:
                b.copy_(c)
        for p, g in grads:
            p.grad = g
        torch.set_rng_state(rng)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
    return restore


# --------------------------------------------------------------------------
# Profiling (paper section 5.1)

_PROFILE_CACHE = {}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device):
    _sync(device)
    t0 = time.perf_counter()
    r = fn()
    _sync(device)
    return r, (time.perf_counter() - t0) * 1e3


def _profile_key(seq, x, repeat):
    h = hashlib.sha256()
    h.update(repr(seq).encode())
    for n, p in seq.named_parameters():
        h.update(("%s%s%s" % (n, tuple(p.shape), p.dtype)).encode())
    h.update(("%s%s%s%s%d%s" % (tuple(x.shape), x.dtype, x.device, x.requires_grad, repeat,
                                torch.__version__)).encode())
    return h.hexdigest()[:32]


def _leaf(x, need_grad):
    t = x.detach()
    if need_grad and t.is_floating_point():
        t.requires_grad_(True)
    return t


def _profile_stage(i, stage, x, need_grad, repeat, device, inplace):
    """Measures one stage: times, a[i], abar[i], overheads. Returns (info, y)."""
    params = _param_keys(stage)
    cuda = device.type == "cuda"
    fwd_times, bwd_times, fwd_oh, bwd_oh = [], [], 0, 0
    out_bytes = saved_bytes = 0
    y_keep = None
    for r in range(max(1, repeat)):
        inp = _leaf(x, need_grad)
        rec = _SavedRecorder()
        if cuda:
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)

        def fwd():
            with torch.enable_grad(), rec.hooks():
                return stage(inp.clone() if inplace else inp)
        y, t = _timed(fwd, device)
        _check_output(i, y)
        fwd_times.append(t)
        in_key = _storage_key(x)[0]
        out_key, out_nb = _storage_key(y)
        kept = {k: nb for k, nb in rec.storages.items() if k not in params and k != in_key}
        kept[out_key] = out_nb
        out_bytes, saved_bytes = out_nb, max(out_nb, sum(kept.values()))
        if cuda:
            fwd_oh = max(fwd_oh, torch.cuda.max_memory_allocated(device) - base - saved_bytes)
        if y.requires_grad:
            g = torch.ones_like(y)
            if cuda:
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
            _, t = _timed(lambda: torch.autograd.backward(y, g), device)
            bwd_times.append(t)
            if cuda:
                grad_in = _dense_bytes(x) if inp.requires_grad else 0
                bwd_oh = max(bwd_oh, torch.cuda.max_memory_allocated(device) - base - grad_in)
        else:
            bwd_times.append(0.0)
        y_keep = y.detach()
    info = {"name": "%d:%s" % (i, type(stage).__name__),
            "fwd_time": statistics.median(fwd_times), "bwd_time": statistics.median(bwd_times),
            "out_bytes": int(out_bytes), "saved_bytes": int(saved_bytes),
            "grad_bytes": int(_dense_bytes(y_keep)),
            "fwd_overhead": int(max(0, fwd_oh)), "bwd_overhead": int(max(0, bwd_oh))}
    return info, y_keep


def _detect_inplace(seq, x):
    """Stages (1-based) that modify their input in place (version bump)."""
    restore = _snapshot_all(seq)
    found = []
    x = x.detach().clone()
    try:
        with torch.no_grad():
            for i, stage in enumerate(seq, 1):
                v = x._version
                y = stage(x)
                _check_output(i, y)
                if x._version != v:
                    found.append(i)
                x = y
    finally:
        restore()
    return found


def profile(seq, sample_input, repeat=5, cache=True, name=None):
    """Measures each stage of `seq` on `sample_input` (paper section 5.1) and
    returns a remat.Chain (times in ms, sizes in bytes).

    Times are medians of `repeat` runs; a[i] is the bytes of the output's
    storage; abar[i] the distinct storages autograd saves (saved_tensors_hooks)
    plus a[i], less the input's and the parameters'. On CUDA the overheads come
    from the allocator's peak statistics; on CPU they are 0 (no allocator
    statistics; the CPU executor counts only the values it holds). Buffers,
    gradients and RNG are restored afterwards. Results are cached per model
    structure, input shape and device, in memory and, when REMAT_CACHE_DIR is
    set, on disk."""
    if not isinstance(sample_input, torch.Tensor):
        raise StageError("remat.torch.profile: the input must be one tensor")
    seq = sequential(seq)
    key = _profile_key(seq, sample_input, repeat)
    cache_dir = os.environ.get("REMAT_CACHE_DIR")
    path = os.path.join(cache_dir, "profile-%s.json" % key) if cache_dir else None
    if cache and key in _PROFILE_CACHE:
        return remat.Chain.from_json(_PROFILE_CACHE[key])
    if cache and path and os.path.exists(path):
        chain = remat.Chain.load(path)
        _PROFILE_CACHE[key] = chain.to_json()
        return chain
    device = sample_input.device
    inplace = set(_detect_inplace(seq, sample_input))
    restore = _snapshot_all(seq)
    stages = []
    try:
        x = sample_input.detach()
        for i, stage in enumerate(seq, 1):
            need = i > 1 or sample_input.requires_grad
            info, x = _profile_stage(i, stage, x, need, repeat, device, i in inplace)
            stages.append(info)
    finally:
        restore()
    stages.append({"name": "output", "fwd_time": 0.0, "bwd_time": 0.0, "out_bytes": 0,
                   "saved_bytes": 0})
    in_bytes = _storage_key(sample_input)[1]
    in_grad = _dense_bytes(sample_input) if sample_input.requires_grad and \
        sample_input.is_floating_point() else 0
    meta = {"profile": {
        "batch_size": int(sample_input.shape[0]) if sample_input.dim() else 1,
        "input_shape": list(sample_input.shape), "dtype": str(sample_input.dtype),
        "device": str(device), "repeat": repeat, "torch": torch.__version__, "key": key,
        "inplace_stages": sorted(inplace),
        "overheads": "cuda allocator peaks" if device.type == "cuda" else "0 on cpu"}}
    chain = remat.Chain(stages, in_bytes, in_grad, name=name or "%s-b%d" % (
        type(seq).__name__.lower(), meta["profile"]["batch_size"]), time_unit="ms", meta=meta)
    if cache:
        _PROFILE_CACHE[key] = chain.to_json()
        if path:
            os.makedirs(cache_dir, exist_ok=True)
            chain.save(path)
    return chain


# --------------------------------------------------------------------------
# Execution

class _Saved:
    """abar[i]: the stage's input leaf, its output with the kept graph, and
    the storages autograd saved (for the memory count)."""

    __slots__ = ("inp", "out", "storages")

    def __init__(self, inp, out, storages):
        self.inp, self.out, self.storages = inp, out, storages


class _Run:
    """One training step's state: the values the plan holds, per-stage RNG
    states and forward counts, and the measured memory."""

    def __init__(self, owner, x):
        self.owner = owner
        self.stages = list(owner.seq)
        self.L = len(self.stages)
        # d[n] is the seed (size 0); B n hands on the gradient autograd gives us.
        self.store = {("d", self.L + 1): None}
        self.x_needs_grad = x.requires_grad and x.is_floating_point()
        self.count = [0] * (self.L + 2)
        self.rng = {}
        self.devices = _rng_devices(x)
        self.output = None
        self.measure = owner.measure_memory
        self.grad_out = None
        self.autocast = _autocast_state()
        # Memory count, kept up to date as values come and go: reference
        # counts of distinct storages (a and abar values) plus dense gradients.
        self.refs = {}
        self.live = 0
        self.peak = 0
        self._put(("a", 0), x.detach())

    # -- the store and its memory count ---------------------------------------
    def _storages(self, kind, v):
        if kind == "a":
            return [_storage_key(v)]
        out = list(v.storages.items())
        out.append(_storage_key(v.out))
        return out

    def _count(self, key, v, sign):
        if v is None or not self.measure:
            return
        kind = key[0]
        if kind == "d":
            self.live += sign * _dense_bytes(v)
            return
        for k, nb in self._storages(kind, v):
            ref = self.refs.setdefault(k, [0, nb])
            if sign > 0:
                ref[0] += 1
                if ref[0] == 1:
                    self.live += nb
            else:
                ref[0] -= 1
                if ref[0] == 0:
                    self.live -= ref[1]
                    del self.refs[k]

    def _put(self, key, v):
        old = self.store.get(key)
        self._count(key, old, -1)
        self.store[key] = v
        self._count(key, v, +1)

    def _drop(self, key):
        self._count(key, self.store.pop(key), -1)

    def _note(self):
        if self.live > self.peak:
            self.peak = self.live

    # -- values ----------------------------------------------------------------
    def _input(self, i):
        v = self.store.get(("a", i - 1))
        if v is None:
            v = self.store[("abar", i - 1)].out.detach()
        return v

    def _forward(self, i, keep_graph):
        x = self._input(i)
        if i == self.L + 1:  # the output stage: identity
            self.output = x
            return _Saved(None, x, {}) if keep_graph else x
        stage = self.stages[i - 1]
        first = self.count[i] == 0
        self.count[i] += 1
        inplace = i in self.owner.inplace_stages
        if first:
            self.rng[i] = _get_rng(self.devices)
            return self._call(i, stage, x, keep_graph, inplace)
        snap = _BufferSnapshot(self.owner.bns[i - 1])
        with torch.random.fork_rng(devices=self.devices):
            _set_rng(self.rng[i], self.devices)
            out = self._call(i, stage, x, keep_graph, inplace)
        snap.restore()
        return out

    def _call(self, i, stage, x, keep_graph, inplace):
        gpu, cpu = self.autocast
        with torch.cuda.amp.autocast(**gpu), torch.cpu.amp.autocast(**cpu):
            return self._call_stage(i, stage, x, keep_graph, inplace)

    def _call_stage(self, i, stage, x, keep_graph, inplace):
        if not keep_graph:
            with torch.no_grad():
                y = stage(x.clone() if inplace else x)
            _check_output(i, y)
            return y
        need = i > 1 or self.x_needs_grad
        inp = _leaf(x, need)
        rec = _SavedRecorder()
        with torch.enable_grad(), rec.hooks():
            y = stage(inp.clone() if inplace else inp)
        _check_output(i, y)
        skip = {_storage_key(x)[0]} | self.owner.param_keys[i - 1]
        return _Saved(inp, y, {k: nb for k, nb in rec.storages.items() if k not in skip})

    def _backward(self, i):
        if i == self.L + 1:
            return self.grad_out
        sv = self.store[("abar", i)]
        g = self.store[("d", i)]
        if sv.out.requires_grad:
            torch.autograd.backward(sv.out, g)
        inp = sv.inp
        if not inp.requires_grad:
            return None
        if inp.grad is None:  # the output does not depend on the input
            return torch.zeros_like(inp)
        return inp.grad

    # -- running the plan --------------------------------------------------------
    def run(self, steps):
        for st in steps:
            kind = st.kind
            if kind in ("Fn", "Fck", "Fall"):
                for c in st.creates:  # nothing to create: the value is already held
                    self._put(c, self._forward(st.index, c[0] == "abar"))
            elif kind == "B":
                self._put(("d", st.index - 1), self._backward(st.index))
            elif kind != "Del":
                raise remat.InputError("remat.torch: op %s is not supported by the executor"
                                       % st.op)
            self._note()
            for f in st.frees:
                self._drop(f)
        return self


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, dummy, x):
        plan = run.owner.plan
        run._note()
        run.run(plan.steps[:plan.first_backward])
        ctx.run = run
        out = run.output
        if out is None:
            raise remat.InternalError("remat.torch: the schedule ran no forward of the output")
        return out.detach()

    @staticmethod
    def backward(ctx, grad):
        run = ctx.run
        ctx.run = None
        plan = run.owner.plan
        run.grad_out = grad
        run.run(plan.steps[plan.first_backward:])
        d0 = run.store.pop(("d", 0), None)
        run.store.clear()
        run.owner.last_peak_bytes = run.peak
        return None, None, d0 if run.x_needs_grad else None


class Checkpointed(nn.Module):
    """`seq` trained by a checkpointing schedule within `memory` bytes.

    Profiles `seq` on `sample_input` (or takes `chain`), solves with
    `algorithm` (or takes `schedule`), and runs forward and backward by the
    schedule. Gradients of parameters and of the input are those of plain
    autograd; BatchNorm statistics and dropout masks too. With grad disabled
    it simply runs `seq`.

    Attributes: seq, chain, schedule, plan, last_peak_bytes (activation bytes
    held at the peak of the last step, counted as distinct storages)."""

    def __init__(self, seq, sample_input, memory=None, algorithm="optimal", slots=None,
                 segments=None, chain=None, schedule=None, repeat=5, measure_memory=True):
        super().__init__()
        self.seq = sequential(seq)
        if len(self.seq) == 0:
            raise ValueError("remat.torch.Checkpointed: the sequential model has no stages")
        self.chain = chain if chain is not None else profile(self.seq, sample_input, repeat)
        if self.chain.n != len(self.seq) + 1:
            raise ValueError("remat.torch.Checkpointed: the chain has %d stages, the model %d "
                             "(+1 output stage expected)" % (self.chain.n, len(self.seq)))
        if schedule is None:
            if memory is None:
                raise ValueError("remat.torch.Checkpointed: give memory= (bytes or '4GiB') "
                                 "or a schedule")
            schedule = remat.solve(self.chain, memory, algorithm=algorithm, slots=slots,
                                   segments=segments)
        self.set_schedule(schedule)
        self.inplace_stages = set(self.chain.meta.get("profile", {}).get("inplace_stages", [])) \
            if chain is None else set(_detect_inplace(self.seq, sample_input))
        self.bns = [_bn_modules(s) for s in self.seq]
        self.param_keys = [_param_keys(s) for s in self.seq]
        self.measure_memory = measure_memory
        self.last_peak_bytes = None

    def set_schedule(self, schedule):
        """Runs by `schedule` (a remat.Schedule for this chain) from now on."""
        self.plan = remat.plan(self.chain, schedule)
        self.schedule = schedule

    def solve(self, memory, algorithm="optimal", slots=None, segments=None):
        """Re-solves the profiled chain for another limit and runs by it."""
        self.set_schedule(remat.solve(self.chain, memory, algorithm=algorithm, slots=slots,
                                      segments=segments))
        return self.schedule

    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            raise StageError("remat.torch.Checkpointed: the input must be one tensor")
        if not torch.is_grad_enabled():
            return self.seq(x)
        dummy = torch.empty(0, requires_grad=True)
        return _Function.apply(_Run(self, x), dummy, x)

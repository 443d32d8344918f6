"""Graph capture with torch.export and cutting the graph into a chain.

Why torch.export: its training IR keeps the operators eager PyTorch runs
(aten.linear, conv2d, batch_norm with its in-place statistics update, relu_,
dropout, scaled_dot_product_attention), so replaying the graph op by op calls
the same kernels as the model's own forward and gives bitwise-equal results.
It records parameters, buffers and user inputs by name, and its non-strict
mode runs the model's Python, so most Hugging Face models export as they are.
torch.fx.symbolic_trace stops at the first shape-dependent branch.

One real forward over the graph (`analyze`) gives, per node, the storages it
outputs, whether they require grad, what autograd saves, which storages the
node mutates, and its time. The cut rules use those facts:

- an activation is a tensor that depends on a user input and requires grad;
  only activations cross stage boundaries. Everything else a later stage
  reads (masks, rotary tables, position ids, outputs returned early) is held
  once for the whole step and counted in memory ("held" values), and so is
  an activation that many layers read along the graph (an encoder's output,
  read by every decoder layer's cross-attention) when holding it lets at
  least two more boundaries fall (`held_activations`); its gradient, summed
  by autograd over the readers, is counted from the last reader's backward
  to its maker's;
- a boundary after node k is legal when the activations live across it are
  tensors that autograd saves anyway (so keeping them costs what plain
  autograd pays), when no later node mutates a storage made before it, and
  when it shares no storage with the previous boundary. The last rule makes
  each activation cross at most one boundary, so no storage is counted
  twice; with a single activation it is the articulation point of the graph;
- boundaries are taken greedily, earliest first (the most stages), then
  merged pairwise, smallest merged forward time first, down to `max_stages`.
"""
from __future__ import annotations

import dataclasses
import heapq
import re
import sys
import time
import weakref
from typing import (AbstractSet, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set,
                    Tuple)

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch.utils._python_dispatch import TorchDispatchMode

from ._memory import fd2_to

StorageKey = Tuple[str, int, int]
Args = Tuple[Any, ...]  # positional arguments of a call
Kwargs = Dict[str, Any]  # keyword arguments of a call

CALL_OPS = ("call_function", "call_module", "call_method")


class CaptureError(RuntimeError):
    """The model cannot be run by remat: the message says why."""


def storage_key(t: torch.Tensor) -> Tuple[StorageKey, int]:
    """(identity of t's storage, its size in bytes)."""
    s = t.untyped_storage()
    idx = t.device.index if t.device.index is not None else -1
    return (t.device.type, idx, s.data_ptr()), s.nbytes()


def tensors_in(value: Any) -> List[torch.Tensor]:
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def export_model(model: torch.nn.Module, args: Args, kwargs: Kwargs) -> Any:
    """The training-IR ExportedProgram of model(*args, **kwargs).

    Libraries branch on torch.compiler.is_exporting() / is_compiling() (and
    Hugging Face also on whether a tensor is a FakeTensor) to build graphs
    that stay valid for other shapes: Hugging Face builds an explicit causal
    mask instead of passing is_causal=True to SDPA, which computes the same
    values with other kernels, so gradients differ in the last bits. remat
    captures again whenever a shape changes, so it first captures with those
    checks reporting False: the code takes the path eager runs. Non-strict
    export cannot quietly specialize on tensor values (reading one raises),
    so only shape-based choices change; if that path reads values, the
    capture is done again as a plain export."""
    fn = getattr(torch.export, "export_for_training", None)  # torch 2.5 .. 2.8
    export = fn if fn is not None else torch.export.export
    try:
        with _as_eager(), fd2_to():  # a failure here prints whole graphs, then is retried
            return export(model, args, kwargs, strict=False)
    except Exception:  # the eager path reads values: capture the traced path
        return export(model, args, kwargs, strict=False)


class _as_eager:
    """torch.compiler.is_exporting() and is_compiling() report False, and so
    does transformers' is_fake_tensor (where transformers is loaded)."""

    def __enter__(self) -> None:
        self.saved: List[Tuple[Any, str, Any]] = []
        targets: List[Tuple[Any, Tuple[str, ...]]] = [
            (torch.compiler, ("is_exporting", "is_compiling"))]
        hf = sys.modules.get("transformers.utils.import_utils")
        if hf is not None:
            targets.append((hf, ("is_fake_tensor",)))
        for mod, names in targets:
            for n in names:
                if hasattr(mod, n):
                    self.saved.append((mod, n, getattr(mod, n)))
                    setattr(mod, n, _false)

    def __exit__(self, *exc: Any) -> None:
        for mod, n, f in self.saved:
            setattr(mod, n, f)


def _false(*args: Any, **kwargs: Any) -> bool:
    return False


# --------------------------------------------------------------------------
# SDPA calls as eager makes them

_SDPA = torch.ops.aten.scaled_dot_product_attention.default


def _sdpa_calls(nodes: Any) -> List[fx.Node]:
    return [n for n in nodes if n.op == "call_function" and n.target is _SDPA]


class EagerSdpa(NamedTuple):
    """How eager called F.scaled_dot_product_attention, once per call."""
    masked: bool  # passed attn_mask
    causal: bool  # passed is_causal
    gqa: bool     # passed enable_gqa: key and value keep their fewer heads


def match_eager_sdpa(gm: fx.GraphModule, feeds: Dict[fx.Node, Any],
                     eager: Sequence[EagerSdpa]) -> Tuple[int, int]:
    """Makes the graph's SDPA calls those eager makes; returns how many calls
    became is_causal without a mask, and how many take key and value with
    their own heads (enable_gqa). Under export Hugging Face builds the
    causal mask explicitly (its check that eager may skip it reads tensor
    values) and, having a mask, repeats the key/value heads of grouped-query
    attention, while eager passes is_causal and enable_gqa: the explicit
    mask costs a float copy saved per layer, and both run other kernels.

    A mask is dropped only where eager's call in the same place passed
    is_causal without one (`eager`, one record per SDPA call of an eager
    forward; a model whose eager code passes the mask keeps it), and only if
    it is built from constants (`feeds`: the constant placeholders; no user
    input, parameter or buffer, so its value cannot change) and its value is
    the lower triangle over (query, key) in every batch and head. Repeated
    heads are undone only where eager passed enable_gqa and the call then
    passes a mask and is_causal as eager's did."""
    sdpa = _sdpa_calls(gm.graph.nodes)
    if len(sdpa) != len(eager):
        return 0, 0  # the calls do not pair up
    has_gqa = any(a.name == "enable_gqa" for a in _SDPA._schema.arguments)
    values: Dict[fx.Node, Any] = {}
    causal = gqa = 0
    for n, rec in zip(sdpa, eager):
        bound = _bind(n)
        mask = bound.get("attn_mask")
        done = causal + gqa
        if rec.causal and not rec.masked and isinstance(mask, fx.Node) and \
                not bound.get("is_causal") and \
                _is_causal_mask(_value(gm, mask, feeds, values), bound["query"], bound["key"]):
            bound.update(attn_mask=None, is_causal=True)  # a user input leaves _value None
            causal += 1
        kv = [_repeated_heads(bound[x]) for x in ("key", "value")]
        same_mask = rec.masked == (bound.get("attn_mask") is not None) and \
            rec.causal == bool(bound.get("is_causal"))
        if rec.gqa and has_gqa and same_mask and kv[0] is not None and kv[1] is not None:
            bound.update(key=kv[0], value=kv[1], enable_gqa=True)
            gqa += 1
        if causal + gqa == done:
            continue
        q, k, v = bound.pop("query"), bound.pop("key"), bound.pop("value")
        old = n.all_input_nodes
        n.args, n.kwargs = (q, k, v), bound
        for a in old:
            _erase_unused(gm, a)
    if causal or gqa:
        gm.graph.lint()
        gm.recompile()
    return causal, gqa


def _repeated_heads(node: Any) -> Optional[fx.Node]:
    """x when node is Hugging Face's repeat_kv(x): x[:, :, None] expanded to
    (B, H, r, S, D) and reshaped to (B, H*r, S, D), head h reading x's head
    h // r, as SDPA's enable_gqa reads it; else None."""
    shapes = []
    n = node
    for want in (("reshape", "view", "_unsafe_view"), ("clone",), ("expand",), ("unsqueeze",)):
        if not isinstance(n, fx.Node) or n.op != "call_function":
            return None
        name = str(n.target).split(".")[1] if str(n.target).startswith("aten.") else ""
        if name not in want:
            if want == ("clone",):
                continue  # optional: reshape may read the expanded view itself
            return None
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return None
        shapes.append(tuple(v.shape))
        if name == "unsqueeze" and n.args[1] not in (2, -3):
            return None
        n = n.args[0]
    if not isinstance(n, fx.Node):
        return None
    v = n.meta.get("val")
    if not isinstance(v, torch.Tensor) or v.dim() != 4:
        return None
    (b, h, s, d), out, rep = v.shape, shapes[0], shapes[-2]
    r = rep[2]
    if rep != (b, h, r, s, d) or out != (b, h * r, s, d) or shapes[-1] != (b, h, 1, s, d):
        return None
    return n


def sdpa_mask_requires_grad(nodes: Sequence[fx.Node], facts: Dict[fx.Node, "NodeFacts"]
                            ) -> bool:
    """Whether an SDPA call among nodes takes a mask that requires grad (T5's
    position bias): with grad SDPA then runs its math kernel, without grad a
    fused one, whose values differ in the last bits."""
    for n in _sdpa_calls(nodes):
        mask = _bind(n).get("attn_mask")
        if isinstance(mask, fx.Node) and mask in facts and facts[mask].requires_grad:
            return True
    return False


def has_sdpa_mask(gm: fx.GraphModule) -> bool:
    """Whether some SDPA call of the graph passes a mask or repeated heads
    (match_eager_sdpa's candidates: only then is eager's record worth a
    forward)."""
    for n in _sdpa_calls(gm.graph.nodes):
        b = _bind(n)
        if isinstance(b.get("attn_mask"), fx.Node) or _repeated_heads(b["key"]) is not None:
            return True
    return False


class _SdpaLog(torch.overrides.TorchFunctionMode):
    """Per call of F.scaled_dot_product_attention: how eager called it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[EagerSdpa] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
            causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
            self.calls.append(EagerSdpa(mask is not None, bool(causal),
                                        bool(kwargs.get("enable_gqa", False))))
        return func(*args, **kwargs)


def eager_sdpa_calls(model: torch.nn.Module, args: Args, kwargs: Kwargs) -> List[EagerSdpa]:
    """match_eager_sdpa's record: one no-grad eager forward, leaving no trace."""
    log = _SdpaLog()
    with log:
        _eager_forward(model, model, args, kwargs)
    return log.calls


def _eager_forward(owner: torch.nn.Module, m: torch.nn.Module, args: Args, kwargs: Kwargs
                   ) -> None:
    """m(*args, **kwargs) without grad, from seed 0; owner's buffers (BatchNorm
    statistics) and the RNG are left as they were."""
    saved = [(b, b.detach().clone()) for b in owner.buffers()]
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m(*args, **kwargs)
    with torch.no_grad():
        for b, v in saved:
            b.copy_(v)


def _bind(n: fx.Node) -> Dict[str, Any]:
    """The call's arguments by name, defaults filled in."""
    out: Dict[str, Any] = {}
    for i, a in enumerate(n.target._schema.arguments):  # type: ignore[union-attr]
        if i < len(n.args):
            out[a.name] = n.args[i]
        elif a.name in n.kwargs:
            out[a.name] = n.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
    return out


def _value(gm: fx.GraphModule, node: fx.Node, feeds: Dict[fx.Node, Any],
           memo: Dict[fx.Node, Any]) -> Any:
    """node's value, computing only its ancestors; None if one is a
    placeholder outside feeds or a call that mutates or draws numbers."""
    todo = [node]
    while todo:
        n = todo[-1]
        if n in memo:
            todo.pop()
            continue
        missing = [a for a in n.all_input_nodes if a not in memo]
        if missing:
            todo.extend(missing)
            continue
        todo.pop()
        if n.op in CALL_OPS and n.is_impure():
            return None  # mutates or draws random numbers: leave it to the step
        if n.op == "placeholder":
            if n not in feeds:
                return None  # a parameter or buffer: its value may change
            memo[n] = feeds[n]
        elif n.op == "get_attr":
            memo[n] = _fetch_attr(gm, n.target)  # type: ignore[arg-type]
        else:
            with torch.no_grad():
                memo[n] = _call(gm, n, fx.node.map_arg(n.args, lambda a: memo[a]),
                                fx.node.map_arg(n.kwargs, lambda a: memo[a]))
    return memo[node]


def _is_causal_mask(mask: Any, query: fx.Node, key: fx.Node) -> bool:
    q, k = query.meta.get("val"), key.meta.get("val")
    if not (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() >= 2
            and isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)):
        return False
    L, S = q.shape[-2], k.shape[-2]
    if tuple(mask.shape[-2:]) != (L, S):
        return False
    tril = torch.ones(L, S, dtype=torch.bool, device=mask.device).tril()
    return bool(torch.equal(mask, tril.expand(mask.shape)))


def _erase_unused(gm: fx.GraphModule, node: fx.Node) -> None:
    """Erases node if nothing reads it, then its inputs likewise (pure ops
    only: a call that mutates or asserts stays)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if n.users or n.op != "call_function" or n.is_impure():
            continue
        ins = list(n.all_input_nodes)
        gm.graph.erase_node(n)
        todo.extend(ins)


# --------------------------------------------------------------------------
# Facts from one real forward

@dataclasses.dataclass
class NodeFacts:
    pos: int
    outputs: List[Tuple[StorageKey, int]]  # storages of the output tensors
    single_tensor: bool
    requires_grad: bool
    saved: Set[StorageKey]                 # storages autograd saved for this node
    mutated: Set[StorageKey]               # input storages whose version moved
    inputs: Set[StorageKey]                # storages of the input tensors
    random: bool
    seconds: float


def _is_random(node: fx.Node) -> bool:
    """Draws random numbers. A dropout (or attention) whose probability
    argument is 0, or whose train argument is False, draws none."""
    tags = getattr(node.target, "tags", ())
    if torch.Tag.nondeterministic_seeded not in tags:
        return False
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return True
    for i, a in enumerate(schema.arguments):
        if a.name not in ("p", "dropout_p", "train"):
            continue
        v = node.args[i] if i < len(node.args) else node.kwargs.get(a.name, a.default_value)
        if (a.name == "train" and v is False) or (a.name != "train" and v == 0):
            return False
    return True


def analyze(gm: fx.GraphModule, calls: Sequence[fx.Node],
            feeds: Dict[fx.Node, Any]) -> Dict[fx.Node, NodeFacts]:
    """Runs the graph once on real values (`feeds`: a value per placeholder)
    and records the facts of every call node. The caller passes scratch
    copies of buffers and forks the RNG: this run must leave no trace."""
    env: Dict[fx.Node, Any] = dict(feeds)
    facts: Dict[fx.Node, NodeFacts] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            env[n] = _fetch_attr(gm, n.target)
    # Kernels such as batch_norm update running statistics without moving
    # their version counter: compare the placeholders' values instead.
    before = {ph: v.detach().clone() for ph, v in feeds.items() if isinstance(v, torch.Tensor)}
    for pos, n in enumerate(calls):
        args = fx.node.map_arg(n.args, lambda a: env[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
        ins = [t for a in n.all_input_nodes for t in tensors_in(env[a])]
        versions = [t._version for t in ins]
        saved: Set[StorageKey] = set()

        def pack(t: torch.Tensor, saved: Set[StorageKey] = saved) -> torch.Tensor:
            saved.add(storage_key(t)[0])
            return t.detach()  # not t: t -> grad_fn -> saved t is a cycle
        t0 = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = _call(gm, n, args, kwargs)
        seconds = time.perf_counter() - t0
        env[n] = out
        outs = tensors_in(out)
        mutated = {storage_key(t)[0] for t, v in zip(ins, versions) if t._version != v}
        facts[n] = NodeFacts(pos, [storage_key(t) for t in outs], isinstance(out, torch.Tensor),
                             any(t.requires_grad for t in outs), saved, mutated,
                             {storage_key(t)[0] for t in ins}, _is_random(n), seconds)
    changed = {storage_key(feeds[ph])[0] for ph, v in before.items()
               if not _same(v, feeds[ph])}
    for n in calls:  # a changed placeholder: each node reading it may write it
        facts[n].mutated |= facts[n].inputs & changed
    return facts


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        torch.equal(a, b) if not a.is_floating_point() else
        torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)))


def _fetch_attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _call(gm: fx.GraphModule, n: fx.Node, args: Any, kwargs: Any) -> Any:
    target: Any = n.target
    if n.op == "call_function":
        return target(*args, **kwargs)
    if n.op == "call_module":
        return gm.get_submodule(target)(*args, **kwargs)
    return getattr(args[0], target)(*args[1:], **kwargs)


# --------------------------------------------------------------------------
# Cutting

@dataclasses.dataclass
class Cut:
    """Where stages begin and end, as positions in `calls`."""
    starts: List[int]              # first call position of each stage
    boundaries: List[List[fx.Node]]  # activations crossing the end of each stage (last: [])
    reasons: Dict[str, int]        # why positions were not cuts (for the report)


def dynamic_nodes(gm: fx.GraphModule, user_inputs: Set[fx.Node]) -> Set[fx.Node]:
    """Nodes whose value depends on a user input."""
    dyn: Set[fx.Node] = set(user_inputs)
    for n in gm.graph.nodes:
        if n.op in CALL_OPS and any(a in dyn for a in n.all_input_nodes):
            dyn.add(n)
    return dyn


def last_uses(calls: Sequence[fx.Node]) -> Dict[fx.Node, int]:
    """Position of the last call node reading each node (outputs excluded)."""
    pos = {n: i for i, n in enumerate(calls)}
    last: Dict[fx.Node, int] = {}
    for n in calls:
        for a in n.all_input_nodes:
            last[a] = max(last.get(a, -1), pos[n])
    return last


def pinned_positions(calls: Sequence[fx.Node], facts: Dict[fx.Node, NodeFacts],
                     placeholder_storages: Set[StorageKey]) -> Tuple[List[bool], Set[StorageKey]]:
    """Positions after which no boundary may fall, and the placeholder storages
    (buffers, inputs) the graph mutates. A storage made at position r and
    mutated at m > r pins [r, m) into one stage: a boundary in between would
    keep a checkpoint that a later stage overwrites. A mutated placeholder
    storage pins its first reader to its last mutator, so one stage does all
    of it and its recomputation can run on a snapshot taken at the step's
    start."""
    pinned = [False] * len(calls)
    made: Dict[StorageKey, int] = {}
    first_read: Dict[StorageKey, int] = {}
    for n in calls:
        f = facts[n]
        for key in f.inputs:
            first_read.setdefault(key, f.pos)
        for key, _ in f.outputs:
            if key not in placeholder_storages:
                made.setdefault(key, f.pos)
    mutated_placeholders: Set[StorageKey] = set()
    for n in calls:
        m = facts[n].pos
        for key in facts[n].mutated:
            if key in placeholder_storages:
                mutated_placeholders.add(key)
                r = first_read.get(key, m)
            else:
                r = made.get(key, m)
            for k in range(r, m):
                pinned[k] = True
    return pinned, mutated_placeholders


def choose_cuts(calls: Sequence[fx.Node], facts: Dict[fx.Node, NodeFacts],
                acts: Set[fx.Node], input_acts: Sequence[fx.Node],
                storage_of: Dict[fx.Node, StorageKey], pinned: List[bool],
                max_stages: int, held_acts: AbstractSet[fx.Node] = frozenset()) -> Cut:
    """Stage boundaries by the rules of the module docstring; the activations
    in held_acts are held, so they cross no boundary."""
    last = last_uses(calls)
    saved_all: Set[StorageKey] = set()
    for f in facts.values():
        saved_all |= f.saved
    reasons = {"mutated later": 0, "not kept by autograd": 0, "shared with previous": 0,
               "not a tensor": 0}
    live: Dict[fx.Node, None] = {a: None for a in input_acts if last.get(a, -1) >= 0}
    cuts: List[int] = []
    bounds: List[List[fx.Node]] = []
    prev: Set[Optional[StorageKey]] = {storage_of.get(a) for a in live}
    for k, n in enumerate(calls[:-1]):
        if n in acts and n not in held_acts and last.get(n, -1) > k:
            live[n] = None
        for a in [a for a in live if last.get(a, -1) <= k]:
            del live[a]
        if not live:
            continue
        crossing = set(live)
        keys = {storage_of.get(a) for a in crossing}
        if pinned[k]:
            reasons["mutated later"] += 1
        elif any(a in facts and not facts[a].single_tensor for a in crossing):
            reasons["not a tensor"] += 1
        elif keys & prev:
            reasons["shared with previous"] += 1
        elif any(key not in saved_all for key in keys):
            reasons["not kept by autograd"] += 1
        else:
            cuts.append(k)
            bounds.append(sorted(crossing, key=lambda a: facts[a].pos if a in facts else -1))
            prev = keys
    starts = [0] + [k + 1 for k in cuts]
    bounds.append([])
    starts, bounds = _merge(starts, bounds, calls, facts, max_stages)
    return Cut(starts, bounds, reasons)


def held_activations(calls: Sequence[fx.Node], facts: Dict[fx.Node, NodeFacts],
                     acts: Set[fx.Node], input_acts: Sequence[fx.Node],
                     storage_of: Dict[fx.Node, StorageKey], pinned: List[bool]
                     ) -> Set[fx.Node]:
    """Activations to hold for the whole step instead of passing them from
    stage to stage. An activation crosses at most one boundary, so one that
    many layers read (an encoder's output, read by every decoder layer's
    cross-attention) keeps all of them in one stage. Candidates are made
    outside a stack of numbered layers and read inside two or more of them
    (`_stack_input`), so not a layer's input read by its q, k and v
    projections or by a norm and the residual sum: holding those for the
    whole step would buy cuts inside one layer at the price of a whole-step
    copy. The one read furthest away is tried first, and each is kept only
    if holding it lets two or more boundaries fall that could not before."""
    pos = {n: i for i, n in enumerate(calls)}
    readers: Dict[fx.Node, List[fx.Node]] = {}
    for n in calls:
        for a in n.all_input_nodes:
            if a in acts and a in pos:
                readers.setdefault(a, []).append(n)
    cands = sorted((a for a, r in readers.items() if _stack_input(a, r)),
                   key=lambda a: (pos[a] - max(pos[u] for u in readers[a]), pos[a]))
    held: Set[fx.Node] = set()
    if not cands:
        return held
    every = len(calls) + 1  # no merging: count the boundaries themselves

    def count(h: Set[fx.Node]) -> int:
        return len(choose_cuts(calls, facts, acts, input_acts, storage_of, pinned, every,
                               h).starts)
    best = count(held)
    for a in cands:
        more = count(held | {a})
        if more >= best + 2:
            held.add(a)
            best = more
    return held


def _module_path(n: fx.Node) -> List[str]:
    stack = n.meta.get("nn_module_stack") or {}
    return [str(v[0]) for v in stack.values()]


def _stack_input(node: fx.Node, readers: Sequence[fx.Node]) -> bool:
    """Whether node is made outside a stack of numbered layers (`layers.0`,
    `layers.1`: children of the readers' innermost common module that differ
    only in a trailing number) and read inside two or more of them: an
    encoder's output in a decoder. Not a value the stack makes and its later
    layers read (DenseNet's features: holding each for the step would count
    it from before it is made)."""
    paths = [_module_path(n) for n in readers]
    common = 0
    while all(len(p) > common for p in paths) and len({p[common] for p in paths}) == 1:
        common += 1
    if paths and _module_path(node)[:common] == paths[0][:common]:
        return False  # made inside the stack (or no module tells)
    stems: Dict[str, Set[str]] = {}
    for p in paths:
        if len(p) > common:
            m = re.match(r"(.*?)(\d+)$", p[common])
            if m:
                stems.setdefault(m.group(1), set()).add(m.group(2))
    return max((len(v) for v in stems.values()), default=0) >= 2


def _merge(starts: List[int], bounds: List[List[fx.Node]], calls: Sequence[fx.Node],
           facts: Dict[fx.Node, NodeFacts], max_stages: int
           ) -> Tuple[List[int], List[List[fx.Node]]]:
    """Removes boundaries until at most max_stages stages remain: each time
    the one joining the two adjacent stages of smallest total forward time."""
    if len(starts) <= max_stages:
        return starts, bounds
    ends = starts[1:] + [len(calls)]
    secs = [sum(facts[calls[p]].seconds for p in range(s, e)) for s, e in zip(starts, ends)]
    alive = [True] * len(starts)
    nxt = list(range(1, len(starts) + 1))
    prv = list(range(-1, len(starts) - 1))
    heap = [(secs[i] + secs[i + 1], i, i + 1) for i in range(len(starts) - 1)]
    heapq.heapify(heap)
    count = len(starts)
    while count > max_stages and heap:
        total, i, j = heapq.heappop(heap)
        if not (alive[i] and alive[j] and nxt[i] == j and secs[i] + secs[j] == total):
            continue
        alive[j] = False  # stage j joins stage i; i takes j's end boundary
        secs[i] = total
        bounds[i] = bounds[j]
        nxt[i] = nxt[j]
        if nxt[j] < len(starts):
            prv[nxt[j]] = i
            heapq.heappush(heap, (secs[i] + secs[nxt[i]], i, nxt[i]))
        if prv[i] >= 0:
            heapq.heappush(heap, (secs[prv[i]] + secs[i], prv[i], i))
        count -= 1
    keep = [i for i in range(len(starts)) if alive[i]]
    return [starts[i] for i in keep], [bounds[i] for i in keep]


# --------------------------------------------------------------------------
# Stage graphs

@dataclasses.dataclass
class GraphStage:
    index: int                     # 1-based
    name: str
    nodes: List[fx.Node]
    inputs: List[fx.Node]          # main run: values read from outside, placeholder order
    outputs: List[fx.Node]         # main run: values produced here and read later
    boundary: List[fx.Node]        # activations crossing the end of the stage
    re_inputs: List[fx.Node]       # recomputation: inputs, then held values made here
    re_outputs: List[fx.Node]      # recomputation: what it returns (a[j])
    mutated: List[fx.Node]         # placeholders the stage updates in place
    random: bool
    gm: fx.GraphModule
    gm_re: fx.GraphModule
    # an SDPA call whose mask requires grad: with grad, SDPA runs its math
    # kernel; a recomputation without grad must too, or its values differ
    sdpa_math: bool = False


def _subgraph(root: fx.GraphModule, name: str, nodes: Sequence[fx.Node],
              inputs: Sequence[fx.Node], outputs: Sequence[fx.Node],
              keep: Sequence[fx.Node] = ()) -> fx.GraphModule:
    """A GraphModule computing `outputs` from `inputs` with `nodes`, and the
    nodes in `keep` even if no output reads them. A node that is also an
    input is read, not computed, except a random one: it still runs, so the
    random numbers drawn after it stay the same."""
    g = fx.Graph()
    env: Dict[fx.Node, fx.Node] = {a: g.placeholder(a.name) for a in inputs}
    for n in nodes:
        if n in env and not _is_random(n):
            continue
        for a in n.all_input_nodes:
            if a.op == "get_attr" and a not in env:
                env[a] = g.node_copy(a)
        copy = g.node_copy(n, lambda a: env[a])
        env.setdefault(n, copy)
    g.output(tuple(env[o] for o in outputs))
    kept = {env[n] for n in keep}
    for n in reversed(list(g.nodes)):  # dead code, keeping side effects and draws
        if n.op not in ("placeholder", "output") and not n.users and not n.is_impure() \
                and not _is_random(n) and n not in kept:
            g.erase_node(n)
    gm = fx.GraphModule(root, g, class_name=name)
    _box(gm)
    return gm


def _box(gm: fx.GraphModule) -> None:
    """Boxed calling convention where this torch has it: the module takes one
    list and empties it, so an input can be freed after its last use inside
    the stage, as in eager mode, instead of living until the stage returns."""
    codegen = getattr(fx.graph, "_BoxedCodeGen", None)
    gm.remat_boxed = False  # type: ignore[assignment]
    if codegen is None:
        return
    try:
        gm.graph.set_codegen(codegen())
        gm.recompile()
        gm.remat_boxed = True  # type: ignore[assignment]
    except Exception:  # an older torch whose codegen differs: plain calls
        gm.graph.set_codegen(fx.graph.CodeGen())
        gm.recompile()


def call(gm: fx.GraphModule, args: List[Any]) -> Any:
    """Runs a stage module on `args` (emptied when the module is boxed)."""
    if gm.remat_boxed:
        return gm(args)
    out = gm(*args)
    args.clear()
    return out


def build_stage(root: fx.GraphModule, index: int, name: str, nodes: List[fx.Node],
                read_later: Callable[[fx.Node], bool], boundary: List[fx.Node],
                re_outputs: List[fx.Node], held: Set[fx.Node], mutated: List[fx.Node],
                random: bool, remake: AbstractSet[fx.Node] = frozenset()) -> GraphStage:
    """Stage `index`: its main-run module (returns everything later stages or
    the model's outputs read) and its recomputation module (returns a[j]; the
    values of `held` it made in the main run are read, not recomputed; those
    of `remake` are made again even if a[j] does not need them)."""
    inside = set(nodes)
    inputs: List[fx.Node] = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a.op != "get_attr" and a not in inputs:
                inputs.append(a)
    outputs = [n for n in nodes if read_later(n)]
    held_here = [n for n in nodes if n in held]
    re_inputs = inputs + held_here
    gm = _subgraph(root, "Stage%d" % index, nodes, inputs, outputs)
    gm_re = _subgraph(root, "Stage%dRe" % index, nodes, re_inputs, re_outputs,
                      [n for n in nodes if n in remake])
    return GraphStage(index, name, nodes, inputs, outputs, boundary, re_inputs, re_outputs,
                      mutated, random, gm, gm_re)


def stage_name(index: int, nodes: Sequence[fx.Node]) -> str:
    """A readable name: the innermost module path common to the stage's nodes."""
    paths = []
    for n in nodes:
        st = n.meta.get("nn_module_stack")
        if st:
            paths.append(list(v[0] for v in st.values()))
    common: List[str] = []
    if paths:
        for level in zip(*paths):
            if all(x == level[0] for x in level):
                common.append(level[0])
            else:
                break
    where = common[-1] if common and common[-1] else (paths[0][-1] if paths else "graph")
    return "%d:%s" % (index, where or "model")


# --------------------------------------------------------------------------
# Does the graph run what eager runs?

_IGNORED_OPS = ("aten._assert", "aten.detach", "aten.alias", "aten.lift_fresh")


class _OpLog(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The ops reached from the parameters, with their output shapes. Mask
    and index building (from inputs alone) and views are left out: they may
    differ without changing any value autograd sees."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: List[Tuple[str, Tuple[Any, ...]]] = []
        # storage address -> tensors reached with it (weakly: once they are
        # gone, the address may come back for an unrelated tensor)
        self.reached: Dict[int, List[Any]] = {}
        for p in params:
            self._mark(p)

    def _mark(self, t: torch.Tensor) -> None:
        self.reached.setdefault(t.untyped_storage().data_ptr(), []).append(weakref.ref(t))

    def _is_reached(self, t: torch.Tensor) -> bool:
        refs = self.reached.get(t.untyped_storage().data_ptr())
        if refs is None:
            return False
        refs[:] = [r for r in refs if r() is not None]
        return bool(refs)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        ins = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if any(self._is_reached(a) for a in ins):
            outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            for t in outs:
                self._mark(t)
            name = str(func).rsplit(".", 1)[0]
            ptrs = {a.untyped_storage().data_ptr() for a in ins}
            views = all(t.untyped_storage().data_ptr() in ptrs for t in outs)
            if not name.startswith(_IGNORED_OPS) and not views:  # views change nothing
                self.ops.append((name, tuple((tuple(t.shape), str(t.dtype)) for t in outs)))
        return out


def first_difference(model: torch.nn.Module, graph_module: torch.nn.Module, args: Args,
                     kwargs: Kwargs) -> Optional[str]:
    """None when one no-grad forward of `model` and of the captured graph
    dispatch the same operators (by name and output shape) on everything
    computed from the parameters; else the first difference. Libraries may
    take other code paths while traced (Hugging Face repeats the key/value
    heads of grouped-query attention and builds an explicit mask where eager
    calls SDPA with enable_gqa and is_causal): the values agree, but the
    backward kernels differ and gradients change in the last bits. Buffers
    and the RNG are left as they were."""
    logs = []
    for m in (model, graph_module):
        with _OpLog(list(m.parameters())) as log:
            _eager_forward(model, m, args, kwargs)
        logs.append(log.ops)
    a, b = logs
    if a == b:
        return None
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "operator %d: eager runs %s, the graph %s" % (
        k, a[k][0] if k < len(a) else "nothing", b[k][0] if k < len(b) else "nothing")

"""Cutting the exported graph into a chain.

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
  autograd pays), or small ones (`small_bytes`: a running auxiliary loss
  `aux = aux + ...` threading through mixture-of-experts blocks, router
  statistics; their bytes are part of a[i]), when no later node mutates a
  storage made before it, and when it shares no storage with the previous
  boundary. The last rule makes each activation cross at most one boundary,
  so no storage is counted twice; with a single activation it is the
  articulation point of the graph. A small activation read far from where
  it is made (the image embedding of a two-tower model, read after the
  whole text tower, a mixture of experts' router logits read by the loss
  after the last layer) would cross many boundaries: it is held instead
  when that lets a boundary fall (`held_activations`, SMALL_HELD);
- boundaries are taken greedily, earliest first (the most stages), then
  merged pairwise, smallest merged forward time first, down to `max_stages`.
"""
from __future__ import annotations

import dataclasses
import heapq
import re
import time
from typing import AbstractSet, Any, Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch import fx

from .._tensors import StorageKey, saving, storage_key, tensors_in
from .nodes import CALL_OPS, call_node, fetch_attr, is_random


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


def analyze(gm: fx.GraphModule, calls: Sequence[fx.Node],
            feeds: Dict[fx.Node, Any]) -> Dict[fx.Node, NodeFacts]:
    """Runs the graph once on real values (`feeds`: a value per placeholder)
    and records the facts of every call node. The caller passes scratch
    copies of buffers and forks the RNG: this run must leave no trace."""
    env: Dict[fx.Node, Any] = dict(feeds)
    facts: Dict[fx.Node, NodeFacts] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            env[n] = fetch_attr(gm, n.target)
    # Kernels such as batch_norm update running statistics without moving
    # their version counter: compare the placeholders' values instead.
    before = {ph: v.detach().clone() for ph, v in feeds.items() if isinstance(v, torch.Tensor)}
    for pos, n in enumerate(calls):
        args = fx.node.map_arg(n.args, lambda a: env[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
        ins = [t for a in n.all_input_nodes for t in tensors_in(env[a])]
        versions = [t._version for t in ins]
        saved: Set[StorageKey] = set()

        def seen(t: torch.Tensor, saved: Set[StorageKey] = saved) -> None:
            saved.add(storage_key(t)[0])
        t0 = time.perf_counter()
        with saving(frozenset(), seen=seen):
            out = call_node(gm, n, args, kwargs)
        seconds = time.perf_counter() - t0
        env[n] = out
        outs = tensors_in(out)
        mutated = {storage_key(t)[0] for t, v in zip(ins, versions) if t._version != v}
        facts[n] = NodeFacts(pos, [storage_key(t) for t in outs], isinstance(out, torch.Tensor),
                             any(t.requires_grad for t in outs), saved, mutated,
                             {storage_key(t)[0] for t in ins}, is_random(n), seconds)
    changed = {storage_key(feeds[ph])[0] for ph, v in before.items()
               if not _same(v, feeds[ph])}
    for n in calls:  # a changed placeholder: each node reading it may write it
        facts[n].mutated |= facts[n].inputs & changed
    return facts


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        torch.equal(a, b) if not a.is_floating_point() else
        torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)))


SMALL_BYTES = 4096    # a tensor this small may cross a boundary autograd does not save it at
SMALL_FRACTION = 16   # and so may one of a 16th of the median activation or less


def small_bytes(facts: Dict[fx.Node, NodeFacts], acts: Set[fx.Node]) -> int:
    """The size of a small activation: SMALL_BYTES, or a SMALL_FRACTION-th of
    the median activation's storage when that is larger (the batch scales
    a pooled embedding as it scales the hidden states)."""
    sizes = sorted(facts[a].outputs[0][1] for a in acts if a in facts and facts[a].outputs)
    median = sizes[len(sizes) // 2] if sizes else 0
    return max(SMALL_BYTES, median // SMALL_FRACTION)


def _storage_bytes(facts: Dict[fx.Node, NodeFacts]) -> Dict[StorageKey, int]:
    return {key: size for f in facts.values() for key, size in f.outputs}


@dataclasses.dataclass
class Cut:
    """Where stages begin and end, as positions in `calls`."""
    starts: List[int]              # first call position of each stage
    boundaries: List[List[fx.Node]]  # activations crossing the end of each stage (last: [])
    reasons: Dict[str, int]        # why positions were not cuts (for the report)


# An input's sizes (a graph exported with dynamic dimensions reads them):
# what is made from them and the parameters alone (T5's position bias from
# arange(seq)) is the same for the whole step, held like a constant.
_SIZE_OPS = {getattr(torch.ops.aten, name).int for name in ("sym_size", "sym_stride")
             if hasattr(torch.ops.aten, name)} | \
    {getattr(torch.ops.aten, name).default for name in ("sym_numel", "sym_storage_offset")
     if hasattr(torch.ops.aten, name)}


def dynamic_nodes(gm: fx.GraphModule, user_inputs: Set[fx.Node]) -> Set[fx.Node]:
    """Nodes whose value depends on a user input's values (not only on its
    sizes)."""
    dyn: Set[fx.Node] = set(user_inputs)
    for n in gm.graph.nodes:
        if n.op in CALL_OPS and n.target not in _SIZE_OPS and \
                any(a in dyn for a in n.all_input_nodes):
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
    nbytes = _storage_bytes(facts)
    small = small_bytes(facts, acts)
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
        elif sum(nbytes.get(key, small + 1) if key is not None else small + 1
                 for key in keys if key not in saved_all) > small:
            reasons["not kept by autograd"] += 1
        else:
            cuts.append(k)
            bounds.append(sorted(crossing, key=lambda a: facts[a].pos if a in facts else -1))
            prev = keys
    starts = [0] + [k + 1 for k in cuts]
    bounds.append([])
    starts, bounds = _merge(starts, bounds, calls, facts, max_stages)
    return Cut(starts, bounds, reasons)


# Small activations tried as held values, at most (0: off). A mixture of
# experts' router logits, one per layer, read by the load-balancing loss
# after the last layer: without holding them no cut falls after the first
# layer (OLMoE, 4 layers: smallest limit 7.31 MiB against Hugging Face
# checkpointing's 3.31; held: 2.64). A 2-layer CLIP as one chain measures
# about 7 KB over the prediction in its vision tower's recomputations with
# or without held values (test_torch_saves.py::test_small_embedding_held).
SMALL_HELD = 32
SMALL_SPAN = 16   # read at least this many operators after where they are made


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
    if holding it lets two or more boundaries fall that could not before.
    Then small activations (small_bytes; at most SMALL_HELD of them, those
    alive longest first) read far from where they are made (an image
    embedding read after the whole text tower): each is held if that lets
    one boundary fall; holding it for the step costs almost nothing."""
    pos = {n: i for i, n in enumerate(calls)}
    readers: Dict[fx.Node, List[fx.Node]] = {}
    for n in calls:
        for a in n.all_input_nodes:
            if a in acts and a in pos:
                readers.setdefault(a, []).append(n)

    def span(a: fx.Node) -> int:
        return max(pos[u] for u in readers[a]) - pos[a]
    cands = sorted((a for a, r in readers.items() if _stack_input(a, r)),
                   key=lambda a: (-span(a), pos[a]))
    small = small_bytes(facts, acts)
    smalls = sorted((a for a in readers if a not in cands and span(a) >= SMALL_SPAN
                     and facts[a].single_tensor and facts[a].outputs
                     and facts[a].outputs[0][1] <= small),
                    key=lambda a: (-span(a), pos[a]))[:SMALL_HELD]
    held: Set[fx.Node] = set()
    if not cands and not smalls:
        return held
    every = len(calls) + 1  # no merging: count the boundaries themselves

    def count(h: Set[fx.Node]) -> int:
        return len(choose_cuts(calls, facts, acts, input_acts, storage_of, pinned, every,
                               h).starts)
    best = count(held)
    for a in cands + smalls:
        more = count(held | {a})
        if more >= best + (2 if a in cands else 1):
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

"""Towers: a graph made of several independent input-to-loss paths that
meet only at the loss or at a small head (CLIP's text and vision towers and
their contrastive loss, a siamese or triplet network's encoder applied to
each input and a margin loss). Such a graph is a join network
(docs/join.md): each tower a chain of stages, the head its turn.

Which nodes belong to which tower follows from the user inputs each node
depends on. The inputs are split into groups (every way of splitting them
is tried; a model has a few); a node depending on one group's inputs only
belongs to that group's tower, a node depending on two or more groups that
carry activations belongs to the head. The split with the smallest head
wins. Nodes that depend on no input (position ids sliced from a buffer, a
parameter's exp) go with their readers. The inputs' sizes and arithmetic on
them (`shapes`) belong to no tower: an exported graph reads the batch size
from one input wherever it is needed (SigLIP's vision attention reshapes by
the text's batch size), and the join program computes them before any tower.

The towers run in any order when the order cannot change a result. It can
when a tower draws random numbers (dropout: the draws come in the model's
order) or when towers share parameters (autograd sums each parameter's
gradient over its readers in the order their backward runs): the towers
are then `ordered`, run one after another as the model runs them.
"""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

import torch
from torch import fx

from .._tensors import StorageKey
from .cut import NodeFacts
from .nodes import is_random

MAX_TOWERS = 4  # the join solver's branches (include/remat/hjoin.h)
MAX_INPUTS = 6  # inputs to split (Bell(6) = 203 ways)
HEAD = -1


@dataclasses.dataclass
class Towers:
    """The towers' call nodes (graph order; towers in the model's order), the
    head's (graph order; empty when the towers meet in the caller's loss),
    each tower's user inputs, whether the towers must run in order, and the
    size nodes (graph order) that are computed before every tower."""
    towers: List[List[fx.Node]]
    head: List[fx.Node]
    inputs: List[List[fx.Node]]
    ordered: bool
    why_ordered: str
    shapes: List[fx.Node] = dataclasses.field(default_factory=list)


def find_towers(calls: Sequence[fx.Node], user_inputs: Sequence[fx.Node],
                acts: AbstractSet[fx.Node], facts: Dict[fx.Node, NodeFacts],
                params: AbstractSet[fx.Node],
                placeholder_storages: AbstractSet[StorageKey]) -> Tuple[Optional[Towers], str]:
    """The towers of a graph, or None and why not: "" when the graph has no
    towers at all (one input path, or inputs that meet early), else why the
    towers found cannot run apart. `params`: the parameter placeholders;
    `placeholder_storages`: the storages of all placeholders (a buffer
    updated by two towers keeps the graph one chain)."""
    shapes = size_nodes(calls, user_inputs)
    anc = _inputs_of(calls, user_inputs, shapes)
    used = sorted({i for s in anc.values() for i in s})
    if len(used) < 2:
        return None, ""
    if len(used) > MAX_INPUTS:
        return None, ""  # not tried: a model of towers has a few
    best: Optional[Dict[fx.Node, int]] = None
    best_key: Tuple[int, int] = (0, 0)
    for split in _splits(used):
        group = _groups(calls, anc, acts, split)
        if group is None:
            continue
        n_towers = len({g for g in group.values() if g != HEAD})
        n_head = sum(1 for g in group.values() if g == HEAD)
        key = (n_head, -n_towers)
        if best is None or key < best_key:
            best, best_key = group, key
    if best is None:
        return None, ""  # no split gives two towers that carry gradients
    group = best
    why = _assign_free(calls, group, shapes)
    if why:
        return None, why
    ids = sorted({g for g in group.values() if g != HEAD},
                 key=lambda g: min(i for i, n in enumerate(calls) if group.get(n) == g))
    towers = [[n for n in calls if group.get(n) == g] for g in ids]
    head = [n for n in calls if group.get(n) == HEAD]
    if len(head) * 2 > min(len(t) for t in towers):
        return None, ""  # the inputs meet early: the head would be most of the model
    why = _shared_updates(towers, facts, placeholder_storages)
    if why:
        return None, why
    inputs = [[user_inputs[i] for i in used if any(i in anc[n] for n in t)] for t in towers]
    ordered, why_ordered = _order(towers, params)
    return Towers(towers, head, inputs, ordered, why_ordered,
                  [n for n in calls if n in shapes]), ""


SIZE_TYPES = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


def size_nodes(calls: Sequence[fx.Node], user_inputs: Sequence[fx.Node]) -> Set[fx.Node]:
    """The call nodes computing a number from the user inputs' sizes alone
    (`sym_size` of an input, arithmetic on such numbers)."""
    inputs = set(user_inputs)
    out: Set[fx.Node] = set()
    for n in calls:
        if (isinstance(n.meta.get("val"), SIZE_TYPES) and n.all_input_nodes
                and all(a in inputs or a in out for a in n.all_input_nodes)):
            out.add(n)
    return out


def _inputs_of(calls: Sequence[fx.Node], user_inputs: Sequence[fx.Node],
               shapes: AbstractSet[fx.Node] = frozenset()) -> Dict[fx.Node, FrozenSet[int]]:
    """For each call node, the user inputs (by index) it depends on; an
    input's size is no dependence."""
    anc: Dict[fx.Node, FrozenSet[int]] = {ph: frozenset([i]) for i, ph in enumerate(user_inputs)}
    out: Dict[fx.Node, FrozenSet[int]] = {}
    for n in calls:
        s: FrozenSet[int] = frozenset()
        if n in shapes:
            out[n] = anc[n] = s
            continue
        for a in n.all_input_nodes:
            s = s | anc.get(a, frozenset())
        anc[n] = s
        out[n] = s
    return out


def _splits(items: List[int]) -> Iterator[List[List[int]]]:
    """Every partition of items into two or more blocks."""
    def rec(i: int, blocks: List[List[int]]) -> Iterator[List[List[int]]]:
        if i == len(items):
            if len(blocks) >= 2:
                yield [list(b) for b in blocks]
            return
        for b in blocks:
            b.append(items[i])
            yield from rec(i + 1, blocks)
            b.pop()
        blocks.append([items[i]])
        yield from rec(i + 1, blocks)
        blocks.pop()
    yield from rec(0, [])


def _groups(calls: Sequence[fx.Node], anc: Dict[fx.Node, FrozenSet[int]],
            acts: AbstractSet[fx.Node], split: List[List[int]]) -> Optional[Dict[fx.Node, int]]:
    """Each node's tower (a block of the split) or HEAD; nodes depending on no
    block that carries activations are left out (free). None when fewer than
    two or more than MAX_TOWERS blocks carry activations."""
    block = {i: k for k, b in enumerate(split) for i in b}
    carries: Set[int] = set()
    for n in calls:
        blocks = {block[i] for i in anc[n]}
        if n in acts and len(blocks) == 1:
            carries |= blocks
    if not 2 <= len(carries) <= MAX_TOWERS:
        return None
    group: Dict[fx.Node, int] = {}
    for n in calls:
        touched = {block[i] for i in anc[n]} & carries
        if len(touched) == 1:
            group[n] = next(iter(touched))
        elif touched:
            group[n] = HEAD
    return group


def _assign_free(calls: Sequence[fx.Node], group: Dict[fx.Node, int],
                 shapes: AbstractSet[fx.Node]) -> str:
    """Puts each node left out by _groups with its readers: in their tower,
    in the head when only the head reads it; one that only such nodes read
    (a buffer's updates, an output) with the node before it. Returns why not,
    when two towers read it (a value made once for both). The size nodes
    stay out: every tower reads them."""
    unread: Set[fx.Node] = set()
    for n in reversed(calls):
        if n in group or n in shapes:
            continue
        readers = {group[u] for u in n.users if u in group}
        if not readers:
            unread.add(n)
            continue
        towers = readers - {HEAD}
        if len(towers) > 1:
            return "two towers read %s, made once for both" % n.name
        group[n] = next(iter(towers)) if towers else HEAD
    prev = HEAD
    for n in calls:
        if n in shapes:
            continue
        if n in unread:
            group[n] = prev
        prev = group[n]
    return ""


def _shared_updates(towers: List[List[fx.Node]], facts: Dict[fx.Node, NodeFacts],
                    placeholder_storages: AbstractSet[StorageKey]) -> str:
    """Why not, when two towers update one buffer (batch norm's statistics of
    a shared encoder): the updates would follow the schedule's order."""
    by: Dict[StorageKey, Set[int]] = {}
    for t, nodes in enumerate(towers):
        for n in nodes:
            for key in facts[n].mutated & placeholder_storages:
                by.setdefault(key, set()).add(t)
    if any(len(ts) > 1 for ts in by.values()):
        return "two towers update one buffer (shared statistics)"
    return ""


def _order(towers: List[List[fx.Node]], params: AbstractSet[fx.Node]) -> Tuple[bool, str]:
    """Whether the towers must run in the model's order, and why."""
    for nodes in towers:
        for n in nodes:
            if is_random(n):
                return True, "a tower draws random numbers (%s)" % n.name
    readers: Dict[fx.Node, Set[int]] = {}
    for t, nodes in enumerate(towers):
        for n in nodes:
            for a in n.all_input_nodes:
                if a in params:
                    readers.setdefault(a, set()).add(t)
    if any(len(ts) > 1 for ts in readers.values()):
        return True, "the towers share parameters"
    return False, ""

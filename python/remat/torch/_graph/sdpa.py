"""SDPA calls as eager makes them: under export, libraries build explicit
causal masks and repeat grouped-query heads where eager passes is_causal and
enable_gqa; the graph's calls are made eager's again (match_eager_sdpa)."""
from __future__ import annotations

import copy
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import fx

from .._program import Args, Kwargs
from .cut import NodeFacts
from .export import eager_forward
from .nodes import CALL_OPS, call_node, fetch_attr


_SDPA = torch.ops.aten.scaled_dot_product_attention.default
_SYM_SIZE = torch.ops.aten.sym_size.int


def _sdpa_calls(nodes: Any) -> List[fx.Node]:
    return [n for n in nodes if n.op == "call_function" and n.target is _SDPA]


class EagerSdpa(NamedTuple):
    """How eager called F.scaled_dot_product_attention, once per call."""
    masked: bool  # passed attn_mask
    causal: bool  # passed is_causal
    gqa: bool     # passed enable_gqa: key and value keep their fewer heads


class CausalCheck:
    """Whether the masks match_eager_sdpa dropped are still the lower
    triangle for another input: under dynamic shapes they are built from
    the inputs' sizes (a sliding window, say, is the lower triangle at some
    lengths only), so each new shape computes them again from an untouched
    copy of the graph (small tensors, no parameters)."""

    def __init__(self, gm: fx.GraphModule, masks: Sequence[str], feeds: Dict[fx.Node, Any]
                 ) -> None:
        self.gm = gm
        by_name = {n.name: n for n in gm.graph.nodes}
        self.masks = [by_name[m] for m in dict.fromkeys(masks)]
        self.consts = {by_name[ph.name]: v for ph, v in feeds.items() if ph.name in by_name}

    def holds(self, shapes: Dict[str, torch.Size]) -> bool:
        """`shapes`: each user input placeholder's name -> its size now."""
        by_name = {n.name: n for n in self.gm.graph.nodes if n.op == "placeholder"}
        sized = {by_name[k]: v for k, v in shapes.items() if k in by_name}
        memo: Dict[fx.Node, Any] = {}
        return all(_is_causal_mask(_value(self.gm, m, self.consts, memo, sized), None, None)
                   for m in self.masks)


def match_eager_sdpa(gm: fx.GraphModule, feeds: Dict[fx.Node, Any],
                     eager: Sequence[EagerSdpa],
                     shapes: Optional[Dict[fx.Node, torch.Size]] = None
                     ) -> Tuple[int, int, Optional[CausalCheck]]:
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
    passes a mask and is_causal as eager's did.

    `shapes` (a dynamically exported graph): the user inputs' sizes, so a
    mask built from them (not from their values) is evaluated at these
    sizes; the third result then checks it again at other sizes."""
    sdpa = _sdpa_calls(gm.graph.nodes)
    if len(sdpa) != len(eager):
        return 0, 0, None  # the calls do not pair up
    sized = shapes or {}
    before = copy.deepcopy(gm) if sized else None
    dropped: List[str] = []
    has_gqa = any(a.name == "enable_gqa" for a in _SDPA._schema.arguments)
    values: Dict[fx.Node, Any] = {}
    causal = gqa = 0
    for n, rec in zip(sdpa, eager):
        bound = _bind(n)
        mask = bound.get("attn_mask")
        done = causal + gqa
        if rec.causal and not rec.masked and isinstance(mask, fx.Node) and \
                not bound.get("is_causal") and \
                _is_causal_mask(_value(gm, mask, feeds, values, sized), bound["query"],
                                bound["key"]):
            bound.update(attn_mask=None, is_causal=True)  # a user input leaves _value None
            dropped.append(mask.name)
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
    check = None
    if before is not None and any(_reads_sizes(before, m) for m in dropped):
        check = CausalCheck(before, dropped, feeds)
    return causal, gqa, check


def _reads_sizes(gm: fx.GraphModule, name: str) -> bool:
    """Whether the node named `name` is computed from an input's size."""
    node = next(n for n in gm.graph.nodes if n.name == name)
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "call_function" and n.target is _SYM_SIZE:
            return True
        todo.extend(n.all_input_nodes)
    return False


def _repeated_heads(node: Any) -> Optional[fx.Node]:
    """x when node is Hugging Face's repeat_kv(x): x[:, :, None] expanded to
    (B, H, r, S, D) and reshaped to (B, H*r, S, D), head h reading x's head
    h // r, as SDPA's enable_gqa reads it; else None."""
    shapes = []
    n = node
    for want in (("reshape", "view", "_unsafe_view"), ("clone",), ("expand",), ("unsqueeze",)):
        n = _past_full_slices(n)
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
    n = _past_full_slices(n)
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


_SLICE = torch.ops.aten.slice.Tensor


def _past_full_slices(n: Any) -> Any:
    """n's input while n is a slice of a whole dimension (x[:, :] under
    dynamic shapes, which a fixed-size export leaves out)."""
    while isinstance(n, fx.Node) and n.op == "call_function" and n.target is _SLICE:
        start = n.args[2] if len(n.args) > 2 else n.kwargs.get("start", 0)
        end = n.args[3] if len(n.args) > 3 else n.kwargs.get("end", None)
        step = n.args[4] if len(n.args) > 4 else n.kwargs.get("step", 1)
        if start not in (0, None) or step != 1 or not (end is None or
                                                        (isinstance(end, int) and end >= 1 << 62)):
            break
        n = n.args[0]
    return n


def sdpa_mask_requires_grad(nodes: Sequence[fx.Node], facts: Dict[fx.Node, NodeFacts]
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
        eager_forward(model, model, args, kwargs)
    return log.calls


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
           memo: Dict[fx.Node, Any], shapes: Optional[Dict[fx.Node, Any]] = None) -> Any:
    """node's value, computing only its ancestors; None if one is a
    placeholder outside feeds or a call that mutates or draws numbers. The
    size of a placeholder in `shapes` (a dynamic graph's sym_size) is known."""
    todo = [node]
    while todo:
        n = todo[-1]
        if n in memo:
            todo.pop()
            continue
        if shapes and n.op == "call_function" and n.target is _SYM_SIZE and \
                n.args[0] in shapes:
            memo[n] = int(shapes[n.args[0]][n.args[1]])  # type: ignore[index]
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
            memo[n] = fetch_attr(gm, n.target)  # type: ignore[arg-type]
        else:
            with torch.no_grad():
                memo[n] = call_node(gm, n, fx.node.map_arg(n.args, lambda a: memo[a]),
                                fx.node.map_arg(n.kwargs, lambda a: memo[a]))
    return memo[node]


def _is_causal_mask(mask: Any, query: Optional[fx.Node], key: Optional[fx.Node]) -> bool:
    """Whether mask is the lower triangle over (query, key) lengths; lengths
    that are symbolic (or no nodes given) are the mask's own, which must
    then be full (no broadcast dimension)."""
    q = query.meta.get("val") if query is not None else None
    k = key.meta.get("val") if key is not None else None
    if not (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() >= 2):
        return False
    L, S = int(mask.shape[-2]), int(mask.shape[-1])
    lengths = [x.shape[-2] if isinstance(x, torch.Tensor) else None for x in (q, k)]
    if any(not isinstance(n, int) for n in lengths):
        if query is not None and (not isinstance(q, torch.Tensor) or
                                  not isinstance(k, torch.Tensor)):
            return False
        if L < 2 or S < 2:
            return False  # broadcast over a length: not decided by its own shape
    elif (L, S) != tuple(lengths):
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

"""What the graph files share about fx nodes: which ones call something,
which draw random numbers, and how to run one on values."""
from __future__ import annotations

from typing import Any

import torch
from torch import fx

CALL_OPS = ("call_function", "call_module", "call_method")


def is_random(node: fx.Node) -> bool:
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


def fetch_attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def call_node(gm: fx.GraphModule, n: fx.Node, args: Any, kwargs: Any) -> Any:
    target: Any = n.target
    if n.op == "call_function":
        return target(*args, **kwargs)
    if n.op == "call_module":
        return gm.get_submodule(target)(*args, **kwargs)
    return getattr(args[0], target)(*args[1:], **kwargs)

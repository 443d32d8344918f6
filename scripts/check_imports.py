"""Fails when the Python package has an import circle.

Reads every module under python/remat, takes each import it runs (at the
top or inside a function; not those under `if TYPE_CHECKING:`, which never
run), and looks for strongly connected components of more than one module.
`from . import x` counts as an import of the submodule x when x is one.

    python3 scripts/check_imports.py [python/remat]
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Dict, List, Set


def module_name(root: str, path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(root))[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(rel)


def _type_checking_only(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports(tree: ast.AST, name: str, is_package: bool, modules: Set[str]) -> Set[str]:
    package = name if is_package else name.rpartition(".")[0]
    out: Set[str] = set()
    todo: List[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                sub = base + "." + a.name
                out.add(sub if sub in modules else base)
        todo.extend(ast.iter_child_nodes(node))
    return {m for m in out if m in modules and m != name}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: List[str]) -> int:
    root = argv[1] if len(argv) > 1 else os.path.join("python", "remat")
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py")]
    names = {module_name(root, p): p for p in files}
    graph = {}
    for name, path in names.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        graph[name] = imports(tree, name, path.endswith("__init__.py"), set(names))
    found = cycles(graph)
    for comp in found:
        print("import circle: %s" % " <-> ".join(comp))
    print("check_imports: %d modules, %d import circles" % (len(graph), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

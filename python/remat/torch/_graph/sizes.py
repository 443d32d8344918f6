"""A dynamically exported GraphProgram's sizes as formulas in its
dimensions, so a new input shape needs no profile.

Under torch.export with dynamic dimensions, every node's value in the graph
(node.meta["val"]) is a FakeTensor whose sizes are SymInts: polynomials in
the dimensions export kept dynamic (batch, sequence). The size pass runs
the same per-stage bookkeeping as the profile (_graph/measure.profile_graph
with sizes_only) once, on those FakeTensors, with autograd's saved-tensor
hooks: what crosses each boundary (a[i]), what autograd saves (abar[i], the
tensors the kernels save inside included: dropout masks, norm statistics),
the gradients d[i], the held values and a[0] come out as formulas, and a
new shape evaluates them (microseconds). Temporaries and times cannot come
from FakeTensors; each stage gets scales for them (`tensors`: the sizes of
its tensors, SDPA's score matrix counted, whose largest growth bounds the
temporaries'; `work`: a FLOP-like sum for the times), and _shapes.py fits
the measured ones against them.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import sympy  # type: ignore[import-untyped]
import torch
from torch import fx

from .._program import Profile
from .._progress import Progress
from .._tensors import tensors_in

Binding = Dict[Any, int]  # dimension symbol -> its size in one input

_MATMULS = {"aten.linear.default": 0, "aten.mm.default": 0, "aten.bmm.default": 0,
            "aten.matmul.default": 0, "aten.addmm.default": 1, "aten.baddbmm.default": 1}
_CONVS = ("aten.conv1d", "aten.conv2d", "aten.conv3d", "aten.convolution",
          "aten.conv_transpose")
_SDPA = "aten.scaled_dot_product_attention.default"


def _expr(x: Any) -> Any:
    """A size (int or SymInt) as a sympy expression."""
    if isinstance(x, torch.SymInt):
        return x.node.expr
    return sympy.Integer(int(x))


def _bytes(t: torch.Tensor) -> Any:
    return _expr(t.numel()) * t.element_size()


Formula = Callable[[Binding], Any]

_NARY: Dict[str, Callable[..., Any]] = {"Add": sum, "Max": max, "Min": min}


def _compile(e: Any) -> Formula:
    """A sympy size expression as a Python function of the binding (sympy's
    own substitution takes milliseconds per formula; this, microseconds).
    Sizes are integers and rational coefficients stay exact (Fraction)."""
    if e.is_Number:
        v = Fraction(int(e.p), int(e.q)) if e.is_Rational else float(e)
        return lambda b: v
    if e.is_Symbol:
        return lambda b: b[e]
    args = [_compile(a) for a in e.args]
    name = type(e).__name__
    if name in _NARY:
        fn = _NARY[name]
        return lambda b: fn(f(b) for f in args)
    if name == "Mul":
        def mul(b: Binding) -> Any:
            out: Any = 1
            for f in args:
                out *= f(b)
            return out
        return mul
    if name == "Pow" and e.args[1].is_Integer and int(e.args[1]) >= 0:
        base, k = args[0], int(e.args[1])
        return lambda b: base(b) ** k
    if name == "FloorDiv":
        return lambda b: args[0](b) // args[1](b)
    if name == "CeilDiv":
        return lambda b: -(-args[0](b) // args[1](b))
    if name in ("Mod", "PythonMod"):
        return lambda b: args[0](b) % args[1](b)
    return lambda b: e.xreplace(b)  # anything else: sympy's own


class SizeModel:
    """The sizes of one GraphProgram as formulas (see the module docstring).
    Raises when the program has no dynamic dimension or the pass fails;
    the caller then profiles each new shape (per bucket)."""

    def __init__(self, prog: Any, model: torch.nn.Module) -> None:
        from torch._guards import detect_fake_mode
        vals = {ph: ph.meta.get("val") for ph in prog.placeholders}
        fake = detect_fake_mode([v for v in vals.values() if isinstance(v, torch.Tensor)])
        if fake is None or fake.shape_env is None:
            raise ValueError("the exported graph has no symbolic sizes")
        self.dims, self.names = self._dimensions(prog, vals)
        if not self.dims:
            raise ValueError("export kept no dimension dynamic")
        self.ranges = {s: (r.lower, r.upper) for s, r in prog.ep.range_constraints.items()}
        self._compiled: Dict[Any, Formula] = {}
        env = fake.shape_env
        n_guards = len(env.guards)
        feeds: Dict[fx.Node, Any] = {}
        for ph, v in vals.items():
            if not isinstance(v, torch.Tensor) and prog.ph_spec[ph][0] == "CONSTANT_TENSOR":
                v = fake.from_tensor(prog.ep.constants[prog.ph_spec[ph][1]])
            feeds[ph] = v
        quiet = Progress("", False)
        with fake:
            prof = prog.profile_sizes(model, feeds, quiet)
        # Decisions the pass took at the example's sizes (a kernel choice, a
        # max): a shape that breaks one is profiled instead.
        self.guards = [g.expr for g in env.guards[n_guards:]]
        keys = ("out_bytes", "saved_bytes", "grad_bytes")
        self.stages = [{k: _expr(st.get(k, 0)) for k in keys} for st in prof.stages]
        self.input_bytes = _expr(prof.input_bytes)
        self.input_grad_bytes = _expr(prof.input_grad_bytes)
        self.held_bytes = _expr(prof.held_bytes)
        self.backward_held = [(_expr(b), int(f), int(u)) for b, f, u in prof.backward_held]
        self.tensors = [self._tensors(st.nodes) for st in prog.stages] + [[]]
        self.work = [self._work(st.nodes) for st in prog.stages] + [sympy.Integer(0)]

    @staticmethod
    def _dimensions(prog: Any, vals: Dict[fx.Node, Any]) -> Tuple[List[Any], Dict[Any, str]]:
        """The dynamic dimensions and a name for each ("input_ids.shape[1]")."""
        dims: List[Any] = []
        names: Dict[Any, str] = {}
        for ph in prog.user_inputs:
            v = vals.get(ph)
            if not isinstance(v, torch.Tensor):
                continue
            for i, d in enumerate(v.shape):
                e = _expr(d)
                if isinstance(e, sympy.Symbol) and e not in names:
                    dims.append(e)
                    names[e] = "%s.shape[%d]" % (ph.name, i)
        return dims, names

    # -- scales of temporaries and time --------------------------------------------------
    @staticmethod
    def _tensors(nodes: Sequence[fx.Node]) -> List[Any]:
        """The sizes in bytes of the stage's tensors, each distinct formula
        once (SDPA's score matrix included: a kernel that is not fused makes
        it)."""
        terms: List[Any] = []
        for n in nodes:
            for t in tensors_in(n.meta.get("val")):
                terms.append(_bytes(t))
            if str(n.target) == _SDPA:
                q, k = n.args[0], n.args[1]
                qv = q.meta.get("val") if isinstance(q, fx.Node) else None
                kv = k.meta.get("val") if isinstance(k, fx.Node) else None
                if isinstance(qv, torch.Tensor) and isinstance(kv, torch.Tensor):
                    terms.append(_expr(qv.numel()) // _expr(qv.shape[-1]) *
                                 _expr(kv.shape[-2]) * 4)
        return list(dict.fromkeys(t for t in terms if t.free_symbols))

    @staticmethod
    def _work(nodes: Sequence[fx.Node]) -> Any:
        """A FLOP-like count: each node's output elements, times the inner
        dimension of a matmul, a convolution's inputs per output, SDPA's key
        length."""
        total = sympy.Integer(0)
        for n in nodes:
            outs = tensors_in(n.meta.get("val"))
            if not outs:
                continue
            size = sum((_expr(t.numel()) for t in outs), sympy.Integer(0))
            name = str(n.target)
            inner: Any = sympy.Integer(1)
            if name in _MATMULS:
                a = n.args[_MATMULS[name]] if len(n.args) > _MATMULS[name] else None
                v = a.meta.get("val") if isinstance(a, fx.Node) else None
                if isinstance(v, torch.Tensor) and v.dim() > 0:
                    inner = _expr(v.shape[-1])
            elif name.startswith(_CONVS) and len(n.args) > 1 and isinstance(n.args[1], fx.Node):
                w = n.args[1].meta.get("val")
                if isinstance(w, torch.Tensor) and w.dim() > 1:
                    inner = _expr(w.numel()) // _expr(w.shape[0])
            elif name == _SDPA and isinstance(n.args[1], fx.Node):
                k = n.args[1].meta.get("val")
                if isinstance(k, torch.Tensor) and k.dim() >= 2:
                    inner = 2 * _expr(k.shape[-2])
            total = total + size * inner
        return total

    # -- a new input ----------------------------------------------------------------
    def bind(self, prog: Any, flat_inputs: Sequence[Any]) -> Optional[Binding]:
        """Each dimension's size in this input, or None when the graph does not
        take it (a fixed size differs, a range or a decision of the export or
        of the size pass does not hold)."""
        b: Binding = {}
        checks: List[Tuple[Any, int]] = []
        users = [x for x in flat_inputs]
        if len(users) != len(prog.user_inputs):
            return None
        for ph, x in zip(prog.user_inputs, users):
            v = ph.meta.get("val")
            if not isinstance(v, torch.Tensor):
                continue
            if not isinstance(x, torch.Tensor) or x.dim() != v.dim():
                return None
            for d, n in zip(v.shape, x.shape):
                e = _expr(d)
                if isinstance(e, sympy.Symbol) and e not in b:
                    b[e] = int(n)
                else:
                    checks.append((e, int(n)))
        for e, n in checks:
            if self.value(e, b) != n:
                return None
        for s, (lo, hi) in self.ranges.items():
            if s in b and not (lo <= b[s] <= hi):
                return None
        for g in self.guards:
            if not g.free_symbols <= set(b) or not bool(g.xreplace(b)):
                return None
        return b

    def dim_at(self, dim: Any, b: Binding) -> int:
        """An input's dimension as the export gives it (int or SymInt) at b."""
        return self.value(_expr(dim), b)

    def value(self, e: Any, b: Binding) -> int:
        """The size e at binding b."""
        f = self._compiled.get(e)
        if f is None:
            if e.free_symbols - set(self.dims):
                raise ValueError("a size depends on %s" % sorted(
                    map(str, e.free_symbols - set(self.dims))))
            f = self._compiled[e] = _compile(e)
        return int(f(b))

    def sizes(self, b: Binding) -> Profile:
        """The profile's sizes at this binding (times and temporaries 0)."""
        val = self.value
        stages = [{k: val(e, b) for k, e in st.items()} for st in self.stages]
        return Profile(stages, val(self.input_bytes, b), val(self.input_grad_bytes, b),
                       val(self.held_bytes, b),
                       [[val(e, b), f, u] for e, f, u in self.backward_held])

    def scales(self, b: Binding) -> Tuple[List[List[int]], List[int]]:
        """(the sizes of its tensors that depend on the dimensions, work) per
        stage at this binding."""
        return ([[self.value(e, b) for e in ts] for ts in self.tensors],
                [self.value(e, b) for e in self.work])

    def describe(self, b: Binding) -> str:
        return ", ".join("%s=%d" % (self.names[s], b[s]) for s in self.dims if s in b)


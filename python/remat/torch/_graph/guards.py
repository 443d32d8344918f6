"""Guards on the Python state a captured graph depends on.

torch.export runs the model's Python once and records the tensor operators
it reaches: every `if self.flag:`, `config.use_gate`, `self.p` of a dropout,
module attribute or config field it reads is baked into the graph as the
value it had then. Plain PyTorch reads them again at every call, so after
`model.flag = True` the graph would be stale: a silently different result.

So the capture records those reads (recording(): while export runs, the
`__getattribute__` and `__getattr__` of the model's modules' classes, and of
the config-like objects they hand out, note every attribute read on those
objects), and every call checks them (Guard.holds(), cheap: one compiled
expression, a lookup and a comparison per value). The entry lookup treats a
change as another input (a new capture, profile and solve), never as the old
graph.

What is guarded: values of plain type (bool, int, float, str, None, enums,
dtypes, devices, and tuples or lists of them) compared by value; submodules
and config-like objects (a Hugging Face config, a dataclass) read from a
watched object compared by identity, their own plain fields by value;
globals of plain type read by the forward() of the model's module classes
(LOAD_GLOBAL in its code), by value. Reads whose value changes during the
capture itself (state the forward keeps, such as a call counter) are not
guards. Not guarded: dicts and other containers' contents, tensors (the
graph reads parameters and buffers by name at every call), state read by
functions outside forward() code; modules' training flags, the autocast
state and shapes are in the entry key already (_api).
"""
from __future__ import annotations

import dis
import enum
import keyword
import types
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch
from torch import nn

_MISSING = object()
_PLAIN = (bool, int, float, str, type(None), enum.Enum, torch.dtype, torch.device)
# nn.Module's own class attributes (_compiled_call_impl, call_super_init):
# not the model's settings (unless an instance sets one: a flag named
# `double`); `training` is in the entry key already.
_MODULE_OWN = frozenset(vars(nn.Module))
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class whose attributes can be set


def _is_plain(v: Any, depth: int = 0) -> bool:
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, (tuple, list)) and depth < 2 and len(v) <= 64:
        return all(_is_plain(x, depth + 1) for x in v)
    return False


def _is_config(v: Any) -> bool:
    """An object whose fields the forward reads as settings: a Hugging Face
    config, a dataclass, a namespace; not a module, tensor, function, class,
    Python module or container."""
    if isinstance(v, (nn.Module, torch.Tensor, type, types.ModuleType, dict, list, tuple, set,
                      frozenset)) or callable(v):
        return False
    mod = getattr(type(v), "__module__", "") or ""
    return hasattr(v, "__dict__") and not mod.startswith(("torch", "builtins"))


class Guard:
    """The Python values a capture read; holds() while they are unchanged."""

    def __init__(self, reads: Dict[Tuple[int, str], Tuple[Any, str, bool, Any]],
                 global_reads: Dict[Tuple[int, str], Tuple[Dict[str, Any], str, Any]]) -> None:
        self.reads = list(reads.values())
        self.globals = list(global_reads.values())
        self._build()

    def _build(self) -> None:
        """Per place the values live (_source), its guarded names: a dict's
        keys or the object's attributes."""
        groups: Dict[Tuple[int, bool], Tuple[Any, bool, List[str], List[Any]]] = {}
        for obj, name, ident, value in self.reads:
            src = _source(obj, name)
            _, _, names, values = groups.setdefault((id(src), ident), (src, src is not obj, [], []))
            names.append(name)
            values.append(value)
        self.groups = [(src, is_dict, names, values, ident)
                       for (_, ident), (src, is_dict, names, values) in groups.items()]
        self._check: Optional[Callable[[], bool]] = None

    def _compile(self) -> Callable[[], bool]:
        """holds()'s test as one Python expression over the guarded places
        (`s3["flag"] is w3_0 and ...`): no loop, no tuple per call."""
        env: Dict[str, Any] = {"_MISSING": _MISSING}
        terms = []
        for i, (src, is_dict, names, values, ident) in enumerate(self.groups):
            env["s%d" % i] = src
            for k, (name, value) in enumerate(zip(names, values)):
                w = "w%d_%d" % (i, k)
                env[w] = value
                if is_dict:
                    get = "s%d[%r]" % (i, name)
                elif name.isidentifier() and not keyword.iskeyword(name):
                    get = "s%d.%s" % (i, name)
                else:
                    get = "getattr(s%d, %r)" % (i, name)
                terms.append("%s is %s" % (get, w) if ident
                             else "((v := %s) is %s or v == %s)" % (get, w, w))
        for i, (g, name, value) in enumerate(self.globals):
            env["g%d" % i], env["gw%d" % i] = g, value
            terms.append("g%d.get(%r, _MISSING) == gw%d" % (i, name, i))
        code = "def holds():\n    return bool(%s)\n" % (" and ".join(terms) or "True")
        exec(compile(code, "<remat guard>", "exec"), env)
        check: Callable[[], bool] = env["holds"]
        return check

    def __getstate__(self) -> Dict[str, Any]:
        # The compiled test closes over this model's objects: a deep copy or
        # a pickle compiles its own.
        state = dict(self.__dict__)
        state["_check"] = None
        return state

    def __len__(self) -> int:
        return len(self.reads) + len(self.globals)

    def holds(self) -> bool:
        """Whether every value read at capture is unchanged (runs every call)."""
        if self._check is None:
            self._check = self._compile()
        try:
            return self._check()
        except (AttributeError, KeyError):  # an attribute deleted since
            return False

    @staticmethod
    def _same(obj: Any, name: str, ident: bool, want: Any) -> bool:
        got = getattr(obj, name, _MISSING)
        return got is want if ident else bool(got == want and want == want)

    def changes(self) -> List[str]:
        """What changed since capture, in words ("Block.flag: False -> True")."""
        out = ["%s.%s: %s -> %s" % (type(obj).__name__, name, _short(w),
                                    _short(getattr(obj, name, _MISSING)))
               for obj, name, ident, w in self.reads if not self._same(obj, name, ident, w)]
        out += ["global %s: %s -> %s" % (n, _short(v), _short(g.get(n, _MISSING)))
                for g, n, v in self.globals if g.get(n, _MISSING) != v]
        return out

    def prune(self) -> None:
        """Drops the reads whose value already changed (state the forward
        itself changes, values unequal to themselves): they would fail every
        call."""
        self.reads = [r for r in self.reads if self._same(*r)]
        self.globals = [(g, n, v) for g, n, v in self.globals
                        if g.get(n, _MISSING) == v and v == v]
        self._build()


def _source(obj: Any, name: str) -> Any:
    """Where obj.name lives: the instance's __dict__, a module's _modules,
    _parameters or _buffers (read from there in C; nn.Module finds them in
    its Python __getattr__, after a failed lookup), or obj itself (class attributes,
    properties: read through getattr)."""
    d = getattr(obj, "__dict__", None)
    if d is None or _descriptor(type(obj), name):
        return obj
    if name in d:
        return d
    if isinstance(obj, nn.Module):  # (a bias of None lives in _parameters)
        for where in ("_modules", "_parameters", "_buffers"):
            subs = d.get(where)
            if isinstance(subs, dict) and name in subs:
                return subs
    return obj


def _descriptor(cls: type, name: str) -> bool:
    """Whether a class attribute named `name` takes precedence over the
    instance's __dict__ (a property, a data descriptor)."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return hasattr(c.__dict__[name], "__set__")
    return False


def _short(v: Any) -> str:
    if v is _MISSING:
        return "(missing)"
    if _is_plain(v):
        text = repr(v)
        return text if len(text) <= 40 else text[:37] + "..."
    return "<%s object>" % type(v).__name__


class _Recorder:
    """The attribute reads on watched objects while active (see the module's
    docstring), by patching their classes' attribute lookup."""

    active: Optional["_Recorder"] = None  # the recorder the patched lookups report to

    def __init__(self) -> None:
        self.watched: Dict[int, Any] = {}
        self.reads: Dict[Tuple[int, str], Tuple[Any, str, bool, Any]] = {}
        self.globals: Dict[Tuple[int, str], Tuple[Dict[str, Any], str, Any]] = {}
        self.patched: Dict[type, Dict[str, Any]] = {}  # class -> its own lookups before
        self.code_seen: Set[Any] = set()
        self.busy = False

    def watch(self, obj: Any) -> None:
        if id(obj) in self.watched:
            return
        self.watched[id(obj)] = obj
        cls = type(obj)
        if not cls.__flags__ & _HEAPTYPE:  # a class of C code: its fields, snapshotted
            for name, v in list(getattr(obj, "__dict__", {}).items()):
                if not name.startswith("__") and _is_plain(v):
                    self.reads.setdefault((id(obj), name), (obj, name, False, v))
            return
        if cls not in self.patched:
            self._patch(cls)
        fwd = getattr(cls, "forward", None)
        if isinstance(obj, nn.Module) and isinstance(fwd, types.FunctionType):
            self._globals_of(fwd)

    def _patch(self, cls: type) -> None:
        own = {n: cls.__dict__[n] for n in ("__getattribute__", "__getattr__") if n in cls.__dict__}
        orig_get: Callable[[Any, str], Any] = cls.__getattribute__  # type: ignore[assignment]
        orig_getattr = getattr(cls, "__getattr__", None)
        self.patched[cls] = own

        def getattribute(obj: Any, name: str) -> Any:
            v = orig_get(obj, name)
            rec = _Recorder.active
            if rec is not None and not rec.busy and id(obj) in rec.watched:
                rec.note(obj, name, v)
            return v
        cls.__getattribute__ = getattribute  # type: ignore[method-assign, assignment]
        if orig_getattr is not None:
            def getattr_(obj: Any, name: str) -> Any:
                v = orig_getattr(obj, name)
                rec = _Recorder.active
                if rec is not None and not rec.busy and id(obj) in rec.watched:
                    rec.note(obj, name, v)
                return v
            cls.__getattr__ = getattr_  # type: ignore[attr-defined]

    def unpatch(self) -> None:
        for cls, own in self.patched.items():
            for n in ("__getattribute__", "__getattr__"):
                if n in own:
                    setattr(cls, n, own[n])
                elif n in cls.__dict__:
                    delattr(cls, n)
        self.patched = {}

    def note(self, obj: Any, name: str, v: Any) -> None:
        if name.startswith("__") or (isinstance(obj, nn.Module) and (
                name == "training" or (name in _MODULE_OWN and name not in obj.__dict__))):
            return
        self.busy = True
        try:
            key = (id(obj), name)
            if key in self.reads:
                return
            if _is_plain(v):
                self.reads[key] = (obj, name, False, v)
            elif isinstance(v, nn.Module) or _is_config(v):
                self.reads[key] = (obj, name, True, v)
                self.watch(v)
        finally:
            self.busy = False

    def _globals_of(self, fn: types.FunctionType) -> None:
        """Plain globals the function's code (and the code nested in it) loads."""
        todo = [fn.__code__]
        g = fn.__globals__
        while todo:
            code = todo.pop()
            if code in self.code_seen:
                continue
            self.code_seen.add(code)
            for ins in dis.get_instructions(code):
                if ins.opname == "LOAD_GLOBAL" and isinstance(ins.argval, str):
                    v = g.get(ins.argval, _MISSING)
                    if v is not _MISSING and _is_plain(v):
                        self.globals.setdefault((id(g), ins.argval), (g, ins.argval, v))
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


class recording:
    """with recording(model) as rec: ...; then rec.guard(): the Guard of the
    attribute reads made on the model's objects inside the block."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.rec = _Recorder()

    def __enter__(self) -> "recording":
        if _Recorder.active is not None:  # one capture at a time records
            return self
        for m in self.model.modules():
            self.rec.watch(m)
        _Recorder.active = self.rec
        return self

    def __exit__(self, *exc: Any) -> None:
        if _Recorder.active is self.rec:
            _Recorder.active = None
        self.rec.unpatch()

    def guard(self) -> Guard:
        return Guard(self.rec.reads, self.rec.globals)


def entry_key(entries: Dict[Any, Any], key: Any) -> Any:
    """The key of the entry for this call: `key` when its entry has no guard
    or its guard holds; else the first variant of `key` whose guard holds,
    or a new variant (the caller prepares a new entry there)."""
    k, i = key, 0
    while True:
        e = entries.get(k)
        if e is None:
            return k
        g = getattr(e.program, "guard", None)
        if g is None or g.holds():
            return k
        i += 1
        k = (key, "guard", i)

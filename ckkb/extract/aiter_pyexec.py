"""Statements of aiter's kernel-list modules and tuners run statically (libcst nodes, never aiter).

aiter 2026 builds some kernel lists with code: `candidate_kernels_cktile_dict =
expand_blockpercu(kernels_list_95x)` under `if arch.startswith("gfx95")` where `arch = get_gfx()`,
and `name` properties of several statements. `Interp` extends the expression evaluator
(ckkb.extract.aiter_pyeval) with the statements those use (assignments, `if`, `for`, `return`,
calls of the module's own functions), dataclass instances (`Instance`), the builtins and methods
those functions call (`dict`, `vars`, `copy`, `max`, `.items()`, `.setdefault()`, ...), and a
work budget. Anything else raises Unsupported with its node, never a guess.

The arch a module is imported on is `ArchValue`: each test on it (`==`, `!=`, `in`,
`.startswith`) asks an `Explorer` for an outcome, so every branch is run once and each result
carries the tests that lead to it (`when`), evaluated later against a config row's gfx.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyeval import Evaluator, Unsupported, _Lambda
from ckkb.extract.aiter_pystd import IMPORTS, exec_try, transparent
from ckkb.extract.aiter_pystd import Native as Native  # defined there, used from here
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")

BUDGET = 200_000  # statements and calls one evaluation may run: a loop that never ends is refused


@dataclass
class ClassInfo:
    """A dataclass of a kernel-list module: field order, defaults and its properties (nodes)."""

    name: str
    fields: list[str]
    defaults: dict[str, Any]
    props: dict[str, Any] = field(default_factory=dict)  # property name -> cst.FunctionDef
    # what `.name` gives for field values (the reader's entry_name, cached): one evaluation of
    # the name property for literal and derived entries alike
    name_of: Callable[[dict[str, Any]], Any] | None = None
    # the module names its properties read (ckkb.extract.aiter_name_env); None: none
    env: dict[str, Any] | None = None


class Instance:
    """An instance of a kernel dataclass: its field values and the line of the entry it came
    from (copies keep it); origin: (dict name, key) of the module-level dict literal it was
    written in, when a module run (ckkb.extract.aiter_modrun) tagged it."""

    __slots__ = ("cls", "values", "line", "origin")

    def __init__(
        self, cls: ClassInfo, values: dict[str, Any], line: int, origin: Any = None
    ) -> None:
        self.cls = cls
        self.values = values
        self.line = line
        self.origin = origin

    def __copy__(self) -> Instance:
        return Instance(self.cls, dict(self.values), self.line, self.origin)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Instance) and (self.cls.name, self.values) == (
            other.cls.name,
            other.values,
        )

    def __hash__(self) -> int:
        return hash((self.cls.name, tuple(sorted(self.values.items(), key=repr))))


@dataclass
class Function:
    node: Any  # cst.FunctionDef
    env: dict[str, Any]  # the module's names (shared: later module statements are seen)


class Explorer:
    """Outcomes of the tests on the arch, one run per path: True first, then backtracking."""

    def __init__(self) -> None:
        self.decisions: list[bool] = []
        self.pos = 0
        self.taken: list[tuple[str, Any, bool]] = []

    def decide(self, test: str, arg: Any) -> bool:
        if self.pos == len(self.decisions):
            self.decisions.append(True)
        d = self.decisions[self.pos]
        self.pos += 1
        self.taken.append((test, arg, d))
        return d

    def next_path(self) -> bool:
        del self.decisions[self.pos :]
        while self.decisions and not self.decisions[-1]:
            self.decisions.pop()
        if not self.decisions:
            return False
        self.decisions[-1] = False
        self.pos = 0
        self.taken = []
        return True


def arch_test(test: str, arg: Any, gfx: str) -> bool:
    """One recorded test on the arch, evaluated for a real gfx string."""
    if test == "eq":
        return gfx == arg
    if test == "startswith":
        return gfx.startswith(tuple(arg) if isinstance(arg, list) else arg)
    if test == "endswith":
        return gfx.endswith(tuple(arg) if isinstance(arg, list) else arg)
    raise ValueError(test)


def arch_matches(when: list[Any], gfx: str) -> bool:
    return all(arch_test(t, a, gfx) == bool(o) for t, a, o in when)


class ArchValue:
    """What `get_gfx()` returns while a module is explored."""

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return NotImplemented
        return self.explorer.decide("eq", other)

    def __ne__(self, other: object) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None  # type: ignore[assignment]  # unhashable: `arch in {set}` is refused

    def startswith(self, prefix: Any) -> bool:
        return self.explorer.decide(
            "startswith", list(prefix) if isinstance(prefix, tuple) else prefix
        )

    def endswith(self, suffix: Any) -> bool:
        return self.explorer.decide(
            "endswith", list(suffix) if isinstance(suffix, tuple) else suffix
        )


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Loop(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def _vars(x: Any) -> dict[str, Any]:
    if isinstance(x, Instance):
        return x.values
    raise TypeError("vars() of a value that is not a kernel instance")


def _getattr(x: Any, name: str, *default: Any) -> Any:
    if isinstance(x, Instance) and name in x.values:
        return x.values[name]
    if hasattr(x, "static_attr"):  # a module ckkb models (torch's dtypes, a module run)
        try:
            return x.static_attr(name, None)
        except Unsupported:
            pass
    if default:
        return default[0]
    raise TypeError(f"getattr(.., {name!r}) of a value ckkb does not model")


def _setattr(x: Any, name: str, value: Any) -> None:
    if isinstance(x, Instance) and name in x.values:
        x.values[name] = value
        return
    raise TypeError(f"setattr(.., {name!r}) of a value ckkb does not model")


MAX_RANGE = 100_000  # builtins loop in C, past the work budget: a longer range is refused


def _range(*a: int) -> range:
    r = range(*a)
    if len(r) > MAX_RANGE:
        raise ValueError(f"range of {len(r)} values")
    return r


_BUILTINS: dict[str, Callable[..., Any]] = {
    **Evaluator._BUILTINS,
    "dict": dict,
    "set": set,
    "vars": _vars,
    "getattr": _getattr,
    "setattr": _setattr,
    "copy": _copy.copy,
    "deepcopy": _copy.deepcopy,
    "max": max,
    "min": min,
    "sum": sum,
    "next": next,
    "iter": iter,
    "range": _range,
    "sorted": sorted,
    "enumerate": enumerate,
    "zip": zip,
    "any": any,
    "all": all,
    "abs": abs,
    "isinstance": isinstance,
}
_METHODS = {
    dict: {"items", "keys", "values", "get", "setdefault", "update", "copy", "pop"},
    list: {"append", "extend", "index", "count", "copy", "insert"},
    tuple: {"index", "count"},
    set: {"add", "update"},
    str: {
        "join",
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "replace",
        "capitalize",
        "title",
        "startswith",
        "endswith",
        "split",
    },
}


class Interp(Evaluator):
    """Expressions and statements over `env` (names) with a shared work budget."""

    def __init__(self, env: dict[str, Any], budget: list[int] | None = None) -> None:
        super().__init__(env, None)
        self.budget = budget if budget is not None else [BUDGET]

    def _tick(self, node: Any) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise Unsupported(node, "more work than a static evaluation runs")

    def _Name(self, node: cst.Name) -> Any:
        if node.value in self.env:
            v = self.env[node.value]
            if v is _POISONED:
                raise Unsupported(node, f"name {node.value!r} is not known statically")
            return v
        if node.value in _BUILTINS:
            return _BUILTINS[node.value]
        return super()._Name(node)

    def _Attribute(self, node: cst.Attribute) -> Any:
        obj = self.eval(node.value)
        name = node.attr.value
        if isinstance(obj, Instance):
            return instance_attr(obj, name, node, self.budget)
        if hasattr(obj, "static_attr"):
            return obj.static_attr(name, node)
        raise Unsupported(node, f"attribute .{name} of {type(obj).__name__}")

    def _Subscript(self, node: cst.Subscript) -> Any:
        obj = self.eval(node.value)
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            raise Unsupported(node, "unsupported subscript")
        key = self.eval(node.slice[0].slice.value)
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError) as e:
            raise Unsupported(node, f"subscript failed: {e!r}") from None

    def _Dict(self, node: cst.Dict) -> Any:
        out: dict[Any, Any] = {}
        for e in node.elements:
            if isinstance(e, cst.StarredDictElement):
                v = self.eval(e.value)
                if not isinstance(v, dict):
                    raise Unsupported(e, "dict unpacking of a value that is not a dict")
                out.update(v)
            elif isinstance(e, cst.DictElement):
                out[self.eval(e.key)] = self.eval(e.value)
        return out

    def _call_fn(self, fn: Any, args: list[Any], node: cst.CSTNode) -> Any:
        if isinstance(fn, _Lambda):
            if len(args) != len(fn.params):
                raise Unsupported(node, "lambda called with the wrong number of arguments")
            env = {**self.env, **fn.env, **dict(zip(fn.params, args, strict=True))}
            return Interp(env, self.budget).eval(fn.body)
        return call(fn, args, {}, node, self.budget)

    def _DictComp(self, node: cst.DictComp) -> Any:
        pairs = self._comprehension(
            node, cst.Tuple([cst.Element(node.key), cst.Element(node.value)])
        )
        return dict(pairs)

    def _comprehension(self, node: cst.BaseComp, elt: cst.BaseExpression) -> list[Any]:
        out: list[Any] = []

        def loop(fors: cst.CompFor | None, env: dict[str, Any]) -> None:
            sub = Interp(env, self.budget)
            if fors is None:
                out.append(sub.eval(elt))
                return
            if fors.asynchronous:
                raise Unsupported(fors, "unsupported async comprehension")
            for v in sub.eval(fors.iter):
                self._tick(fors)
                e2 = _Scope(env, {})  # the loop's names over the enclosing ones (not copied)
                bind(fors.target, v, e2)
                ev = Interp(e2, self.budget)
                if all(ev.eval(c.test) for c in fors.ifs):
                    loop(fors.inner_for_in, e2)

        loop(node.for_in, self.env)
        return out

    def _call_args(self, node: cst.Call) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for a in node.args:
            if a.star:
                raise Unsupported(node, "unsupported starred argument")
            if a.keyword is not None:
                kwargs[a.keyword.value] = self.eval(a.value)
            else:
                args.append(self.eval(a.value))
        return args, kwargs

    def _Call(self, node: cst.Call) -> Any:
        self._tick(node)
        func = node.func
        if isinstance(func, cst.Attribute):
            recv = self.eval(func.value)
            meth = func.attr.value
            args, kwargs = self._call_args(node)
            if isinstance(recv, ArchValue) and meth in ("startswith", "endswith") and not kwargs:
                return getattr(recv, meth)(*args)
            if hasattr(recv, "static_attr"):  # a function of a module ckkb models or ran
                return call(recv.static_attr(meth, node), args, kwargs, node, self.budget)
            allowed = next((m for t, m in _METHODS.items() if isinstance(recv, t)), set())
            if meth not in allowed:
                raise Unsupported(node, f"unsupported method call .{meth}()")
            try:
                return getattr(recv, meth)(*args, **kwargs)
            except (TypeError, ValueError, KeyError, IndexError) as e:
                raise Unsupported(node, f".{meth}() failed: {e!r}") from None
        if isinstance(func, cst.Name) and func.value == "map" and "map" not in self.env:
            args, kwargs = self._call_args(node)
            if len(args) != 2 or kwargs:
                raise Unsupported(node, "map() with other than two arguments")
            return [self._call_fn(args[0], [x], node) for x in args[1]]
        fn = self.eval(func)
        args, kwargs = self._call_args(node)
        if isinstance(fn, _Lambda):
            if kwargs:
                raise Unsupported(node, "lambda called with keyword arguments")
            return self._call_fn(fn, args, node)
        return call(fn, args, kwargs, node, self.budget)

    # -------------------------------------------------------------- statements
    def exec_block(self, stmts: Any) -> None:
        for s in stmts:
            self.exec_stmt(s)

    def exec_stmt(self, s: Any) -> None:
        self._tick(s)
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                self._small(small)
        elif isinstance(s, cst.BaseSmallStatement):  # the body of `if x: y = 1`
            self._small(s)
        elif isinstance(s, cst.If):
            if self.eval(s.test):
                self.exec_block(s.body.body)
            elif isinstance(s.orelse, cst.If):
                self.exec_stmt(s.orelse)
            elif isinstance(s.orelse, cst.Else):
                self.exec_block(s.orelse.body.body)
        elif isinstance(s, cst.For) and s.orelse is None and not s.asynchronous:
            for v in self.eval(s.iter):
                self._tick(s)
                bind(s.target, v, self.env)
                try:
                    self.exec_block(s.body.body)
                except _Loop as lp:
                    if lp.kind == "break":
                        break
        elif isinstance(s, cst.FunctionDef) and transparent(s.decorators):
            self.env[s.name.value] = Function(s, self.env)
        elif isinstance(s, cst.Try):
            exec_try(self, s)
        else:
            raise Unsupported(s, f"unsupported statement {type(s).__name__}")

    def _small(self, small: Any) -> None:
        if isinstance(small, cst.Assign):
            v = self.eval(small.value)
            for t in small.targets:
                self.assign(t.target, v)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self.assign(small.target, self.eval(small.value))
        elif isinstance(small, cst.AugAssign):
            from ckkb.extract.aiter_pyeval import binary_op

            op = type(small.operator).__name__.removesuffix("Assign")
            cur = self.eval(small.target)
            self.assign(small.target, binary_op(small, op, cur, self.eval(small.value)))
        elif isinstance(small, cst.Expr):
            if not isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                self.eval(small.value)  # a docstring does nothing
        elif isinstance(small, cst.Return):
            raise _Return(None if small.value is None else self.eval(small.value))
        elif isinstance(small, cst.Pass):
            pass
        elif isinstance(small, (cst.Break, cst.Continue)):
            raise _Loop("break" if isinstance(small, cst.Break) else "continue")
        elif isinstance(small, cst.ImportFrom) and IMPORTS in self.env:  # a module's own
            self.env[IMPORTS](small, self.env)
        elif isinstance(small, cst.ImportFrom):  # `from dataclasses import replace` in a def
            from ckkb.extract.aiter_pymodels import import_from

            for k, f in import_from(small).items():
                self.env[k] = Native(f)
        else:
            raise Unsupported(small, f"unsupported statement {type(small).__name__}")

    def assign(self, target: Any, v: Any) -> None:
        if isinstance(target, cst.Attribute):
            obj = self.eval(target.value)
            name = target.attr.value
            if isinstance(obj, Instance):  # a dataclass instance takes new attributes too
                obj.values[name] = v
                return
            raise Unsupported(target, f"assignment to attribute .{name}")
        if isinstance(target, cst.Subscript):
            obj = self.eval(target.value)
            if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
                raise Unsupported(target, "unsupported subscript")
            key = self.eval(target.slice[0].slice.value)
            if not isinstance(obj, (dict, list)):
                raise Unsupported(target, f"item assignment to {type(obj).__name__}")
            obj[key] = v
            return
        bind(target, v, self.env)


_POISONED = object()  # a module name whose statement could not be evaluated


def poison(env: dict[str, Any], names: set[str]) -> None:
    for n in names:
        env[n] = _POISONED


def is_known(v: Any) -> bool:
    return v is not _POISONED


def bind(target: Any, v: Any, env: dict[str, Any]) -> None:
    if isinstance(target, cst.Name):
        env[target.value] = v
        return
    if isinstance(target, (cst.Tuple, cst.List)):
        items = list(v)
        if len(items) != len(target.elements):
            raise Unsupported(target, "unpacking to the wrong number of names")
        for el, item in zip(target.elements, items, strict=True):
            bind(el.value, item, env)
        return
    raise Unsupported(target, f"unsupported assignment target {type(target).__name__}")


def call(fn: Any, args: list[Any], kwargs: dict[str, Any], node: Any, budget: list[int]) -> Any:
    if isinstance(fn, Function):
        return run_function(fn, args, kwargs, node, budget)
    if isinstance(fn, ClassInfo):
        return construct(fn, args, kwargs, node)
    if callable(fn) and fn in _BUILTINS.values():
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError, StopIteration, KeyError) as e:
            raise Unsupported(node, f"call failed: {e!r}") from None
    if isinstance(fn, Native):
        try:
            return fn.f(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(node, f"call failed: {e!r}") from None
    raise Unsupported(node, "call of a value that is not a function known statically")


def construct(cls: ClassInfo, args: list[Any], kwargs: dict[str, Any], node: Any) -> Instance:
    if len(args) > len(cls.fields):
        raise Unsupported(node, f"{cls.name}: more positional arguments than fields")
    values = dict(zip(cls.fields, args, strict=False))
    for k, v in kwargs.items():
        if k not in cls.fields or k in values:
            raise Unsupported(node, f"{cls.name}: unexpected argument {k}")
        values[k] = v
    for f in cls.fields:
        if f not in values:
            if f not in cls.defaults:
                raise Unsupported(node, f"{cls.name}: field {f} has no value and no default")
            values[f] = _copy.copy(cls.defaults[f])  # a list default: each its own
    return Instance(cls, values, 0)


def run_function(
    fn: Function, args: list[Any], kwargs: dict[str, Any], node: Any, budget: list[int]
) -> Any:
    """A call of a module function: parameters bound (defaults evaluated in the module's names),
    its body run; its value is what it returns."""
    params = fn.node.params
    if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or params.star_kwarg:
        raise Unsupported(node, "function with *args or **kwargs")
    plist = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    local: dict[str, Any] = {}
    for i, p in enumerate(plist):
        name = p.name.value
        if i < len(args) and p not in params.kwonly_params:
            local[name] = args[i]
        elif name in kwargs:
            local[name] = kwargs.pop(name)
        elif p.default is not None:
            local[name] = Interp(fn.env, budget).eval(p.default)
        else:
            raise Unsupported(node, f"argument {name} missing")
    if kwargs or len(args) > len(plist):
        raise Unsupported(node, "call with arguments the function does not take")
    sub = Interp(_Scope(fn.env, local), budget)
    try:
        sub.exec_block(fn.node.body.body)
    except _Return as r:
        return r.value
    except _Loop:
        raise Unsupported(fn.node, "break or continue outside a loop") from None
    return None


class _Scope(dict[str, Any]):
    """A function's locals over the module's names (reads fall through, writes stay local)."""

    def __init__(self, outer: dict[str, Any], local: dict[str, Any]) -> None:
        super().__init__(local)
        self.outer = outer

    def __missing__(self, key: str) -> Any:
        return self.outer[key]

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.outer


def instance_attr(obj: Instance, name: str, node: Any, budget: list[int] | None = None) -> Any:
    if name in obj.values:
        return obj.values[name]
    if name == "name" and obj.cls.name_of is not None:
        return obj.cls.name_of(obj.values)
    prop = obj.cls.props.get(name)
    if prop is None:
        raise Unsupported(node, f"{name} is not a field or property of {obj.cls.name}")
    return run_property(prop, obj, budget)


def run_property(prop: Any, obj: Instance, budget: list[int] | None = None) -> Any:
    """A property's body with `self` bound to obj (over its class's module names, if any)."""
    env = obj.cls.env
    sub = Interp(_Scope(env, {"self": obj}) if env else {"self": obj}, budget)
    try:
        sub.exec_block(prop.body.body)
    except _Return as r:
        return r.value
    return None

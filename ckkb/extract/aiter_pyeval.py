"""A small static evaluator for the Python expressions aiter's kernel lists use (libcst nodes).

Never imports or executes aiter code: it walks libcst nodes and understands literals, f-strings,
`"sep".join(...)`, `str()`/`int()`/`map(lambda ...)`, `.lower()`/`.upper()`, `+`, `*`, conditional
expressions, comparisons and comprehensions over literal lists. Anything else raises Unsupported,
which carries the node so the caller can report the file and line.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:  # libcst loads on first use: importing this module stays cheap
    cst = lazy_module("libcst")


class Unsupported(Exception):
    def __init__(self, node: cst.CSTNode, what: str) -> None:
        super().__init__(what)
        self.node = node
        self.what = what


@dataclass
class _Lambda:
    params: list[str]
    body: cst.BaseExpression
    env: dict[str, Any]


_MISSING = object()


def dotted(node: Any) -> str:
    """`a.b.c` of a Name or Attribute chain ('' for anything else): how a decorator, callee or
    import target is named in the source."""
    if isinstance(node, cst.Name):
        return str(node.value)
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def literal(node: cst.BaseExpression) -> Any:
    """A literal value (numbers, strings, True/False/None, lists/tuples/dicts of literals, -x)."""
    return Evaluator({}, None).eval(node)


def converted(part: cst.FormattedStringExpression, value: Any) -> str:
    """An f-string field's text: `{x}`/`{x!s}` str, `{x!r}` repr; other conversions are not read."""
    if part.conversion in (None, "s"):
        return str(value)
    if part.conversion == "r":
        return repr(value)
    raise Unsupported(part, f"unsupported f-string conversion !{part.conversion}")


def binary_op(node: cst.CSTNode, op: str, a: Any, b: Any) -> Any:
    """`a op b` for the operators kernel names use (op is the libcst operator class name)."""
    try:
        if op == "Add":
            return a + b
        if op == "Multiply":
            n = b if isinstance(a, (str, list, tuple)) else a
            if isinstance(a, (str, list, tuple)) or isinstance(b, (str, list, tuple)):
                if isinstance(n, int) and n > 100_000:
                    raise Unsupported(node, f"repetition {n} times is not evaluated")
            return a * b
        if op == "Subtract":
            return a - b
        if op == "FloorDivide":
            return a // b
        if op == "Modulo" and not isinstance(a, str):
            return a % b
        if op == "Divide":
            return a / b
        if op == "Power" and isinstance(b, int) and abs(b) <= 256:
            return a**b
    except (TypeError, ZeroDivisionError) as e:
        raise Unsupported(node, f"cannot evaluate {op}: {e}") from None
    raise Unsupported(node, f"unsupported operator {op}")


@functools.lru_cache(maxsize=8192)
def string_value(source: str) -> str | bytes:
    """A string literal's value from its source text (libcst's `evaluated_value`).

    Cached (module state, a pure function of the text): the evaluator reads a literal once per
    kernel entry it builds, ~85k times on aiter 2026-08, and each read parses the text again."""
    value: str | bytes = ast.literal_eval(source)
    return value


_SINGLE = (None, True, False)  # what `is` compares here: identity of ckkb's models means nothing


class Evaluator:
    """Evaluate an expression with `self.<field>` bound to `fields` and names bound to `env`."""

    def __init__(
        self, env: dict[str, Any], fields: dict[str, Any] | None, class_name: str = ""
    ) -> None:
        self.env = env
        self.fields = fields
        self.class_name = class_name

    # node type -> the method that evaluates it, per class: found once (a pure function of the
    # class), as the evaluator visits about a million nodes on aiter 2026-08
    _methods: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {}

    def eval(self, node: cst.BaseExpression) -> Any:
        method = self._methods.get(type(node))
        if method is None:
            method = getattr(type(self), "_" + type(node).__name__, None)
            if method is None:
                raise Unsupported(node, f"unsupported expression: {type(node).__name__}")
            self._methods[type(node)] = method
        return method(self, node)

    # -- literals
    def _Integer(self, node: cst.Integer) -> Any:
        return int(node.value.replace("_", ""), 0)

    def _Float(self, node: cst.Float) -> Any:
        return float(node.value.replace("_", ""))

    def _SimpleString(self, node: cst.SimpleString) -> Any:
        value = string_value(node.value)
        if not isinstance(value, str):  # b"...": an f-string is a FormattedString
            raise Unsupported(node, f"unsupported string prefix {node.prefix!r}")
        return value

    def _ConcatenatedString(self, node: cst.ConcatenatedString) -> Any:
        return self.eval(node.left) + self.eval(node.right)

    def _FormattedString(self, node: cst.FormattedString) -> Any:
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
                continue
            assert isinstance(part, cst.FormattedStringExpression)  # the only other kind of part
            if part.format_spec:
                raise Unsupported(part, "unsupported f-string format spec")
            out.append(converted(part, self.eval(part.expression)))
        return "".join(out)

    def _Name(self, node: cst.Name) -> Any:
        if node.value in self.env:
            return self.env[node.value]
        if node.value in self._BUILTINS:
            return self._BUILTINS[node.value]
        if node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        raise Unsupported(node, f"name {node.value!r} is not known statically")

    def _List(self, node: cst.List) -> Any:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            raise Unsupported(node, "unsupported starred element")
        return [self.eval(e.value) for e in node.elements]

    def _Tuple(self, node: cst.Tuple) -> Any:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            raise Unsupported(node, "unsupported starred element")
        return tuple(self.eval(e.value) for e in node.elements)

    def _Dict(self, node: cst.Dict) -> Any:
        out = {}
        for e in node.elements:
            if not isinstance(e, cst.DictElement):
                raise Unsupported(e, "unsupported dict unpacking")
            out[_hashable(self.eval(e.key))] = self.eval(e.value)
        return out

    def _UnaryOperation(self, node: cst.UnaryOperation) -> Any:
        v = self.eval(node.expression)
        if isinstance(node.operator, cst.Minus):
            return -v
        if isinstance(node.operator, cst.Plus):
            return +v
        if isinstance(node.operator, cst.Not):
            return not v
        raise Unsupported(node, "unsupported unary operator")

    def _BinaryOperation(self, node: cst.BinaryOperation) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        return binary_op(node, type(node.operator).__name__, a, b)

    def _BooleanOperation(self, node: cst.BooleanOperation) -> Any:
        a = self.eval(node.left)
        if isinstance(node.operator, cst.And):
            return self.eval(node.right) if a else a
        return a if a else self.eval(node.right)

    def _Comparison(self, node: cst.Comparison) -> Any:
        left = self.eval(node.left)
        for target in node.comparisons:
            right = self.eval(target.comparator)
            op = type(target.operator).__name__
            ops = {
                "Equal": lambda x, y: x == y,
                "NotEqual": lambda x, y: x != y,
                "LessThan": lambda x, y: x < y,
                "GreaterThan": lambda x, y: x > y,
                "LessThanEqual": lambda x, y: x <= y,
                "GreaterThanEqual": lambda x, y: x >= y,
                "In": lambda x, y: x in y,
                "NotIn": lambda x, y: x not in y,
            }
            if op in ("Is", "IsNot") and (left in _SINGLE or right in _SINGLE):  # `x is None`
                ops[op] = (lambda x, y: x is y) if op == "Is" else (lambda x, y: x is not y)
            if op not in ops:
                raise Unsupported(node, f"unsupported comparison {op}")
            if not ops[op](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: cst.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def _Attribute(self, node: cst.Attribute) -> Any:
        if (
            isinstance(node.value, cst.Name)
            and node.value.value == "self"
            and self.fields is not None
        ):
            name = node.attr.value
            if name not in self.fields:
                raise Unsupported(
                    node, f"self.{name} is not a field of {self.class_name or 'the dataclass'}"
                )
            return self.fields[name]
        raise Unsupported(node, "unsupported attribute access")

    def _Lambda(self, node: cst.Lambda) -> Any:
        params = [p.name.value for p in node.params.params]
        if (
            node.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT)
            or node.params.kwonly_params
        ):
            raise Unsupported(node, "unsupported lambda parameters")
        return _Lambda(params, node.body, dict(self.env))

    def _call_fn(self, fn: Any, args: list[Any], node: cst.CSTNode) -> Any:
        if isinstance(fn, _Lambda):
            if len(args) != len(fn.params):
                raise Unsupported(node, "lambda called with the wrong number of arguments")
            sub = Evaluator(
                {**fn.env, **dict(zip(fn.params, args, strict=False))}, self.fields, self.class_name
            )
            return sub.eval(fn.body)
        if callable(fn):
            return fn(*args)
        raise Unsupported(node, "call of a value that is not a function")

    _BUILTINS: dict[str, Callable[..., Any]] = {
        "str": str,
        "int": int,
        "len": len,
        "list": list,
        "tuple": tuple,
        "bool": bool,
        "float": float,
    }

    def _Call(self, node: cst.Call) -> Any:
        if any(a.keyword is not None or a.star for a in node.args):
            raise Unsupported(node, "unsupported keyword or starred argument")
        func = node.func
        if isinstance(func, cst.Attribute):
            recv = self.eval(func.value)
            meth = func.attr.value
            args = [self.eval(a.value) for a in node.args]
            if isinstance(recv, str) and meth == "join" and len(args) == 1:
                items = list(args[0])
                if not all(isinstance(i, str) for i in items):
                    raise Unsupported(node, "join over values that are not strings")
                return recv.join(items)
            if isinstance(recv, str) and meth in (
                "lower",
                "upper",
                "strip",
                "lstrip",
                "rstrip",
                "replace",
                "capitalize",
                "title",
            ):
                return getattr(recv, meth)(*args)
            raise Unsupported(node, f"unsupported method call .{meth}()")
        if isinstance(func, cst.Name):
            name = func.value
            if name in self.env:
                return self._call_fn(self.env[name], [self.eval(a.value) for a in node.args], node)
            if name == "map" and len(node.args) == 2:
                fn = self.eval(node.args[0].value)
                return [self._call_fn(fn, [x], node) for x in self.eval(node.args[1].value)]
            if name in self._BUILTINS:
                args = [self.eval(a.value) for a in node.args]
                try:
                    return self._BUILTINS[name](*args)
                except (TypeError, ValueError) as e:
                    raise Unsupported(node, f"{name}() failed: {e}") from None
            raise Unsupported(node, f"call of {name}() is not evaluated statically")
        raise Unsupported(node, "unsupported call")

    def _comprehension(self, node: cst.BaseComp, elt: cst.BaseExpression) -> list[Any]:
        out: list[Any] = []

        def loop(fors: cst.CompFor | None, env: dict[str, Any]) -> None:
            if fors is None:
                out.append(Evaluator(env, self.fields, self.class_name).eval(elt))
                return
            if fors.asynchronous:
                raise Unsupported(fors, "unsupported async comprehension")
            if not isinstance(fors.target, cst.Name):
                raise Unsupported(fors, "unsupported comprehension target")
            it = Evaluator(env, self.fields, self.class_name).eval(fors.iter)
            for v in it:
                sub = {**env, fors.target.value: v}
                ev = Evaluator(sub, self.fields, self.class_name)
                if all(ev.eval(c.test) for c in fors.ifs):
                    loop(fors.inner_for_in, sub)

        loop(node.for_in, dict(self.env))
        return out

    def _GeneratorExp(self, node: cst.GeneratorExp) -> Any:
        return self._comprehension(node, node.elt)

    def _ListComp(self, node: cst.ListComp) -> Any:
        return self._comprehension(node, node.elt)


def compile_expr(
    node: cst.BaseExpression, class_name: str = ""
) -> Callable[[dict[str, Any], dict[str, Any] | None], Any]:
    """`node` as a function f(env, fields) = Evaluator(env, fields, class_name).eval(node): what a
    kernel class's `name` property gives for one entry's fields."""

    def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
        return Evaluator(env, fields, class_name).eval(node)

    return f


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v

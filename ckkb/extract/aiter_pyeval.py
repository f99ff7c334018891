"""A small static evaluator for the Python expressions aiter's kernel lists use (libcst nodes).

Never imports or executes aiter code: it walks libcst nodes and understands literals, f-strings,
`"sep".join(...)`, `str()`/`int()`/`map(lambda ...)`, `.lower()`/`.upper()`, `+`, `*`, conditional
expressions, comparisons and comprehensions over literal lists. Anything else raises Unsupported,
which carries the node so the caller can report the file and line.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckkb.extract.lazy import lazy_module

cst = lazy_module("libcst")
cst_metadata = lazy_module("libcst.metadata")


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
    compiled: Any = field(default=None, repr=False, compare=False)  # set by compile_expr


_MISSING = object()


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


def binary_op(node: cst.BinaryOperation, op: str, a: Any, b: Any) -> Any:
    """`a op b` for the operators kernel names use (op is the libcst operator class name)."""
    try:
        if op == "Add":
            return a + b
        if op == "Multiply":
            return a * b
        if op == "Subtract":
            return a - b
        if op == "FloorDivide":
            return a // b
        if op == "Modulo" and not isinstance(a, str):
            return a % b
    except TypeError as e:
        raise Unsupported(node, f"cannot evaluate {op}: {e}") from None
    raise Unsupported(node, f"unsupported operator {op}")


class Evaluator:
    """Evaluate an expression with `self.<field>` bound to `fields` and names bound to `env`."""

    def __init__(
        self, env: dict[str, Any], fields: dict[str, Any] | None, class_name: str = ""
    ) -> None:
        self.env = env
        self.fields = fields
        self.class_name = class_name

    def eval(self, node: cst.BaseExpression) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise Unsupported(node, f"unsupported expression: {type(node).__name__}")
        return method(node)

    # -- literals
    def _Integer(self, node: cst.Integer) -> Any:
        return int(node.value.replace("_", ""), 0)

    def _Float(self, node: cst.Float) -> Any:
        return float(node.value.replace("_", ""))

    def _SimpleString(self, node: cst.SimpleString) -> Any:
        if "b" in node.prefix.lower() or "f" in node.prefix.lower():
            raise Unsupported(node, f"unsupported string prefix {node.prefix!r}")
        return node.evaluated_value

    def _ConcatenatedString(self, node: cst.ConcatenatedString) -> Any:
        return self.eval(node.left) + self.eval(node.right)

    def _FormattedString(self, node: cst.FormattedString) -> Any:
        out = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(part.value)
                continue
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

    _BUILTINS = {
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
    """`node` as a function f(env, fields) that gives what Evaluator(env, fields, class_name).eval(node) gives.

    The same values and the same Unsupported (same node, same message, raised at the same point), with
    the dispatch on node types done once instead of at every evaluation: a kernel class's `name`
    property is evaluated once per kernel entry. Node types not compiled here are evaluated by Evaluator.
    """
    return _Compiler(class_name).c(node)


def _raiser(node: cst.CSTNode, what: str) -> Callable[[dict[str, Any], dict[str, Any] | None], Any]:
    def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
        raise Unsupported(node, what)

    return f


_NAME_CONSTANTS = {"True": True, "False": False, "None": None}
_STR_METHODS = ("lower", "upper", "strip", "lstrip", "rstrip", "replace", "capitalize", "title")


class _Compiler:
    """Mirrors Evaluator method by method (keep the two in step)."""

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name

    def c(self, node: cst.CSTNode) -> Callable[[dict[str, Any], dict[str, Any] | None], Any]:
        method = getattr(self, "_" + type(node).__name__, None)
        return self._interpret(node) if method is None else method(node)

    def _interpret(
        self, node: cst.CSTNode
    ) -> Callable[[dict[str, Any], dict[str, Any] | None], Any]:
        class_name = self.class_name

        def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
            return Evaluator(env, fields, class_name).eval(node)

        return f

    def _const(self, node: cst.CSTNode) -> Callable[[dict[str, Any], dict[str, Any] | None], Any]:
        try:
            v = Evaluator({}, None).eval(node)
        except Exception:  # raised again, at evaluation, by Evaluator
            return self._interpret(node)
        return lambda env, fields: v

    _Integer = _Float = _SimpleString = _const

    def _ConcatenatedString(self, node: cst.ConcatenatedString) -> Any:
        left, right = self.c(node.left), self.c(node.right)
        return lambda env, fields: left(env, fields) + right(env, fields)

    def _FormattedString(self, node: cst.FormattedString) -> Any:
        parts: list[tuple[int, Any, Any]] = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append((0, part.value, None))
            elif part.format_spec:
                parts.append((1, part, None))
            else:
                parts.append((2, part, self.c(part.expression)))

        def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
            out = []
            for kind, part, fn in parts:
                if kind == 0:
                    out.append(part)
                    continue
                if kind == 1:
                    raise Unsupported(part, "unsupported f-string format spec")
                out.append(converted(part, fn(env, fields)))
            return "".join(out)

        return f

    def _Name(self, node: cst.Name) -> Any:
        name = node.value
        builtins = Evaluator._BUILTINS

        def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
            if name in env:
                return env[name]
            if name in builtins:
                return builtins[name]
            if name in _NAME_CONSTANTS:
                return _NAME_CONSTANTS[name]
            raise Unsupported(node, f"name {name!r} is not known statically")

        return f

    def _List(self, node: cst.List) -> Any:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return _raiser(node, "unsupported starred element")
        items = [self.c(e.value) for e in node.elements]
        return lambda env, fields: [i(env, fields) for i in items]

    def _Tuple(self, node: cst.Tuple) -> Any:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return _raiser(node, "unsupported starred element")
        items = [self.c(e.value) for e in node.elements]
        return lambda env, fields: tuple(i(env, fields) for i in items)

    def _BinaryOperation(self, node: cst.BinaryOperation) -> Any:
        left, right = self.c(node.left), self.c(node.right)
        op = type(node.operator).__name__

        def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
            a, b = left(env, fields), right(env, fields)
            return binary_op(node, op, a, b)

        return f

    def _IfExp(self, node: cst.IfExp) -> Any:
        test, body, orelse = self.c(node.test), self.c(node.body), self.c(node.orelse)
        return lambda env, fields: body(env, fields) if test(env, fields) else orelse(env, fields)

    def _Attribute(self, node: cst.Attribute) -> Any:
        if not (isinstance(node.value, cst.Name) and node.value.value == "self"):
            return _raiser(node, "unsupported attribute access")
        name = node.attr.value
        missing = f"self.{name} is not a field of {self.class_name or 'the dataclass'}"

        def f(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
            if fields is None:
                raise Unsupported(node, "unsupported attribute access")
            if name not in fields:
                raise Unsupported(node, missing)
            return fields[name]

        return f

    def _Lambda(self, node: cst.Lambda) -> Any:
        params = [p.name.value for p in node.params.params]
        if (
            node.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT)
            or node.params.kwonly_params
        ):
            return _raiser(node, "unsupported lambda parameters")
        body = self.c(node.body)
        return lambda env, fields: _Lambda(list(params), node.body, dict(env), body)

    def _Call(self, node: cst.Call) -> Any:
        if any(a.keyword is not None or a.star for a in node.args):
            return _raiser(node, "unsupported keyword or starred argument")
        func = node.func
        class_name = self.class_name
        args = [self.c(a.value) for a in node.args]
        if isinstance(func, cst.Attribute):
            recv_fn = self.c(func.value)
            meth = func.attr.value
            join = meth == "join" and len(args) == 1
            str_method = meth in _STR_METHODS
            unsupported = f"unsupported method call .{meth}()"

            def method_call(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
                recv = recv_fn(env, fields)
                values = [a(env, fields) for a in args]
                if isinstance(recv, str):
                    if join:
                        items = list(values[0])
                        if not all(isinstance(i, str) for i in items):
                            raise Unsupported(node, "join over values that are not strings")
                        return recv.join(items)
                    if str_method:
                        return getattr(recv, meth)(*values)
                raise Unsupported(node, unsupported)

            return method_call
        if isinstance(func, cst.Name):
            name = func.value
            is_map = name == "map" and len(node.args) == 2
            builtins = Evaluator._BUILTINS

            def name_call(env: dict[str, Any], fields: dict[str, Any] | None) -> Any:
                if name in env:
                    return _call_compiled(
                        env[name], [a(env, fields) for a in args], node, fields, class_name
                    )
                if is_map:
                    fn = args[0](env, fields)
                    return [
                        _call_compiled(fn, [x], node, fields, class_name)
                        for x in args[1](env, fields)
                    ]
                if name in builtins:
                    values = [a(env, fields) for a in args]
                    try:
                        return builtins[name](*values)
                    except (TypeError, ValueError) as e:
                        raise Unsupported(node, f"{name}() failed: {e}") from None
                raise Unsupported(node, f"call of {name}() is not evaluated statically")

            return name_call
        return _raiser(node, "unsupported call")


def _call_compiled(
    fn: Any, args: list[Any], node: cst.CSTNode, fields: dict[str, Any] | None, class_name: str
) -> Any:
    """Evaluator._call_fn."""
    if isinstance(fn, _Lambda):
        if len(args) != len(fn.params):
            raise Unsupported(node, "lambda called with the wrong number of arguments")
        env = {**fn.env, **dict(zip(fn.params, args, strict=False))}
        if fn.compiled is not None:
            return fn.compiled(env, fields)
        return Evaluator(env, fields, class_name).eval(fn.body)
    if callable(fn):
        return fn(*args)
    raise Unsupported(node, "call of a value that is not a function")


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


class StatementLines:
    """Line numbers without resolving PositionProvider over the whole module (it costs as much as the parse).

    Top-level statements get their lines from the generated code of the statements before them; the
    dataclasses (small) get full positions from a one-statement module; dict entries are located in
    their statement's generated code (codegen is exact concatenation, so each entry's text is found
    in order).
    """

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.base: dict[
            int, int
        ] = {}  # id(stmt) -> line of the first line of its code (leading lines included)
        self.known: dict[int, int] = {}  # id(node) -> absolute line
        self.code: dict[int, str] = {}  # id(stmt) -> its generated code
        ln = 1 + "".join(module.code_for_node(h) for h in module.header).count("\n")
        for stmt in module.body:
            self.base[id(stmt)] = ln
            self.known[id(stmt)] = ln + len(getattr(stmt, "leading_lines", ()))
            code = self.code[id(stmt)] = module.code_for_node(stmt)
            ln += code.count("\n")

    def resolve_positions(self, stmt: cst.CSTNode) -> None:
        pos = cst_metadata.MetadataWrapper(cst.Module(body=[stmt]), unsafe_skip_copy=True).resolve(
            cst_metadata.PositionProvider
        )
        off = self.base[id(stmt)] - 1
        for node, rng in pos.items():
            self.known[id(node)] = off + rng.start.line

    def locate_elements(self, stmt: cst.CSTNode, assign: cst.CSTNode, d: cst.Dict) -> None:
        """Entry lines: the dict's opening brace, then each entry's generated code in turn (one codegen pass)."""
        code = self.code[id(stmt)]
        at = code.find("{", code.find(self.module.code_for_node(assign.targets[0].target)))
        self.known[id(assign)] = self.known[id(stmt)]
        ln = (
            self.base[id(stmt)]
            + code.count("\n", 0, at)
            + self.module.code_for_node(d.lbrace).count("\n")
        )
        for el in d.elements:
            text = self.module.code_for_node(el)
            self.known[id(el)] = ln
            for sub in (getattr(el, "key", None), getattr(el, "value", None)):
                if sub is not None:
                    self.known[id(sub)] = ln
            ln += text.count("\n")

    def line(self, node: cst.CSTNode) -> int:
        return self.known.get(id(node), 0)


# ---------------------------------------------------------------- reading only the statements needed

# Python's lexical structure as far as statement boundaries need it: strings (any prefix; the prefix
# does not move a boundary), comments, brackets, `,` and `:`, newlines, backslash continuations,
# whitespace, and runs of everything else. Anything unexpected (an unterminated string) is 'e'.
_SCAN = re.compile(
    r"(?P<s>'''(?:[^\\]|\\[\s\S])*?'''|\"\"\"(?:[^\\]|\\[\s\S])*?\"\"\"|'(?:[^'\\\n]|\\[\s\S])*'|\"(?:[^\"\\\n]|\\[\s\S])*\")"
    r"|(?P<c>#[^\n]*)"
    r"|(?P<o>[(\[{])"
    r"|(?P<x>[)\]}])"
    r"|(?P<p>[,:])"
    r"|(?P<n>\n)"
    r"|(?P<b>\\\n)"
    r"|(?P<w>[ \t]+)"
    r"|(?P<t>[^'\"#()\[\]{},:\n\\ \t]+)"
    r"|(?P<e>[\s\S])"
)
_TRIVIA = frozenset("cnbw")
_NEWLINE = re.compile("\n")
_FIRST_WORD = re.compile(r"@|[^\W\d]\w*")
# First words of compound statements (their header is a logical line of its own); soft keywords
# (match, case, type) may also start a simple statement, so callers treat them as ambiguous.
COMPOUND = frozenset(
    (
        "if",
        "elif",
        "else",
        "for",
        "while",
        "try",
        "except",
        "finally",
        "with",
        "def",
        "class",
        "async",
        "@",
    )
)
SOFT = frozenset(("match", "case", "type"))


class Fallback(Exception):
    """The source is not in a shape the statement-level reader is sure of: read the whole module instead."""


@dataclass
class LogicalLine:
    first: int  # token index of the first token
    last: int  # token index of the last token before the NEWLINE (or end of file)
    start: int  # offset of the first character of the physical line it starts on
    end: int  # offset just past its NEWLINE (or end of file)
    line: int  # 1-based line of its first token
    indent: str
    word: str  # first word ("class", "def", "@", a name, ...) or ""


class SourceScan:
    """Tokens and logical lines of a Python source, for parsing single statements with libcst.

    Only what decides where a statement starts and ends is recognised; libcst still reads every
    statement the extractors use. Raises Fallback on anything it does not understand (carriage
    returns, form feeds, unterminated strings, unbalanced brackets), so callers parse the whole
    module as before.
    """

    def __init__(self, text: str) -> None:
        if "\r" in text or "\f" in text or "\x00" in text:
            raise Fallback("line endings or form feeds")
        self.text = text
        ms = list(_SCAN.finditer(text))
        kinds = [m.lastgroup for m in ms]
        starts = [m.start() for m in ms]
        ends = [m.end() for m in ms]
        del ms
        self.newlines = [m.start() for m in _NEWLINE.finditer(text)]
        logical: list[LogicalLine] = []
        depth = 0
        first = -1
        for i, k in enumerate(kinds):
            if k == "w" or k == "c" or k == "b":
                continue
            if k == "n":
                if depth == 0 and first >= 0:
                    logical.append(self._logical(kinds, starts, first, i - 1, ends[i]))
                    first = -1
                continue
            if k == "o":
                depth += 1
            elif k == "x":
                depth -= 1
                if depth < 0:
                    raise Fallback(
                        f"unbalanced bracket at line {text.count(chr(10), 0, starts[i]) + 1}"
                    )
            elif k == "e":
                raise Fallback(
                    f"unexpected character {text[starts[i]]!r} at line {text.count(chr(10), 0, starts[i]) + 1}"
                )
            if first < 0:
                first = i
        if depth != 0:
            raise Fallback("unbalanced brackets at end of file")
        self.kinds, self.starts, self.ends = kinds, starts, ends
        if first >= 0:
            logical.append(self._logical(kinds, starts, first, len(kinds) - 1, len(text)))
        self.logical = logical

    def line_of(self, i: int) -> int:
        """Line of token i (1-based): the newlines before it, in any token, plus one."""
        return bisect.bisect_left(self.newlines, self.starts[i]) + 1

    def _logical(
        self, kinds: list[str], starts: list[int], first: int, last: int, end: int
    ) -> LogicalLine:
        while kinds[last] in _TRIVIA:
            last -= 1
        s = starts[first]
        # the physical line it starts on: only whitespace, comments and continuations (no newline) lie
        # between the NEWLINE (or backslash continuation) before it and its first token
        ll_start = self.text.rfind("\n", 0, s) + 1
        m = _FIRST_WORD.match(self.text, s)
        return LogicalLine(
            first,
            last,
            ll_start,
            end,
            bisect.bisect_left(self.newlines, s) + 1,
            self.text[ll_start:s],
            m.group() if m else "",
        )

    def source(self, ll: LogicalLine) -> str:
        return self.text[ll.start : ll.end]

    def code(self, ll: LogicalLine) -> str:
        """From its first token to its last (comments and the NEWLINE left out)."""
        return self.text[self.starts[ll.first] : self.ends[ll.last]]

    def normalised(self, first: int, last: int) -> str:
        """Tokens first..last with each run of whitespace, comments and line breaks as one space (same meaning)."""
        out: list[str] = []
        gap = False
        kinds, starts, ends, text = self.kinds, self.starts, self.ends, self.text
        for i in range(first, last + 1):
            if kinds[i] in _TRIVIA:
                gap = True
                continue
            if gap and out:
                out.append(" ")
            gap = False
            out.append(text[starts[i] : ends[i]])
        return "".join(out)

    def compounds(self) -> list[tuple[int, int, int]]:
        """Top-level statements as (index of the first logical line, of the header, one past the last)."""
        out = []
        lls = self.logical
        i = 0
        while i < len(lls):
            j = i
            while j < len(lls) and lls[j].indent == "" and lls[j].word == "@":
                j += 1
            h = min(j, len(lls) - 1)
            k = h + 1
            while k < len(lls) and lls[k].indent != "":
                k += 1
            out.append((i, h, k))
            i = k
        return out


def parse_lines(scan: SourceScan, first: int, stop: int) -> tuple[Any, Any, Positions]:
    """Parse logical lines first..stop-1 (one statement at any indentation) with libcst.

    Returns (module, statement, positions): positions.get(id(node), 0) is a node's line in the whole
    file (its start, as libcst's PositionProvider gives it), computed on first use. An indented statement
    is parsed inside `if 1:` indented exactly as in the file, so continuation lines keep the indentation
    libcst strips and codegen of its nodes is what the whole module would give.
    """
    a, b = scan.logical[first], scan.logical[stop - 1]
    text = scan.text[a.start : b.end]
    if not text.endswith("\n"):
        text += "\n"
    wrapped = a.indent != ""
    try:
        module = cst.parse_module("if 1:\n" + text if wrapped else text)
    except cst.ParserSyntaxError as e:
        raise Fallback(f"statement at line {a.line} not parsed alone: {e.message}") from None
    body = module.body[0].body.body if wrapped else module.body
    if len(body) != 1:
        raise Fallback(f"lines {a.line}..{b.line} are not one statement")
    return module, body[0], Positions(module, a.line - 1 - (1 if wrapped else 0))


class Positions:
    """Start lines of a parsed module's nodes, plus `offset`, resolved on the first lookup (that keeps
    the module, so the ids stay those of its nodes)."""

    __slots__ = ("_lines", "module", "offset")

    def __init__(self, module: cst.Module, offset: int) -> None:
        self.module = module
        self.offset = offset
        self._lines: dict[int, int] | None = None

    def get(self, key: int, default: Any = 0) -> Any:
        if self._lines is None:
            off = self.offset
            self._lines = {k: off + v for k, v in start_lines(self.module).items()}
        return self._lines.get(key, default)


def start_lines(module: cst.Module) -> dict[int, int]:
    """{id(node): line of its start} for every node of `module`, equal to PositionProvider's start lines.

    One codegen pass that counts lines only (PositionProvider through MetadataWrapper also builds a
    CodeRange per node and walks the tree a second time with a batched visitor that has nothing to do).
    The module must have no carriage returns (SourceScan guarantees it).

    It builds on libcst's internal CodegenState (libcst 1.x); should a libcst release change that,
    the public PositionProvider gives the same lines, slower.
    """
    try:
        state = _line_state()(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        module._codegen(state)
        return state.starts
    except (ImportError, AttributeError, TypeError):
        return _provider_start_lines(module)


def _provider_start_lines(module: cst.Module) -> dict[int, int]:
    """start_lines through libcst's public PositionProvider (ids are of `module`'s own nodes)."""
    pos = cst_metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(
        cst_metadata.PositionProvider
    )
    return {id(node): rng.start.line for node, rng in pos.items()}


@functools.cache
def _line_state() -> type:
    """A CodegenState that records start lines the way PositionProvidingCodegenState records positions."""
    from libcst._nodes.internal import CodegenState

    class _Syntactic:
        __slots__ = ("node", "start", "start_node", "state")

        def __init__(self, state: Any, node: Any, start_node: Any) -> None:
            self.state, self.node, self.start_node = state, node, start_node

        def __enter__(self) -> None:
            self.start = self.state.line

        def __exit__(self, *exc: Any) -> None:
            starts = self.state.starts
            starts[id(self.node)] = (
                starts[id(self.start_node)] if self.start_node is not None else self.start
            )

    @dataclass
    class _LineState(CodegenState):
        line: int = 1
        starts: dict[int, int] = field(default_factory=dict)
        stack: list[int] = field(default_factory=list)

        def add_indent_tokens(self) -> None:
            for t in self.indent_tokens:
                if "\n" in t:
                    self.line += t.count("\n")

        def add_token(self, value: str) -> None:
            if "\n" in value:
                self.line += value.count("\n")

        def pop_trailing_newline(self) -> None:
            pass  # tokens are not kept; PositionProvider's line count does not change either

        def before_codegen(self, node: Any) -> None:
            self.stack.append(self.line)

        def after_codegen(self, node: Any) -> None:
            start = self.stack.pop()
            self.starts.setdefault(id(node), start)

        def record_syntactic_position(
            self, node: Any, *, start_node: Any = None, end_node: Any = None
        ) -> Any:
            return _Syntactic(self, node, start_node)

    return _LineState

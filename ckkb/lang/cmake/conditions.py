"""CMake if() conditions: the AST, the Lark reader (`grammars/cmake_condition.lark`), text back
from the AST, and the one evaluator (CMake's if() semantics, policy CMP0054 NEW: quoted strings
are never variable names): `evaluate`, whose cases are the node classes' `holds` methods."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Arg:
    """One command or condition argument."""

    value: str  # text without quotes (escapes kept as written)
    quoted: bool = False

    def source(self) -> str:
        return f'"{self.value}"' if self.quoted else self.value


@dataclass(frozen=True)
class Truth:
    arg: Arg

    def holds(self, env: dict[str, str]) -> bool:
        return _truth(self.arg, env)


@dataclass(frozen=True)
class Unary:
    op: str
    arg: Arg

    def holds(self, env: dict[str, str]) -> bool:
        return _unary(self.op, self.arg, env)


@dataclass(frozen=True)
class Binary:
    op: str
    left: Arg
    right: Arg

    def holds(self, env: dict[str, str]) -> bool:
        lhs = _value(self.left, env)
        if self.op == "MATCHES":
            pattern = self.right.value
            rx = self.pattern if "${" not in pattern else _regex(expand(pattern, env))
            return rx is not None and rx.search(lhs) is not None
        return _binary(self.op, lhs, self.right, env)

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        """The regex of a MATCHES whose pattern names no variable, compiled once per node."""
        return _regex(self.right.value)


@dataclass(frozen=True)
class Not:
    expr: Cond

    def holds(self, env: dict[str, str]) -> bool:
        return not self.expr.holds(env)


@dataclass(frozen=True)
class And:
    left: Cond
    right: Cond

    def holds(self, env: dict[str, str]) -> bool:
        for term in self.terms:
            if not term.holds(env):
                return False
        return True

    @cached_property
    def terms(self) -> tuple[Cond, ...]:
        """The operands of this chain of ANDs (`a AND b AND c`), in the order they are tried."""
        return _tried_in_order(_chain(self, And))


@dataclass(frozen=True)
class Or:
    left: Cond
    right: Cond

    def holds(self, env: dict[str, str]) -> bool:
        for term in self.terms:
            if term.holds(env):
                return True
        return False

    @cached_property
    def terms(self) -> tuple[Cond, ...]:
        """The operands of this chain of ORs, in the order they are tried."""
        return _tried_in_order(_chain(self, Or))


Cond = Truth | Unary | Binary | Not | And | Or


def _expands(c: Cond) -> bool:
    """Whether evaluating `c` may expand a `${...}` reference (a variable's value, which may be a
    whole file's text: `"${cmake_instance}" MATCHES "_fp8"` in CK's directory loop)."""
    if isinstance(c, (And, Or)):
        return _expands(c.left) or _expands(c.right)
    if isinstance(c, Not):
        return _expands(c.expr)
    args = [c.arg] if isinstance(c, (Truth, Unary)) else [c.left, c.right]
    return any("${" in a.value for a in args)


def _chain(c: Cond, kind: type[And] | type[Or]) -> list[Cond]:
    """The operands of a chain of one operator, left to right (the reader nests it leftwards)."""
    if isinstance(c, kind):
        return _chain(c.left, kind) + _chain(c.right, kind)
    return [c]


def _tried_in_order(terms: list[Cond]) -> tuple[Cond, ...]:
    """The order AND/OR tries its operands in: those that expand no reference first, each group
    as written. The answer is the same in any order (`holds` has no side effects); CK's directory
    loop tests `("${cmake_instance}" MATCHES "_fp8" ...) AND DTYPES MATCHES "fp8"`, and the
    name's test spares expanding the directory's CMakeLists.txt for each arch and directory."""
    return tuple(sorted(terms, key=_expands))


class ConditionError(ValueError):
    """A condition that does not parse; `line`/`column` are inside the condition text."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


# ---------------------------------------------------------------- reading


@lru_cache(maxsize=1)
def _condition_reader() -> tuple[Any, Any, type[Exception]]:
    """(Lark parser of grammars/cmake_condition.lark, parse tree -> AST transformer, Lark's error
    class). Built once per process (the cache holds one grammar, never input); Lark is imported
    here, on first use: `ckkb build` starts its workers sooner without it."""
    from lark import Lark, Token, Transformer, v_args
    from lark.exceptions import LarkError

    class ToAst(Transformer):
        def quoted(self, items: list[Token]) -> Arg:
            return Arg(str(items[0])[1:-1], True)

        def unquoted(self, items: list[Token]) -> Arg:
            return Arg(str(items[0]), False)

        @v_args(inline=True)
        def truth(self, a: Arg) -> Cond:
            return Truth(a)

        @v_args(inline=True)
        def unary(self, op: Token, a: Arg) -> Cond:
            return Unary(str(op), a)

        @v_args(inline=True)
        def binary(self, a: Arg, op: Token, b: Arg) -> Cond:
            return Binary(str(op), a, b)

        @v_args(inline=True)
        def not_(self, e: Cond) -> Cond:
            return Not(e)

        @v_args(inline=True)
        def and_(self, a: Cond, b: Cond) -> Cond:
            return And(a, b)

        @v_args(inline=True)
        def or_(self, a: Cond, b: Cond) -> Cond:
            return Or(a, b)

    grammar = resources.files("ckkb.grammars").joinpath("cmake_condition.lark").read_text()
    parser = Lark(
        grammar, parser="lalr", propagate_positions=True, cache=True, maybe_placeholders=False
    )
    return parser, ToAst(), LarkError


def parse_condition(text: str) -> Cond:
    """CMake if() condition text -> AST. Raises ConditionError (with line/column inside `text`)."""
    if not text.strip():
        raise ConditionError("empty condition")
    parser, to_ast, lark_error = _condition_reader()
    try:
        tree = parser.parse(text)
    except lark_error as e:
        line = getattr(e, "line", 1) or 1
        col = getattr(e, "column", 1) or 1
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConditionError(f"cannot parse condition: {first}", line, col) from None
    cond: Cond = to_ast.transform(tree)
    return cond


_PREC: dict[type, float] = {Or: 1, And: 2, Not: 3}


def condition_text(c: Cond, parent: float = 0) -> str:
    """AST -> CMake text (parentheses only where precedence needs them)."""
    if isinstance(c, Truth):
        return c.arg.source()
    if isinstance(c, Unary):
        return f"{c.op} {c.arg.source()}"
    if isinstance(c, Binary):
        return f"{c.left.source()} {c.op} {c.right.source()}"
    p = _PREC[type(c)]
    if isinstance(c, Not):
        s = f"NOT {condition_text(c.expr, p)}"
    elif isinstance(c, And):
        s = f"{condition_text(c.left, p)} AND {condition_text(c.right, p + 0.5)}"
    else:
        s = f"{condition_text(c.left, p)} OR {condition_text(c.right, p + 0.5)}"
    return f"({s})" if p < parent else s


# ---------------------------------------------------------------- evaluation

_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
VAR_REF = re.compile(r"\$\{([^}]*)\}")


EXPAND_ROUNDS = 64  # nested references CMake code writes are a few levels deep


def expand(text: str, env: dict[str, str]) -> str:
    """`${VAR}` references -> values, repeated while a substituted value brings new ones;
    undefined -> ''."""
    if "${" not in text:
        return text
    seen: set[str] = set()
    # a value that refers back to itself (A = `${B}`, B = `${A}`; A = `x${A}`) would be expanded
    # forever: a text seen before, or too many rounds, ends it with the references left in
    while "${" in text and text not in seen and len(seen) < EXPAND_ROUNDS:
        seen.add(text)
        text = _substitute(text, tuple(env.get(n, "") for n in _references(text)))
    return text


# The two caches below hold results of pure functions of their arguments (bounded; they outlive
# a call for that reason only): CK's directory loop reads each directory's CMakeLists.txt with
# file(READ) and tests `"${cmake_instance}" MATCHES ...` ~20 times per directory and arch, and
# its text, with its own `${...}`, is expanded again each time with the same values.


@lru_cache(maxsize=1024)
def _references(text: str) -> tuple[str, ...]:
    """The variables `text` refers to, first reference first."""
    return tuple(dict.fromkeys(VAR_REF.findall(text)))


@lru_cache(maxsize=1024)
def _substitute(text: str, values: tuple[str, ...]) -> str:
    """`text` with each reference replaced once, `values` being those of `_references(text)`."""
    value = dict(zip(_references(text), values, strict=True))
    return VAR_REF.sub(lambda m: value[m.group(1)], text)


def words(args: list[Arg], env: dict[str, str]) -> list[str]:
    """Command arguments expanded: an unquoted one splits on ';' (empty items dropped)."""
    out: list[str] = []
    for a in args:
        v = expand(a.value, env) if "${" in a.value else a.value
        if a.quoted or (v and ";" not in v):
            out.append(v)
        elif v:
            out.extend(x for x in v.split(";") if x != "")
    return out


def plain_words(args: list[Arg]) -> tuple[str, ...] | None:
    """The words of arguments that name no variable (the same under any variables), else None."""
    return None if any("${" in a.value for a in args) else tuple(words(args, {}))


def _is_false_const(s: str) -> bool:
    u = s.upper()
    return u in _FALSE or u.endswith("-NOTFOUND")


def _num(s: str) -> float | None:
    t = s.strip()
    # what float() can read starts with a digit, a sign, '.', 'inf' or 'nan': spare the raise
    if not t or not (t[0].isdecimal() or t[0] in "+-.iInN"):
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _value(a: Arg, env: dict[str, str]) -> str:
    """Operand of a binary test: an unquoted name of a defined variable means its value."""
    if "${" not in a.value:
        return env[a.value] if not a.quoted and a.value in env else a.value
    return expand(a.value, env)


def _version(s: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in s.split(".") if p != "")


def _truth(a: Arg, env: dict[str, str]) -> bool:
    s = expand(a.value, env)
    if s.upper() in _TRUE:
        return True
    n = _num(s)
    if n is not None:
        return n != 0
    if _is_false_const(s) or a.quoted:
        return False
    return s in env and not _is_false_const(env[s])


def _unary(op: str, a: Arg, env: dict[str, str]) -> bool:
    s = expand(a.value, env)
    if op == "DEFINED":
        return not (s.startswith("ENV{") and s.endswith("}")) and s in env
    if op in ("EXISTS", "IS_DIRECTORY", "IS_ABSOLUTE", "IS_READABLE"):
        return s.startswith("/")
    return False


def _compare(op: str, lhs: str, rhs: str) -> bool:
    """A binary test other than MATCHES and IN_LIST on the operands' values."""
    if op in ("STREQUAL", "PATH_EQUAL"):
        return lhs == rhs
    if op.startswith("VERSION_"):
        va, vb = _version(lhs), _version(rhs)
        return {
            "VERSION_LESS": va < vb,
            "VERSION_GREATER": va > vb,
            "VERSION_EQUAL": va == vb,
            "VERSION_LESS_EQUAL": va <= vb,
            "VERSION_GREATER_EQUAL": va >= vb,
        }[op]
    if op.startswith("STR"):
        return {
            "STRLESS": lhs < rhs,
            "STRGREATER": lhs > rhs,
            "STRLESS_EQUAL": lhs <= rhs,
            "STRGREATER_EQUAL": lhs >= rhs,
        }[op]
    a, b = _num(lhs), _num(rhs)
    if a is None or b is None:
        return False
    return {
        "EQUAL": a == b,
        "LESS": a < b,
        "GREATER": a > b,
        "LESS_EQUAL": a <= b,
        "GREATER_EQUAL": a >= b,
    }[op]


def _regex(pattern: str) -> re.Pattern[str] | None:
    try:  # re's own cache keeps the compiled pattern
        return re.compile(pattern)
    except re.error:
        return None


def _binary(op: str, lhs: str, right: Arg, env: dict[str, str]) -> bool:
    """A binary test other than MATCHES, its left operand's value given."""
    if op == "IN_LIST":
        return lhs in env.get(expand(right.value, env), "").split(";")
    return _compare(op, lhs, _value(right, env))


def evaluate(c: Cond, env: dict[str, str]) -> bool:
    """CMake's if() semantics for condition `c` over the variables `env` (AND/OR short-circuit).
    Each node class's `holds` is its case of this one evaluator."""
    return c.holds(env)


def variables(c: Cond) -> set[str]:
    """Names an unquoted operand may refer to (for 'which variable decided this')."""
    if isinstance(c, (And, Or)):
        return variables(c.left) | variables(c.right)
    if isinstance(c, Not):
        return variables(c.expr)
    args = [c.arg] if isinstance(c, (Truth, Unary)) else [c.left, c.right]
    out = set()
    for a in args:
        out.update(VAR_REF.findall(a.value))
        if not a.quoted and "${" not in a.value:
            out.add(a.value)
    return out

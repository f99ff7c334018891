"""Rendering a schema's tokens for one instance's fields: (key, printed name, run-time values).

The key is what `ckkb.names` computes from a printed name (`ParsedName.key`): the name without
whitespace, run-time values and conditional parts as '*'. The printed name is known only where
every value is: a ref's value is printed as GetTypeString() prints it, a run-time value where its
expression is integer arithmetic over known parameters, a conditional where its condition is
decidable.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
from typing import Any

from ckkb.fields import as_int, enum_word

UNKNOWN = "{unknown}"  # in a key: a value no registration binds (never matches a printed name)

_SPEC_PREFIXES = ("Gemm", "ConvFwd", "ConvBwdData", "ConvBwdWeight", "Conv")
_ARITH = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
}


def render(
    tokens: list[Any],
    fields: dict[str, Any],
    printed: dict[tuple[Any, ...], str | None] | None = None,
) -> tuple[str, str | None, list[str]]:
    """(key, printed name or None, run-time value names) of one instance's fields under a schema.

    `printed` memoises printed_value by (token, value, its type: 1 and True print apart), for a
    caller that renders `tokens` many times to keep while they live: a build's schemas print a few
    hundred values 180,000 times."""
    if printed is None:
        printed = {}
    key: list[str] = []
    name: list[str] | None = []
    derived: list[str] = []
    for t in tokens:
        if "lit" in t:
            key.append("".join(t["lit"].split()))
            if name is not None:
                name.append(t["lit"])
        elif "alt" in t:  # '*' in the key: a printed name does not say which branch was taken
            key.append("*")
            c = _cond_value(t.get("cond", ""), fields)
            if c is None:
                name = None
                continue
            _k, n, d = render(t["alt"][0 if c else 1], fields, printed)
            derived.extend(d)
            if n is None:
                name = None
            elif name is not None:
                name.append(n)
        elif "ref" in t:
            v = fields.get(t["ref"])
            if v is None:
                v = t.get("default")
            try:
                p = printed[id(t), v, type(v)]
            except KeyError:
                p = printed[id(t), v, type(v)] = printed_value(t, v)
            except TypeError:  # a list value: not a key
                p = printed_value(t, v)
            key.append(UNKNOWN if p is None else p)
            if p is None:
                name = None
            elif name is not None:
                name.append(p)
        else:  # a run-time value: '*' in the key; in the name only where its expression evaluates
            key.append("*")
            derived.append(t.get("derived") or t.get("expr") or "?")
            i = None if t.get("delegate") else eval_int(t.get("expr") or "", fields)
            if i is None:
                name = None
            elif name is not None:
                name.append(str(i))
    return "".join(key), ("".join(name) if name is not None else None), derived


# Pure (the tree of an expression string); bounded. Schemas repeat a few expressions thousands of
# times, and a parse costs more than the evaluation.
@functools.lru_cache(maxsize=4096)
def _parse_expr(expr: str) -> ast.Expression | None:
    try:
        return ast.parse(expr.replace("::", "_"), mode="eval")
    except SyntaxError:
        return None


def eval_int(expr: str, fields: dict[str, Any]) -> int | None:
    """Integer arithmetic over template parameters (`AK1 * 2`); None for anything else."""
    tree = _parse_expr(expr)
    if tree is None:
        return None
    try:
        return _eval_node(tree.body, fields)
    except (ValueError, ZeroDivisionError):
        return None


def _eval_node(n: ast.AST, fields: dict[str, Any]) -> int:
    """Raises ValueError where a value is unknown or the expression is not integer arithmetic."""
    if isinstance(n, ast.Constant) and isinstance(n.value, int):
        return n.value
    if isinstance(n, ast.Name):
        v = as_int(fields.get(n.id))
        if v is None:
            raise ValueError(n.id)
        return v
    if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
        return _ARITH[type(n.op)](_eval_node(n.left, fields), _eval_node(n.right, fields))
    raise ValueError(type(n).__name__)


def printed_value(t: dict[str, Any], v: Any) -> str | None:
    """How GetTypeString() prints the value `v` of the ref token `t` (None when unknown)."""
    if v is None:
        return None
    conv = t.get("conv")
    if conv == "at":
        if isinstance(v, (list, tuple)) and t.get("index", 0) < len(v):
            return str(v[t["index"]])
        return None
    if isinstance(v, (list, tuple, dict)):
        return None
    w = enum_word(v)
    if w is None:
        return None
    if conv == "spec":
        for p in _SPEC_PREFIXES:
            if w.startswith(p) and len(w) > len(p) and (w[len(p)].isupper() or w[len(p)].isdigit()):
                return w[len(p) :]
        return w
    if conv == "layout_initial":
        return {"Row": "R", "Col": "C"}.get(w, w[0])
    if conv == "layout_name":
        return {"Row": "RowMajor", "Col": "ColumnMajor"}.get(w, w)
    if conv == "enum":
        for k, printed in (t.get("map") or {}).items():
            if enum_word(k) == w:
                return printed
        return w
    if t.get("kind") == "bool":
        return {"true": "1", "false": "0"}.get(w, w)
    if t.get("kind") == "int":
        i = as_int(v)
        return str(i) if i is not None else None
    return w


def _cond_value(cond: str, fields: dict[str, Any]) -> bool | None:
    """A condition over template parameters (`P`, `!P`, `P == X`, `P != X`); None: undecidable."""
    c = cond.strip()
    while c.startswith("(") and c.endswith(")"):
        c = c[1:-1].strip()
    m = re.fullmatch(r"(!?)\s*(\w+)", c)
    if m and m.group(2) in fields:
        v = enum_word(fields[m.group(2)])
        truth = {"true": True, "1": True, "false": False, "0": False}.get(str(v).lower())
        if truth is None:
            return None
        return not truth if m.group(1) else truth
    m = re.fullmatch(r"(\w+)\s*(==|!=)\s*([\w:]+)", c)
    if not m or m.group(1) not in fields or fields[m.group(1)] is None:
        return None
    same = enum_word(fields[m.group(1)]) == enum_word(m.group(3))
    return same if m.group(2) == "==" else not same

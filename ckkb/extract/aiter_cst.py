"""Small libcst helpers of the aiter tuner/core reader: the calls, asserts, raises, strings,
comparisons and lists under a node, a call's name and keyword, a literal or None."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyeval import Unsupported, literal
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


def _code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


@functools.lru_cache(maxsize=1)
def _calls_visitor() -> type:
    """The visitor class, defined on first use (subclassing cst.CSTVisitor imports libcst)."""

    class _Calls(cst.CSTVisitor):
        def __init__(self) -> None:
            self.calls: list[cst.Call] = []
            self.asserts: list[cst.Assert] = []
            self.raises: list[cst.Raise] = []
            self.strings: list[cst.SimpleString] = []
            self.compares: list[cst.Comparison] = []
            self.lists: list[cst.List] = []

        def visit_Call(self, node: cst.Call) -> None:
            self.calls.append(node)

        def visit_Assert(self, node: cst.Assert) -> None:
            self.asserts.append(node)

        def visit_Raise(self, node: cst.Raise) -> None:
            self.raises.append(node)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            self.strings.append(node)

        def visit_Comparison(self, node: cst.Comparison) -> None:
            self.compares.append(node)

        def visit_List(self, node: cst.List) -> None:
            self.lists.append(node)

    return _Calls


def _Calls() -> Any:  # noqa: N802  (reads like the class it builds)
    return _calls_visitor()()


def _attr_name(call: cst.Call) -> str | None:
    f = call.func
    if isinstance(f, cst.Attribute):
        return f.attr.value
    if isinstance(f, cst.Name):
        return f.value
    return None


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _lit(node: cst.BaseExpression | None) -> Any:
    if node is None:
        return None
    try:
        return literal(node)
    except Unsupported:
        return None

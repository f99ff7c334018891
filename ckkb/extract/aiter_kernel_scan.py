"""The statement reader's scanner side for aiter kernel lists (ckkb.extract.aiter_kernels): a
kernel dict `NAME = {k: K(...), ...}` cut into its entries by the token scan (ckkb.extract.pyscan),
each key and argument parsed alone with libcst, and the lines of a dataclass from the scan.

A fast path beside the whole-module reader (`aiter_kernels._read_module`, the reference): reading
only these statements makes `ckkb audit --aiter TREE` on a tree not in the knowledge base ~4x
faster (see the README's Performance section); tests/unit/test_aiter_readers_equiv.py checks both
give the same facts. A shape it does not take raises Fallback and the reference reads the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import _TRIVIA, Fallback, LogicalLine, SourceScan

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")  # imported on first use


@dataclass(frozen=True, slots=True)
class _Ident:
    value: str


@dataclass(frozen=True, slots=True)
class _Arg:
    """What _bind reads of a cst.Arg."""

    value: Any  # a libcst expression
    keyword: _Ident | None
    star: str = ""


@dataclass(frozen=True, slots=True)
class SplitCall:
    """`NAME(args)` split by the scanner, each argument parsed with libcst: what _bind reads of a
    cst.Call (building libcst nodes for it costs their validation, once per entry)."""

    func: _Ident
    args: list[_Arg]


_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")
_NAME = re.compile(r"[^\W\d]\w*")
_KEYWORD = re.compile(r"([^\W\d]\w*)[ \t]*=(?!=)[ \t]*")
_DICT_TARGET = re.compile(r"([^\W\d]\w*)[ \t]*=[ \t]*\Z")


def class_lines(
    scan: SourceScan, header: int, stop: int, stmt: cst.ClassDef, known: dict[int, int]
) -> None:
    """The lines _read_class always asks for, from the scanner: the class (its `class` keyword,
    where PositionProvider starts a ClassDef) and each `def name` of its body (a FunctionDef starts
    at `def`)."""
    lls = scan.logical
    known[id(stmt)] = lls[header].line
    if header + 1 >= stop or not isinstance(stmt.body, cst.IndentedBlock):
        return
    indent = lls[header + 1].indent
    defs = []
    for j in range(header + 1, stop):
        ll = lls[j]
        if ll.indent == indent and ll.word in ("def", "async"):
            m = _DEF_NAME.match(scan.code(ll))
            if m is not None and m.group(1) == "name":
                defs.append(ll.line)
    items = [
        item
        for item in stmt.body.body
        if isinstance(item, cst.FunctionDef) and item.name.value == "name"
    ]
    if len(items) == len(defs):  # else: resolved from the positions
        for item, ln in zip(items, defs, strict=True):
            known[id(item)] = ln


def dict_statement(
    scan: SourceScan, ll: LogicalLine, parsed: dict[str, Any]
) -> tuple[str, list[tuple[int, Any, Any]]] | None:
    """`NAME = {k: v, ...}` alone on its logical line -> (NAME, [(entry line, key, value)]),
    key and value as libcst nodes.

    Keys and values are parsed one by one with libcst from their tokens (comments and line breaks as
    one space; a text already in `parsed` is not parsed again). A `**x` entry has key
    None and value None.
    """
    kinds, starts, text = scan.kinds, scan.starts, scan.text
    i = ll.first
    while i <= ll.last and kinds[i] != "o":
        if kinds[i] in ("s", "x", "p"):
            return None
        i += 1
    if i > ll.last or text[starts[i]] != "{":
        return None
    m = _DICT_TARGET.match(text, starts[ll.first], starts[i])
    if m is None:
        return None
    depth = 0
    close = -1
    for j in range(i, ll.last + 1):
        k = kinds[j]
        if k == "o":
            depth += 1
        elif k == "x":
            depth -= 1
            if depth == 0:
                close = j
                break
    if close != ll.last or text[starts[close]] != "}":
        return None  # something follows the dict (an operator, a call) or it is not closed by `}`

    def parse(first: int, last: int) -> Any:
        src = scan.normalised(first, last)
        if src not in parsed:
            try:
                parsed[src] = cst.parse_expression(src)
            except cst.ParserSyntaxError:
                raise Fallback(
                    f"line {scan.line_of(first)}: {src[:40]!r} not an expression alone"
                ) from None
        return parsed[src]

    def parse_value(first: int, last: int) -> Any:
        """`NAME(arg, ..., kw=arg)`: each argument parsed alone (kernel lists repeat the same
        few), else the whole."""
        while first <= last and kinds[first] in _TRIVIA:
            first += 1
        while last >= first and kinds[last] in _TRIVIA:
            last -= 1
        if first > last or kinds[first] != "t" or kinds[last] != "x" or first + 1 > last:
            return parse(first, last)
        o = first + 1
        while o < last and kinds[o] in _TRIVIA:
            o += 1
        if (
            kinds[o] != "o"
            or text[starts[o]] != "("
            or not _NAME.fullmatch(text, starts[first], scan.ends[first])
        ):
            return parse(first, last)
        args: list[Any] = []
        depth = 0
        begin = o + 1
        for j in range(o + 1, last + 1):
            k = kinds[j]
            if k == "o":
                depth += 1
            elif k == "x" and j != last:
                depth -= 1
            elif k == "p" and depth == 0 and text[starts[j]] == ":":
                return parse(first, last)
            if (k == "p" and depth == 0 and text[starts[j]] == ",") or j == last:
                if depth != 0 or (j == last and text[starts[j]] != ")"):
                    return parse(first, last)
                a = begin
                while a < j and kinds[a] in _TRIVIA:
                    a += 1
                if a == j:
                    if j != last or (args and text[starts[begin - 1]] != ","):
                        return parse(first, last)
                    break
                kw = _KEYWORD.match(text, starts[a], starts[j])
                if text.startswith("*", starts[a]):
                    return parse(first, last)
                if kw is not None:
                    b = a
                    while starts[b] < kw.end():
                        b += 1
                    if starts[b] != kw.end():
                        return parse(first, last)
                    args.append(_Arg(parse(b, j - 1), _Ident(kw.group(1))))
                else:
                    args.append(_Arg(parse(a, j - 1), None))
                begin = j + 1
        return SplitCall(_Ident(text[starts[first] : scan.ends[first]]), args)

    elements: list[tuple[int, Any, Any]] = []
    depth = 0
    begin = i + 1
    colon = -1
    for j in range(i + 1, close + 1):
        k = kinds[j]
        if k == "o":
            depth += 1
        elif k == "x" and j != close:
            depth -= 1
        elif (k == "p" and depth == 0) or j == close:
            ch = text[starts[j]]
            if ch == ":" and j != close:
                if colon < 0:
                    colon = j
                continue
            first = begin
            while first < j and kinds[first] in _TRIVIA:
                first += 1
            if first == j:  # trailing comma (or an empty dict)
                if colon >= 0 or (j != close and ch == ","):
                    return None
                break
            el_line = scan.line_of(first)
            if text.startswith("**", starts[first]):
                elements.append((el_line, None, None))
            elif colon < 0:
                return None  # a set, not a dict
            else:
                if "lambda" in scan.normalised(first, colon - 1):
                    raise Fallback(f"line {el_line}: lambda in a dict key")
                elements.append((el_line, parse(first, colon - 1), parse_value(colon + 1, j - 1)))
            begin, colon = j + 1, -1
    return m.group(1), elements

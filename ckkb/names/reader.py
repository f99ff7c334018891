"""Reading a name's shape: its op, template arguments and properties, as the grammar defines them.

`read` is the one entry point. The reference is the grammar itself (`read_with_grammar`: lark's
LALR parse, positions mapped back to the text). Beside it sits one fast path, `read_fast`: one
regular expression for the common shapes (no nested lists, no '::' names, no lead). It reads 99% of
real names and saves 89% of the CPU time of `parse` with schemas (28,000 vs 3,200 names/s,
`benchmarks/names.py`). It answers only names it is sure of and returns None otherwise; a
hypothesis test checks that wherever it answers, it answers exactly what the reference does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, NamedTuple

import lark

from ckkb.names.grammar import lark_parser


class Reading(NamedTuple):
    """A name's shape. props: (key, "keyed" | "bare" | "flag", value text) in printed order."""

    op: str
    args: list[str]
    props: list[tuple[str, str, str]]


def read(name: str) -> Reading:
    """The shape of `name`; raises lark.exceptions.UnexpectedInput where the grammar rejects it."""
    return read_fast(name) or read_with_grammar(name)


# --------------------------------------------------------------------------- the reference


def read_with_grammar(name: str) -> Reading:
    """The grammar's own parse of `name` (lark LALR), as a Reading."""
    tree: Any = lark_parser().parse(name)

    def text(node: Any) -> str:
        if isinstance(node, lark.Token):
            return str(node)
        return name[node.meta.start_pos : node.meta.end_pos]

    def prop(p: Any) -> tuple[str, str, str, int]:
        key, val = p.children[0], p.children[1] if len(p.children) > 1 else None
        start = val.meta.start_pos if val is not None else -1
        return str(key), str(p.data), text(val) if val is not None else "", start

    head = tree.children[0]
    args: list[str] = []
    props: list[tuple[str, str, str, int]] = []  # the last: where the value starts (-1: none)
    for ch in tree.children[1:]:
        if ch.data == "targs":
            args = [text(a) for a in ch.children if a is not None]
        elif ch.data == "lead":
            props.extend(prop(p) for p in ch.children)
        elif ch.data == "props":
            for p in ch.children:
                if p.data != "extra":
                    props.append(prop(p))
                    continue
                # an extra continues the value of the property before it
                key, kind, _value, start = props[-1]
                if start < 0:
                    start = p.meta.start_pos
                props[-1] = (key, kind, name[start : p.meta.end_pos], start)
    return Reading(str(head), args, [(k, kind, v) for k, kind, v, _ in props])


# --------------------------------------------------------------------------- the fast path

# Possessive quantifiers (Python 3.11), so a chunk is never split. A chunk without ':' is a single
# token of the grammar (each atom terminal ends at a separator), so only the head needs checking
# (it must not be a NUMBER or a TILE); keys are WORDs by construction. Covers keyed arguments, a
# trailing comma, flags, value continuations (extras) and a stray '>'.
_NS = r"[^\s,<>:]++"
_SEQ = _NS + r"(?:\s++" + _NS + r")*+"
_KEY = r"[A-Za-z_]\w*+"
_ARG = r"(?:" + _KEY + r"\s*+:(?:\s*+" + _SEQ + r")?+|" + _SEQ + r")"
_PROP = _KEY + r"(?:\s*+:(?:\s*+" + _SEQ + r")?+|\s++" + _SEQ + r")?+"
_ITEM = r"(?:" + _PROP + r"|" + _SEQ + r")"
_FAST = re.compile(
    r"\s*+("
    + _NS
    + r")\s*+(?:<\s*+("
    + _ARG
    + r"(?:\s*+,\s*+"
    + _ARG
    + r")*+(?:\s*+,)?+)?+\s*+>|(>))?+\s*+"
    r"(" + _PROP + r"(?:\s*+,\s*+" + _ITEM + r")*+(?:\s*+,)?+)?+\s*+"
)
# one property item of a string _FAST accepted: keyed | bare | flag | extra, then its comma
_PROP_ITEMS = re.compile(
    r"\s*+(?:("
    + _KEY
    + r")\s*+:\s*+("
    + _SEQ
    + r")?+|("
    + _KEY
    + r")\s++("
    + _SEQ
    + r")|("
    + _KEY
    + r")(?=\s*+(?:,|$))|("
    + _SEQ
    + r"))\s*+(?:,|$)"
)


@lru_cache(maxsize=1)  # made from the grammar's terminals once per process
def _number_or_tile() -> re.Pattern[str]:
    """The grammar's NUMBER and TILE terminals: a head chunk they match is not a name."""
    terms = {t.name: t.pattern.to_regexp() for t in lark_parser().terminals}
    return re.compile(f"(?:{terms['NUMBER']})|(?:{terms['TILE']})")


def read_fast(name: str) -> Reading | None:
    """The Reading of a name in one of the common shapes; None for any other (ask the grammar)."""
    m = _FAST.fullmatch(name)
    if m is None:
        return None
    head, atext, stray, ptext = m.groups()
    if _number_or_tile().fullmatch(head):
        return None
    args: list[str] = []
    if atext is not None and not stray:
        args = [a.strip() for a in atext.split(",")]
        if not args[-1]:
            args.pop()  # the trailing comma
    props: list[tuple[str, str, str]] = []
    if ptext:
        vstart = -1  # where the last property's value starts in ptext (-1: it has none)
        for im in _PROP_ITEMS.finditer(ptext):
            k, kv, bk, bv, fk, extra = im.groups()
            if k is not None:
                props.append((k, "keyed", kv or ""))
                vstart = im.start(2) if kv else -1
            elif bk is not None:
                props.append((bk, "bare", bv))
                vstart = im.start(4)
            elif fk is not None:
                props.append((fk, "flag", ""))
                vstart = -1
            else:  # an extra: continues the value of the property before it
                if vstart < 0:
                    vstart = im.start(6)
                key, kind, _ = props[-1]
                props[-1] = (key, kind, ptext[vstart : im.end(6)])
    return Reading(head, args, props)

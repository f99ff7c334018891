"""The instance-name grammar (`grammars/instance_name.lark`, LALR): its parser, its tokens and its
error messages. Every error a name gets comes from here, worded by lark's `match_examples`."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import NamedTuple

import lark


@lru_cache(maxsize=1)  # the file never changes while ckkb runs: read it once
def grammar_text() -> str:
    return resources.files("ckkb.grammars").joinpath("instance_name.lark").read_text()


@lru_cache(maxsize=1)  # building the LALR tables costs milliseconds: once per process
def lark_parser() -> lark.Lark:
    return lark.Lark(
        grammar_text(),
        parser="lalr",
        lexer="basic",
        cache=True,
        propagate_positions=True,
        maybe_placeholders=False,
    )


class Token(NamedTuple):
    """One terminal of a name with its text and position (whitespace is not a token)."""

    type: str  # WORD | TYPENAME | NUMBER | TILE | OTHER | LESSTHAN | MORETHAN | COMMA | COLON
    text: str
    start: int
    end: int


def lex(name: str) -> list[Token]:
    """The grammar's tokens of `name` (raises lark.exceptions.UnexpectedInput where it has none)."""
    return [
        Token(t.type, str(t), t.start_pos or 0, t.end_pos or 0) for t in lark_parser().lex(name)
    ]


# Readable error labels: lark matches a failing input against these examples by parser state.
ERROR_EXAMPLES: dict[str, list[str]] = {
    "unbalanced '<': a template-argument list is not closed with '>'": [
        "Op<1, 2",
        "Op<S<1, 2>",
        "Op<1, S<2, 3",
        "Op<",
        "Op<1,",
        "Op<S<",
    ],
    "unexpected '>' without a matching '<'": ["Op<1>>", "Op<1> Key: 1>", "Op<S<1>>>", "Op>>"],
    "empty template argument": ["Op<1,,2>", "Op<,1>", "Op<,>"],
    "a name must start with the device-op name": ["<1, 2>", ", Op", ": x", "1 Op"],
    "unexpected ':' (properties are `Key: value`)": ["Op<1> Key: 1: 2", "Op<1:2>", "Op: x"],
    "a property must start with a word (Key: value)": ["Op<1> 1: 2", "Op<1> <2>"],
}


def describe(name: str, e: lark.exceptions.UnexpectedInput) -> tuple[str, int]:
    """(message, position) of the grammar's error `e` on `name`."""
    p = lark_parser()
    label = None
    try:
        label = e.match_examples(p.parse, ERROR_EXAMPLES, use_accepts=True)
    except Exception:  # noqa: BLE001 - a label is a nicety; the raw error is still reported
        label = None
    pos = getattr(e, "pos_in_stream", None)
    if pos is None or pos < 0:
        pos = len(name)
    token = getattr(e, "token", None)
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        what = f"unexpected character {name[pos]!r}"
    elif isinstance(e, lark.exceptions.UnexpectedEOF) or token is None or token.type == "$END":
        what, pos = "unexpected end of name", len(name)
    else:
        what = f"unexpected {str(token)!r}"
    msg = f"{label} ({what} at position {pos})" if label else f"{what} at position {pos}"
    return msg, pos

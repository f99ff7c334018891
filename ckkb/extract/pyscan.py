"""Python source read statement by statement for libcst: logical lines (SourceScan), parsing only
the statements an extractor needs (parse_lines), and the line numbers of their nodes (Positions,
start_lines, StatementLines). Callers parse the whole module instead where Fallback is raised."""

from __future__ import annotations

import ast
import bisect
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
    import libcst.metadata as cst_metadata
else:  # libcst loads on first use: importing this module stays cheap
    cst = lazy_module("libcst")
    cst_metadata = lazy_module("libcst.metadata")


class StatementLines:
    """Line numbers without resolving PositionProvider over the whole module (it costs as much as
    the parse).

    Top-level statements get their lines from the generated code of the statements before them; the
    dataclasses (small) get full positions from a one-statement module; dict entries are located in
    their statement's generated code (codegen is exact concatenation, so each entry's text is found
    in order)."""

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

    def resolve_positions(self, stmt: Any) -> None:
        pos = cst_metadata.MetadataWrapper(cst.Module(body=[stmt]), unsafe_skip_copy=True).resolve(
            cst_metadata.PositionProvider
        )
        off = self.base[id(stmt)] - 1
        for node, rng in pos.items():
            self.known[id(node)] = off + rng.start.line

    def locate_elements(self, stmt: Any, assign: Any, d: cst.Dict) -> None:
        """Entry lines: the dict's opening brace, then each entry's generated code in turn (one
        codegen pass)."""
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


# ------------------------------------------------------------- reading only the statements needed

# Python's lexical structure as far as statement boundaries need it: strings (any prefix; the prefix
# does not move a boundary), comments, brackets, `,` and `:`, newlines, backslash continuations,
# whitespace, and runs of everything else. Anything unexpected (an unterminated string) is 'e'.
_SCAN = re.compile(
    r"(?P<s>'''(?:[^\\]|\\[\s\S])*?'''|\"\"\"(?:[^\\]|\\[\s\S])*?\"\"\""
    r"|'(?:[^'\\\n]|\\[\s\S])*'|\"(?:[^\"\\\n]|\\[\s\S])*\")"
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
    """The source is not in a shape the statement-level reader is sure of: read the whole module
    instead."""


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
    returns, form feeds, unterminated strings, unbalanced brackets) and on a source Python does
    not compile (a syntax error in a statement the reader skips must still skip the file, as the
    whole-module parse does), so callers parse the whole module as before.
    """

    def __init__(self, text: str) -> None:
        if "\r" in text or "\f" in text or "\x00" in text:
            raise Fallback("line endings or form feeds")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to report
            try:
                self.tree = ast.parse(text)  # CPython's C parser: a few ms for a kernel list
            except (SyntaxError, ValueError):
                raise Fallback("not valid Python: the whole-module reader reports it") from None
        self.text = text
        ms = list(_SCAN.finditer(text))
        kinds = [str(m.lastgroup) for m in ms]  # every alternative is a named group
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
                    f"unexpected character {text[starts[i]]!r} at line "
                    f"{text.count(chr(10), 0, starts[i]) + 1}"
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
        # the physical line it starts on: only whitespace, comments and continuations (no newline)
        # lie between the NEWLINE (or backslash continuation) before it and its first token
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
        """Tokens first..last with each run of whitespace, comments and line breaks as one space
        (same meaning)."""
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
        """Top-level statements as (index of the first logical line, of the header, one past the
        last)."""
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
    file (its start, as libcst's PositionProvider gives it), computed on first use. An indented
    statement is parsed inside `if 1:` indented exactly as in the file, so continuation lines keep
    the indentation libcst strips and codegen of its nodes is what the whole module would give."""
    a, b = scan.logical[first], scan.logical[stop - 1]
    text = scan.text[a.start : b.end]
    if not text.endswith("\n"):
        text += "\n"
    wrapped = a.indent != ""
    try:
        module = cst.parse_module("if 1:\n" + text if wrapped else text)
    except cst.ParserSyntaxError as e:
        raise Fallback(f"statement at line {a.line} not parsed alone: {e.message}") from None
    head: Any = module.body[0]
    body = head.body.body if wrapped else module.body
    if len(body) != 1:
        raise Fallback(f"lines {a.line}..{b.line} are not one statement")
    return module, body[0], Positions(module, a.line - 1 - (1 if wrapped else 0))


class Positions:
    """Start lines of a parsed module's nodes, plus `offset`, resolved on the first lookup (that
    keeps the module, so the ids stay those of its nodes)."""

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
    """{id(node): line of its start} for every node of `module`, from libcst's PositionProvider
    (ids are of `module`'s own nodes). A codegen pass that counted lines through libcst's internal
    CodegenState was faster, but saved 0.04 CPU-s of a cold build (47 calls on the default tree):
    it went."""
    pos = cst_metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(
        cst_metadata.PositionProvider
    )
    return {id(node): rng.start.line for node, rng in pos.items()}

"""CMake source -> commands (`tokenize`) -> a statement tree (`parse_cmake`): if/elseif/else,
foreach/while and function/macro blocks nest; every other command is a leaf. if() conditions
are read by `conditions.parse_condition` (Lark)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from ckkb.diagnostics import Diagnostic
from ckkb.lang.cmake.conditions import Arg, Cond, ConditionError, parse_condition, plain_words


@dataclass
class Command:
    name: str  # lower case
    args: list[Arg]
    line: int
    raw: str  # text between the parentheses

    @cached_property
    def plain_words(self) -> tuple[str, ...] | None:
        """Its words when no argument names a variable (`Interpreter.command_words`)."""
        return plain_words(self.args)


@dataclass
class Branch:
    cond: Cond | None  # None: else(), or a condition that did not parse (then `text` is set)
    text: str
    line: int
    body: list[Stmt] = field(default_factory=list)


@dataclass
class If:
    line: int
    branches: list[Branch]


@dataclass
class Foreach:
    line: int
    args: list[Arg]
    body: list[Stmt]

    @cached_property
    def plain_words(self) -> tuple[str, ...] | None:
        return plain_words(self.args)


@dataclass
class Function:
    line: int
    name: str
    params: list[str]
    body: list[Stmt]
    macro: bool = False  # macro(): runs in its caller's scope


Stmt = Command | If | Foreach | Function


class CMakeSyntaxError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACKET_OPEN = re.compile(r"\[(=*)\[")
_BLANKS = re.compile(r"[^\S\n]+")  # blanks other than a newline (lines are counted)
_UNQUOTED = re.compile(r"(?:\\.|\$\{[^}]*\}|[^\s()\"#])+", re.DOTALL)


def _comment_end(text: str, i: int) -> int:
    """The index just past the comment that starts at text[i] == '#' (bracket or line comment)."""
    m = _BRACKET_OPEN.match(text, i + 1)
    if m:
        end = text.find("]" + m.group(1) + "]", i)
        return len(text) if end < 0 else end + len(m.group(1)) + 2
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def tokenize(text: str) -> list[Command]:
    """CMake source -> flat list of command invocations (name, args, line, raw argument text)."""
    out: list[Command] = []
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch.isspace():
            i += 1
        elif ch == "#":
            end = _comment_end(text, i)
            line += text.count("\n", i, end)
            i = end
        else:
            m = _IDENT.match(text, i)
            if not m:
                raise CMakeSyntaxError(f"unexpected character {ch!r}", line)
            name, start_line = m.group(0), line
            i = m.end()
            while i < n and text[i] in " \t":
                i += 1
            if i >= n or text[i] != "(":
                raise CMakeSyntaxError(f"expected '(' after {name}", line)
            raw_start = i + 1
            args, i, line = _arguments(text, i + 1, line, name, start_line)
            out.append(Command(name.lower(), args, start_line, text[raw_start : i - 1]))
    return out


def _arguments(
    text: str, i: int, line: int, name: str, start_line: int
) -> tuple[list[Arg], int, int]:
    """The arguments of the command whose '(' ends just before text[i]: (args, index past the
    closing ')', line there)."""
    n, depth = len(text), 1
    args: list[Arg] = []
    while True:
        if i >= n:
            raise CMakeSyntaxError(f"unterminated {name}( (opened here)", start_line)
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i = _BLANKS.match(text, i).end()  # type: ignore[union-attr]  # c matched it
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
            if depth == 0:
                return args, i, line
        elif c == "#":
            end = _comment_end(text, i)
            line += text.count("\n", i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise CMakeSyntaxError("unterminated quoted argument", line)
            args.append(Arg(text[i + 1 : j], True))
            line += text.count("\n", i, j)
            i = j + 1
        elif m := _BRACKET_OPEN.match(text, i):
            end = text.find("]" + m.group(1) + "]", i)
            if end < 0:
                raise CMakeSyntaxError("unterminated bracket argument", line)
            args.append(Arg(text[i + len(m.group(0)) : end], True))
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
        else:  # unquoted: up to a blank or ()"#; `\\x` escapes x, `${...}` runs to its `}`
            j = _UNQUOTED.match(text, i).end()  # type: ignore[union-attr]  # text[i] is in it
            args.append(Arg(text[i:j], False))
            i = j


_OPENERS = {
    "if": "endif",
    "foreach": "endforeach",
    "function": "endfunction",
    "macro": "endmacro",
    "while": "endwhile",
}
_CLOSERS = frozenset(
    {"endif", "endforeach", "endfunction", "endmacro", "endwhile", "else", "elseif"}
)


def parse_cmake(text: str) -> tuple[list[Stmt], list[Diagnostic]]:
    """CMake source -> statement tree; a condition that does not parse becomes a diagnostic (its
    branch is never taken). Raises CMakeSyntaxError for unbalanced blocks."""
    return _Parser(tokenize(text)).parse()


class _Parser:
    def __init__(self, cmds: list[Command]) -> None:
        self.cmds = cmds
        self.pos = 0
        self.diags: list[Diagnostic] = []

    def parse(self) -> tuple[list[Stmt], list[Diagnostic]]:
        stmts, _ = self.block(set())
        return stmts, self.diags

    def cond_of(self, cmd: Command) -> Cond | None:
        try:
            return parse_condition(cmd.raw)
        except ConditionError as e:
            self.diags.append(Diagnostic("", cmd.line + e.line - 1, f"{cmd.name}(): {e}"))
            return None

    def block(self, end: set[str]) -> tuple[list[Stmt], Command | None]:
        """Statements up to the first command named in `end` (returned too; None at the end)."""
        body: list[Stmt] = []
        while self.pos < len(self.cmds):
            c = self.cmds[self.pos]
            self.pos += 1
            if c.name in end:
                return body, c
            if c.name == "if":
                body.append(self.if_block(c))
            elif c.name in _OPENERS:
                inner, closer = self.block({_OPENERS[c.name]})
                if closer is None:
                    raise CMakeSyntaxError(f"{c.name}() without {_OPENERS[c.name]}()", c.line)
                if c.name == "foreach":
                    body.append(Foreach(c.line, c.args, inner))
                elif c.name == "while":
                    body.append(Command("while", c.args, c.line, c.raw))
                else:
                    names = [a.value for a in c.args]
                    name, params = (names[0], names[1:]) if names else ("", [])
                    body.append(Function(c.line, name, params, inner, c.name == "macro"))
            elif c.name in _CLOSERS:
                raise CMakeSyntaxError(f"{c.name}() without a matching opener", c.line)
            else:
                body.append(c)
        return body, None

    def if_block(self, c: Command) -> If:
        br = Branch(self.cond_of(c), " ".join(c.raw.split()), c.line)
        node = If(c.line, [br])
        while True:
            br.body, closer = self.block({"elseif", "else", "endif"})
            if closer is None:
                raise CMakeSyntaxError("if() without endif()", c.line)
            if closer.name == "endif":
                return node
            if closer.name == "elseif":
                br = Branch(self.cond_of(closer), " ".join(closer.raw.split()), closer.line)
            else:
                br = Branch(None, "", closer.line)
            node.branches.append(br)


def walk(stmts: list[Stmt]) -> Iterator[Stmt | Branch]:
    """Every statement and if-branch under `stmts`, depth first, in source order."""
    for s in stmts:
        yield s
        if isinstance(s, If):
            for br in s.branches:
                yield br
                yield from walk(br.body)
        elif isinstance(s, (Foreach, Function)):
            yield from walk(s.body)

"""Stage `ck.cmake`: CK's build-time rules that keep or drop instance sources per target arch.

Reads `library/src/tensor_operation_instance/gpu/CMakeLists.txt` (the `add_instance_library`
function and the directory loop), every `gpu/<dir>/CMakeLists.txt` (the `# ONLY XDL_KERNELS`
style markers the directory loop matches against), and evaluates them with a small CMake
interpreter, one arch at a time. Nothing is hand-copied from CK: the rules are whatever the parsed
CMake says, run statement by statement (`set`, `if/elseif/else`, `foreach`, `break`,
`get_filename_component(... NAME)`, `list(REMOVE_ITEM|APPEND|FILTER ...)`, `file(READ)`,
`add_subdirectory`); other commands are no-ops. `if()` conditions are parsed with the Lark grammar
`grammars/cmake_condition.lark`.

Default-build environment, per arch A (assumptions, stated once here): a plain `cmake` of the CK
root with `SUPPORTED_GPU_TARGETS` = A (one target per build, so `INST_TARGETS` = A) and no -D
options. The variables gpu/ sees are *computed* by running the top-level CMakeLists.txt with the
same interpreter (its `option()` defaults, `set()`s and `add_definitions(-D...)`, the latter kept
as `build_defines` rows). For this CK that means: `DTYPES` and `MIOPEN_REQ_LIBS_ONLY` undefined;
`CK_USE_FP8_ON_UNSUPPORTED_ARCH` and `BUILD_MHA_LIB` OFF (`option(... OFF)`); and `DL_KERNELS` /
`DPP_KERNELS` ON, because CK's top level sets them unless `DISABLE_DL_KERNELS` /
`DISABLE_DPP_KERNELS` is given. When the root CMakeLists.txt is absent (small trees), `DEFAULT_ENV`
is used as is (DL/DPP undefined). `hip_VERSION_FLAT` is taken as a current ROCm (600300000):
it only gates a compression flag.
add_instance_library runs once per arch and class of sources it cannot tell apart (`_SourceFlow`), not
once per source; the classes are proven from the parsed function, and it falls back to one run per source.
Whether a source file is listed by its directory's CMakeLists.txt is not checked: every `.cpp`
(and CMake `.in` template) under `gpu/` is evaluated by its file name, as CK's rules do.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ckkb.archs import ARCHS
from ckkb.diagnostics import Diagnostic
from ckkb.extract.cpp import is_binary
from ckkb.kb.schema.ck_registrations import BuildDefineRow, BuildRuleRow, FileBuildRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult
from ckkb.sources import CK_INSTANCE_DIR

GPU_CMAKE = f"{CK_INSTANCE_DIR}/CMakeLists.txt"
ROOT_CMAKE = "CMakeLists.txt"
SOURCE_SUFFIXES = (".cpp", ".in")  # .in: CMake templates configured into sources

DEFAULT_ENV: dict[str, str] = {
    "CK_USE_FP8_ON_UNSUPPORTED_ARCH": "OFF",
    "BUILD_MHA_LIB": "OFF",
    "CMAKE_BUILD_TYPE": "Release",
    "hip_VERSION_FLAT": "600300000",
}


# ---------------------------------------------------------------- condition AST


@dataclass(frozen=True)
class Arg:
    value: str  # text without quotes (escapes kept as written)
    quoted: bool = False

    def source(self) -> str:
        return f'"{self.value}"' if self.quoted else self.value


@dataclass(frozen=True)
class Truth:
    arg: Arg


@dataclass(frozen=True)
class Unary:
    op: str
    arg: Arg


@dataclass(frozen=True)
class Binary:
    op: str
    left: Arg
    right: Arg


@dataclass(frozen=True)
class Not:
    expr: Any


@dataclass(frozen=True)
class And:
    left: Any
    right: Any


@dataclass(frozen=True)
class Or:
    left: Any
    right: Any


Cond = Truth | Unary | Binary | Not | And | Or


@lru_cache(maxsize=1)
def _condition_reader() -> tuple[Any, Any, type[Exception]]:
    """(Lark parser of grammars/cmake_condition.lark, parse tree -> AST transformer, Lark's error
    class). Lark is imported here, on first use: `ckkb build` starts its workers sooner without it."""
    from lark import Lark, Token, Transformer, v_args
    from lark.exceptions import LarkError

    class ToAst(Transformer):
        def quoted(self, items):
            return Arg(str(items[0])[1:-1], True)

        def unquoted(self, items):
            return Arg(str(items[0]), False)

        @v_args(inline=True)
        def truth(self, a):
            return Truth(a)

        @v_args(inline=True)
        def unary(self, op: Token, a):
            return Unary(str(op), a)

        @v_args(inline=True)
        def binary(self, a, op: Token, b):
            return Binary(str(op), a, b)

        @v_args(inline=True)
        def not_(self, e):
            return Not(e)

        @v_args(inline=True)
        def and_(self, a, b):
            return And(a, b)

        @v_args(inline=True)
        def or_(self, a, b):
            return Or(a, b)

    grammar = resources.files("ckkb.grammars").joinpath("cmake_condition.lark").read_text()
    parser = Lark(
        grammar, parser="lalr", propagate_positions=True, cache=True, maybe_placeholders=False
    )
    return parser, ToAst(), LarkError


class ConditionError(ValueError):
    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


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
    return to_ast.transform(tree)


_PREC = {Or: 1, And: 2, Not: 3}


def condition_text(c: Cond, parent: int = 0) -> str:
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


# ---------------------------------------------------------------- condition evaluation

_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_VAR = re.compile(r"\$\{([^}]*)\}")


_EXPANDED: dict[str, tuple[tuple[tuple[str, str | None], ...], str]] = {}


def expand(text: str, env: dict[str, str]) -> str:
    """`${VAR}` references (innermost first) -> values; undefined -> ''.

    Memoised per text: an expansion is a pure function of the text and of the values of the variables it
    looked up, so the last result for a text is reused while each of those variables still has the value
    (or absence) it had then. This saves re-substituting long values such as a file read with file(READ)."""
    if "${" not in text:
        return text
    hit = _EXPANDED.get(text)
    if hit is not None:
        reads, out = hit
        for k, v in reads:
            if env.get(k) != v:
                break
        else:
            return out
    out, reads = _expand_recording(text, env)
    if len(_EXPANDED) >= 8192:
        _EXPANDED.clear()
    _EXPANDED[text] = (reads, out)
    return out


def _expand_recording(
    text: str, env: dict[str, str]
) -> tuple[str, tuple[tuple[str, str | None], ...]]:
    """expand() without the memo: the result and every (variable, value or None) it looked up."""
    reads: list[tuple[str, str | None]] = []

    def look(m: re.Match[str]) -> str:
        v = env.get(m.group(1))
        reads.append((m.group(1), v))
        return "" if v is None else v

    prev = None
    while prev != text and "${" in text:
        prev = text
        text = _VAR.sub(look, text)
    return text, tuple(reads)


def _is_false_const(s: str) -> bool:
    u = s.upper()
    return u in _FALSE or u.endswith("-NOTFOUND")


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _value(a: Arg, env: dict[str, str]) -> str:
    """Operand of a binary test: an unquoted name of a defined variable means its value."""
    if "${" not in a.value:
        return env[a.value] if not a.quoted and a.value in env else a.value
    s = expand(a.value, env)
    if not a.quoted and "${" not in a.value and s in env:
        return env[s]
    return s


def _version(s: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.]", s) if p != "")


def evaluate(c: Cond, env: dict[str, str]) -> bool:
    """CMake's if() semantics (policy CMP0054 NEW: quoted strings are never variable names)."""
    return compiled(c)(env)


@lru_cache(maxsize=4096)
def compiled(c: Cond):
    """The condition as a closure env -> bool (built once per condition; same semantics as
    _evaluate, which it defers to for leaves)."""
    if isinstance(c, And):
        return _all_of([compiled(x) for x in _chain(c, And)])
    if isinstance(c, Or):
        return _any_of([compiled(x) for x in _chain(c, Or)])
    if isinstance(c, Not):
        a = compiled(c.expr)
        return lambda env: not a(env)
    if isinstance(c, Binary) and c.op == "MATCHES" and c.right.quoted and "${" not in c.right.value:
        try:
            rx = re.compile(c.right.value)
        except re.error:
            return lambda env: False
        return _matcher(rx, c.left)
    return lambda env: _evaluate(c, env)


def _chain(c: Cond, op: type) -> list[Cond]:
    """The operands of a run of one operator, left to right: `a OR b OR c` parses as Or(Or(a, b), c)."""
    if not isinstance(c, op):
        return [c]
    return _chain(c.left, op) + _chain(c.right, op)


def _all_of(tests: list) -> Callable[[dict[str, str]], bool]:
    """AND of tests, short-circuit, in one frame (CK's conditions chain up to a dozen operands)."""

    def test(env: dict[str, str]) -> bool:
        for t in tests:
            if not t(env):
                return False
        return True

    return test


def _any_of(tests: list) -> Callable[[dict[str, str]], bool]:
    """OR of tests, short-circuit, in one frame."""

    def test(env: dict[str, str]) -> bool:
        for t in tests:
            if t(env):
                return True
        return False

    return test


_MATCH_MEMOS: list[
    dict[str, bool]
] = []  # one per compiled `x MATCHES "<constant>"`; see forget_matches()


def _matcher(rx: re.Pattern[str], left: Arg):
    """env -> whether `left` MATCHES rx, memoised per tested text: the directory loop tests the same
    CMakeLists text (and add_instance_library the same file name) once per arch."""
    memo: dict[str, bool] = {}
    _MATCH_MEMOS.append(memo)
    text = left.value
    reference = "${" in text  # then _value(left, env) is expand(text, env): called directly

    def test(env: dict[str, str]) -> bool:
        s = expand(text, env) if reference else _value(left, env)
        hit = memo.get(s)
        if hit is None:
            hit = memo[s] = rx.search(s) is not None
        return hit

    return test


def forget_matches() -> None:
    """Drop the MATCHES memos (they hold whole CMakeLists texts); evaluate_tree starts and ends with this."""
    for memo in _MATCH_MEMOS:
        memo.clear()


def _evaluate(c: Cond, env: dict[str, str]) -> bool:
    if isinstance(c, (And, Or, Not)):
        return compiled(c)(env)
    if isinstance(c, Truth):
        s = expand(c.arg.value, env)
        u = s.upper()
        if u in _TRUE or (_num(s) is not None and _num(s) != 0):
            return True
        if _is_false_const(s) or (_num(s) is not None):
            return False
        if c.arg.quoted:
            return False
        return s in env and not _is_false_const(env[s])
    if isinstance(c, Unary):
        s = expand(c.arg.value, env)
        if c.op == "DEFINED":
            if s.startswith("ENV{") and s.endswith("}"):
                return False
            return s in env
        if c.op in ("EXISTS", "IS_DIRECTORY", "IS_ABSOLUTE", "IS_READABLE"):
            return s.startswith("/")
        return False
    if isinstance(c, Binary):
        lhs = _value(c.left, env)
        rhs = _value(c.right, env) if c.op != "MATCHES" else expand(c.right.value, env)
        op = c.op
        if op == "MATCHES":
            try:
                return re.search(rhs, lhs) is not None
            except re.error:
                return False
        if op in ("STREQUAL", "PATH_EQUAL"):
            return lhs == rhs
        if op == "IN_LIST":
            return lhs in env.get(expand(c.right.value, env), "").split(";")
        if op.startswith("VERSION_"):
            a, b = _version(lhs), _version(rhs)
            return {
                "VERSION_LESS": a < b,
                "VERSION_GREATER": a > b,
                "VERSION_EQUAL": a == b,
                "VERSION_LESS_EQUAL": a <= b,
                "VERSION_GREATER_EQUAL": a >= b,
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
    raise TypeError(f"not a condition: {c!r}")


def variables(c: Cond) -> set[str]:
    """Names an unquoted operand may refer to (for 'which variable decided this')."""
    if isinstance(c, (And, Or)):
        return variables(c.left) | variables(c.right)
    if isinstance(c, Not):
        return variables(c.expr)
    args = [c.arg] if isinstance(c, (Truth, Unary)) else [c.left, c.right]
    out = set()
    for a in args:
        out.update(_VAR.findall(a.value))
        if not a.quoted and "${" not in a.value:
            out.add(a.value)
    return out


# ---------------------------------------------------------------- CMake statements


@dataclass
class Command:
    name: str  # lower case
    args: list[Arg]
    line: int
    raw: str  # text between the parentheses


@dataclass
class Branch:
    cond: Cond | None  # None: else()
    text: str
    line: int
    body: list[Any] = field(default_factory=list)


@dataclass
class If:
    line: int
    branches: list[Branch]


@dataclass
class Foreach:
    line: int
    args: list[Arg]
    body: list[Any]


@dataclass
class Function:
    line: int
    name: str
    params: list[str]
    body: list[Any]


class CMakeSyntaxError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
            m = re.match(r"#\[(=*)\[", text[i:])
            if m:
                end = text.find("]" + m.group(1) + "]", i)
                end = n if end < 0 else end + len(m.group(1)) + 2
                line += text.count("\n", i, end)
                i = end
            else:
                j = text.find("\n", i)
                i = n if j < 0 else j
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
            i += 1
            raw_start, depth, args = i, 1, []
            while True:
                if i >= n:
                    raise CMakeSyntaxError(f"unterminated {name}( (opened here)", start_line)
                c = text[i]
                if c == "\n":
                    line += 1
                    i += 1
                elif c.isspace():
                    i += 1
                elif c == "(":
                    depth += 1
                    i += 1
                elif c == ")":
                    depth -= 1
                    i += 1
                    if depth == 0:
                        break
                elif c == "#":
                    m2 = re.match(r"#\[(=*)\[", text[i:])
                    if m2:
                        end = text.find("]" + m2.group(1) + "]", i)
                        end = n if end < 0 else end + len(m2.group(1)) + 2
                    else:
                        end = text.find("\n", i)
                        end = n if end < 0 else end
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
                else:
                    m3 = re.match(r"\[(=*)\[", text[i:])
                    if m3:
                        end = text.find("]" + m3.group(1) + "]", i)
                        if end < 0:
                            raise CMakeSyntaxError("unterminated bracket argument", line)
                        args.append(Arg(text[i + len(m3.group(0)) : end], True))
                        line += text.count("\n", i, end)
                        i = end + len(m3.group(1)) + 2
                        continue
                    j = i
                    while j < n and not text[j].isspace() and text[j] not in '()"#':
                        if text[j] == "\\":
                            j += 1
                        elif text.startswith("${", j):
                            k = text.find("}", j)
                            j = k if k > 0 else j
                        j += 1
                    args.append(Arg(text[i:j], False))
                    i = j
            out.append(Command(name.lower(), args, start_line, text[raw_start : i - 1]))
    return out


_OPENERS = {
    "if": "endif",
    "foreach": "endforeach",
    "function": "endfunction",
    "macro": "endmacro",
    "while": "endwhile",
}


def parse_cmake(text: str) -> tuple[list[Any], list[Diagnostic]]:
    """CMake source -> statement tree; condition parse errors become diagnostics (branch never taken)."""
    cmds = tokenize(text)
    diags: list[Diagnostic] = []
    pos = 0

    def cond_of(cmd: Command) -> Cond | None:
        try:
            return parse_condition(cmd.raw)
        except ConditionError as e:
            diags.append(Diagnostic("", cmd.line + e.line - 1, f"{cmd.name}(): {e}"))
            return None

    def block(end: set[str]) -> tuple[list[Any], Command | None]:
        nonlocal pos
        body: list[Any] = []
        while pos < len(cmds):
            c = cmds[pos]
            pos += 1
            if c.name in end:
                return body, c
            if c.name == "if":
                br = Branch(cond_of(c), " ".join(c.raw.split()), c.line)
                node = If(c.line, [br])
                while True:
                    br.body, closer = block({"elseif", "else", "endif"})
                    if closer is None:
                        raise CMakeSyntaxError("if() without endif()", c.line)
                    if closer.name == "endif":
                        break
                    cond = cond_of(closer) if closer.name == "elseif" else None
                    br = Branch(
                        cond,
                        " ".join(closer.raw.split()) if closer.name == "elseif" else "",
                        closer.line,
                    )
                    if closer.name == "elseif" and cond is None:
                        br.text = " ".join(closer.raw.split())
                    node.branches.append(br)
                body.append(node)
            elif c.name in ("foreach", "while"):
                inner, closer = block({_OPENERS[c.name]})
                if closer is None:
                    raise CMakeSyntaxError(f"{c.name}() without {_OPENERS[c.name]}()", c.line)
                body.append(
                    Foreach(c.line, c.args, inner)
                    if c.name == "foreach"
                    else Command("while", c.args, c.line, c.raw)
                )
            elif c.name in ("function", "macro"):
                inner, closer = block({_OPENERS[c.name]})
                if closer is None:
                    raise CMakeSyntaxError(f"{c.name}() without {_OPENERS[c.name]}()", c.line)
                names = [a.value for a in c.args]
                body.append(Function(c.line, names[0] if names else "", names[1:], inner))
            elif c.name in (
                "endif",
                "endforeach",
                "endfunction",
                "endmacro",
                "endwhile",
                "else",
                "elseif",
            ):
                raise CMakeSyntaxError(f"{c.name}() without a matching opener", c.line)
            else:
                body.append(c)
        return body, None

    stmts, _ = block(set())
    return stmts, diags


# ---------------------------------------------------------------- interpreter


def filename_component(path: str, mode: str) -> str | None:
    """get_filename_component(<var> path <mode>); None for a mode the interpreter does not know."""
    if mode == "NAME":
        return path.rsplit("/", 1)[-1]
    if mode in ("DIRECTORY", "PATH"):
        return path.rsplit("/", 1)[0] if "/" in path else ""
    if mode == "NAME_WE":
        return path.rsplit("/", 1)[-1].split(".", 1)[0]
    return None


class _Break(Exception):
    pass


class Interpreter:
    """Runs parsed CMake statements over string variables; records which rule removed what."""

    def __init__(self, env: dict[str, str], file: str, read_file=None) -> None:
        self.env = dict(env)
        self.file = file
        self.read_file = read_file or (lambda p: "")
        self.stack: list[Branch] = []  # enclosing taken if-branches, innermost last
        self.removed: dict[
            tuple[str, str], Branch | None
        ] = {}  # (list var, item) -> branch that removed it
        self.origin: dict[str, Branch | None] = {}  # var -> innermost branch of its last set()
        self.subdirs: list[str] = []
        self.defines: dict[str, tuple[str, int]] = {}  # -DNAME[=VALUE] -> (value, line)
        self.functions: dict[str, Function] = {}

    def run(self, stmts: list[Any]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: Any) -> None:
        if isinstance(s, If):
            for br in s.branches:
                if br.cond is None and br.text:  # unparsable condition: never taken
                    continue
                if br.cond is not None:
                    fn = br.__dict__.get("_fn")
                    if fn is None:  # compiled once per branch (hashing the AST each time is slow)
                        fn = br.__dict__["_fn"] = compiled(br.cond)
                if br.cond is None or fn(self.env):
                    self.stack.append(br)
                    try:
                        self.run(br.body)
                    finally:
                        self.stack.pop()
                    return
        elif isinstance(s, Foreach):
            self.foreach(s)
        elif isinstance(s, Function):
            self.functions[s.name.lower()] = s
        elif isinstance(s, Command):
            self.command(s)

    def words(self, args: list[Arg]) -> list[str]:
        out: list[str] = []
        for a in args:
            v = expand(a.value, self.env)
            if a.quoted:
                out.append(v)
            elif v:
                out.extend(x for x in v.split(";") if x != "")
        return out

    def words_of(self, node: Command | Foreach) -> list[str] | tuple[str, ...]:
        """words(node.args), kept on the node when no argument has a `${`: they are then the same in every
        run (most commands are such, e.g. list(REMOVE_ITEM INST_TARGETS gfx900 ...)). Read-only."""
        static = node.__dict__.get("_words")
        if static is None:
            static = node.__dict__["_words"] = (
                False if any("${" in a.value for a in node.args) else tuple(self.words(node.args))
            )
        return self.words(node.args) if static is False else static

    def foreach(self, s: Foreach) -> None:
        words = self.words_of(s)
        if not words:
            return
        var, rest = words[0], words[1:]
        items: list[str] = []
        if rest and rest[0] == "IN":
            mode = None
            for w in rest[1:]:
                if w in ("LISTS", "ITEMS"):
                    mode = w
                elif mode == "LISTS":
                    items.extend(x for x in self.env.get(w, "").split(";") if x)
                else:
                    items.append(w)
        elif len(rest) >= 2 and rest[0] == "RANGE":
            items = [str(i) for i in range(int(rest[1]) + 1)] if rest[1].isdigit() else []
        else:
            items = rest
        for it in items:
            self.env[var] = it
            try:
                self.run(s.body)
            except _Break:
                break

    def here(self) -> Branch | None:
        return self.stack[-1] if self.stack else None

    def command(self, c: Command) -> None:
        name = c.name
        if (
            name not in _INTERPRETED and name not in self.functions
        ):  # message() etc.: no-ops, skipped at once
            return
        if name == "break":
            raise _Break()
        if name == "set":
            w = self.words_of(c)
            if not w:
                return
            var, vals = w[0], [x for x in w[1:] if x not in ("PARENT_SCOPE",)]
            if "CACHE" in vals:
                if var in self.env and "FORCE" not in vals:
                    return
                vals = vals[: vals.index("CACHE")]
            if vals:
                self.env[var] = ";".join(vals)
            else:
                self.env.pop(var, None)
            self.origin[var] = self.here()
        elif name == "option":
            w = self.words_of(c)
            if w and w[0] not in self.env:
                self.env[w[0]] = w[2] if len(w) >= 3 else "OFF"
        elif name == "add_definitions" or name == "add_compile_definitions":
            for w in self.words_of(c):
                d = (
                    w[2:]
                    if w.startswith("-D")
                    else (w if name == "add_compile_definitions" else "")
                )
                if d:
                    k, _, v = d.partition("=")
                    self.defines[k] = (v if _ else "1", c.line)
        elif name == "unset":
            w = self.words_of(c)
            if w:
                self.env.pop(w[0], None)
        elif name == "get_filename_component":
            w = self.words_of(c)
            part = filename_component(w[1], w[2]) if len(w) >= 3 else None
            if part is not None:
                self.env[w[0]] = part
        elif name == "list":
            self.list_cmd(c)
        elif name == "file":
            w = self.words_of(c)
            if len(w) >= 3 and w[0] == "READ":
                self.env[w[2]] = self.read_file(w[1])
        elif name == "add_subdirectory":
            w = self.words_of(c)
            if w:
                self.subdirs.append(w[0])
        elif name in self.functions:
            self.call(self.functions[name], self.words_of(c))

    def call(self, f: Function, words: list[str]) -> None:
        saved = self.env
        self.env = dict(saved)
        for i, p in enumerate(f.params):
            self.env[p] = words[i] if i < len(words) else ""
        self.env["ARGN"] = ";".join(words[len(f.params) :])
        try:
            self.run(f.body)
        finally:
            self.env = saved

    def list_cmd(self, c: Command) -> None:
        w = self.words_of(c)
        if len(w) < 2:
            return
        op, var = w[0], w[1]
        cur = [x for x in self.env.get(var, "").split(";") if x]
        if op == "REMOVE_ITEM":
            drop = set(w[2:])
            for x in cur:
                if x in drop:
                    self.removed.setdefault((var, x), self.here())
            cur = [x for x in cur if x not in drop]
        elif op == "APPEND":
            cur += w[2:]
        elif op == "FILTER" and len(w) >= 5 and w[3] == "REGEX":
            try:
                rx = re.compile(w[4])
            except re.error:
                return
            keep = (
                [x for x in cur if rx.search(x)]
                if w[2] == "INCLUDE"
                else [x for x in cur if not rx.search(x)]
            )
            for x in cur:
                if x not in keep:
                    self.removed.setdefault((var, x), self.here())
            cur = keep
        elif op == "REMOVE_DUPLICATES":
            cur = list(dict.fromkeys(cur))
        else:
            return
        if cur:
            self.env[var] = ";".join(cur)
        else:
            self.env[var] = ""


# ---------------------------------------------------------------- sources add_instance_library cannot tell apart
#
# Running add_instance_library once per source file and arch is most of this stage's cost, yet the function
# looks at a source only through a few tests such as `source_name MATCHES "_xdl"`. `_SourceFlow` checks that
# statically: which variables carry the source (or a part of it, e.g. its file name), and that nothing but
# such tests ("probes": `var MATCHES "<constant>"`, `if(var)`) and self-removal (`list(REMOVE_ITEM ARGN
# ${source})`) ever looks at them, in the statements reachable under one arch's variables. Then two sources
# whose probes all agree take the same path through the body (by induction over the statements run) and get
# the same verdict, so the function runs once per class of sources. Anything the check does not model raises
# _Unsupported, and every source is then run on its own.

Kind = tuple[
    str, ...
]  # how a value derives from the source: () itself, ("NAME",) its file name, ...
_OPAQUE: Kind = (
    "?",
)  # source text mixed with other text: may be stored and passed on, never looked at
_KEYWORDS = frozenset(
    {
        "PARENT_SCOPE",
        "CACHE",
        "FORCE",
        "IN",
        "LISTS",
        "ITEMS",
        "RANGE",
        "REGEX",
        "INCLUDE",
        "EXCLUDE",
        "READ",
        "APPEND",
        "REMOVE_ITEM",
    }
)
_UNPLAIN = re.compile(r'[;${}\\"]')
_STRAY_DOLLAR = re.compile(
    r"\$(?:$|[{;./])"
)  # a `$` that a cut (list item, file name) could put before `{`
_INTERPRETED = frozenset(
    {
        "set",
        "option",
        "add_definitions",
        "add_compile_definitions",
        "unset",
        "get_filename_component",
        "list",
        "file",
        "add_subdirectory",
        "break",
    }
)


class _Unsupported(Exception):
    """The body uses the source in a way _SourceFlow does not model."""


def _ref(a: Arg) -> str | None:
    """NAME when the argument is exactly `${NAME}` (quoted or not)."""
    m = _VAR.fullmatch(a.value)
    return m.group(1) if m and "$" not in m.group(1) and "{" not in m.group(1) else None


def _arg_refs(a: Arg) -> set[str]:
    """Variables that expanding `a` reads; _Unsupported when a name could be computed at run time."""
    names = set(_VAR.findall(a.value))
    if any("$" in n or "{" in n for n in names) or _STRAY_DOLLAR.search(_VAR.sub("{", a.value)):
        raise _Unsupported(f"computed variable reference in {a.value!r}")
    return names


def _operand_refs(a: Arg, looked_up: bool) -> set[str]:
    """Variables an operand reads; `looked_up`: its expanded text is then used as a variable name."""
    refs = _arg_refs(a)
    if not looked_up:
        return refs
    if refs:
        raise _Unsupported(f"computed variable name {a.value!r}")
    return {a.value}


def _bare(a: Arg) -> bool:
    return not a.quoted and "${" not in a.value


def _leaf_refs(c: Cond) -> set[str]:
    """Variables one test reads (mirrors _evaluate / _value)."""
    if isinstance(c, Truth):
        return _operand_refs(c.arg, not c.arg.quoted)
    if isinstance(c, Unary):
        return _operand_refs(c.arg, c.op == "DEFINED")
    assert isinstance(c, Binary)
    left = _operand_refs(c.left, _bare(c.left))
    if c.op == "MATCHES":
        return left | _arg_refs(c.right)
    return left | _operand_refs(c.right, c.op == "IN_LIST" or _bare(c.right))


def _leaves(c: Cond):
    if isinstance(c, (And, Or)):
        yield from _leaves(c.left)
        yield from _leaves(c.right)
    elif isinstance(c, Not):
        yield from _leaves(c.expr)
    else:
        yield c


def _probe_var(c: Cond) -> str | None:
    """The variable a probe tests: `v MATCHES "<constant>"`, `"${v}" MATCHES ...` or `if(v)`."""
    if isinstance(c, Truth) and _bare(c.arg):
        return c.arg.value
    if isinstance(c, Binary) and c.op == "MATCHES" and "${" not in c.right.value:
        return c.left.value if _bare(c.left) else _ref(c.left)
    return None


def _derive(source: str, kind: Kind) -> str | None:
    for mode in kind:
        source = filename_component(source, mode)
        if source is None:
            return None
    return source


Probe = tuple[Cond, str, Kind]


class _SourceFlow:
    """Which variables of a function body carry its source argument `source_var`, and how (see above)."""

    def __init__(self, body: list[Any], source_var: str, functions: set[str]) -> None:
        self.functions = functions
        self.kinds: dict[str, Kind] = {source_var: ()}
        self.mixed: set[str] = (
            set()
        )  # variables that may also hold values not derived from the source
        self.written: set[str] = set()
        changed = True
        while changed:
            changed = False
            for s in _walk(body):
                if isinstance(s, Function):
                    raise _Unsupported("function defined inside the body")
                for var, kind in self._writes(s):
                    changed |= self._assign(var, kind)

    def _assign(self, var: str, kind: Kind | None) -> bool:
        self.written.add(var)
        if kind is None:
            new_mixed = var not in self.mixed
            self.mixed.add(var)
            return new_mixed
        old = self.kinds.get(var)
        new = kind if old in (None, kind) else _OPAQUE
        self.kinds[var] = new
        return new != old

    def _tainted(self, args: list[Arg]) -> bool:
        return any(_arg_refs(a) & self.kinds.keys() for a in args)

    def _copy(self, var: str, src: str, derive: Kind = ()) -> list[tuple[str, Kind | None]]:
        """`var` receives the value of `src` (optionally a part of it)."""
        kind = self.kinds[src]
        out: list[tuple[str, Kind | None]] = [(var, _OPAQUE if kind == _OPAQUE else kind + derive)]
        return out + [(var, None)] if src in self.mixed else out

    def _writes(self, s: Any) -> list[tuple[str, Kind | None]]:
        """(variable, kind or None for a value not from the source) for each assignment `s` can make."""
        if isinstance(s, Foreach):
            return self._foreach_writes(s.args)
        if not isinstance(s, Command):
            return []
        if s.name in self.functions:
            raise _Unsupported(f"call of {s.name}() inside the body")
        a = s.args
        if s.name not in _INTERPRETED or not a:
            return []
        if s.name == "file":
            if _arg_refs(a[0]) or a[0].value == "READ":
                raise _Unsupported("file() in the body")
            return []
        if s.name in ("add_definitions", "add_compile_definitions", "add_subdirectory", "break"):
            return []
        if _arg_refs(a[0]):
            raise _Unsupported(f"{s.name}() with a computed first argument")
        if s.name == "list":
            if len(a) < 2 or _arg_refs(a[1]):
                raise _Unsupported("list() with a computed list name")
            self.written.add(a[1].value)
            if a[0].value != "APPEND":
                return (
                    [(a[1].value, None)]
                    if a[0].value not in ("REMOVE_ITEM", "FILTER", "REMOVE_DUPLICATES")
                    else []
                )
            taint = self._tainted(a[2:]) or a[1].value in self.kinds
            return [(a[1].value, _OPAQUE if taint else None)]
        var = a[0].value
        if s.name == "get_filename_component":
            if len(a) < 3 or _arg_refs(a[2]) or filename_component("x", a[2].value) is None:
                raise _Unsupported("get_filename_component() mode not modelled")
            src = _ref(a[1])
            if src in self.kinds:
                return self._copy(var, src, (a[2].value,))
            return [(var, _OPAQUE if self._tainted(a[1:]) else None)]
        values = [x for x in a[1:] if x.value != "PARENT_SCOPE" or x.quoted]
        if s.name == "set" and len(values) == 1 and _ref(values[0]) in self.kinds:
            return self._copy(var, _ref(values[0]))
        return [(var, _OPAQUE if self._tainted(a[1:]) else None)]

    def _foreach_writes(self, args: list[Arg]) -> list[tuple[str, Kind | None]]:
        if not args or _arg_refs(args[0]):
            raise _Unsupported("foreach() with a computed loop variable")
        var, rest = args[0].value, args[1:]
        if not rest or rest[0].value != "IN" or _arg_refs(rest[0]):
            return [(var, _OPAQUE if self._tainted(rest) else None)]
        lists: list[str] = []
        mode, items = None, []
        for x in rest[1:]:
            if x.value in ("LISTS", "ITEMS") and not _arg_refs(x):
                mode = x.value
            elif mode == "LISTS":
                if _arg_refs(x):
                    raise _Unsupported("foreach(IN LISTS) with a computed list name")
                lists.append(x.value)
            else:
                items.append(x)
        tainted = [v for v in lists if v in self.kinds]
        if len(tainted) == 1 and len(lists) == 1 and not items:
            return self._copy(var, tainted[0])
        return [(var, _OPAQUE if tainted or self._tainted(items) else None)]

    # -- what the reachable statements look at

    def probes(self, body: list[Any], env: dict[str, str]) -> tuple[Probe, ...]:
        """Every probe reachable when the body starts with `env` (conditions on variables the body never
        writes are decided by `env`); _Unsupported for any other look at the source."""
        out: dict[Probe, None] = {}
        self._check(body, env, out)
        return tuple(out)

    def _check(self, stmts: list[Any], env: dict[str, str], out: dict[Probe, None]) -> None:
        for s in stmts:
            if isinstance(s, If):
                self._check_if(s, env, out)
            elif isinstance(s, Foreach):
                lists = [x.value for x in s.args if x.value in self.kinds]
                if any(self.kinds[v] == _OPAQUE for v in lists) or self._inexact(s.args):
                    raise _Unsupported("foreach() over source text it cannot model")
                self._check(s.body, env, out)
            elif isinstance(s, Command):
                self._check_command(s)

    def _check_if(self, s: If, env: dict[str, str], out: dict[Probe, None]) -> None:
        for br in s.branches:
            if br.cond is None:
                if br.text:  # unparsable condition: never taken
                    continue
                self._check(br.body, env, out)  # else()
                return
            leaves = list(_leaves(br.cond))
            refs = set().union(*(_leaf_refs(c) for c in leaves))
            if not refs & (self.written | self.kinds.keys()):  # decided by the entry variables
                if evaluate(br.cond, env):
                    self._check(br.body, env, out)
                    return
                continue
            for c in leaves:
                self._probe(c, out)
            self._check(br.body, env, out)

    def _probe(self, c: Cond, out: dict[Probe, None]) -> None:
        refs = _leaf_refs(c)
        if not refs & self.kinds.keys():
            return
        var = _probe_var(c)
        if var is None or refs != {var} or self.kinds[var] == _OPAQUE:
            raise _Unsupported(f"test of the source not modelled: {condition_text(c)}")
        out[(c, var, self.kinds[var])] = None

    def _inexact(self, args: list[Arg]) -> bool:
        """Some argument mixes source text with other text (or names an opaque variable)."""
        for a in args:
            refs = _arg_refs(a) & self.kinds.keys()
            if refs and (_ref(a) is None or self.kinds[_ref(a)] == _OPAQUE):
                return True
        return False

    def _check_command(self, c: Command) -> None:
        if c.name not in _INTERPRETED or not c.args:
            return
        a = c.args
        if c.name == "list":
            op, lst, items = a[0].value, a[1].value, a[2:]
            if op == "APPEND":
                return
            if not (lst in self.kinds or self._tainted(items)):
                return
            same = [_ref(x) for x in items]
            ok = (
                op == "REMOVE_ITEM"
                and lst in self.kinds
                and lst not in self.mixed
                and self.kinds[lst] != _OPAQUE
                and all(
                    v in self.kinds and v not in self.mixed and self.kinds[v] == self.kinds[lst]
                    for v in same
                )
            )
            if not ok:
                raise _Unsupported(f"list({op}) compares the source with other text")
        elif c.name in ("add_definitions", "add_compile_definitions"):
            if self._tainted(a):
                raise _Unsupported(f"{c.name}() of source text")
        elif self._inexact(a):
            raise _Unsupported(f"{c.name}() mixes the source with other text")

    def derived(self, source: str) -> dict[Kind, str] | None:
        """Each value derived from `source`, or None unless every one is a single list item that is no
        keyword (the induction above needs that)."""
        out: dict[Kind, str] = {}
        for kind in self.kinds.values():
            if kind != _OPAQUE and kind not in out:
                v = _derive(source, kind)
                if not v or _UNPLAIN.search(v) or v in _KEYWORDS:
                    return None
                out[kind] = v
        return out


class _LibraryVerdicts:
    """_run_library for one arch, run once per class of sources whose probes agree (see _SourceFlow)."""

    def __init__(
        self,
        lib: Function,
        flow: _SourceFlow | None,
        env: dict[str, str],
        arch: str,
        rule_for,
        signatures: dict[tuple[Probe, ...], dict[str, tuple[bool, ...] | None]],
    ) -> None:
        self.lib, self.flow, self.env, self.arch, self.rule_for = lib, flow, env, arch, rule_for
        self.by_class: dict[tuple[bool, ...], tuple[bool, BuildRuleRow | None]] = {}
        self.signatures: dict[str, tuple[bool, ...] | None] | None = (
            None  # source -> probe outcomes
        )
        entry = dict(env, ARGN="")
        entry[_instance_param(lib)] = "device_instance"
        if flow is None or any(
            _STRAY_DOLLAR.search(v) for v in entry.values()
        ):  # no `${` may form at run time
            return
        try:
            probes = flow.probes(lib.body, entry)
        except _Unsupported:
            return
        self.signatures = signatures.setdefault(
            probes, {}
        )  # the same probes for most archs: computed once
        self.tests = [(_probe_test(leaf, var), kind) for leaf, var, kind in probes]

    def __call__(self, path: str) -> tuple[bool, BuildRuleRow | None]:
        source = path.split("/", 1)[1] if "/" in path else path
        key = self._signature(source)
        if key is None:
            return _run_library(self.lib, self.env, path, self.arch, self.rule_for)
        if key not in self.by_class:
            self.by_class[key] = _run_library(self.lib, self.env, path, self.arch, self.rule_for)
        return self.by_class[key]

    def _signature(self, source: str) -> tuple[bool, ...] | None:
        if self.signatures is None or self.flow is None:
            return None
        if source in self.signatures:
            return self.signatures[source]
        derived = self.flow.derived(source)
        sig = None if derived is None else tuple(test(derived[kind]) for test, kind in self.tests)
        self.signatures[source] = sig
        return sig


def _probe_test(leaf: Cond, var: str) -> Callable[[str], bool]:
    """The probe as a function of the tested variable's value. `var MATCHES "<constant>"` searches the
    value directly (what _matcher does once _value has looked `var` up), skipping an env and the memo that
    would keep every file name; other probes run as compiled against {var: value}."""
    if (
        isinstance(leaf, Binary)
        and leaf.op == "MATCHES"
        and leaf.right.quoted
        and "${" not in leaf.right.value
    ):
        try:
            search = re.compile(leaf.right.value).search
        except re.error:
            return lambda value: False
        return lambda value: search(value) is not None
    test = compiled(leaf)
    return lambda value: test({var: value})


def _instance_param(lib: Function) -> str:
    return lib.params[0] if lib.params else "INSTANCE_NAME"


def _library_flow(lib: Function) -> _SourceFlow | None:
    """The flow of the source through add_instance_library, if it is one _LibraryVerdicts can rely on: the
    verdict reads ARGN (only ever the source or emptied) and INST_TARGETS (never from the source)."""
    try:
        flow = _SourceFlow(lib.body, "ARGN", {lib.name.lower()})
    except _Unsupported:
        return None
    if flow.kinds["ARGN"] != () or "ARGN" in flow.mixed or "INST_TARGETS" in flow.kinds:
        return None
    return flow


# ---------------------------------------------------------------- the stage


def _walk(stmts: list[Any]):
    for s in stmts:
        yield s
        if isinstance(s, If):
            for br in s.branches:
                yield br
                yield from _walk(br.body)
        elif isinstance(s, (Foreach, Function)):
            yield from _walk(s.body)


def _contains(stmts: list[Any], pred) -> bool:
    return any(isinstance(s, Command) and pred(s) for s in _walk(stmts))


def _find_dir_loop(stmts: list[Any]) -> Foreach | None:
    """The top-level foreach whose body calls add_subdirectory (the directory loop)."""
    for s in stmts:
        if isinstance(s, Foreach) and _contains(s.body, lambda c: c.name == "add_subdirectory"):
            return s
    return None


def _library_function(stmts: list[Any]) -> Function | None:
    for s in _walk(stmts):
        if isinstance(s, Function) and s.name.lower() == "add_instance_library":
            return s
    return None


def _message(body: list[Any]) -> str:
    for s in body:
        if isinstance(s, Command) and s.name == "message":
            vals = [a.value for a in s.args]
            if vals and vals[0] in ("DEBUG", "STATUS", "WARNING", "NOTICE", "VERBOSE"):
                vals = vals[1:]
            return " ".join(vals)
    return ""


def _rule_rows(
    file: str, lib: Function | None, loop: Foreach | None, guard_vars: set[str]
) -> dict[int, BuildRuleRow]:
    """One BuildRuleRow per if() branch that removes sources/targets or skips a directory."""
    rows: dict[int, BuildRuleRow] = {}
    regions = [(lib.body if lib else [], "function"), (loop.body if loop else [], "loop")]
    for body, where in regions:
        for node in _walk(body):
            if not isinstance(node, Branch):
                continue
            for s in node.body:
                if not isinstance(s, Command):
                    continue
                w = [a.value for a in s.args]
                action, targets = None, []
                if s.name == "list" and len(w) >= 2 and w[0] == "REMOVE_ITEM" and w[1] == "ARGN":
                    action = "remove_source"
                elif (
                    s.name == "list"
                    and len(w) >= 2
                    and w[0] == "REMOVE_ITEM"
                    and w[1] == "INST_TARGETS"
                ):
                    action, targets = "remove_targets", w[2:]
                elif (
                    s.name == "list" and len(w) >= 2 and w[0] == "FILTER" and w[1] == "INST_TARGETS"
                ):
                    action, targets = "remove_targets", ["FILTER " + " ".join(w[2:])]
                elif (
                    where == "loop"
                    and s.name == "set"
                    and len(w) >= 2
                    and w[0] in guard_vars
                    and w[1] in ("0", "OFF", "FALSE")
                    and not _contains(node.body, lambda c: c.name == "add_subdirectory")
                ):
                    action = "skip_directory"
                if action:
                    text = node.text if node.cond is not None or node.text else "else"
                    rows.setdefault(
                        node.line,
                        BuildRuleRow(
                            id=0,
                            file=file,
                            line=node.line,
                            condition=text,
                            action=action,
                            targets=targets,
                            message=_message(node.body),
                        ),
                    )
    for i, line in enumerate(sorted(rows), start=1):
        rows[line].id = i
    return rows


class CMakeStage:
    name = "ck.cmake"
    version = "1"
    tree = "ck"
    reads = ()
    writes = ("build_defines", "build_rules", "file_builds")
    combine_cost = 0.16  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        base = root / CK_INSTANCE_DIR
        out = [root / ROOT_CMAKE] if (root / ROOT_CMAKE).is_file() else []
        top = base / "CMakeLists.txt"
        if top.is_file():
            out.append(top)
        if base.is_dir():
            for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
                f = d / "CMakeLists.txt"
                if f.is_file():
                    out.append(f)
        return out

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if is_binary(data):
            return FileResult(
                diagnostics=[
                    Diagnostic(rel, 0, "binary data, not CMake: skipped", "warning", self.name)
                ]
            )
        text = data.decode("utf-8", errors="replace")
        if rel not in (
            GPU_CMAKE,
            ROOT_CMAKE,
        ):  # a directory's CMakeLists.txt: the loop matches against its text
            return FileResult(facts={"text": text})
        try:
            stmts, diags = parse_cmake(text)
        except CMakeSyntaxError as e:
            return FileResult(
                diagnostics=[Diagnostic(rel, e.line, f"CMake syntax: {e}", "error", self.name)]
            )
        if (
            rel == ROOT_CMAKE
        ):  # only option()/set()/add_definitions() matter; say nothing about the rest
            diags = []
        diags = [Diagnostic(rel, d.line, d.message, "warning", self.name) for d in diags]
        return FileResult(diagnostics=diags, facts={"stmts": stmts})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        envs, rows = root_environments(results.get(ROOT_CMAKE))
        top = results.get(GPU_CMAKE)
        if top is None or "stmts" not in top.facts:
            return StageResult(
                rows=rows,
                diagnostics=[
                    Diagnostic(
                        GPU_CMAKE,
                        0,
                        "no build rules read: file missing or unparsable",
                        "warning",
                        self.name,
                    )
                ],
            )
        texts = {
            k: v.facts.get("text", "")
            for k, v in results.items()
            if k not in (GPU_CMAKE, ROOT_CMAKE)
        }
        more, diags = evaluate_tree(root, top.facts["stmts"], texts, envs=envs)
        return StageResult(rows=rows + more, diagnostics=diags)


def root_environments(
    res: FileResult | None, archs: tuple[str, ...] = ARCHS
) -> tuple[dict[str, dict[str, str]], list[Any]]:
    """Run the top-level CMakeLists.txt once per arch: the variables gpu/ inherits, and its -D macros."""
    envs: dict[str, dict[str, str]] = {}
    rows: list[Any] = []
    for arch in archs:
        env = dict(DEFAULT_ENV, SUPPORTED_GPU_TARGETS=arch, GPU_TARGETS=arch)
        if res is not None and "stmts" in res.facts:
            it = Interpreter(env, ROOT_CMAKE)
            try:
                it.run(res.facts["stmts"])
            except (_Break, RecursionError):
                pass
            env = it.env
            env["SUPPORTED_GPU_TARGETS"] = arch  # one target per evaluated build
            for name, (value, line) in sorted(it.defines.items()):
                rows.append(
                    BuildDefineRow(arch=arch, name=name, value=value, file=ROOT_CMAKE, line=line)
                )
        envs[arch] = env
    return envs, rows


def evaluate_tree(
    root: Path,
    stmts: list[Any],
    dir_texts: dict[str, str],
    archs: tuple[str, ...] = ARCHS,
    envs: dict[str, dict[str, str]] | None = None,
) -> tuple[list[Any], list[Diagnostic]]:
    """BuildRuleRows + FileBuildRows for every instance source × arch."""
    forget_matches()
    diags: list[Diagnostic] = []
    lib = _library_function(stmts)
    loop = _find_dir_loop(stmts)
    if lib is None:
        diags.append(
            Diagnostic(
                GPU_CMAKE, 0, "no add_instance_library function found", "warning", "ck.cmake"
            )
        )
    guard_vars: set[str] = set()
    if loop is not None:
        for node in _walk(loop.body):
            if (
                isinstance(node, Branch)
                and node.cond is not None
                and _contains(node.body, lambda c: c.name == "add_subdirectory")
            ):
                guard_vars |= variables(node.cond)
    rules = _rule_rows(GPU_CMAKE, lib, loop, guard_vars)
    out: list[Any] = list(rules.values())
    base = Path(root) / CK_INSTANCE_DIR
    sources = instance_sources(base)
    by_dir: dict[
        str, list[tuple[str, str, str]]
    ] = {}  # dir -> (source, path from the CK root, file name)
    for s in sources:
        if "/" in s:
            by_dir.setdefault(s.split("/", 1)[0], []).append(
                (s, f"{CK_INSTANCE_DIR}/{s}", s.rsplit("/", 1)[-1])
            )

    def rule_for(br: Branch | None) -> BuildRuleRow | None:
        return rules.get(br.line) if br is not None else None

    dirs = sorted(by_dir.items())
    dir_paths = {d: str(base / d) for d, _ in dirs}  # the loop variable, the same for every arch
    flow = _library_flow(lib) if lib else None
    signatures: dict[tuple[Probe, ...], dict[str, tuple[bool, ...] | None]] = {}
    for arch in archs:
        env = (envs or {}).get(arch) or dict(
            DEFAULT_ENV, SUPPORTED_GPU_TARGETS=arch, GPU_TARGETS=arch
        )
        verdict = _LibraryVerdicts(lib, flow, env, arch, rule_for, signatures) if lib else None
        lib_cache: dict[str, tuple[bool, BuildRuleRow | None]] = {}
        for d, files in dirs:
            dir_rule: BuildRuleRow | None = None
            built_dir = True
            if loop is not None:
                rel_cmake = f"{CK_INSTANCE_DIR}/{d}/CMakeLists.txt"
                dir_text = dir_texts.get(rel_cmake, "")
                it = Interpreter(env, GPU_CMAKE, read_file=lambda _p, t=dir_text: t)
                var = loop.args[0].value if loop.args else "subdir_path"
                it.env[var] = dir_paths[d]
                try:
                    it.run(loop.body)
                except _Break:
                    pass
                built_dir = bool(it.subdirs)
                if not built_dir:
                    cands = [it.origin.get(v) for v in guard_vars if it.origin.get(v) is not None]
                    dir_rule = rule_for(cands[-1]) if cands else None
            for f, path, name in files:
                if not built_dir:
                    out.append(
                        FileBuildRow(
                            file=path,
                            arch=arch,
                            built=False,
                            rule_id=dir_rule.id if dir_rule else None,
                            line=dir_rule.line if dir_rule else None,
                            condition=dir_rule.condition if dir_rule else "directory not added",
                        )
                    )
                    continue
                if name not in lib_cache:
                    lib_cache[name] = verdict(f) if verdict else (True, None)
                built, rule = lib_cache[name]
                out.append(
                    FileBuildRow(
                        file=path,
                        arch=arch,
                        built=built,
                        rule_id=rule.id if rule else None,
                        line=rule.line if rule else None,
                        condition=rule.condition if rule else None,
                    )
                )
    forget_matches()
    return out, diags


def instance_sources(base: Path) -> list[str]:
    """The `.cpp`/`.in` files under gpu/ (`base`), '/'-separated and relative to it, in the order of
    list_files(root, CK_INSTANCE_DIR, SOURCE_SUFFIXES) (sorted Paths compare part by part) but without a
    Path per file, which cost most of the listing."""
    if not base.is_dir():
        return []
    top = str(base)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        rel = dirpath[len(top) + 1 :].replace(os.sep, "/")
        prefix = rel + "/" if rel else ""
        out.extend(prefix + f for f in filenames if f.endswith(SOURCE_SUFFIXES))
    out.sort(key=lambda r: r.split("/"))
    return out


def _run_library(
    lib: Function, env: dict[str, str], source: str, arch: str, rule_for
) -> tuple[bool, BuildRuleRow | None]:
    source = source.split("/", 1)[1] if "/" in source else source
    it = Interpreter(env, GPU_CMAKE)
    it.functions[lib.name.lower()] = lib
    saved = it.env
    it.env = dict(saved)
    it.env[_instance_param(lib)] = "device_instance"
    it.env["ARGN"] = source
    try:
        it.run(lib.body)
    except _Break:
        pass
    final = it.env
    if source not in [x for x in final.get("ARGN", "").split(";") if x]:
        return False, rule_for(it.removed.get(("ARGN", source)))
    if arch not in [x for x in final.get("INST_TARGETS", arch).split(";") if x]:
        return False, rule_for(it.removed.get(("INST_TARGETS", arch)))
    return True, None


STAGE = CMakeStage()

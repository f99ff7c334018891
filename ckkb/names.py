"""CK instance names: parse what GetTypeString() prints, map it to CK's template parameter names.

Two layers:

1. The shape of every name (op, template arguments, `Key: value` properties) is defined by ONE
   grammar, `grammars/instance_name.lark` (LALR). A hand-written recursive-descent reader over a
   tokenizer built from that grammar's own terminals is the fast path; it accepts exactly the
   language of the grammar (tests check both agree), and every error message comes from the
   grammar itself (lark, `match_examples`).
2. Each device op's name schema, extracted from its GetTypeString() by `ckkb.extract.typestrings`
   and stored in the knowledge base (`name_schemas`), maps the printed values to the parameter
   names the instance extractor uses (`BlockSize`, `MPerBlock`, `BlkGemmPipelineVer`, ...).

`parse` never raises on a bad name: the result has schema "error", a message and a position.
Results are memoised per (name, schema set).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, NamedTuple

import lark

from ckkb.fields import normalise
from ckkb.kb.db import json_value

MAX_NAME_CHARS = 16384  # the longest real name is a few hundred characters

# --------------------------------------------------------------------------- the grammar


@lru_cache(maxsize=1)
def grammar_text() -> str:
    return resources.files("ckkb.grammars").joinpath("instance_name.lark").read_text()


@lru_cache(maxsize=1)
def lark_parser() -> lark.Lark:
    return lark.Lark(
        grammar_text(),
        parser="lalr",
        lexer="basic",
        cache=True,
        propagate_positions=True,
        maybe_placeholders=False,
    )


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


def _lark_error(name: str) -> tuple[str, int] | None:
    """Parse with the grammar itself; (message, position) of the first error, or None."""
    p = lark_parser()
    try:
        p.parse(name)
        return None
    except lark.exceptions.UnexpectedInput as e:
        label = None
        try:
            label = e.match_examples(p.parse, ERROR_EXAMPLES, use_accepts=True)
        except Exception:  # noqa: BLE001 - a label is a nicety; the raw error is still reported
            label = None
        pos = getattr(e, "pos_in_stream", None)
        if pos is None or pos < 0:
            pos = len(name)
        if isinstance(e, lark.exceptions.UnexpectedCharacters):
            what = f"unexpected character {name[pos]!r}"
        elif (
            isinstance(e, lark.exceptions.UnexpectedEOF)
            or getattr(e, "token", None) is None
            or e.token.type == "$END"
        ):
            what, pos = "unexpected end of name", len(name)
        else:
            what = f"unexpected {str(e.token)!r}"
        msg = f"{label} ({what} at position {pos})" if label else f"{what} at position {pos}"
        return msg, pos


# --------------------------------------------------------------------------- fast path: tokens


class Token(NamedTuple):
    type: str  # WORD | TYPENAME | NUMBER | TILE | OTHER | LESSTHAN | MORETHAN | COMMA | COLON
    text: str
    start: int
    end: int


ATOMS = frozenset({"WORD", "TYPENAME", "NUMBER", "TILE", "OTHER"})
NAME_TOKENS = frozenset({"WORD", "TYPENAME", "OTHER"})


@lru_cache(maxsize=1)
def _terminals() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The grammar's atom terminals in lark's lexer order (priority, width, length, name)."""
    p = lark_parser()
    terms = [t for t in p.terminals if t.name in ATOMS]
    terms.sort(key=lambda x: (-x.priority, -x.pattern.max_width, -len(x.pattern.value), x.name))
    return tuple((t.name, re.compile(t.pattern.to_regexp())) for t in terms)


# Separators are the grammar's anonymous terminals; a chunk is a maximal run of anything else
# (a "::" pair included), which is exactly what the grammar's catch-all OTHER terminal matches.
_CHUNKS = re.compile(r"(\s+)|([<>,])|(:(?!:))|((?:[^\s,<>:]|::)+)|(.)", re.S)
_SEP = {"<": "LESSTHAN", ">": "MORETHAN", ",": "COMMA"}
_kinds: dict[str, str | None] = {}


def _classify(chunk: str) -> str | None:
    """The terminal lark's lexer would produce for this whole chunk; None when lark would split it
    (only possible around '::'), so the caller defers to the grammar."""
    kind = _kinds.get(chunk, "")
    if kind != "":
        return kind
    kind = None
    for name, rx in _terminals():
        m = rx.match(chunk)
        if m is None:
            continue
        if m.end() == len(chunk):
            kind = name
        break
    if kind == "OTHER" and ":" in chunk:
        kind = None
    if len(_kinds) < 100000:
        _kinds[chunk] = kind
    return kind


class _Fail(Exception):
    pass


def tokenize(name: str) -> list[Token]:
    """The grammar's terminals over `name` (whitespace dropped); _Fail(position) where the fast
    path cannot decide, so the caller asks the grammar."""
    out = []
    append = out.append
    for m in _CHUNKS.finditer(name):
        i = m.lastindex
        if i == 1:
            continue
        text = m.group()
        if i == 4:
            kind = _classify(text)
            if kind is None:
                raise _Fail(m.start())
        elif i == 2:
            kind = _SEP[text]
        elif i == 3:
            kind = "COLON"
        else:
            raise _Fail(m.start())
        append(Token(kind, text, m.start(), m.end()))
    return out


class _Reader:
    """Recursive descent over the grammar's rules (start, lead, targs, arg, props, prop, extra).

    Spans are (first token, end token) indices; props are (key token, "keyed"|"bare"|"flag", span).
    """

    __slots__ = ("toks", "i", "n")

    def __init__(self, toks: list[Token]) -> None:
        self.toks, self.i, self.n = toks, 0, len(toks)

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.toks[j].type if j < self.n else None

    def start(self):
        if self.peek() not in NAME_TOKENS:
            raise _Fail()
        head = self.toks[self.i]
        self.i += 1
        args = None
        props: list[Any] = []
        t = self.peek()
        if t == "COMMA":  # lead: ("," prop)+ "," then a template-argument list
            while True:
                self.i += 1
                if self.peek() == "LESSTHAN" and props:
                    break
                props.append(self.prop())
                if self.peek() != "COMMA":
                    raise _Fail()
            args = self.targs()
        elif t == "LESSTHAN":
            args = self.targs()
        elif t == "MORETHAN":  # stray
            self.i += 1
        if self.i < self.n:
            props.extend(self.props())
        if self.i != self.n:
            raise _Fail()
        return head, args, props

    def targs(self) -> list[tuple[int, int]]:
        self.i += 1  # "<"
        args: list[tuple[int, int]] = []
        if self.peek() == "MORETHAN":
            self.i += 1
            return args
        while True:
            if self.peek() == "WORD" and self.peek(1) == "COLON":  # keyed_arg
                first = self.i
                self.i += 2
                self.parts(False)
                args.append((first, self.i))
            else:
                args.append(self.parts(True))  # type: ignore[arg-type]
            t = self.peek()
            self.i += 1
            if t == "COMMA":
                if self.peek() == "MORETHAN":
                    self.i += 1
                    return args
                continue
            if t == "MORETHAN":
                return args
            raise _Fail()

    def parts(self, need: bool) -> tuple[int, int] | None:
        """part+ (or part* when not need): (start token, end token) indices, end exclusive."""
        first = self.i
        while self.i < self.n:
            t = self.toks[self.i].type
            if t not in ATOMS:
                break
            self.i += 1
            if t in NAME_TOKENS and self.peek() == "LESSTHAN":
                self.targs()
        if self.i == first:
            if need:
                raise _Fail()
            return None
        return first, self.i

    def prop(self) -> tuple[Token, str, tuple[int, int] | None]:
        if self.peek() != "WORD":
            raise _Fail()
        key = self.toks[self.i]
        self.i += 1
        t = self.peek()
        if t == "COLON":
            self.i += 1
            return key, "keyed", self.parts(False)
        if t in ATOMS:
            return key, "bare", self.parts(True)
        if t is None or t == "COMMA":
            return key, "flag", None
        raise _Fail()

    def props(self) -> list[tuple[Token, str, tuple[int, int] | None]]:
        out = [self.prop()]
        while self.i < self.n:
            if self.peek() != "COMMA":
                raise _Fail()
            self.i += 1
            if self.i == self.n:
                return out  # trailing comma
            if self.peek() == "WORD" and self.peek(1) != "LESSTHAN":
                out.append(self.prop())
                continue
            if self.peek() not in ATOMS:
                raise _Fail()
            sp = self.parts(True)  # extra: continues the value of the property before it
            key, kind, prev = out[-1]
            out[-1] = (key, kind, (prev[0] if prev else sp[0], sp[1]))  # type: ignore[index]
        return out


# --------------------------------------------------------------------------- schemas


INT_KINDS = frozenset({"int", "bool"})
_LAYOUT_INITIAL = {"R": "Row", "C": "Col"}


@dataclass(frozen=True)
class NameSchema:
    """One device op's GetTypeString(), as a token list (see ckkb.extract.typestrings)."""

    device_op: str  # C++ class template, e.g. DeviceGemm_Xdl_CShuffleV3
    ops: tuple[str, ...]  # printed op names, e.g. ("DeviceGemmXdlUniversal",)
    tokens: tuple[Any, ...]  # [{"lit"}, {"ref", "conv", "kind"}, {"derived"}, {"alt"}]
    file: str = ""
    line: int = 0
    status: str = "matched"
    id: int | None = None

    @property
    def regex(self) -> tuple[re.Pattern[str], list[dict[str, Any]]]:
        return _compile(self)

    @property
    def prop_refs(self) -> dict[str, dict[str, Any]]:
        """`Key: <ref>` pairs: property key -> the ref token printed after it."""
        return _memo(self, "props", _prop_refs)

    def arg_refs(self) -> list[dict[str, Any] | None]:
        return _memo(self, "args", _arg_refs)


_MEMO_LIMIT = 20000  # per-schema memos (compiled regexes, group plans) are cleared past this
_derived_memo: dict[tuple[int, str], tuple[Any, Any]] = {}


def _memo(s: NameSchema, what: str, fn: Any) -> Any:
    hit = _derived_memo.get((id(s), what))
    if hit is None or hit[0] is not s:
        hit = (s, fn(s))
        if len(_derived_memo) > _MEMO_LIMIT:
            _derived_memo.clear()  # schema sets loaded over and over (a server) must not grow this
        _derived_memo[(id(s), what)] = hit
    return hit[1]


_LIT_SPLIT = re.compile(r"(\s+)")


def _lit_re(text: str) -> str:
    out = []
    for piece in _LIT_SPLIT.split(text):
        if not piece:
            continue
        out.append(r"\s*" if piece.isspace() else re.escape(piece))
    return "".join(out)


_VALUE_RE = {
    "int": r"[-+]?\d+",
    "bool": r"[01]|true|false",
    "spec": r"[A-Za-z0-9_]+",
    "layout_initial": r"[A-Za-z]",
    "layout_name": r"[A-Za-z0-9_]+",
}
_ANY = r"[^\s,<>]+?"


def _tokens_re(tokens: Iterable[Any], groups: list[dict[str, Any]]) -> str:
    out = []
    for t in tokens:
        if "lit" in t:
            out.append(_lit_re(t["lit"]))
        elif "alt" in t:  # a conditional: its text is '*' in the key (the condition is not printed)
            groups.append({"alt": True})
            gi = len(groups) - 1
            out.append(f"(?P<g{gi}>" + "|".join(_tokens_re(a, groups) for a in t["alt"]) + ")")
        elif "ref" in t:
            if t.get("conv") == "enum" and t.get("map"):
                vals = sorted(set(t["map"].values()), key=len, reverse=True)
                pat = "|".join(re.escape(v) for v in vals)
            else:
                pat = _VALUE_RE.get(t.get("conv") or "", None) or _VALUE_RE.get(
                    t.get("kind") or "", _ANY
                )
            groups.append(t)
            out.append(f"(?P<g{len(groups) - 1}>{pat})")
        else:  # derived or unknown: any value, recorded under its own name
            groups.append(t)
            out.append(f"(?P<g{len(groups) - 1}>{_ANY})")
    return "".join(out)


_compiled: dict[int, tuple[re.Pattern[str], list[dict[str, Any]]]] = {}


def _compile(s: NameSchema) -> tuple[re.Pattern[str], list[dict[str, Any]]]:
    key = id(s)
    hit = _compiled.get(key)
    if hit is None or hit[2] is not s:  # type: ignore[misc]
        groups: list[dict[str, Any]] = []
        rx = re.compile(r"\s*" + _tokens_re(s.tokens, groups) + r"\s*")
        hit = (rx, groups, s)  # type: ignore[assignment]
        if len(_compiled) > _MEMO_LIMIT:
            _compiled.clear()
        _compiled[key] = hit  # type: ignore[assignment]
    return hit[0], hit[1]


def _prop_refs(s: NameSchema) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    prev = ""
    for t in s.tokens:
        if "lit" in t:
            prev += t["lit"]
            continue
        if "ref" in t or "derived" in t:
            m = re.search(r"(\w+)\s*:\s*$", prev)
            if m:
                out.setdefault(m.group(1), t)
        prev = ""
    return out


def _arg_refs(s: NameSchema) -> list[dict[str, Any] | None]:
    """The template arguments of the schema, in order: the ref when an argument is exactly one ref."""
    depth = 0
    args: list[list[Any]] = []
    cur: list[Any] = []
    for t in s.tokens:
        if "lit" not in t:
            if depth == 1:
                cur.append(t)
            elif depth == 0 and args:
                break
            continue
        for ch in t["lit"]:
            if ch == "<":
                depth += 1
                if depth == 1:
                    cur = []
                    continue
            elif ch == ">":
                depth -= 1
                if depth == 0:
                    args.append(cur)
                    return [a[0] if len(a) == 1 and "ref" in a[0] else None for a in args]
            elif ch == "," and depth == 1:
                args.append(cur)
                cur = []
                continue
            if depth >= 1 and not ch.isspace():
                cur.append({"lit": ch})
    return []


class SchemaSet(dict):
    """name_schemas keyed by "device_op@file", indexed by printed op name. Hashable by identity (memoising)."""

    __hash__ = object.__hash__  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def by_op(self) -> dict[str, list[NameSchema]]:
        """Printed op name -> its schemas, one per distinct format: several device ops print the
        same thing (seven classes print `DeviceGemmXdlUniversal<...>` alike); the first by
        (status, file, line) stands for the format, and one regex test then settles all of them."""
        idx = self.__dict__.get("_by_op")
        if idx is None:
            idx = {}
            for s in self.values():
                for op in s.ops:
                    idx.setdefault(op, []).append(s)
            same: dict[int, tuple[str, ...]] = {}
            for op, v in idx.items():
                # the shortest class name first: the plain op rather than its batched/scaled variants
                v.sort(
                    key=lambda s: (
                        s.status != "matched",
                        len(s.device_op),
                        s.device_op,
                        s.file,
                        s.line,
                    )
                )
                first: dict[str, NameSchema] = {}
                for s in v:
                    rx, groups = s.regex  # the same regex and group names read a name identically
                    fmt = (
                        rx.pattern
                        + "|"
                        + "|".join(_field_name(t) if "alt" not in t else "" for t in groups)
                    )
                    if fmt not in first:
                        first[fmt] = s
                        same[id(s)] = (s.device_op,)
                    elif s.device_op not in same[id(first[fmt])]:
                        same[id(first[fmt])] += (s.device_op,)
                idx[op] = list(first.values())
            self.__dict__["_same"] = same
            self.__dict__["_by_op"] = idx
        return idx

    def same_format(self, s: NameSchema) -> tuple[str, ...]:
        """Every device op whose GetTypeString() prints exactly the format of `s`."""
        self.by_op()
        return self.__dict__["_same"].get(id(s), (s.device_op,))


def schema_from_row(row: Mapping[str, Any]) -> NameSchema:
    def js(v: Any) -> Any:
        return json.loads(v) if isinstance(v, str) else v

    return NameSchema(
        device_op=row["device_op"],
        ops=tuple(js(row["ops"]) or ()),
        tokens=tuple(js(row["tokens"]) or ()),
        file=row.get("file") or "",
        line=row.get("line") or 0,
        status=row.get("status") or "matched",
        id=row.get("id"),
    )


def load_schemas(db: Any) -> SchemaSet:
    """Every name schema stored in the knowledge base (table name_schemas) that has tokens."""
    out = SchemaSet()
    if "name_schemas" not in db.table_names():
        return out
    for row in db.query("select * from name_schemas where status != 'unsupported' order by id"):
        s = schema_from_row(row)
        out[f"{s.device_op}@{s.file}"] = s  # one class name may be defined in two headers
    return out


# --------------------------------------------------------------------------- results


@dataclass
class ParsedName:
    """One parsed name. Results are memoised and shared: treat them as read-only."""

    name: str
    op: str | None
    fields: dict[str, Any] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)
    schema: str = "generic"  # matched | generic | error
    error: dict[str, Any] | None = None  # {"message", "position"}
    device_op: str | None = None  # the C++ class whose schema matched
    device_ops: tuple[str, ...] = ()  # every class that prints this exact format (device_op first)
    schema_file: str | None = None
    schema_line: int | None = None
    derived: dict[str, Any] = field(default_factory=dict)  # values the source computes at run time
    _match: Any = field(
        default=None, repr=False, compare=False
    )  # (text, start, end, spans, is_ref) of the schema match

    @cached_property
    def normalised(self) -> dict[str, Any]:
        """The normalised cross-op columns (ckkb.fields.normalise), as the instances table has them."""
        return normalise(self.fields) if self.fields else {}

    @cached_property
    def key(self) -> str | None:
        """The join key (instance_keys.key) when a schema matched: the name without whitespace,
        run-time values and conditional parts as '*'."""
        return _match_key(*self._match) if self._match is not None else None

    @property
    def ok(self) -> bool:
        return self.schema != "error"

    @property
    def tokens(self) -> tuple[Token, ...]:
        """Every original token with its position (computed on demand; () for an error)."""
        if self.schema == "error":
            return ()
        return tuple(_all_tokens(self.name))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "fields": self.fields,
            "args": self.args,
            "props": self.props,
            "schema": self.schema,
            "error": self.error,
        }


def _error(name: str, message: str, position: int) -> ParsedName:
    return ParsedName(
        name=name, op=None, schema="error", error={"message": message, "position": position}
    )


def _as_value(text: str) -> Any:
    t = text[1:] if text[:1] in "+-" else text
    return int(text) if t.isdigit() and t.isascii() else text


def _field_value(t: dict[str, Any], text: str) -> Any:
    conv = t.get("conv")
    if conv == "layout_initial":
        return _LAYOUT_INITIAL.get(text, text)
    if t.get("kind") == "bool" and text in ("0", "1", "true", "false"):
        return text in ("1", "true")
    return _as_value(text)


def _field_name(t: dict[str, Any]) -> str:
    if "ref" in t:
        return f"{t['ref']}[{t['index']}]" if t.get("conv") == "at" else t["ref"]
    return t.get("derived") or t.get("expr") or "?"


_BINARY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")


def _check_binary(name: str) -> tuple[str, int] | None:
    m = _BINARY.search(name)
    if m is None:
        return None
    return (
        f"binary data: control or undecodable character {m.group()!r} at position {m.start()}",
        m.start(),
    )


def _match_key(
    text: str, start: int, end: int, regs: tuple[tuple[int, int], ...], is_ref: tuple[bool, ...]
) -> str:
    """The join key from a match: the matched text without whitespace, with derived values and
    conditional parts replaced by '*' (as ckkb.extract.typestrings.render writes it)."""
    pieces: list[str] = []
    pos = start
    for (st, en), ref in zip(regs[1:], is_ref, strict=True):
        if st < 0 or st < pos:
            continue  # not taken, or inside a conditional already replaced
        pieces.append(text[pos:st])
        pieces.append(text[st:en].strip() if ref else "*")
        pos = en
    pieces.append(text[pos:end])
    return "".join("".join(pieces).split())


# per regex group: what its text becomes
_SKIP, _LAYOUT, _BOOL, _VALUE, _DERIVED, _INT, _STR = range(7)


@dataclass
class _Plan:
    """How one schema's regex groups become fields (precomputed once per schema)."""

    steps: tuple[tuple[int, str, int], ...]  # (group, name, code) in the order the name prints them
    is_ref: tuple[bool, ...]
    simple: bool  # no parameter printed twice
    flat: tuple[Any, ...] | None = (
        None  # no conditional, no repeat: (ref (name, convert, group-1)..., derived ...)
    )


def _plan(groups: list[dict[str, Any]]) -> _Plan:
    steps, is_ref, names_seen = [], [], []
    for gi, t in enumerate(groups, start=1):
        if "alt" in t:
            is_ref.append(False)
            continue
        name = _field_name(t)
        if "ref" not in t:
            steps.append((gi, name, _DERIVED))
            is_ref.append(False)
            continue
        is_ref.append(True)
        names_seen.append(name)
        conv, kind = t.get("conv"), t.get("kind")
        if conv == "layout_initial":
            code = _LAYOUT
        elif kind == "bool":
            code = _BOOL
        elif kind == "int" and conv in ("value", "at", None):
            code = _INT  # the group's pattern only matches integers
        elif conv in ("spec", "enum", "layout_name"):
            code = _STR  # kept as printed
        else:
            code = _VALUE
        steps.append((gi, name, code))
    simple = len(set(names_seen)) == len(names_seen)
    flat = None
    if simple and all("alt" not in t for t in groups):
        convert = {
            _INT: int,
            _STR: str,
            _VALUE: _as_value,
            _LAYOUT: _layout,
            _BOOL: _boolean,
            _DERIVED: _as_value,
        }
        refs = tuple((n, convert[c], i - 1) for i, n, c in steps if c != _DERIVED)
        ders = tuple((n, _as_value, i - 1) for i, n, c in steps if c == _DERIVED)
        flat = (refs, ders)
    return _Plan(tuple(steps), tuple(is_ref), simple, flat)


def _layout(v: str) -> str:
    return _LAYOUT_INITIAL.get(v, v)


def _boolean(v: str) -> Any:
    return v in ("1", "true") if v in ("0", "1", "true", "false") else _as_value(v)


_plan_cache: dict[int, tuple[Any, _Plan]] = {}


def _schema_fields(s: NameSchema, text: str) -> tuple[dict[str, Any], dict[str, Any], Any] | None:
    rx, groups = s.regex
    m = rx.fullmatch(text)
    if m is None:
        return None
    hit = _plan_cache.get(id(groups))
    if hit is None or hit[0] is not groups:
        hit = (groups, _plan(groups))
        if len(_plan_cache) > _MEMO_LIMIT:
            _plan_cache.clear()
        _plan_cache[id(groups)] = hit
    plan = hit[1]
    g = m.groups()
    if plan.flat is not None:  # every group took part: one comprehension each
        refs, ders = plan.flat
        return (
            {n: f(g[i]) for n, f, i in refs},
            {n: f(g[i]) for n, f, i in ders},
            (text, m.start(), m.end(), m.regs, plan.is_ref),
        )
    fields: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    check = not plan.simple
    for i, n, code in plan.steps:
        v = g[i - 1]
        if v is None:
            continue
        if code == _INT:
            val: Any = int(v)
        elif code == _STR:
            val = v
        elif code == _DERIVED:
            derived[n] = _as_value(v)
            continue
        elif code == _LAYOUT:
            val = _LAYOUT_INITIAL.get(v, v)
        elif code == _BOOL:
            val = v in ("1", "true") if v in ("0", "1", "true", "false") else _as_value(v)
        else:
            val = _as_value(v)
        if check and fields.get(n, val) != val:
            return None  # one parameter printed twice with two values: not this schema
        fields[n] = val
    return fields, derived, (text, m.start(), m.end(), m.regs, plan.is_ref)


def _ref_accepts(t: dict[str, Any], text: str) -> bool:
    conv = t.get("conv")
    if conv == "enum" and t.get("map"):
        return text in t["map"].values()
    pat = _VALUE_RE.get(conv or "") or _VALUE_RE.get(t.get("kind") or "")
    return pat is None or re.fullmatch(pat, text) is not None


def _generic_fields(
    candidates: list[NameSchema], args: list[str], props: dict[str, str]
) -> dict[str, Any]:
    """Best effort for a name no schema matches (older CK releases printed other forms): properties
    whose key the op's schema prints, and leading template arguments while they fit the schema's
    arguments one by one."""
    fields: dict[str, Any] = {}
    for s in candidates:
        refs = s.prop_refs
        for k, v in props.items():
            t = refs.get(k)
            if t is not None and "ref" in t and _ref_accepts(t, v):
                fields.setdefault(_field_name(t), _field_value(t, v))
        for t, a in zip(s.arg_refs(), args, strict=False):
            if t is None or not _ref_accepts(t, a):
                break
            fields.setdefault(_field_name(t), _field_value(t, a))
        if fields:
            break
    return fields


def _candidates(schemas: SchemaSet, head: str) -> list[NameSchema]:
    idx = schemas.by_op()
    hit = idx.get(head)
    if hit:
        return hit
    if "::" in head:
        hit = idx.get(head.rsplit("::", 1)[1])
        if hit:
            return hit
    # names glued into one word (GemmXdlSplitKCShuffle_MNKPadding_RRR_...): longest "_" prefix
    parts = head.split("_")
    for k in range(len(parts) - 1, 0, -1):
        hit = idx.get("_".join(parts[:k]))
        if hit:
            return hit
    return []


def _parse(name: str, schemas: SchemaSet | None) -> ParsedName:
    if not isinstance(name, str):
        return _error(repr(name)[:200], f"not a string: {type(name).__name__}", 0)
    if not name.strip():
        return _error(name, "empty name", 0)
    if len(name) > MAX_NAME_CHARS:
        return _error(
            name[:200] + "...",
            f"name too long: {len(name)} characters (limit {MAX_NAME_CHARS})",
            MAX_NAME_CHARS,
        )
    bad = _check_binary(name)
    if bad:
        return _error(name, *bad)
    quick = _quickest(name) or _quick(name)
    if quick is not None:
        return _build(name, *quick, schemas)
    try:
        toks = tokenize(name)
        head, arg_spans, prop_spans = _Reader(toks).start()
    except _Fail:
        err = _lark_error(name)
        if err is None:  # the fast path and the grammar disagree: trust the grammar
            return _parse_with_lark(name, schemas)
        return _error(name, *err)
    return _build(name, *_from_spans(name, toks, head, arg_spans, prop_spans), schemas)


_CH = r"(?:[^\s,<>:]|::)+"
_SEQ = _CH + r"(?:\s+" + _CH + r")*"
_SHAPE = re.compile(r"\s*(" + _CH + r")\s*(?:<([^<>]*)>)?([^<>]*)", re.S)
_ARG = re.compile(r"\s*(" + _SEQ + r")\s*", re.S)
_PROP = re.compile(r"\s*(" + _CH + r")(?:\s*(:)\s*(" + _SEQ + r")?|\s+(" + _SEQ + r"))?\s*", re.S)


# The common shapes as one regex (Python 3.11 possessive quantifiers, so a chunk is never split):
# chunks without ':' are single tokens of the grammar (a terminal can only end at a separator), so
# only the head (not a NUMBER or TILE) needs classifying; keys are WORDs by construction. Covers
# keyed arguments, a trailing comma, flags, value continuations (extras) and a stray '>'; not
# nested lists, '::' names or a lead (the token reader takes those).
_NS = r"[^\s,<>:]++"
_SEQ2 = _NS + r"(?:\s++" + _NS + r")*+"
_KEY = r"[A-Za-z_]\w*+"
_ARG2 = r"(?:" + _KEY + r"\s*+:(?:\s*+" + _SEQ2 + r")?+|" + _SEQ2 + r")"
_PROP2 = _KEY + r"(?:\s*+:(?:\s*+" + _SEQ2 + r")?+|\s++" + _SEQ2 + r")?+"
_ITEM2 = r"(?:" + _PROP2 + r"|" + _SEQ2 + r")"
_FAST = re.compile(
    r"\s*+("
    + _NS
    + r")\s*+(?:<\s*+("
    + _ARG2
    + r"(?:\s*+,\s*+"
    + _ARG2
    + r")*+(?:\s*+,)?+)?+\s*+>|(>))?+\s*+"
    r"(" + _PROP2 + r"(?:\s*+,\s*+" + _ITEM2 + r")*+(?:\s*+,)?+)?+\s*+"
)
# one property item of a string _FAST accepted: keyed | bare | flag | extra, then its comma
_PROP_ITEMS = re.compile(
    r"\s*+(?:("
    + _KEY
    + r")\s*+:\s*+("
    + _SEQ2
    + r")?+|("
    + _KEY
    + r")\s++("
    + _SEQ2
    + r")|("
    + _KEY
    + r")(?=\s*+(?:,|$))|("
    + _SEQ2
    + r"))\s*+(?:,|$)"
)


def _quickest(name: str) -> tuple[str, int, list[str] | None, list[tuple[str, str, str]]] | None:
    m = _FAST.fullmatch(name)
    if m is None:
        return None
    head, atext, stray, ptext = m.groups()
    if _classify(head) not in NAME_TOKENS:
        return None
    if stray:
        args: list[str] | None = None
    elif atext is not None:
        args = [a.strip() for a in atext.split(",")]
        if not args[-1]:
            args.pop()  # the trailing comma
    else:
        args = [] if "<" in name else None
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
    return head, m.start(1), args, props


def _chunks_ok(text: str) -> bool:
    for c in text.split():
        if _classify(c) is None:
            return False
    return True


def _quick(name: str) -> tuple[str, int, list[str], list[tuple[str, bool, str]]] | None:
    """The common case in C-speed string operations: no nested `<`, no odd '::' runs. Returns
    (head, head_start, args, props) or None, and then the token-level reader decides. Accepts only
    strings the grammar accepts (the tests compare both on generated names)."""
    m = _SHAPE.fullmatch(name)
    if m is None:
        return None
    head, atext, rest = m.group(1), m.group(2), m.group(3)
    if _classify(head) not in NAME_TOKENS:
        return None
    args: list[str] = []
    if atext is not None and atext.strip():
        for piece in atext.split(","):
            am = _ARG.fullmatch(piece)
            if am is None or not _chunks_ok(am.group(1)):
                return None
            args.append(am.group(1))
    elif atext is None:
        args = None  # type: ignore[assignment]
    props: list[tuple[str, bool, str]] = []
    if rest.strip():
        pieces = rest.split(",")
        if len(pieces) > 1 and not pieces[-1].strip():
            pieces.pop()  # trailing comma
        for piece in pieces:
            pm = _PROP.fullmatch(piece)
            if pm is None:
                return None
            key, colon, kval, bval = pm.groups()
            if _classify(key) != "WORD":
                return None
            if colon:
                if kval and not _chunks_ok(kval):
                    return None
                props.append((key, "keyed", kval or ""))
            elif bval:
                if not _chunks_ok(bval):
                    return None
                props.append((key, "bare", bval))
            else:
                return None
    return head, m.start(1), args, props


def _from_spans(name, toks, head, arg_spans, prop_spans):
    args = None if arg_spans is None else [_span_text(name, toks, sp) for sp in arg_spans]
    props = [(k.text, kind, _span_text(name, toks, sp)) for k, kind, sp in prop_spans]
    return head.text, head.start, args, props


def _all_tokens(name: str) -> list[Token]:
    try:
        return tokenize(name)
    except _Fail:
        return [Token(t.type, str(t), t.start_pos, t.end_pos) for t in lark_parser().lex(name)]


def _span_text(name: str, toks: list[Token], span: tuple[int, int] | None) -> str:
    if span is None:
        return ""
    return name[toks[span[0]].start : toks[span[1] - 1].end]


def _build(name, head, head_start, args, prop_list, schemas) -> ParsedName:
    args = args or []
    props = {key: val for key, _kind, val in prop_list}
    suffix = None
    if (
        prop_list and prop_list[-1][1] == "bare"
    ):  # ckProfiler's ", KBatch 2" is not part of the type string
        k, _, v = prop_list[-1]
        suffix = re.sub(r"\s*,?\s*" + re.escape(k) + r"\s+" + re.escape(v) + r"\s*,?\s*$", "", name)
    op = head
    fields: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    kind = "generic"
    key = device_op = sfile = None
    sline = None
    device_ops: tuple[str, ...] = ()
    if schemas:
        cands = _candidates(schemas, head)
        texts = [name] if suffix is None else [name, suffix]
        for s in cands:
            for text in texts:
                got = _schema_fields(s, text)
                if got is not None:
                    fields, derived, key = got
                    kind, device_op, sfile, sline = "matched", s.device_op, s.file, s.line
                    device_ops = schemas.same_format(s)
                    op = next((o for o in s.ops if head.startswith(o)), s.ops[0] if s.ops else op)
                    break
            if kind == "matched":
                break
        if kind == "generic" and cands:
            fields = _generic_fields(cands, args, props)
            op = next((o for o in cands[0].ops if head.startswith(o)), op)
    return ParsedName(
        name=name,
        op=op,
        fields=fields,
        args=args,
        props=props,
        schema=kind,
        _match=key,
        device_op=device_op,
        device_ops=device_ops,
        schema_file=sfile,
        schema_line=sline,
        derived=derived,
    )


def _parse_with_lark(name: str, schemas: SchemaSet | None) -> ParsedName:
    """The grammar's own parse (used when the fast path refuses a name the grammar accepts)."""
    tree = lark_parser().parse(name)
    toks = [Token(t.type, str(t), t.start_pos, t.end_pos) for t in lark_parser().lex(name)]
    starts = {t.start: i for i, t in enumerate(toks)}

    def span(node) -> tuple[int, int]:
        if isinstance(node, lark.Token):
            return starts[node.start_pos], starts[node.start_pos] + 1
        return starts[node.meta.start_pos], _end_index(toks, node.meta.end_pos)

    def prop(p) -> tuple[Token, str, tuple[int, int] | None]:
        key = p.children[0]
        kt = Token(key.type, str(key), key.start_pos, key.end_pos)
        val = p.children[1] if len(p.children) > 1 else None
        return kt, str(p.data), span(val) if val is not None else None

    head_node = tree.children[0]
    head = Token(head_node.type, str(head_node), head_node.start_pos, head_node.end_pos)
    arg_spans, prop_spans = None, []
    for ch in tree.children[1:]:
        if ch.data == "targs":
            arg_spans = [span(a) for a in ch.children if a is not None]
        elif ch.data == "lead":
            prop_spans.extend(prop(p) for p in ch.children)
        elif ch.data == "props":
            for p in ch.children:
                if p.data == "extra":
                    sp = span(p)
                    key, kind, prev = prop_spans[-1]
                    prop_spans[-1] = (key, kind, (prev[0] if prev else sp[0], sp[1]))
                else:
                    prop_spans.append(prop(p))
    return _build(name, *_from_spans(name, toks, head, arg_spans, prop_spans), schemas)


def _end_index(toks: list[Token], end_pos: int) -> int:
    for i, t in enumerate(toks):
        if t.end == end_pos:
            return i + 1
    return len(toks)


@lru_cache(maxsize=65536)
def _parse_cached(name: str, schemas: SchemaSet | None) -> ParsedName:
    return _parse(name, schemas)


def parse(name: str, schemas: Mapping[str, NameSchema] | None = None) -> ParsedName:
    """Parse one printed instance name. Never raises: bad input gives schema "error"."""
    if schemas is not None and not isinstance(schemas, SchemaSet):
        schemas = SchemaSet(schemas)
        return _parse(name, schemas)
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
        return _parse(name, schemas)  # type: ignore[arg-type]
    return _parse_cached(name, schemas)


def parse_many(
    names: Iterable[str], schemas: Mapping[str, NameSchema] | None = None
) -> list[ParsedName]:
    return [parse(n, schemas) for n in names]


# --------------------------------------------------------------------------- questions over the knowledge base


def _query(db: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    from ckkb.queries import sql  # noqa: PLC0415

    return [dict(r) for r in db.query(sql(name), params)]


def coverage(db: Any) -> dict[str, Any]:
    """How many GetTypeString() implementations have a name schema; which do not, and why."""
    rows = _query(db, "names_coverage", {"status": ""})
    by = {k: [r for r in rows if r["status"] == k] for k in ("matched", "partial", "unsupported")}

    def item(r: dict[str, Any]) -> dict[str, Any]:
        return {
            "device_op": r["device_op"],
            "op": r["op"],
            "file": r["file"],
            "line": r["line"],
            "reasons": json_value(r["reasons"]) or [],
        }

    return {
        "implementations": len(rows),
        "with_schema": len(by["matched"]) + len(by["partial"]),
        "matched": len(by["matched"]),
        "partial": len(by["partial"]),
        "unsupported": len(by["unsupported"]),
        "without_schema": [item(r) for r in by["unsupported"]],
        "partial_schemas": [item(r) for r in by["partial"]],
    }


# ckProfiler's data-type words (`Best Perf for datatype = bf16`) -> the A data types of instance rows
DTYPES: dict[str, set[str]] = {
    "bf16": {"bhalf_t", "BF16", "bf16"},
    "f16": {"half_t", "F16", "f16", "fp16"},
    "f32": {"float", "F32", "f32", "fp32"},
    "f64": {"double", "F64", "f64", "fp64"},
    "int8": {"int8_t", "I8", "i8", "int8"},
    "fp8": {"f8_t", "F8", "f8", "fp8", "f8_ocp_t", "f8_fnuz_t"},
    "bf8": {"bf8_t", "BF8", "bf8", "bf8_ocp_t", "bf8_fnuz_t"},
    "f4": {"f4x2_pk_t", "F4", "f4", "fp4"},
}
DTYPES["fp16"], DTYPES["fp32"], DTYPES["i8"], DTYPES["f8"], DTYPES["fp64"] = (
    DTYPES["f16"],
    DTYPES["f32"],
    DTYPES["int8"],
    DTYPES["fp8"],
    DTYPES["f64"],
)


def _dtype_ok(want: set[str], a_dtype: str | None) -> bool | None:
    """True/False when the entry's A data type is known; None when the source leaves it open."""
    w = (a_dtype or "").rsplit("::", 1)[-1]
    if not w or w[0].isupper() and w not in {x for v in DTYPES.values() for x in v}:
        return None  # empty or a template parameter name (ADataType, T): not decidable
    return w in want


def locate(
    db: Any, name: str, schemas: Mapping[str, NameSchema] | None = None, dtype: str | None = None
) -> dict[str, Any]:
    """The source entries (instance-list lines) whose printed name is `name`, with their
    registrations and per-arch availability. Printed names carry no data type, so lists of several
    types share names; `dtype` (ckProfiler's word: bf16, f16, fp8, ...) keeps the entries whose A
    type is that one (and those whose type the source leaves open). Raises CkkbError when the name
    cannot be keyed or dtype is unknown."""
    from ckkb.errors import CkkbError  # noqa: PLC0415

    if schemas is None:
        schemas = load_schemas(db)
    p = parse(name, schemas)
    if p.schema == "error":
        raise CkkbError(f"cannot parse {name[:120]!r}: {p.error['message']}")  # type: ignore[index]
    if p.schema != "matched" or p.key is None:
        known = bool(schemas) and bool(
            _candidates(
                schemas if isinstance(schemas, SchemaSet) else SchemaSet(schemas), p.op or ""
            )
        )
        why = (
            f"{p.op} is printed by a device op in this tree, but not in this form (an older CK release?)"
            if known
            else f"no GetTypeString() in this tree prints {p.op!r}"
        )
        raise CkkbError(
            f"cannot locate {name[:120]!r}: {why}",
            hint="`ckkb names coverage` lists the device ops whose names ckkb can read",
        )
    want = None
    if dtype:
        want = DTYPES.get(dtype.lower())
        if want is None:
            raise CkkbError(
                f"unknown data type {dtype!r}", hint="one of " + ", ".join(sorted(DTYPES))
            )
    rows = _query(db, "names_locate", {"key": p.key})
    if want is not None:
        rows = [r for r in rows if _dtype_ok(want, r["a_dtype"]) is not False]
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    avail_cache: dict[int, dict[str, Any]] = {}
    for r in rows:
        e = entries.setdefault(
            (r["file"], r["line"]),
            {
                "file": r["file"],
                "line": r["line"],
                "list": r["list_name"],
                "list_id": r["list_id"],
                "template": r["template"],
                "dir": r["dir"],
                "instance_id": r["instance_id"],
                "a_dtype": r["a_dtype"],
                "status": r["status"],
                "reason": r["reason"] or "",
                "printed_name": r["printed_name"],
                "registrations": [],
            },
        )
        rid = r["registration_id"]
        if rid is None:
            continue
        if rid not in avail_cache:
            avail_cache[rid] = {
                a["arch"]: {
                    "available": bool(a["available"]),
                    "layer": a["layer"],
                    "file": a["file"],
                    "line": a["line"],
                    "condition": a["condition"],
                }
                for a in _query(db, "names_availability", {"registration_id": rid})
            }
        e["registrations"].append(
            {
                "id": rid,
                "function": r["function"],
                "file": r["registration_file"],
                "line": r["registration_line"],
                "bindings": json_value(r["bindings"]) or {},
                "condition": r["condition"],
                "availability": avail_cache[rid],
            }
        )
    out = list(entries.values())
    active = [e for e in out if e["status"] == "active"]
    return {
        "name": name,
        "op": p.op,
        "device_op": p.device_op,
        "device_ops": list(p.device_ops),
        "key": p.key,
        "fields": p.fields,
        "derived": p.derived,
        "dtype": dtype,
        "entries": out,
        "ambiguous": len(active) > 1,
    }

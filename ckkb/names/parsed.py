"""`parse`: one printed instance name read by the grammar, then by its op's name schema."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import lark

from ckkb.fields import normalise
from ckkb.names.grammar import Token, describe, lex
from ckkb.names.reader import read
from ckkb.names.schemas import (
    Match,
    NameSchema,
    SchemaSet,
    field_name,
    field_value,
    ref_accepts,
    schema_fields,
)

MAX_NAME_CHARS = 16384  # the longest real name is a few hundred characters


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
    _match: Match | None = field(default=None, repr=False, compare=False)  # the schema's match

    @cached_property
    def normalised(self) -> dict[str, Any]:
        """The normalised cross-op columns (ckkb.fields.normalise), as the instances table has
        them."""
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
        return tuple(lex(self.name))

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


def parse(name: str, schemas: Mapping[str, NameSchema] | None = None) -> ParsedName:
    """Parse one printed instance name. Never raises: bad input gives schema "error"."""
    if schemas is not None and not isinstance(schemas, SchemaSet):
        return _parse(name, SchemaSet(schemas))
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
        return _parse(name, schemas)
    return _parse_cached(name, schemas)


def parse_many(
    names: Iterable[str], schemas: Mapping[str, NameSchema] | None = None
) -> list[ParsedName]:
    return [parse(n, schemas) for n in names]


# Module-level on purpose: a log names the same instance many times, and a repeated name then
# costs a dict lookup (README, Names). Bounded; keyed by the schema set's identity.
@lru_cache(maxsize=65536)
def _parse_cached(name: str, schemas: SchemaSet | None) -> ParsedName:
    return _parse(name, schemas)


def _error(name: str, message: str, position: int) -> ParsedName:
    return ParsedName(
        name=name, op=None, schema="error", error={"message": message, "position": position}
    )


_BINARY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")


def _parse(name: Any, schemas: SchemaSet | None) -> ParsedName:
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
    m = _BINARY.search(name)
    if m is not None:
        where = m.start()
        why = f"binary data: control or undecodable character {m.group()!r} at position {where}"
        return _error(name, why, where)
    try:
        head, args, prop_list = read(name)
    except lark.exceptions.UnexpectedInput as e:
        return _error(name, *describe(name, e))
    return _with_schema(name, head, args, prop_list, schemas)


def _with_schema(
    name: str,
    head: str,
    args: list[str],
    prop_list: list[tuple[str, str, str]],
    schemas: SchemaSet | None,
) -> ParsedName:
    """The ParsedName of a name the grammar read: fields from the first schema that fits it, else
    what the op's schemas can tell from its arguments and properties."""
    props = {key: val for key, _kind, val in prop_list}
    suffix = None
    if prop_list and prop_list[-1][1] == "bare":
        # ckProfiler's ", KBatch 2" is not part of the type string
        k, _, v = prop_list[-1]
        suffix = re.sub(r"\s*,?\s*" + re.escape(k) + r"\s+" + re.escape(v) + r"\s*,?\s*$", "", name)
    out = ParsedName(name=name, op=head, args=args, props=props)
    if not schemas:
        return out
    exact = schemas.candidates(head)
    texts = [name] if suffix is None else [name, suffix]
    for s in exact or schemas.glued(head):
        for text in texts:
            got = schema_fields(s, text)
            if got is None:
                continue
            out.fields, out.derived, out._match = got
            out.schema, out.device_op, out.schema_file, out.schema_line = (
                "matched",
                s.device_op,
                s.file,
                s.line,
            )
            out.device_ops = schemas.same_format(s)
            out.op = printed_op(head, s)
            return out
    if exact:  # this op in another form (an older release): what its arguments can tell
        out.fields = _generic_fields(exact, args, props)
    # else an op this tree does not know: generic, under its own name, no fields guessed
    return out


def printed_op(head: str, s: NameSchema) -> str:
    """The op `s` prints that a name read by `s` starts with: `head` itself, the last part of a
    qualified `ns::Op`, or (a glued name the schema's whole format read) the longest of its ops
    that `head` starts with."""
    if head in s.ops:
        return head
    tail = head.rsplit("::", 1)[-1]
    if tail in s.ops:
        return tail
    return max((o for o in s.ops if head.startswith(o)), key=len, default=head)


def _generic_fields(
    candidates: list[NameSchema], args: list[str], props: dict[str, str]
) -> dict[str, Any]:
    """Best effort for a name no schema matches (older CK releases printed other forms):
    properties whose key the op's schema prints, and leading template arguments while they fit
    the schema's arguments one by one."""
    fields: dict[str, Any] = {}
    for s in candidates:
        refs = s.prop_refs
        for k, v in props.items():
            t = refs.get(k)
            if t is not None and "ref" in t and ref_accepts(t, v):
                fields.setdefault(field_name(t), field_value(t, v))
        for t, a in zip(s.arg_refs, args, strict=False):
            if t is None or not ref_accepts(t, a):
                break
            fields.setdefault(field_name(t), field_value(t, a))
        if fields:
            break
    return fields


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

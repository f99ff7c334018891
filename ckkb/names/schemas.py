"""Name schemas: each device op's GetTypeString() as a token list (made by
`ckkb.extract.typestrings`, stored in `name_schemas`), turned into a regular expression that reads a
printed name's values under CK's own template parameter names."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Any

LAYOUT_INITIAL = {"R": "Row", "C": "Col"}


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

    # Derived once per schema and kept on it (cached_property writes the instance's __dict__, which
    # a frozen dataclass allows): a schema set is read for many names.

    @cached_property
    def regex(self) -> tuple[re.Pattern[str], list[dict[str, Any]]]:
        """The name's regex and, per group, the token it reads."""
        groups: list[dict[str, Any]] = []
        rx = re.compile(r"\s*" + _tokens_re(self.tokens, groups) + r"\s*")
        return rx, groups

    @cached_property
    def plan(self) -> Plan:
        return _plan(self.regex[1])

    @cached_property
    def prop_refs(self) -> dict[str, dict[str, Any]]:
        """`Key: <ref>` pairs: property key -> the ref token printed after it."""
        out: dict[str, dict[str, Any]] = {}
        prev = ""
        for t in self.tokens:
            if "lit" in t:
                prev += t["lit"]
                continue
            if "ref" in t or "derived" in t:
                m = re.search(r"(\w+)\s*:\s*$", prev)
                if m:
                    out.setdefault(m.group(1), t)
            prev = ""
        return out

    @cached_property
    def arg_refs(self) -> list[dict[str, Any] | None]:
        """The template arguments, in order: the ref when an argument is exactly one ref."""
        depth = 0
        args: list[list[Any]] = []
        cur: list[Any] = []
        for t in self.tokens:
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


def _lit_re(text: str) -> str:
    out = []
    for piece in re.split(r"(\s+)", text):
        if not piece:
            continue
        out.append(r"\s*" if piece.isspace() else re.escape(piece))
    return "".join(out)


VALUE_RE = {
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
                pat = VALUE_RE.get(t.get("conv") or "", None) or VALUE_RE.get(
                    t.get("kind") or "", _ANY
                )
            groups.append(t)
            out.append(f"(?P<g{len(groups) - 1}>{pat})")
        else:  # derived or unknown: any value, recorded under its own name
            groups.append(t)
            out.append(f"(?P<g{len(groups) - 1}>{_ANY})")
    return "".join(out)


def field_name(t: dict[str, Any]) -> str:
    if "ref" in t:
        return f"{t['ref']}[{t['index']}]" if t.get("conv") == "at" else t["ref"]
    return t.get("derived") or t.get("expr") or "?"


def as_value(text: str) -> Any:
    t = text[1:] if text[:1] in "+-" else text
    return int(text) if t.isdigit() and t.isascii() else text


def _layout(v: str) -> str:
    return LAYOUT_INITIAL.get(v, v)


def _boolean(v: str) -> Any:
    return v in ("1", "true") if v in ("0", "1", "true", "false") else as_value(v)


def field_value(t: dict[str, Any], text: str) -> Any:
    """A printed value as the field holds it (layout initials spelt out, 0/1 of a bool as bool)."""
    if t.get("conv") == "layout_initial":
        return _layout(text)
    if t.get("kind") == "bool" and text in ("0", "1", "true", "false"):
        return text in ("1", "true")
    return as_value(text)


@dataclass(frozen=True)
class Plan:
    """How one schema's regex groups become fields.

    steps: (group, field name, converter, is a run-time value) in the order the name prints them;
    is_ref: per group, whether its text is a ref's value (the rest are '*' in the key);
    simple: no parameter printed twice (else two prints must agree).
    """

    steps: tuple[tuple[int, str, Callable[[str], Any], bool], ...]
    is_ref: tuple[bool, ...]
    simple: bool


def _plan(groups: list[dict[str, Any]]) -> Plan:
    steps: list[tuple[int, str, Callable[[str], Any], bool]] = []
    is_ref: list[bool] = []
    names_seen = []
    for gi, t in enumerate(groups, start=1):
        if "alt" in t:
            is_ref.append(False)
            continue
        name = field_name(t)
        if "ref" not in t:
            steps.append((gi, name, as_value, True))
            is_ref.append(False)
            continue
        is_ref.append(True)
        names_seen.append(name)
        conv, kind = t.get("conv"), t.get("kind")
        convert: Callable[[str], Any]
        if conv == "layout_initial":
            convert = _layout
        elif kind == "bool":
            convert = _boolean
        elif kind == "int" and conv in ("value", "at", None):
            convert = int  # the group's pattern only matches integers
        elif conv in ("spec", "enum", "layout_name"):
            convert = str  # kept as printed
        else:
            convert = as_value
        steps.append((gi, name, convert, False))
    return Plan(tuple(steps), tuple(is_ref), len(set(names_seen)) == len(names_seen))


Match = tuple[str, int, int, tuple[tuple[int, int], ...], tuple[bool, ...]]


def schema_fields(s: NameSchema, text: str) -> tuple[dict[str, Any], dict[str, Any], Match] | None:
    """(fields, run-time values, match) of `text` read by the schema; None when it does not fit."""
    m = s.regex[0].fullmatch(text)
    if m is None:
        return None
    plan = s.plan
    g = m.groups()
    fields: dict[str, Any] = {}
    derived: dict[str, Any] = {}
    for i, n, convert, runtime in plan.steps:
        v = g[i - 1]
        if v is None:
            continue  # in a branch of a conditional not taken
        val = convert(v)
        if runtime:
            derived[n] = val
            continue
        if not plan.simple and fields.get(n, val) != val:
            return None  # one parameter printed twice with two values: not this schema
        fields[n] = val
    return fields, derived, (text, m.start(), m.end(), m.regs, plan.is_ref)


def ref_accepts(t: dict[str, Any], text: str) -> bool:
    conv = t.get("conv")
    if conv == "enum" and t.get("map"):
        return text in t["map"].values()
    pat = VALUE_RE.get(conv or "") or VALUE_RE.get(t.get("kind") or "")
    return pat is None or re.fullmatch(pat, text) is not None


class SchemaSet(dict[str, NameSchema]):
    """name_schemas keyed by "device_op@file", indexed by printed op name. Hashable by identity
    (parse memoises per set)."""

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
                # the shortest class name first: the plain op rather than its batched variants
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
                    rx, groups = s.regex  # the same regex and group names read a name alike
                    fmt = (
                        rx.pattern
                        + "|"
                        + "|".join(field_name(t) if "alt" not in t else "" for t in groups)
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

    def candidates(self, head: str) -> list[NameSchema]:
        """The schemas whose op is exactly `head` (or the last part of a qualified `ns::Op`).
        Never a shorter op that `head` merely starts with: `DeviceGemmXdl_C_Shuffle` (CK 2022) is
        not `DeviceGemmXdl`."""
        idx = self.by_op()
        hit = idx.get(head)
        if hit:
            return hit
        if "::" in head:
            return idx.get(head.rsplit("::", 1)[1]) or []
        return []

    def glued(self, head: str) -> list[NameSchema]:
        """Schemas that may print `head` as one word with their fields glued on
        (`GemmXdlSplitKCShuffle_MNKPadding_RRR_B256_...`): those whose op is a `_`-separated
        prefix of `head`, longest first. Only a full match of such a schema's format reads the
        name; a prefix alone proves nothing (parse never cuts a name down to one)."""
        idx = self.by_op()
        parts = head.split("_")
        out: list[NameSchema] = []
        for k in range(len(parts) - 1, 0, -1):
            out.extend(idx.get("_".join(parts[:k]), ()))
        return out


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


def load_schemas(db: Any, source_id: int | None = None) -> SchemaSet:
    """The name schemas stored in the knowledge base (table name_schemas) that have tokens: those
    of the tree `source_id` (ckkb.queries.name_trees chooses it), or every stored one."""
    out = SchemaSet()
    if "name_schemas" not in db.table_names():
        return out
    which = "name_schemas" if source_id is None else "name_schemas_of_source"
    query = resources.files("ckkb.queries").joinpath("lookups", f"{which}.sql").read_text()
    for row in db.query(query, {"source_id": source_id}):
        s = schema_from_row(row)
        out[f"{s.device_op}@{s.file}"] = s  # one class name may be defined in two headers
    return out

"""One aiter tree as the version comparisons see it: its kernel lists, runtime configs, config
tables and audit findings, read from a knowledge base (one scoped connection) or extracted from a
tree on disk, so `ckkb diff` and `ckkb review` compare the two the same way whatever they came
from.

A knowledge base's tree is read back from its rows (no file is opened: the tree may have moved
since): config tables are rebuilt from aiter_config_files / aiter_config_rows, findings are the
ones its build's audit stage stored. A tree on disk is extracted in-process and audited with the
same rules (ckkb.audit.engine.run_rules), without the knowledge-base rules.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.audit.context import AuditContext, add_default_tables, load_tree
from ckkb.audit.engine import KB_RULES, run_rules
from ckkb.audit.model import Finding
from ckkb.extract.aiter_configs import INT_KEYS, KEY_COLUMNS, ConfigTable, arch_of
from ckkb.kb.rows import stored_rows
from ckkb.kb.schema.aiter import AiterKernelRow

_INT_KEYS = frozenset(INT_KEYS)
_STR_KEYS = frozenset(KEY_COLUMNS) - _INT_KEYS


@dataclass
class AiterSide:
    """One side of a comparison. `label` names it for people (a tree name, a path, PATH@REV);
    `skipped_rules` are rules its findings could not include (they are left out of both sides
    when the two were audited differently)."""

    label: str
    origin: dict[str, Any]
    ctx: AuditContext
    findings: list[Finding]
    skipped_rules: frozenset[str] = frozenset()
    _kernel_at: dict[tuple[str, int], AiterKernelRow] = field(default_factory=dict, repr=False)
    _row_at: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict, repr=False)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # what is derived once

    def table(self, rel: str) -> ConfigTable | None:
        for t in self.ctx.tables:
            if t.rel == rel:
                return t
        return None

    def row_at(self, rel: str, line: int) -> dict[str, Any] | None:
        """The row of config table `rel` at `line` (None: no such table or data line)."""
        if rel not in self._row_at:
            t = self.table(rel)
            self._row_at[rel] = dict(t.rows) if t is not None else {}
        return self._row_at[rel].get(line)

    def kernel_at(self, file: str, line: int) -> AiterKernelRow | None:
        if not self._kernel_at:
            self._kernel_at = {(k.file, k.line): k for k in self.ctx.kernels}
        return self._kernel_at.get((file, line))


def from_connection(conn: Any, label: str | None = None) -> AiterSide:
    """The aiter tree a scoped knowledge-base connection reads (ckkb.kb.db.open_db(tree=...))."""
    from ckkb.kb.trees import list_trees
    from ckkb.queries import lookup

    raw = conn.conn if hasattr(conn, "conn") else conn  # a sqlite_utils.Database or a connection
    read = {r[0] for r in raw.execute(lookup("scoped_tree_ids"))}
    held = [t for t in list_trees(raw) if t.id in read]
    trees = [t for t in held if t.kind == "aiter"]
    if len(trees) != 1:
        from ckkb.errors import CkkbError

        if not trees:
            raise CkkbError("the knowledge base holds no aiter tree")
        names = ", ".join(t.name for t in trees)
        raise CkkbError(
            f"this connection reads several aiter trees ({names}): open it scoped to one, "
            "with ckkb.kb.db.open_db(path, readonly=True, tree=NAME)"
        )
    tree = trees[0]
    ctx = AuditContext(
        root=None,
        pkg=None,  # merged sets come from the stored model_configs, never a glob of a disk
        kernels=stored_rows(raw, "aiter_kernels"),
        lists=stored_rows(raw, "aiter_kernel_lists"),
        runtime=stored_rows(raw, "aiter_runtime_configs"),
        options=stored_rows(raw, "aiter_tuner_options"),
    )
    rows_of: dict[int, list[Any]] = defaultdict(list)
    for r in stored_rows(raw, "aiter_config_rows"):
        rows_of[r.file_id].append(r)
    for f in stored_rows(raw, "aiter_config_files"):
        t = ConfigTable(f.file, columns=list(f.columns), error=f.error)
        for r in sorted(rows_of.get(f.id, []), key=lambda r: r.line):
            t.rows.append((r.line, _row_values(f.columns, r)))
        ctx.tables.append(t)
        ctx.paths[t.rel] = Path(t.rel)
        ctx.ops[t.rel] = ctx.op_of_table(t.rel, t.columns)
    findings = [
        Finding(f.rule, f.severity, f.file, f.line, f.message, dict(f.evidence or {}), f.op)
        for f in stored_rows(raw, "aiter_audit_findings")
    ]
    ck = any(t.kind == "ck" for t in held)
    skipped = frozenset(r for r in KB_RULES if r != "tile-gated" or not ck)
    origin = {
        "kind": "tree",
        "name": tree.name,
        "path": tree.path,
        "version": tree.version,
        "commit": tree.commit,
    }
    return AiterSide(label or tree.name, origin, ctx, findings, skipped)


def _row_values(columns: list[Any], r: Any) -> dict[str, Any]:
    values = r.values or {}
    return {c: getattr(r, c) if c in KEY_COLUMNS else values.get(c) for c in columns}


def from_tree(path: str | Path, label: str | None = None, origin: dict | None = None) -> AiterSide:
    """An aiter tree on disk (a checkout, or a revision written out by ckkb.versions.revisions),
    extracted and audited now."""
    from ckkb import sources

    tree = sources.aiter_tree(path)
    ctx = load_tree(tree)
    add_default_tables(ctx)
    findings, _ = run_rules(ctx)
    info = {"kind": "path", "path": str(tree.root), "version": tree.version, "commit": None}
    return AiterSide(label or str(path), origin or info, ctx, findings, frozenset(KB_RULES))


# ---------------------------------------------------------------- canonical values


def canon(column: str, value: Any) -> Any:
    """One spelling of a cell whichever way it was read (a CSV now, a knowledge base's typed
    columns and JSON): key columns as the knowledge base types them, NaN as None, whole floats
    as ints."""
    if isinstance(value, float) and math.isnan(value):
        value = None
    if column in _INT_KEYS:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if value is None or isinstance(value, int) else str(value)
    if column in _STR_KEYS:
        return None if value is None else str(value)
    if column == "_tag":
        return "" if value is None else str(value)
    if isinstance(value, float) and value.is_integer() and not math.isinf(value):
        return int(value)
    return value


def canon_row(columns: list[str], v: dict[str, Any]) -> dict[str, Any]:
    return {c: canon(c, v.get(c)) for c in columns}


def key_values(t: ConfigTable, v: dict[str, Any], cols: list[str]) -> tuple:
    """A row's lookup key over `cols` (both trees' key columns for its op): a column the file
    lacks reads as aiter 2026's merge fills it (gfx from cu_num, `_tag` empty)."""
    out = []
    for c in cols:
        x = v.get(c) if c in t.columns else None
        if c == "gfx" and not x:
            x = arch_of(v)
        out.append(canon(c, x))
    return tuple(out)


def row_text(columns: list[str], v: dict[str, Any]) -> str:
    """A row's content as one comparable string (column order kept)."""
    return json.dumps(list(canon_row(columns, v).items()), default=str)


# ---------------------------------------------------------------- findings matched across sides

_LINE_WORDS = re.compile(r"\blines? \d+(?:(?:, | and |-)\d+)*")
_FILE_LINE = re.compile(r"(\.(?:csv|py|txt|env|sh)):\d+")
_VOLATILE = frozenset(
    {"line", "lines", "first_line", "kernel_line", "rule_line", "count", "rows", "messages"}
)


def _stable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _stable(x) for k, x in sorted(v.items()) if k not in _VOLATILE}
    if isinstance(v, list):
        return [_stable(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _message(m: str) -> str:
    return _FILE_LINE.sub(r"\1:#", _LINE_WORDS.sub("line #", m))


def fingerprint(side: AiterSide, f: Finding, key_cols: dict[str, list[str]]) -> str:
    """What a finding is about, without line numbers (lines shift when rows are added above):
    rule, file, the row or kernel-list entry at its line (a tuned row by its lookup key over
    key_cols[op], so a column added to the file changes nothing; another row by its content),
    and its evidence less lines and counts (its message, line numbers taken out, when it has no
    other evidence)."""
    anchor: Any = None
    t = side.table(f.file)
    v = side.row_at(f.file, f.line) if t is not None else None
    if t is not None and v is not None:
        cols = key_cols.get(side.ctx.ops.get(t.rel) or "")
        if cols and t.kind == "tuned":
            anchor = json.dumps(key_values(t, v, cols), default=str)
        else:
            anchor = row_text(t.columns, v)
    elif t is None:
        k = side.kernel_at(f.file, f.line)
        if k is not None:
            anchor = [k.list_name, k.key, json.dumps(k.values, sort_keys=True, default=str)]
    evidence = _stable(f.evidence)
    key = [f.rule, f.file, anchor, evidence or _message(f.message)]
    return json.dumps(key, sort_keys=True, default=str)

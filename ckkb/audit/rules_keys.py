"""Keys: duplicate keys within a file, and the runtime's merge of several files for one op.

The merge is predicted from the rule recognised in the audited tree's aiter/jit/core.py
(ckkb.extract.aiter_tuner_reader.MERGE_RULES). For the default wheel ("keep-fastest", core.py
update_config_files): one file is used as is; several are concatenated, the first must exist,
the others are skipped when missing, every file must have the first one's columns (assert), and
rows are sorted by `us` (pandas quicksort: ties have no defined winner) and de-duplicated on the
columns of the op's untuned CSV keeping the first, i.e. the fastest. Without an untuned CSV no
de-duplication happens at all.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ckkb.archs import PARTS
from ckkb.audit.context import AuditContext, merged_set, resolve
from ckkb.audit.model import Finding, finding
from ckkb.extract.aiter_configs import ConfigTable, arch_of, read_csv
from ckkb.kb.schema.aiter import AiterRuntimeConfigRow

LIST_LIMIT = 20


def lookup_key(ctx: AuditContext, t: ConfigTable, op: str | None) -> list[str]:
    """Columns a row is looked up by, from the tree: the op's untuned columns, plus cu_num, gfx
    and _tag where that core.py appends them (else gfx/cu_num, which the runtime's lookup reads).
    No op or no untuned CSV: no key, and none is guessed from column names."""
    rc = ctx.runtime_for(op)
    if rc is None or not rc.merge_key:
        return []
    if any(k.startswith("key_") for k in rc.merge_evidence):
        # core.py names its key (untuned header + cu_num/gfx/_tag): exactly those columns
        return [c for c in rc.merge_key if c in t.columns]
    base = [c for c in ("gfx", "cu_num") if c in t.columns]
    return base + [c for c in rc.merge_key if c in t.columns and c not in base]


def _us(v: Any) -> float:
    return (
        v
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
        else math.inf
    )


def _part_name(cu: Any) -> str:
    names = sorted({p.name for p in PARTS if p.cu_num == cu})
    return f" ({'/'.join(names)})" if names else ""


def duplicate_keys(ctx: AuditContext, t: ConfigTable) -> list[Finding]:
    op = ctx.ops.get(t.rel)
    key = lookup_key(ctx, t, op)
    if not key or t.kind == "other" and "us" not in t.columns:
        return []
    first: dict[tuple, int] = {}
    out = []
    for ln, v in t.rows:
        k = tuple(v.get(c) for c in key)
        if k in first:
            out.append(
                finding(
                    "duplicate-key",
                    t.rel,
                    ln,
                    f"duplicate key {dict(zip(key, k, strict=True))}: same as line {first[k]}",
                    op=op,
                    severity="error" if t.kind == "tuned" else "warning",
                    key=dict(zip(key, k, strict=True)),
                    first_line=first[k],
                )
            )
        else:
            first[k] = ln
    return out


def _table(ctx: AuditContext, path: str) -> tuple[ConfigTable | None, bool]:
    for t in ctx.tables:
        if t.rel == path:
            return t, True
    p = resolve(ctx, path)
    if not p.is_file():
        return None, False
    try:
        return read_csv(path, p.read_bytes()), True
    except OSError:
        return None, False


def merge_preview(
    ctx: AuditContext,
    rc: AiterRuntimeConfigRow,
    files: list[str] | None = None,
    env_set: bool | None = None,
) -> dict[str, Any]:
    """What the runtime would load for one op: files,
    merged rows, losers, rows lacking gfx, errors."""
    if files is None:
        files, env_set = merged_set(ctx, rc)
    rule = {
        "id": rc.merge_rule,
        "file": rc.file,
        "line": rc.merge_rule_line,
        "description": _rule_text(rc.merge_rule),
        "evidence": rc.merge_evidence,
    }
    out: dict[str, Any] = {
        "op": rc.op,
        "env_var": rc.env_var,
        "env_set": bool(env_set),
        "rule": rule,
        "merge_key": list(rc.merge_key),
        "files": [],
        "merged_rows": 0,
        "losers": [],
        "gfx_missing": [],
        "dropped_by_cu_num": {},
        "errors": [],
        "deduplicated": False,
    }
    ev = rc.merge_evidence or {}
    # aiter 2026 core.py: every file is optional (skipped when missing) and the column lists are
    # unioned (missing columns filled); the default wheel reads the first file unconditionally
    # and asserts equal columns.
    union = "union_columns" in ev and "first_file_required" not in ev
    named_key = any(k.startswith("key_") for k in ev)
    tables: list[tuple[str, ConfigTable]] = []
    for i, f in enumerate(files):
        t, exists = _table(ctx, f)
        out["files"].append(
            {
                "file": f,
                "exists": exists,
                "rows": len(t.rows) if t else 0,
                # records ckkb could not read (input-error: e.g. a field short); pandas reads
                # them, padded, so the runtime merges them too
                "rows_unread": len(t.problems) if t else 0,
                "columns": t.columns if t else [],
            }
        )
        if t is None:
            if i == 0 and len(files) == 1 and not env_set:
                out["errors"].append(
                    {
                        "kind": "default-missing",
                        "file": f,
                        "message": f"{f} does not exist: the op runs untuned",
                    }
                )
            elif i == 0 and len(files) > 1 and not union:
                out["errors"].append(
                    {
                        "kind": "first-file-missing",
                        "file": f,
                        "message": f"{f} does not exist: the runtime's "
                        "pd.read_csv of the first file fails",
                    }
                )
            elif not union:  # aiter 2026 skips a missing file by design (logged at info)
                out["errors"].append(
                    {
                        "kind": "file-missing",
                        "file": f,
                        "message": f"{f} does not exist: skipped by the runtime",
                    }
                )
            continue
        if t.error:
            out["errors"].append({"kind": "unreadable", "file": f, "message": f"{f}: {t.error}"})
            continue
        tables.append((f, t))
    for f, t in tables:
        for ln, v in t.rows:
            if not v.get("gfx"):
                out["gfx_missing"].append(
                    {"file": f, "line": ln, "cu_num": v.get("cu_num"), "gfx": arch_of(v)}
                )
    if union and len(files) > 1 and not tables:
        out["errors"].append(
            {
                "kind": "no-file",
                "file": files[0],
                "message": f"none of the {len(files)} files exists: the runtime raises "
                "FileNotFoundError",
            }
        )
    rows = [(f, ln, v) for f, t in tables for ln, v in t.rows]
    out["rows"] = len(rows)
    if len(files) <= 1 or rc.merge_rule == "unknown":
        out["merged_rows"] = len(rows)
        if rc.merge_rule == "unknown" and len(files) > 1:
            out["errors"].append(
                {
                    "kind": "rule-unknown",
                    "file": rc.file,
                    "message": "merge rule not recognised in core.py; merged rows not predicted",
                }
            )
        return out
    all_cols = list(dict.fromkeys(c for _, t in tables for c in t.columns))
    if union:
        rows = [(f, ln, _filled(v, all_cols)) for f, ln, v in rows]
    elif tables:
        cols0 = tables[0][1].columns
        for f, t in tables[1:]:
            if t.columns != cols0:
                out["errors"].append(
                    {
                        "kind": "columns-differ",
                        "file": f,
                        "first": tables[0][0],
                        "columns": t.columns,
                        "first_columns": cols0,
                        "message": f"{f} columns differ from {tables[0][0]}: the runtime's "
                        "column assert fails and aiter does not start",
                    }
                )
    if any(e["kind"] in ("columns-differ", "first-file-missing") for e in out["errors"]):
        out["merged_rows"] = None
        return out
    if not rc.merge_key:
        out["merged_rows"] = len(
            rows
        )  # no untuned CSV: core.py only logs a warning and keeps every row
        return out
    key = [c for c in rc.merge_key if c in all_cols] if named_key else list(rc.merge_key)
    out["merge_key"] = key
    missing = [c for c in key if tables and c not in tables[0][1].columns and not union]
    if missing:
        out["errors"].append(
            {
                "kind": "key-missing",
                "file": tables[0][0],
                "message": f"merge key columns {missing} missing: drop_duplicates raises",
            }
        )
        out["merged_rows"] = None
        return out
    out["deduplicated"] = True
    groups: dict[tuple, list[tuple[str, int, dict]]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[2].get(c) for c in key)].append(r)
    dropped: dict[Any, int] = defaultdict(int)
    for k, grp in groups.items():
        if len(grp) < 2:
            continue
        best = min(_us(g[2].get("us")) for g in grp)
        tied = [g for g in grp if _us(g[2].get("us")) == best]
        winner = tied[0]
        for g in grp:
            if g is winner:
                continue
            same_part = g[2].get("cu_num") == winner[2].get("cu_num") and g[2].get("gfx") == winner[
                2
            ].get("gfx")
            loser = {
                "file": g[0],
                "line": g[1],
                "key": dict(zip(key, k, strict=True)),
                "us": g[2].get("us"),
                "cu_num": g[2].get("cu_num"),
                "gfx": g[2].get("gfx"),
                "same_part": same_part,
                "tie": _us(g[2].get("us")) == best,
                "winner": {
                    "file": winner[0],
                    "line": winner[1],
                    "us": winner[2].get("us"),
                    "cu_num": winner[2].get("cu_num"),
                },
            }
            out["losers"].append(loser)
            if not same_part:
                dropped[g[2].get("cu_num")] += 1
    out["dropped_by_cu_num"] = {
        str(k): v for k, v in sorted(dropped.items(), key=lambda kv: str(kv[0]))
    }
    out["merged_rows"] = len(groups)
    out["refuses_to_start"] = rc.merge_rule.startswith("reject-duplicates") and bool(out["losers"])
    return out


_FILL_DEFAULTS = {"xbf16": 0, "run_1stage": 0, "ksplit": 0}


def _filled(v: dict[str, Any], cols: list[str]) -> dict[str, Any]:
    """A row as aiter 2026's merge sees it: missing columns filled (gfx from cu_num, else 0),
    `_tag` NaN as ""."""
    out = dict(v)
    for c in cols:
        if c not in out:
            out[c] = arch_of(v) if c == "gfx" else _FILL_DEFAULTS.get(c, 0)
    if "_tag" in out and out["_tag"] is None:
        out["_tag"] = ""
    return out


def _rule_text(rule_id: str) -> str:
    from ckkb.extract.aiter_tuner_reader import MERGE_RULES

    return MERGE_RULES.get(rule_id, MERGE_RULES["unknown"])


def merge_findings(ctx: AuditContext, preview: dict[str, Any]) -> list[Finding]:
    op = preview["op"]
    rule = preview["rule"]
    cite = f"{rule['file']}:{rule['line']}" if rule.get("line") else rule["file"]
    out: list[Finding] = []
    for e in preview["errors"]:
        if e["kind"] == "columns-differ":
            out.append(
                finding(
                    "merge-columns-differ",
                    e["file"],
                    1,
                    e["message"],
                    op=op,
                    columns=e["columns"],
                    first=e["first"],
                    first_columns=e["first_columns"],
                )
            )
        elif e["kind"] in ("first-file-missing", "file-missing"):
            sev = "error" if e["kind"] == "first-file-missing" else "warning"
            where = ctx.env.path if preview["env_set"] and ctx.env else e["file"]
            line = ctx.env.lines.get(preview["env_var"], 0) if preview["env_set"] and ctx.env else 0
            out.append(
                finding(
                    "merge-file-missing",
                    where,
                    line,
                    e["message"],
                    op=op,
                    severity=sev,
                    file=e["file"],
                )
            )
    strict = rule["id"].startswith("reject-duplicates")
    drops: dict[tuple[str, Any], list[dict]] = defaultdict(list)
    for lo in preview["losers"]:
        if lo["same_part"]:
            if lo["file"] == lo["winner"]["file"]:
                continue  # a duplicate within one file: duplicate-key reports it
            w = lo["winner"]
            outcome = (
                "the runtime then refuses to start"
                if strict
                else (
                    "tie on us: pandas' sort is not stable, either row may win"
                    if lo["tie"]
                    else f"{w['file']}:{w['line']} wins (us {w['us']} < {lo['us']})"
                )
            )
            out.append(
                finding(
                    "merge-collision",
                    lo["file"],
                    lo["line"],
                    f"key {lo['key']} (cu_num {lo['cu_num']}) is also in "
                    f"{w['file']}:{w['line']}; under rule {rule['id']} ({cite}) {outcome}",
                    op=op,
                    severity="error" if strict else None,
                    key=lo["key"],
                    us=lo["us"],
                    winner=w,
                    merge_rule=rule["id"],
                    rule_line=cite,
                )
            )
        else:
            drops[(lo["file"], lo["cu_num"])].append(lo)
    for (f, cu), los in sorted(drops.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        keycols = ", ".join(preview["merge_key"])
        winners = sorted({str(lo["winner"]["cu_num"]) for lo in los})
        out.append(
            finding(
                "merge-drops-rows",
                f,
                los[0]["line"],
                f"{len(los)} rows for cu_num={cu}{_part_name(cu)} are "
                f"dropped by the merge: its key ({keycols}) omits cu_num, "
                f"so a faster row tuned for cu_num {'/'.join(winners)} replaces them ({cite})",
                op=op,
                cu_num=cu,
                count=len(los),
                lines=[lo["line"] for lo in los[:LIST_LIMIT]],
                winners=[{"line": lo["line"], "winner": lo["winner"]} for lo in los[:LIST_LIMIT]],
            )
        )
    return out


def key_findings(ctx: AuditContext) -> list[Finding]:
    out: list[Finding] = []
    for t in ctx.tables:
        if t.error is None:
            out += duplicate_keys(ctx, t)
    if ctx.defaults:
        for rc in ctx.runtime:
            out += merge_findings(ctx, merge_preview(ctx, rc))
    else:
        by_op: dict[str, list[str]] = defaultdict(list)
        for t in ctx.tables:
            op = ctx.ops.get(t.rel)
            op_rc = ctx.runtime_for(op)
            usable = (
                t.error is None
                and t.rows
                and (op_rc is None or all(c in t.columns for c in op_rc.merge_key))
            )
            if op and t.kind == "tuned" and usable:
                by_op[op].append(
                    t.rel
                )  # CSVs given together for one op are previewed as one merged set
        for op_name, files in by_op.items():
            op_rc = ctx.runtime_for(op_name)
            if op_rc is not None and len(files) > 1:
                out += merge_findings(ctx, merge_preview(ctx, op_rc, files, True))
    return out


__all__ = [
    "key_findings",
    "merge_preview",
    "merge_findings",
    "duplicate_keys",
    "lookup_key",
    "Path",
]

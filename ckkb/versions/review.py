"""`ckkb review BASE HEAD`: what a tuned-config change does, for its reviewer.

Four answers, each about HEAD against BASE: audit findings that are new (matched by rule, file
and the content they point at, never by line: ckkb.versions.aiter_side.fingerprint); rows
replaced under the same key (old and new us, and their ratio); rows the run-time merge now drops
or shadows, or never loads; kernels whose ids moved, and rows whose kernelId now names another
kernel. The comparison itself is ckkb.versions.aiter_diff's.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import ckkb
from ckkb.audit.model import Finding, Rule
from ckkb.audit.writers import finding_dict
from ckkb.versions.aiter_diff import RowRef, compare, key_columns, key_of, row_item, side_rows
from ckkb.versions.aiter_side import AiterSide, fingerprint, row_text

TEXT_LIMIT = 40  # items per section in text output; --format json lists every one

RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("review-row-replaced", "note", "review", "a row replaced under the same key"),
        Rule(
            "review-row-dropped",
            "warning",
            "review",
            "a row the run-time merge now drops, shadows or never loads",
        ),
        Rule("review-kernel-moved", "warning", "review", "a kernel-list id that moved"),
        Rule(
            "review-row-kernel-changed",
            "warning",
            "review",
            "a tuned row whose kernelId now names another kernel",
        ),
    )
}


def review(base: AiterSide, head: AiterSide) -> dict[str, Any]:
    """The review of HEAD against BASE, JSON-ready: `base`, `head` (as aiter_diff's from/to),
    `findings` {"new": [finding], "base", "head", "not_compared"}, `replaced` (aiter_diff's
    retimed and changed items), `merge` {"dropped": [...]}, `kernels` {"renumbered",
    "added", "removed", "rows_kernel_changed"}, `rows` {"added", "removed"}, `summary`."""
    d = compare(base, head)
    new, not_compared = new_findings(base, head)
    rows = d["config_rows"]
    out = {
        "tool": "ckkb review",
        "version": ckkb.__version__,
        "base": d["from"],
        "head": d["to"],
        "findings": {
            "new": [finding_dict(f) for f in new],
            "base": len(base.findings),
            "head": len(head.findings),
            "not_compared": sorted(not_compared),
        },
        "replaced": rows["retimed"] + rows["changed"],
        "merge": {"dropped": merge_dropped(base, head)},
        "kernels": {
            "renumbered": d["kernels"]["renumbered"],
            "added": d["kernels"]["added"],
            "removed": d["kernels"]["removed"],
            "rows_kernel_changed": d["rows_kernel_changed"],
        },
        "rows": {"added": rows["added"], "removed": rows["removed"]},
    }
    out["summary"] = {
        "new_findings": len(new),
        "replaced": len(out["replaced"]),
        "dropped": len(out["merge"]["dropped"]),
        "kernels_moved": sum(1 for r in d["kernels"]["renumbered"] if r["kind"] == "moved"),
        "ids_reassigned": sum(1 for r in d["kernels"]["renumbered"] if r["kind"] == "reassigned"),
        "rows_kernel_changed": len(d["rows_kernel_changed"]),
        "rows_added": len(rows["added"]),
        "rows_removed": len(rows["removed"]),
    }
    return out


def new_findings(base: AiterSide, head: AiterSide) -> tuple[list[Finding], set[str]]:
    """HEAD's findings that BASE does not have (as many times as HEAD has more of them), and
    the rules left out because only one side could run them."""
    skip = set(base.skipped_rules ^ head.skipped_rules)
    ops = {op for s in (base, head) for op in s.ctx.ops.values() if op}
    cols = {op: key_columns(base, head, op) for op in ops}
    seen = Counter(fingerprint(base, f, cols) for f in base.findings if f.rule not in skip)
    out = []
    for f in head.findings:
        if f.rule in skip:
            continue
        fp = fingerprint(head, f, cols)
        if seen[fp] > 0:
            seen[fp] -= 1
        else:
            out.append(f)
    return out, skip


def _dropped(s: AiterSide) -> list[RowRef]:
    rows, _ = side_rows(s)
    return [r for rs in rows.values() for r in rs if r.loser is not None or not r.loaded]


def merge_dropped(base: AiterSide, head: AiterSide) -> list[dict[str, Any]]:
    """Rows of HEAD the merge drops (another part's row wins: the key omits cu_num), shadows
    (a faster row of the same key wins, or the runtime refuses duplicates) or never loads (the
    file is not in the op's merged set), that BASE did not already lose the same way. Under a
    core.py that rejects duplicate keys, a shadowed row means aiter does not start
    (`refuses_to_start`)."""

    def ident(r: RowRef) -> tuple:
        return (r.op, r.file, r.loser is None, row_text(r.table.columns, r.values))

    seen = Counter(ident(r) for r in _dropped(base))
    out = []
    cols_of: dict[str, list[str]] = {}
    for r in _dropped(head):
        i = ident(r)
        if seen[i] > 0:
            seen[i] -= 1
            continue
        if r.op not in cols_of:
            cols_of[r.op] = key_columns(base, head, r.op)
        cols = cols_of[r.op]
        item = row_item(r, cols, key_of(r, cols))
        lo = r.loser
        if lo is None:
            item["reason"] = "not-loaded"
        else:
            item["reason"] = "shadowed" if lo["same_part"] else "dropped"
            item["winner"] = lo["winner"]
            item["tie"] = lo["tie"]
            rc = head.ctx.runtime_for(r.op)
            rule = rc.merge_rule if rc is not None else "unknown"
            item["merge_rule"] = rule
            # core.py of this kind raises on duplicate keys: aiter does not start at all
            item["refuses_to_start"] = rule.startswith("reject-duplicates") and lo["same_part"]
        out.append(item)
    return out


# ---------------------------------------------------------------- output


def _key(k: dict[str, Any]) -> str:
    return " ".join(f"{c}={v}" for c, v in k.items() if v not in (None, ""))


def _us(x: Any) -> str:
    return "-" if x is None else f"{x:g}"


def _section(lines: list[str], title: str, items: list[Any], fmt: Any) -> None:
    lines.append(f"{title}: {len(items)}")
    for it in items[:TEXT_LIMIT]:
        lines.append("  " + fmt(it))
    if len(items) > TEXT_LIMIT:
        lines.append(f"  ... {len(items) - TEXT_LIMIT} more (--format json lists all)")


def to_text(r: dict[str, Any]) -> str:
    f = r["findings"]
    lines = [f"review {r['base']['name']} -> {r['head']['name']}"]
    note = f"; not compared: {', '.join(f['not_compared'])}" if f["not_compared"] else ""
    _section(
        lines,
        f"new audit findings (BASE {f['base']}, HEAD {f['head']}{note})",
        f["new"],
        lambda x: f"{x['file']}:{x['line']}: {x['severity']}: [{x['rule']}] {x['message']}",
    )
    _section(
        lines,
        "rows replaced under the same key",
        r["replaced"],
        lambda x: (
            f"{x['op']} {_key(x['key'])}: us {_us(x['from']['us'])} -> {_us(x['to']['us'])}"
            + (f" ({x['ratio']:g}x)" if x["ratio"] is not None else "")
            + f"  {x['from']['file']}:{x['from']['line']} -> {x['to']['file']}:{x['to']['line']}"
        ),
    )
    _section(
        lines,
        "rows the run-time merge now drops, shadows or never loads",
        r["merge"]["dropped"],
        lambda x: (
            f"{x['file']}:{x['line']}: {x['reason']}: {x['op']} {_key(x['key'])} us {_us(x['us'])}"
            + (
                f" (kept: {x['winner']['file']}:{x['winner']['line']} us {x['winner']['us']})"
                if "winner" in x
                else ""
            )
            + (
                " - the runtime refuses duplicate keys: aiter does not start"
                if x.get("refuses_to_start")
                else ""
            )
        ),
    )
    k = r["kernels"]
    _section(lines, "kernel ids moved or reassigned", k["renumbered"], _kernel_line)
    _section(
        lines,
        "rows whose kernelId now names another kernel",
        k["rows_kernel_changed"],
        lambda x: (
            f"{x['file']}:{x['line']}: {x['op']} kernelId {x['kernelId']}: {x['from_kernel']} "
            f"-> {x['to_kernel']}" + (" (row unchanged)" if x["carried"] else "")
        ),
    )
    s = r["summary"]
    lines.append(
        f"rows added: {s['rows_added']}, removed: {s['rows_removed']}; kernel ids added: "
        f"{len(k['added'])}, removed: {len(k['removed'])}"
    )
    return "\n".join(lines) + "\n"


def _kernel_line(x: dict[str, Any]) -> str:
    if x["kind"] == "moved":
        name = x["kernel"] or json.dumps(x["params"])
        return f"{x['op']} {x['list']}: {name}: id {x['from_ids']} -> {x['to_ids']}"
    a = x["from_kernel"] or json.dumps(x["from_params"])
    b = x["to_kernel"] or json.dumps(x["to_params"])
    return f"{x['op']} {x['list']} id {x['id']}: {a} -> {b}"


def as_findings(r: dict[str, Any]) -> list[Finding]:
    """The review as findings (SARIF results): new audit findings as they are, then one per
    replaced row, dropped row, moved kernel and row naming another kernel, at HEAD's file:line."""
    out = [
        Finding(
            f["rule"], f["severity"], f["file"], f["line"], f["message"], f["evidence"], f["op"]
        )
        for f in r["findings"]["new"]
    ]
    for x in r["replaced"]:
        to, fr = x["to"], x["from"]
        ratio = f" ({x['ratio']:g}x)" if x["ratio"] is not None else ""
        msg = (
            f"{x['op']} {_key(x['key'])}: us {_us(fr['us'])} -> {_us(to['us'])}{ratio}, "
            f"replacing {fr['file']}:{fr['line']}"
        )
        out.append(_f("review-row-replaced", to["file"], to["line"], msg, x))
    for x in r["merge"]["dropped"]:
        msg = f"{x['reason']}: {x['op']} {_key(x['key'])} us {_us(x['us'])}"
        out.append(_f("review-row-dropped", x["file"], x["line"], msg, x))
    for x in r["kernels"]["renumbered"]:
        out.append(_f("review-kernel-moved", x["file"], x["to_line"], _kernel_line(x), x))
    for x in r["kernels"]["rows_kernel_changed"]:
        msg = f"kernelId {x['kernelId']}: {x['from_kernel']} -> {x['to_kernel']}"
        out.append(_f("review-row-kernel-changed", x["file"], x["line"], msg, x))
    return out


def _f(rule: str, file: str, line: int, message: str, ev: dict[str, Any]) -> Finding:
    return Finding(rule, RULES[rule].severity, file, line, message, ev, ev.get("op"))


def render(r: dict[str, Any], fmt: str) -> str:
    """text, json or sarif (the audit's SARIF writer, with the review's rules added)."""
    if fmt == "json":
        return json.dumps(r, indent=2, default=str) + "\n"
    if fmt == "sarif":
        from ckkb.audit.engine import AuditResult
        from ckkb.audit.writers import to_sarif

        res = AuditResult(
            findings=as_findings(r), files=[], aiter={"base": r["base"], "head": r["head"]}
        )
        return json.dumps(to_sarif(res, RULES), indent=2, default=str) + "\n"
    return to_text(r)

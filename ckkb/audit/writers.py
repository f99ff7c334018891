"""Audit output: text for people, JSON for tools, SARIF 2.1.0 for code-scanning UIs."""

from __future__ import annotations

import json
from typing import Any

import ckkb
from ckkb.audit.engine import AuditResult
from ckkb.audit.model import RULES, Finding, Rule

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/ROCm/composable_kernel"


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity,
        "file": f.file,
        "line": f.line,
        "op": f.op,
        "message": f.message,
        "evidence": f.evidence,
    }


def to_json(r: AuditResult) -> dict[str, Any]:
    return {
        "tool": "ckkb audit",
        "version": ckkb.__version__,
        "aiter": r.aiter,
        "arch": r.arch,
        "rows": r.rows,
        "files": r.files,
        "summary": r.counts(),
        "skipped": [{"rules": s["rules"], "reason": s["reason"]} for s in r.skipped],
        "findings": [finding_dict(f) for f in r.findings],
    }


def to_text(r: AuditResult) -> str:
    a = r.aiter
    version = f" {a['version']}" if a.get("version") else ""
    lines = [
        f"auditing aiter{version} at {a.get('root')} ({a.get('tree_source', 'tree')}; "
        f"kernel lists: {a.get('read_from')})"
    ]
    for f in r.findings:
        where = f"{f.file}:{f.line}" if f.line else f.file
        lines.append(f"{where}: {f.severity}: [{f.rule}] {f.message}")
    c = r.counts()
    errors = [x for x in r.files if x["error"]]
    lines.append(
        f"{len(r.files)} files ({len(errors)} unreadable), {r.rows} rows: "
        f"{c['error']} errors, {c['warning']} warnings, {c['note']} notes"
    )
    for s in r.skipped:
        lines.append(f"skipped: {', '.join(s['rules'])}: {s['reason']}")
    return "\n".join(lines) + "\n"


def to_sarif(r: AuditResult, extra_rules: dict[str, Rule] | None = None) -> dict[str, Any]:
    """SARIF 2.1.0; extra_rules: rules of another tool's results (`ckkb review`'s)."""
    catalogue = {**RULES, **(extra_rules or {})}
    rule_ids = sorted(catalogue)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    rules = [
        {
            "id": rid,
            "name": "".join(w.capitalize() for w in rid.split("-")),
            "shortDescription": {"text": catalogue[rid].summary},
            "defaultConfiguration": {"level": catalogue[rid].severity},
            "properties": {"family": catalogue[rid].family},
        }
        for rid in rule_ids
    ]
    results = []
    for f in r.findings:
        res: dict[str, Any] = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": f.severity,
            "message": {"text": f.message},
            "properties": {"evidence": f.evidence, "op": f.op},
        }
        if f.file and not f.file.startswith("<"):
            loc: dict[str, Any] = {"artifactLocation": {"uri": f.file}}
            if f.line and f.line > 0:
                loc["region"] = {"startLine": f.line}
            res["locations"] = [{"physicalLocation": loc}]
        results.append(res)
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ckkb",
                        "version": ckkb.__version__,
                        "informationUri": INFO_URI,
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": {"aiter": r.aiter, "arch": r.arch, "skipped": r.skipped},
            }
        ],
    }


def render(r: AuditResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(r), indent=2, default=str) + "\n"
    if fmt == "sarif":
        return json.dumps(to_sarif(r), indent=2, default=str) + "\n"
    return to_text(r)

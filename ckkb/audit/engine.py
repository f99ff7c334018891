"""Run every audit rule family over an AuditContext;
the library behind `ckkb audit` and the build."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.audit import rules_kb, rules_kernels, rules_keys, rules_parts, rules_runtime, rules_values
from ckkb.audit.context import (
    AuditContext,
    add_default_tables,
    add_env_tables,
    add_table,
    built_aiter_tree,
    load,
    read_env_file,
)
from ckkb.audit.model import Finding, finding, severity_rank
from ckkb.kb.stages import one_build

KB_RULES = ("baseline-slower", "baseline-missing", "tile-gated")


@dataclass
class AuditResult:
    findings: list[Finding]
    files: list[dict[str, Any]]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    aiter: dict[str, Any] = field(default_factory=dict)
    arch: str | None = None
    rows: int = 0
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "note": 0}
        for f in self.findings:
            out[f.severity] = out.get(f.severity, 0) + 1
        return out

    def fails(self, fail_on: str) -> bool:
        return any(severity_rank(f.severity) >= severity_rank(fail_on) for f in self.findings)


def run_rules(ctx: AuditContext) -> tuple[list[Finding], dict[str, Any]]:
    findings: list[Finding] = []
    stats: dict[str, Any] = {}
    for t in ctx.tables:
        findings += rules_values.input_findings(ctx, t)
        findings += rules_values.value_findings(ctx, t)
        findings += rules_kernels.row_kernel_findings(ctx, t, stats)
        findings += rules_parts.part_findings(ctx, t)
        findings += rules_kb.kb_findings(ctx, t)
    findings += rules_kernels.unresolved_findings(ctx, stats)
    findings += rules_keys.key_findings(ctx)
    findings += rules_runtime.runtime_findings(ctx)
    if ctx.defaults:
        findings += rules_kernels.kernel_list_findings(ctx)
        findings += [
            finding(
                "kernel-list-unsupported",
                d.file,
                d.line,
                d.message,
                severity="error" if d.severity == "error" else "warning",
            )
            for d in ctx.diagnostics
            if d.stage == "aiter.kernels"
        ]
    findings.sort(key=Finding.sort_key)
    return findings, stats


def audit(
    aiter_path: str | None = None,
    csvs: list[str] | tuple[str, ...] = (),
    *,
    arch: str | None = None,
    env_file: str | None = None,
    db_path: str | None = None,
    tree_from_db: bool = False,
    db_tree: str | None = None,
) -> AuditResult:
    """Audit the given CSVs (or the aiter tree's own configs) against that tree's kernel lists
    and runtime. tree_from_db (and no aiter_path): the tree db_path was built from (its tree
    `db_tree`, else its first aiter tree); the CK rules read db_path's `db_tree` too."""
    from ckkb import sources

    t0 = time.perf_counter()
    tree_source = "given with --aiter" if aiter_path else "the installed amd-aiter wheel"
    if aiter_path is None and tree_from_db and db_path and Path(db_path).is_file():
        aiter_path, tree_source = built_aiter_tree(db_path, db_tree)
    tree = sources.aiter_tree(aiter_path)
    with one_build():  # a tree's listings once (as in a build), not once per file asked about
        ctx, read_from = load(tree, db_path)
    ctx.arch = arch
    if env_file:
        ctx.env = read_env_file(env_file)
    if csvs:
        ctx.defaults = False
        for c in csvs:
            add_table(ctx, str(c), Path(c))
    else:
        add_default_tables(ctx)
    add_env_tables(ctx)  # the files an --env file points the runtime at are audited too
    skipped = _attach_kb(ctx, db_path, db_tree)
    with one_build():
        findings, stats = run_rules(ctx)
    for s in skipped:
        findings.append(
            finding(
                "rules-skipped",
                s["where"],
                0,
                f"not run: {', '.join(s['rules'])} ({s['reason']})",
                rules=s["rules"],
                reason=s["reason"],
            )
        )
    files = []
    for t in ctx.tables:
        st = stats.get(t.rel, {})
        files.append(
            {
                "file": t.rel,
                "op": ctx.ops.get(t.rel),
                "kind": t.kind,
                "rows": len(t.rows),
                "error": t.error,
                "kernel_checked": st.get("checked", 0),
                "not_ck": st.get("not_ck", 0),
                "no_kernel_list": st.get("no_kernel_list", 0),
            }
        )
    return AuditResult(
        findings=findings,
        files=files,
        skipped=skipped,
        aiter={
            "root": str(tree.root),
            "package": str(getattr(tree, "package_dir", "")),
            "version": getattr(tree, "version", None),
            "read_from": read_from,
            "tree_source": tree_source,
        },
        arch=arch,
        rows=sum(len(t.rows) for t in ctx.tables),
        seconds=time.perf_counter() - t0,
    )


def _attach_kb(
    ctx: AuditContext, db_path: str | None, tree: str | None = None
) -> list[dict[str, Any]]:
    from ckkb.errors import DatabaseError
    from ckkb.kb import db as kbdb

    if not db_path:
        return [
            {
                "rules": list(KB_RULES),
                "reason": "no --db given: the knowledge base was not read",
                "where": "<knowledge base>",
            }
        ]
    p = Path(db_path)
    if not p.exists():
        return [
            {
                "rules": list(KB_RULES),
                "reason": f"knowledge base not found: {p} (build "
                "it with `ckkb build`, or pass --db)",
                "where": str(p),
            }
        ]
    try:
        db = kbdb.open_db(p, readonly=True, tree=tree)
    except DatabaseError as e:
        return [{"rules": list(KB_RULES), "reason": e.message, "where": str(p)}]
    try:
        ctx.ck = rules_kb.CkIndex.from_db(db)
        ctx.baselines = rules_kb.BaselineIndex.from_db(db)
    finally:
        db.close()
    skipped = []
    if not ctx.ck.instances:
        skipped.append(
            {
                "rules": ["tile-gated"],
                "reason": f"{p} holds no CK instances/availability",
                "where": str(p),
            }
        )
        ctx.ck = None
    return skipped

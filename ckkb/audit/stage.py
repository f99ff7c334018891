"""The build's audit stage: every rule run over the rows and parsed config tables the build made.

It reads no file itself: the config tables come from the `aiter.configs` stage's facts, the
kernel lists, runtime configs and tuner options from the aiter stages' rows, and CK availability
from the CK stages' rows (when the build has a CK tree). `ckkb audit` runs the same rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckkb.audit import rules_kb
from ckkb.audit.context import AuditContext
from ckkb.audit.engine import run_rules
from ckkb.extract.aiter_configs import STAGE_NAME as CONFIGS_STAGE
from ckkb.extract.aiter_tuners import package_dir
from ckkb.kb.schema.aiter import AiterAuditFindingRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult


class AuditStage:
    name = "aiter.audit"
    version = "1"
    tree = "aiter"
    reads = (
        "aiter_kernels",
        "aiter_kernel_lists",
        "aiter_runtime_configs",
        "aiter_tuner_options",
        "instances",
        "registrations",
        "availability",
    )
    reads_facts = (CONFIGS_STAGE,)
    writes = ("aiter_audit_findings",)
    combine_cost = 0.11

    def files(self, root: Path) -> list[Path]:
        return []

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        raise NotImplementedError("the audit stage reads no file")  # files() is empty

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        actx = AuditContext(
            root=root,
            pkg=package_dir(root),
            kernels=list(ctx.table_rows("aiter_kernels")),
            lists=list(ctx.table_rows("aiter_kernel_lists")),
            runtime=list(ctx.table_rows("aiter_runtime_configs")),
            options=list(ctx.table_rows("aiter_tuner_options")),
        )
        facts = ctx.file_facts(CONFIGS_STAGE)
        for rel in sorted(facts):
            if "table" in facts[rel]:
                t = facts[rel]["table"]
                actx.tables.append(t)
                actx.ops[t.rel] = actx.op_of_table(t.rel, t.columns)
        inst = ctx.table_rows("instances")
        if inst:
            actx.ck = rules_kb.CkIndex.from_rows(
                inst, ctx.table_rows("registrations"), ctx.table_rows("availability")
            )
        findings, _ = run_rules(actx)
        rows: list[Any] = [
            AiterAuditFindingRow(
                rule=f.rule,
                severity=f.severity,
                file=f.file,
                line=f.line,
                op=f.op,
                message=f.message,
                evidence=f.evidence,
            )
            for f in findings
        ]
        return StageResult(rows=rows)


STAGE = AuditStage()

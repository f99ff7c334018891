"""The build's audit stage: every rule run over the rows and parsed config tables the build made.

The config tables come from the `aiter.configs` stage's facts, the kernel lists, runtime configs
and tuner options from the aiter stages' rows. The MoE check also runs the tree's modules and
reads its enum headers: those are this stage's files (ckkb.audit.inputs), hashed and
fingerprinted like any input, so a change to one alone combines the audit again. `ckkb audit`
runs the same rules.

It reads the aiter tree's rows only (a stage's combine sees the rows of its own tree), so it is
combined as soon as the aiter stages are, while the workers still read the CK instance lists,
not after the CK chain. The rules that need CK or measured rows (tile-gated, baseline-*) run in
`ckkb audit --db`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckkb.audit.context import AuditContext
from ckkb.audit.engine import run_rules
from ckkb.audit.inputs import Readable, audit_inputs
from ckkb.audit.kernel_choice import op_lists
from ckkb.extract.aiter_configs import STAGE_NAME as CONFIGS_STAGE
from ckkb.extract.aiter_tuners import package_dir
from ckkb.kb.schema.aiter import AiterAuditFindingRow, AiterOpKernelListRow, AiterRowKernelRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult


class AuditStage:
    name = "aiter.audit"
    version = "2"
    tree = "aiter"
    reads = (
        "aiter_kernels",
        "aiter_kernel_lists",
        "aiter_runtime_configs",
        "aiter_tuner_options",
    )
    reads_facts = (CONFIGS_STAGE,)
    writes = ("aiter_audit_findings", "aiter_row_kernels", "aiter_op_kernel_lists")
    combine_cost = 0.11

    def files(self, root: Path) -> list[Path]:
        return audit_inputs(root)

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        return FileResult()  # read by the combine (MoE check) when needed; hashed here

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        actx = AuditContext(
            root=root,
            pkg=package_dir(root),
            kernels=list(ctx.table_rows("aiter_kernels")),
            lists=list(ctx.table_rows("aiter_kernel_lists")),
            runtime=list(ctx.table_rows("aiter_runtime_configs")),
            options=list(ctx.table_rows("aiter_tuner_options")),
        )
        actx.__dict__["_readable"] = Readable(root, results)  # this stage's files, as listed
        facts = ctx.file_facts(CONFIGS_STAGE)
        for rel in sorted(facts):
            if "table" in facts[rel]:
                t = facts[rel]["table"]
                actx.tables.append(t)
                actx.ops[t.rel] = actx.op_of_table(t.rel, t.columns)
        findings, stats = run_rules(actx)
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
        rows += row_kernel_rows(actx, stats)
        return StageResult(rows=rows)


def row_kernel_rows(ctx: AuditContext, stats: dict[str, Any]) -> list[Any]:
    """What each tuned row's kernel columns resolved to (run_rules' stats), and every list each
    op's rows may index: the rows behind the aiter_kernel_usage view."""
    rows: list[Any] = []
    for rel in sorted(stats):
        for ln, column, r, kid, name in stats[rel].get("rows", []):
            rows.append(
                AiterRowKernelRow(
                    file=rel,
                    line=ln,
                    op=ctx.ops.get(rel),
                    column=column,
                    status=r.status,
                    list_id=r.list_id,
                    kernel_id=kid if isinstance(kid, int) and not isinstance(kid, bool) else None,
                    kernel_name=name if isinstance(name, str) else None,
                    reason=r.where or None,
                )
            )
    for rc in ctx.runtime:
        for lid, how, when in op_lists(ctx, rc):
            rows.append(AiterOpKernelListRow(op=rc.op, list_id=lid, how=how, choice_case=when))
    return rows


STAGE = AuditStage()

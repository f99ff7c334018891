"""`ckkb aiter summary`: kernel lists, ids and tuned rows per op of an aiter tree."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ckkb.audit.context import AuditContext
from ckkb.audit.kernel_choice import lists_by_row
from ckkb.audit.resolution import note, resolution


def summary(ctx: AuditContext) -> dict[str, Any]:
    by_file: dict[str, list] = defaultdict(list)
    for kl in ctx.lists:
        by_file[kl.file].append(kl)
    tuned: dict[str | None, list] = defaultdict(list)
    for t in ctx.tables:
        if t.kind == "tuned":
            tuned[ctx.ops.get(t.rel)].append(t)
    ops = []
    resolved = resolution(ctx)
    for rc in ctx.runtime:
        res = resolved.get(rc.op)
        klist = ctx.kernel_list(rc.op)
        by_row = lists_by_row(ctx, rc)
        ids = len(klist) if klist else 0
        ids += sum(n for b in by_row for n in b.get("ids", []) if b.get("first"))
        ops.append(
            {
                "op": rc.op,
                "env_var": rc.env_var,
                "kernel_list_file": rc.kernel_list_file,
                "kernel_list": rc.kernel_list,
                "kernel_list_note": note(rc, res),
                "kernel_rows": {
                    k: res[k] if res else 0 for k in ("checked", "not_ck", "no_kernel_list")
                },
                "kernel_list_candidates": getattr(rc, "kernel_list_candidates", None) or [],
                "kernel_lists_by_row": by_row,
                "kernel_ids": ids,
                "tuned_files": [t.rel for t in tuned.get(rc.op, [])],
                "tuned_rows": sum(len(t.rows) for t in tuned.get(rc.op, [])),
            }
        )
    kernel_files = []
    for f, lists in sorted(by_file.items()):
        kernel_files.append(
            {
                "file": f,
                "op": lists[0].op,
                "lists": len(lists),
                "ids": sum(kl.entries for kl in lists),
                "by_list": {kl.name: kl.entries for kl in lists},
            }
        )
    return {
        "ops": ops,
        "kernel_files": kernel_files,
        "unassigned_tuned_files": [t.rel for t in tuned.get(None, [])],
        "totals": {
            "kernel_files": len(kernel_files),
            "kernel_lists": len(ctx.lists),
            "kernel_ids": len(ctx.kernels),
            "tuned_files": sum(len(v) for v in tuned.values()),
            "tuned_rows": sum(len(t.rows) for v in tuned.values() for t in v),
        },
    }

"""`ckkb aiter summary`: kernel lists, ids and tuned rows per op of an aiter tree."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ckkb.audit.context import AuditContext


def lists_by_row(ctx: AuditContext, rc: Any) -> list[dict[str, Any]]:
    """The tuner's getKernelName cases (aiter 2026: libtype, preshuffleB): the file and list each
    one indexes, with the entries of each arch's value of that list."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    choice = getattr(rc, "kernel_list_choice", None) or {}
    # a bool the tuner sets by the config it writes (preshuffleB) is fixed for this op
    fixed = {
        p["name"]: rc.env_var in p["true_for_env"]
        for p in choice.get("params", [])
        if isinstance(p.get("default"), bool) and p.get("true_for_env")
    }
    for c in choice.get("cases", []):
        if any(c["when"].get(k) != v for k, v in fixed.items()):
            continue
        item: dict[str, Any] = {"when": c["when"]}
        if "file" in c:
            variants = [kl for kl in ctx.lists if kl.file == c["file"] and kl.name == c["list"]]
            item.update(
                file=c["file"],
                list=c["list"],
                arch_when=[kl.arch_when for kl in variants],
                ids=[kl.entries for kl in variants],
                first=(c["file"], c["list"]) not in seen,
            )
            seen.add((c["file"], c["list"]))
        elif c.get("none"):
            item["none"] = True
        else:
            item["error"] = c.get("error")
        out.append(item)
    return out


def summary(ctx: AuditContext) -> dict[str, Any]:
    by_file: dict[str, list] = defaultdict(list)
    for kl in ctx.lists:
        by_file[kl.file].append(kl)
    tuned: dict[str | None, list] = defaultdict(list)
    for t in ctx.tables:
        if t.kind == "tuned":
            tuned[ctx.ops.get(t.rel)].append(t)
    ops = []
    for rc in ctx.runtime:
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
                "kernel_list_note": getattr(rc, "kernel_list_note", None),
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

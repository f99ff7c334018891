"""How each op's tuned rows resolved to kernel lists, summed per op for `ckkb aiter summary`:
the audit's own per-row answer (rules_kernels.row_kernel_findings, the rows behind
aiter_row_kernels), so the summary's note says what was read, op by op, never a fixed text."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ckkb.audit import rules_kernels

HOW = {
    "list": "the op's kernel list",
    "choice": "the list the tuner's getKernelName picks for the row",
    "candidates": "the list the tuner imports that gives the row's kernelId its kernelName",
    "getter": "what the list getters the tuner calls build for the row",
}


def resolution(ctx: Any) -> dict[str | None, dict[str, Any]]:
    """op -> {"checked", "not_ck", "no_kernel_list": counts, "how": Counter of how checked
    references resolved, "reasons": {status: Counter of why}} (a reference: a row's kernelId
    or solidx, or one kernelName cell of a MoE row)."""
    stats: dict[str, Any] = {}
    for t in ctx.tables:
        rules_kernels.row_kernel_findings(ctx, t, stats)
    out: dict[str | None, dict[str, Any]] = {}
    for rel, st in stats.items():
        o = out.setdefault(
            ctx.ops.get(rel),
            {
                "checked": 0,
                "not_ck": 0,
                "no_kernel_list": 0,
                "how": Counter(),
                "reasons": {"not_ck": Counter(), "no_kernel_list": Counter()},
            },
        )
        for _ln, _col, r, _kid, _name in st.get("rows", []):
            o[r.status] += 1
            if r.status == "checked":
                o["how"][r.how] += 1
            else:
                o["reasons"][r.status][r.where or "no kernel list found"] += 1
    return out


def note(rc: Any, res: dict[str, Any] | None) -> str | None:
    """What the op's rows resolved to: how many were checked and how, how many are another
    backend's (not_ck) and why rows were not checked; the build's own note where no row
    names a kernel."""
    if res is None or not (res["checked"] or res["not_ck"] or res["no_kernel_list"]):
        return getattr(rc, "kernel_list_note", None)
    parts = []
    if res["checked"]:
        how = ", ".join(f"{n} by {HOW.get(h, h)}" for h, n in sorted(res["how"].items()))
        parts.append(f"{res['checked']} checked ({how})")
    for status, label in (("no_kernel_list", "NOT checked"), ("not_ck", "not CK")):
        if res[status]:
            parts.append(f"{res[status]} {label}: {_top(res['reasons'][status])}")
    return "; ".join(parts)


def _top(reasons: Counter[str]) -> str:
    top = reasons.most_common(2)
    more = len(reasons) - len(top)
    text = ", ".join(f"{w} ({n})" for w, n in top)
    return text + (f" and {more} more (aiter_row_kernels.reason)" if more > 0 else "")

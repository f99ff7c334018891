"""bf16 GEMM rows (aiter 2026 `bf16_tuned_gemm.csv`): `solidx` is the kernel's id in the list of
the row's backend, `kernelName` its name. The tuner (csrc/gemm_a16w16/gemm_a16w16_tune.py)
imports the opus `kernels_list` inside a `try` (ckkb.extract.aiter_tuner_try) and writes
`(solidx, kernelName) = (kid, kernels_list[kid].name)` for its opus rows; its other backends
(asm, flydsl, triton, torch, skinny, hipblaslt) have no list in Python.

Each row ends in one status: checked (its name is one of the imported lists' family, the stem
all their names share, and solidx is looked up), not_ck (a name outside that family: another
backend's, named with its libtype), or no_kernel_list with the reason the list was not read
(the op's kernel-list-unresolved error counts it).
"""

from __future__ import annotations

from typing import Any

from ckkb.audit.context import AuditContext
from ckkb.audit.kernel_choice import RowKernel
from ckkb.audit.list_eval import evaluated
from ckkb.audit.model import Finding, finding
from ckkb.audit.moe_choice import common_prefix
from ckkb.extract.aiter_configs import ConfigTable, arch_of

ID = "solidx"


def solidx_findings(
    ctx: AuditContext, t: ConfigTable, rc: Any, op: str | None, stats: dict[str, Any]
) -> list[Finding]:
    st = stats.setdefault(t.rel, {"checked": 0, "not_ck": 0, "no_kernel_list": 0})
    rows = st.setdefault("rows", [])
    lists = [tuple(x) for x in getattr(rc, "kernel_list_candidates", None) or []]
    if not lists and rc is not None and rc.kernel_list_file:
        lists = [(rc.kernel_list_file, rc.kernel_list)]
    ev = evaluated(ctx)
    per_gfx: dict[str, list[tuple[str, str, dict[Any, str]]] | str] = {}
    for _, v in t.rows:
        gfx = arch_of(v) or ""
        if gfx in per_gfx:
            continue
        if rc is None:
            per_gfx[gfx] = "no runtime config names this op"
        elif not lists or ev is None:
            per_gfx[gfx] = rc.kernel_list_note or "no kernel list found"
        elif not gfx:
            per_gfx[gfx] = f"no arch for the row (gfx {v.get('gfx')!r})"
        else:
            got = [(f, n, ev.names(f, n, gfx)) for f, n in lists]
            bad = [r for _, _, r in got if isinstance(r, str)]
            per_gfx[gfx] = bad[0] if bad else [(f, n, d) for f, n, d in got if isinstance(d, dict)]
    stem = common_prefix(
        sorted(
            {
                x
                for g in per_gfx.values()
                if isinstance(g, list)
                for _, _, d in g
                for x in d.values()
            }
        )
    )
    out: list[Finding] = []
    for ln, v in t.rows:
        kid, name = v.get(ID), v.get("kernelName")
        lt = v.get("libtype")
        g = per_gfx[arch_of(v) or ""]
        if isinstance(name, str) and name.startswith("_Z"):  # no list in Python: asm
            why = f"libtype {lt!r}: an assembly kernel (_Z name)"
            _count(st, "not_ck", why)
            rows.append((ln, ID, RowKernel("not_ck", where=why), kid, name))
            continue
        if isinstance(g, str):
            _count(st, "no_kernel_list", g)
            rows.append((ln, ID, RowKernel("no_kernel_list", where=g), kid, name))
            continue
        if not isinstance(name, str) or not stem or not name.startswith(stem):
            why = f"libtype {lt!r}: another backend's kernel, not of the {stem}* lists imported"
            _count(st, "not_ck", why)
            rows.append((ln, ID, RowKernel("not_ck", where=why), kid, name))
            continue
        st["checked"] += 1
        where = ", ".join(f"{f}:{n}" for f, n, _ in g)
        hit = next(((f, n, d) for f, n, d in g if kid in d), None)
        lid = _list_id(ctx, hit[0], hit[1]) if hit else None
        rows.append((ln, ID, RowKernel("checked", {}, where, lid, "list"), kid, name))
        if hit is None:
            out.append(
                finding(
                    "kernel-id-unknown",
                    t.rel,
                    ln,
                    f"{ID} {kid!r} is in none of {where} on {arch_of(v)}",
                    op=op,
                    kernelId=kid,
                    kernel_list=where,
                )
            )
        elif hit[2][kid] != name:
            f, n, d = hit
            other = sorted(i for i, x in d.items() if x == name)
            out.append(
                finding(
                    "kernel-id-name-mismatch" if other else "kernel-name-stale",
                    t.rel,
                    ln,
                    f"{ID} {kid} and kernelName {name} disagree: in {f}:{n} that name is id "
                    f"{other[0]} and id {kid} is {d[kid]}"
                    if other
                    else f"kernelName {name} is not what {ID} {kid} builds now: {d[kid]} ({f}:{n})",
                    op=op,
                    kernelId=kid,
                    row_name=name,
                    list_name=d[kid],
                    kernel_list=f"{f}:{n}",
                )
            )
    return out


def _count(st: dict[str, Any], status: str, why: str) -> None:
    st[status] += 1
    if status == "no_kernel_list":
        reasons = st.setdefault("reasons", {})
        reasons[why] = reasons.get(why, 0) + 1


def _list_id(ctx: AuditContext, file: str, name: str) -> int | None:
    return next((kl.id for kl in ctx.lists if kl.file == file and kl.name == name), None)

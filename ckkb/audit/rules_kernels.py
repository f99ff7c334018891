"""Kernels: tuned rows against the op's kernel list, and the kernel lists themselves.

A row is checked when its op's tuner imports a kernel list, the file has kernelId/kernelName
columns, and the row is a CK row: libtype is ck (or the file has no libtype column) and its
kernelName is not a mangled assembly symbol (`_Z...`: aiter's ASM kernels, whose ids follow the CK
list's). Rows that are not checked are counted, never silently passed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ckkb.audit.context import AuditContext
from ckkb.audit.kernel_choice import RowKernel, candidates, resolve
from ckkb.audit.model import Finding, finding
from ckkb.audit.moe_choice import moe_choice_for, op_stem
from ckkb.audit.solidx_rows import ID, solidx_findings
from ckkb.extract.aiter_configs import ConfigTable, arch_of


def row_kernel_findings(ctx: AuditContext, t: ConfigTable, stats: dict[str, Any]) -> list[Finding]:
    """Each CK row against the list `kernel_choice.resolve` says it indexes; what each row
    resolved to is kept in stats[rel]["rows"] (the build writes it as aiter_row_kernels)."""
    op = ctx.ops.get(t.rel)
    out: list[Finding] = []
    if t.error or t.kind != "tuned":
        return out
    rc = ctx.runtime_for(op)
    if "kernelId" not in t.columns and ID in t.columns:
        return solidx_findings(ctx, t, rc, op, stats)
    if "kernelId" not in t.columns:
        return _name_only_rows(ctx, t, rc, op, stats)
    st = stats.setdefault(t.rel, {"checked": 0, "not_ck": 0, "no_kernel_list": 0})
    rows = st.setdefault("rows", [])
    for ln, v in t.rows:
        r = resolve(ctx, t, op, v)
        st[r.status] += 1
        rows.append((ln, "kernelId", r, v.get("kernelId"), v.get("kernelName")))
        if r.status == "no_kernel_list":
            if r.where:
                reasons = st.setdefault("reasons", {})
                reasons[r.where] = reasons.get(r.where, 0) + 1
            else:
                out += _id_name_mismatch(ctx, t, rc, op, ln, v)
        elif r.status == "checked" and r.kernels is not None:
            if r.how == "choice":
                out += _chosen_findings(t, op, ln, v, r.kernels, r.where)
            elif r.how == "list":
                out += _list_findings(t, rc, op, ln, v, r.kernels)
    return out


def _name_only_rows(
    ctx: AuditContext, t: ConfigTable, rc: Any, op: str | None, stats: dict[str, Any]
) -> list[Finding]:
    """Rows that name kernels without an id (aiter's MoE configs: kernelName1, kernelName2)
    while the op's tuner imports list getters: each name is checked against what the getters
    build for that row (ckkb.audit.moe_choice), or counted as not checked with the reason."""
    cols = [c for c in t.columns if c.startswith("kernelName")]
    lists = getattr(rc, "kernel_list_candidates", None) or []
    if not lists and rc is not None and rc.kernel_list_file:
        lists = [(rc.kernel_list_file, rc.kernel_list)]
    if not cols:
        return []
    getters = ", ".join(f"{f}:{n}" for f, n in lists)
    mc = moe_choice_for(ctx, rc, [tuple(x) for x in lists]) if lists else None
    stem = op_stem(ctx, op, mc, cols) if mc is not None else ""
    first = (
        next((mc.row_names(t.columns, v).reason for _, v in t.rows[:1]), None)
        if mc is not None and not stem
        else None
    )
    why = (
        (mc.problem if mc is not None else None)
        or first
        or (getattr(rc, "kernel_list_note", None) if not lists else None)
        or ("no runtime config names this op" if rc is None else None)
        or (
            f"{'/'.join(cols)} name kernels with no kernelId, and no row's call of the list "
            f"getters the tuner imports ({getters}) was evaluated statically"
        )
    )
    st = stats.setdefault(t.rel, {"checked": 0, "not_ck": 0, "no_kernel_list": 0})
    st["names_only"] = True
    rows = st.setdefault("rows", [])
    out: list[Finding] = []
    for ln, v in t.rows:
        got = mc.row_names(t.columns, v) if mc is not None and stem else None
        for c in cols:
            name = v.get(c)
            if not isinstance(name, str) or not name or name == "Null":
                continue  # the row names no kernel here (a 1-stage row's kernelName2)
            other = (
                "an assembly kernel (_Z name)"
                if name.startswith("_Z")
                else f"another backend's kernel (not {stem}*)"
                if got is not None and not name.startswith(stem)
                else None
            )
            if other is not None:  # FlyDSL, opus, cktile, asm
                st["not_ck"] += 1
                rows.append((ln, c, RowKernel("not_ck", where=other), None, name))
                continue
            reason = why if got is None else got.reason
            if reason:
                st["no_kernel_list"] += 1
                reasons = st.setdefault("reasons", {})
                reasons[reason] = reasons.get(reason, 0) + 1
                rows.append((ln, c, RowKernel("no_kernel_list", where=reason), None, name))
                continue
            assert got is not None
            st["checked"] += 1
            hit = got.names.get(name)
            if hit is not None:
                where, kid, origin = hit
                lid = _literal_id(ctx, where, origin)
                rows.append((ln, c, RowKernel("checked", {}, where, lid, "getter"), kid, name))
                continue
            rows.append((ln, c, RowKernel("checked", {}, getters, None, "getter"), None, name))
            out.append(
                finding(
                    "kernel-name-stale",
                    t.rel,
                    ln,
                    f"{c} {name} is not a kernel the tuner's list getters build for this row "
                    f"({getters}: {len(got.names)} kernels on {arch_of(v)})",
                    op=op,
                    column=c,
                    row_name=name,
                    getters=[list(x) for x in lists],
                )
            )
    return out


def _literal_id(ctx: AuditContext, where: str, origin: Any) -> int | None:
    """aiter_kernel_lists.id of the dict literal a getter copied the entry from."""
    if not origin:
        return None
    f = where.rsplit(":", 1)[0]
    return next((kl.id for kl in ctx.lists if kl.file == f and kl.name == origin[0]), None)


def _list_findings(
    t: ConfigTable, rc: Any, op: str | None, ln: int, v: dict[str, Any], klist: dict[Any, Any]
) -> list[Finding]:
    """A row against its op's one kernel list: kernelId in it, kernelName what that id builds."""
    kid = v.get("kernelId")
    k = klist.get(kid) if isinstance(kid, int) else None
    if k is None:
        return [
            finding(
                "kernel-id-unknown",
                t.rel,
                ln,
                f"kernelId {kid!r} is not in {rc.kernel_list} of "
                f"{rc.kernel_list_file} (ids {min(klist)}..{max(klist)})",
                op=op,
                kernelId=kid,
                kernel_list=rc.kernel_list_file,
            )
        ]
    name = v.get("kernelName")
    if "kernelName" in t.columns and k.name is not None and name != k.name:
        return [_name_stale(t, ln, op, kid, name, k)]
    return []


def _name_stale(
    t: ConfigTable, ln: int, op: str | None, kid: Any, name: Any, k: Any, where: str = ""
) -> Finding:
    """kernelName is not the name kernelId's entry builds now (in list `where`, when named)."""
    at = f"{k.file}:{k.line}, {where}" if where else f"{k.file}:{k.line}"
    return finding(
        "kernel-name-stale",
        t.rel,
        ln,
        f"kernelName {name} is not what kernelId {kid} builds now: {k.name} ({at})",
        op=op,
        kernelId=kid,
        row_name=name,
        list_name=k.name,
        kernel_file=k.file,
        kernel_line=k.line,
    )


def _chosen_findings(
    t: ConfigTable, op: str | None, ln: int, v: dict[str, Any], d: dict[Any, Any], where: str
) -> list[Finding]:
    """A row against the list its tuner chose for it: kernelId must be in it and name the row's
    kernelName; a name the list gives another id is kernel-id-name-mismatch (aiter picks some
    kernels by id, others by name), a name it does not hold at all is kernel-name-stale."""
    kid, name = v.get("kernelId"), v.get("kernelName")
    k = d.get(kid) if isinstance(kid, int) and not isinstance(kid, bool) else None
    if k is None:
        ids = [i for i in d if isinstance(i, int)]
        return [
            finding(
                "kernel-id-unknown",
                t.rel,
                ln,
                f"kernelId {kid!r} is not in {where} for this row (ids {min(ids)}..{max(ids)})",
                op=op,
                kernelId=kid,
                kernel_list=where,
            )
        ]
    if "kernelName" not in t.columns or k.name is None or name == k.name:
        return []
    other = sorted((i, x) for i, x in d.items() if x.name == name)
    if other:
        i, x = other[0]
        return [
            finding(
                "kernel-id-name-mismatch",
                t.rel,
                ln,
                f"kernelId {kid} and kernelName {name} disagree: in {where} that name is id "
                f"{i} ({x.file}:{x.line}) and id {kid} is {k.name}",
                op=op,
                kernelId=kid,
                kernelName=name,
                name_id=i,
                kernel_file=x.file,
                kernel_line=x.line,
            )
        ]
    return [_name_stale(t, ln, op, kid, name, k, where)]


def kernel_list_findings(ctx: AuditContext) -> list[Finding]:
    out: list[Finding] = []
    by_list: dict[int, list] = defaultdict(list)
    for k in ctx.kernels:
        by_list[k.list_id].append(k)
    for kl in ctx.lists:
        entries = by_list.get(kl.id, [])
        for dup in kl.duplicate_ids:
            lines = [e.line for e in entries if e.key == repr(dup)]
            out.append(
                finding(
                    "kernel-id-duplicate",
                    kl.file,
                    lines[-1] if lines else kl.line,
                    f"id {dup!r} is written {len(lines)} times in {kl.name} (lines "
                    f"{', '.join(map(str, lines))}); Python keeps the last one silently",
                    op=kl.op,
                    list=kl.name,
                    id=dup,
                    lines=lines,
                )
            )
        first_line = {e.key: e.line for e in entries if not e.shadowed}
        for e in entries:
            if e.duplicate_of is not None:
                out.append(
                    finding(
                        "kernel-duplicate",
                        kl.file,
                        e.line,
                        f"{kl.name}[{e.key}] is identical to {kl.name}[{e.duplicate_of}] "
                        f"(line {first_line.get(e.duplicate_of)}): raced twice",
                        op=kl.op,
                        list=kl.name,
                        id=e.key,
                        same_as=e.duplicate_of,
                        name=e.name,
                    )
                )
    return out


def unresolved_findings(ctx: AuditContext, stats: dict[str, Any]) -> list[Finding]:
    """One error per op whose CK rows were not checked because its kernel list is not resolved:
    the op and the reason (a tuner importing several lists, a module not found, none at all)."""
    rows: dict[str, list[str]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    reasons: dict[str, dict[str, int]] = defaultdict(dict)
    names_only: set[str] = set()
    for rel, st in stats.items():
        op = ctx.ops.get(rel)
        if op is not None and st.get("no_kernel_list"):
            if st.get("names_only"):
                names_only.add(op)
            rows[op].append(rel)
            counts[op] += st["no_kernel_list"]
            for why, n in st.get("reasons", {}).items():
                reasons[op][why] = reasons[op].get(why, 0) + n
    out: list[Finding] = []
    for op in sorted(rows):
        rc = ctx.runtime_for(op)
        if rc is None:
            continue
        lead = (
            "no list the tuner imports gives their kernelId and kernelName; "
            if getattr(rc, "kernel_list_candidates", None) and not reasons[op]
            else ""
        )
        unit = "kernel names" if op in names_only else "rows"
        per_row = "; ".join(f"{n} {unit}: {w}" for w, n in sorted(reasons[op].items()))
        why = (
            per_row
            or getattr(rc, "kernel_list_note", None)
            or (
                f"{rc.kernel_list} of {rc.kernel_list_file} was not evaluated statically"
                if rc.kernel_list_file
                else "no kernel list found"
            )
        )
        out.append(
            finding(
                "kernel-list-unresolved",
                rc.tuner_file or rc.file,
                0 if rc.tuner_file else rc.line,
                f"op {op}: {counts[op]} {unit} in {len(rows[op])} files not checked: {lead}{why}",
                op=op,
                reason=why,
                rows=counts[op],
                files=sorted(rows[op]),
            )
        )
    return out


def _id_name_mismatch(
    ctx: AuditContext, t: ConfigTable, rc: Any, op: str | None, ln: int, v: dict[str, Any]
) -> list[Finding]:
    """kernelId and kernelName disagree: no list the tuner imports gives kernelId that name, and
    one gives the name another id (aiter picks some kernels by name and others by id). A name
    no list gives (a list not evaluated) is not reported."""
    if rc is None or "kernelName" not in t.columns:
        return []
    kid, name = v.get("kernelId"), v.get("kernelName")
    lists = candidates(ctx, rc)
    if not lists or not isinstance(name, str) or not isinstance(kid, int):
        return []
    if any(d.get(kid) is not None and d[kid].name == name for d in lists):
        return []
    other = sorted(
        {(k.kernel_id, k.file, k.line) for d in lists for k in d.values() if k.name == name}
    )
    if not other:
        return []
    i, f, line = other[0]
    return [
        finding(
            "kernel-id-name-mismatch",
            t.rel,
            ln,
            f"kernelId {kid} and kernelName {name} disagree: that name is id {i} "
            f"({f}:{line}); the runtime picks some kernels by id and others by name",
            op=op,
            kernelId=kid,
            kernelName=name,
            name_id=i,
            kernel_file=f,
            kernel_line=line,
        )
    ]

"""Parts and dtypes: (gfx, cu_num) against ckkb.archs.PARTS, rows for another arch than --arch, and
fp8 dialects (FNUZ is the gfx942 dialect, OCP e4m3fn/e5m2 the gfx950 one; the wrong one raises a
KeyError in the tuners' dtype lookup, seed §3).

Findings are aggregated per file and (gfx, cu_num) / arch / dialect, with the lines as evidence,
so a file of 300 such rows gives one finding, not 300.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ckkb.archs import PARTS, parts_for
from ckkb.audit.context import AuditContext
from ckkb.audit.model import Finding, finding
from ckkb.extract.aiter_configs import ConfigTable, arch_of

LIST_LIMIT = 20
FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")
OCP = ("float8_e4m3fn", "float8_e5m2")
DIALECT_ARCH = {"fnuz": "gfx942", "ocp": "gfx950"}


def dialect(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.rsplit(".", 1)[-1]
    if v in FNUZ:
        return "fnuz"
    if v in OCP:
        return "ocp"
    return None


_PART_CUS = frozenset(
    p.cu_num for p in PARTS
)  # `cu in` it: any(p.cu_num == cu for p in PARTS), once a row


def part_findings(ctx: AuditContext, t: ConfigTable) -> list[Finding]:
    op = ctx.ops.get(t.rel)
    out: list[Finding] = []
    if t.error or ("cu_num" not in t.columns and "gfx" not in t.columns and not ctx.arch):
        return out
    unknown: dict[tuple, list[int]] = defaultdict(list)
    other_arch: dict[str, list[int]] = defaultdict(list)
    wrong_dialect: dict[tuple, dict[int, set]] = defaultdict(dict)
    dtype_cols = [c for c in t.columns if "dtype" in c.lower()]
    for ln, v in t.rows:
        gfx = v.get("gfx") if isinstance(v.get("gfx"), str) and v.get("gfx") else None
        cu = v.get("cu_num")
        if gfx or cu is not None:  # a blank cu_num and gfx name no part (an untuned row)
            ok = (
                bool(parts_for(gfx, cu if isinstance(cu, int) else None))
                if gfx
                else cu in _PART_CUS
            )
            if not ok:
                unknown[(gfx, cu)].append(ln)
        arch = arch_of(v) if ("cu_num" in t.columns or "gfx" in t.columns) else None
        if ctx.arch and arch and arch != ctx.arch:
            other_arch[arch].append(ln)
        target = arch or (
            ctx.arch if "cu_num" not in t.columns and "gfx" not in t.columns else None
        )
        if target in ("gfx942", "gfx950"):
            for c in dtype_cols:
                d = dialect(v.get(c))
                if d and DIALECT_ARCH[d] != target:
                    wrong_dialect[(target, d)].setdefault(ln, set()).add(f"{c}={v.get(c)}")
    for (gfx, cu), lines in unknown.items():
        what = f"gfx={gfx}, cu_num={cu}" if gfx else f"cu_num={cu}"
        out.append(
            finding(
                "part-unknown",
                t.rel,
                lines[0],
                f"{len(lines)} rows with {what} match no known part (ckkb.archs.PARTS)",
                op=op,
                gfx=gfx,
                cu_num=cu,
                count=len(lines),
                lines=lines[:LIST_LIMIT],
            )
        )
    for arch, lines in other_arch.items():
        out.append(
            finding(
                "arch-mismatch",
                t.rel,
                lines[0],
                f"{len(lines)} rows are tuned for {arch}, not --arch {ctx.arch}",
                op=op,
                arch=arch,
                wanted=ctx.arch,
                count=len(lines),
                lines=lines[:LIST_LIMIT],
            )
        )
    for (arch, d), by_line in wrong_dialect.items():
        lines = sorted(by_line)
        vals = sorted(set().union(*by_line.values()))
        want = "OCP (float8_e4m3fn)" if arch == "gfx950" else "FNUZ (float8_e4m3fnuz)"
        out.append(
            finding(
                "fp8-dialect",
                t.rel,
                lines[0],
                f"{len(lines)} rows use {d.upper()} fp8 ({', '.join(vals)}) "
                f"for {arch}, whose fp8 dialect is {want}",
                op=op,
                arch=arch,
                dialect=d,
                values=vals,
                count=len(lines),
                lines=lines[:LIST_LIMIT],
            )
        )
    return out

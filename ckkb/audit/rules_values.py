"""Values: unreadable files, missing key columns, us, errRatio, empty tuned files, splitK never
searched, and MX/FP4 rows that cut a 32-element scale block."""

from __future__ import annotations

import math
from typing import Any

from ckkb.audit.context import AuditContext, merged_elsewhere
from ckkb.audit.kernel_choice import resolve
from ckkb.audit.model import Finding, finding
from ckkb.extract.aiter_configs import ConfigTable
from ckkb.extract.aiter_tuners import merge_key_extras

LIST_LIMIT = 20
SCALE_BLOCK = 32  # one E8M0 exponent per 32 elements along K (MX formats)
MX_OPS = ("gemm_a4w4",)  # ops whose operands are microscaled (FP4 per-1x32)
ERR_COLUMNS = ("errRatio", "err_ratio", "err1", "err2")


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.endswith("%"):
        try:
            return float(v[:-1]) / 100.0
        except ValueError:
            return None
    return None


def input_findings(ctx: AuditContext, t: ConfigTable) -> list[Finding]:
    op = ctx.ops.get(t.rel)
    out = []
    if t.error:
        out.append(
            finding("input-error", t.rel, t.error_line, f"{t.error}; file not audited", op=op)
        )
        return out
    if t.problems:
        lines = [ln for ln, _ in t.problems]
        out.append(
            finding(
                "input-error",
                t.rel,
                lines[0],
                f"{len(lines)} rows skipped: {t.problems[0][1]}",
                op=op,
                severity="warning",
                count=len(lines),
                lines=lines[:LIST_LIMIT],
                messages=[m for _, m in t.problems[:LIST_LIMIT]],
            )
        )
    path = ctx.paths.get(t.rel)
    if path is not None:
        try:
            out += conflict_findings(t.rel, path.read_bytes(), op)
        except OSError:
            pass  # t.error already says the file cannot be read
    rc = ctx.runtime_for(op)
    if op is None and t.kind == "tuned":
        ops = ", ".join(r.tuned_name or r.op for r in ctx.runtime)
        out.append(
            finding(
                "op-unknown",
                t.rel,
                0,
                "no runtime config of this aiter names this file (known: "
                f"{ops}): kernel-list, duplicate-key and merge rules not applied; "
                "name it after its op's tuned file to have them applied",
                columns=t.columns,
            )
        )
    # aiter 2026's core.py keys only on the key columns a file has (`dedup_keys = [k for k in
    # dedup_keys if k in merge_df.columns]`; fused_moe.py: gate_mode "is not a tuning key"), and
    # its tuners read their own untuned inputs (chunk_gdn_h_opt_tune.py: cases): a missing column
    # is not an error there. The default wheel's drop_duplicates raises on one.
    named = rc is not None and bool(merge_key_extras(rc.merge_evidence, []))
    want = [
        c for c in (rc.merge_key if rc and rc.merge_key and not named else []) if c not in t.columns
    ]
    if rc is None and not any(c in t.columns for c in ("M", "N", "K", "token")):
        want = [c for c in ("M", "N", "K") if c not in t.columns]
    if (
        t.kind == "tuned"
        and "cu_num" not in t.columns
        and "gfx" not in t.columns
        and rc is not None
    ):
        want.append("cu_num")
    if want:
        out.append(
            finding(
                "key-columns-missing",
                t.rel,
                1,
                f"missing key columns {', '.join(want)} (header: {', '.join(t.columns)})",
                op=op,
                missing=want,
                columns=t.columns,
            )
        )
    return out


def value_findings(ctx: AuditContext, t: ConfigTable) -> list[Finding]:
    op = ctx.ops.get(t.rel)
    out: list[Finding] = []
    if t.error or t.kind != "tuned":
        return out
    rc = ctx.runtime_for(op)
    if not t.rows and not (rc is not None and merged_elsewhere(ctx, rc, t.rel)):
        out.append(
            finding(
                "tuned-empty",
                t.rel,
                1,
                "tuned CSV has a header and no rows: the op ships untuned, silently",
                op=op,
            )
        )
    if not t.rows:
        return out
    if "us" in t.columns:
        for ln, v in t.rows:
            us = v.get("us")
            bad = None
            if us is None:
                bad = "missing"
            elif not isinstance(us, (int, float)) or isinstance(us, bool):
                bad = f"not a number ({us!r})"
            elif math.isnan(us):
                bad = "NaN"
            elif math.isinf(us):
                bad = "infinite"
            elif us <= 0:
                bad = "zero" if us == 0 else "negative"
            if bad:
                out.append(
                    finding(
                        "us-invalid",
                        t.rel,
                        ln,
                        f"us is {bad} ({us!r}): the merge sorts by us",
                        op=op,
                        us=us,
                    )
                )
    out += row_value_findings(t, op)
    threshold = ctx.err_ratio_threshold(op)
    for c in ERR_COLUMNS:
        if c not in t.columns:
            continue
        for ln, v in t.rows:
            e = _num(v.get(c))
            if e is not None and e > threshold:
                out.append(
                    finding(
                        "err-ratio-high",
                        t.rel,
                        ln,
                        f"{c} {v.get(c)} is above {threshold:g}, the default "
                        "--errRatio of the tuner that writes this file",
                        op=op,
                        column=c,
                        value=v.get(c),
                        threshold=threshold,
                    )
                )
    for c in ("splitK", "ksplit") if ctx.option_read(op, "--splitK") else ():
        if c in t.columns:
            vals = [v.get(c) for _, v in t.rows]
            if vals and all(x == 0 for x in vals):
                out.append(
                    finding(
                        "splitk-never-searched",
                        t.rel,
                        1,
                        f"{c} is 0 in all {len(vals)} rows: split-K was never searched "
                        "(the tuner's -k/--splitK is store_true, off by default)",
                        op=op,
                        column=c,
                        rows=len(vals),
                    )
                )
    if op in MX_OPS:
        out += mx_findings(ctx, t, op)
    return out


SHAPE_COLUMNS = ("M", "N", "K")
SPLITK_COLUMNS = ("splitK", "ksplit")


def row_value_findings(t: ConfigTable, op: str | None) -> list[Finding]:
    """errRatio NaN or negative; M/N/K not positive integers; splitK below 0: values no tuner
    writes (a broken run or a hand edit), each one row the runtime may match."""
    out: list[Finding] = []
    errs = [c for c in ERR_COLUMNS if c in t.columns]
    shapes = [c for c in SHAPE_COLUMNS if c in t.columns]
    splits = [c for c in SPLITK_COLUMNS if c in t.columns]
    for ln, v in t.rows:
        for c in errs:
            e = v.get(c)
            if isinstance(e, float) and math.isnan(e) or (_num(e) or 0.0) < 0:
                out.append(
                    finding(
                        "err-ratio-invalid",
                        t.rel,
                        ln,
                        f"{c} is {e!r}: an error ratio is a fraction in [0, 1]",
                        op=op,
                        column=c,
                        value=e,
                    )
                )
        for c in shapes:
            x = v.get(c)
            if not (isinstance(x, int) and not isinstance(x, bool) and x > 0):
                out.append(
                    finding(
                        "shape-invalid",
                        t.rel,
                        ln,
                        f"{c} is {x!r}, not a positive integer: no GEMM has this shape",
                        op=op,
                        column=c,
                        value=x,
                    )
                )
        for c in splits:
            x = v.get(c)
            if isinstance(x, (int, float)) and not isinstance(x, bool) and x < 0:
                out.append(
                    finding(
                        "splitk-negative",
                        t.rel,
                        ln,
                        f"{c} is {x!r}: split-K is a count or exponent, never negative",
                        op=op,
                        column=c,
                        value=x,
                    )
                )
    return out


_MARKERS = ("<<<<<<< ", ">>>>>>> ", "=======")


def conflict_findings(rel: str, data: bytes, op: str | None) -> list[Finding]:
    """Git conflict markers left in a config file (aiter's own level-0 CSV test checks 9 files)."""
    out = []
    for i, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        line = raw.rstrip("\r")
        if line.startswith(_MARKERS[:2]) or line == _MARKERS[2]:
            out.append(
                finding(
                    "conflict-marker",
                    rel,
                    i,
                    f"git conflict marker {line[:7]!r} left in the file: a merge was never "
                    "resolved",
                    op=op,
                    marker=line[:7],
                )
            )
    return out


def mx_findings(ctx: AuditContext, t: ConfigTable, op: str) -> list[Finding]:
    """K per split must be whole scale blocks: K % (32 * KBatch) == 0, with KBatch = 2**splitK
    (csrc/ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_tune.cu:
    `int KBatch = std::pow(2, splitK);`), and the kernel's KPerBLOCK must be a multiple of 32."""
    out = []
    for ln, v in t.rows:
        K, sk = v.get("K"), v.get("splitK")
        problems = []
        if isinstance(K, int) and isinstance(sk, int) and sk >= 0:
            kbatch = 2**sk
            if K % (SCALE_BLOCK * kbatch):
                problems.append(
                    f"K={K} split {kbatch} ways (splitK={sk}) gives "
                    f"K/{kbatch}={K / kbatch:g}, not a multiple of {SCALE_BLOCK}"
                )
        kid = v.get("kernelId")
        r = resolve(ctx, t, op, v) if "kernelId" in t.columns else None
        k = r.kernels.get(kid) if r is not None and r.kernels and isinstance(kid, int) else None
        if k is not None and isinstance(k.tile_k, int) and k.tile_k % SCALE_BLOCK:
            problems.append(
                f"kernel {kid} has KPerBLOCK={k.tile_k}, not a multiple of {SCALE_BLOCK}"
            )
        if problems:
            out.append(
                finding(
                    "mx-scale-block",
                    t.rel,
                    ln,
                    "; ".join(problems)
                    + ": a 32-element scale block is cut (finite, plausible, wrong)",
                    op=op,
                    K=K,
                    splitK=sk,
                    kernelId=kid,
                )
            )
    return out

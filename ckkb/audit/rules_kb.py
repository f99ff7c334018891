"""Rules that need the knowledge base.

- baseline-slower / baseline-missing: a tuned row's `us` against the fastest measured baseline for
  the same (arch, M, N, K) in `harness_results` (status ok; candidates that are not aiter's tuned
  pick: torch candidates and the kernelId 0 incumbent; warm regime preferred, since the tuners time
  warm) and C's ingested ckProfiler races (`races`/`race_results`, fastest timed instance). No
  baseline is not a pass: such rows are counted per file as a note.
- tile-gated: an aiter CK kernel whose tile (block size, M/N/K per block, MFMA M/N, pipeline,
  scheduler) matches CK library instances (A1's `instances`) of a compatible dtype, all of whose
  registrations CK's gates remove on the row's arch (A2's `availability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from ckkb import vocabulary
from ckkb.audit.context import AuditContext
from ckkb.audit.kernel_choice import resolve
from ckkb.audit.list_eval import EvaluatedKernel
from ckkb.audit.model import Finding, finding
from ckkb.extract.aiter_configs import ConfigTable, arch_of

TILE_COLS = ("block_size", "tile_m", "tile_n", "tile_k", "mfma_m", "mfma_n")


def ck_gemm_xdl(template: str | None) -> bool:
    """aiter's CK kernels are XDL GEMMs (gfx9): compare only
    with CK's XDL GEMM device ops, never WMMA or conv."""
    t = (template or "").lower()
    return "gemm" in t and "xdl" in t and "conv" not in t and "contraction" not in t


def dtype_hints(op: str | None) -> tuple[str, ...] | None:
    """The canonical A dtypes op's family of kernels consume (ckkb.vocabulary)."""
    return vocabulary.aiter_family(op, vocabulary.AITER_KERNEL_DTYPES)


@dataclass
class CkIndex:
    """CK instances by tile, with their per-arch availability."""

    by_tile: dict[tuple, list[dict[str, Any]]] = field(default_factory=dict)
    avail: dict[tuple[int, str], dict[str, Any]] = field(
        default_factory=dict
    )  # (list_id, arch) -> best evidence
    instances: int = 0
    # gated()'s candidates per (tile, dtype hints, pipeline, scheduler): many config rows share a
    # kernel. Filled on first use, so by_tile must be complete by then.
    _matching: dict[tuple, list[dict[str, Any]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def from_rows(
        cls, instances: list[Any], registrations: list[Any], availability: list[Any]
    ) -> CkIndex:
        idx = cls()
        reg_list = {r.id: r.list_id for r in registrations}
        first: dict[tuple[int, str], Any] = {}  # (list_id, arch) -> its first availability row
        first_ok: dict[tuple[int, str], Any] = {}  # ... and its first available one
        for a in availability:
            lid = reg_list.get(a.registration_id)
            if lid is not None:
                k = (lid, a.arch)
                first.setdefault(k, a)
                if a.available and k not in first_ok:
                    first_ok[k] = a
        for (
            k,
            a,
        ) in (
            first.items()
        ):  # evidence dicts only for the rows kept (there is one per availability row)
            a = first_ok.get(k, a)
            idx.avail[k] = {
                "available": bool(a.available),
                "layer": a.layer,
                "file": a.file,
                "line": a.line,
                "condition": a.condition,
            }
        tile_of = attrgetter(*TILE_COLS)
        for i in instances:
            if getattr(i, "status", "active") != "active":
                continue
            key = tile_of(i)
            if None in key:
                continue
            idx.by_tile.setdefault(key, []).append(
                {
                    "id": i.id,
                    "list_id": i.list_id,
                    "list_name": i.list_name,
                    "file": i.file,
                    "line": i.line,
                    "template": i.template,
                    "a_dtype": i.a_dtype,
                    "pipeline": i.pipeline,
                    "scheduler": i.scheduler,
                }
            )
            idx.instances += 1
        return idx

    @classmethod
    def from_db(cls, db: Any) -> CkIndex:
        from types import SimpleNamespace as NS

        names = set(db.table_names())
        if not {"instances", "registrations", "availability"} <= names:
            return cls()
        cols = [
            "id",
            "list_id",
            "list_name",
            "file",
            "line",
            "template",
            "a_dtype",
            "pipeline",
            "scheduler",
            "status",
            *TILE_COLS,
        ]
        inst = [
            NS(**r)
            for r in db.query(f"select {', '.join(cols)} from instances where status = 'active'")
        ]
        regs = [NS(**r) for r in db.query("select id, list_id from registrations")]
        av = [
            NS(**r)
            for r in db.query(
                "select registration_id, arch, available, "
                "layer, file, line, condition from availability"
            )
        ]
        return cls.from_rows(inst, regs, av)

    def gated(self, kernel: Any, op: str | None, arch: str) -> tuple[list[dict], dict | None]:
        """(matching instances, evidence of the gate) --
        evidence None when some match is available on arch."""
        hints = dtype_hints(op)
        if hints is None:  # no dtype to compare: nothing matches
            return [], None
        memo = (
            tuple(getattr(kernel, c) for c in TILE_COLS),
            hints,
            kernel.pipeline,
            kernel.scheduler,
        )
        out = self._matching.get(memo)
        if out is None:
            out = self._matching[memo] = self._matches(
                self.by_tile.get(memo[0], []), hints, kernel.pipeline, kernel.scheduler
            )
        if not out:
            return [], None
        out = list(out)
        evid = None
        for c in out:
            a = self.avail.get((c["list_id"], arch))
            if a is None:
                continue
            if a["available"]:
                return out, None
            evid = evid or {**a, "instance": c}
        return out, evid

    @staticmethod
    def _matches(
        cands: list[dict[str, Any]],
        hints: tuple[str, ...],
        pipeline: str | None,
        scheduler: str | None,
    ) -> list[dict[str, Any]]:
        """The CK XDL GEMM instances among `cands` with an A
        dtype in `hints` and a compatible pipeline/scheduler."""
        out = []
        for c in cands:
            if not ck_gemm_xdl(c["template"]):
                continue
            if vocabulary.canonical(c["a_dtype"]) not in hints:
                continue
            if pipeline and c["pipeline"] and pipeline != c["pipeline"]:
                continue
            if scheduler and c["scheduler"] and scheduler.lower() != c["scheduler"].lower():
                continue
            out.append(c)
        return out


@dataclass
class BaselineIndex:
    best: dict[tuple, dict[str, Any]] = field(
        default_factory=dict
    )  # (arch, M, N, K, dtype|None) -> {us, candidate, regime, source}
    rows: int = 0

    def lookup(
        self, arch: str | None, M: Any, N: Any, K: Any, op: str | None
    ) -> dict[str, Any] | None:
        dtypes: tuple[str | None, ...] = (None,)
        measured = vocabulary.aiter_family(op, vocabulary.AITER_MEASURED_DTYPES)
        if measured is not None:
            dtypes = (*measured, None)
        found = [b for d in dtypes if (b := self.best.get((arch, M, N, K, d))) is not None]
        if not found:
            return None
        warm = [b for b in found if b["regime"] == "warm"]
        return min(warm or found, key=lambda b: b["us"])

    def add(self, key: tuple, us: float, rec: dict[str, Any]) -> None:
        *shape, d = key
        key = (*shape, vocabulary.canonical(d) or d)  # fp8, F8, f8_t: one word (ckkb.vocabulary)
        self.rows += 1
        cur = self.best.get(key)
        better = (
            cur is None
            or (rec["regime"] == "warm" and cur["regime"] != "warm")
            or (rec["regime"] == cur["regime"] and us < cur["us"])
        )
        if better:
            self.best[key] = {"us": us, **rec}

    @classmethod
    def from_db(cls, db: Any) -> BaselineIndex:
        idx = cls()
        names = set(db.table_names())
        if "harness_results" in names:
            cols = {c.name for c in db["harness_results"].columns}
            if {"arch", "M", "N", "K", "us", "candidate"} <= cols:
                q = (
                    "select arch, M, N, K, dtype, us, candidate, "
                    "regime, kernel_id, status from harness_results "
                    "where us > 0 and (status = 'ok' or status is null) "
                    "and (candidate not like 'aiter:%' or kernel_id = 0)"
                )
                for r in db.query(q):
                    idx.add(
                        (r["arch"], r["M"], r["N"], r["K"], r["dtype"]),
                        float(r["us"]),
                        {
                            "candidate": r["candidate"],
                            "regime": r.get("regime") or "warm",
                            "source": "harness_results",
                        },
                    )
        if "races" in names and "race_results" in names:
            # C's ingested ckProfiler races: the fastest timed
            # result per race (ms -> us), else its Best line.
            q = (
                "select r.arch, r.M, r.N, r.K, r.dtype, "
                "coalesce(min(rr.ms), r.best_ms) as ms from races r "
                "left join race_results rr on rr.race_id = r.id and rr.ms > 0 and rr.supported "
                "where r.status = 'ok' and r.arch is not null and r.M is not null group by r.id"
            )
            for r in db.query(q):
                if r["ms"] and r["ms"] > 0:
                    idx.add(
                        (r["arch"], r["M"], r["N"], r["K"], r["dtype"]),
                        float(r["ms"]) * 1000.0,
                        {"candidate": "ckProfiler best", "regime": "warm", "source": "races"},
                    )
        return idx


def kb_findings(ctx: AuditContext, t: ConfigTable) -> list[Finding]:
    out: list[Finding] = []
    if t.error or t.kind != "tuned" or not t.rows:
        return out
    op = ctx.ops.get(t.rel)
    if (
        ctx.baselines is not None
        and "us" in t.columns
        and all(c in t.columns for c in ("M", "N", "K"))
    ):
        never: list[int] = []
        for ln, v in t.rows:
            us = v.get("us")
            if (
                not isinstance(us, (int, float))
                or isinstance(us, bool)
                or math.isnan(us)
                or us <= 0
            ):
                continue
            arch = arch_of(v) or ctx.arch
            b = ctx.baselines.lookup(arch, v.get("M"), v.get("N"), v.get("K"), op)
            if b is None:
                never.append(ln)
                continue
            ratio = b["us"] / us
            if ratio < 1.0:
                out.append(
                    finding(
                        "baseline-slower",
                        t.rel,
                        ln,
                        f"tuned us {us:g} is slower than the measured baseline "
                        f"{b['us']:g} us ({b['candidate']}, {b['regime']}, "
                        f"{b['source']}) for M={v.get('M')} N={v.get('N')} "
                        f"K={v.get('K')} on {arch}: {ratio:.2f}x",
                        op=op,
                        us=us,
                        baseline=b,
                        ratio=round(ratio, 4),
                    )
                )
        if never:
            out.append(
                finding(
                    "baseline-missing",
                    t.rel,
                    never[0],
                    f"{len(never)} of {len(t.rows)} rows were never compared: "
                    "the knowledge base holds no measured baseline "
                    "for their (arch, M, N, K); a missing baseline is not a pass",
                    op=op,
                    count=len(never),
                    lines=never[:20],
                )
            )
    if ctx.ck is not None and "kernelId" in t.columns:
        for ln, v in t.rows:
            r = resolve(ctx, t, op, v)
            if r.status != "checked" or r.kernels is None:
                continue
            kid = v.get("kernelId")
            k = r.kernels.get(kid) if kid is not None else None
            arch = arch_of(v)
            if k is None or arch is None or isinstance(k, EvaluatedKernel):
                continue  # (a list the audit builds: FlyDSL, opus; no CK tile to gate)
            matches, evid = ctx.ck.gated(k, op, arch)
            if evid is not None:
                inst = evid["instance"]
                out.append(
                    finding(
                        "tile-gated",
                        t.rel,
                        ln,
                        f"kernel {v.get('kernelId')} ({k.name}) matches CK instance "
                        f"{inst['list_name']} ({inst['file']}:{inst['line']}), "
                        f"which CK removes on {arch}: {evid.get('layer')} at "
                        f"{evid.get('file')}:{evid.get('line')} ({evid.get('condition')})",
                        op=op,
                        kernelId=v.get("kernelId"),
                        arch=arch,
                        matches=len(matches),
                        gate=evid,
                    )
                )
    return out

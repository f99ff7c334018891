"""Jobs of a fleet run: `ckkb race --gpus/--scheduler` (one job per shape) and `ckkb harness
--gpus/--scheduler` (one job per shape and pass, every shape of pass 1 before pass 2)."""

from __future__ import annotations

import datetime as _dt
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.errors import CkkbError
from ckkb.fleet import tasks
from ckkb.fleet.driver import Job, Outcome, driver_facts, require_dask, run_jobs
from ckkb.fleet.gpus import Gpu, discover_rocm, discover_torch, parse_spec

if TYPE_CHECKING:
    from ckkb.harness.timing import Shape as HarnessShape
    from ckkb.profiler_cmd import Command
    from ckkb.profiler_legend import Legend
    from ckkb.runner import Shape as RaceShape


def _run_id() -> tuple[str, str]:
    created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return created, f"{created}@{driver_facts()['hostname']}"


def _header(
    kind: str, created: str, run_id: str, gpus: list[Gpu] | None, scheduler: str | None
) -> dict[str, Any]:
    return {
        "record": "bundle",
        "kind": kind,
        "created": created,
        "host": driver_facts(),
        "fleet": {
            "run_id": run_id,
            "scheduler": scheduler,
            "gpus": [g.to_json() for g in gpus] if gpus else None,
            "engine": "dask.distributed",
        },
    }


def pick_gpus(spec: str | None, scheduler: str | None, kind: str) -> tuple[list[Gpu] | None, str]:
    """Check Dask is there, then which local GPUs (`--gpus`) and their runtime."""
    if spec and scheduler:
        raise CkkbError("give --gpus or --scheduler, not both")
    require_dask()
    if scheduler:
        return None, "rocm"
    if kind == "race":
        return parse_spec(spec or "all", discover_rocm()), "rocm"
    found, runtime = discover_torch()
    return parse_spec(spec or "all", found), runtime


def race_jobs(
    legend: Legend,
    plans: list[tuple[RaceShape, Command]],
    *,
    timeout: float,
    run_id: str,
    token: str,
) -> list[Job]:
    from ckkb.runner import RunResult, race_record

    jobs = []
    for i, (s, cmd) in enumerate(plans):
        blank = RunResult(cmd.argv, "", None, "", None, 0.0, "")
        template = race_record(legend, s, cmd, blank, timeout, {})
        parts = (legend.op, " ".join(cmd.argv[1:]), f"line{s.line}", "p1")

        def fail(
            cause: str,
            last: dict[str, Any] | None,
            template: dict[str, Any] = template,
            parts: tuple[str, ...] = parts,
        ) -> list[dict[str, Any]]:
            rec = dict(last or template)
            rec["status"] = (last or {}).get("status") or "crash"
            rec["failure"] = f"{cause}; last: {last['failure']}" if last else cause
            rec["attempts"] = 3
            if last is None:
                rec["host"] = driver_facts()
                rec["key"] = "|".join([run_id, "-", "-", *parts, "failed"])
                rec["run_id"] = run_id
            return [rec]

        jobs.append(
            Job(
                key=f"ckkb-race-{token}-{i}",
                fn=tasks.race_shape,
                payload={
                    "argv": cmd.argv,
                    "timeout": timeout,
                    "record": template,
                    "run_id": run_id,
                    "key_parts": parts,
                },
                label=f"{s.M}x{s.N}x{s.K}",
                fail=fail,
            )
        )
    return jobs


def run_race(
    legend: Legend,
    plans: list[tuple[RaceShape, Command]],
    *,
    out: Path,
    timeout: float,
    gpus: list[Gpu] | None,
    scheduler: str | None,
    echo: Callable[[str], None] | None = None,
) -> Outcome:
    created, run_id = _run_id()
    token = secrets.token_hex(4)
    jobs = race_jobs(legend, plans, timeout=timeout, run_id=run_id, token=token)
    header = _header("race", created, run_id, gpus, scheduler)
    return run_jobs(jobs, out, header, gpus=gpus, scheduler=scheduler, runtime="rocm", echo=echo)


def harness_jobs(
    shapes: Sequence[HarnessShape], passes: int, *, run_id: str, token: str
) -> list[Job]:
    from ckkb.harness.candidates import candidates_for, out_dtype

    jobs = []
    for p in range(1, passes + 1):
        for i, s in enumerate(shapes):

            def fail(
                cause: str,
                last: dict[str, Any] | None,
                s: HarnessShape = s,
                i: int = i,
                p: int = p,
            ) -> list[dict[str, Any]]:
                recs = []
                for c in candidates_for(s, aiter=False):
                    for regime in ("warm", "cold"):
                        key = "|".join([run_id, "-", "-", f"#{i}", s.label, c.name, regime, str(p)])
                        recs.append(
                            {
                                "record": "harness_results",
                                "run_id": run_id,
                                "device": "unknown",
                                "arch": "unknown",
                                "M": s.M,
                                "N": s.N,
                                "K": s.K,
                                "dtype": s.dtype,
                                "out_dtype": out_dtype(s),
                                "layout": c.layout,
                                "regime": regime,
                                "candidate": c.name,
                                "status": "error",
                                "pass_no": p,
                                "config": s.config,
                                "config_row": s.config_row,
                                "extra": {"note": cause, "attempts": 3},
                                "key": key + "|failed",
                            }
                        )
                return recs

            jobs.append(
                Job(
                    key=f"ckkb-harness-{token}-p{p}-{i}",
                    fn=tasks.harness_shape,
                    payload={"shape": s, "pass_no": p, "run_id": run_id, "index": i},
                    label=f"pass {p} {s.label}",
                    fail=fail,
                )
            )
    return jobs


def run_harness_fleet(
    shapes: Sequence[HarnessShape],
    passes: int,
    *,
    out: Path,
    gpus: list[Gpu] | None,
    runtime: str,
    scheduler: str | None,
    echo: Callable[[str], None] | None = None,
) -> Outcome:
    created, run_id = _run_id()
    jobs = harness_jobs(shapes, passes, run_id=run_id, token=secrets.token_hex(4))
    header = _header("harness", created, run_id, gpus, scheduler)
    return run_jobs(jobs, out, header, gpus=gpus, scheduler=scheduler, runtime=runtime, echo=echo)

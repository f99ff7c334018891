"""The `--gpus` / `--scheduler` branches of `ckkb race` and `ckkb harness`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.errors import CkkbError

if TYPE_CHECKING:
    from ckkb.harness.timing import Shape as HarnessShape
    from ckkb.profiler_legend import Legend
    from ckkb.runner import RaceSummary
    from ckkb.runner import Shape as RaceShape


def _out_path(out: str | Path) -> Path:
    p = Path(out)
    if p.exists() and p.is_dir():
        raise CkkbError(f"--out {p} is a directory")
    if not (p.parent if str(p.parent) else Path(".")).is_dir():
        raise CkkbError(f"output folder does not exist: {p.parent}")
    return p


def race_fleet(
    legend: Legend,
    shapes: list[RaceShape],
    *,
    dtype: str,
    layout: str | None,
    out: str | Path,
    profiler: str | None,
    timeout: float,
    warmup: int,
    iters: int,
    db: Any,
    gpus: str | None,
    scheduler: str | None,
    echo: Callable[[str], None] | None = None,
) -> RaceSummary:
    """`ckkb race --gpus/--scheduler`: the same commands as a serial race, one task per shape."""
    from ckkb.fleet.jobs import pick_gpus, run_race
    from ckkb.profiler_cmd import PROFILER
    from ckkb.runner import RaceSummary, plan_race, resolve_profiler

    picked, _ = pick_gpus(gpus, scheduler, "race")
    try:
        exe = resolve_profiler(profiler)
    except CkkbError:
        if not scheduler:
            raise
        # the workers may be other hosts: their own PATH finds it there
        exe = profiler or PROFILER
    path = _out_path(out)
    plans = plan_race(
        legend, shapes, dtype=dtype, layout=layout, profiler=exe, db=db, warmup=warmup, iters=iters
    )
    res = run_race(
        legend, plans, out=path, timeout=timeout, gpus=picked, scheduler=scheduler, echo=echo
    )
    summary = RaceSummary(path)
    for r in res.rows:
        M, N, K = (int(x) for x in r["shape"].split("x"))
        summary.runs.append(
            {
                "M": M,
                "N": N,
                "K": K,
                "status": r["result"],
                "failure": r["failure"],
                "gpu": r["gpu"],
                "seconds": r["seconds"],
            }
        )
    return summary


def harness_fleet(
    shapes: Sequence[HarnessShape],
    passes: int,
    out: Path,
    gpus: str | None,
    scheduler: str | None,
    quiet: bool,
) -> dict[str, Any]:
    """`ckkb harness --gpus/--scheduler`: one task per shape and pass; the bundle streams."""
    from ckkb.fleet.jobs import pick_gpus, run_harness_fleet
    from ckkb.harness.candidates import check_shape

    for s in shapes:
        try:
            check_shape(s)
        except ValueError as e:
            raise CkkbError(str(e)) from None
    picked, runtime = pick_gpus(gpus, scheduler, "harness")
    path = _out_path(out)

    def echo(line: str) -> None:
        import sys

        sys.stderr.write(line)

    res = run_harness_fleet(
        shapes,
        passes,
        out=path,
        gpus=picked,
        runtime=runtime,
        scheduler=scheduler,
        echo=None if quiet else echo,
    )
    return {
        "bundle": str(path),
        "written": res.written,
        "skipped": res.skipped,
        "failed": res.failed,
        "wall_seconds": round(res.wall_seconds, 3),
        "tasks": len(res.tasks),
    }

"""`ckkb harness`: the click command, kept importable without the rest of the CLI (and torch),
so that `python -m ckkb.harness` runs it on a GPU host that has only torch, click and rich."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ckkb.errors import CkkbError


def run_command(
    shapes_file: str | None,
    from_config: str | None,
    dtype: str | None,
    out: str | None,
    limit: int | None,
    passes: int,
    quiet: bool = False,
    gpus: str | None = None,
    scheduler: str | None = None,
) -> Path:
    """Read and check the shapes, time them, write the bundle. Returns the bundle path."""
    from ckkb.harness.bundle import write_bundle
    from ckkb.harness.shapes import config_name, parse_dtype_list, read_shapes, resolve_config

    if bool(shapes_file) == bool(from_config):
        raise CkkbError("give exactly one of --shapes FILE or --from-config CSV")
    if limit is not None and limit <= 0:
        raise CkkbError(f"--limit must be positive, got {limit}")
    if passes <= 0:
        raise CkkbError(f"--passes must be positive, got {passes}")
    dtypes = parse_dtype_list(dtype)
    if from_config:
        p = resolve_config(from_config)
        shapes = read_shapes(p, config=config_name(p), dtypes=dtypes, limit=limit)
    else:
        assert shapes_file is not None  # exactly one of the two was given (checked above)
        shapes = read_shapes(shapes_file, dtypes=dtypes, limit=limit)
    out_path = Path(out) if out else Path("harness.jsonl")
    if out_path.exists() and out_path.is_dir():
        raise CkkbError(f"--out is a folder: {out_path}")
    if not (out_path.parent if str(out_path.parent) else Path(".")).is_dir():
        raise CkkbError(f"output folder does not exist: {out_path.parent}")
    if gpus or scheduler:
        from ckkb.fleet.cli import harness_fleet

        done = harness_fleet(shapes, passes, out_path, gpus, scheduler, quiet)
        print(
            f"wrote {out_path}: {done['written']} records from {done['tasks']} tasks "
            f"({done['failed']} failed) in {done['wall_seconds']} s",
            file=sys.stderr,
        )
        return out_path

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ckkb.harness.run import preflight, run_harness

    dev = preflight(shapes)  # one line, before any progress bar: bad shape, no torch, no GPU, dtype
    err = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
    ) as prog:
        task = prog.add_task("harness", total=None)

        def on_start(total: int) -> None:
            prog.update(task, total=total)

        def step(label: str) -> None:
            prog.update(task, advance=1, description=label)

        res = run_harness(shapes, passes=passes, progress=step, on_start=on_start, dev=dev)
    for note in res.notes:
        err.print(f"note: {note}", highlight=False)
    n = write_bundle(out_path, res.created, res.host, [*res.ceilings, *res.results])
    ok = sum(1 for r in res.results if r.status == "ok")
    bad = len(res.results) - ok
    err.print(
        f"wrote {out_path}: {n} records ({ok} timed, {bad} not timed) "
        f"on {res.host['device']} ({res.host['arch']})",
        highlight=False,
    )
    for c in res.ceilings:
        db = f"{c.do_bench_us:.1f} us" if c.do_bench_us else "n/a"
        ratio = f"{c.ratio:.3f}" if c.ratio else "n/a"
        burst = c.extra.get("burst_us")
        b = f"; burst {burst:.1f} us" if burst else ""
        err.print(
            f"ceiling {c.what} {c.size}: harness {c.us:.1f} us ({c.value:.0f} {c.unit}), "
            f"do_bench {db}, ratio {ratio}{b}",
            highlight=False,
        )
    return out_path


@click.command("harness")
@click.option(
    "--shapes",
    "shapes_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="CSV with columns M,N,K (optionally dtype, kernelId, splitK, us, config, config_row).",
)
@click.option(
    "--from-config",
    "from_config",
    type=click.Path(dir_okay=False),
    default=None,
    help="An aiter tuned/untuned GEMM config CSV (a path, or a name under the installed aiter's "
    "configs/, e.g. bf16_tuned_gemm.csv); its rows' M,N,K and dtype are timed.",
)
@click.option(
    "--dtype",
    default=None,
    help="Comma-separated dtypes to time every shape in: bf16,fp16,fp8 (default: each row's own).",
)
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False),
    help="Bundle to write (JSON lines; default harness.jsonl). Written atomically at the end.",
)
@click.option("--limit", type=int, default=None, help="Time only the first N shapes.")
@click.option(
    "--passes",
    type=int,
    default=2,
    show_default=True,
    help="Passes over the whole shape set (two give the run-to-run spread).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--gpus",
    default=None,
    help="all | N (the first N) | i,j,... (3, is GPU 3 alone): one Dask worker per GPU of this "
    "host, results streamed to --out (needs ckkb[fleet]).",
)
@click.option(
    "--scheduler",
    default=None,
    help="Address of a Dask scheduler whose workers offer GPU=1 (needs ckkb[fleet]).",
)
def harness_command(
    shapes_file: str | None,
    from_config: str | None,
    dtype: str | None,
    out: str | None,
    limit: int | None,
    passes: int,
    quiet: bool,
    gpus: str | None,
    scheduler: str | None,
) -> None:
    """Time GEMMs warm and cold on this host's GPU, with a roofline; write a bundle for
    `ckkb ingest`.

    Warm: one operand set, back to back (what tuners measure). Cold: operand sets rotated past the
    last-level cache. Each output is verified against an fp32 reference before it is timed.
    Needs torch and a GPU (`pip install 'ckkb[gpu]'`).
    """
    run_command(shapes_file, from_config, dtype, out, limit, passes, quiet, gpus, scheduler)

"""`ckkb profiler ops|legend|cmd`, `ckkb ingest`, `ckkb races`, `ckkb race`: thin wrappers over
ckkb.profiler_cmd, ckkb.kb.ingest, the races views and ckkb.runner."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from ckkb import settings
from ckkb.cli import checks
from ckkb.cli.options import chosen_tree, db_option, json_option, open_kb
from ckkb.cli.output import console, emit_json, print_table, warn
from ckkb.errors import CkkbError
from ckkb.profiler_cmd import build_command
from ckkb.queries import sql
from ckkb.queries.profiler import RACE_KEYS, legend_json, list_ops, load_legend, races_json

if TYPE_CHECKING:
    import sqlite_utils  # for annotations: importing it pulls in pandas (~0.4 s)


def _open(db_path: str | None, readonly: bool = True) -> sqlite_utils.Database:
    return open_kb(db_path, readonly=readonly)


# ----------------------------------------------------------------------------- commands


@click.group("profiler")
def profiler_group() -> None:
    """ckProfiler's ops, their legends, and commands built from them."""


@profiler_group.command("ops")
@click.option("--gemm", "gemm_only", is_flag=True, help="Only GEMM-family ops.")
@db_option
@json_option
def ops_cmd(gemm_only: bool, db_path: str | None, as_json: bool) -> None:
    """Every op ckProfiler registers (REGISTER_PROFILER_OPERATION in CK's profiler/src)."""
    db = _open(db_path)
    ops = [o for o in list_ops(db) if o["gemm_family"] or not gemm_only]
    if as_json:
        emit_json(
            {"count": len(ops), "gemm_family": sum(o["gemm_family"] for o in ops), "ops": ops}
        )
        return
    print_table(
        ops,
        ["name", "description", "positional_args", "gemm_family", "file"],
        title=f"{len(ops)} ckProfiler ops",
    )


@profiler_group.command("legend")
@click.argument("op")
@db_option
@json_option
def legend_cmd(op: str, db_path: str | None, as_json: bool) -> None:
    """An op's positional legend (arg1..argN) with its code tables, as its usage text prints it."""
    db = _open(db_path)
    lg = legend_json(db, op)
    if as_json:
        emit_json(lg)
        return
    console.print(
        f"ckProfiler {op}: {lg['description']}  ({lg['file']}:{lg['line']})", highlight=False
    )
    rows = []
    for a in lg["args"]:
        codes = "; ".join(
            f"{k}: {v}" + (f" [{a['enum'][k]}]" if k in a["enum"] else "")
            for k, v in a["codes"].items()
        )
        pos = f"arg{a['position']}" if a["position"] is not None else a["name"]
        rows.append(
            {
                "arg": pos,
                "name": escape(a["name"]),
                "codes": escape(codes),
                "optional": "yes" if a["optional"] else "",
                "default": a["default"],
            }
        )
    print_table(rows, ["arg", "name", "codes", "optional", "default"])
    for q in lg["quirks"]:
        warn(escape(f"quirk ({q['file']}:{q['line']}): {q['summary']}"))


@profiler_group.command("cmd")
@click.argument("op")
@click.option(
    "--dtype",
    required=True,
    help="Data type: a name from the legend (bf16, fp16, ...) or its code.",
)
@click.option(
    "--layout",
    default=None,
    help="Layout: mk_nk, mk_kn, km_kn, km_nk, an enum name (MK_NK_MN) or the code.",
)
@click.option("--m", "M", type=checks.DIM, required=True)
@click.option("--n", "N", type=checks.DIM, required=True)
@click.option("--k", "K", type=checks.DIM, required=True)
@click.option(
    "--verify/--no-verify",
    default=False,
    help="Verification (arg 'verification'); on for the first run of every new shape.",
)
@click.option(
    "--init", default="integer", show_default=True, help="Initialisation: integer | decimal | none."
)
@click.option("--log", "log", is_flag=True, help="Print tensor values.")
@click.option("--time/--no-time", "time_kernel", default=True, help="Time the kernel (default on).")
@click.option(
    "--warmup",
    type=checks.NON_NEGATIVE,
    default=None,
    help="Warm-up cycles (ckProfiler's default: 1).",
)
@click.option(
    "--iters", type=checks.COUNT, default=None, help="Timed iterations (ckProfiler's default: 10)."
)
@click.option("--stride-a", type=checks.STRIDE, default=None)
@click.option("--stride-b", type=checks.STRIDE, default=None)
@click.option("--stride-c", type=checks.STRIDE, default=None)
@click.option(
    "--kbatch", type=checks.COUNT, default=None, help="Split-K batch, for ops that take one."
)
@click.option(
    "--rotating",
    type=checks.NON_NEGATIVE,
    default=None,
    help="Rotating-buffer size in MB, for ops that take one.",
)
@click.option(
    "--profiler",
    default="ckProfiler",
    show_default=True,
    help="Executable name to print as argv[0].",
)
@db_option
@json_option
def cmd_cmd(
    op: str,
    dtype: str,
    layout: str | None,
    M: int,
    N: int,
    K: int,
    verify: bool,
    init: str,
    log: bool,
    time_kernel: bool,
    warmup: int | None,
    iters: int | None,
    stride_a: int | None,
    stride_b: int | None,
    stride_c: int | None,
    kbatch: int | None,
    rotating: int | None,
    profiler: str,
    db_path: str | None,
    as_json: bool,
) -> None:
    """The exact ckProfiler argv for OP, built from its legend, and the checklist warnings."""
    db = _open(db_path)
    cmd = build_command(
        load_legend(db, op),
        dtype=dtype,
        layout=layout,
        M=M,
        N=N,
        K=K,
        verify=verify,
        init=init,
        log=log,
        time_kernel=time_kernel,
        warmup=warmup,
        iters=iters,
        stride_a=stride_a,
        stride_b=stride_b,
        stride_c=stride_c,
        kbatch=kbatch,
        rotating=rotating,
        profiler=profiler,
        db=db,
    )
    if as_json:
        emit_json(cmd.to_json())
        return
    click.echo(" ".join(cmd.argv))
    for w in cmd.warnings:
        warn(escape(w))


@click.command("ingest")
@click.argument("logs", nargs=-1, required=True)
@click.option("--arch", default=None, help="GPU architecture the logs ran on, e.g. gfx942.")
@click.option("--gpu", default=None, help="GPU name, e.g. 'AMD Instinct MI300X'.")
@click.option("--cu", type=checks.COUNT, default=None, help="Compute units of that GPU.")
@click.option("--rocm", default=None, help="ROCm version.")
@click.option("--host", default=None, help="Host name the logs ran on.")
@click.option(
    "--command", "command", default=None, help="The ckProfiler command line that produced the logs."
)
@db_option
@json_option
def ingest_cmd(
    logs: tuple[str, ...],
    arch: str | None,
    gpu: str | None,
    cu: int | None,
    rocm: str | None,
    host: str | None,
    command: str | None,
    db_path: str | None,
    as_json: bool,
) -> None:
    """Store ckProfiler logs and race/harness bundles (re-ingesting the same file adds nothing).

    Instance names are read with the name schemas of the CK tree --tree names (the release that
    printed them), else per name with the first tree whose schemas read it exactly.
    """
    from ckkb.kb.ingest import ingest  # noqa: PLC0415

    summary = ingest(
        settings.db_path(db_path),
        logs,
        arch=arch,
        gpu=gpu,
        cu=cu,
        rocm=rocm,
        command=command,
        host=host,
        tree=chosen_tree(),
    )
    failed = [
        f for f in summary.files if not f["duplicate"] and not f["stored"]
    ]  # nothing readable in it
    if as_json:
        emit_json(summary.to_json())
    else:
        for e in summary.errors[:50]:
            warn(
                escape(
                    f"{e['file']}:{e['line']}: {e['message']}"
                    if e["line"]
                    else f"{e['file']}: {e['message']}"
                )
            )
        if len(summary.errors) > 50:
            warn(f"... {len(summary.errors) - 50} more (table ingest_errors)")
        dups = sum(1 for f in summary.files if f["duplicate"])
        other = ", ".join(f"{k} {v}" for k, v in sorted(summary.rows_added.items()))
        console.print(
            f"{summary.races_added} races, {summary.results_added} results added"
            + (f", {other}" if other else "")
            + (f"; {dups} file(s) already ingested" if dups else ""),
            highlight=False,
        )
    if failed:
        sys.exit(1)


@click.command("races")
@click.option("--id", "race_id", type=checks.ROW_ID, default=None, help="Only this race.")
@db_option
@json_option
def races_cmd(race_id: int | None, db_path: str | None, as_json: bool) -> None:
    """Per race: instances timed vs registered for its arch, best, worst, spread and winner."""
    db = _open(db_path)
    data = races_json(db, race_id)
    if as_json:
        emit_json(data)
        return
    # winners are long: the table keeps the numbers readable, the full names follow it
    print_table(
        data["races"], [k for k in RACE_KEYS if k != "winner"], title=f"{len(data['races'])} races"
    )
    for r in data["races"]:
        if r["winner"]:
            console.print(
                f"  race {r['id']} winner: {escape(r['winner'])}", highlight=False, soft_wrap=True
            )
    moves = db.execute(sql("winner_moves")).fetchall()
    if moves:
        console.print(
            f"{len(moves)} shape/arch pair(s) where the winner moved (canned query winner_moves)"
        )


def _echo(s: str) -> None:
    sys.stderr.write(s)


def _echo_flushed(s: str) -> None:
    sys.stderr.write(s)
    sys.stderr.flush()


@click.command("race")
@click.argument("op")
@click.option("--dtype", required=True)
@click.option("--layout", default=None)
@click.option(
    "--shapes",
    "shapes_path",
    required=True,
    type=click.Path(),
    help="CSV with a header: M,N,K[,stride_a,stride_b,stride_c,kbatch].",
)
@click.option(
    "--profiler", default=None, help="ckProfiler executable (default: ckProfiler on PATH)."
)
@click.option(
    "--timeout",
    type=checks.SECONDS,
    default=600.0,
    show_default=True,
    help="Seconds one shape may run before its process group is killed.",
)
@click.option("--out", "out", default=None, help="Bundle to write (default: race-OP-TIME.jsonl).")
@click.option("--warmup", type=checks.COUNT, default=5, show_default=True)
@click.option("--iters", type=checks.COUNT, default=20, show_default=True)
@click.option(
    "--ingest/--no-ingest",
    "do_ingest",
    default=False,
    help="Ingest the bundle into --db when done.",
)
@click.option("--quiet", is_flag=True, help="Do not stream ckProfiler's output.")
@click.option(
    "--gpus",
    default=None,
    help="all | N (the first N) | i,j,... (3, is GPU 3 alone): one Dask worker per GPU of this "
    "host (needs ckkb[fleet]).",
)
@click.option(
    "--scheduler",
    default=None,
    help="Address of a Dask scheduler whose workers offer GPU=1 (needs ckkb[fleet]).",
)
@db_option
@json_option
def race_cmd(
    op: str,
    dtype: str,
    layout: str | None,
    shapes_path: str,
    profiler: str | None,
    timeout: float,
    out: str | None,
    warmup: int,
    iters: int,
    do_ingest: bool,
    quiet: bool,
    gpus: str | None,
    scheduler: str | None,
    db_path: str | None,
    as_json: bool,
) -> None:
    """Run ckProfiler OP once per shape and write a portable bundle (`ckkb ingest` merges it)."""
    from ckkb import runner  # noqa: PLC0415

    if warmup < 1 or iters < 1:
        raise CkkbError("--warmup and --iters must be positive")
    db = _open(db_path)
    legend = load_legend(db, op)
    shapes = runner.read_shapes(shapes_path)
    out = out or f"race-{op}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
    echo = None if (quiet or as_json) else _echo_flushed
    if gpus or scheduler:
        from ckkb.fleet.cli import race_fleet  # noqa: PLC0415

        summary = race_fleet(
            legend,
            shapes,
            dtype=dtype,
            layout=layout,
            out=out,
            profiler=profiler,
            timeout=timeout,
            warmup=warmup,
            iters=iters,
            db=db,
            gpus=gpus,
            scheduler=scheduler,
            echo=None if (as_json or quiet) else _echo,
        )
    else:
        summary = runner.race(
            legend,
            shapes,
            dtype=dtype,
            layout=layout,
            out=out,
            profiler=profiler,
            timeout=timeout,
            warmup=warmup,
            iters=iters,
            db=db,
            echo=echo,
        )
    db.close()
    result: dict[str, Any] = summary.to_json()
    if do_ingest:
        from ckkb.kb.ingest import ingest  # noqa: PLC0415

        result["ingest"] = ingest(settings.db_path(db_path), [summary.bundle]).to_json()
    if as_json:
        emit_json(result)
        return
    print_table(
        summary.runs,
        ["M", "N", "K", "status", "failure", "seconds"],
        title=f"{op}: {summary.bundle}",
    )
    if do_ingest:
        ing = result["ingest"]
        console.print(
            f"ingested into {settings.db_path(db_path)}: {ing['races_added']} races, "
            f"{ing['results_added']} results",
            highlight=False,
        )
    else:
        console.print(f"merge it with: ckkb ingest {summary.bundle}", highlight=False)


def register(group: click.Group) -> None:
    group.add_command(profiler_group)
    group.add_command(ingest_cmd)
    group.add_command(races_cmd)
    group.add_command(race_cmd)

"""`ckkb build` and `ckkb schema`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ckkb import pipeline, settings, sources
from ckkb.cli import checks
from ckkb.cli.options import db_path_option, json_option
from ckkb.cli.output import console, emit_json, err_console, print_table, warn
from ckkb.kb.build import build
from ckkb.kb.build import trees as build_trees
from ckkb.kb.db import open_db
from ckkb.kb.schema_doc import schema_markdown
from ckkb.queries import damage

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def _given(ck_args: tuple[str, ...], aiter_args: tuple[str, ...]) -> list[build_trees.TreeArg]:
    out: list[build_trees.TreeArg] = []
    for kind, args in (("ck", ck_args), ("aiter", aiter_args)):
        for arg in args:
            name, path = sources.split_tree_arg(arg)
            out.append((kind, name, path))
    return out


@click.command("build")
@click.option(
    "--ck",
    "ck_args",
    multiple=True,
    metavar="[NAME=]PATH",
    help="A CK source tree to add or refresh (repeatable). NAME defaults to its version, plus "
    "@commit for a checkout. Default: the trees the database holds, else the wheel's.",
)
@click.option(
    "--aiter",
    "aiter_args",
    multiple=True,
    metavar="[NAME=]PATH",
    help="An aiter source tree to add or refresh (repeatable), as --ck.",
)
@click.option(
    "--no-aiter",
    is_flag=True,
    help="No aiter tree: skip the wheel's aiter, drop any the database holds.",
)
@click.option(
    "--drop", multiple=True, metavar="NAME", help="Remove this tree from the database (repeatable)."
)
@db_path_option
@click.option("--force", is_flag=True, help="Rebuild even when no input changed.")
@click.option(
    "--jobs",
    type=checks.JOBS,
    default=None,
    help="Worker processes (default: $CKKB_JOBS or one per core).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when any diagnostic changes an answer (see `ckkb diagnostics`); for CI.",
)
@json_option
def build_cmd(
    ck_args: tuple[str, ...],
    aiter_args: tuple[str, ...],
    no_aiter: bool,
    drop: tuple[str, ...],
    db_path: str | None,
    force: bool,
    jobs: int | None,
    strict: bool,
    as_json: bool,
) -> None:
    """Read CK and aiter source trees into the knowledge base; it may hold several of each.

    Atomic: a failed or interrupted build leaves the previous database untouched. Ingested
    races and bundles are carried over, and so are the trees the database holds: a tree given
    with --ck or --aiter is added (or refreshed), the others stay. See `ckkb trees`.
    """
    path = settings.db_path(db_path)
    trees = build_trees.merged(path, _given(ck_args, aiter_args), no_aiter=no_aiter, drop=drop)
    with contextlib.ExitStack() as stack:
        bar = _Bar(stack, disable=as_json)
        summary = build(
            path, trees, stages=pipeline.stages(), jobs=jobs, force=force, progress=bar.progress
        )
    errors = [d for d in summary.diagnostics if d.severity == "error"]
    by_tree = damage_by_tree(path, [t.name for t in trees if t.kind == "ck"])
    damaged = [r for rows in by_tree.values() for r in rows]
    if as_json:
        emit_json(
            {
                "db": str(path),
                "seconds": round(summary.seconds, 3),
                "up_to_date": summary.up_to_date,
                "extended": summary.extended,
                "files": summary.files,
                "parsed": summary.parsed,
                "cached": summary.cached,
                "tables": summary.tables,
                "carried": summary.carried,
                "timings": {
                    k: {kk: round(vv, 3) for kk, vv in v.items()}
                    for k, v in summary.timings.items()
                },
                "diagnostics": [
                    {
                        "file": d.file,
                        "line": d.line,
                        "severity": d.severity,
                        "message": d.message,
                        "stage": d.stage,
                    }
                    for d in summary.diagnostics
                ],
                "damage": damage.counts(damaged),
                "damage_by_tree": {name: damage.counts(rows) for name, rows in by_tree.items()},
            }
        )
        _strict_exit(strict, damaged)
        return
    for d in errors[:20]:
        warn(str(d))
    if len(errors) > 20:
        warn(f"... {len(errors) - 20} more errors (see the diagnostics table)")
    if summary.up_to_date:
        console.print(
            f"{path}: up to date ({summary.files} files unchanged, {summary.seconds:.2f} s)"
        )
        _damage_lines(by_tree)
        _strict_exit(strict, damaged)
        return
    for t in trees:
        version = f", version {t.version}" if t.version else ""
        console.print(f"{t.kind} {t.name}: {t.root}{version}")
    print_table(sorted(summary.tables.items()), ["table", "rows"], title=f"{path}")
    if summary.carried:
        console.print(
            "carried over: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.carried.items()))
        )
    console.print(
        f"{summary.files} files ({summary.parsed} parsed, {summary.cached} cached), "
        f"{len(summary.diagnostics)} diagnostics ({len(errors)} errors), {summary.seconds:.1f} s"
    )
    _damage_lines(by_tree)
    _strict_exit(strict, damaged)


class _Bar:
    """The progress bar, shown from the build's first file on: a build with nothing to do never
    draws it, nor imports rich.progress (~25 ms of a ~0.6 s warm rebuild)."""

    def __init__(self, stack: contextlib.ExitStack, disable: bool) -> None:
        self.stack = stack
        self.disable = disable
        self.bar: Progress | None = None
        self.tasks: dict[str, TaskID] = {}

    def progress(self, phase: str, done: int, total: int) -> None:
        if self.bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = self.stack.enter_context(
                Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=err_console,
                    transient=True,
                    disable=self.disable,
                )
            )
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(self.tasks[phase], completed=done, total=total)


def damage_by_tree(path: Path, ck_trees: list[str]) -> dict[str, list[dict]]:
    """CK tree name -> the diagnostics of the built knowledge base that change its answers
    (ckkb.queries.damage; every such diagnostic is a CK one)."""
    if not path.exists():
        return {}
    out = {}
    names: list[str | None] = list(ck_trees) or [None]
    for name in names:
        db = open_db(path, readonly=True, tree=name)
        try:
            out[name or ""] = damage.damage(db)
        finally:
            db.close()
    return out


def _damage_lines(by_tree: dict[str, list[dict]]) -> None:
    for name, rows in by_tree.items():
        line = damage.summary_line(rows) or "damage: none (no diagnostic changes an answer)"
        if len(by_tree) > 1:
            line = f"{name}: {line}"
        console.print(line, soft_wrap=True)


def _strict_exit(strict: bool, rows: list[dict]) -> None:
    if strict and rows:
        err_console.print(f"ckkb: --strict: {len(rows)} diagnostic(s) change answers")
        raise SystemExit(1)


@click.command("schema")
def schema_cmd() -> None:
    """Print the knowledge-base schema (tables, columns, meanings) as Markdown."""
    click.echo(schema_markdown(), nl=False)


def register(group: click.Group) -> None:
    group.add_command(build_cmd)
    group.add_command(schema_cmd)

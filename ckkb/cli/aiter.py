"""`ckkb audit`, `ckkb aiter merge`, `ckkb aiter summary`: thin wrappers over ckkb.audit."""

from __future__ import annotations

import sys
from typing import Any

import click

from ckkb.cli.options import aiter_option, arch_option, chosen_tree, json_option, tree_option
from ckkb.cli.output import emit_json, print_table
from ckkb.errors import CkkbError


@click.command("audit")
@click.argument("csvs", nargs=-1, type=click.Path())
@aiter_option
@arch_option
@click.option(
    "--env",
    "env_file",
    type=click.Path(),
    default=None,
    help="Shell/env file with AITER_CONFIG_* settings to audit and apply.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "note"]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding at or above this severity exists.",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Knowledge base for the rules that need one (baselines, CK gates); default $CKKB_DB, else "
    "db/ckkb.db. When it does not exist those rules are reported as skipped, never passed.",
)
@tree_option
def audit_cmd(
    csvs: tuple[str, ...],
    aiter_path: str | None,
    arch: str | None,
    env_file: str | None,
    fmt: str,
    fail_on: str,
    db_path: str | None,
) -> None:
    """Audit aiter tuned/untuned config CSVs (default: the aiter tree's own configs).

    Each finding has a rule id, severity, file, line, message and evidence. Exit 1 when a finding
    at or above --fail-on exists.
    """
    from ckkb.archs import is_known_arch
    from ckkb.audit.engine import audit
    from ckkb.audit.writers import render

    if arch and not is_known_arch(arch):
        raise CkkbError(f"unknown arch {arch!r}", hint="e.g. --arch gfx942 or --arch gfx950")
    from ckkb import settings

    result = audit(
        aiter_path,
        list(csvs),
        arch=arch,
        env_file=env_file,
        db_path=str(settings.db_path(db_path)),
        tree_from_db=db_path is not None or chosen_tree() is not None,  # the tree X was built from
        db_tree=chosen_tree(),
    )
    sys.stdout.write(render(result, fmt))
    if result.fails(fail_on):
        sys.exit(1)


@click.group("aiter")
def aiter_group() -> None:
    """aiter's kernel lists, tuned configs and runtime merge."""


def _ctx(aiter_path: str | None, env_file: str | None = None, tables: bool = True) -> Any:
    from ckkb import settings, sources
    from ckkb.audit.context import add_default_tables, load, read_env_file

    ctx, _ = load(sources.aiter_tree(aiter_path), settings.db_path(None))
    if env_file:
        ctx.env = read_env_file(env_file)
    if tables:
        add_default_tables(ctx)
    return ctx


def find_op(ctx: Any, op: str) -> Any:
    want = op.lower().removeprefix("aiter_config_")
    for rc in ctx.runtime:
        if want in (rc.op, (rc.tuned_name or "").lower(), rc.env_var.lower()):
            return rc
    ops = ", ".join(rc.op for rc in ctx.runtime)
    raise CkkbError(f"unknown op {op!r}", hint=f"one of: {ops}")


@aiter_group.command("merge")
@click.argument("op")
@aiter_option
@click.option(
    "--env",
    "env_file",
    type=click.Path(),
    default=None,
    help="Shell/env file setting AITER_CONFIG_<OP>.",
)
@json_option
def merge_cmd(op: str, aiter_path: str | None, env_file: str | None, as_json: bool) -> None:
    """Preview what the runtime loads for OP (such as gemm_a8w8_blockscale): files, merged rows,
    losers."""
    from ckkb.audit.rules_keys import merge_preview

    ctx = _ctx(aiter_path, env_file)
    p = merge_preview(ctx, find_op(ctx, op))
    if as_json:
        emit_json(p)
        return
    click.echo(
        f"op {p['op']}: {p['env_var']} "
        f"{'set (--env): only these files' if p['env_set'] else 'unset: default set'}"
    )
    r = p["rule"]
    click.echo(f"rule {r['id']} ({r['file']}:{r['line']}): {r['description']}")
    print_table(p["files"], ["file", "exists", "rows", "rows_unread"])
    for e in p["errors"]:
        click.echo(f"error: {e['message']}")
    click.echo(f"merged rows: {p['merged_rows']}  (key: {', '.join(p['merge_key']) or 'none'})")
    same = [lo for lo in p["losers"] if lo["same_part"]]
    click.echo(
        f"rows losing a duplicate contest: {len(p['losers'])} ({len(same)} same part, "
        f"{len(p['losers']) - len(same)} of other parts dropped; "
        f"by cu_num: {p['dropped_by_cu_num'] or '-'})"
    )
    for lo in p["losers"][:20]:
        w = lo["winner"]
        click.echo(
            f"  {lo['file']}:{lo['line']} cu_num={lo['cu_num']} us={lo['us']} "
            f"loses to {w['file']}:{w['line']} cu_num={w['cu_num']} us={w['us']}"
        )
    if len(p["losers"]) > 20:
        click.echo(f"  ... {len(p['losers']) - 20} more (--json lists all)")
    fills = (
        "fills gfx from cu_num"
        if ctx.runtime_for(p["op"]).merge_fills_gfx
        else "has no gfx handling (rows stay without gfx)"
    )
    click.echo(f"rows without gfx: {len(p['gfx_missing'])} (this core.py {fills})")


@aiter_group.command("summary")
@aiter_option
@json_option
def summary_cmd(aiter_path: str | None, as_json: bool) -> None:
    """Kernel lists, kernel ids and tuned rows per op."""
    from ckkb.audit.summary import summary

    s = summary(_ctx(aiter_path))
    if as_json:
        emit_json(s)
        return
    ops = [
        {
            **o,
            "kernel_list_file": o["kernel_list_file"]
            or ", ".join(sorted({b["file"] for b in o["kernel_lists_by_row"] if "file" in b})),
            **{f"rows_{k}": v for k, v in o["kernel_rows"].items()},
        }
        for o in s["ops"]
    ]
    cols = ["op", "kernel_list_file", "kernel_ids", "tuned_rows"]
    cols += ["rows_checked", "rows_not_ck", "rows_no_kernel_list"]
    print_table(ops, cols, title="ops")
    for o in s["ops"]:
        if o["kernel_list_note"]:
            click.echo(f"{o['op']}: {o['kernel_list_note']}")
    print_table(s["kernel_files"], ["file", "lists", "ids"], title="kernel-list files")
    t = s["totals"]
    click.echo(
        f"{t['kernel_files']} kernel-list files, {t['kernel_lists']} lists, {t['kernel_ids']} ids; "
        f"{t['tuned_files']} tuned files, {t['tuned_rows']} tuned rows"
    )


def register(group: click.Group) -> None:
    group.add_command(audit_cmd)
    aiter_group.add_command(merge_cmd)
    aiter_group.add_command(summary_cmd)
    group.add_command(aiter_group)

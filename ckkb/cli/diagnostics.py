"""`ckkb diagnostics`: the build's diagnostics that change answers (ckkb.queries.damage)."""

from __future__ import annotations

import click

from ckkb.cli.options import db_option, json_option, open_kb
from ckkb.cli.output import console, emit_json, print_table
from ckkb.queries import damage


@click.command("diagnostics")
@click.option("--all", "show_all", is_flag=True, help="Every row (default: the first 50).")
@db_option
@json_option
def diagnostics_cmd(show_all: bool, db_path: str | None, as_json: bool) -> None:
    """Diagnostics that change answers: files that did not parse, instance lists not found,
    device-op templates not resolved."""
    rows = damage.damage(open_kb(db_path))
    if as_json:
        emit_json({"counts": damage.counts(rows), "diagnostics": rows})
        return
    if not rows:
        console.print("No diagnostic changes an answer.")
        return
    shown = rows if show_all else rows[:50]
    print_table(
        [[r["kind"], f"{r['file']}:{r['line']}", r["message"]] for r in shown],
        ["kind", "where", "message"],
        title="diagnostics that change answers",
    )
    if len(shown) < len(rows):
        console.print(f"... {len(rows) - len(shown)} more (--all, or --json)")
    console.print(damage.summary_line(rows), soft_wrap=True)


def register(group: click.Group) -> None:
    group.add_command(diagnostics_cmd)

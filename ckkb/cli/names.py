"""`ckkb parse`, `ckkb locate`, `ckkb names coverage`: thin wrappers over ckkb.names."""

from __future__ import annotations

import sys
from typing import BinaryIO

import click
from rich.markup import escape

from ckkb import names, settings
from ckkb.cli.options import chosen_tree, db_option, json_option, open_kb
from ckkb.cli.output import console, emit_json, print_table, warn
from ckkb.errors import CkkbError, DatabaseError
from ckkb.kb import db as kbdb
from ckkb.queries import names as name_queries
from ckkb.queries.name_trees import NameReader

STDIN_LIMIT = 64 * 1024 * 1024  # read at most this much from standard input


def read_stdin_names(stream: BinaryIO | None = None) -> list[str]:
    """One name per line from standard input (bytes; invalid UTF-8 becomes an error per line)."""
    data = (stream or sys.stdin.buffer).read(STDIN_LIMIT + 1)
    if len(data) > STDIN_LIMIT:
        raise CkkbError(
            f"standard input is larger than {STDIN_LIMIT // (1024 * 1024)} MiB",
            hint="split the input",
        )
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return [ln.rstrip(b"\r").decode("utf-8", errors="replace") for ln in lines]


def _reader(db_path: str | None, tree: str | None) -> NameReader:
    """The knowledge base's name reader (ckkb.queries.name_trees); the grammar alone when there
    is no usable default knowledge base (a warning says so) and no tree was asked for."""
    path = settings.db_path(db_path)
    strict = bool(db_path) or tree is not None
    if not path.exists():
        if strict:
            raise CkkbError(f"knowledge base not found: {path}", hint=kbdb.BUILD_HINT)
        warn(
            f"no knowledge base at {path}: names are read by the grammar only "
            "(no CK parameter names); run `ckkb build`"
        )
        return NameReader([])
    try:
        db = open_kb(path)
    except DatabaseError as e:
        if strict:
            raise
        warn(f"{e.message}: names are read by the grammar only (no CK parameter names)")
        return NameReader([])
    try:
        return NameReader.of(db, tree)
    finally:
        db.close()


def _show(p: names.ParsedName, tree: str | None = None) -> None:
    if p.schema == "error":
        pos = p.error["position"] if p.error else 0
        shown = p.name if len(p.name) <= 160 else p.name[:160] + "..."
        console.print(
            f"[red]error[/red] {p.error['message'] if p.error else ''}",
            highlight=False,
            soft_wrap=True,
        )
        if pos <= 160 and shown.isprintable():
            console.print("  " + shown, highlight=False, markup=False, soft_wrap=True)
            console.print("  " + " " * pos + "^", highlight=False)
        return
    where = f" ({p.device_op}, {p.schema_file}:{p.schema_line})" if p.device_op else ""
    if len(p.device_ops) > 1:
        where += f"; also printed by {', '.join(p.device_ops[1:])}"
    if tree is not None:
        where += f" [tree {tree}]"
    console.print(
        f"[bold]{escape(str(p.op))}[/bold] {escape('[' + p.schema + ']')}{escape(where)}",
        highlight=False,
        soft_wrap=True,
    )
    rows = [{"field": k, "value": v} for k, v in p.fields.items()]
    rows += [
        {"field": k, "value": f"{v} (derived: computed at run time)"} for k, v in p.derived.items()
    ]
    if not rows:
        rows = [{"field": f"arg {i}", "value": a} for i, a in enumerate(p.args)]
        rows += [{"field": k, "value": v} for k, v in p.props.items()]
    if rows:
        print_table(rows, ["field", "value"])


@click.command("parse")
@click.argument("name_args", metavar="NAME...", nargs=-1, required=True)
@db_option
@json_option
def parse_cmd(name_args: tuple[str, ...], db_path: str | None, as_json: bool) -> None:
    """Parse printed instance names (what ckProfiler prints) into op, fields, args and properties.

    `-` reads names from standard input, one per line. Fields use CK's template parameter names,
    mapped with each op's GetTypeString() schema from the knowledge base: the CK tree --tree
    names, else per name the first tree whose schemas read it exactly, else the first tree
    (`tree` in --json). Exit 1 when any name failed (the others are still answered).
    """
    items: list[str] = []
    for n in name_args:
        items.extend(read_stdin_names() if n == "-" else [n])
    reader = _reader(db_path, chosen_tree())
    parsed = [reader.read(n) for n in items]
    if as_json:
        emit_json([{**p.to_json(), "tree": t} for p, t in parsed])
    else:
        for p, t in parsed:
            _show(p, t)
    if any(p.schema == "error" for p, _ in parsed):
        sys.exit(1)


@click.command("locate")
@click.argument("name")
@click.option(
    "--dtype",
    default=None,
    help=(
        "Data type of the race (bf16, f16, fp8, ...): printed names carry none, "
        "so lists of several types share them."
    ),
)
@db_option
@json_option
def locate_cmd(name: str, dtype: str | None, db_path: str | None, as_json: bool) -> None:
    """Find the instance-list entry (file:line), registrations and per-arch availability of a
    printed name."""
    path = settings.db_path(db_path)
    db = open_kb(path)
    try:
        out = name_queries.locate(db, name, dtype=dtype)
    finally:
        db.close()
    if as_json:
        emit_json(out)
    else:
        _show_locate(out)
    if not out["entries"]:
        sys.exit(1)


def _show_locate(out: dict) -> None:
    n = len(out["entries"])
    if n == 0:
        console.print(
            f"no source entry of this tree prints this name (op {out['op']}, key {out['key']})",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        return
    if out["ambiguous"]:
        n_active = sum(1 for e in out["entries"] if e["status"] == "active")
        console.print(
            f"[yellow]ambiguous:[/yellow] {n_active} compiled source entries print this name",
            highlight=False,
        )
    for e in out["entries"]:
        console.print(
            f"[bold]{escape(e['file'])}:{e['line']}[/bold]", highlight=False, soft_wrap=True
        )
        console.print(
            f"  list {e['list']} ({e['template']}, A type {e['a_dtype'] or '?'})",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        if e["status"] != "active":
            console.print(
                f"  {e['status'].replace('_', ' ')}: not compiled"
                + (f" ({e['reason']})" if e["reason"] else ""),
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        if not e["registrations"]:
            console.print("  no registration instantiates this list", highlight=False)
        for r in e["registrations"]:
            binds = ", ".join(f"{k}={v}" for k, v in r["bindings"].items())
            console.print(
                f"  registered by {r['function']} at {r['file']}:{r['line']}"
                + (f" with {binds}" if binds else ""),
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
            av = r["availability"]
            yes = [a for a, v in sorted(av.items()) if v["available"]]
            why: dict[str, list[str]] = {}
            for a, v in sorted(av.items()):
                if not v["available"]:
                    why.setdefault(f"{v['layer'] or '?'}: {v['file']}:{v['line']}", []).append(a)
            if yes:
                console.print(
                    "    available on " + ", ".join(yes),
                    highlight=False,
                    soft_wrap=True,
                    markup=False,
                )
            for evidence, archs in why.items():
                console.print(
                    f"    not on {', '.join(archs)} ({evidence})",
                    highlight=False,
                    soft_wrap=True,
                    markup=False,
                )


@click.group("names")
def names_group() -> None:
    """Instance-name schemas read from the CK source."""


@names_group.command("coverage")
@db_option
@json_option
def coverage_cmd(db_path: str | None, as_json: bool) -> None:
    """How many GetTypeString() implementations have a name schema; those that do not, and why."""
    db = open_kb(db_path)
    try:
        out = name_queries.coverage(db)
    finally:
        db.close()
    if as_json:
        emit_json(out)
        return
    console.print(
        f"{out['with_schema']} of {out['implementations']} GetTypeString() implementations "
        "have a name schema "
        f"({out['matched']} matched, {out['partial']} partial: derived or conditional values); "
        f"{out['unsupported']} do not",
        highlight=False,
        soft_wrap=True,
    )
    for r in out["without_schema"]:
        console.print(
            f"  no schema: {r['device_op']} ({r['file']}:{r['line']})",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        for why in r["reasons"]:
            console.print(f"    {why}", highlight=False, soft_wrap=True, markup=False)


def register(group: click.Group) -> None:
    group.add_command(parse_cmd)
    group.add_command(locate_cmd)
    group.add_command(names_group)

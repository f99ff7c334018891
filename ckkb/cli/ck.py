"""`ckkb gates`, `ckkb instances`, `ckkb why`, `ckkb pool`, `ckkb archs`: thin printing over
ckkb.queries.ck."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import click
from rich.table import Table

from ckkb.cli import checks
from ckkb.cli.options import arch_option, db_option, json_option, open_kb
from ckkb.cli.output import console, emit_json, print_table
from ckkb.queries import ck as q
from ckkb.sources import CK_INSTANCE_DIR

if TYPE_CHECKING:
    import sqlite_utils  # for annotations: importing it pulls in pandas (~0.4 s)


def _db(db_path: str | None) -> sqlite_utils.Database:
    return open_kb(db_path)


def _field(fields: dict, *names: str) -> str:
    for n in names:
        if n in fields:
            return q.short(fields[n])
    return ""


def _short(path: str | None) -> str:
    """Paths under the instance directory, shortened to gpu/... for people (JSON keeps them
    whole)."""
    p = path or ""
    return "gpu/" + p[len(CK_INSTANCE_DIR) + 1 :] if p.startswith(CK_INSTANCE_DIR + "/") else p


def _say(line: str) -> None:
    console.print(line, soft_wrap=True, highlight=False)


def _tile(fields: dict) -> str:
    return "x".join(_field(fields, k) or "?" for k in ("MPerBlock", "NPerBlock", "KPerBlock"))


@click.command("gates")
@click.option(
    "--kind",
    type=click.Choice(["device_name", "capability", "preprocessor", "other"]),
    default=None,
    help="Only gates of this kind (default: all).",
)
@arch_option
@db_option
@json_option
def gates_cmd(kind: str | None, arch: str | None, db_path: str | None, as_json: bool) -> None:
    """Guards around instance registrations, per directory under gpu/.

    `exclude`: the guarded adds do not happen on the arch; `only`: they happen only there.
    """
    res = q.gates(_db(db_path), kind, arch)
    if as_json:
        emit_json(res)
        return
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for g in res["gates"]:
        per[g["dir"]][g["effect"] or g["kind"]] += 1
    cols = sorted(
        {k for d in per.values() for k in d}, key=lambda c: (c not in ("exclude", "only"), c)
    )
    rows = [[d, *[per[d].get(c, 0) for c in cols], sum(per[d].values())] for d in sorted(per)]
    rows.append(["total", *[sum(per[d].get(c, 0) for d in per) for c in cols], len(res["gates"])])
    title = "gates" + (f" ({kind})" if kind else "") + (f" naming {arch}" if arch else "")
    print_table(rows, ["dir", *cols, "all"], title=title)


@click.command("instances")
@click.option(
    "--dir", "dir_", default=None, help="Directory right under gpu/, e.g. gemm_universal."
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="FIELD=VALUE",
    help=(
        "Filter on a CK parameter (MPerBlock=256) or a normalised column (tile_m=256); repeatable."
    ),
)
@arch_option
@click.option("--limit", type=checks.COUNT, default=None, help="At most this many instances.")
@db_option
@json_option
def instances_cmd(
    dir_: str | None,
    where: tuple[str, ...],
    arch: str | None,
    limit: int | None,
    db_path: str | None,
    as_json: bool,
) -> None:
    """Instances of CK's instance lists, with the add functions that register them."""
    res = q.instances(_db(db_path), dir_, where, arch, limit)
    if as_json:
        emit_json(res)
        return
    t = Table(title=f"{len(res['instances'])} instances" + (f" on {arch}" if arch else ""))
    for c in (
        "template",
        "tile",
        "block",
        "pipeline",
        "sched",
        "list",
        "status",
        "regs",
        *(("on " + arch,) if arch else ()),
    ):
        t.add_column(c)
    for i in res["instances"]:
        f = i["fields"]
        n_avail = sum(1 for g in i["registrations"] if g["available"])
        row = [
            i["template"],
            _tile(f),
            _field(f, "BlockSize"),
            _field(f, "BlkGemmPipelineVer", "PipelineVer"),
            _field(f, "BlkGemmPipeSched", "LoopSched"),
            f"{i['list']}\n{i['file']}:{i['line']}",
            i["status"],
            str(len(i["registrations"])),
        ]
        if arch:
            row.append(f"yes ({n_avail})" if i["available"] else "no")
        row[5] = f"{i['list']}\n{_short(i['file'])}:{i['line']}"
        t.add_row(*row)
    console.print(t)


@click.command("why")
@click.option(
    "--tile",
    default=None,
    metavar="MxNxK",
    help="MPerBlock x NPerBlock x KPerBlock, e.g. 256x224x64.",
)
@click.argument("where", nargs=-1, metavar="[FIELD=VALUE]...")
@click.option(
    "--dir", "dir_", default=None, help="Directory right under gpu/, e.g. gemm_universal."
)
@arch_option
@db_option
@json_option
def why_cmd(
    tile: str | None,
    where: tuple[str, ...],
    dir_: str | None,
    arch: str | None,
    db_path: str | None,
    as_json: bool,
) -> None:
    """Is an instance registered on ARCH, and if not, which file:line removes it?"""
    res = q.why(_db(db_path), tile, where, arch, dir_)
    if as_json:
        emit_json(res)
        return
    desc = (
        " ".join(
            x
            for x in [
                f"tile {res['query']['tile']}" if res["query"]["tile"] else "",
                *[f"{k}={v}" for k, v in res["query"]["where"].items()],
                f"in {dir_}" if dir_ else "",
            ]
            if x
        )
        or "all instances"
    )
    if not res["matches"]:
        console.print(f"No instance matches {desc}.")
        if res.get("nearest"):
            print_table(
                [
                    [
                        n["tile"],
                        n["template"],
                        n["list"],
                        f"{_short(n['file'])}:{n['line']}",
                        "yes" if n["available"] else "no",
                    ]
                    for n in res["nearest"]
                ],
                ["tile", "template", "list", "where", f"on {arch}"],
                title="nearest existing instances",
            )
        return
    ok = sum(1 for m in res["matches"] if m["available"])
    console.print(
        f"[bold]{len(res['matches'])}[/bold] instance(s) match {desc}: "
        f"[green]{ok} available[/green], "
        f"[red]{len(res['matches']) - ok} not available[/red] on {arch}.\n"
    )
    for m in res["matches"]:
        i = m["instance"]
        mark = "[green]available[/green]" if m["available"] else "[red]NOT available[/red]"
        _say(f"{mark} on {arch}: {i['template']} {_tile(i['fields'])}  list {i['list']}")
        _say(f"    entry         {_short(i['file'])}:{i['line']} ({i['status']})")
        if i["list_comment"]:
            _say(f'    list comment  "{i["list_comment"]}"')
        for g in i["registrations"]:
            state = "[green]adds it[/green]" if g["available"] else "[red]does not add it[/red]"
            _say(
                f"    registered    {_short(g['file'])}:{g['line']} "
                f"{g['function']}<{', '.join(map(str, g['args']))}> {state}"
            )
        for r in m["reasons"]:
            _say(
                f"    [red]{r['layer']:<13}[/red] {_short(r['file'])}:{r['line']}  {r['condition']}"
            )
        console.print()


@click.command("pool")
@click.option(
    "--dir", "dir_", default="gemm_universal", show_default=True, help="Directory right under gpu/."
)
@click.option(
    "--dtype",
    default="bf16",
    show_default=True,
    help="A/B/C data type (bf16, f16, f32, f8, i8, or a C++ type).",
)
@db_option
@json_option
def pool_cmd(dir_: str, dtype: str, db_path: str | None, as_json: bool) -> None:
    """Per-arch counts of available (instance, registration) pairs per layout."""
    res = q.pool_counts(_db(db_path), dir_, dtype)
    if as_json:
        emit_json(res)
        return
    rows = [
        [a, *[res["counts"][a][lay] for lay in res["layouts"]], sum(res["counts"][a].values())]
        for a in res["counts"]
    ]
    print_table(
        rows,
        ["arch", *res["layouts"], "total"],
        title=f"{dir_} {dtype}: available (instance, registration) pairs",
    )


@click.command("archs")
@db_option
@json_option
def archs_cmd(db_path: str | None, as_json: bool) -> None:
    """The GPU targets the CK tree names, each with the file:line naming it.

    `built`: availability is computed for it (its CMake builds for it); `families`: the family
    macros its ck.hpp defines on the target's device pass.
    """
    res = q.archs(_db(db_path))
    if as_json:
        emit_json(res)
        return
    rows = [
        [
            a["arch"],
            f"{a['file']}:{a['line']}" if a["file"] else "(ckkb default)",
            "yes" if a["evaluated"] else "no",
            " ".join(a["families"]),
        ]
        for a in res["archs"]
    ]
    print_table(rows, ["arch", "named at", "built", "families"], title="archs the tree knows")


def register(group: click.Group) -> None:
    for c in (gates_cmd, instances_cmd, why_cmd, pool_cmd, archs_cmd):
        group.add_command(c)

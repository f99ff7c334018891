"""Two trees side by side (ckkb.versions): `ckkb diff` (what changed between two CK or two aiter
trees of one knowledge base) and `ckkb review` (a tuned-config change between two aiter trees or
revisions)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import Any

import click

from ckkb import settings
from ckkb.cli.diff_text import print_ck
from ckkb.cli.options import db_path_option, json_option
from ckkb.cli.output import console, emit_json, print_table


@click.command("diff")
@click.argument("from_tree", metavar="FROM")
@click.argument("to_tree", metavar="TO")
@click.option(
    "--dir", "dir_", default=None, help="Directory right under gpu/, e.g. gemm_universal."
)
@click.option("--dtype", default=None, help="Data type A, B and C all have, e.g. bf16.")
@click.option("--layout", default=None, help="GEMM layout: mk_kn, mk_nk, km_kn or km_nk.")
@click.option(
    "--arch",
    "archs",
    multiple=True,
    help="Compare availability on this arch (repeatable; default: every arch either tree knows).",
)
@db_path_option
@json_option
def diff_cmd(
    from_tree: str,
    to_tree: str,
    dir_: str | None,
    dtype: str | None,
    layout: str | None,
    archs: tuple[str, ...],
    db_path: str | None,
    as_json: bool,
) -> None:
    """What changed from tree FROM to tree TO (names as `ckkb trees` lists them).

    Two CK trees: instances added, removed, and changed (the same instance, available on an arch
    in one tree and not in the other, with each tree's evidence); gates and registering calls
    added and removed; ckProfiler ops added, removed and changed. An instance is its device-op
    template plus its resolved template arguments, never its file or line: a list moved to
    another file is not a change; one written twice counts twice. --dir, --dtype and --layout
    narrow the instances and the calls and gates that register them; --arch the archs compared
    (an arch one tree does not build for is listed, not compared).

    Two aiter trees: kernel-list ids added, removed and renumbered, tuned rows whose kernel id
    now names another kernel, config rows added, removed or re-timed.
    """
    from ckkb.versions.diff import diff  # lazily: `ckkb --help` does not load the queries

    res = diff(
        settings.db_path(db_path),
        from_tree,
        to_tree,
        archs=archs,
        dir=dir_,
        dtype=dtype,
        layout=layout,
    )
    if as_json:
        emit_json(res, one_line_items=True)
    elif res.get("kind") == "aiter":
        _print_aiter(res)
    else:
        print_ck(res)


def _say(line: str) -> None:
    console.print(line, soft_wrap=True, highlight=False)


def _kernel(name: str | None, params: dict[str, Any] | None) -> str:
    """A kernel by its name, else by its parameters (a name property not evaluated)."""
    if name:
        return name
    return "(" + ", ".join(f"{k}={v}" for k, v in (params or {}).items()) + ")"


def _print_aiter(res: dict[str, Any]) -> None:
    _say(f"{res['from']} -> {res['to']} (aiter trees)")
    for k in res.get("kernels", {}).get("renumbered", []):
        if k.get("kind") == "moved":
            _say(
                f"~ {k['op']} {k['list']}: {_kernel(k['kernel'], k.get('params'))} "
                f"ids {k['from_ids']} -> {k['to_ids']}  {k['file']}:{k['to_line']}"
            )
        else:
            _say(
                f"~ {k['op']} {k['list']} id {k['id']}: "
                f"{_kernel(k['from_kernel'], k.get('from_params'))} -> "
                f"{_kernel(k['to_kernel'], k.get('to_params'))}  {k['file']}:{k['to_line']}"
            )
    for r in res.get("rows_kernel_changed", []):
        _say(
            f"! {r['file']}:{r['line']} kernelId {r['kernelId']} now names {r['to_kernel']} "
            f"(was {r['from_kernel']})"
        )
    counts = res.get("counts") or {}
    if counts:
        print_table(
            [[k, n] for k, n in counts.items()], ["", "items"], title="--json lists every item"
        )


@click.command("review")
@click.argument("base")
@click.argument("head")
@click.option(
    "--repo",
    type=click.Path(file_okay=False),
    default=None,
    help="An aiter git checkout: BASE and HEAD are revisions of it (read with git archive; the "
    "checkout is not touched).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
)
@db_path_option
def review_cmd(base: str, head: str, repo: str | None, fmt: str, db_path: str | None) -> None:
    """Review a tuned-config change: what HEAD does that BASE did not.

    BASE and HEAD are aiter trees: names of trees in the knowledge base (`ckkb trees`), paths
    to aiter checkouts, PATH@REV (a git revision of a checkout), or, with --repo PATH, two
    revisions. Reports the audit findings new in HEAD (matched by rule, file and content, not
    line), rows replaced under the same key (old and new us, and old/new as a ratio), rows the
    run-time merge now drops or shadows, and kernels whose ids moved.
    """
    from ckkb import settings
    from ckkb.versions.review import render, review
    from ckkb.versions.revisions import open_side

    db = settings.db_path(db_path)
    with ExitStack() as stack:
        a = open_side(base, db_path=db, repo=repo, stack=stack, role="BASE")
        b = open_side(head, db_path=db, repo=repo, stack=stack, role="HEAD")
        result = review(a, b)
    sys.stdout.write(render(result, fmt))


def register(group: click.Group) -> None:
    group.add_command(diff_cmd)
    group.add_command(review_cmd)

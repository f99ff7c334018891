"""Two trees side by side: `ckkb review` (a tuned-config change between two aiter trees or
revisions)."""

from __future__ import annotations

import sys
from contextlib import ExitStack

import click

from ckkb.cli.options import db_path_option


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
    group.add_command(review_cmd)

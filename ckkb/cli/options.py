"""Options shared by many commands, defined once and reused as decorators."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ckkb import settings

if TYPE_CHECKING:
    import sqlite_utils

F = TypeVar("F", bound=Callable[..., Any])

db_path_option = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Knowledge base (default: $CKKB_DB, else db/ckkb.db in the current directory).",
)
_TREE_KEY = "ckkb.tree"


def _remember_tree(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[_TREE_KEY] = value
    return value


tree_option = click.option(
    "--tree",
    default=None,
    metavar="NAME",
    expose_value=False,
    callback=_remember_tree,
    help="Read this tree of the knowledge base (`ckkb trees`); default: the first built of "
    "each kind.",
)


def db_option(f: F) -> F:
    """--db and --tree: every command that reads the knowledge base can choose its tree."""
    return db_path_option(tree_option(f))


def chosen_tree() -> str | None:
    """The --tree of the command running now (None: the default trees)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_TREE_KEY) if ctx is not None else None


def open_kb(db_path: str | Path | None, *, readonly: bool = True) -> sqlite_utils.Database:
    """The knowledge base at --db, reading the tree --tree names."""
    from ckkb.kb.db import open_db  # lazily: a command that never opens a database never pays

    return open_db(settings.db_path(db_path), readonly=readonly, tree=chosen_tree())


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
ck_option = click.option(
    "--ck",
    "ck_path",
    type=click.Path(),
    default=None,
    help="CK source tree (default: the one in the installed amd-aiter wheel).",
)
aiter_option = click.option(
    "--aiter",
    "aiter_path",
    type=click.Path(),
    default=None,
    help="aiter source tree (default: the installed amd-aiter wheel).",
)
arch_option = click.option("--arch", default=None, help="GPU architecture, e.g. gfx942 or gfx950.")

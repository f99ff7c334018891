"""Options shared by many commands, defined once and reused as decorators."""

from __future__ import annotations

import click

db_option = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Knowledge base (default: $CKKB_DB, else db/ckkb.db in the current directory).",
)
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

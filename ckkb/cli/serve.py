"""`ckkb serve`: browse the knowledge base in Datasette (read-only, bound to 127.0.0.1)."""

from __future__ import annotations

from typing import Any

import click

from ckkb import settings
from ckkb.cli.options import db_path_option
from ckkb.web import app


@click.command("serve")
@db_path_option
@click.option(
    "--host",
    default=app.DEFAULT_HOST,
    show_default=True,
    help=(
        "Interface to bind. The default serves this machine only; "
        "0.0.0.0 exposes it to the network."
    ),
)
@click.option(
    "--port",
    "-p",
    type=click.IntRange(1, 65535),
    default=app.DEFAULT_PORT,
    show_default=True,
    help="Port.",
)
@click.option(
    "--time-limit-ms",
    type=click.IntRange(1, 600_000),
    default=app.SQL_TIME_LIMIT_MS,
    show_default=True,
    help="Time limit for any one arbitrary SQL query (ckkb's own canned queries: 10 s).",
)
@click.option(
    "--immutable",
    is_flag=True,
    help="Open the file immutable (no locking, a little faster). Only for a file nothing writes "
    "to (a copy, a read-only mount): an ingest or build into it breaks the server.",
)
def serve_cmd(
    db_path: str | None, host: str, port: int, time_limit_ms: int, immutable: bool
) -> None:
    """Serve the knowledge base with Datasette: tables, canned queries (why_missing, pool,
    gate_census, ...), explain pages for instances (/-/ckkb/instance/ID) and charts (/-/ckkb).

    Read-only, and live: ingests show up as they commit and a rebuild's new file is picked up,
    with no restart and no failed request, so one server can stay up while the team writes to
    the file (see `ckkb --help`). Only SELECT queries run, each within the time limit, a 32 MB
    cap on any value it makes and 5,000 rows. Refuses to start when the database is missing or
    was built by another schema version.
    """
    path = app.check_db(settings.db_path(db_path))

    def ready(ds: Any) -> None:
        shown = "[" + host + "]" if ":" in host else host
        click.echo(
            f"ckkb: serving {path} read-only at http://{shown}:{port}/ (Ctrl-C to stop)", err=True
        )

    app.serve(
        path,
        host=host,
        port=port,
        time_limit_ms=time_limit_ms,
        on_ready=ready,
        immutable=immutable,
    )


def register(group: click.Group) -> None:
    group.add_command(serve_cmd)

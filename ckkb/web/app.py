"""`ckkb serve` as a library: a read-only Datasette over one knowledge base, with ckkb's metadata
and plugin loaded.

- The database is checked first (ckkb.kb.db.open_db: exists, is a knowledge base, has this
  schema version) and served through ckkb.web.live.LiveDatabase: read-only connections that
  see ingests as they commit and reopen on the new file after a build's rename. Datasette's
  immutable mode only with `immutable=True`, for a file nothing writes to.
- Arbitrary SQL is allowed (that is what Datasette is for) but only SELECTs, on read-only
  connections, within `sql_time_limit_ms`.
- No write endpoints: no writable canned queries, no --root, no write plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.errors import CkkbError
from ckkb.kb.db import open_db
from ckkb.web.metadata import build_metadata

if TYPE_CHECKING:
    from datasette.app import Datasette

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
SQL_TIME_LIMIT_MS = 1000

SETTINGS: dict[str, Any] = {
    "sql_time_limit_ms": SQL_TIME_LIMIT_MS,
    "default_page_size": 100,
    "max_returned_rows": 5000,
    "facet_time_limit_ms": 300,
    # suggestions try every column: 1.5 s per instances page; the defaults are set per table
    "suggest_facets": False,
    # table pages: JSON columns (args, fields) stay short, full values on the row page; canned
    # query results are never cut (ckkb.web.cells renders their text whole)
    "truncate_cells_html": 160,
    "allow_download": False,  # the file itself is not for download; queries and exports are
    "num_sql_threads": 3,
    "allow_csv_stream": False,  # rows are capped at max_returned_rows, CSV included
}


def check_db(path: str | Path) -> Path:
    """The knowledge base at `path`, or CkkbError (one line + hint) when it is missing, not a
    knowledge base, or of another schema version."""
    path = Path(path)
    db = open_db(path, readonly=True)
    db.close()
    return path.resolve()


def register_plugin() -> None:
    """Register ckkb.web.plugin with Datasette's plugin manager (once), so the plugin works
    whether or not the package's entry point is installed."""
    from datasette.plugins import pm

    from ckkb.web import fleet, plugin

    if not pm.is_registered(plugin) and pm.get_plugin("ckkb") is None:
        pm.register(plugin, name="ckkb")
    if not pm.is_registered(fleet) and pm.get_plugin("ckkb_fleet") is None:
        pm.register(fleet, name="ckkb_fleet")  # the fleet_spread chart (ckkb.web.fleet)


def make_datasette(
    db_path: str | Path,
    *,
    time_limit_ms: int | None = None,
    settings: dict[str, Any] | None = None,
    immutable: bool = False,
) -> Datasette:
    """A Datasette instance serving the knowledge base read-only (not started)."""
    from datasette.app import Datasette

    from ckkb.web.live import LiveDatabase

    path = check_db(db_path)
    register_plugin()
    merged = dict(SETTINGS)
    if time_limit_ms is not None:
        merged["sql_time_limit_ms"] = int(time_limit_ms)
    merged.update(settings or {})
    ds = Datasette(
        files=[],
        immutables=[str(path)] if immutable else [],
        metadata=build_metadata(path.stem),
        settings=merged,
        cors=False,
    )
    if not immutable:
        ds.add_database(LiveDatabase(ds, path), name=path.stem)
    return ds


def check_port(host: str, port: int) -> None:
    """CkkbError when (host, port) cannot be bound (in use, or not an address of this machine)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise CkkbError(
            f"cannot serve on host {host!r}: {e.strerror}",
            hint="pass --host 127.0.0.1 (the default)",
        ) from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            raise CkkbError(
                f"cannot serve on {host}:{port}: {e.strerror}", hint="pass another --port"
            ) from None


def serve(
    db_path: str | Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    time_limit_ms: int | None = None,
    on_ready: Callable[[Any], None] | None = None,
    immutable: bool = False,
) -> None:
    """Run the server until interrupted (uvicorn, as `datasette serve` does)."""
    import asyncio

    import uvicorn

    ds = make_datasette(db_path, time_limit_ms=time_limit_ms, immutable=immutable)
    check_port(host, port)
    asyncio.run(ds.invoke_startup())
    if on_ready:
        on_ready(ds)
    uvicorn.run(ds.app(), host=host, port=port, log_level="warning", lifespan="on")

"""`ckkb serve`: refuses bad databases with one line, binds 127.0.0.1 by default, read-only
Datasette."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from click.testing import CliRunner

from ckkb.cli import main
from ckkb.kb.db import open_db, set_info
from ckkb.kb.schema import SCHEMA_VERSION
from ckkb.web import app


@pytest.fixture
def empty_kb(tmp_path):
    path = tmp_path / "kb.db"
    open_db(path, create=True).close()
    return path


@pytest.fixture
def captured_run(monkeypatch):
    """Replace uvicorn.run (the only thing that would block) by a recorder."""
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda asgi, **kw: calls.append((asgi, kw)))
    return calls


def _one_error(result) -> str:
    assert result.exit_code != 0
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert "Traceback" not in result.output
    errors = [ln for ln in lines if ln.startswith("ckkb: error:")]
    assert len(errors) == 1, result.output
    assert all(ln.startswith("ckkb: ") for ln in lines), result.output
    return "\n".join(lines)


def test_refuses_missing_db(tmp_path, captured_run):
    result = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "nope.db")])
    out = _one_error(result)
    assert "knowledge base not found" in out and "nope.db" in out
    assert "ckkb build" in out  # says how to build it
    assert captured_run == []


def test_refuses_other_schema_version(empty_kb, captured_run):
    db = open_db(empty_kb)
    set_info(db, "schema_version", str(SCHEMA_VERSION + 41))
    db.close()
    result = CliRunner().invoke(main, ["serve", "--db", str(empty_kb)])
    out = _one_error(result)
    assert f"schema version {SCHEMA_VERSION + 41}" in out
    assert "rebuild it with `ckkb build`" in out
    assert captured_run == []


def test_refuses_non_knowledge_base(tmp_path, captured_run):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00\x01 not sqlite at all" * 100)
    out = _one_error(CliRunner().invoke(main, ["serve", "--db", str(junk)]))
    assert "not a ckkb knowledge base" in out
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("create table t (x)")
    conn.close()
    out = _one_error(CliRunner().invoke(main, ["serve", "--db", str(other)]))
    assert "no build_info table" in out
    result = CliRunner().invoke(main, ["serve", "--db", str(tmp_path)])  # click's own check
    assert (
        result.exit_code == 2
        and "is a directory" in result.output
        and "Traceback" not in result.output
    )
    assert captured_run == []


def test_binds_localhost_by_default(empty_kb, captured_run):
    result = CliRunner().invoke(main, ["serve", "--db", str(empty_kb)])
    assert result.exit_code == 0, result.output
    assert len(captured_run) == 1
    _, kw = captured_run[0]
    assert kw["host"] == "127.0.0.1"
    assert kw["port"] == app.DEFAULT_PORT
    assert "read-only at http://127.0.0.1:8001/" in result.output


def test_host_and_port_options(empty_kb, captured_run, monkeypatch):
    monkeypatch.setenv("CKKB_DB", str(empty_kb))  # --db omitted: $CKKB_DB
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "9123"])
    assert result.exit_code == 0, result.output
    assert captured_run[0][1]["host"] == "0.0.0.0"
    assert captured_run[0][1]["port"] == 9123


def test_bad_port_is_one_line(empty_kb, captured_run):
    result = CliRunner().invoke(main, ["serve", "--db", str(empty_kb), "--port", "70000"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert captured_run == []


def test_datasette_is_live_time_limited_with_plugin(empty_kb):
    from ckkb.web.live import LiveDatabase

    # live by default (ingests and builds change the file under it); immutable only on request
    assert isinstance(app.make_datasette(empty_kb).databases["kb"], LiveDatabase)
    assert app.make_datasette(empty_kb, immutable=True).databases["kb"].is_mutable is False
    ds = app.make_datasette(empty_kb, time_limit_ms=250)
    assert ds.setting("sql_time_limit_ms") == 250
    from datasette.plugins import pm

    assert any(p.__name__ == "ckkb.web.plugin" for p in pm.get_plugins())
    meta = ds.metadata()
    assert meta["title"].startswith("ckkb")
    assert "instances" in meta["databases"]["kb"]["tables"]


def test_no_write_through_datasette(empty_kb):
    ds = app.make_datasette(empty_kb)

    async def go():
        await ds.invoke_startup()
        db = ds.databases["kb"]
        # no write connection: ckkb.web.live refuses to open one
        with pytest.raises(sqlite3.OperationalError, match="read-only"):
            await db.execute_write("delete from build_info")
        # read connections are query_only (plugin) on top of immutable
        with pytest.raises(
            sqlite3.OperationalError, match="readonly|read-only|query_only|attempt to write"
        ):
            await db.execute_fn(lambda conn: conn.execute("delete from build_info"))
        r = await ds.client.get("/kb.json?sql=" + "delete from build_info")
        assert r.status_code == 400
        r = await ds.client.post(
            "/kb/build_info/-/insert", json={"row": {"key": "x", "value": "y"}}
        )
        assert r.status_code in (403, 404, 405)
        res = await db.execute("select count(*) from build_info where key = 'schema_version'")
        assert res.rows[0][0] == 1

    asyncio.run(go())


SLOW_SQL = (
    "with recursive c(x) as (select 1 union all select x + 1 from c where x < 100000000) "
    "select count(*) from c"
)


def test_arbitrary_sql_is_time_limited(empty_kb):
    ds = app.make_datasette(empty_kb, time_limit_ms=100)

    async def go():
        await ds.invoke_startup()
        r = await ds.client.get("/kb.json", params={"sql": SLOW_SQL})
        assert r.status_code == 400
        assert "took too long" in r.json()["error"]
        r = await ds.client.get(
            "/kb", params={"sql": SLOW_SQL}
        )  # the HTML page says so too, no 500
        assert r.status_code == 400
        assert "SQL query took too long" in r.text
        r = await ds.client.get(
            "/kb.json",
            params={
                "sql": "select value from build_info where key = 'schema_version'",
                "_shape": "array",
            },
        )
        assert r.status_code == 200
        assert r.json() == [{"value": str(SCHEMA_VERSION)}]

    asyncio.run(go())


def test_port_in_use_is_one_line(empty_kb, captured_run):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = _one_error(
            CliRunner().invoke(main, ["serve", "--db", str(empty_kb), "--port", str(port)])
        )
    assert f"cannot serve on 127.0.0.1:{port}" in out and "--port" in out
    assert captured_run == []
    out = _one_error(
        CliRunner().invoke(main, ["serve", "--db", str(empty_kb), "--host", "no-such-host.invalid"])
    )
    assert "cannot serve on host 'no-such-host.invalid'" in out

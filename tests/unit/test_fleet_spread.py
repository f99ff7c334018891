"""The `fleet_spread` canned query over fleet bundles: three GPUs of one host, one of them slow.

The expected medians, spreads and outliers are computed here with `statistics.median` over the
timings the test writes, not by the SQL under test."""

from __future__ import annotations

import json
import sqlite3
import statistics

import pytest

from ckkb import queries, sources
from ckkb.extract.profiler import STAGE
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from tests.fleet_bundles import TIMES
from tests.fleet_bundles import harness_fleet_bundle as _bundle


@pytest.fixture
def kb(fixtures, tmp_path):
    path = tmp_path / "kb.db"
    build(path, {"ck": sources.ck_tree(fixtures / "ck_mini")}, stages=[STAGE], jobs=1)
    return path


def _rows(db, **params):
    con = sqlite3.connect(db)
    cur = con.execute(queries.sql("fleet_spread"), {"arch": "", "slack": "", **params})
    cols = [d[0] for d in cur.description]
    out = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    con.close()
    return out


def test_fleet_spread_flags_the_slow_gpu(kb, tmp_path):
    s = ingest(kb, [_bundle(tmp_path / "b.jsonl")])
    assert s.rows_added["harness_results"] == 12 and s.errors == []
    rows = _rows(kb)
    assert len(rows) == 6
    flagged = [(r["gpu"], r["M"]) for r in rows if r["outlier"]]
    assert sorted(flagged) == [("g2", 64), ("g2", 4096)]
    for r in rows:
        us = TIMES[(r["M"], r["N"], r["K"])]
        med = statistics.median(us)
        assert r["gpus"] == 3 and r["timings"] == 2 and r["host"] == "node7"
        assert r["median_us"] == pytest.approx(med, abs=1e-3)
        assert r["spread"] == pytest.approx((max(us) - min(us)) / med, abs=1e-4)
        assert r["us"] == pytest.approx(us[int(r["gpu"][1])], abs=1e-3)
    # a wider slack (20%) flags nothing; another arch has no rows
    assert [r for r in _rows(kb, slack="0.2") if r["outlier"]] == []
    assert _rows(kb, arch="gfx950") == []
    # a second host of another arch is its own group, never mixed in
    ingest(kb, [_bundle(tmp_path / "c.jsonl", gpus=("h0", "h1"), host="n2", arch="gfx950")])
    assert len(_rows(kb)) == 6 + 4
    assert {r["gpus"] for r in _rows(kb, arch="gfx950")} == {2}


def test_fleet_spread_over_race_bundles(kb, tmp_path):
    """Three race_log records of one shape (the real sample 001.txt) on GPUs a, b and c, where c
    took 1.2x as long on every instance: c is the outlier of every instance's row group."""
    import re

    from tests.conftest import SAMPLES

    text = "".join(
        x for x in (SAMPLES / "001.txt").read_text().splitlines(True) if not x.startswith("#")
    )
    slow = re.sub(r"(Perf:\s+)([\d.]+)( ms)", lambda m: f"{m[1]}{float(m[2]) * 1.2}{m[3]}", text)
    argv = "ckProfiler gemm 1 0 1 2 0 1 49152 3072 768 768 3072 3072 5 20".split()
    lines = [{"record": "bundle", "kind": "race", "created": "2026-01-01T00:00:00Z"}]
    for g, out in (("a", text), ("b", text), ("c", slow)):
        host = {"hostname": "n1", "arch": "gfx942", "uuid": g, "gpu_index": "abc".index(g)}
        lines.append(
            {
                "record": "race_log",
                "op": "gemm",
                "argv": argv,
                "output": out,
                "exit_code": 0,
                "status": "ok",
                "shape": {"M": 49152, "N": 3072, "K": 768},
                "host": host,
                "key": f"r|n1|{g}|49152x3072x768|p1",
            }
        )
    b = tmp_path / "race.jsonl"
    b.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert ingest(kb, [b]).races_added == 3
    rows = [r for r in _rows(kb) if r["source"] == "race"]
    # distinct instances timed, read off the log's Perf lines (a name printed twice is one group)
    n = len(set(re.findall(r"Perf:.*?GB/s, (.*)", text)))
    assert n > 50 and len(rows) == 3 * n
    assert {r["gpu"] for r in rows if r["outlier"]} == {"c"}
    assert sum(r["outlier"] for r in rows) == n
    assert {round(r["ratio"], 3) for r in rows if r["gpu"] == "c"} == {1.2}

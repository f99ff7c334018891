"""Harness bundles: the writer, the round trip through `ckkb ingest`, the views and the real H200
bundle."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from ckkb.errors import CkkbError
from ckkb.harness.bundle import read_bundle, write_bundle
from ckkb.kb.ingest import ingest
from ckkb.kb.schema.harness import HarnessCeilingRow, HarnessResultRow
from ckkb.queries import sql

REAL = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200_harness.jsonl"


def result(**kw) -> HarnessResultRow:
    base = dict(
        run_id="2026-01-01T00:00:00Z@test",
        device="AMD Instinct MI300X",
        arch="gfx942",
        part="MI300X",
        M=16,
        N=1024,
        K=4096,
        dtype="fp8",
        out_dtype="bf16",
        layout="tn",
        regime="cold",
        candidate="torch._scaled_mm:rowwise",
        status="ok",
        us=12.5,
        spread=0.01,
        samples=30,
        method="graph",
        tflops=10.7,
        gbps=350.0,
        bound="memory",
        pct_of_bound=60.0,
        err=1.5e-3,
        pass_no=1,
        extra={"buffers": 40, "buffer_bytes": 40 * 4_210_688, "warmup_calls": 300, "torch": "2.11"},
    )
    base.update(kw)
    return HarnessResultRow(**base)


def ceiling(**kw) -> HarnessCeilingRow:
    base = dict(
        run_id="2026-01-01T00:00:00Z@test",
        device="AMD Instinct MI300X",
        arch="gfx942",
        what="copy",
        size="2147483648",
        us=1000.0,
        value=4294.97,
        unit="GB/s",
        do_bench_us=1010.0,
        ratio=0.990,
        extra={"method": "events"},
    )
    base.update(kw)
    return HarnessCeilingRow(**base)


HOST = {"hostname": "box", "device": "AMD Instinct MI300X", "arch": "gfx942", "torch": "2.11"}


def test_writer_round_trip(tmp_path):
    rows = [
        ceiling(),
        result(regime="warm", us=10.0),
        result(),
        result(status="verify_failed", us=None, spread=None, err=0.5, candidate="bad"),
    ]
    out = tmp_path / "b.jsonl"
    assert write_bundle(out, "2026-01-01T00:00:00Z", HOST, rows) == 4
    lines = out.read_text().splitlines()
    head = json.loads(lines[0])
    assert head == {
        "record": "bundle",
        "kind": "harness",
        "created": "2026-01-01T00:00:00Z",
        "host": HOST,
    }
    h, recs = read_bundle(out)
    assert h == head
    assert [r["record"] for r in recs] == [
        "harness_ceilings",
        "harness_results",
        "harness_results",
        "harness_results",
    ]
    assert recs[2]["us"] == 12.5 and recs[2]["extra"]["buffers"] == 40
    assert recs[3]["us"] is None and recs[3]["status"] == "verify_failed"
    # every column of the table, by name, in every record
    assert set(HarnessResultRow.__dataclass_fields__) | {"record"} == set(recs[1])


def test_nan_and_infinity_are_written_as_null(tmp_path):
    out = tmp_path / "b.jsonl"
    write_bundle(
        out,
        "t",
        {"x": float("nan")},
        [result(err=float("nan"), spread=float("inf"), extra={"a": [float("nan")]})],
    )
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    h, recs = read_bundle(out)
    assert (
        h["host"]["x"] is None
        and recs[0]["err"] is None
        and recs[0]["spread"] is None
        and recs[0]["extra"]["a"] == [None]
    )


def test_failure_mid_write_leaves_nothing_half_written(tmp_path):
    out = tmp_path / "b.jsonl"
    out.write_text("previous bundle\n")

    def rows():
        yield result()
        raise RuntimeError("GPU fell off the bus")

    with pytest.raises(RuntimeError):
        write_bundle(out, "t", HOST, rows())
    assert out.read_text() == "previous bundle\n"  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.jsonl"]  # and no temp file is left


def test_missing_output_folder_is_a_user_error(tmp_path):
    with pytest.raises(CkkbError, match="output folder does not exist"):
        write_bundle(tmp_path / "nope" / "b.jsonl", "t", HOST, [result()])


def test_read_bundle_rejects_other_files(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"record": "bundle", "kind": "race"}\n')
    with pytest.raises(CkkbError, match="not a harness bundle"):
        read_bundle(p)
    p.write_text('{"record": "bundle", "kind": "harness"}\n{"record": "harness_results", "M": \n')
    with pytest.raises(CkkbError, match=r"x.jsonl:2: not JSON"):
        read_bundle(p)


def _db_rows(db, q, params=()):
    c = sqlite3.connect(db)
    c.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in c.execute(q, params)]
    finally:
        c.close()


def test_round_trip_through_ckkb_ingest(tmp_path, tmp_db):
    rows = [
        ceiling(),
        result(regime="warm", us=10.0),
        result(regime="cold", us=12.5),
        result(regime="warm", us=10.2, pass_no=2),
        result(regime="cold", us=12.4, pass_no=2),
        result(candidate="bad", status="verify_failed", us=None, err=0.4, regime="warm"),
    ]
    out = tmp_path / "b.jsonl"
    write_bundle(out, "2026-01-01T00:00:00Z", HOST, rows)
    s = ingest(tmp_db, [out])
    assert s.rows_added == {"harness_ceilings": 1, "harness_results": 5} and s.errors == []
    got = _db_rows(tmp_db, "select * from harness_results order by pass_no, regime, candidate")
    assert len(got) == 5
    first = next(r for r in got if r["regime"] == "cold" and r["pass_no"] == 1)
    assert (first["M"], first["N"], first["K"], first["dtype"], first["us"], first["bound"]) == (
        16,
        1024,
        4096,
        "fp8",
        12.5,
        "memory",
    )
    assert json.loads(first["extra"])["buffers"] == 40
    failed = next(r for r in got if r["status"] == "verify_failed")
    assert failed["us"] is None and failed["err"] == 0.4
    # the warm-vs-cold view pairs each pass's warm and cold timing
    wc = _db_rows(tmp_db, "select * from harness_warm_cold order by pass_no")
    assert [(r["pass_no"], r["warm_us"], r["cold_us"]) for r in wc] == [
        (1, 10.0, 12.5),
        (2, 10.2, 12.4),
    ]
    assert wc[0]["cold_over_warm"] == pytest.approx(1.25) and wc[0]["warm_optimism_pct"] == 20.0
    assert wc[0]["m_class"] == "small_m" and wc[0]["cold_buffers"] == 40
    # re-ingesting the same bytes adds nothing
    again = ingest(tmp_db, [out])
    assert (
        again.rows_added == {}
        and _db_rows(tmp_db, "select count(*) n from harness_results")[0]["n"] == 5
    )


def _add_config_row(db, **kw):
    row = dict(
        file_id=1,
        file="aiter/configs/a8w8_tuned_gemm.csv",
        line=2,
        op="gemm_a8w8",
        kind="tuned",
        gfx=None,
        cu_num=304,
        arch="gfx942",
        M=16,
        N=1024,
        K=4096,
        kernelId=12,
        kernelName="k12",
        splitK=0,
        us=10.5,
        values="{}",
    )
    row.update(kw)
    c = sqlite3.connect(db)
    c.execute(
        f"insert into aiter_config_rows ({', '.join('[' + k + ']' for k in row)}) "
        f"values ({', '.join('?' * len(row))})",
        list(row.values()),
    )
    c.commit()
    c.close()


def test_tuner_vs_cold_joins_on_arch_and_shape(tmp_path, tmp_db):
    out = tmp_path / "b.jsonl"
    write_bundle(
        out,
        "t",
        HOST,
        [
            result(us=12.0),
            result(us=13.0, pass_no=2),
            result(regime="warm", us=10.0),
            result(arch="sm_90", device="NVIDIA H200", us=99.0),
        ],
    )
    ingest(tmp_db, [out])
    _add_config_row(tmp_db)  # same shape, same arch: joins
    _add_config_row(tmp_db, line=3, arch="gfx950", cu_num=256, us=8.0)  # other arch: must not join
    _add_config_row(
        tmp_db, line=4, file="aiter/configs/bf16_tuned_gemm.csv", us=7.0
    )  # bf16 file vs fp8 timing: no
    _add_config_row(tmp_db, line=5, kind="untuned", us=None)
    rows = _db_rows(tmp_db, sql("tuner_vs_cold"), {"arch": ""})
    assert len(rows) == 1
    r = rows[0]
    assert (r["file"], r["line"], r["arch"], r["tuner_us"], r["cold_us"], r["timings"]) == (
        "aiter/configs/a8w8_tuned_gemm.csv",
        2,
        "gfx942",
        10.5,
        12.5,
        2,
    )
    assert r["tuner_over_cold"] == pytest.approx(0.84)
    assert r["tuner_optimism_pct"] == 16.0
    assert _db_rows(tmp_db, sql("tuner_vs_cold"), {"arch": "gfx950"}) == []


def test_canned_query_header():
    text = sql("tuner_vs_cold")
    head = [ln for ln in text.splitlines() if ln.startswith("-- ")][:3]
    assert (
        head[0].startswith("-- title: ")
        and head[1].startswith("-- description: ")
        and head[2] == "-- params: arch"
    )


# ----- the committed bundle of the real H200 run -------------------------------------------------


@pytest.fixture(scope="module")
def real_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("h200") / "kb.db"
    s = ingest(db, [REAL])
    assert s.errors == []
    return db


def test_real_bundle_header_and_coverage(real_db):
    head, _ = read_bundle(REAL)
    assert head["host"]["device"] == "NVIDIA H200" and head["host"]["arch"] == "sm_90"
    assert head["host"]["llc_bytes"] == 60 * 2**20
    shapes = _db_rows(
        real_db,
        "select dtype, count(distinct M||'x'||N||'x'||K) n from harness_results group by dtype",
    )
    n = {r["dtype"]: r["n"] for r in shapes}
    assert n["bf16"] >= 40 and n["fp8"] >= 10
    cov = _db_rows(
        real_db,
        "select count(*) n, sum(status = 'ok') ok, count(distinct pass_no) passes, "
        "count(distinct regime) regimes, sum(method = 'graph') graphs, "
        "sum(method = 'events') ev from harness_results",
    )[0]
    assert cov["n"] == cov["ok"] == 504 and cov["passes"] == 2 and cov["regimes"] == 2
    assert cov["graphs"] > 0 and cov["ev"] > 0
    fp8 = _db_rows(real_db, "select distinct candidate from harness_results where dtype = 'fp8'")
    assert {r["candidate"] for r in fp8} == {
        "torch._scaled_mm:rowwise",
        "torch._scaled_mm:tensorwise",
    }
    cfg = _db_rows(
        real_db, "select count(distinct config) n from harness_results where dtype = 'bf16'"
    )[0]["n"]
    assert cfg == 4  # bf16_tuned_gemm.csv and the three model_configs/*bf16*


def test_real_ceilings_agree_with_do_bench_within_5_percent(real_db):
    rows = {r["what"]: r for r in _db_rows(real_db, "select * from harness_ceilings")}
    assert set(rows) == {"copy", "read", "gemm_bf16", "gemm_fp8"}
    for r in rows.values():
        assert abs(r["us"] / r["do_bench_us"] - 1) < 0.05, r
    assert (
        3800 < rows["copy"]["value"] < 4800
    )  # GB/s, read + written, vs 4.8 TB/s on the data sheet
    burst = json.loads(rows["gemm_bf16"]["extra"])["burst_value"]
    assert 700 < burst < 989.4  # TFLOP/s: under the dense data-sheet peak
    assert (
        rows["gemm_bf16"]["value"] <= burst
    )  # sustained at the power limit is slower than the burst


def test_real_warm_vs_cold(real_db):
    # a 41 MiB shape (fits the 60 MiB L2) is much faster warm than cold ...
    r = _db_rows(
        real_db,
        "select * from harness_warm_cold where M = 64 and N = 2560 and K = 8192 "
        "and candidate = 'torch.linear' and pass_no = 1",
    )[0]
    assert r["cold_over_warm"] > 1.15 and r["cold_buffers"] >= 3
    assert (
        r["cold_buffers"]
        * json.loads(
            _db_rows(
                real_db,
                "select extra from harness_results where M = 64 and N = 2560 and K = 8192 "
                "and regime = 'cold' limit 1",
            )[0]["extra"]
        )["set_bytes"]
        > 60 * 2**20
    )
    # ... while a 256 MiB weight read (far larger than the L2) is the same either way
    r = _db_rows(
        real_db,
        "select * from harness_warm_cold where M = 1 and N = 8192 and K = 8192 "
        "and candidate = 'torch.linear' and pass_no = 1",
    )[0]
    assert abs(r["cold_over_warm"] - 1) < 0.03
    assert r["bound"] == "memory" and r["cold_pct_of_bound"] > 80


def test_real_compute_bound_shapes_reach_most_of_the_ceiling(real_db):
    rows = _db_rows(
        real_db,
        "select pct_of_bound, tflops from harness_results where dtype = 'bf16' and M >= 1024 "
        "and bound = 'compute' and N >= 4096 and K >= 4096",
    )
    assert (
        rows and min(r["pct_of_bound"] for r in rows) > 70 and max(r["tflops"] for r in rows) > 650
    )


def test_real_run_to_run_spread_is_small(real_db):
    rows = _db_rows(
        real_db,
        """
        select abs(b.us - a.us) / a.us d from harness_results a join harness_results b
          on a.M = b.M and a.N = b.N and a.K = b.K and a.dtype = b.dtype"""
        """ and a.candidate = b.candidate
         and a.regime = b.regime and a.pass_no = 1 and b.pass_no = 2""",
    )
    d = sorted(r["d"] for r in rows)
    assert len(d) == 252
    assert d[len(d) // 2] < 0.01  # median difference between the passes under 1 %


def test_real_fp16_bundle(tmp_path):
    db = tmp_path / "kb.db"
    s = ingest(db, [REAL.with_name("h200_harness_fp16.jsonl")])
    assert s.errors == [] and s.rows_added["harness_results"] == 48
    rows = _db_rows(db, "select * from harness_results")
    assert {r["dtype"] for r in rows} == {"fp16"} and all(r["status"] == "ok" for r in rows)
    assert max(r["err"] for r in rows) < 2e-3  # fp16 output rounding: an order under bf16's
    assert len({(r["M"], r["N"], r["K"]) for r in rows}) == 12


def test_real_bundle_is_committed_not_ignored():
    # .gitignore has a bare `results` pattern; the bundle was force-added and must stay in the tree
    assert REAL.is_file() and os.path.getsize(REAL) > 100_000

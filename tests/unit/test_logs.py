"""ckProfiler log parsing and ingestion: every real sample, damaged lines, re-ingestion, bundles."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.cli import main
from ckkb.kb.ingest import ingest
from ckkb.logs import parse_text
from tests.conftest import SAMPLES

# Read off each sample by hand: (races, results, timed, unsupported, best ms, best TFLOPS, best name
# prefix or None, M, N, K). Results count `Perf:` lines plus `does not support` lines.
EXPECTED = {
    "001.txt": (
        1,
        103,
        102,
        1,
        1.81792,
        127.579,
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> NumPrefetch: 1, LoopScheduler: Interwave",
        49152,
        3072,
        768,
    ),
    "002.txt": (
        1,
        48,
        48,
        0,
        1.87175,
        123.91,
        "DeviceGemmMultipleD_Xdl_CShuffle<256, 128, 128, 32, 8, 8, Default>",
        49152,
        3072,
        768,
    ),
    "003.txt": (1, 0, 0, 0, 1.1933, 107.977, None, 3840, 4096, 4096),
    "004.txt": (1, 0, 0, 0, 1.42509, 102.988, None, None, None, None),
    "005.txt": (1, 0, 0, 0, 211.405, 41.6077, None, None, None, None),
    "006.txt": (1, 0, 0, 0, 58.0306, 37.8942, None, None, None, None),
    "007.txt": (
        1,
        0,
        0,
        0,
        0.768321,
        86.6679,
        "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 256, 32",
        None,
        None,
        None,
    ),
    "008.txt": (
        1,
        0,
        0,
        0,
        68.5216,
        95.337,
        "DeviceGroupedConvBwdWeight_Xdl_CShuffle<256, 256, 128, 4, Default",
        None,
        None,
        None,
    ),
    "009.txt": (1, 0, 0, 0, 3.12326, None, "DeviceImageToColumn<128, 32, 64, 4>", None, None, None),
    "010.txt": (
        1,
        0,
        0,
        0,
        0.0146878,
        None,
        "DeviceElementwiseNormalizationImpl<3, 2>",
        None,
        None,
        None,
    ),
    "011.txt": (
        1,
        13,
        13,
        0,
        2.17246,
        506.113,
        "GemmXdlSplitKCShuffle_Default_RRR_B256_Vec8x2x8_256x128x4x8 LoopScheduler: Default",
        8192,
        8192,
        8192,
    ),
    "012.txt": (
        1,
        103,
        102,
        1,
        1.5806,
        146.735,
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2>",
        49152,
        3072,
        768,
    ),
    "013.txt": (
        1,
        103,
        102,
        1,
        1.6828,
        137.823,
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2>",
        49152,
        3072,
        768,
    ),
    "014.txt": (
        1,
        48,
        48,
        0,
        2.00123,
        115.893,
        "DeviceGemmMultipleD_Xdl_CShuffle<256, 128, 128, 32, 8, 8, Default>",
        49152,
        3072,
        768,
    ),
    "015.txt": (
        1,
        48,
        48,
        0,
        2.18482,
        106.154,
        "DeviceGemmMultipleD_Xdl_CShuffle<256, 128, 128, 32, 8, 8, Default>",
        49152,
        3072,
        768,
    ),
    "016.txt": (1, 6, 6, 0, None, None, None, None, None, None),
    "024.txt": (
        1,
        0,
        0,
        0,
        0.0634091,
        3.70421,
        "DeviceGemm_Xdl_CShuffle<Default, 64, 32, 64, 32, 8, 8, 32, 32, "
        "1, 2, 8, 8, 1, 1> LoopScheduler: Default, PipelineVersion: v2",
        32,
        512,
        7168,
    ),
    "025.txt": (1, 1, 1, 0, None, None, None, None, None, None),
}


def test_every_sample_is_pinned():
    assert sorted(p.name for p in SAMPLES.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_parses(name):
    n_races, n_results, timed, unsup, best_ms, best_tflops, best_name, *_ = EXPECTED[name]
    races, loose = parse_text((SAMPLES / name).read_text())
    assert loose == []
    assert len(races) == n_races
    r = races[0]
    assert r.errors == []
    assert len(r.results) == n_results
    assert sum(x.ms is not None for x in r.results) == timed
    assert sum(not x.supported for x in r.results) == unsup
    assert (
        r.info.skipped == 0
    )  # the samples hold only lines ckProfiler printed (plus '#' provenance)
    if best_ms is None:
        assert r.info.best is None
    else:
        assert r.info.best["ms"] == best_ms
        assert r.info.best.get("tflops") == best_tflops
        if best_name:
            assert r.info.best["name"].startswith(best_name)
        else:
            assert r.info.best["name"] is None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_ingests_with_shape(name, tmp_db):
    n_races, n_results, *_, M, N, K = EXPECTED[name]
    s = ingest(tmp_db, [SAMPLES / name], arch="gfx942")
    assert (s.races_added, s.results_added, s.errors) == (n_races, n_results, [])
    db = sqlite3.connect(tmp_db)
    assert db.execute("select M, N, K, arch from races").fetchone() == (M, N, K, "gfx942")
    assert db.execute("select count(*) from race_results").fetchone()[0] == n_results


def test_sample_details(tmp_db):
    ingest(tmp_db, sorted(SAMPLES.glob("*.txt")))
    db = sqlite3.connect(tmp_db)
    db.row_factory = sqlite3.Row
    r = {row["source_file"].rsplit("/", 1)[-1]: row for row in db.execute("select * from races")}
    assert (r["001.txt"]["op"], r["001.txt"]["dtype"], r["001.txt"]["layout"]) == (
        "gemm",
        "fp16",
        "mk_kn",
    )
    assert (
        r["001.txt"]["instances_found"],
        r["001.txt"]["warmup"],
        r["001.txt"]["iterations"],
    ) == (103, 1, 100)
    assert r["001.txt"]["command"] == "./ckProfiler gemm 1 0 1 2 0 1 49152 3072 768 768 3072 3072"
    assert (r["024.txt"]["dtype"], r["024.txt"]["layout"], r["024.txt"]["stride_c"]) == (
        "bf16",
        "mk_nk",
        512,
    )
    assert r["011.txt"]["kbatch"] == 2 and r["011.txt"]["command"] is None  # '# command: unknown'
    assert json.loads(r["002.txt"]["descriptors"])[2] == {
        "name": "d0_m_n",
        "lengths": [49152, 3072],
        "strides": [0, 1],
    }
    kb = db.execute(
        "select distinct kbatch from race_results where race_id = ?", [r["011.txt"]["id"]]
    ).fetchall()
    assert [tuple(x) for x in kb] == [(2,)]
    unsup = db.execute(
        "select name, ms, supported from race_results where supported = 0 and race_id = ?",
        [r["001.txt"]["id"]],
    ).fetchall()
    assert [tuple(x) for x in unsup] == [("DeviceGemmDl<256, 128, 128, 16, 2, 4, 4, 1>", None, 0)]
    ver = db.execute(
        "select verified from race_results where race_id = ?", [r["016.txt"]["id"]]
    ).fetchall()
    assert [v[0] for v in ver] == [1] * 6  # 'error: 0' after each Perf line
    soft = db.execute(
        "select ms, tflops, gbps, name from race_results where race_id = ?", [r["025.txt"]["id"]]
    ).fetchone()
    assert tuple(soft) == (
        0.546594,
        None,
        982.211,
        "DeviceReduceSoftmax<256,M_C4_S1,K_C64_S8,InSrcVectorDim_1_InSrcVectorSize_8_OutDstVectorSize_8>",
    )
    right = db.execute(
        "select ms from race_results where race_id = ? order by ordinal limit 1",
        [r["001.txt"]["id"]],
    ).fetchone()
    assert tuple(right) == (1.89904,)  # right-aligned 'Perf:    1.89904 ms'


def test_reingest_adds_nothing(tmp_db):
    files = sorted(SAMPLES.glob("*.txt"))
    first = ingest(tmp_db, files)
    assert first.races_added == 18 and first.results_added == 473
    again = ingest(tmp_db, files)
    assert (again.races_added, again.results_added, again.errors) == (0, 0, [])
    db = sqlite3.connect(tmp_db)
    assert db.execute("select count(*) from races").fetchone()[0] == 18
    assert db.execute("select count(*) from race_results").fetchone()[0] == 473
    assert db.execute("select count(*) from ingest_files").fetchone()[0] == 18


DAMAGED = """\
$ ./ckProfiler gemm 1 1 1 1 0 1 256 256 256 256 256 256
a_m_k: dim 2, lengths {256, 256}, strides {256, 1}
found x instances
Perf: 0.05 ms, 1.0 TFlops, 7.5 GB/s, DeviceGemmXdl<256, 256, 128, 4>
Perf:    0.0
Perf: 0.06 ms, 0.5 TFlops, 6.6 GB/s, DeviceGemmXdl<256, 128,
    256, 4> LoopScheduler: Default
bash: some shell chatter
Perf: 0.07 ms, 0.4 TFlops, 6.0 GB/s, DeviceGemmXdl<128, 128
Best Perf: 0.05 ms, 1.0 TFlops, 7.5 GB/s, DeviceGemmXdl<256, 256, 128, 4>
"""


def test_damaged_lines_are_errors_and_the_rest_is_stored(tmp_path, tmp_db):
    log = tmp_path / "damaged.log"
    log.write_text(DAMAGED)
    s = ingest(tmp_db, [log])
    assert s.races_added == 1 and s.results_added == 3
    assert [(e["line"], e["message"].split(" (")[0]) for e in s.errors] == [
        (3, "malformed 'found N instances' line"),
        (5, "malformed Perf: line"),
        (9, "instance name truncated"),
    ]
    db = sqlite3.connect(tmp_db)
    names = [r[0] for r in db.execute("select name from race_results order by ordinal")]
    assert (
        names[1] == "DeviceGemmXdl<256, 128, 256, 4> LoopScheduler: Default"
    )  # wrapped name joined
    race = db.execute("select op, M, K, command, best_ms from races").fetchone()
    assert race == ("gemm", 256, 256, "ckProfiler gemm 1 1 1 1 0 1 256 256 256 256 256 256", 0.05)
    assert db.execute("select count(*) from ingest_errors").fetchone()[0] == 3


def test_truncated_log_keeps_what_was_printed(tmp_path, tmp_db):
    text = (SAMPLES / "001.txt").read_text()
    cut = text[: text.index("Perf:", 5000) + 20]  # cut in the middle of a Perf: line
    log = tmp_path / "cut.log"
    log.write_text(cut)
    s = ingest(tmp_db, [log])
    assert s.races_added == 1
    assert s.results_added == cut.count("\nPerf:") - 1
    assert len(s.errors) == 1 and s.errors[0]["line"] == cut.count("\n") + 1
    row = sqlite3.connect(tmp_db).execute("select best_ms, status from races").fetchone()
    assert row == (None, "ok")


def test_wrapped_best_line_from_the_seed(tmp_path):
    text = (
        "Perf: 0.381103 ms, 360.634 TFlops, 1.0 GB/s, "
        "DeviceGemm_Xdl_CShuffle<MNKPadding, 256, 128, 128, 32, 8, 8, 32, "
        "32, 2, 2, 8, 8, 1, 1> LoopScheduler: Default, PipelineVersion: v2\n"
        "\n"
        "Best Perf for datatype = bf16 ALayout =  RowMajor BLayout =  "
        "ColumnMajor M = 4096 N = 4096 K = 4096 StrideA = 4096 StrideB = "
        "4096 StrideC = 4096 : 0.251566 ms, 546.334 TFlops, 400.147 GB/s,\n"
        "  DeviceGemm_Xdl_CShuffleV2<Default, 256, 256, 256, 32, 8, 8, 32, 32, 4, 4, 8, 8, 1, 1>\n"
        "  LoopScheduler: Default, PipelineVersion: v1\n"
    )
    races, loose = parse_text(text)
    assert loose == [] and len(races) == 1 and races[0].errors == []
    assert (
        races[0].info.best["name"]
        == "DeviceGemm_Xdl_CShuffleV2<Default, 256, 256, 256, 32, 8, 8, 32, "
        "32, 4, 4, 8, 8, 1, 1> LoopScheduler: Default, PipelineVersion: v1"
    )
    assert races[0].info.header["M"] == 4096


def test_modern_verification_failure_marks_the_next_result():
    text = (
        "Error: Incorrect results! out[5] != ref[5]: 1 != 2\n"
        "max err: 1\n"
        "Perf:   0.5 ms, 10 TFlops, 2 GB/s, DeviceGemm_Xdl_CShuffleV3<Row, Col, Row>, KBatch 1\n"
        "Perf:   0.6 ms, 9 TFlops, 2 GB/s, DeviceGemm_Xdl_CShuffleV3<Row, Row, Row>, KBatch 1\n"
    )
    (race,), _ = parse_text(text)
    assert [r.verified for r in race.results] == [False, None]
    assert [r.kbatch for r in race.results] == [1, 1]


def test_two_races_in_one_log():
    one = (SAMPLES / "024.txt").read_text()
    races, _ = parse_text(one + "\n" + (SAMPLES / "003.txt").read_text())
    assert [r.info.best["ms"] for r in races] == [0.0634091, 1.1933]


def test_binary_and_missing_files(tmp_path, tmp_db):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\xff" * 100)
    s = ingest(tmp_db, [junk])
    assert s.races_added == 0 and s.errors[0]["message"].startswith("binary file")
    r = CliRunner().invoke(main, ["ingest", str(junk), "--db", str(tmp_db)])
    assert r.exit_code == 1 and "binary file" in r.output
    chatter = tmp_path / "chatter.log"
    chatter.write_text(
        "$ make -j\nlaunch_and_time_kernel: grid_dim {1, 1, 1}, block_dim {256, 1, 1}\n"
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"record": "bundle", "kind": "race", "created": "x", "host": {}}\n')
    r = CliRunner().invoke(
        main, ["ingest", str(chatter), str(empty), "--json", "--db", str(tmp_db)]
    )
    assert r.exit_code == 1
    assert [e["message"] for e in json.loads(r.output)["errors"]] == [
        "no ckProfiler output or bundle record found; nothing stored"
    ] * 2
    r = CliRunner().invoke(main, ["ingest", str(tmp_path / "nope.log"), "--db", str(tmp_db)])
    assert r.exit_code == 2 and "no such file" in r.output and "Traceback" not in r.output


def test_cli_json_contract(tmp_db):
    r = CliRunner().invoke(
        main,
        [
            "ingest",
            str(SAMPLES / "001.txt"),
            str(SAMPLES / "016.txt"),
            "--arch",
            "gfx942",
            "--json",
            "--db",
            str(tmp_db),
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"races_added": 2, "results_added": 109, "errors": []}
    r = CliRunner().invoke(main, ["races", "--json", "--db", str(tmp_db)])
    races = json.loads(r.output)["races"]
    assert list(races[0]) == [
        "id",
        "op",
        "dtype",
        "layout",
        "M",
        "N",
        "K",
        "arch",
        "timed",
        "registered",
        "best",
        "worst",
        "spread",
        "winner",
    ]
    first = races[0]
    assert (first["timed"], first["best"], first["registered"]) == (102, 127.579, None)
    worst = (
        sqlite3.connect(tmp_db)
        .execute("select min(tflops) from race_results where race_id = 1")
        .fetchone()[0]
    )
    assert first["worst"] == worst and first["spread"] == round(127.579 / worst, 4)
    assert first["winner"].startswith("DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2>")
    # a knowledge base made before the race views existed:
    # read-only, answered through temporary views
    con = sqlite3.connect(tmp_db)
    con.executescript(
        "drop view races_summary; drop view races_registered; drop view races_winner_moves;"
    )
    con.close()
    r2 = CliRunner().invoke(main, ["races", "--json", "--db", str(tmp_db)])
    assert r2.exit_code == 0 and json.loads(r2.output)["races"] == races


BUNDLE_HEADER = {
    "record": "bundle",
    "kind": "race",
    "created": "2026-01-01T00:00:00Z",
    "host": {
        "hostname": "h1",
        "gpu": "AMD Instinct MI300X",
        "arch": "gfx942",
        "cu_count": 304,
        "rocm": "7.2.2",
    },
}


def test_bundle_records(tmp_path, tmp_db):
    out = (SAMPLES / "024.txt").read_text()
    lines = [
        json.dumps(BUNDLE_HEADER),
        json.dumps(
            {
                "record": "race_log",
                "op": "gemm",
                "argv": ["ckProfiler", "gemm", "2", "1"],
                "output": out,
                "exit_code": 0,
                "status": "ok",
            }
        ),
        json.dumps(
            {
                "record": "race_log",
                "op": "gemm",
                "argv": ["ckProfiler", "gemm"],
                "output": "",
                "exit_code": -11,
                "status": "crash",
                "failure": "killed by SIGSEGV",
                "shape": {"M": 7, "N": 8, "K": 9},
            }
        ),
        json.dumps(
            {
                "record": "harness_results",
                "run_id": "r1",
                "device": "d",
                "arch": "gfx942",
                "M": 1,
                "N": 2,
                "K": 3,
                "dtype": "bf16",
                "out_dtype": "bf16",
                "layout": "tn",
                "regime": "warm",
                "candidate": "torch.mm",
                "status": "ok",
                "pass_no": 1,
                "mystery": 5,
            }
        ),
        json.dumps({"record": "no_such_table", "x": 1}),
        '{"record": "race_log", "op": "gemm", "outp',  # the writer was killed mid-line
    ]
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join(lines) + "\n")
    s = ingest(tmp_db, [b])
    assert s.races_added == 2 and s.rows_added == {"harness_results": 1}
    assert [(e["line"], e["message"][:20]) for e in s.errors] == [
        (5, "unknown record 'no_s"),
        (6, "not a JSON record (U"),
    ]
    db = sqlite3.connect(tmp_db)
    rows = db.execute(
        "select gpu, arch, cu_count, rocm, host, status, failure, M, best_ms from races order by id"
    ).fetchall()
    assert rows == [
        ("AMD Instinct MI300X", "gfx942", 304, "7.2.2", "h1", "ok", None, 32, 0.0634091),
        (
            "AMD Instinct MI300X",
            "gfx942",
            304,
            "7.2.2",
            "h1",
            "crash",
            "killed by SIGSEGV",
            7,
            None,
        ),
    ]
    extra = json.loads(db.execute("select extra from harness_results").fetchone()[0])
    assert extra == {"mystery": 5}
    assert db.execute("select kind from ingest_files").fetchone() == ("race_bundle",)
    assert ingest(tmp_db, [b]).races_added == 0


def test_ingest_into_existing_db_keeps_data(tmp_db):
    ingest(tmp_db, [SAMPLES / "001.txt"])
    ingest(tmp_db, [SAMPLES / "002.txt"])
    db = sqlite3.connect(tmp_db)
    assert db.execute("select count(*), count(distinct id) from races").fetchone() == (2, 2)
    assert db.execute("select count(distinct race_id) from race_results").fetchone() == (2,)


_name = st.from_regex(r"Device[A-Za-z_]{1,20}<[0-9]{1,3}(, [0-9]{1,3}){0,8}>", fullmatch=True)
_num = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    ms=_num,
    tf=_num,
    gb=_num,
    name=_name,
    pad=st.integers(0, 8),
    kbatch=st.none() | st.integers(1, 64),
)
def test_perf_line_roundtrip(ms, tf, gb, name, pad, kbatch):
    line = f"Perf: {' ' * pad}{ms!r} ms, {tf!r} TFlops, {gb!r} GB/s, {name}" + (
        f", KBatch {kbatch}" if kbatch else ""
    )
    (race,), loose = parse_text(line)
    (r,) = race.results
    assert (r.ms, r.tflops, r.gbps, r.name, r.kbatch) == (ms, tf, gb, name, kbatch)
    assert loose == [] and race.errors == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40), max_size=20
    )
)
def test_parser_never_raises(lines):
    races, loose = parse_text("\n".join(lines))
    for r in races:
        assert r.info.line >= 1


def test_result_names_are_parsed_once_and_joined_back(tmp_path):
    """Each distinct instance name is parsed once into
    race_names; race_results_named joins it to every result."""
    from ckkb.kb import db as kbdb
    from ckkb.kb.ingest import ingest

    db_path = tmp_path / "kb.db"
    ingest(db_path, [SAMPLES / "024.txt", SAMPLES / "001.txt"], arch="gfx942")
    db = kbdb.open_db(db_path)
    n_names = db.execute("select count(*) from race_names").fetchone()[0]
    n_distinct = db.execute("select count(distinct name) from race_results").fetchone()[0]
    assert n_names == n_distinct > 50
    rows = db.execute(
        "select op_template, name_schema, fields from race_results_named "
        "where name = 'DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> "
        "NumPrefetch: 1, LoopScheduler: Interwave, PipelineVersion: v1'"
    ).fetchall()
    assert rows, "001.txt's winner is one of its results"
    op, schema, fields = rows[0][0], rows[0][1], json.loads(rows[0][2])
    assert op == "DeviceGemmXdl" and schema in ("generic", "matched")
    assert (
        fields["LoopScheduler"] == "Interwave"
        and fields["PipelineVersion"] == "v1"
        and fields["NumPrefetch"] == "1"
    )
    assert (
        db.execute("select count(*) from race_results_named").fetchone()[0]
        == db.execute("select count(*) from race_results").fetchone()[0]
    )

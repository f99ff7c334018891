"""Names of any release against real trees: every name printed in ../shared/ckprofiler_samples/
parses to the op its release printed, read with the wheel's CK schemas and with CK 2024-10's
(neither is the release that printed most samples), and is stored so by `ckkb ingest`.

The expected ops come from the second method of tests/unit/test_names_release.py (a regex over
the raw lines, and the per-file counts pinned there from a shell grep)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ckkb import names
from ckkb.kb import db as kbdb
from ckkb.kb.ingest import ingest
from ckkb.queries.name_trees import NameReader
from tests.conftest import SAMPLES
from tests.unit.test_names_release import SAMPLE_OPS, check_samples, logged_names, ops_by_line


@pytest.fixture(scope="module", params=["default", "ck2024"])
def tree_db(request, wheel_db, shared_dbs) -> Path:
    return wheel_db if request.param == "default" else shared_dbs["ck2024"]


def test_every_sample_name_reads_as_its_op(tree_db):
    db = kbdb.open_db(tree_db, readonly=True)
    try:
        reader = NameReader.of(db)
        assert len(reader.trees) == 1 and len(reader.trees[0].schemas) > 100
        schemas = reader.trees[0].schemas
        assert schemas.by_op().keys() >= {"DeviceGemmXdl", "DeviceGemm_Xdl_CShuffle"}
        got = check_samples(schemas)
        assert {f: dict(c) for f, c in got.items()} == SAMPLE_OPS
        # the 2022 forms of the two GEMMs are read as those ops, never as a neighbour of theirs
        p = names.parse("DeviceGemmXdl_C_Shuffle<256, 128, 128, 32, 8, 2>", schemas)
        assert (p.op, p.schema, p.fields) == ("DeviceGemmXdl_C_Shuffle", "generic", {})
    finally:
        db.close()


def test_ingested_samples_store_the_printed_ops(tree_db, tmp_path):
    path = tmp_path / "kb.db"
    path.write_bytes(Path(tree_db).read_bytes())
    files = sorted(SAMPLES.glob("*.txt"))
    s = ingest(path, files)
    assert not [e for e in s.errors if "nothing stored" not in e["message"]]
    conn = sqlite3.connect(path)
    try:
        stored = dict(conn.execute("select name, op_template from race_names"))
        trees = {t for (t,) in conn.execute("select distinct tree from race_names")}
        results = {n for (n,) in conn.execute("select distinct name from race_results")}
        best = {n for (n,) in conn.execute("select best_name from races where best_name != ''")}
    finally:
        conn.close()
    want: dict[str, str] = {}
    for f in files:
        by_line = sorted(ops_by_line(f).items())
        for (_, name), (_, op) in zip(logged_names(f), by_line, strict=True):
            assert want.setdefault(name, op) == op, name  # one name, one op, in every sample
    # race_names holds every result's name (Best-only names stay on their race), each with the
    # op its line prints
    assert set(stored) == results and results | best == set(want)
    assert {n: stored[n] for n in results} == {n: want[n] for n in results}
    assert {want[n] for n in best - results} == {
        # 007-010 and 024 print names on Best lines only; 011 its Best, which no Perf line names
        "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1",
        "DeviceGroupedConvBwdWeight_Xdl_CShuffle",
        "DeviceImageToColumn",
        "DeviceElementwiseNormalizationImpl",
        "GemmXdlSplitKCShuffle",
        "DeviceGemm_Xdl_CShuffle",
    }
    assert len(trees) == 1 and None not in trees

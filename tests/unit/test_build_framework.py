"""The build orchestrator: atomic write, cache, carry-over of ingested data, bad inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlite_utils

from ckkb.errors import DatabaseError
from ckkb.kb import db as kbdb
from ckkb.kb.build import build
from ckkb.kb.schema.core import IngestFileRow
from ckkb.kb.stages import FileResult, StageResult


@dataclass(frozen=True)
class FakeTree:
    root: Path
    version: str | None = "9.9"
    wheel_version: str | None = None


class CountingStage:
    """Emits one diagnostic row per file, and counts extract calls."""

    name = "test.counting"
    reads = ()
    writes = ("diagnostics",)
    version = "1"
    tree = "ck"
    calls = 0
    fail_combine = False

    def files(self, root):
        return sorted(root.rglob("*.txt"))

    def extract(self, root, rel, data):
        type(self).calls += 1
        return FileResult(facts={"size": len(data)})

    def combine(self, root, results, ctx):
        if self.fail_combine:
            raise KeyboardInterrupt  # an interrupted build
        from ckkb.kb.schema.core import DiagnosticRow

        rows = [
            DiagnosticRow(
                stage=self.name, file=rel, line=0, severity="warning", message=str(fr.facts["size"])
            )
            for rel, fr in results.items()
        ]
        return StageResult(rows=rows)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    for i in range(3):
        (root / f"f{i}.txt").write_text("x" * i)
    return FakeTree(root)


def test_build_writes_rows_and_provenance(tree, tmp_db):
    s = build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    db = kbdb.open_db(tmp_db)
    rows = list(db.query("select file, message, source_id from diagnostics order by file"))
    assert [r["file"] for r in rows] == ["f0.txt", "f1.txt", "f2.txt"]
    assert [r["message"] for r in rows] == ["0", "1", "2"]
    assert {r["source_id"] for r in rows} == {1}
    assert list(db.query("select kind, version from sources")) == [{"kind": "ck", "version": "9.9"}]
    assert s.parsed == 3 and s.cached == 0


def test_warm_rebuild_uses_cache_and_is_noop(tree, tmp_db):
    CountingStage.calls = 0
    build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    assert CountingStage.calls == 3
    s = build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    assert CountingStage.calls == 3 and s.up_to_date
    (tree.root / "f1.txt").write_text("changed!")
    s = build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    assert CountingStage.calls == 4 and s.parsed == 1 and s.cached == 2 and not s.up_to_date
    msgs = {
        r["file"]: r["message"]
        for r in kbdb.open_db(tmp_db).query("select file, message from diagnostics")
    }
    assert msgs["f1.txt"] == "8"


def test_failed_build_leaves_previous_database(tree, tmp_db):
    build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    before = tmp_db.read_bytes()
    (tree.root / "f3.txt").write_text("new")
    stage = CountingStage()
    stage.fail_combine = True
    with pytest.raises(KeyboardInterrupt):
        build(tmp_db, {"ck": tree}, stages=[stage])
    assert tmp_db.read_bytes() == before
    assert not list(tmp_db.parent.glob("*.tmp-*"))


def test_ingested_rows_survive_rebuild(tree, tmp_db):
    build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    db = sqlite_utils.Database(tmp_db)
    db["ingest_files"].insert(
        {
            "sha256": "abc",
            "path": "x.log",
            "kind": "ckprofiler_log",
            "ingested_at": "now",
            "rows_added": 5,
        }
    )
    db.close()
    s = build(tmp_db, {"ck": tree}, stages=[CountingStage()], force=True)
    assert s.carried == {"ingest_files": 1}
    assert [r["path"] for r in kbdb.open_db(tmp_db).query("select path from ingest_files")] == [
        "x.log"
    ]
    assert IngestFileRow.__table__ == "ingest_files"


def test_refuses_to_overwrite_a_foreign_file(tree, tmp_db):
    tmp_db.write_bytes(b"not a database at all, just text" * 10)
    with pytest.raises(DatabaseError, match="not a SQLite database|not a ckkb"):
        build(tmp_db, {"ck": tree}, stages=[CountingStage()])
    assert tmp_db.read_bytes().startswith(b"not a database")


def test_open_db_errors(tmp_path):
    with pytest.raises(DatabaseError, match="not found"):
        kbdb.open_db(tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite_utils.Database(other)["t"].insert({"a": 1})
    with pytest.raises(DatabaseError, match="not a ckkb knowledge base"):
        kbdb.open_db(other)
    created = kbdb.open_db(tmp_path / "new" / "kb.db", create=True)
    assert "instances" in created.table_names()


class JoiningStage(CountingStage):
    """Reads the same files as CountingStage, in the same worker task (extract_with)."""

    name = "test.joining"
    extract_with = "test.counting"
    seen: list[str] = []

    def extract(self, root, rel, data):
        type(self).seen.append(rel)
        return FileResult(facts={"size": len(data) * 10})


def test_a_stage_extracted_with_another_shares_its_file_tasks(tree, tmp_db):
    from ckkb.kb.build.workers import file_tasks as _file_tasks
    from ckkb.kb.stages import register_stages

    register_stages([CountingStage()])
    register_stages([JoiningStage()])
    misses = [
        ("test.counting", "/r", "a"),
        ("test.counting", "/r", "b"),
        ("test.joining", "/r", "b"),
        ("test.joining", "/r", "c"),
    ]
    # b is read once for both stages, in the counting stage's
    # place; c (only the joining stage's) keeps its own
    assert _file_tasks(misses) == [
        ("/r", "a", ("test.counting",)),
        ("/r", "b", ("test.counting", "test.joining")),
        ("/r", "c", ("test.joining",)),
    ]
    JoiningStage.seen = []
    build(tmp_db, {"ck": tree}, stages=[CountingStage(), JoiningStage()], jobs=1)
    msgs = sorted(
        sqlite_utils.Database(tmp_db).execute("select stage, message from diagnostics").fetchall()
    )
    assert msgs == [
        ("test.counting", "0"),
        ("test.counting", "1"),
        ("test.counting", "2"),
        ("test.joining", "0"),
        ("test.joining", "10"),
        ("test.joining", "20"),
    ]
    assert sorted(JoiningStage.seen) == ["f0.txt", "f1.txt", "f2.txt"]


def test_chunks_put_big_files_first_and_keep_a_worker_group_together(tmp_path):
    from ckkb.kb.build.workers import CHUNK_BYTES
    from ckkb.kb.build.workers import chunks as _chunks
    from ckkb.kb.stages import register_stages

    class Grouped(CountingStage):
        name = "test.grouped"
        worker_group = "heavy-import"

    register_stages([CountingStage()])
    register_stages([Grouped()])
    sizes = {
        "a0": 10,
        "a1": CHUNK_BYTES,
        "a2": 500,
        "a3": CHUNK_BYTES // 2,
        "g0": 5,
        "g1": CHUNK_BYTES * 3,
        "z": 1,
    }
    for name, n in sizes.items():
        (tmp_path / name).write_bytes(b"x" * n)
    root = str(tmp_path)
    tasks = [(root, f"a{i}", ("test.counting",)) for i in range(4)]
    tasks += [(root, f"g{i}", ("test.grouped",)) for i in range(2)]
    tasks += [(root, "z", ("test.counting",))]
    chunks = [[t[1] for t in c] for c in _chunks(tasks)]
    # a stage's files biggest first, a chunk closed once it holds CHUNK_BYTES; the group in one
    # chunk in its own order, however big; the last stage after it
    assert chunks == [["a1"], ["a3", "a2", "a0"], ["g0", "g1"], ["z"]]


class ListStage(CountingStage):
    """Writes instance_lists rows (a table with a full-text index), one per file."""

    name = "test.lists_a"
    writes = ("instance_lists",)
    first_id = 1

    def combine(self, root, results, ctx):
        from ckkb.kb.schema.ck_instances import InstanceListRow

        return StageResult(
            rows=[
                InstanceListRow(
                    id=self.first_id + k,
                    name=f"{self.name}_{rel}",
                    dir="d",
                    file=rel,
                    line=1,
                    template_params=[],
                    comment=f"written by {self.name.replace('.', ' ')}",
                )
                for k, rel in enumerate(sorted(results))
            ]
        )


class LaterListStage(ListStage):
    name = "test.lists_b"
    first_id = 100


def test_full_text_index_covers_rows_a_later_stage_adds(tree, tmp_db):
    # the first stage's full-text index is built right after its rows; the second writes the same
    # table, so the index is rebuilt at the end and finds both stages' rows
    build(tmp_db, {"ck": tree}, stages=[ListStage(), LaterListStage()], jobs=1)
    db = sqlite_utils.Database(tmp_db)

    def hits(word: str) -> int:
        sql = "select count(*) from instance_lists_fts where instance_lists_fts match ?"
        return db.execute(sql, [word]).fetchone()[0]

    assert (hits("lists_a"), hits("lists_b"), hits("txt")) == (3, 3, 6)  # name and file are indexed


def test_submission_groups_keep_joiners_with_their_host_and_a_worker_group_together():
    from ckkb.kb.build.workers import submission_groups as _submission_groups

    def stage(name, **attrs):
        return type(name, (CountingStage,), {"name": name, **attrs})()

    a, d = stage("a"), stage("d", extract_with="a")
    b, c = stage("b", worker_group="g"), stage("c", worker_group="g")
    e = stage("e")
    groups = _submission_groups([a, b, c, d, e])
    # d's files must be known before a's go out (one parse for both); b and c go to one worker,
    # first (that worker reads them while the others share the rest)
    assert [[s.name for s in g] for g in groups] == [["b", "c"], ["a", "d"], ["e"]]


def test_submission_groups_send_a_stage_that_waits_only_on_a_worker_group_next():
    from ckkb.kb.build.workers import submission_groups as _submission_groups

    def stage(name, **attrs):
        return type(name, (CountingStage,), {"name": name, **attrs})()

    a = stage("a", writes=("instance_lists",))
    b = stage("b", worker_group="g", writes=("aiter_kernels",))
    c = stage("c", reads=("aiter_kernels",), writes=("aiter_config_rows",))  # waits on b only
    d = stage("d", reads=("aiter_kernels", "instance_lists"), writes=("aiter_audit_findings",))
    e = stage("e", writes=("factories",))  # waits on nothing: build order
    groups = _submission_groups([a, b, c, d, e])
    # c's combine can run as soon as b's is done (early, while the parent waits for a's files),
    # so its files go out right after b's; d waits on a too: it keeps its place
    assert [[s.name for s in g] for g in groups] == [["b"], ["c"], ["a"], ["d"], ["e"]]


def test_submission_groups_send_a_stage_that_waits_on_such_a_stage_next_too():
    """The aiter audit waits on aiter.configs, which waits on the libcst group only: its files go
    out right after that group's and aiter.configs', so it is combined before the CK chain."""
    from ckkb.kb.build.workers import submission_groups as _submission_groups

    def stage(name, **attrs):
        return type(name, (CountingStage,), {"name": name, **attrs})()

    a = stage("a", writes=("instance_lists",))
    b = stage("b", worker_group="g", writes=("aiter_kernels",))
    c = stage("c", reads=("aiter_kernels",), writes=("aiter_config_rows",))
    d = stage("d", reads=("aiter_config_rows",), writes=("aiter_audit_findings",))
    e = stage("e", reads=("aiter_audit_findings", "instance_lists"), writes=("factories",))
    groups = _submission_groups([a, b, c, d, e])
    assert [[s.name for s in g] for g in groups] == [["b"], ["c"], ["d"], ["a"], ["e"]]


def test_parallel_build_streams_work_and_matches_a_serial_build(tmp_path):
    """Enough files to start workers during the inventory: the same rows as a one-process build."""
    from ckkb.kb.build.run import SERIAL_BELOW

    root = tmp_path / "tree"
    root.mkdir()
    for i in range(SERIAL_BELOW + 10):
        (root / f"f{i:03d}.txt").write_text("x" * i)
    rows = {}
    for jobs in (1, 2):
        db = tmp_path / f"kb{jobs}.db"
        JoiningStage.seen = []
        s = build(
            db,
            {"ck": FakeTree(root)},
            stages=[CountingStage(), ListStage(), JoiningStage()],
            jobs=jobs,
        )
        assert s.parsed == 3 * (SERIAL_BELOW + 10)
        conn = sqlite_utils.Database(db)
        rows[jobs] = (
            sorted(conn.execute("select stage, file, message from diagnostics").fetchall()),
            sorted(conn.execute("select name from instance_lists").fetchall()),
        )
    assert rows[1] == rows[2]
    assert (
        len(rows[2][0]) == 2 * (SERIAL_BELOW + 10)
        and ("test.joining", "f073.txt", "730") in rows[2][0]
    )


# ---------------------------------------------------------------- declared stages


def _declared(name, reads=(), writes=(), cost=0.0, **attrs):
    return type(
        name,
        (CountingStage,),
        {"name": name, "reads": reads, "writes": writes, "combine_cost": cost, **attrs},
    )()


def test_build_order_follows_reads_and_writes_then_the_longest_chain():
    from ckkb.kb.stages import build_order

    lists = _declared("lists", writes=("instance_lists",), cost=0.1)
    keys = _declared("keys", reads=("instance_lists",), writes=("instance_keys",), cost=1.0)
    quick = _declared("quick", writes=("factories",), cost=0.5)
    # given in the wrong order: keys needs lists' table; lists heads a 1.1 s chain, quick 0.5 s
    order = [s.name for s in build_order([keys, quick, lists])]
    assert order == ["lists", "keys", "quick"]


def test_build_order_refuses_a_cycle():
    from ckkb.kb.stages import StageError, build_order

    a = _declared("a", reads=("factories",), writes=("instances",))
    b = _declared("b", reads=("instances",), writes=("factories",))
    with pytest.raises(StageError, match="cycle"):
        build_order([a, b])


def test_build_order_refuses_a_read_of_another_kind_of_trees_table():
    """A combine sees its own tree's rows only: an aiter stage declaring a CK table would wait
    for the CK chain and then read no rows (the aiter audit once did)."""
    from ckkb.kb.stages import StageError, build_order

    lists = _declared("lists", writes=("instance_lists",))
    audit = _declared("audit", reads=("instance_lists",), writes=("aiter_audit_findings",))
    audit.tree = "aiter"
    with pytest.raises(StageError, match="audit .aiter trees. reads instance_lists, which lists"):
        build_order([lists, audit])
    audit.tree = "ck"
    assert [s.name for s in build_order([audit, lists])] == ["lists", "audit"]


def test_a_stage_reading_an_undeclared_table_stops_the_build(tree, tmp_db):
    class Peeking(CountingStage):
        name = "test.peeking"

        def combine(self, root, results, ctx):
            ctx.table_rows("instances")
            return StageResult()

    from ckkb.kb.stages import StageError

    with pytest.raises(StageError, match="reads table instances but does not declare it"):
        build(tmp_db, {"ck": tree}, stages=[Peeking()])
    assert not tmp_db.exists()


def test_a_stage_writing_an_undeclared_table_stops_the_build(tree, tmp_db):
    from ckkb.kb.stages import StageError

    with pytest.raises(StageError, match="wrote diagnostics but does not declare it"):
        build(tmp_db, {"ck": tree}, stages=[_declared("test.sneaky", writes=())])


def test_a_stage_module_that_fails_to_load_is_an_error(monkeypatch):
    from ckkb import pipeline

    monkeypatch.setattr(pipeline, "STAGE_MODULES", ("ckkb.extract.templates", "ckkb.no_such"))
    with pytest.raises(pipeline.StageLoadError, match="ckkb.no_such failed to load"):
        pipeline.stages()


def test_every_shipped_stage_declares_what_it_reads_and_writes():
    from ckkb import pipeline
    from ckkb.kb.schema import TABLES

    for s in pipeline.stages():
        assert s.writes and set(s.writes) <= set(TABLES), s.name
        assert set(s.reads) <= set(TABLES), s.name


def test_the_aiter_audit_is_combined_before_the_ck_chain():
    """The audit reads the aiter tree's rows only (a combine sees its own tree's rows): it waits
    on no CK stage, and its files go out before the CK instance lists', so the parent combines
    it while the workers read those, not alone after the CK chain."""
    from ckkb import pipeline
    from ckkb.kb.build.workers import submission_groups
    from ckkb.kb.stages import build_order, dependencies

    stages = build_order(pipeline.stages())
    tree_of = {s.name: s.tree for s in stages}
    assert {tree_of[d] for d in dependencies(stages)["aiter.audit"]} == {"aiter"}
    sent = [s.name for g in submission_groups(stages) for s in g]
    assert sent.index("aiter.audit") < sent.index("ck.instances")

"""Several trees in one knowledge base: which trees a build keeps, scoped reads, rows of each
tree equal to its own single-tree build, the shared cache and unchanged trees copied.

Second method: each tree is also built alone into its own database, and every figure of the
multi-tree database is compared with that database's (plain sqlite3 counts, no scoping)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import pipeline, sources
from ckkb.cli import main
from ckkb.kb import trees as kb_trees
from ckkb.kb.build import build
from ckkb.kb.db import open_db
from ckkb.queries import sql
from tests.conftest import FIXTURES

HPP = (
    "library/src/tensor_operation_instance/gpu/gemm_universal/"
    "device_gemm_xdl_universal_bf16_bf16_bf16/device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
)


@pytest.fixture(scope="module")
def two_trees(tmp_path_factory) -> tuple[Path, Path]:
    """ck_mini (version 1.2.0) and a copy: version 1.3.0, one tuple of its bf16 list dropped."""
    d = tmp_path_factory.mktemp("trees")
    a = d / "ck_a"
    shutil.copytree(FIXTURES / "ck_mini", a)
    b = d / "ck_b"
    shutil.copytree(FIXTURES / "ck_mini", b)
    top = b / "CMakeLists.txt"
    top.write_text(top.read_text().replace("set(version 1.2.0)", "set(version 1.3.0)"))
    hpp = b / HPP
    lines = hpp.read_text().splitlines(keepends=True)
    assert "128, 64, 64, 64" in lines[37]  # the v1 Interwave tuple (line 38)
    hpp.write_text(
        "".join(lines[:37] + lines[38:]).replace(
            "BlockGemmPipelineVersion::v5>,\n", "BlockGemmPipelineVersion::v5>\n", 1
        )
    )
    return a, b


def run(*args: object) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"traceback for ckkb {args}") from r.exception
    return r.exit_code, r.stdout, r.stderr


def counts(db: Path, where: str = "") -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {
            t: conn.execute(f"select count(*) from [{t}] {where}").fetchone()[0]
            for t in ("instances", "instance_lists", "registrations", "availability", "gates")
        }
    finally:
        conn.close()


def test_each_tree_reads_as_its_own_build(two_trees, tmp_path):
    a, b = two_trees
    alone_a, alone_b, both = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "both.db"
    assert run("build", "--db", alone_a, "--ck", a, "--no-aiter")[0] == 0
    assert run("build", "--db", alone_b, "--ck", b, "--no-aiter")[0] == 0
    assert run("build", "--db", both, "--ck", a, "--no-aiter")[0] == 0
    code, out, err = run("build", "--db", both, "--ck", b)  # adds b, keeps a (no aiter: none held)
    assert code == 0, err
    code, out, _ = run("trees", "--db", both, "--json")
    listed = json.loads(out)["trees"]
    assert [(t["name"], t["kind"], t["path"]) for t in listed] == [
        ("1.2.0", "ck", str(a)),
        ("1.3.0", "ck", str(b)),
    ]
    assert all(t["files"] > 0 and t["built"] and t["version"] for t in listed)
    assert set(listed[0]) == {"name", "kind", "path", "version", "commit", "files", "built"}
    # raw rows per source id, against each tree built alone
    assert counts(both, "where source_id = 1") == counts(alone_a)
    assert counts(both, "where source_id = 2") == counts(alone_b)
    assert counts(alone_a)["instances"] - counts(alone_b)["instances"] == 1
    # scoped reads: the default is the first tree; --tree picks the other
    for name, alone in (("1.2.0", alone_a), ("1.3.0", alone_b), (None, alone_a)):
        db = open_db(both, readonly=True, tree=name)
        n = db.conn.execute("select count(*) from instances").fetchone()[0]
        v = db.conn.execute("select count(*) from ck_instance_availability").fetchone()[0]
        db.close()
        ref = sqlite3.connect(alone)
        assert n == ref.execute("select count(*) from instances").fetchone()[0]
        assert v == ref.execute("select count(*) from ck_instance_availability").fetchone()[0]
        ref.close()
    # a query command with --tree answers from that tree
    code, out_a, _ = run("instances", "--db", both, "--dir", "gemm_universal", "--json")
    code, out_b, _ = run(
        "instances", "--db", both, "--tree", "1.3.0", "--dir", "gemm_universal", "--json"
    )
    assert len(json.loads(out_a)["instances"]) - len(json.loads(out_b)["instances"]) == 1


def test_datasette_scoping_equals_the_scoped_connection(two_trees, tmp_path):
    a, b = two_trees
    db = tmp_path / "both.db"
    build(
        db,
        [sources.named_tree(sources.ck_tree(a)), sources.named_tree(sources.ck_tree(b))],
        stages=pipeline.stages(),
        jobs=1,
    )
    answers: dict[tuple[str, str], list] = {}
    for query, params in (
        ("pool_counts", {"dir": "gemm_universal", "dtype": ""}),
        ("why_missing", {"tile": "", "arch": "gfx942"}),  # its own WITH clause is kept
    ):
        text = sql(query)
        for name in ("1.2.0", "1.3.0"):
            scoped = open_db(db, readonly=True, tree=name)
            want = scoped.conn.execute(text, params).fetchall()
            scoped.close()
            plain = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            got = plain.execute(kb_trees.scoped_sql(text), {**params, "tree": name}).fetchall()
            default = plain.execute(kb_trees.scoped_sql(text), {**params, "tree": ""}).fetchall()
            plain.close()
            assert got == want and want
            assert default == answers.get((query, "1.2.0"), got)
            answers[(query, name)] = got
        assert answers[(query, "1.2.0")] != answers[(query, "1.3.0")]


def test_identical_files_are_extracted_once_and_unchanged_trees_copied(two_trees, tmp_path):
    a, b = two_trees
    db = tmp_path / "kb.db"
    first = build(db, [sources.named_tree(sources.ck_tree(a))], stages=pipeline.stages(), jobs=1)
    assert first.parsed == first.files
    both = [sources.named_tree(sources.ck_tree(a)), sources.named_tree(sources.ck_tree(b))]
    s = build(db, both, stages=pipeline.stages(), jobs=1)
    # b differs from a in two files (CMakeLists.txt, the .hpp); every other input is a's
    changed = {"CMakeLists.txt", HPP}
    assert 0 < s.parsed <= sum(1 for _ in changed) * len(pipeline.stages())
    assert s.cached == s.files - s.parsed
    # a third tree with a's bytes at another path: nothing extracted, nothing combined
    c = tmp_path / "ck_c"
    shutil.copytree(a, c)
    three = [*both, sources.named_tree(sources.ck_tree(c), "copy")]
    s3 = build(db, three, stages=pipeline.stages(), jobs=1)
    assert s3.parsed == 0
    assert all(v.get("combine", 0) == 0 for k, v in s3.timings.items() if k != "(build)")
    # ... and nothing copied: the copy reads tree 1's rows (`shared_rows`)
    assert counts(db, "where source_id = 3") == dict.fromkeys(counts(db), 0)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("select rows_of from sources where name = 'copy'").fetchone() == (1,)
        read = {}
        for name in ("1.2.0", "copy"):
            kb_trees.scope(conn, name)
            read[name] = {
                t: conn.execute(f"select count(*) from [{t}]").fetchone()[0] for t in counts(db)
            }
    finally:
        conn.close()
    assert read["copy"] == read["1.2.0"] == counts(db, "where source_id = 1")


def _contents(db: Path) -> dict[str, list[tuple]]:
    """Every table's rows, sorted (a tree's build time aside), and each full-text index's
    matches joined to their rows; FTS5's integrity check holds the index to its table."""
    conn = sqlite3.connect(db)
    try:
        out: dict[str, list[tuple]] = {}
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for name in names:
            if "_fts" in name or name in ("sqlite_stat1", "build_info"):
                continue
            cols = [r[1] for r in conn.execute(f"pragma table_info([{name}])") if r[1] != "built"]
            picked = ", ".join(f"[{c}]" for c in cols)
            out[name] = sorted(conn.execute(f"select {picked} from [{name}]"), key=repr)
        for name in names:
            if name.endswith("_fts"):
                conn.execute(f"insert into [{name}]([{name}]) values ('integrity-check')")
                table = name[: -len("_fts")]
                out[name] = sorted(
                    conn.execute(
                        f"select t.* from [{name}] f join [{table}] t "
                        f"on t.rowid = f.rowid where [{name}] match 'gemm* OR bf16'"
                    ),
                    key=repr,
                )
        return out
    finally:
        conn.close()


def test_adding_trees_extends_the_old_file_to_what_one_build_writes(two_trees, tmp_path):
    """A build that adds trees starts from a copy of the old file (`extend`, ~half the cost of
    adding a tree to the wheel's database): its database is what one build of all the trees
    into an empty file writes, rows, full-text indexes and all."""
    a, b = two_trees
    c = tmp_path / "ck_c"
    shutil.copytree(a, c)
    trees = [
        sources.named_tree(sources.ck_tree(a)),
        sources.named_tree(sources.ck_tree(b)),
        sources.named_tree(sources.ck_tree(c), "copy"),
    ]
    one = tmp_path / "one.db"
    assert not build(one, trees, stages=pipeline.stages(), jobs=1).extended
    steps = tmp_path / "steps.db"
    assert not build(steps, trees[:1], stages=pipeline.stages(), jobs=1).extended
    s2 = build(steps, trees[:2], stages=pipeline.stages(), jobs=1)
    s3 = build(steps, trees, stages=pipeline.stages(), jobs=1)
    assert s2.extended and s3.extended
    assert s3.tables == build(tmp_path / "again.db", trees, stages=pipeline.stages()).tables
    got, want = _contents(steps), _contents(one)
    assert got.keys() == want.keys() and all(want[k] for k in ("instances", "instances_fts"))
    assert got == want
    # dropping a tree is not an addition: that build starts from an empty file
    assert not build(steps, trees[1:], stages=pipeline.stages(), jobs=1).extended


def test_build_keeps_refreshes_and_drops_trees(two_trees, tmp_path):
    a, b = two_trees
    db = tmp_path / "kb.db"
    assert run("build", "--db", db, "--ck", a, "--no-aiter")[0] == 0
    assert run("build", "--db", db, "--ck", f"next={b}")[0] == 0
    assert run("build", "--db", db, "--ck", a)[0] == 0  # same path: refreshed, not added
    names = [t["name"] for t in json.loads(run("trees", "--db", db, "--json")[1])["trees"]]
    assert names == ["1.2.0", "next"]
    code, _, err = run("build", "--db", db, "--drop", "nope")
    assert code == 2 and "--drop nope: no such tree" in err and "1.2.0" in err
    assert run("build", "--db", db, "--drop", "1.2.0")[0] == 0
    names = [t["name"] for t in json.loads(run("trees", "--db", db, "--json")[1])["trees"]]
    assert names == ["next"]
    code, _, err = run("why", "--db", db, "--tree", "1.2.0", "--arch", "gfx942", "--tile", "x")
    assert code == 2 and "no tree named '1.2.0'" in err and "next (ck)" in err
    assert "Traceback" not in err


def test_a_tree_that_vanished_is_named(two_trees, tmp_path):
    a, _ = two_trees
    gone = tmp_path / "gone"
    shutil.copytree(a, gone)
    db = tmp_path / "kb.db"
    assert run("build", "--db", db, "--ck", f"old={gone}", "--no-aiter")[0] == 0
    shutil.rmtree(gone)
    code, _, err = run("build", "--db", db, "--ck", a)
    assert code == 2 and f"tree old (ck): {gone} no longer exists" in err
    assert "--drop old" in err and "Traceback" not in err
    assert run("trees", "--db", db)[0] == 0  # what was stored is still there


def test_another_environments_wheel_is_an_aiter_tree(tmp_path):
    """A knowledge base stores the wheel's aiter by its aiter_meta dir; a database built in
    another environment names that dir, and a rebuild here must read it as the wheel it is."""
    site = tmp_path / "site-packages"
    shutil.copytree(FIXTURES / "aiter_mini" / "aiter", site / "aiter")
    shutil.copytree(
        FIXTURES / "aiter_mini", site / "aiter_meta", ignore=shutil.ignore_patterns("aiter")
    )
    (site / "amd_aiter-9.9.9.dist-info").mkdir()
    tree = sources.aiter_tree(site / "aiter_meta")
    assert tree.package_dir == site / "aiter" and tree.meta_dir == site / "aiter_meta"
    assert tree.version == "9.9.9"


def test_stored_views_keep_trees_apart_when_read_unscoped(two_trees, tmp_path):
    """Datasette's own view pages read the stored views over every tree: their joins must pair
    rows of one tree only, so the whole view is the sum of its per-tree reads."""
    a, b = two_trees
    db = tmp_path / "both.db"
    build(
        db,
        [sources.named_tree(sources.ck_tree(a)), sources.named_tree(sources.ck_tree(b))],
        stages=pipeline.stages(),
        jobs=1,
    )
    plain = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    for view in ("ck_instance_availability", "names_ambiguous"):
        whole = plain.execute(f"select count(*) from {view}").fetchone()[0]
        per_tree = 0
        for name in ("1.2.0", "1.3.0"):
            scoped = open_db(db, readonly=True, tree=name)
            per_tree += scoped.conn.execute(f"select count(*) from {view}").fetchone()[0]
            scoped.close()
        assert whole == per_tree, view
    plain.close()


def test_a_copy_of_a_tree_reads_its_rows_everywhere(two_trees, tmp_path):
    """A tree with an earlier tree's contents holds no rows (`shared_rows`): every reader, the
    scoped connection, Datasette's scoped statements, version_diff and the CLI, must read the
    earlier tree's rows for it. Second method: the same statements over the earlier tree's name,
    and raw counts per source id. Dropping the earlier tree gives the copy rows of its own."""
    a, b = two_trees
    c = tmp_path / "ck_c"
    shutil.copytree(a, c)
    db = tmp_path / "kb.db"
    assert run("build", "--db", db, "--ck", a, "--no-aiter")[0] == 0
    assert run("build", "--db", db, "--ck", f"next={b}")[0] == 0
    assert run("build", "--db", db, "--ck", f"copy={c}")[0] == 0
    assert counts(db, "where source_id = 3") == dict.fromkeys(counts(db), 0)
    assert "copy: the same files as 1.2.0; reads its rows" in run("trees", "--db", db)[1]
    params = {"dir": "gemm_universal", "dtype": "", "layout": "", "tile": "", "arch": "gfx942"}
    params |= {"kind": "", "arch_a": "gfx942", "arch_b": "gfx950"}
    plain = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        for query, own in (
            ("pool", {}),
            ("pool_counts", {}),
            ("why_missing", {}),
            ("gate_census", {"arch": ""}),
            ("arch_diff", {"arch_a": "gfx90a"}),
        ):
            text, p = kb_trees.scoped_sql(sql(query)), params | own
            got = plain.execute(text, {**p, "tree": "copy"}).fetchall()
            assert got == plain.execute(text, {**p, "tree": "1.2.0"}).fetchall(), query
            assert got, query
        vd = sql("version_diff")
        pair = {"arch": "", "dir": "", "dtype": "", "layout": ""}
        diff = plain.execute(vd, {**pair, "from": "copy", "to": "next"}).fetchall()
        assert diff == plain.execute(vd, {**pair, "from": "1.2.0", "to": "next"}).fetchall()
        assert diff and not plain.execute(vd, {**pair, "from": "copy", "to": "1.2.0"}).fetchall()
    finally:
        plain.close()
    for cmd in (("why", "--tile", "256x224x64", "--arch", "gfx942"), ("pool",), ("diagnostics",)):
        want = run(*cmd, "--db", db, "--tree", "1.2.0", "--json")
        assert run(*cmd, "--db", db, "--tree", "copy", "--json") == want and want[0] == 0
    code, out, _ = run("diff", "1.2.0", "copy", "--db", db, "--json")
    assert code == 0 and json.loads(out)["instances"] == {"added": [], "removed": [], "changed": []}
    # the holder dropped: the copy gets rows of its own, and reads the same
    before = run("pool", "--db", db, "--tree", "copy", "--json")
    assert run("build", "--db", db, "--drop", "1.2.0")[0] == 0
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("select rows_of from sources where name = 'copy'").fetchone() == (None,)
    finally:
        conn.close()
    assert run("pool", "--db", db, "--tree", "copy", "--json") == before


def test_a_later_tree_adds_its_rows_to_the_full_text_indexes(two_trees, tmp_path, monkeypatch):
    """One build of two trees: the second tree's rows go into the full-text indexes the first
    tree's rows built, none is rebuilt whole at the end; each index holds every row of its
    table (FTS5's integrity check, counts) and finds each tree's rows (a match per tree)."""
    import sqlite_utils.db

    rebuilt: list[str] = []
    real = sqlite_utils.db.Table.rebuild_fts

    def spy(self):  # noqa: ANN001, ANN202
        rebuilt.append(self.name)
        return real(self)

    monkeypatch.setattr(sqlite_utils.db.Table, "rebuild_fts", spy)
    a, b = two_trees
    db = tmp_path / "kb.db"
    both = [sources.named_tree(sources.ck_tree(a)), sources.named_tree(sources.ck_tree(b))]
    build(db, both, stages=pipeline.stages(), jobs=1)
    assert rebuilt == []
    conn = sqlite3.connect(db)
    try:
        for table in ("instances", "instance_lists", "instance_keys", "name_schemas"):
            fts = f"{table}_fts"
            conn.execute(f"insert into [{fts}]([{fts}]) values ('integrity-check')")
            n = conn.execute(f"select count(*) from [{table}]").fetchone()[0]
            assert conn.execute(f"select count(*) from [{fts}]").fetchone()[0] == n
        found = conn.execute(
            "select t.source_id, count(*) from instances_fts f join instances t "
            "on t.rowid = f.rowid where instances_fts match 'bf16' group by t.source_id"
        ).fetchall()
        by_hand = conn.execute(
            "select source_id, count(*) from instances where "
            "(file like '%bf16%' or list_name like '%bf16%' or template like '%bf16%') "
            "group by source_id"
        ).fetchall()
    finally:
        conn.close()
    assert found == by_hand and len(found) == 2


def test_trees_files_go_out_group_by_group(two_trees, tmp_path):
    """A later tree's files of a stage group are inventoried (and sent to the workers) right
    after the earlier tree's of that group, not after every file of the earlier tree: its CMake
    is in, and combined, while the instance lists are read. Each tree's files of a group stay
    together, the earlier tree's first (their chunks are cut apart)."""
    from ckkb.kb.build import run, workers
    from ckkb.kb.stages import build_order, one_build, register_stages

    a, b = two_trees
    (b / "extra.txt").write_text("a file no stage reads")
    both = [sources.named_tree(sources.ck_tree(a)), sources.named_tree(sources.ck_tree(b))]
    stages = build_order([s for s in pipeline.stages() if s.tree == "ck"])
    register_stages(stages)
    with one_build():
        plan = run._Build(tmp_path / "kb.db", both, stages, 1, False, None)
        try:
            plan.plan()
        finally:
            plan.cache.close()
    trees = {str(a): "a", str(b): "b"}
    order = [(stage, trees[root]) for stage, root, _ in plan.misses]
    first = {k: order.index(k) for k in dict.fromkeys(order)}
    # b's files are twins of a's except the two it changes (CMakeLists.txt, the .hpp)
    assert ("ck.cmake", "b") in first and ("ck.instances", "b") in first
    assert first[("ck.cmake", "b")] < first[("ck.instances", "a")]
    assert first[("ck.instances", "a")] < first[("ck.instances", "b")]
    assert (
        max(i for i, k in enumerate(order) if k == ("ck.instances", "a"))
        < first[("ck.instances", "b")]
    )
    # chunks: one tree's consecutive batches are cut as one list, another tree's apart
    t1 = [(str(a), "x.hpp", ("ck.instances",)), (str(a), "y.hpp", ("ck.instances",))]
    t2 = [(str(b), "x.hpp", ("ck.instances",))]
    assert workers.tree_chunks([(0, t1[:1]), (0, t1[1:])]) == workers.chunks(t1)
    assert workers.tree_chunks([(0, t1), (1, t2)]) == [*workers.chunks(t1), *workers.chunks(t2)]

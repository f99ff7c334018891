"""`ckkb review` and ckkb.versions.aiter_diff on tests/fixtures/aiter_review: a tuning PR that
replaces 9 DSv3 N=2112 K=7168 bpreshuffle rows with faster Kimi-K3 rows under the same keys,
committed as git revisions of a repository made here (see the fixture's README).

Expected figures come from the fixture's CSV files read here with the csv module (`_csv_rows`,
`_expected_retimed`), written apart from ckkb's readers; none is copied from ckkb's output.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from ckkb.cli import main
from tests.conftest import FIXTURES
from tests.unit.test_sarif import SARIF_2_1_0_SUBSET, official_schema

FIX = FIXTURES / "aiter_review"
DSV3 = "aiter/configs/model_configs/dsv3_a8w8_bpreshuffle_tuned_gemm.csv"
KIMI = "aiter/configs/model_configs/a8w8_bpreshuffle_tuned_gemm_kimik3.csv"
DEFAULT = "aiter/configs/a8w8_bpreshuffle_tuned_gemm.csv"
KEY = ("gfx", "cu_num", "M", "N", "K", "q_dtype_w")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "HOME": str(repo)}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=True)
    return out.stdout.decode()


def _commit(repo: Path, overlay: Path, message: str) -> None:
    shutil.copytree(overlay, repo, dirs_exist_ok=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """base, then the PR (head), then a kernel-list renumbering: HEAD~2, HEAD~1, HEAD."""
    r = tmp_path_factory.mktemp("review") / "aiter"
    r.mkdir()
    _git(r, "init", "-q")
    for name in ("base", "head", "renumber"):
        _commit(r, FIX / name, name)
    return r


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _expected_retimed() -> dict[tuple, tuple[float, float, float]]:
    """key -> (old us, new us, old/new): the DSv3 rows the PR removes, against the Kimi-K3
    rows that come back under the same key."""
    old = {tuple(r[c] for c in KEY): float(r["us"]) for r in _csv_rows(FIX / "base" / DSV3)}
    new = {tuple(r[c] for c in KEY): float(r["us"]) for r in _csv_rows(FIX / "head" / KIMI)}
    return {k: (old[k], new[k], round(old[k] / new[k], 4)) for k in old.keys() & new.keys()}


def _review(*args: str) -> dict:
    out = CliRunner().invoke(
        main, ["review", "--db", "/nonexistent/kb.db", *args, "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def _item_key(x: dict) -> tuple:
    k = x["key"]
    return (k["gfx"], str(k["cu_num"]), str(k["M"]), str(k["N"]), str(k["K"]), k["q_dtype_w"])


def test_the_pr_replaces_exactly_nine_rows_with_their_ratios(repo):
    d = _review(f"{repo}@HEAD~2", f"{repo}@HEAD~1")
    expected = _expected_retimed()
    assert len(expected) == 9  # the fixture itself: 9 keys leave DSv3 and come back in Kimi-K3
    assert {k[3:5] for k in expected} == {("2112", "7168")}
    got = {_item_key(x): (x["from"]["us"], x["to"]["us"], x["ratio"]) for x in d["replaced"]}
    assert got == expected
    assert {x["from"]["file"] for x in d["replaced"]} == {DSV3}
    assert {x["to"]["file"] for x in d["replaced"]} == {KIMI}
    assert all(x["ratio"] > 1 for x in d["replaced"])  # every Kimi-K3 row is faster
    # the two rows of the new shape are added rows, not replacements
    assert sorted((x["key"]["M"], x["key"]["N"]) for x in d["rows"]["added"]) == [
        (288, 7168),
        (320, 7168),
    ]
    assert d["rows"]["removed"] == [] and d["merge"]["dropped"] == []
    assert d["kernels"]["renumbered"] == [] and d["kernels"]["rows_kernel_changed"] == []


def test_only_findings_new_in_head_are_reported(repo):
    d = _review(f"{repo}@HEAD~2", f"{repo}@HEAD~1")
    new = {(f["rule"], f["file"], f["line"]) for f in d["findings"]["new"]}
    # kimik3 line 12 has errRatio 0.2 (> the tuner's 0.05); the new file's splitK is 0 in every
    # row. DSv3's errRatio 0.09 row was at line 12 and is at line 3 in HEAD: not new.
    assert new == {("err-ratio-high", KIMI, 12), ("splitk-never-searched", KIMI, 1)}
    base_rows = _csv_rows(FIX / "base" / DSV3)
    head_rows = _csv_rows(FIX / "head" / DSV3)
    assert [i + 2 for i, r in enumerate(base_rows) if r["errRatio"] == "0.09"] == [12]
    assert [i + 2 for i, r in enumerate(head_rows) if r["errRatio"] == "0.09"] == [3]
    assert d["findings"]["base"] > 0 and d["findings"]["not_compared"] == []


def test_repo_option_reads_the_same_revisions(repo):
    a = _review(f"{repo}@HEAD~2", f"{repo}@HEAD~1")
    b = _review("--repo", str(repo), "HEAD~2", "HEAD~1")
    for k in ("findings", "replaced", "merge", "kernels", "rows", "summary"):
        assert a[k] == b[k], k
    assert b["head"]["commit"] == _git(repo, "rev-parse", "HEAD~1").strip()
    assert _git(repo, "status", "--porcelain") == ""  # the checkout is never touched


def test_renumbered_kernel_list_moves_ids_and_rows_name_other_kernels(repo):
    d = _review("--repo", str(repo), "HEAD~1", "HEAD")
    moved = {
        (x["kernel"], tuple(x["from_ids"]), tuple(x["to_ids"]))
        for x in d["kernels"]["renumbered"]
        if x["kind"] == "moved"
    }
    assert moved == {
        ("a8w8_bpreshuffle_256_32_64", (1,), (2,)),
        ("a8w8_bpreshuffle_256_64_128", (2,), (3,)),
        ("a8w8_bpreshuffle_128_16_32", (3,), (4,)),
    }
    reassigned = {x["id"] for x in d["kernels"]["renumbered"] if x["kind"] == "reassigned"}
    assert reassigned == {1, 2, 3}
    assert [x["id"] for x in d["kernels"]["added"]] == [4]
    # every tuned row (in the 3 files HEAD loads) with kernelId 1..3 now names another kernel
    rows = [
        (f, i + 2)
        for f in (DEFAULT, DSV3, KIMI)
        for i, r in enumerate(_csv_rows(_tree_at(repo, "HEAD") / f))
        if r["kernelId"] in ("1", "2", "3")
    ]
    changed = d["kernels"]["rows_kernel_changed"]
    assert sorted((x["file"], x["line"]) for x in changed) == sorted(rows)
    assert all(x["carried"] for x in changed)
    assert {f["rule"] for f in d["findings"]["new"]} == {"kernel-name-stale"}
    assert len(d["findings"]["new"]) == len(rows)


def _tree_at(repo: Path, rev: str) -> Path:
    out = repo.parent / f"tree-{rev.replace('~', '_')}"
    if not out.exists():
        out.mkdir()
        tar = subprocess.run(
            ["git", "-C", str(repo), "archive", rev], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(out)], input=tar.stdout, check=True)
    return out


def test_merge_drops_and_files_never_loaded_are_reported(repo, tmp_path):
    work = tmp_path / "aiter"
    shutil.copytree(_tree_at(repo, "HEAD~1"), work)
    kimi = work / KIMI
    # a slower row under the key of the default file's first row (M=1 N=1280 K=8192)
    dup = "gfx950,256,1,1280,8192,torch.float8_e4m3fn,ck,0,0,7.5,a8w8_bpreshuffle_256_16_64,0.0\n"
    kimi.write_text(kimi.read_text() + dup)
    extra = work / "aiter/configs/a8w8_bpreshuffle_tuned_gemm_extra.csv"  # not in the merged set
    extra.write_text((work / DEFAULT).read_text().splitlines()[0] + "\n" + dup)
    d = _review(str(_tree_at(repo, "HEAD~1")), str(work))
    got = {(x["file"], x["line"], x["reason"]) for x in d["merge"]["dropped"]}
    assert got == {(KIMI, 13, "shadowed"), (extra.relative_to(work).as_posix(), 2, "not-loaded")}
    shadowed = next(x for x in d["merge"]["dropped"] if x["reason"] == "shadowed")
    assert shadowed["winner"]["file"] == DEFAULT and shadowed["winner"]["us"] == 6.5
    # the fixture's core.py raises on duplicate keys (as aiter 2026's does)
    assert shadowed["merge_rule"] == "reject-duplicates-fill" and shadowed["refuses_to_start"]
    new = {(f["rule"], f["file"], f["line"]) for f in d["findings"]["new"]}
    assert ("merge-collision", KIMI, 13) in new
    assert d["replaced"] == []  # the faster default row still stands for that key


def test_sarif_output_reuses_the_audit_writer(repo):
    out = CliRunner().invoke(
        main, ["review", f"{repo}@HEAD~2", f"{repo}@HEAD~1", "--format", "sarif"]
    )
    assert out.exit_code == 0, out.output
    log = json.loads(out.output)
    jsonschema.validate(log, SARIF_2_1_0_SUBSET)
    jsonschema.validate(log, official_schema())
    results = log["runs"][0]["results"]
    rules = [r["ruleId"] for r in results]
    assert rules.count("review-row-replaced") == 9
    assert sorted(r for r in rules if not r.startswith("review-")) == [
        "err-ratio-high",
        "splitk-never-searched",
    ]
    ids = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    assert all(ids[r["ruleIndex"]] == r["ruleId"] for r in results)
    replaced = [r for r in results if r["ruleId"] == "review-row-replaced"]
    locs = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in replaced}
    assert locs == {KIMI}


def test_text_output_names_the_replaced_rows(repo):
    out = CliRunner().invoke(main, ["review", "--repo", str(repo), "HEAD~2", "HEAD~1"])
    assert out.exit_code == 0, out.output
    assert "rows replaced under the same key: 9" in out.output
    assert "M=1 N=2112 K=7168" in out.output and "us 12 -> 10 (1.2x)" in out.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-tree", "other"], "BASE 'no-such-tree': not a tree name"),
        (["{repo}@no-such-rev", "{repo}@HEAD"], "no revision 'no-such-rev'"),
        (["--repo", "{repo}", "HEAD", "v9"], "HEAD {repo}@v9: no revision 'v9'"),
        (["{fixtures}/ck_mini", "{repo}@HEAD"], "is not an aiter tree"),
        (["{fixtures}@HEAD", "{repo}@HEAD"], "is not a git checkout"),
        (["--repo", "{fixtures}", "HEAD", "HEAD"], "is not a git checkout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(repo, tmp_path, args, message):
    plain = tmp_path / "plain"
    plain.mkdir()
    fill = {"repo": str(repo), "fixtures": str(plain if "git checkout" in message else FIXTURES)}
    argv = [a.format(**fill) for a in args]
    out = CliRunner().invoke(main, ["review", "--db", str(tmp_path / "none.db"), *argv])
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert lines[0].startswith("ckkb: error: ") and message.format(**fill) in lines[0], lines
    assert all(line.startswith("ckkb: ") for line in lines)  # error and hint, no traceback
    assert out.exception is None or isinstance(out.exception, SystemExit)


def test_a_path_to_a_revision_without_aiter_is_refused(tmp_path):
    r = tmp_path / "r"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "README").write_text("x\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-q", "-m", "x")
    out = CliRunner().invoke(main, ["review", "--repo", str(r), "HEAD", "HEAD"])
    assert out.exit_code == 2
    assert "not an aiter tree at that revision" in out.output


@pytest.fixture(scope="module")
def kb(repo) -> Path:
    """A knowledge base holding BASE and HEAD of the PR as trees "base" and "head", and a CK
    tree (tests/fixtures/ck_mini) named "ckmini"."""
    from ckkb import pipeline, sources
    from ckkb.kb.build import build

    path = repo.parent / "kb.db"
    trees = [
        sources.named_tree(sources.aiter_tree(_tree_at(repo, "HEAD~2")), "base"),
        sources.named_tree(sources.aiter_tree(_tree_at(repo, "HEAD~1")), "head"),
        sources.named_tree(sources.ck_tree(FIXTURES / "ck_mini"), "ckmini"),
    ]
    build(path, trees, stages=pipeline.stages(), jobs=1)
    return path


def test_trees_of_a_knowledge_base_review_like_their_revisions(repo, kb):
    by_rev = _review(f"{repo}@HEAD~2", f"{repo}@HEAD~1")
    out = CliRunner().invoke(main, ["review", "--db", str(kb), "base", "head", "--format", "json"])
    assert out.exit_code == 0, out.output
    by_tree = json.loads(out.output)
    assert by_tree["base"]["name"] == "base" and by_tree["head"]["name"] == "head"
    for k in ("replaced", "merge", "kernels", "rows"):
        assert by_tree[k] == by_rev[k], k
    new = {(f["rule"], f["file"], f["line"]) for f in by_tree["findings"]["new"]}
    assert new == {(f["rule"], f["file"], f["line"]) for f in by_rev["findings"]["new"]}
    # a tree of the knowledge base against a revision: read two ways, compared one way
    mixed = _review("--db", str(kb), "base", f"{repo}@HEAD~1")
    assert mixed["replaced"] == by_rev["replaced"]
    assert {f["rule"] for f in mixed["findings"]["new"]} == {
        f["rule"] for f in by_rev["findings"]["new"]
    }


def test_aiter_diff_reads_two_scoped_connections(kb):
    from ckkb.kb.db import open_db
    from ckkb.versions.aiter_diff import aiter_diff

    a, b = open_db(kb, readonly=True, tree="base"), open_db(kb, readonly=True, tree="head")
    try:
        d = aiter_diff(a, b)
    finally:
        a.close()
        b.close()
    json.dumps(d)  # JSON-ready
    assert (d["from"]["name"], d["to"]["name"]) == ("base", "head")
    assert d["counts"]["config_rows.retimed"] == len(_expected_retimed()) == 9
    assert d["counts"]["config_rows.added"] == 2 and d["counts"]["config_rows.removed"] == 0
    assert d["config_rows"]["key_columns"]["gemm_a8w8_bpreshuffle"] == [
        "M",
        "N",
        "K",
        "q_dtype_w",
        "cu_num",
        "gfx",
    ]
    assert d["kernels"] == {"added": [], "removed": [], "renumbered": []}


def test_an_unscoped_connection_reading_two_aiter_trees_is_refused(kb):
    import sqlite3

    from ckkb.errors import CkkbError
    from ckkb.versions.aiter_diff import aiter_diff

    conn = sqlite3.connect(kb)
    try:
        with pytest.raises(CkkbError, match=r"several aiter trees \(base, head\)"):
            aiter_diff(conn, conn)
    finally:
        conn.close()


def test_a_ck_tree_is_refused(kb):
    out = CliRunner().invoke(main, ["review", "--db", str(kb), "ckmini", "head"])
    assert out.exit_code == 2
    assert "BASE ckmini: a CK tree; review compares aiter trees" in out.output
    assert "Traceback" not in out.output


def test_an_aiter_checkout_in_a_folder_of_a_larger_repository(tmp_path):
    r = tmp_path / "mono"
    (r / "third_party" / "aiter").mkdir(parents=True)
    _git(r, "init", "-q")
    for name in ("base", "head"):
        _commit(r / "third_party" / "aiter", FIX / name, name)
    d = _review("--repo", str(r / "third_party" / "aiter"), "HEAD~1", "HEAD")
    assert len(d["replaced"]) == 9
    assert (r / "third_party" / "aiter" / KIMI).is_file()  # the working tree is as it was


def _work(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the working tree (not .git/): its bytes and modification time."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def _state(root: Path) -> dict[str, str]:
    """What a checkout, a stash or a reset would change: HEAD, its branch, the reflog, the
    stashes, the staged and unstaged changes, the untracked files."""
    return {
        "head": _git(root, "rev-parse", "HEAD"),
        "branch": _git(root, "symbolic-ref", "HEAD"),
        "reflog": _git(root, "reflog", "--format=%H %gs"),
        "stash": _git(root, "stash", "list"),
        "staged": _git(root, "diff", "--cached"),
        "unstaged": _git(root, "diff"),
        "untracked": _git(root, "ls-files", "--others", "--exclude-standard"),
    }


def test_revisions_are_read_from_git_never_from_the_users_work(tmp_path):
    """The user is midway through editing the checkout (a staged change, an unstaged one, a new
    file): review of two revisions reads what git holds for them, and leaves the work, the
    index, HEAD and its branch exactly as they were."""
    r = tmp_path / "aiter"
    r.mkdir()
    _git(r, "init", "-q")
    for name in ("base", "head"):
        _commit(r, FIX / name, name)
    kimi, dsv3 = r / KIMI, r / DSV3
    kimi.write_text(kimi.read_text().splitlines()[0] + "\n")  # the PR's rows deleted, unstaged
    dsv3.write_text(dsv3.read_text() + "gfx942,80,1,1,1,torch.float8_e4m3fn,ck,0,0,1.0,x,0.0\n")
    _git(r, "add", DSV3)  # a staged change
    (r / "aiter/configs/notes.csv").write_text("mine\n")  # an untracked file
    work, state = _work(r), _state(r)
    assert state["staged"] and state["unstaged"] and state["untracked"]
    for args in (["--repo", str(r), "HEAD~1", "HEAD"], [f"{r}@HEAD~1", f"{r}@HEAD"]):
        d = _review(*args)
        got = {_item_key(x): (x["from"]["us"], x["to"]["us"], x["ratio"]) for x in d["replaced"]}
        assert got == _expected_retimed()  # HEAD's rows, not the working tree's
        assert d["head"]["commit"] == state["head"].strip()
        assert _state(r) == state
        assert _work(r) == work  # no file rewritten, not even with the same bytes

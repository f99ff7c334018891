"""Issue 15 acceptance, aiter half: between the wheel's aiter and aiter main 2026-08 (both in one
knowledge base), `ckkb review` and aiter_diff report the renumbered kernel ids and the re-timed
rows. Figures pinned here come from tests/integration/review_census.py (regular expressions and
the csv module, written apart from ckkb's readers), run in the test, never copied."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import pipeline, sources
from ckkb.cli import main
from ckkb.kb.build import build
from tests.integration import review_census


@pytest.fixture(scope="module")
def two_aiters(tmp_path_factory, shared_trees, wheel_trees) -> Path:
    path = tmp_path_factory.mktemp("two_aiters") / "kb.db"
    trees = [
        sources.named_tree(wheel_trees["aiter"], "wheel"),
        sources.named_tree(sources.aiter_tree(str(shared_trees["aiter2026"])), "aiter2026"),
    ]
    build(path, trees, jobs=2, stages=pipeline.stages())
    return path


@pytest.fixture(scope="module")
def reviewed(two_aiters) -> dict:
    out = CliRunner().invoke(
        main, ["review", "--db", str(two_aiters), "wheel", "aiter2026", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def _roots(wheel_trees, shared_trees) -> tuple[Path, Path, Path, Path]:
    w = wheel_trees["aiter"]
    new = Path(shared_trees["aiter2026"])
    return w.package_dir, w.meta_dir, new / "aiter", new


def test_renumbered_kernel_ids_match_the_census(reviewed, wheel_trees, shared_trees):
    _, wmeta, _, new = _roots(wheel_trees, shared_trees)
    census = review_census.renumbering(wmeta / "csrc", new / "csrc")
    # census on aiter-2026-08-22: 3 kernels moved and 3 ids reassigned, all in the MoE
    # blockscale lists of ck_gemm_moe_2stages_codegen
    assert (len(census["moved"]), len(census["reassigned"])) == (3, 3)
    items = reviewed["kernels"]["renumbered"]
    moved = {
        (Path(x["file"]).parent.name, x["list"], tuple(x["from_ids"]), tuple(x["to_ids"]))
        for x in items
        if x["kind"] == "moved"
    }
    assert moved == {(d, lst, a, b) for d, lst, _, a, b in census["moved"]}
    reassigned = {
        (Path(x["file"]).parent.name, x["list"], x["id"])
        for x in items
        if x["kind"] == "reassigned"
    }
    assert reassigned == census["reassigned"]
    # no list a tuner indexes with kernelId was renumbered, so no tuned row names another kernel
    assert reviewed["kernels"]["rows_kernel_changed"] == []


def test_retimed_rows_match_the_census(reviewed, wheel_trees, shared_trees):
    wpkg, _, npkg, _ = _roots(wheel_trees, shared_trees)
    key = ("cu_num", "M", "N", "K")
    old = review_census.first_by_key([wpkg / "configs/a4w4_blockscale_tuned_gemm.csv"], key)
    new_files = [npkg / "configs/a4w4_blockscale_tuned_gemm.csv"]
    new_files += sorted((npkg / "configs/model_configs").glob("*a4w4_blockscale_tuned_gemm*"))
    new = review_census.fastest_by_key(new_files, key)
    retimed = {k for k in old.keys() & new.keys() if old[k] != new[k]}
    # census on aiter-2026-08-22: gemm_a4w4 has 116 re-timed keys, 610 added, none removed
    assert (len(retimed), len(new.keys() - old.keys()), len(old.keys() - new.keys())) == (
        116,
        610,
        0,
    )
    got = [x for x in reviewed["replaced"] if x["op"] == "gemm_a4w4"]
    assert {tuple(str(x["key"][c]) for c in key) for x in got} == retimed
    for x in got:
        k = tuple(str(x["key"][c]) for c in key)
        assert (x["from"]["us"], x["to"]["us"]) == (old[k], new[k])
        assert x["ratio"] == round(old[k] / new[k], 4)
    added = [x for x in reviewed["rows"]["added"] if x["op"] == "gemm_a4w4"]
    assert len(added) == 610


def test_a_sample_of_replaced_rows_reads_back_from_the_files(reviewed, wheel_trees, shared_trees):
    """Every op's first re-timed rows: the lines cited hold the key and the times reported."""
    wpkg, _, npkg, _ = _roots(wheel_trees, shared_trees)
    seen: dict[str, int] = {}
    sample = []
    for x in reviewed["replaced"]:
        if seen.get(x["op"], 0) < 3:
            seen[x["op"]] = seen.get(x["op"], 0) + 1
            sample.append(x)
    assert len(sample) >= 10
    for x in sample:
        for side, pkg in (("from", wpkg), ("to", npkg)):
            path = pkg / x[side]["file"].removeprefix("aiter/")
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            header, row = rows[0], rows[x[side]["line"] - 1]
            cells = dict(zip(header, row, strict=True))
            assert float(cells["us"]) == x[side]["us"]
            for c, v in x["key"].items():
                if c in cells and v not in (None, ""):
                    assert cells[c].strip() == str(v), (x, c)


def test_aiter_diff_over_connections_agrees_with_review(two_aiters, reviewed):
    from ckkb.kb.db import open_db
    from ckkb.versions.aiter_diff import aiter_diff

    a = open_db(two_aiters, readonly=True, tree="wheel")
    b = open_db(two_aiters, readonly=True, tree="aiter2026")
    try:
        d = aiter_diff(a, b)
    finally:
        a.close()
        b.close()
    assert (d["from"]["name"], d["to"]["name"]) == ("wheel", "aiter2026")
    assert d["kernels"]["renumbered"] == reviewed["kernels"]["renumbered"]
    assert d["config_rows"]["retimed"] + d["config_rows"]["changed"] == reviewed["replaced"]
    assert d["counts"]["config_rows.added"] == len(reviewed["rows"]["added"])

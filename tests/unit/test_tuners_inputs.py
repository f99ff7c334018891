"""An incremental build gives the answer a fresh build gives when a file whose presence the
tuners stage checks is added or removed (issue 13, item 4): the stage used to ask the file
system at combine time about files no stage lists (a tuner's import landing at the tree root,
a default config path outside configs/, what model_configs/ holds besides CSVs), so the tree's
fingerprint did not change and the old rows were copied. Now those files are inputs (or, for
modules, a tuner's import is resolved among the build's modules only). The tree is a copy of
tests/fixtures/aiter_2026_pick, changed as each test says. Each test failed before."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ckkb import pipeline, sources
from ckkb.kb.build import build
from tests.overlays import FIXTURES

TUNER = "csrc/ck_gemm_pick/gemm_pick_tune.py"


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "aiter_2026_pick", root)
    return root


def _row(root: Path, db: Path, fresh: bool = False) -> dict:
    """gemm_pick's aiter_runtime_configs row after a build (incremental unless fresh)."""
    if fresh:
        db.unlink(missing_ok=True)
        shutil.rmtree(f"{db}.cache", ignore_errors=True)
        db = db.with_name("fresh-" + db.name)
    build(db, {"aiter": sources.aiter_tree(str(root))}, stages=pipeline.stages(), jobs=1)
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    r = dict(conn.execute("select * from aiter_runtime_configs where op = 'gemm_pick'").fetchone())
    conn.close()
    return r


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_default_config_outside_configs_added_and_removed(tmp_path):
    root = _tree(tmp_path)
    _edit(root / "aiter/jit/core.py", "/aiter/configs/pick_tuned_gemm.csv", "/aiter/ops/pick.csv")
    db = tmp_path / "kb.db"
    assert _row(root, db)["default_exists"] == 0
    (root / "aiter/ops").mkdir()
    shutil.copy(root / "aiter/configs/pick_tuned_gemm.csv", root / "aiter/ops/pick.csv")
    assert _row(root, db)["default_exists"] == 1  # was 0: the old rows were copied
    (root / "aiter/ops/pick.csv").unlink()
    assert _row(root, db)["default_exists"] == 0


def test_model_config_that_is_not_a_csv_added(tmp_path):
    root = _tree(tmp_path)
    db = tmp_path / "kb.db"
    assert json.loads(_row(root, db)["model_configs"]) == []
    models = root / "aiter/configs/model_configs"
    models.mkdir()
    (models / "big_pick_tuned_gemm.csv.old").write_text("M,N,K\n")
    # core.py's glob (model_configs/*pick_tuned_gemm*) takes any file
    got = json.loads(_row(root, db)["model_configs"])
    assert got == ["aiter/configs/model_configs/big_pick_tuned_gemm.csv.old"]


@pytest.mark.parametrize("where", ["top_lists.py", "csrc/ck_gemm_pick/top_lists.py"])
def test_imported_module_added_incremental_is_fresh(tmp_path, where):
    """A module at the tree root is not one of the build's modules: never found (before, a fresh
    build found it and an incremental one did not); one beside the tuner is found either way."""
    root = _tree(tmp_path)
    line = "from gemm_pick_common import candidate_kernels_dict\n"
    _edit(root / TUNER, line, line + "from top_lists import extra_kernels_list\n")
    db = tmp_path / "kb.db"
    before = json.loads(_row(root, db)["kernel_list_candidates"])
    assert [c for c in before if c[1] == "extra_kernels_list"] == []
    (root / where).write_text("extra_kernels_list = {}\n")
    incremental = json.loads(_row(root, db)["kernel_list_candidates"])
    assert incremental == json.loads(_row(root, db, fresh=True)["kernel_list_candidates"])
    found = [c for c in incremental if c[1] == "extra_kernels_list"]
    assert found == ([] if where == "top_lists.py" else [[where, "extra_kernels_list"]])

"""Integration tests read the installed amd-aiter wheel; one knowledge base is built per session."""

from __future__ import annotations

import importlib.util

import pytest

from ckkb import pipeline, sources
from ckkb.kb.build import build


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def wheel_trees():
    if importlib.util.find_spec("aiter_meta") is None:
        pytest.fail("amd-aiter wheel not installed: `pip install -e .[test]` installs it")
    return {"ck": sources.ck_tree(None), "aiter": sources.aiter_tree(None)}


@pytest.fixture(scope="session")
def wheel_db(tmp_path_factory, wheel_trees):
    """The knowledge base of the default tree, built once for all integration tests."""
    path = tmp_path_factory.mktemp("wheel") / "ckkb.db"
    build(path, wheel_trees, jobs=2, stages=pipeline.stages())
    return path


@pytest.fixture(scope="session")
def shared_trees(tmp_path_factory):
    """The real trees of ../shared/trees/, unpacked once per test run: {"ck2024": CK root,
    "aiter2026": aiter root}. Never written to."""
    import tarfile

    from tests.conftest import SHARED

    archives = {
        "ck2024": ("ck-2024-10-23.tar.xz", "composable_kernel"),
        "aiter2026": ("aiter-2026-08-22.tar.xz", "aiter"),
    }
    out = {}
    base = tmp_path_factory.mktemp("shared_trees")
    for name, (archive, root) in archives.items():
        path = SHARED / "trees" / archive
        if not path.is_file():
            pytest.fail(f"{path} missing: CI and developers have ../shared/trees")
        with tarfile.open(path) as tar:
            tar.extractall(base / name, filter="data")
        out[name] = base / name / root
    return out


@pytest.fixture(scope="session")
def shared_dbs(tmp_path_factory, shared_trees, wheel_trees):
    """Knowledge bases of the shared trees, built once: the 2024-10 CK tree alone, and aiter
    2026-08 with the wheel's CK (its CK submodule is empty)."""
    base = tmp_path_factory.mktemp("shared_dbs")
    dbs = {"ck2024": base / "ck2024.db", "aiter2026": base / "aiter2026.db"}
    build(
        dbs["ck2024"],
        {"ck": sources.ck_tree(str(shared_trees["ck2024"]))},
        jobs=2,
        stages=pipeline.stages(),
    )
    trees = {"ck": wheel_trees["ck"], "aiter": sources.aiter_tree(str(shared_trees["aiter2026"]))}
    build(dbs["aiter2026"], trees, jobs=2, stages=pipeline.stages())
    return dbs

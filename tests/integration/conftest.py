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

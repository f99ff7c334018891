"""Shared fixtures: small hand-written trees
(tests/fixtures/) and tiny real databases in tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared"
SAMPLES = SHARED / "ckprofiler_samples"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def tmp_db(tmp_path: Path) -> Path:
    return tmp_path / "kb.db"


@pytest.fixture
def copy_tree(tmp_path: Path):
    """Copy a fixture tree into tmp_path (so a test may damage it) and return the copy."""

    def _copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst, symlinks=True)
        return dst

    return _copy


@pytest.fixture(autouse=True)
def _no_env_db(monkeypatch):
    monkeypatch.delenv("CKKB_DB", raising=False)
    monkeypatch.setenv("CKKB_JOBS", os.environ.get("CKKB_TEST_JOBS", "1"))

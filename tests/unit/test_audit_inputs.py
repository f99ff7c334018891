"""Every file the audit's MoE evaluation reads is an input of the build: a change to one of them
alone is rebuilt (no stale rows), and a tree that differs only there is never a reused copy."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ckkb import pipeline, sources
from ckkb.kb.build import build

MOE = Path(__file__).parent.parent / "fixtures" / "aiter_2026_moe"

# (file, text, replacement): each edit changes which kernels the getters build for the rows
EDITS = [
    # per_Token becomes 3: every name the getters build says Quant3, the rows' say Quant2
    ("csrc/include/aiter_enum.h", "    per_Token,", "    per_Group,\n    per_Token,"),
    # gfx942's fp8 becomes float8_e4m3fn: the fnuz rows of cu_num 304 have no dtype name
    ("aiter/utility/dtypes.py", '"gfx942": {"fp8": torch.float8_e4m3fnuz}', '"gfx942": {}'),
    # no name for fp8 at all: no fp8 row is checked
    ("aiter/ops/moe_op.py", '    dtypes.fp8: "f8",\n', ""),
    # the package no longer re-exports moe_op: the tuner's `from aiter import dtype2str_dict`
    # finds nothing
    ("aiter/__init__.py", "    from .ops.moe_op import *  # noqa: F403", "    pass"),
]


def _answer(db_path: Path, source_id: int = 1) -> tuple[list[tuple], list[tuple]]:
    """The fmoe rows' statuses and the kernel findings of one tree."""
    db = sqlite3.connect(db_path)  # unscoped: every tree's rows, picked by source id
    try:
        rows = [
            tuple(r)
            for r in db.execute(
                "select line, [column], status from aiter_row_kernels "
                "where op = 'fmoe' and source_id = ? order by line, [column]",
                [source_id],
            )
        ]
        found = [
            tuple(r)
            for r in db.execute(
                "select rule, line from aiter_audit_findings "
                "where rule like 'kernel-%' and source_id = ? order by rule, line",
                [source_id],
            )
        ]
    finally:
        db.close()
    return rows, found


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    p = root / rel
    text = p.read_text()
    assert old in text, (rel, old)
    p.write_text(text.replace(old, new))


@pytest.mark.parametrize("rel,old,new", EDITS, ids=[e[0] for e in EDITS])
def test_a_change_to_a_file_the_moe_check_reads_is_rebuilt(tmp_path, rel, old, new):
    tree = tmp_path / "aiter"
    shutil.copytree(MOE, tree)
    db = tmp_path / "kb.db"
    stages = pipeline.stages()
    build(db, {"aiter": sources.aiter_tree(str(tree))}, stages=stages, jobs=1)
    before = _answer(db)
    _edit(tree, rel, old, new)
    build(db, {"aiter": sources.aiter_tree(str(tree))}, stages=stages, jobs=1)
    after = _answer(db)
    fresh = tmp_path / "fresh.db"
    build(fresh, {"aiter": sources.aiter_tree(str(tree))}, stages=stages, jobs=1)
    assert after == _answer(fresh)  # the incremental build answers as a full one
    assert after != before  # and the edit did change the answer


def test_a_tree_differing_only_in_such_a_file_is_not_a_reused_copy(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(MOE, a)
    shutil.copytree(MOE, b)
    rel, old, new = EDITS[1]
    _edit(b, rel, old, new)
    db = tmp_path / "kb.db"
    stages = pipeline.stages()
    build(db, [sources.named_tree(sources.aiter_tree(str(a)), "a")], stages=stages, jobs=1)
    both = [
        sources.named_tree(sources.aiter_tree(str(a)), "a"),
        sources.named_tree(sources.aiter_tree(str(b)), "b"),
    ]
    build(db, both, stages=stages, jobs=1)
    alone = tmp_path / "b.db"
    build(alone, [sources.named_tree(sources.aiter_tree(str(b)), "b")], stages=stages, jobs=1)
    assert _answer(db, 2) == _answer(alone, 1) != _answer(db, 1)
    fps = sqlite3.connect(db)
    try:
        got = [r[0] for r in fps.execute("select fingerprint from sources order by id")]
    finally:
        fps.close()
    assert len(set(got)) == 2


def test_the_check_reads_no_file_outside_the_inputs():
    """A module the stage does not declare is never read: rows that need it are not checked,
    with the reason (never an answer from a file the build did not hash)."""
    from ckkb.audit.inputs import Readable, audit_inputs
    from ckkb.audit.moe_choice import MoeChoice

    rels = {p.as_posix() for p in audit_inputs(MOE)}
    assert {"aiter/utility/dtypes.py", "aiter/ops/moe_op.py", "aiter/__init__.py"} <= rels
    assert "csrc/include/aiter_enum.h" in rels
    getters = [
        ("csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py", n)
        for n in ("get_gemm1_kernels_list", "get_gemm2_kernels_list")
    ]
    tuner = "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py"
    row = {
        "cu_num": 304,
        "token": 16,
        "q_dtype_a": "torch.float8_e4m3fnuz",
        "q_type": "QuantType.per_Token",
        "act_type": "ActivationType.Gelu",
        "doweight_stage1": 0,
    }
    full = Readable(MOE)
    ok = MoeChoice(MOE, tuner, getters, MOE / "aiter", full).row_names(list(row), row)
    assert ok.reason is None and ok.names

    def no_dtypes(p: Path) -> bool:
        return full(p) and p.name != "dtypes.py"

    got = MoeChoice(MOE, tuner, getters, MOE / "aiter", no_dtypes).row_names(list(row), row)
    assert got.reason is not None and not got.names

"""The parts of `ckkb diff` that make a whole-tree diff cheap: evidence chains read set-wise for
every (instance, arch) at once (ckkb.queries.evidence.evidence_of, one chain per list, status
and gate), the JSON written one item per line, and the text's counts before its items.

Second methods: each chain is checked against the same evaluator run one instance at a time (no
sharing) and its `available` against the ck_instance_availability view (SQL written apart from
the Python evaluator); the one-line JSON against json.loads; the text's counts against the JSON
answer counted here.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb import pipeline
from ckkb.cli import diff_text, main
from ckkb.cli.output import emit_json
from ckkb.kb.build import build
from ckkb.kb.db import open_db
from ckkb.queries.evidence import chain, dress, evidence_of, facts
from ckkb.sources import ck_tree
from tests.overlays import fork_tree
from tests.unit import test_versions_diff as diff_tests

kb, trees, answer = diff_tests.kb, diff_tests.trees, diff_tests.answer  # its fixtures, its CLI


@pytest.fixture(scope="module")
def fork_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ck_mini with the ck_fork overlay: an #if inside an instance list drops entries per arch
    (instance_gates)."""
    path = tmp_path_factory.mktemp("fork") / "fork.db"
    tree = fork_tree(tmp_path_factory.mktemp("fork_tree"))
    build(path, {"ck": ck_tree(tree)}, stages=pipeline.stages(), jobs=1)
    return path


@pytest.mark.parametrize("tree", ["old", "new", "fork"])
def test_evidence_of_equals_each_instance_read_alone(kb: Path, fork_db: Path, tree: str) -> None:
    db = open_db(
        fork_db if tree == "fork" else kb, readonly=True, tree=None if tree == "fork" else tree
    )
    try:
        conn = db.conn
        archs = [r[0] for r in conn.execute("SELECT arch FROM tree_archs WHERE evaluated = 1")]
        rows = [
            dict(zip([d[0] for d in c.description], r, strict=True))
            for c in [
                conn.execute(
                    "SELECT i.id, i.template, i.dir, i.file, i.line, i.list_name, i.list_id, "
                    "l.comment AS list_comment, i.status, i.reason FROM instances i "
                    "LEFT JOIN instance_lists l ON l.id = i.list_id"
                )
            ]
            for r in c.fetchall()
        ]
        assert len(rows) >= 10 and len(archs) >= 2
        got = evidence_of(conn, {a: [r["id"] for r in rows] for a in archs})
        view = {
            (i, a): bool(v)
            for i, a, v in conn.execute(
                "SELECT instance_id, arch, max(available) FROM ck_instance_availability "
                "GROUP BY instance_id, arch"
            )
        }
        flips: Counter[bool] = Counter()
        layers: set[str] = set()
        for r in rows:
            alone = facts(conn, [r], archs)  # this instance's facts only: nothing shared
            for a in archs:
                expected = chain(dress(r, alone, a, details=False))
                assert got[(r["id"], a)] == expected, (r["id"], a)
                assert expected["available"] == view.get((r["id"], a), False), (r["id"], a)
                flips[expected["available"]] += 1
                layers |= {x["layer"] for x in expected["reasons"]}
        assert flips[True] and flips[False]  # both answers occur
        if tree == "fork":
            assert "preprocessor" in layers  # the list-internal #if
        else:
            assert layers >= {"registration", "commented_out", "build"}
    finally:
        db.close()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_one_line_items_is_the_same_json(obj: Any) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        emit_json(obj, one_line_items=True)
    text = out.getvalue()
    assert json.loads(text) == obj
    assert text.endswith("\n")


def test_each_item_of_a_list_is_one_line() -> None:
    obj = {"a": {"added": [{"x": [1, 2], "y": {"z": None}}, {"x": []}], "removed": []}, "n": 1}
    out = io.StringIO()
    with redirect_stdout(out):
        emit_json(obj, one_line_items=True)
    assert out.getvalue().splitlines() == [
        "{",
        '  "a": {',
        '    "added": [',
        '      {"x": [1, 2], "y": {"z": null}},',
        '      {"x": []}',
        "    ],",
        '    "removed": []',
        "  },",
        '  "n": 1',
        "}",
    ]


def test_text_counts_first_and_long_parts_are_counted_not_listed(
    kb: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    res = answer(kb, "old", "new")
    inst = res["instances"]
    expected: Counter[tuple[str, str, str]] = Counter()
    for change, items in inst.items():
        for i in items:
            expected[(i["dir"], i["dtype"], change)] += 1
    assert sum(expected.values()) >= 5
    rows = diff_text.by_dir(inst)
    assert {
        (d, t, c): n
        for d, t, *ns in rows
        for c, n in zip(("added", "removed", "changed"), ns, strict=True)
        if n
    } == dict(expected)
    flips = Counter((a["arch"], a["to"]["available"]) for i in inst["changed"] for a in i["archs"])
    assert {(a, True): g for a, g, _ in diff_text.by_arch(inst["changed"]) if g} == {
        k: n for k, n in flips.items() if k[1]
    }
    monkeypatch.setattr(diff_text, "LIST_AT", 1)
    r = CliRunner().invoke(main, ["diff", "old", "new", "--db", str(kb)])
    assert r.exit_code == 0, r.output
    n = sum(map(len, inst.values()))
    assert f"{n} instance items, not listed (more than 1): narrow with --dir" in r.output
    assert "\n~ " not in r.output and "\n+ Device" not in r.output  # no item lines
    assert "gemm_universal" in r.output and "changed, by arch" in r.output

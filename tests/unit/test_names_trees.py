"""A printed name is read against the schemas of the tree it came from: `ckkb ingest --tree`,
`ckkb parse --tree`, or chosen per name by which tree's schemas read it exactly."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ckkb import names, pipeline, sources
from ckkb.cli import main
from ckkb.errors import CkkbError
from ckkb.extract import typestrings
from ckkb.kb import db as kbdb
from ckkb.kb.build import build
from ckkb.kb.ingest import ingest
from ckkb.queries.name_trees import NameReader, SchemaTree
from tests.conftest import FIXTURES, SAMPLES

# 001.txt (2022-12) prints these forms; ck_2022's schemas read them, ck_mini's (1.2.0) do not
XDL_2022 = (
    "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> "
    "NumPrefetch: 1, LoopScheduler: Interwave, PipelineVersion: v1"
)
XDL_MINI = "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2>"
CSHUFFLE_2022 = (
    "DeviceGemm_Xdl_CShuffle<256, 256, 128, 32, 8, 2> LoopScheduler: Default, PipelineVersion: v1"
)


@pytest.fixture(scope="module")
def two_trees(tmp_path_factory) -> Path:
    """A knowledge base with two CK trees, ck_mini (1.2.0, built first) and ck_2022 (0.2.0), and
    an aiter tree (aiter_mini)."""
    path = tmp_path_factory.mktemp("trees") / "kb.db"
    held = [sources.named_tree(sources.ck_tree(FIXTURES / t)) for t in ("ck_mini", "ck_2022")]
    held.append(sources.named_tree(sources.aiter_tree(FIXTURES / "aiter_mini")))
    build(path, held, stages=pipeline.stages(), jobs=1)
    return path


def _db(path: Path):
    return kbdb.open_db(path, readonly=True)


def test_each_name_is_read_by_the_tree_whose_schemas_read_it_exactly(two_trees):
    db = _db(two_trees)
    reader = NameReader.of(db)
    assert [t.name for t in reader.trees] == ["1.2.0", "0.2.0"]  # build order
    # ck_2022 defines two GetTypeString()s (grep -rc "GetTypeString() const" its include/)
    assert sorted(s.device_op for s in reader.trees[1].schemas.values()) == [
        "DeviceGemmXdl",
        "DeviceGemm_Xdl_CShuffle",
    ]
    assert "DeviceGemmXdl" in {s.device_op for s in reader.trees[0].schemas.values()}
    p, tree = reader.read(XDL_2022)
    assert (p.schema, p.op, tree) == ("matched", "DeviceGemmXdl", "0.2.0")
    assert (p.fields["NumPrefetch"], p.fields["LoopSched"], p.fields["K0PerBlock"]) == (
        1,
        "Interwave",
        4,
    )
    p, tree = reader.read(XDL_MINI)  # both print this start; the first tree reads it exactly
    assert (p.schema, tree) == ("matched", "1.2.0")
    p, tree = reader.read(CSHUFFLE_2022)
    assert (p.schema, p.device_op, tree) == ("matched", "DeviceGemm_Xdl_CShuffle", "0.2.0")
    # read by neither exactly: the first tree's reading, still under the op's own name
    p, tree = reader.read("DeviceGemmXdl_C_Shuffle<256, 128, 128, 32, 8, 2>")
    assert (p.schema, p.op, p.fields, tree) == ("generic", "DeviceGemmXdl_C_Shuffle", {}, "1.2.0")
    # one tree named: its schemas only
    p, tree = NameReader.of(db, "1.2.0").read(XDL_2022)
    assert (p.schema, p.op, tree) == ("generic", "DeviceGemmXdl", "1.2.0")
    p, tree = NameReader.of(db, "0.2.0").read(XDL_MINI)
    assert (p.schema, tree) == ("generic", "0.2.0")
    # a tree of another kind names no release of CK: each name is still read by its own tree
    assert [t.name for t in NameReader.of(db, "aiter_mini").trees] == ["1.2.0", "0.2.0"]
    assert NameReader.of(db, "aiter_mini").read(XDL_2022)[1] == "0.2.0"
    with pytest.raises(CkkbError) as e:
        NameReader.of(db, "ck-2021")
    assert "no tree named 'ck-2021'" in e.value.message
    assert "1.2.0 (ck), 0.2.0 (ck), aiter_mini (aiter)" in e.value.message


def _names(path: Path, chosen: bool = True) -> dict[str, tuple[str, str, str | None]]:
    """name -> (op, schema, tree) of race_names: each name's chosen reading (chosen=False: the
    readings only --tree asked for)."""
    conn = sqlite3.connect(path)
    try:
        return {
            n: (op, schema, tree)
            for n, op, schema, tree in conn.execute(
                "select name, op_template, schema, tree from race_names where chosen = ?",
                [int(chosen)],
            )
        }
    finally:
        conn.close()


def _read_as(path: Path, name: str) -> dict[str, tuple[str, str]]:
    """source log file name -> (name_schema, name_tree) of its results named `name`, as the
    race_results_named view joins them."""
    conn = sqlite3.connect(path)
    try:
        got = conn.execute(
            "select r.source_file, n.name_schema, n.name_tree from race_results_named n "
            "join races r on r.id = n.race_id where n.name = ?",
            [name],
        ).fetchall()
    finally:
        conn.close()
    out = {Path(f).name: (schema, tree) for f, schema, tree in got}
    assert len(out) == len({f for f, _, _ in got})  # one reading per log
    return out


def _distinct(pattern: str, path: Path) -> int:
    """Distinct names of `path` that start with `pattern`: a grep apart from ckkb's reader."""
    found = set()
    for line in path.read_text().splitlines():
        m = re.search(r"GB/s,\s*(" + pattern + r".*?)\s*$", line)
        if m:
            found.add(m.group(1))
    return len(found)


def test_ingest_reads_each_name_with_its_tree(two_trees, tmp_path):
    path = tmp_path / "kb.db"
    path.write_bytes(two_trees.read_bytes())
    s = ingest(path, [SAMPLES / "001.txt"])
    assert s.races_added == 1 and not s.errors
    got = _names(path)
    # distinct names by a regex apart from ckkb.logs (_distinct); the same figures from the shell:
    # grep -oE "GB/s, DeviceGemmXdl<.*" 001.txt | sed 's/ *$//' | sort -u | wc -l  -> 51 (48)
    n_xdl = _distinct(r"DeviceGemmXdl<", SAMPLES / "001.txt")
    n_cs = _distinct(r"DeviceGemm_Xdl_CShuffle<", SAMPLES / "001.txt")
    assert (n_xdl, n_cs) == (51, 48)
    by = {}
    for op, schema, tree in got.values():
        by[(op, schema, tree)] = by.get((op, schema, tree), 0) + 1
    # DeviceGemmDl (printed on a 'does not support' line) has no schema in either tree
    assert by == {
        ("DeviceGemmXdl", "matched", "0.2.0"): n_xdl,
        ("DeviceGemm_Xdl_CShuffle", "matched", "0.2.0"): n_cs,
        ("DeviceGemmDl", "generic", "1.2.0"): 1,
    }
    fields = json.loads(
        sqlite3.connect(path)
        .execute("select fields from race_results_named where name = ?", [XDL_2022])
        .fetchone()[0]
    )
    assert fields["K0PerBlock"] == 4 and fields["LoopSched"] == "Interwave"


def test_ingest_tree_names_the_release(two_trees, tmp_path):
    path = tmp_path / "kb.db"
    path.write_bytes(two_trees.read_bytes())
    ingest(path, [SAMPLES / "001.txt"], tree="1.2.0")
    got = _names(path, chosen=False)
    assert {t for _, _, t in got.values()} == {"1.2.0"} and _names(path) == {}
    assert got[XDL_2022] == ("DeviceGemmXdl", "generic", "1.2.0")
    # the same name read against another tree is another reading; neither replaces the other
    ingest(path, [SAMPLES / "012.txt"], tree="0.2.0")
    after = _names(path, chosen=False)
    assert after[XDL_2022] == ("DeviceGemmXdl", "matched", "0.2.0")
    assert _read_as(path, XDL_2022) == {
        "001.txt": ("generic", "1.2.0"),
        "012.txt": ("matched", "0.2.0"),
    }
    # no --tree: the name's chosen reading (0.2.0 reads it exactly), stored beside the others
    ingest(path, [SAMPLES / "013.txt"])
    assert _names(path)[XDL_2022] == ("DeviceGemmXdl", "matched", "0.2.0")
    assert _read_as(path, XDL_2022)["013.txt"] == ("matched", "0.2.0")
    assert _read_as(path, XDL_2022)["001.txt"] == ("generic", "1.2.0")


def test_a_name_two_trees_read_differently_keeps_each_races_reading(two_trees, tmp_path):
    """race_names was keyed by name alone: a later `ingest --tree` replaced the reading an
    earlier race's results joined (001.txt, ingested against 1.2.0, then read as 0.2.0's)."""
    path = tmp_path / "kb.db"
    path.write_bytes(two_trees.read_bytes())
    ingest(path, [SAMPLES / "012.txt"], tree="0.2.0")
    ingest(path, [SAMPLES / "001.txt"], tree="1.2.0")
    ingest(path, [SAMPLES / "013.txt"], tree="0.2.0")
    read = _read_as(path, XDL_2022)
    assert read == {
        "012.txt": ("matched", "0.2.0"),
        "001.txt": ("generic", "1.2.0"),
        "013.txt": ("matched", "0.2.0"),
    }
    conn = sqlite3.connect(path)
    try:
        fields = {
            Path(f).name: json.loads(x)
            for f, x in conn.execute(
                "select r.source_file, n.fields from race_results_named n "
                "join races r on r.id = n.race_id where n.name = ?",
                [XDL_2022],
            )
        }
        # every result joins exactly one reading
        counts = conn.execute(
            "select (select count(*) from race_results), (select count(*) from race_results_named),"
            " (select count(*) from race_results_named where name_schema is null)"
        ).fetchone()
    finally:
        conn.close()
    # 0.2.0's schema names the printed properties under its template parameters; 1.2.0's
    # DeviceGemmXdl prints no properties, so its generic reading keeps them as printed only
    assert (fields["012.txt"]["LoopSched"], fields["012.txt"]["PipelineVer"]) == ("Interwave", "v1")
    assert (
        "LoopSched" not in fields["001.txt"] and fields["001.txt"]["LoopScheduler"] == "Interwave"
    )
    assert counts[0] == counts[1] and counts[2] == 0


def test_cli_ingest_and_parse_take_tree(two_trees, tmp_path):
    path = tmp_path / "kb.db"
    path.write_bytes(two_trees.read_bytes())
    before = path.read_bytes()
    r = CliRunner().invoke(
        main, ["ingest", str(SAMPLES / "001.txt"), "--tree", "nope", "--db", str(path)]
    )
    assert r.exit_code == 2 and "no tree named 'nope'" in r.output and "0.2.0 (ck)" in r.output
    assert "Traceback" not in r.output and path.read_bytes() == before  # nothing stored
    r = CliRunner().invoke(
        main, ["ingest", str(SAMPLES / "001.txt"), "--tree", "0.2.0", "--db", str(path)]
    )
    assert r.exit_code == 0, r.output
    assert _names(path, chosen=False)[XDL_2022][2] == "0.2.0" and _names(path) == {}

    def parse(*args: str) -> list[dict]:
        r = CliRunner().invoke(main, ["parse", *args, "--db", str(path), "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    out = parse(XDL_2022, XDL_MINI)
    assert [(o["schema"], o["tree"]) for o in out] == [("matched", "0.2.0"), ("matched", "1.2.0")]
    out = parse("--tree", "1.2.0", XDL_2022)
    assert [(o["op"], o["schema"], o["tree"]) for o in out] == [
        ("DeviceGemmXdl", "generic", "1.2.0")
    ]
    r = CliRunner().invoke(main, ["parse", XDL_2022, "--db", str(path)])
    assert r.exit_code == 0 and "[tree 0.2.0]" in r.stdout
    r = CliRunner().invoke(main, ["parse", XDL_2022, "--tree", "x", "--db", str(path)])
    assert r.exit_code == 2 and "no tree named 'x'" in r.output


def _tree_schemas(root: Path) -> names.SchemaSet:
    """A fixture tree's name schemas, read by the typestrings stage without a knowledge base."""
    out = names.SchemaSet()
    for f in typestrings.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        for s in typestrings.extract_schemas(rel, f.read_bytes())[0]:
            if s["status"] != "unsupported":
                out[f"{s['device_op']}@{rel}"] = names.schema_from_row({**s, "file": rel})
    return out


MINI = SchemaTree("1.2.0", 1, _tree_schemas(FIXTURES / "ck_mini"))
Y2022 = SchemaTree("0.2.0", 2, _tree_schemas(FIXTURES / "ck_2022"))


@st.composite
def printed_by_a_tree(draw):
    """(tree, name, values) of a name one tree's GetTypeString() prints, with random values."""
    tree = draw(st.sampled_from([MINI, Y2022]))
    s = draw(st.sampled_from(sorted(tree.schemas.values(), key=lambda s: s.device_op)))
    values: dict = {}
    out = []
    for t in s.tokens:
        if "lit" in t:
            out.append(t["lit"])
        elif "ref" in t and t.get("conv") == "enum" and t.get("map"):
            out.append(
                values.setdefault(t["ref"], draw(st.sampled_from(sorted(t["map"].values()))))
            )
        elif "ref" in t and t.get("kind") == "int":
            out.append(values.setdefault(t["ref"], str(draw(st.integers(1, 512)))))
        else:
            assume(False)  # other forms are covered by test_names' round trip
    return tree, "".join(out), values


@settings(max_examples=200, deadline=None)
@given(printed_by_a_tree())
def test_a_name_is_read_exactly_by_the_first_tree_that_prints_its_form(case):
    tree, name, values = case
    p, got = NameReader([MINI, Y2022]).read(name)
    readers = [t.name for t in (MINI, Y2022) if names.parse(name, t.schemas).schema == "matched"]
    assert tree.name in readers and got == readers[0] and p.schema == "matched", name
    assert {k: str(v) for k, v in p.fields.items() if k in values} == values
    assert p.op == name.split("<", 1)[0]  # the identifier it prints, never a shorter one


def test_locate_never_takes_an_unknown_op_for_a_known_one(two_trees):
    r = CliRunner().invoke(
        main, ["locate", "DeviceGemmXdl_C_Shuffle<256, 128, 128, 32, 8, 2>", "--db", str(two_trees)]
    )
    assert r.exit_code == 2
    assert "no GetTypeString() in this tree prints 'DeviceGemmXdl_C_Shuffle'" in r.output
    r = CliRunner().invoke(main, ["locate", XDL_2022, "--db", str(two_trees)])
    assert r.exit_code == 2 and "DeviceGemmXdl is printed by a device op in this tree" in r.output

"""Acceptance on the installed wheel's CK tree: gates, why and per-arch pool counts."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from ckkb.cli import main
from ckkb.kb.db import open_db
from ckkb.queries import ck as q

GPU = "library/src/tensor_operation_instance/gpu"
BF16 = "device_gemm_xdl_universal_bf16_bf16_bf16"
PART2 = f"{BF16}_mk_nk_mn_comp_instances_part2"


@pytest.fixture(scope="module")
def db(wheel_db):
    return open_db(wheel_db, readonly=True)


def test_device_name_gates_match_the_seed(wheel_db):
    r = CliRunner().invoke(main, ["gates", "--json", "--db", str(wheel_db)])
    assert r.exit_code == 0, r.output
    gates = [g for g in json.loads(r.output)["gates"] if g["kind"] == "device_name"]
    assert len(gates) == 166
    assert Counter(g["effect"] for g in gates) == {"exclude": 87, "only": 79}
    assert {g["arch"] for g in gates} == {"gfx950"}
    per = Counter((g["dir"], g["effect"]) for g in gates)
    expected = {
        "gemm_universal": (45, 6),
        "gemm_universal_streamk": (10, 0),
        "gemm_universal_reduce": (8, 4),
        "batched_gemm": (0, 4),
        "grouped_gemm_tile_loop": (0, 4),
        "gemm_fastgelu": (0, 4),
        "gemm_add_fastgelu": (0, 4),
        "gemm_add_add_fastgelu": (0, 4),
    }
    for d, (exclude, only) in expected.items():
        assert (per[(d, "exclude")], per[(d, "only")]) == (exclude, only), d
    # every gate names its file and line, relative to the CK root
    assert all(g["file"].startswith(GPU + "/") and g["line"] > 0 for g in gates)


def test_why_part2_tile_on_gfx950_and_gfx942(db):
    res = q.why(db, "256x224x64", [f"list_name={PART2}"], arch="gfx950")
    (m,) = res["matches"]
    assert m["available"] is False
    assert m["instance"]["list_comment"] == "instances not working on gfx950"
    files = {(r["layer"], r["file"].rsplit("/", 1)[-1], r["condition"]) for r in m["reasons"]}
    assert (
        "registration",
        f"{BF16}_mk_nk_mn_comp_default_instance.cpp",
        'if(ck::get_device_name() != "gfx950")',
    ) in files
    default = next(r for r in m["reasons"] if r["file"].endswith("_comp_default_instance.cpp"))
    assert default["line"] == 20 and default["list_comment"] == "instances not working on gfx950"
    ok = q.why(db, "256x224x64", [f"list_name={PART2}"], arch="gfx942")["matches"][0]
    assert ok["available"] is True and ok["reasons"] == []


def test_why_cli_on_the_wheel(wheel_db):
    r = CliRunner().invoke(
        main,
        [
            "why",
            "--tile",
            "256x224x64",
            f"list_name={PART2}",
            "--arch",
            "gfx950",
            "--db",
            str(wheel_db),
        ],
    )
    assert r.exit_code == 0
    out = " ".join(r.output.split())
    assert f"{BF16}_mk_nk_mn_comp_default_instance.cpp:20" in out
    assert '"instances not working on gfx950"' in out


# Available (instance, registering call) pairs for gemm_universal with A/B/C all bf16, per layout.
# Checked against the source: the XDL bf16 lists are built for every gfx9 part and, by CK's CMake,
# for gfx11/gfx12 too (the `_xdl` rule only drops gfx900/906/1030) and no capability check guards
# their add functions; the WMMA bf16 lists are built for gfx11/gfx12 only. In mk_nk the XDL lists
# are comp 6 entries x 2 calls + comp_part2 5 x 2 + mem 14 x 4 + mem_part2 2 x 4 = 86; on gfx950
# the `!= "gfx950"` gates drop both part2 lists (10 + 8) = 68. mk_kn: 7x4 + 3x4 + 12x6 + 2x6 = 124,
# gfx950 124 - 24 = 100; km_kn has no part2 list (10x4 + 16x6 = 136 everywhere); km_nk:
# 13x4 + 3x4 + 16x6 + 1x6 = 166, gfx950 166 - 18 = 148.
POOL = {
    "gfx908": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx90a": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx942": {"mk_kn": 124, "mk_nk": 86, "km_kn": 136, "km_nk": 166},
    "gfx950": {"mk_kn": 100, "mk_nk": 68, "km_kn": 136, "km_nk": 148},
    "gfx1100": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1101": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1200": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
    "gfx1201": {"mk_kn": 180, "mk_nk": 154, "km_kn": 172, "km_nk": 210},
}


def test_pool_counts_pinned(db):
    res = q.pool_counts(db, "gemm_universal", "bf16")
    # the eight archs pinned before issue 13; the tree's CMake also targets gfx1030 and gfx1102
    assert {a: res["counts"][a] for a in POOL} == POOL
    assert set(res["counts"]) == set(POOL) | {"gfx1030", "gfx1102"}


def test_pool_difference_is_the_gated_part2_lists(db):
    rows = list(
        db.query(
            "SELECT v.list_name, count(*) AS n FROM ck_instance_availability "
            "v JOIN ck_gemm_layouts g ON g.instance_id = v.instance_id "
            "JOIN instances i ON i.id = v.instance_id WHERE v.dir = "
            "'gemm_universal' AND i.a_dtype = 'bhalf_t' AND i.c_dtype = 'bhalf_t' "
            "AND i.b_dtype = 'bhalf_t' AND v.arch = 'gfx950' AND v.available "
            "= 0 AND v.layer = 'registration' GROUP BY v.list_name"
        )
    )
    lost = sum(r["n"] for r in rows)
    assert lost == sum(POOL["gfx942"].values()) - sum(POOL["gfx950"].values())
    assert all(r["list_name"].endswith("_part2") for r in rows)


def test_every_device_name_gate_guards_a_recorded_registration(db):
    orphans = list(
        db.query(
            "SELECT g.file, g.line FROM gates g WHERE g.kind = 'device_name' AND NOT EXISTS ("
            "SELECT 1 FROM registrations r, json_each(r.conditions) c "
            "WHERE r.file = g.file AND json_extract(c.value, '$.line') = g.line)"
        )
    )
    assert orphans == []


def test_build_rules_from_ck_cmake(db):
    rules = list(db.query("SELECT action, condition, line FROM build_rules"))
    assert any(
        r["action"] == "remove_source" and '"_mx"' in r["condition"] and "gfx950" in r["condition"]
        for r in rules
    )
    mx = list(
        db.query(
            "SELECT arch, built FROM file_builds WHERE file LIKE "
            "'%gemm_mx/%' AND file LIKE '%.cpp' GROUP BY arch"
        )
    )
    assert {r["arch"] for r in mx if r["built"]} == {"gfx950"}


# ---------------------------------------------------------------- figures issue 13 changed
# Issue 13 changed two figures of the default tree on purpose. Each is checked here against a
# second method written apart from the extractor: a regex/line scan of the wheel's CK files.

_GPU_DIR = "library/src/tensor_operation_instance/gpu"


def _unlisted_by_script(ck_root) -> dict[str, int]:
    """Second method: per .cpp under gpu/<dir>/ that no token of gpu/<dir>/CMakeLists.txt names
    (a literal relative path, or, for a token built from a variable such as
    `${PREFIX}_xdl_..._instance.cpp`, its literal tail), the `add_device_operation_instances(`
    calls in it."""
    import re

    out: dict[str, int] = {}
    for cm in sorted((ck_root / _GPU_DIR).glob("*/CMakeLists.txt")):
        text = re.sub(r"#[^\n]*", "", cm.read_text())
        tokens = re.findall(r"[\w./${}-]+\.cpp", text)
        exact = {t for t in tokens if "$" not in t}
        tails = [t.rsplit("}", 1)[1] for t in tokens if "}" in t]
        for p in sorted(cm.parent.rglob("*.cpp")):
            rel = p.relative_to(cm.parent).as_posix()
            if rel in exact or any(tail and rel.endswith(tail) for tail in tails):
                continue
            calls = re.findall(r"(?m)^\s*add_device_operation_instances\(", p.read_text())
            out[p.relative_to(ck_root).as_posix()] = len(calls)
    return out


def test_unlisted_sources_are_not_built(db, wheel_trees):
    """Issue 13 (build layer): a source its directory's CMakeLists.txt does not name is never
    compiled. On the default tree that takes 18 registrations on gfx942 (and every arch that
    builds gemm_multiply_multiply) and 10 on gfx908/gfx90a, where gpu/CMakeLists.txt's directory
    loop skips gemm_multiply_multiply (`NOT INST_TARGETS MATCHES "gfx94|gfx95|gfx11|gfx12"`).
    Before issue 13 these registrations counted as available."""
    import re

    root = wheel_trees["ck"].root
    script = _unlisted_by_script(root)
    # the script's files: gemm f16_f8_f16 (2 files, 3 calls each), gemm_multiply_multiply f8/i8
    # padding and mem variants (8 x 1), gemm_universal_streamk bf16 padding variants (4 x 1)
    assert sum(script.values()) == 18 and len(script) == 14
    mm = sum(n for f, n in script.items() if "/gemm_multiply_multiply/" in f)
    assert mm == 8
    top = (root / _GPU_DIR / "CMakeLists.txt").read_text()
    assert re.search(
        r'"\$\{cmake_instance\}" MATCHES "gemm_multiply_multiply" AND \(NOT INST_TARGETS '
        r'MATCHES "gfx94\|gfx95\|gfx11\|gfx12"\)',
        top,
    )
    rows = list(
        db.query(
            "SELECT a.arch, r.file FROM availability a JOIN registrations r "
            "ON r.id = a.registration_id WHERE a.layer = 'build' AND a.condition = "
            "'source not named by any add_instance_library call'"
        )
    )
    assert {r["file"] for r in rows} == set(script)
    per_arch = Counter(r["arch"] for r in rows)
    assert per_arch["gfx942"] == per_arch["gfx950"] == sum(script.values())
    assert per_arch["gfx908"] == per_arch["gfx90a"] == sum(script.values()) - mm


def _gfx94_entries_by_script(ck_root) -> set[tuple[str, int, bool]]:
    """Second method: (file, line, active) of every instance-list entry line (`Device...<`,
    commented out or not) inside an `#if`/`#ifdef` branch whose condition names `__gfx94__`,
    by a line scan of the instance sources and factory headers."""
    import re

    out = set()
    for base in (_GPU_DIR, "library/include/ck/library/tensor_operation_instance/gpu"):
        for p in sorted((ck_root / base).rglob("*")):
            if p.suffix not in (".hpp", ".cpp", ".in") or not p.is_file():
                continue
            stack: list[str] = []
            for n, ln in enumerate(p.read_text(errors="replace").splitlines(), 1):
                s = ln.strip()
                if re.match(r"#\s*if", s):
                    stack.append(s)
                elif re.match(r"#\s*(else|elif)", s) and stack:
                    stack[-1] = "#else"
                elif re.match(r"#\s*endif", s) and stack:
                    stack.pop()
                elif re.match(r"(//\s*)?Device\w*<", s) and any("__gfx94__" in c for c in stack):
                    out.add((p.relative_to(ck_root).as_posix(), n, not s.startswith("//")))
    return out


def test_gfx94_only_entries_leave_gfx12(db, wheel_trees):
    """Issue 13 (preprocessor layer inside lists): the fp8 entries under `#if
    defined(__gfx94__)` exist only where ck.hpp defines `__gfx94__` (gfx942, gfx950 and the
    gfx9.4 generic target: its `#if defined(__gfx942__) || defined(__gfx950__) || ...`). On the
    default tree that takes 1,101 (instance, registering call) pairs off gfx1200 and off gfx1201,
    where their registrations are otherwise available; before issue 13 they counted there."""
    root = wheel_trees["ck"].root
    script = _gfx94_entries_by_script(root)
    assert len(script) == 336 and sum(1 for *_, active in script if active) == 333
    ck_hpp = (root / "include/ck/ck.hpp").read_text()
    assert "#if defined(__gfx942__) || defined(__gfx950__)" in ck_hpp
    for arch, dropped in (("gfx1200", True), ("gfx942", False), ("gfx950", False)):
        gated = {
            (r["file"], r["line"])
            for r in db.query(
                "SELECT i.file, i.line FROM instance_gates g JOIN instances i "
                "ON i.id = g.instance_id WHERE g.arch = ?",
                [arch],
            )
        }
        assert gated == ({(f, n) for f, n, _ in script} if dropped else set()), arch
    # the pairs: the script's active entries x their lists' registrations available on the arch
    pairs = Counter()
    for r in db.query(
        "SELECT i.file, i.line, a.arch FROM instances i JOIN registrations r "
        "ON r.list_id = i.list_id JOIN availability a ON a.registration_id = r.id "
        "WHERE a.available = 1 AND i.status = 'active'"
    ):
        if (r["file"], r["line"], True) in script:
            pairs[r["arch"]] += 1
    assert pairs["gfx1200"] == pairs["gfx1201"] == 1101
    view = dict(
        db.execute(
            "SELECT v.arch, sum(v.available) FROM ck_instance_availability v JOIN instance_gates g "
            "ON g.instance_id = v.instance_id AND g.arch = v.arch GROUP BY v.arch"
        ).fetchall()
    )
    assert view.get("gfx1200", 0) == 0  # none of them is available there any more

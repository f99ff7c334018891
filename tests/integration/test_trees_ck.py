"""Issue 13, the tree matrix (CK parts): build, archs, gates, pool, why, instances, names coverage
and profiler ops on the default tree (the wheel's CK) and on CK 2024-10 (../shared/trees).

Every figure pinned here comes from a second method written apart from the extractor, named at
each use: a regex over the raw files (`_grep*`), or the small script `_pool_by_script`, which
reads a directory's CMakeLists.txt sources, the lists they register and the entries of those
lists with regular expressions only. The expected values were also checked by hand once:
CK 2024-10 gemm_universal_streamk f16 is {mk_kn: 160, mk_nk: 172} per arch that builds it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb.cli import main

GPU = "library/src/tensor_operation_instance/gpu"
F8_HPP = (
    f"{GPU}/gemm_universal/device_gemm_xdl_universal_f8_f8_bf16/"
    "device_gemm_xdl_universal_f8_f8_bf16_mk_kn_mn.hpp"
)


@pytest.fixture(scope="module", params=["default", "ck2024"])
def tree(request, wheel_db, wheel_trees, shared_trees, shared_dbs):
    """(name, CK root, knowledge base) of each tree of the matrix."""
    if request.param == "default":
        return "default", Path(wheel_trees["ck"].root), wheel_db
    return "ck2024", Path(shared_trees["ck2024"]), shared_dbs["ck2024"]


def ck(db: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, [*args, "--db", str(db)])
    return r.exit_code, r.output


def _grep_targets(root: Path) -> set[str]:
    """Second method: the archs of the top CMakeLists.txt's `set(CK_GPU_TARGETS "...")` lines."""
    out: set[str] = set()
    for m in re.finditer(
        r'set\(CK_GPU_TARGETS\s+"([^"]+)"\)', (root / "CMakeLists.txt").read_text()
    ):
        out |= {t.split(":")[0] for t in m.group(1).split(";") if re.fullmatch(r"gfx\w+", t)}
    return {t for t in out if "generic" not in t and re.fullmatch(r"gfx(\d{3}|\d{2}a|\d{4})", t)}


def _pool_by_script(root: Path, d: str, tag: str) -> dict[str, int]:
    """Second method: per layout, the entries of the lists that the sources named in gpu/D's
    CMakeLists.txt whose name holds TAG (a dtype triple) register (regular expressions only;
    commented-out entries are not counted)."""
    base = root / GPU / d
    counts: dict[str, int] = {}
    for rel in re.findall(r"(\S+\.cpp)", (base / "CMakeLists.txt").read_text()):
        if tag not in rel:
            continue
        src = base / rel
        for name in re.findall(
            r"add_device_operation_instances\(\s*\w+\s*,\s*(\w+)\s*<", src.read_text()
        ):
            text = next(
                t
                for p in src.parent.glob("*.hpp")
                if re.search(rf"using {name}\b", t := p.read_text())
            )
            body = re.split(rf"using {name}\b", text, maxsplit=1)[1].split(">;\n", 1)[0]
            n = sum(1 for ln in body.splitlines() if re.match(r"\s*Device\w*<", ln))
            lay = re.search(r"_(mk_kn|mk_nk|km_kn|km_nk)_", rel)
            if lay:
                counts[lay.group(1)] = counts.get(lay.group(1), 0) + n
    return counts


def test_archs_are_the_trees(tree):
    name, root, db = tree
    code, out = ck(db, "archs", "--json")
    assert code == 0, out
    archs = {a["arch"]: a for a in json.loads(out)["archs"]}
    built = {a for a, r in archs.items() if r["evaluated"]}
    assert built == _grep_targets(root)  # second method: the CMake target lists, by regex
    for a in built:
        f, line = archs[a]["file"], archs[a]["line"]
        assert re.search(rf"\b{a}\b", (root / f).read_text().splitlines()[line - 1])
    if name == "ck2024":
        assert "gfx950" not in archs and {"gfx940", "gfx941"} <= built
        assert archs["gfx940"]["families"] == ["__gfx9__", "__gfx94__"]
    else:
        assert "gfx950" in built and "gfx940" not in archs


def test_unknown_and_named_archs(tree):
    name, _root, db = tree
    code, out = ck(db, "why", "--tile", "256x128x64", "--arch", "gfx950")
    if name == "ck2024":
        assert code == 2 and "this tree does not know gfx950; it knows" in out
        assert "gfx940" in out
        code, out = ck(db, "pool", "--json", "--dir", "gemm_universal", "--dtype", "bf16")
        assert "gfx950" not in json.loads(out)["counts"]
        code, out = ck(db, "why", "--tile", "256x128x64", "--arch", "gfx940")
    assert code == 0, out


def test_pool_skips_directories_cmake_never_builds(tree):
    name, root, db = tree
    code, out = ck(db, "pool", "--json", "--dir", "gemm_universal_streamk", "--dtype", "f16")
    assert code == 0, out
    counts = json.loads(out)["counts"]["gfx942"]
    expected = _pool_by_script(
        root, "gemm_universal_streamk", "_f16_f16_f16_"
    )  # second method: the script
    if name == "ck2024":
        assert expected == {"mk_kn": 160, "mk_nk": 172}  # also counted by hand
        assert (root / GPU / "gemm_universal_streamk" / "gemm_universal_streamk").is_dir()
    assert {k: v for k, v in counts.items() if v} == expected


def test_why_names_the_guard_inside_a_list(shared_trees, shared_dbs):
    """CK 2024-10 only: the default tree has no entry under `#ifdef __gfx94__` alone whose
    registrations reach gfx90a."""
    root, db = Path(shared_trees["ck2024"]), shared_dbs["ck2024"]
    code, out = ck(db, "why", "--tile", "224x256x128", "--arch", "gfx90a", "--json")
    assert code == 0, out
    hit = [m for m in json.loads(out)["matches"] if m["instance"]["file"] == F8_HPP]
    assert len(hit) == 1 and hit[0]["available"] is False
    (reason,) = hit[0]["reasons"]
    # second method: the line of the `#ifdef __gfx94__` above the entry, by grep
    lines = (root / F8_HPP).read_text().splitlines()
    entry = hit[0]["instance"]["line"]
    ifdef = max(i + 1 for i, ln in enumerate(lines[:entry]) if ln.startswith("#ifdef __gfx94__"))
    assert reason["layer"] == "preprocessor" and reason["condition"] == "#if defined(__gfx94__)"
    assert reason["file"] == F8_HPP and reason["line"] == ifdef < entry
    code, out = ck(db, "why", "--tile", "224x256x128", "--arch", "gfx942", "--json")
    hit = [m for m in json.loads(out)["matches"] if m["instance"]["file"] == F8_HPP]
    assert hit[0]["available"] is True


def test_gates_match_the_registration_sources(tree):
    name, root, db = tree
    code, out = ck(db, "gates", "--json", "--kind", "device_name")
    assert code == 0, out
    # second method: grep for lines holding a device-name compare in the instance sources
    # (.cpp, templated add functions in .hpp, CMake templates .in); one gate per such line
    n = sum(
        1
        for p in (root / GPU).rglob("*")
        if p.suffix in (".cpp", ".hpp", ".in") and p.is_file()
        for ln in p.read_text(errors="replace").splitlines()
        if re.search(r"get_device_name\(\)\s*[!=]=", ln)
    )
    assert len(json.loads(out)["gates"]) == n
    assert n == (0 if name == "ck2024" else 166)  # 166: the same grep, run once by hand


def test_instances_of_a_directory(tree):
    name, root, db = tree
    code, out = ck(db, "instances", "--dir", "gemm_universal_streamk", "--json")
    assert code == 0, out
    insts = json.loads(out)["instances"]
    # second method: entry lines of the lists in the directory's headers, by regex
    n = 0
    for p in (root / GPU / "gemm_universal_streamk").rglob("*.hpp"):
        n += sum(1 for ln in p.read_text().splitlines() if re.match(r"\s*DeviceGemm\w*<", ln))
    assert len([i for i in insts if i["status"] == "active"]) == n


def test_names_coverage_and_profiler_ops(tree):
    _name, root, db = tree
    code, out = ck(db, "names", "coverage", "--json")
    assert code == 0, out
    impl = root / "include/ck/tensor_operation/gpu/device/impl"
    # second method: GetTypeString() overrides, by grep
    n = sum(
        len(re.findall(r"GetTypeString\(\) const override", p.read_text(errors="replace")))
        for p in impl.rglob("*.hpp")
    )
    assert json.loads(out)["implementations"] == n
    code, out = ck(db, "profiler", "ops", "--json")
    assert code == 0, out
    # second method: REGISTER_PROFILER_OPERATION( at the start of a line, by grep
    regs = sum(
        len(re.findall(r"(?m)^\s*REGISTER_PROFILER_OPERATION\(", p.read_text(errors="replace")))
        for p in (root / "profiler" / "src").rglob("*.cpp")
    )
    assert json.loads(out)["count"] == regs


def test_build_reports_damage(tree):
    _name, _root, db = tree
    code, out = ck(db, "diagnostics", "--json")
    assert code == 0, out
    res = json.loads(out)
    # no valid `extern template` is reported as malformed any more
    assert not [d for d in res["diagnostics"] if "extern template" in d["message"]]
    assert not [
        d
        for d in res["diagnostics"]
        if d["kind"] == "unparsed" and "/reduce/device_reduce_instance_" in d["file"]
    ]


def test_configuration_lists_are_not_unknown_templates(tree):
    """The reduce headers' `ReductionConfiguration_1<...>` / `_2<...>` tuples list configuration
    structs, not device ops: classified as such, never 'unknown device-op template'."""
    _name, root, db = tree
    code, out = ck(db, "diagnostics", "--json")
    assert code == 0, out
    diags = json.loads(out)["diagnostics"]
    assert not [d for d in diags if "ReductionConfiguration" in d["message"]]
    # second method: grep. The struct has no base class, and its entries are the lines
    # `ReductionConfiguration_N<` inside `std::tuple<` lists of the reduce headers
    red = root / "library/include/ck/library/tensor_operation_instance/gpu/reduce"
    common = (red / "device_reduce_instance_impl_common.hpp").read_text()
    assert re.search(r"struct ReductionConfiguration_1\n\{", common)
    n = sum(
        len(re.findall(r"(?m)^\s*ReductionConfiguration_[12]<", p.read_text()))
        for p in red.glob("*.hpp")
    )
    assert n == 73  # 16 of _1, 57 of _2 (the same grep, by hand, on both trees)
    rows = json.loads(ck(db, "instances", "--json", "--dir", "reduce")[1])["instances"]
    assert sum(1 for i in rows if i["template"].startswith("ReductionConfiguration_")) == n

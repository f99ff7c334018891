"""ck.instances on the hand-written ck_mini tree: lists, comments, aliases, named fields, bad
input."""

from __future__ import annotations

import json
from pathlib import Path

import sqlite_utils
from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb import sources
from ckkb.extract import cpp, instances, templates
from ckkb.kb.build import build
from ckkb.kb.schema.ck_instances import InstanceListRow, InstanceRow
from ckkb.kb.stages import BuildContext

GPU = "library/src/tensor_operation_instance/gpu"
UNIV = f"{GPU}/gemm_universal/device_gemm_xdl_universal_bf16_bf16_bf16"
HDR = f"{UNIV}/device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"
PART2 = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"


def run(root: Path):
    """Both stages, the way the build runs them (extract per file, then combine)."""
    tres = {}
    for f in templates.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        tres[rel] = templates.extract(root, rel, f.read_bytes())
    ops = templates.combine(root, tres, None)
    ctx = BuildContext(trees={})
    ctx.rows["device_ops"] = ops.rows
    ires = {}
    for f in instances.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        ires[rel] = instances.extract(root, rel, f.read_bytes())
    out = instances.combine(root, ires, ctx)
    lists = {r.name: r for r in out.rows if isinstance(r, InstanceListRow)}
    insts = [r for r in out.rows if isinstance(r, InstanceRow)]
    diags = [d for fr in ires.values() for d in fr.diagnostics] + out.diagnostics
    return lists, insts, diags


def of(insts, list_name):
    return sorted((i for i in insts if i.list_name == list_name), key=lambda i: i.ordinal)


def test_lists_and_comments(fixtures):
    lists, insts, diags = run(fixtures / "ck_mini")
    mine = {n: lst for n, lst in lists.items() if lst.file == HDR}
    assert sorted(mine) == [
        "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances",
        PART2,
        "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances",
    ]
    p2 = mine[PART2]
    assert p2.comment == "instances not working on gfx950"
    assert (p2.entries, p2.commented_out) == (3, 1)
    assert p2.dir == "gemm_universal"
    assert p2.template_params == [
        {"name": "GemmSpec", "type": "GemmSpecialization", "kind": "value"}
    ]
    comp = mine["device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances"]
    assert comp.comment == "" and comp.entries == 3
    mem = mine["device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances"]
    assert [p["name"] for p in mem.template_params] == ["BlkGemmPipeSched", "GemmSpec"]
    assert src_line(fixtures / "ck_mini" / HDR, p2.line).lstrip().startswith("using " + PART2)
    assert not [d for d in diags if d.file == HDR]


def src_line(path: Path, line: int) -> str:
    return path.read_text().splitlines()[line - 1]


def test_commented_out_entry_and_reasons(fixtures):
    _, insts, _ = run(fixtures / "ck_mini")
    p2 = of(insts, PART2)
    assert [i.status for i in p2] == ["active", "active", "commented_out", "active"]
    assert [i.ordinal for i in p2] == [0, 1, 2, 3]
    out = p2[2]
    assert out.reason == "AGPR Spill"
    assert (out.tile_m, out.tile_n, out.tile_k) == (256, 256, 32)
    assert "// DeviceGemm_Xdl_CShuffleV3<" in src_line(fixtures / "ck_mini" / HDR, out.line)
    assert p2[0].reason == "Compute friendly, odd tiles"
    comp = of(insts, "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances")
    assert [i.reason for i in comp] == ["Compute friendly", "Compute friendly", "Interwave variant"]
    # the //####| column-header table is never a reason
    assert not any("|" in i.reason for i in insts)


def test_alias_resolution_and_named_fields(fixtures):
    _, insts, _ = run(fixtures / "ck_mini")
    first = of(insts, "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances")[0]
    assert first.template == "DeviceGemm_Xdl_CShuffleV3"
    assert first.args[:4] == ["Row", "Col", "Row", "BF16"]
    assert first.args[22] == "S<8, 32, 1>"
    assert first.resolved[:4] == [
        "tensor_layout::gemm::RowMajor",
        "tensor_layout::gemm::ColumnMajor",
        "tensor_layout::gemm::RowMajor",
        "bhalf_t",
    ]
    assert first.resolved[6] == "float"
    assert first.resolved[22] == [8, 32, 1]
    f = first.fields
    assert (
        f["ALayout"] == "tensor_layout::gemm::RowMajor"
        and f["BLayout"] == "tensor_layout::gemm::ColumnMajor"
    )
    assert f["ADataType"] == "bhalf_t" and f["GemmAccDataType"] == "float"
    assert f["GemmSpec"] == "GemmSpec"  # the list's own parameter: bound per registration
    assert (f["BlockSize"], f["MPerBlock"], f["NPerBlock"], f["KPerBlock"]) == (256, 128, 128, 64)
    assert f["ABlockTransferThreadClusterLengths_AK0_M_AK1"] == [8, 32, 1]
    assert f["CShuffleBlockTransferClusterLengths_MBlock_MPerBlock_NBlock_NPerBlock"] == [
        1,
        16,
        1,
        16,
    ]
    assert f["BlkGemmPipeSched"] == "BlockGemmPipelineScheduler::Intrawave"
    assert f["BlkGemmPipelineVer"] == "BlockGemmPipelineVersion::v3"
    # parameters the entry leaves out take the op's defaults, and say so
    assert f["ComputeTypeA"] == "bhalf_t" and f["PermuteA"] is False
    assert first.defaulted == ["ComputeTypeA", "ComputeTypeB", "PermuteA", "PermuteB"]
    assert first.mapping == "ok" and first.template_file.endswith("device_gemm_xdl_cshuffle_v3.hpp")
    # `Intrawave` is a static constexpr alias in the header
    second = of(insts, "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances")[1]
    assert (
        second.args[-2] == "Intrawave"
        and second.fields["BlkGemmPipeSched"] == "BlockGemmPipelineScheduler::Intrawave"
    )


def test_normalised_columns(fixtures):
    _, insts, _ = run(fixtures / "ck_mini")
    p2 = [i for i in of(insts, PART2) if i.status == "active"]
    assert [(i.tile_m, i.tile_n, i.tile_k) for i in p2] == [
        (256, 224, 64),
        (224, 256, 64),
        (256, 192, 64),
    ]
    assert [(i.fields["MXdlPerWave"], i.fields["NXdlPerWave"]) for i in p2] == [
        (8, 7),
        (7, 8),
        (4, 3),
    ]
    a = p2[0]
    assert (a.a_layout, a.b_layout, a.c_layout) == ("Row", "Col", "Row")
    assert (a.a_dtype, a.c_dtype, a.block_size) == ("bhalf_t", "bhalf_t", 256)
    assert (a.mfma_m, a.mfma_n, a.xdl_m, a.xdl_n, a.waves_m, a.waves_n) == (16, 16, 8, 7, 2, 2)
    assert (a.ak1, a.bk1, a.pipeline, a.scheduler, a.padding) == (
        8,
        8,
        "v3",
        "Intrawave",
        "GemmSpec",
    )
    mem = of(insts, "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances")
    assert [i.scheduler for i in mem] == ["BlkGemmPipeSched", "BlkGemmPipeSched"]
    assert [i.fields["BlkGemmPipeSched"] for i in mem] == ["BlkGemmPipeSched"] * 2
    assert [i.pipeline for i in mem] == ["v1", "v2"]


def test_cmake_in_template(fixtures):
    lists, insts, _ = run(fixtures / "ck_mini")
    (name,) = [n for n, lst in lists.items() if lst.file.endswith(".in")]
    lst = lists[name]
    assert name == "device_gemm_xdl_f16_f16_f16_mk_kn_mn_@SUFFIX@_instances"
    assert lst.cmake_vars == ["BLOCK_SIZE", "SUFFIX"] and lst.entries == 2
    e = of(insts, name)
    assert [i.template for i in e] == ["DeviceGemmXdl", "DeviceGemmXdl"]
    assert (
        e[1].args[11] == "@BLOCK_SIZE@"
        and e[1].fields["BlockSize"] == "@BLOCK_SIZE@"
        and e[1].block_size is None
    )
    assert e[0].fields["GemmSpec"] == "GemmSpecialization::Default"  # static constexpr alias
    assert e[0].fields["ADataType"] == "half_t"
    # K split into K0PerBlock * K1 gives tile_k
    assert (e[0].tile_m, e[0].tile_n, e[0].tile_k, e[0].padding) == (256, 128, 32, "Default")


def test_aliases_from_included_header(copy_tree):
    """A .cpp defining a tuple inline resolves the aliases of the header it includes."""
    root = copy_tree("ck_mini")
    cpp_file = root / UNIV / "device_inline_instance.cpp"
    cpp_file.write_text(
        '#include "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"\n'
        "namespace ck { namespace tensor_operation { namespace device { namespace instance {\n"
        "using inline_instances = std::tuple<\n"
        "    // Tiny\n"
        "    DeviceGemm_Xdl_CShuffleV3< Row, Col, Row, BF16, BF16, BF16, F32, BF16,"
        " PassThrough, PassThrough, PassThrough,"
        " GemmKPadding, 64, 16, 16, 64, 8, 8, 16, 16, 1, 1, S<8, 8, 1>, S<1, 0, 2>, S<1, 0, 2>,"
        " 2, 8, 8, 0, S<8, 8, 1>,"
        " S<1, 0, 2>, S<1, 0, 2>, 2, 8, 8, 0, 1, 1, S<1, 16, 1, 4>, 4, Interwave,"
        " BlockGemmPipelineVersion::v2>\n"
        "#ifdef CK_ENABLE_FP8\n"
        "    , DeviceGemm_Xdl_CShuffleV3< Row, Col, Row, BF16, BF16, BF16, F32, BF16,"
        " PassThrough, PassThrough, PassThrough,"
        " GemmDefault, 64, 32, 16, 64, 8, 8, 16, 16, 1, 1, S<8, 8, 1>, S<1, 0, 2>, S<1, 0, 2>,"
        " 2, 8, 8, 0, S<8, 8, 1>,"
        " S<1, 0, 2>, S<1, 0, 2>, 2, 8, 8, 0, 1, 1, S<1, 16, 1, 4>, 4, Intrawave,"
        " BlockGemmPipelineVersion::v1>\n"
        "#endif\n"
        "#if 0\n"
        "    , Broken< that does not parse ,,, >\n"
        "#endif\n"
        "    >;\n"
        "}}}}\n"
    )
    lists, insts, diags = run(root)
    e = of(insts, "inline_instances")
    assert len(e) == 2  # the `#if 0` text is dead
    assert e[0].fields["ADataType"] == "bhalf_t"
    assert e[0].fields["GemmSpec"] == "GemmSpecialization::KPadding"
    assert e[0].fields["BlkGemmPipeSched"] == "BlockGemmPipelineScheduler::Interwave"
    assert (e[0].reason, e[0].guard) == ("Tiny", "")
    assert e[1].guard == "defined(CK_ENABLE_FP8)" and e[1].padding == "Default"
    assert not [d for d in diags if d.file.endswith("device_inline_instance.cpp")]


def test_malformed_and_binary_files_are_diagnosed(copy_tree):
    root = copy_tree("ck_mini")
    bad_dir = root / GPU / "gemm_broken"
    bad_dir.mkdir()
    (bad_dir / "device_broken_instance.cpp").write_text(
        "namespace ck {\n"
        "using broken_instances = std::tuple<\n"
        "    DeviceGemmXdl< F16, F16, F16, F32, Row, Row, Row, PassThrough, PassThrough,"
        " PassThrough, GemmDefault, 256, 256, 128, 4, 8 }}}\n"
        "    , Unknown_Op<1, 2>\n"
        "  >;\n"
        "void f() { if (x) { {\n"
    )
    (bad_dir / "junk_instance.cpp").write_bytes(b"\x00\x01std::tuple\x02\xff" * 100)
    lists, insts, diags = run(root)
    # the rest of the tree is still there
    assert lists[PART2].entries == 3
    junk = [d for d in diags if d.file.endswith("junk_instance.cpp")]
    assert junk and "binary" in junk[0].message
    broken = [d for d in diags if d.file.endswith("device_broken_instance.cpp")]
    assert broken, "malformed C++ must be reported"
    assert all(d.line >= 1 for d in broken)
    assert any(d.line in (3, 4, 5, 6) for d in broken)


def test_unknown_template_and_arity_are_reported(copy_tree):
    root = copy_tree("ck_mini")
    (root / GPU / "gemm_odd").mkdir()
    (root / GPU / "gemm_odd" / "device_odd_instance.cpp").write_text(
        "using odd_instances = std::tuple<\n"
        "    DeviceNoSuchOp<1, 2, 3>,\n"
        "    DeviceGemmXdl<half_t, half_t>\n"
        ">;\n"
    )
    _, insts, diags = run(root)
    e = of(insts, "odd_instances")
    assert [(i.template, i.mapping) for i in e] == [
        ("DeviceNoSuchOp", "unknown_template"),
        ("DeviceGemmXdl", "arity_mismatch"),
    ]
    assert e[1].fields["ADataType"] == "half_t"  # what is there is still named
    msgs = {d.line: d.message for d in diags if d.file.endswith("device_odd_instance.cpp")}
    assert "unknown device-op template DeviceNoSuchOp" in msgs[2]
    assert "DeviceGemmXdl takes 36..39 template arguments" in msgs[3]


def test_configuration_structs_and_typedefd_ops(copy_tree):
    """Issue 13: CK 2024-10's reduce headers list `ReductionConfiguration_1<256, 128, 2>`, a
    struct of the tree with no device-op base; a template alias of a device op is that op."""
    root = copy_tree("ck_mini")
    (root / GPU / "gemm_odd").mkdir()
    (root / GPU / "gemm_odd" / "device_cfg_instance.hpp").write_text(
        "template <int BlockSize, int MThreadClusterSize, int KThreadClusterSize>\n"
        "struct ReductionConfiguration_1\n{\n    static constexpr int B = BlockSize;\n};\n"
        "using cfg_instances = std::tuple<\n"
        "    ReductionConfiguration_1<256, 128, 2>,\n"
        "    ReductionConfiguration_1<256, 64, 4>\n"
        ">;\n"
    )
    (root / GPU / "gemm_odd" / "device_alias_instance.cpp").write_text(
        "template <typename T, index_t Block>\n"
        "using MyGemm = DeviceGemmXdl<T, T, T, float, Row, Row, Row, PassThrough, PassThrough,\n"
        "    PassThrough, GemmDefault, Block, 256, 128, 4, 8, 32, 32, 4, 2, S<4, 64, 1>,\n"
        "    S<1, 0, 2>, S<1, 0, 2>, 2, 8, 8, true, S<4, 64, 1>, S<0, 2, 1>, S<0, 2, 1>, 1, 2, 8,\n"
        "    true, 7, 1>;\n"
        "template <typename Ty>\nusing Mine = MyGemm<Ty, 256>;\n"
        "using alias_instances = std::tuple<\n    Mine<half_t>\n>;\n"
    )
    _, insts, diags = run(root)
    cfg = of(insts, "cfg_instances")
    assert [(i.template, i.mapping) for i in cfg] == [
        ("ReductionConfiguration_1", "not_device_op")
    ] * 2
    msgs = [d.message for d in diags if d.file.endswith("device_cfg_instance.hpp")]
    assert len(msgs) == 2 and all("unknown device-op" not in m for m in msgs)
    assert (
        "ReductionConfiguration_1 is a class (" + GPU + "/gemm_odd/device_cfg_instance.hpp:2)"
        in msgs[0]
    )
    (inst,) = of(insts, "alias_instances")
    assert (inst.template, inst.mapping) == ("DeviceGemmXdl", "ok")
    assert inst.fields["ADataType"] == "half_t" and inst.fields["BlockSize"] == 256
    assert inst.fields["MPerBlock"] == 256


def test_build_writes_tables(fixtures, tmp_db):
    tree = sources.ck_tree(fixtures / "ck_mini")
    build(tmp_db, {"ck": tree}, stages=[templates.STAGE, instances.STAGE], jobs=1)
    db = sqlite_utils.Database(tmp_db)
    row = db.execute(
        "select i.fields, i.tile_m, i.status, l.comment, d.name from instances i "
        "join instance_lists l on l.id = i.list_id "
        "join device_ops d on d.id = i.device_op_id "
        "where i.list_name = ? and i.status = 'commented_out'",
        [PART2],
    ).fetchone()
    assert json.loads(row[0])["MPerBlock"] == 256
    assert row[1:] == (
        256,
        "commented_out",
        "instances not working on gfx950",
        "DeviceGemm_Xdl_CShuffleV3",
    )
    assert db.execute("select count(*) from instances where mapping = 'ok'").fetchone()[0] >= 11


# ---------------------------------------------------------------- properties

_seq = st.lists(st.integers(0, 512), min_size=1, max_size=5)
_arg = st.one_of(
    st.integers(0, 4096).map(lambda v: (str(v), v)),
    _seq.map(lambda s: (f"S<{', '.join(map(str, s))}>", s)),
    st.sampled_from(
        [
            ("BF16", "bhalf_t"),
            ("Row", "tensor_layout::gemm::RowMajor"),
            ("true", True),
            ("GemmDefault", "GemmSpecialization::Default"),
            ("ck::half_t", "half_t"),
            ("2 * 64", 128),
            ("(256)", 256),
        ]
    ),
)

_PRELUDE = (
    "using BF16 = bhalf_t;\nusing Row = ck::tensor_layout::gemm::RowMajor;\n"
    "template <index_t... Is> using S = Sequence<Is...>;\n"
    "static constexpr auto GemmDefault = GemmSpecialization::Default;\n"
)


def _one_number_seqs(args: list[tuple[str, object]]) -> int:
    """How many arguments are one-number sequences (`S<0>`)."""
    return sum(1 for text, _ in args if text.startswith("S<") and "," not in text)


# tree-sitter-cpp can misread a list with three or more one-number `S<n>` arguments (each reads as
# a type or as a `<`/`>` comparison, and the parser keeps only a few alternatives alive); CK writes
# at most one per entry (270 of 13,646 entries on the wheel), and a misread list gets the
# "parser had to recover" warning.
@settings(max_examples=80, deadline=None)
@given(st.lists(_arg, min_size=1, max_size=10).filter(lambda a: _one_number_seqs(a) <= 2))
def test_resolution_property(args):
    src = (
        _PRELUDE
        + "using prop_instances = std::tuple<\n  DeviceProp<"
        + ", ".join(a for a, _ in args)
        + ">\n>;\n"
    )
    rel = f"{GPU}/gemm_prop/p.hpp"
    fr = instances.extract(Path("."), rel, src.encode())
    out = instances.combine(Path("."), {rel: fr}, BuildContext(trees={}))
    (inst,) = [r for r in out.rows if isinstance(r, InstanceRow)]
    assert inst.resolved == [v for _, v in args]
    assert inst.args == [a for a, _ in args]
    assert inst.mapping == "unknown_template"


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "x = 1;",
                "#if A",
                "#ifdef B",
                "#else",
                "#endif",
                "#elif C",
                "",
                "  // c",
                "#if 0",
                "y();",
            ]
        ),
        max_size=30,
    )
)
def test_preprocessor_mask_keeps_offsets(lines):
    data = "\n".join(lines).encode()
    masked, guards = cpp.mask_conditionals(data)
    assert len(masked) == len(data)
    assert masked.count(b"\n") == data.count(b"\n")
    assert b"#" not in masked.replace(b"// c", b"")
    assert all(1 <= ln <= len(lines) for ln in guards)


def test_list_alias_instantiates_another_list(copy_tree):
    """`using X_instances = other_list<args>;` is a list with other_list's entries, its parameters
    bound."""
    root = copy_tree("ck_mini")
    (root / UNIV / "device_alias_instance.cpp").write_text(
        '#include "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn.hpp"\n'
        "// bound to KPadding here\n"
        "using bf16_kpad_instances ="
        " device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances"
        "<Interwave, GemmKPadding>;\n"
        "using spelled_apart_instances = std::\n    tuple<DeviceGemmXdl<half_t>>;\n"
    )
    lists, insts, _ = run(root)
    a = lists["bf16_kpad_instances"]
    assert (
        a.alias_of == "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances"
        "<Interwave, GemmKPadding>"
    )
    assert (a.entries, a.comment, a.line, a.dir) == (
        2,
        "bound to KPadding here",
        3,
        "gemm_universal",
    )
    e = of(insts, "bf16_kpad_instances")
    assert [i.padding for i in e] == ["KPadding", "KPadding"]
    assert [i.scheduler for i in e] == ["Interwave", "Interwave"]
    assert e[0].fields["BlkGemmPipeSched"] == "BlockGemmPipelineScheduler::Interwave"
    assert e[0].file == HDR and e[0].list_id == a.id  # entries point at the text they come from
    base = of(insts, "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_mem_instances")
    assert [i.padding for i in base] == ["GemmSpec", "GemmSpec"]  # the original stays unbound
    assert lists["spelled_apart_instances"].entries == 1


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=40), st.integers(0, 10_000))
def test_damaged_header_never_raises(junk, where):
    """Bytes spliced anywhere into a real instance header: extract answers (rows or diagnostics),
    never raises."""
    src = (Path(__file__).parents[1] / "fixtures" / "ck_mini" / HDR).read_bytes()
    k = where % len(src)
    data = src[:k] + junk + src[k:]
    fr = instances.extract(Path("."), HDR, data)
    out = instances.combine(Path("."), {HDR: fr}, BuildContext(trees={}))
    for d in fr.diagnostics + out.diagnostics:
        assert d.file == HDR and d.line >= 0


def test_bool_argument_stays_a_bool():
    src = (_PRELUDE + "using prop_instances = std::tuple<\n  DeviceProp<Row, true>\n>;\n").encode()
    rel = f"{GPU}/gemm_prop/p.hpp"
    fr = instances.extract(Path("."), rel, src)
    (lst,) = fr.facts["lists"]
    (entry,) = lst["entries"]
    assert entry["exprs"] == (("name", "Row"), ("bool", True))


def test_repeated_entries_read_alike():
    """Arguments are memoised per file by node type and text: a repeated entry reads the same."""
    entry = "DeviceProp<Row, 256, S<8, 32, 1>, ck::Tuple<F16, Tuple<Row, Col>>, true>"
    src = (_PRELUDE + f"using prop_instances = std::tuple<\n  {entry},\n  {entry}\n>;\n").encode()
    fr = instances.extract(Path("."), f"{GPU}/gemm_prop/p.hpp", src)
    first, second = fr.facts["lists"][0]["entries"]
    assert first == dict(second, line=first["line"])  # the second is read from text, the same facts
    assert second["args"] == [
        "Row",
        "256",
        "S<8, 32, 1>",
        "ck::Tuple<F16, Tuple<Row, Col>>",
        "true",
    ]
    assert second["exprs"][3] == (
        "tmpl",
        "ck::Tuple",
        (("name", "F16"), ("tmpl", "Tuple", (("name", "Row"), ("name", "Col")))),
    )
    assert second["exprs"][4] == ("bool", True)


def test_map_fields_positional_pack_and_defaults():
    """Values fill the parameters before a pack in order; the pack takes the rest, a later pack
    nothing; a missing parameter takes its default (which may name an earlier parameter). The
    expected dicts are written out by hand from those rules."""
    from ckkb.extract.instance_exprs import map_fields

    def p(name: str, kind: str = "type", default: str | None = None) -> dict:
        return {"name": name, "kind": kind, "default": default}

    params = [p("A"), p("B", default="A"), p("Ts", "pack"), p("C", default="7"), p("Us", "pack")]
    assert map_fields(params, [1, 2, 3, 4]) == (
        {"A": 1, "B": 2, "Ts": [3, 4], "C": 7, "Us": []},
        ["C"],
        True,
    )
    assert map_fields(params, [1]) == (
        {"A": 1, "B": 1, "Ts": [], "C": 7, "Us": []},
        ["B", "C"],
        True,
    )
    # a default naming no earlier value is kept as written
    assert map_fields(params, []) == ({"B": "A", "Ts": [], "C": 7, "Us": []}, ["B", "C"], False)
    plain = [p("M"), p("N", default="true"), p("K")]
    assert map_fields(plain, [8, False, 3, 9]) == ({"M": 8, "N": False, "K": 3}, [], False)
    assert map_fields(plain, [8]) == ({"M": 8, "N": True}, ["N"], False)

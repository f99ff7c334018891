"""ck.templates: device-op class templates and their
parameters, on ck_mini and on inline sources."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.extract import cpp, templates

IMPL = "include/ck/tensor_operation/gpu/device/impl"


def read_ops(root: Path):
    results = {}
    for f in templates.STAGE.files(root):
        rel = f.relative_to(root).as_posix()
        results[rel] = templates.extract(root, rel, f.read_bytes())
    out = templates.combine(root, results, None)
    diags = [d for fr in results.values() for d in fr.diagnostics] + out.diagnostics
    return {r.name: r for r in out.rows}, diags


def one(src: str, rel: str = f"{IMPL}/x.hpp"):
    return templates.extract(Path("."), rel, src.encode())


def test_fixture_ops_in_order(fixtures):
    ops, diags = read_ops(fixtures / "ck_mini")
    v3 = ops["DeviceGemm_Xdl_CShuffleV3"]
    names = [p["name"] for p in v3.params]
    assert names[:3] == ["ALayout", "BLayout", "CLayout"]
    assert names[11:22] == [
        "GemmSpec",
        "BlockSize",
        "MPerBlock",
        "NPerBlock",
        "KPerBlock",
        "AK1",
        "BK1",
        "MPerXDL",
        "NPerXDL",
        "MXdlPerWave",
        "NXdlPerWave",
    ]
    assert names[-6:] == [
        "BlkGemmPipeSched",
        "BlkGemmPipelineVer",
        "ComputeTypeA",
        "ComputeTypeB",
        "PermuteA",
        "PermuteB",
    ]
    assert len(v3.params) == 46
    assert v3.params[0] == {"name": "ALayout", "kind": "type", "type": "typename", "default": None}
    assert v3.params[12] == {
        "name": "BlockSize",
        "kind": "value",
        "type": "index_t",
        "default": None,
    }
    assert v3.params[40]["default"] == "BlockGemmPipelineScheduler::Intrawave"
    assert v3.params[43]["default"] == "ComputeTypeA"
    assert v3.base == "DeviceGemmV2"
    assert v3.base_args == ["ALayout", "BLayout"]
    # the forward declaration above the definition is not what is recorded
    src = (fixtures / "ck_mini" / v3.file).read_text().splitlines()
    assert src[v3.line - 1].startswith(
        "template <typename ALayout,"
    ) and "struct DeviceGemm_Xdl_CShuffleV3" in "\n".join(src[v3.line : v3.line + 50])
    # a class template only forward-declared (here the interface) is kept: it is all there is
    assert [p["name"] for p in ops["DeviceGemmV2"].params] == ["ALayout", "BLayout"]
    assert ops["DeviceGemmV2"].line < v3.line
    old = ops["DeviceGemmXdl"]
    assert [p["name"] for p in old.params][14:16] == ["K0PerBlock", "K1"]
    assert old.params[-1] == {
        "name": "PipelineVer",
        "kind": "value",
        "type": "ck::PipelineVersion",
        "default": "ck::PipelineVersion::v1",
    }
    assert not [d for d in diags if "DeviceGemm" in d.file]


def test_forward_declaration_alone_is_kept_and_specialisation_loses():
    fr = one(
        "template <typename T> struct DeviceFoo;\n"
        "template <> struct DeviceFoo<int> : public DeviceBase<int> {};\n"
        "template <typename T, index_t N = 4> struct DeviceBar;\n"
        "template <typename T> struct DeviceBar<T, 8> {};\n"
        "template <typename T, index_t N = 4> struct DeviceBar { };\n"
    )
    rows = {r.name: r for r in fr.rows}
    assert [p["name"] for p in rows["DeviceFoo"].params] == ["T"]
    assert rows["DeviceFoo"].line == 1
    assert [p["name"] for p in rows["DeviceBar"].params] == ["T", "N"]
    assert rows["DeviceBar"].line == 5  # the primary definition
    assert fr.facts["ranks"] == {"DeviceFoo": 1, "DeviceBar": 0}


def test_member_templates_and_non_device_classes_are_not_ops():
    fr = one(
        "template <typename A> struct Helper { template <typename B> struct DeviceInner {}; };\n"
        "template <typename A, index_t... Is> struct DeviceOk "
        ": public BaseOperator { struct Argument {}; };\n"
    )
    assert [r.name for r in fr.rows] == ["DeviceOk"]
    assert fr.rows[0].params[1] == {
        "name": "Is",
        "kind": "pack",
        "type": "index_t",
        "default": None,
    }


def test_recovers_from_macros_ck_headers_use():
    # A macro statement in the class body and __launch_bounds__ under #if make tree-sitter recover;
    # the parameter list is still read.
    src = (
        "template <typename GridwiseGemm, index_t MinimumOccupancy "
        "= 1>\n__global__ void\n#if CK_USE_LAUNCH_BOUNDS\n"
        "__launch_bounds__(256, MinimumOccupancy)\n#endif\n "
        "kernel_x(typename GridwiseGemm::Argument karg) { }\n"
        "template <typename ALayout, index_t BlockSize, index_t MPerBlock>\n"
        "struct DeviceMacroOp : public DeviceGemm<ALayout>\n{\n    GET_NXDL_PER_WAVE_IMPL\n"
        "    static constexpr auto NXdlPerWave64 = GetNXdlPerWave<true>();\n};\n"
    )
    fr = one(src)
    rows = {r.name: r for r in fr.rows}
    assert [p["name"] for p in rows["DeviceMacroOp"].params] == [
        "ALayout",
        "BlockSize",
        "MPerBlock",
    ]
    assert rows["DeviceMacroOp"].base == "DeviceGemm"
    assert rows["DeviceMacroOp"].line == 7


def test_token_fallback_for_what_tree_sitter_cannot_parse():
    """`enable_if<N >= 1 ...>` in a parameter default defeats
    tree-sitter; the token fallback reads the list."""
    fr = one(
        "template <index_t NDimSpatial, typename Layout, index_t BlockSize,\n"
        "          typename std::enable_if<NDimSpatial "
        ">= 1 && NDimSpatial <= 3, bool>::type = false>\n"
        "struct DeviceRearrange\n    : public DeviceConvTensorRearrange<NDimSpatial, Layout>\n{\n"
        "    static constexpr bool x = std::is_same_v<Layout, "
        "int> || std::is_same_v<Layout, long>;\n};\n"
    )
    (row,) = fr.rows
    assert (row.name, row.line, row.base) == ("DeviceRearrange", 1, "DeviceConvTensorRearrange")
    assert [(p["name"], p["kind"], p["default"]) for p in row.params] == [
        ("NDimSpatial", "value", None),
        ("Layout", "type", None),
        ("BlockSize", "value", None),
        ("", "value", "false"),
    ]
    assert fr.diagnostics == []


def test_binary_and_broken_headers_are_diagnosed(copy_tree):
    root = copy_tree("ck_mini")
    (root / IMPL / "device_junk.hpp").write_bytes(b"\x7fELF\x00\x00\x01" * 50)
    (root / IMPL / "device_broken.hpp").write_text(
        "template <typename A, index_t B\nstruct "
        "DeviceBroken : public DeviceGemm<A {\n  int x = ;\n"
    )
    ops, diags = read_ops(root)
    assert "DeviceGemm_Xdl_CShuffleV3" in ops and "DeviceGemmXdl" in ops  # the rest still read
    junk = [d for d in diags if d.file.endswith("device_junk.hpp")]
    assert junk and "binary" in junk[0].message
    broken = [d for d in diags if d.file.endswith("device_broken.hpp")]
    assert broken and broken[0].line >= 1


def test_duplicate_name_in_two_headers_keeps_both():
    a = templates.extract(
        Path("."), f"{IMPL}/a.hpp", b"template <typename A> struct DeviceX : DeviceGemm<A> {};"
    )
    b = templates.extract(
        Path("."),
        f"{IMPL}/b.hpp",
        b"template <typename A, typename S> struct DeviceX : DeviceGemmBScale<A> {};",
    )
    out = templates.combine(Path("."), {f"{IMPL}/a.hpp": a, f"{IMPL}/b.hpp": b}, None)
    assert [(r.name, r.file.rsplit("/", 1)[1], len(r.params)) for r in out.rows] == [
        ("DeviceX", "a.hpp", 1),
        ("DeviceX", "b.hpp", 2),
    ]
    assert [r.id for r in out.rows] == [1, 2]


_ident = st.from_regex(r"[A-Z][A-Za-z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_ident, st.sampled_from(["type", "value", "value_default", "type_default"])),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[0],
    )
)
def test_template_params_round_trip(params):
    parts = []
    for name, kind in params:
        parts.append(
            {
                "type": f"typename {name}",
                "value": f"index_t {name}",
                "value_default": f"index_t {name} = 4",
                "type_default": f"typename {name} = float",
            }[kind]
        )
    src = f"template <{', '.join(parts)}> struct DeviceProp : public BaseOperator {{}};".encode()
    tree = cpp.parse(src)
    plist = cpp.find(tree.root_node, "template_parameter_list")[0]
    got = cpp.template_params(plist, src)
    assert [p["name"] for p in got] == [n for n, _ in params]
    assert [p["kind"] for p in got] == [
        "type" if k.startswith("type") else "value" for _, k in params
    ]
    assert [p["default"] for p in got] == [
        {"value_default": "4", "type_default": "float"}.get(k) for _, k in params
    ]

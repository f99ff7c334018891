"""ck.factories: factory headers -> (add function, interface, data types, layouts, guards)."""

from __future__ import annotations

from ckkb.extract import factories as fa

FAC = "library/include/ck/library/tensor_operation_instance/gpu"
P = "device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn"


def _rows(fixtures):
    root = fixtures / "ck_mini"
    out = []
    for p in fa.STAGE.files(root):
        rel = p.relative_to(root).as_posix()
        out.extend(fa.STAGE.extract(root, rel, p.read_bytes()).rows)
    return out


def test_factory_calls_bind_the_is_same_chain(fixtures):
    rows = [r for r in _rows(fixtures) if r.kind == "call"]
    assert [(r.function, r.line) for r in rows] == [
        (f"add_{P}_comp_default_instances", 40),
        (f"add_{P}_mem_v1_default_instances", 41),
    ]
    r = rows[0]
    assert r.file == f"{FAC}/gemm_universal.hpp"
    assert r.interface == "DeviceGemmV2"
    assert r.dtypes == ["bhalf_t", "bhalf_t", "bhalf_t"]
    assert r.layouts == ["Row", "Col", "Row"]
    assert r.guards == ["#ifdef CK_USE_XDL", "#ifdef CK_ENABLE_BF16"]


def test_factory_declarations(fixtures):
    rows = [r for r in _rows(fixtures) if r.kind == "declaration"]
    assert [r.function for r in rows] == [
        f"add_{P}_comp_default_instances",
        f"add_{P}_mem_v1_default_instances",
    ]
    assert rows[0].interface == "DeviceGemmV2" and rows[0].dtypes == ["BF16", "BF16", "BF16"]
    assert rows[0].layouts == ["Row", "Col", "Row"] and rows[0].guards == ["#ifdef CK_ENABLE_BF16"]


def test_else_branch_and_unbound_parameters():
    src = b"""
template <typename ADataType, typename ALayout>
struct DeviceOperationInstanceFactory<DeviceFoo<ALayout, ADataType, PassThrough>>
{
    static auto GetInstances()
    {
#ifdef CK_ENABLE_FP16
        if constexpr(is_same_v<ADataType, half_t>) { add_device_foo_f16_instances(op_ptrs); }
#else
        add_device_foo_any_instances(op_ptrs);
#endif
    }
};
"""
    rows = fa.extract_file("x.hpp", src).rows
    by = {r.function: r for r in rows}
    assert by["add_device_foo_f16_instances"].dtypes == ["half_t"]
    assert by["add_device_foo_f16_instances"].layouts == ["ALayout"]  # unbound: keeps its name
    assert by["add_device_foo_f16_instances"].guards == ["#ifdef CK_ENABLE_FP16"]
    assert by["add_device_foo_any_instances"].guards == ["#else of #ifdef CK_ENABLE_FP16"]
    assert by["add_device_foo_any_instances"].dtypes == ["ADataType"]


def test_binary_and_malformed_headers_are_reported():
    res = fa.extract_file("junk.hpp", b"\x00\x00add_\xff\xfe" * 50)
    assert res.diagnostics and "binary" in res.diagnostics[0].message and not res.rows
    res = fa.extract_file("bad.hpp", b"struct DeviceOperationInstanceFactory< { add_x_instances(\n")
    assert (
        res.diagnostics
        and res.diagnostics[0].line == 1
        and "malformed" in res.diagnostics[0].message
    )


def test_instance_header_without_factory_names_is_not_read():
    # an instance header: lists (an #if inside the tuple trips an unmasked parse) and only the
    # registration helper's name; no factory function, so no rows and no "malformed" warning
    src = (
        b"template <int N>\nusing my_instances = std::tuple<\n#if defined CK_ENABLE_FP8\n"
        b"  DeviceOp<N, 1>\n#endif\n>;\n"
        b"void f(V& v) { add_device_operation_instances(v, my_instances<2>{}); }\n"
    )
    res = fa.extract_file("gpu/sub/x_instance.hpp", src)
    assert res.rows == [] and res.diagnostics == []
    # the same file declaring a factory function is read (and its damage reported)
    res = fa.extract_file(
        "gpu/sub/x_instance.hpp",
        src + b"void add_my_f16_instances(std::vector<std::unique_ptr<I<F16>>>& v);\n",
    )
    assert [r.function for r in res.rows] == ["add_my_f16_instances"]


def test_extern_template_declarations_are_not_malformed():
    # CK 2024-10's reduce headers: only explicit instantiation declarations of an add function
    # (valid C++ that tree-sitter-cpp does not parse); 74 of them were reported as malformed
    decl = (
        b"extern template void add_device_reduce_instance_blockwise<BF16, F32, BF16, 4, 3, "
        b"ReduceAdd, PassThrough, PassThrough, false, false>(std::vector<DeviceReducePtr<BF16, "
        b"F32, BF16, 4, 3, ReduceAdd, PassThrough, PassThrough, false, false>>&);\n"
    )
    src = b"namespace ck {\n// clang-format off\n" + decl * 3 + b"}\n"
    res = fa.extract_file("gpu/reduce/device_reduce_instance_blockwise_b16_add.hpp", src)
    assert res.diagnostics == [] and res.rows == []
    # real damage next to them is still reported
    res = fa.extract_file("gpu/reduce/x.hpp", src + b"struct DeviceOperationInstanceFactory< {\n")
    assert len(res.diagnostics) == 1
    assert "malformed" in res.diagnostics[0].message

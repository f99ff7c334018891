"""CK instance lists, their entries, and the device-op templates that name their fields.

Owned by the instance extractor (ckkb/extract/instances.py, ckkb/extract/templates.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import col, table


@table(
    "device_ops",
    "Device-op class templates declared in "
    "include/ck/tensor_operation/gpu/device/impl/*.hpp, with their "
    "template parameter names in order: the names "
    "instance fields use. A name may occur twice when two "
    "headers define the same class template (CK's b_scale "
    "header redefines DeviceGemm_Xdl_CShuffleV3); "
    "instances.template_file says which one an instance uses.",
    pk="id",
    indexes=(("name",),),
)
@dataclass(kw_only=True, slots=True)
class DeviceOpRow:
    id: int = col("device-op id", 0)
    name: str = col("class template name, e.g. DeviceGemm_Xdl_CShuffleV3")
    file: str = col("header, relative to the CK root")
    line: int = col("line of the template declaration")
    params: list[Any] = col(
        'template parameters in order: [{"name", "kind": '
        '"type"|"value"|"pack", "type", "default"}]',
        json=True,
    )
    base: str | None = col("first base class (the device-op interface), e.g. DeviceGemmV2", None)
    base_args: list[Any] = col(
        "template arguments of the first base class, as written", json=True, default=[]
    )


@table(
    "instance_lists",
    "Every `using NAME = std::tuple<...>` instance list "
    "under library/src/tensor_operation_instance/gpu/ "
    "(sources, headers and CMake .in templates).",
    pk="id",
    indexes=(("name",), ("dir",)),
    fts=("name", "file"),
)
@dataclass(kw_only=True, slots=True)
class InstanceListRow:
    id: int = col("list id")
    name: str = col(
        "alias name, e.g. device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"
    )
    dir: str = col("directory right under gpu/, e.g. gemm_universal")
    file: str = col("file, relative to the CK root")
    line: int = col("line of the `using` declaration")
    template_params: list[Any] = col(
        'the alias\'s own template parameters: [{"name", "type"}]', json=True
    )
    comment: str = col(
        "the comment block just above the declaration, e.g. 'instances not working on gfx950'", ""
    )
    entries: int = col("active (not commented-out) entries", 0)
    commented_out: int = col("commented-out entries", 0)
    guard: str = col(
        "preprocessor conditions around the declaration, joined with && ('' when none)", ""
    )
    alias_of: str = col(
        "for `using NAME = other_list<args>;`: that instantiation "
        "as written (the entries are other_list's, with its "
        "template parameters bound to args; their file/line "
        "point into other_list); '' for a std::tuple list",
        "",
    )
    cmake_vars: list[Any] = col(
        "`@VAR@` tokens of a CMake .in template found in the declaration", json=True, default=[]
    )


@table(
    "instances",
    "One row per tuple entry of an instance list: its "
    "device-op template, raw and alias-resolved arguments, "
    "fields named by the device op's own template parameters, and normalised cross-op columns.",
    pk="id",
    indexes=(("list_id",), ("template",), ("dir",), ("tile_m", "tile_n", "tile_k")),
    fts=("template", "list_name", "file"),
)
@dataclass(kw_only=True, slots=True)
class InstanceRow:
    id: int = col("instance id")
    list_id: int = col("instance_lists.id")
    list_name: str = col("instance list alias name")
    dir: str = col("directory right under gpu/")
    file: str = col("file, relative to the CK root")
    line: int = col("line of the entry")
    ordinal: int = col("0-based position in its tuple (commented-out entries counted in place)")
    template: str = col("device-op template, e.g. DeviceGemm_Xdl_CShuffleV3")
    template_file: str | None = col(
        "header defining that template (device_ops.file); NULL when unknown", None
    )
    device_op_id: int | None = col(
        "device_ops.id of the template the fields were named from; NULL when unknown", None
    )
    status: str = col("active | commented_out")
    reason: str = col("nearest reason comment above the entry, e.g. 'AGPR Spill'", "")
    guard: str = col(
        "preprocessor conditions around the entry (including the list's), joined with &&, e.g. "
        "'defined(CK_ENABLE_FP8)'; an #else branch reads '!(cond)'",
        "",
    )
    args: list[Any] = col("template arguments as written", json=True, default=[])
    resolved: list[Any] = col(
        "arguments with the file's aliases resolved (S<8,32,1> -> [8,32,1], BF16 -> bhalf_t)",
        json=True,
        default=[],
    )
    fields: dict[str, Any] = col(
        "CK template parameter name -> resolved value "
        "(parameters the entry leaves out get the op's default)",
        json=True,
        default={},
    )
    defaulted: list[Any] = col(
        "parameters whose value in `fields` is the op's default, not written in the entry",
        json=True,
        default=[],
    )
    mapping: str = col(
        "how fields were named: ok | arity_mismatch (argument "
        "count outside the op's range) | unknown_template "
        "(no device_ops row) | nested_list (entry is another list) | not_template | "
        "not_device_op (entry is a class of the tree with no device-op base: a configuration)",
        "ok",
    )
    # Normalised cross-op columns (ckkb.fields.normalise derives them, in one place).
    a_layout: str | None = col("A layout: Row | Col (or a conv layout)", None)
    b_layout: str | None = col("B layout", None)
    c_layout: str | None = col("C/E layout", None)
    a_dtype: str | None = col("A data type (C++ name after alias resolution)", None)
    b_dtype: str | None = col("B data type", None)
    c_dtype: str | None = col("C/E data type", None)
    block_size: int | None = col("threads per block (BlockSize)", None)
    tile_m: int | None = col("MPerBlock", None)
    tile_n: int | None = col("NPerBlock", None)
    tile_k: int | None = col("KPerBlock (K0PerBlock*K1 for ops that split K)", None)
    mfma_m: int | None = col("MPerXDL / MPerWMMA", None)
    mfma_n: int | None = col("NPerXDL / NPerWMMA", None)
    xdl_m: int | None = col("MXdlPerWave / MRepeat", None)
    xdl_n: int | None = col("NXdlPerWave / NRepeat", None)
    waves_m: int | None = col("waves along M = MPerBlock / (MPerXDL * MXdlPerWave)", None)
    waves_n: int | None = col("waves along N", None)
    ak1: int | None = col("AK1", None)
    bk1: int | None = col("BK1", None)
    pipeline: str | None = col("block GEMM pipeline version (v1..v5) or PipelineVersion", None)
    scheduler: str | None = col("Intrawave | Interwave | LoopScheduler value", None)
    padding: str | None = col(
        "GemmSpecialization value, or the list parameter name when bound per registration", None
    )

"""Tables for instance names: each device op's GetTypeString() schema, and the printed-name key of
every (instance, registration) so a name from a ckProfiler log finds the line that declared it.

Owned by ckkb/extract/typestrings/ (stage ck.typestrings) and ckkb/names/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import col, table


@table(
    "name_schemas",
    "One row per GetTypeString() implementation under "
    "include/ck/tensor_operation/gpu/device/impl/: the "
    "sequence of literals and template parameters it "
    "streams, read with tree-sitter. `ckkb parse` maps a "
    "printed name to CK parameter names with it.",
    pk="id",
    indexes=(("device_op",), ("status",)),
    fts=("device_op", "op"),
)
@dataclass(kw_only=True, slots=True)
class NameSchemaRow:
    id: int = col("schema id")
    device_op: str = col(
        "C++ class template that defines GetTypeString(), e.g. DeviceGemm_Xdl_CShuffleV3"
    )
    op: str | None = col(
        "the op name it prints first, e.g. DeviceGemmXdlUniversal (NULL when none is literal)", None
    )
    ops: list[Any] = col(
        "every op name it can print (a conditional may choose between two)", json=True, default=[]
    )
    file: str = col("header, relative to the CK root")
    line: int = col("line of GetTypeString()")
    tokens: list[Any] = col(
        'the streamed sequence: [{"lit": text} | {"ref": param, '
        '"conv": value|spec|layout_initial|layout_name|enum|at, '
        '"kind": int|bool|type|enum, "map", "index", "default"} | '
        '{"derived": name, "expr"} | {"alt": [[...], [...]], "cond"}]',
        json=True,
        default=[],
    )
    params: list[Any] = col(
        'the class template parameters: [{"name", "kind", "type", "default"}]',
        json=True,
        default=[],
    )
    status: str = col(
        "matched (literals and template parameters only) | "
        "partial (has derived or conditional parts) | unsupported"
    )
    reasons: list[Any] = col(
        "why partial or unsupported, e.g. 'derived: PrefetchStages (computed at run time)'",
        json=True,
        default=[],
    )
    example: str | None = col("a name rendered from the schema with placeholder values", None)


@table(
    "instance_keys",
    "Per (instance, registration binding): the key its "
    "printed name carries (op, padding, layouts, block size, "
    "tile, MFMA shape, waves, vector widths, scheduler, "
    "pipeline) and the printed name itself where the schema "
    "has no run-time values. `ckkb locate` looks names up here.",
    pk="id",
    indexes=(("key",), ("instance_id",), ("registration_id",), ("op",)),
    fts=("printed_name", "key", "list_name"),
)
@dataclass(kw_only=True, slots=True)
class InstanceKeyRow:
    id: int = col("row id")
    key: str = col("printed name without whitespace, run-time (derived) values as '*'")
    printed_name: str | None = col(
        "the exact name GetTypeString() prints (NULL when it has derived values)", None
    )
    complete: bool = col("every value of the name is known statically (printed_name is set)", False)
    derived: list[Any] = col(
        "run-time values left out of the key, e.g. ['PrefetchStages', 'AMmaKStride']",
        json=True,
        default=[],
    )
    op: str | None = col("printed op name", None)
    device_op: str = col("device-op class template")
    schema_id: int = col("name_schemas.id")
    instance_id: int = col("instances.id")
    registration_id: int | None = col(
        "registrations.id whose bindings were applied (NULL: the list was never registered)", None
    )
    bindings: dict[str, Any] = col(
        "list template parameter -> value bound by the registration", json=True, default={}
    )
    status: str = col(
        "the entry's status: active | commented_out (a commented-out entry is not compiled)",
        "active",
    )
    list_name: str = col("instance list alias")
    file: str = col("file of the instance entry")
    line: int = col("line of the instance entry")
    padding: str | None = col("GemmSpecialization as printed", None)
    a_layout: str | None = col("A layout", None)
    b_layout: str | None = col("B layout", None)
    c_layout: str | None = col("C layout", None)
    block_size: int | None = col("BlockSize", None)
    tile_m: int | None = col("MPerBlock", None)
    tile_n: int | None = col("NPerBlock", None)
    tile_k: int | None = col("KPerBlock (K0PerBlock*K1 where split)", None)
    mfma_m: int | None = col("MPerXDL", None)
    mfma_n: int | None = col("NPerXDL", None)
    xdl_m: int | None = col("MXdlPerWave", None)
    xdl_n: int | None = col("NXdlPerWave", None)
    waves_m: int | None = col("waves along M", None)
    waves_n: int | None = col("waves along N", None)
    a_vec: int | None = col("ABlockTransferSrcScalarPerVector", None)
    b_vec: int | None = col("BBlockTransferSrcScalarPerVector", None)
    scheduler: str | None = col("block GEMM / loop scheduler", None)
    pipeline: str | None = col("pipeline version", None)

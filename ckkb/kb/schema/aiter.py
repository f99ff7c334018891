"""Tables for the aiter part of the knowledge base (declared with @table; see base.py).

Owned by ckkb/extract/aiter*.py (kernel lists, tuner facts, runtime configs, config CSVs) and
ckkb/audit/ (findings). Paths are repo-style: `aiter/configs/x.csv`, `csrc/ck_gemm_a8w8/...`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import col, table


@table(
    "aiter_kernel_lists",
    "Every dict of kernel instances in aiter's CK kernel-list "
    "files (csrc/ck_*/*_common.py, *_instance.py), read "
    "statically with libcst: `kernels_list`, `default_kernels_dict`, per-arch lists.",
    pk="id",
    indexes=(("op",), ("file",)),
)
@dataclass(kw_only=True, slots=True)
class AiterKernelListRow:
    id: int = col("list id")
    op: str = col("kernel directory without the ck_ prefix, e.g. gemm_a8w8")
    file: str = col("file, repo-style (csrc/ck_gemm_a8w8/gemm_a8w8_common.py)")
    line: int = col("line of the assignment")
    name: str = col("variable name, e.g. kernels_list")
    class_name: str = col("dataclass the entries instantiate, e.g. kernelInstance")
    fields: list[Any] = col("the dataclass fields in declaration order", json=True, default=[])
    entries: int = col("entries in the dict literal (every key written, duplicates included)", 0)
    duplicate_ids: list[Any] = col(
        "ids written more than once in the literal (Python keeps the last)", json=True, default=[]
    )
    arch: str | None = col("arch named by the list's variable name (e.g. _gfx950), if any", None)
    derived: bool = col("built by module code (e.g. expand_blockpercu(...)), not a literal", False)
    arch_when: list[Any] = col(
        "[[test, arg, outcome], ...]: the tests on get_gfx() that lead to this value of a derived "
        "list ([] = every arch)",
        json=True,
        default=[],
    )


@table(
    "aiter_kernels",
    "One row per entry of an aiter kernel list: its id, "
    "field values and the kernelName its `name` property "
    "composes (evaluated statically), plus normalised CK columns for joining with CK instances.",
    indexes=(("op", "kernel_id"), ("list_id",), ("name",)),
)
@dataclass(kw_only=True, slots=True)
class AiterKernelRow:
    list_id: int = col("aiter_kernel_lists.id")
    op: str = col("kernel directory without the ck_ prefix")
    list_name: str = col("variable name of the dict")
    file: str = col("file, repo-style")
    line: int = col("line of the entry")
    kernel_id: int | None = col("the dict key when it is an integer (the CSV kernelId)", None)
    key: str = col("the dict key as written")
    values: dict[str, Any] = col("field -> value (defaults filled in)", json=True, default={})
    name: str | None = col(
        "kernelName the name property gives (NULL when it could not be evaluated)", None
    )
    shadowed: bool = col(
        "written again later in the same literal (Python keeps only the last)", False
    )
    duplicate_of: str | None = col(
        "key of an earlier entry in the same dict with identical field values", None
    )
    block_size: int | None = col("BLOCK_SIZE", None)
    tile_m: int | None = col("MPerBLOCK", None)
    tile_n: int | None = col("NPerBLOCK", None)
    tile_k: int | None = col("KPerBLOCK", None)
    mfma_m: int | None = col("WAVE_TILE_M / MPerXDL", None)
    mfma_n: int | None = col("WAVE_TILE_N / NPerXDL", None)
    pipeline: str | None = col("pipeline version as v<N>", None)
    scheduler: str | None = col("Intrawave | Interwave", None)


@table(
    "aiter_tuner_options",
    "Command-line options of aiter's tuners "
    "(aiter/utility/base_tuner.py and the per-op *_tune.py): flags, "
    "action, default, read statically.",
    indexes=(("tuner",), ("option",)),
)
@dataclass(kw_only=True, slots=True)
class AiterTunerOptionRow:
    tuner: str = col("tuner: base (base_tuner.py) or the *_tune.py file stem")
    op: str | None = col("kernel directory of a per-op tuner (without ck_)", None)
    file: str = col("file, repo-style")
    line: int = col("line of the add_argument call (or of the ARG_DEFAULTS entry)")
    option: str = col("long option, e.g. --splitK")
    flags: list[Any] = col("every flag, e.g. ['-k', '--splitK']", json=True, default=[])
    dest: str | None = col("argparse dest", None)
    action: str | None = col("argparse action, e.g. store_true", None)
    default: str | None = col(
        "default as JSON: a literal, the ARG_DEFAULTS entry "
        "it resolves to, or the expression text as a string",
        None,
        json=True,
    )
    type: str | None = col("argparse type", None)
    help: str | None = col("help text", None)
    read: bool = col(
        "whether the tuner's module or base_tuner.py reads args.<dest> (an option no code reads "
        "changes nothing the tuner does)",
        False,
    )


@table(
    "aiter_runtime_configs",
    "Each tuned config the aiter runtime loads (aiter/jit/core.py): "
    "the environment variable it reads, its default "
    "path, the model_configs files merged in by default, and the merge rule of that aiter version.",
    pk="op",
)
@dataclass(kw_only=True, slots=True)
class AiterRuntimeConfigRow:
    op: str = col("op family: the env var suffix, lower case (e.g. gemm_a8w8_blockscale)")
    env_var: str = col(
        "variable the runtime reads, e.g. AITER_CONFIG_GEMM_A8W8 (never the _FILE name)"
    )
    attribute: str | None = col(
        "the resolved-path attribute of aiter.jit.core, "
        "e.g. AITER_CONFIG_GEMM_A8W8_FILE (not an env var)",
        None,
    )
    tuned_name: str | None = col("merge name passed to get_config_file, e.g. a8w8_tuned_gemm", None)
    default_path: str = col("default path, repo-style")
    default_exists: bool = col("whether the default path exists in the tree")
    untuned_path: str | None = col("untuned CSV whose columns are the merge key", None)
    merge_key: list[Any] = col("merge key columns (the untuned CSV header)", json=True, default=[])
    model_configs: list[Any] = col(
        "model_configs/ files merged in when the env var is unset", json=True, default=[]
    )
    merge_rule: str = col(
        "merge rule id recognised in core.py (see ckkb.extract.aiter_tuner_reader.MERGE_RULES)",
        "unknown",
    )
    merge_rule_line: int | None = col("core.py line the rule was read from", None)
    merge_evidence: dict[str, Any] = col(
        "features of update_config_files that identified the rule -> core.py line",
        json=True,
        default={},
    )
    merge_fills_gfx: bool = col(
        "whether update_config_files handles a gfx column (fills it from cu_num)", False
    )
    kernel_list_file: str | None = col("kernel-list file the op's tuner imports", None)
    kernel_list: str | None = col("kernel-list variable the tuner indexes with kernelId", None)
    tuner_file: str | None = col("the op's *_tune.py", None)
    kernel_list_note: str | None = col("why the op's kernel list is not resolved, if not", None)
    kernel_list_candidates: list[Any] = col(
        "[file, list] of every kernel list the tuner imports (it picks one per row)",
        json=True,
        default=[],
    )
    kernel_list_choice: dict[str, Any] = col(
        "the tuner's getKernelName run per selector value (libtype, preshuffleB): params and "
        "cases [{when, file, list} | {when, none} | {when, error}]; {} when it indexes one list",
        json=True,
        default={},
    )
    file: str = col("core.py, repo-style")
    line: int = col("line of the env-var read")


@table(
    "aiter_config_files",
    "Every tuned / untuned config CSV read (aiter/configs, "
    "aiter/configs/model_configs), with its columns and op.",
    pk="id",
)
@dataclass(kw_only=True, slots=True)
class AiterConfigFileRow:
    id: int = col("file id")
    file: str = col("file, repo-style")
    kind: str = col("tuned | untuned | other")
    op: str | None = col("op family (aiter_runtime_configs.op) it belongs to, if known", None)
    columns: list[Any] = col("header columns", json=True, default=[])
    rows: int = col("data rows", 0)
    error: str | None = col("why the file could not be read (then it has no rows)", None)


@table(
    "aiter_config_rows",
    "One row per data line of a config CSV: key columns typed, every other column in `values`.",
    indexes=(("op",), ("file",), ("M", "N", "K"), ("cu_num",)),
)
@dataclass(kw_only=True, slots=True)
class AiterConfigRowRow:
    file_id: int = col("aiter_config_files.id")
    file: str = col("file, repo-style")
    line: int = col("1-based line in the file")
    op: str | None = col("op family", None)
    kind: str = col("tuned | untuned | other")
    gfx: str | None = col("gfx column (NULL when the file has none)", None)
    cu_num: int | None = col("cu_num", None)
    arch: str | None = col("gfx, else the arch the (cu_num) part table gives", None)
    M: int | None = col("M", None)
    N: int | None = col("N", None)
    K: int | None = col("K", None)
    B: int | None = col("batch (batched GEMM)", None)
    q_dtype_w: str | None = col("weight quant dtype", None)
    bias: str | None = col("bias", None)
    dtype: str | None = col("dtype", None)
    outdtype: str | None = col("outdtype", None)
    scaleAB: str | None = col("scaleAB", None)
    bpreshuffle: str | None = col("bpreshuffle", None)
    libtype: str | None = col("libtype (ck, asm, hipblaslt, ...)", None)
    kernelId: int | None = col("kernelId", None)
    kernelName: str | None = col("kernelName", None)
    splitK: int | None = col("splitK", None)
    us: float | None = col("tuned time, microseconds (warm cache)", None)
    values: dict[str, Any] = col("every column that is not a key column", json=True, default={})


@table(
    "aiter_audit_findings",
    "Findings of `ckkb audit` over the default aiter "
    "configs and kernel lists, computed at build time "
    "(rules that need CK rows or ingested measurements run in `ckkb audit --db`).",
    indexes=(("rule",), ("severity",), ("file",)),
)
@dataclass(kw_only=True, slots=True)
class AiterAuditFindingRow:
    rule: str = col("rule id, e.g. kernel-name-stale")
    severity: str = col("error | warning | note")
    file: str = col("file, repo-style (or as given)")
    line: int = col("1-based line, 0 for the whole file")
    op: str | None = col("op family", None)
    message: str = col("what is wrong")
    evidence: dict[str, Any] = col("the values the rule compared", json=True, default={})


@table(
    "aiter_row_kernels",
    "The kernel-list entry each tuned config row selects, as the audit resolves it "
    "(ckkb.audit.kernel_choice.resolve: the op's one list, the list its tuner's getKernelName "
    "picks for the row, or an imported list that agrees), one row per kernel column of the row.",
    indexes=(("op", "list_id", "kernel_id"), ("file", "line")),
)
@dataclass(kw_only=True, slots=True)
class AiterRowKernelRow:
    file: str = col("config file, repo-style")
    line: int = col("1-based line of the row")
    op: str | None = col("op family", None)
    column: str = col("the row's kernel column: kernelId, or kernelName1 / kernelName2 (MoE)")
    status: str = col(
        "checked (the row indexes list_id) | not_ck (no CK list is meant: an assembly kernel, "
        "a libtype the tuner names no CK list for) | no_kernel_list (reason says why)"
    )
    list_id: int | None = col("aiter_kernel_lists.id of the list the row indexes", None)
    kernel_id: int | None = col(
        "the row's kernelId (name-only MoE rows: the id of the entry its name is)", None
    )
    kernel_name: str | None = col("the row's kernelName (kernelName1 / kernelName2)", None)
    reason: str | None = col("the list as file:list, or why no list is known", None)


@table(
    "aiter_op_kernel_lists",
    "Every kernel list an op's tuned rows may index (each arch's value of a list built per arch; "
    "each getKernelName case), so kernels no row selects are listed too.",
    indexes=(("op",), ("list_id",)),
)
@dataclass(kw_only=True, slots=True)
class AiterOpKernelListRow:
    op: str = col("op family")
    list_id: int = col("aiter_kernel_lists.id")
    how: str = col(
        "list (the op's one list) | choice (a getKernelName case) | candidates | getter (a "
        "literal the MoE list getters copy for the op's rows)"
    )
    choice_case: dict[str, Any] = col(
        "the getKernelName case (selector values) that picks it", json=True, default={}
    )

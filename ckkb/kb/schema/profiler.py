"""Tables for the profiler part of the knowledge base (declared with @table; see base.py).

Built (from CK's `profiler/src/`, by ckkb/extract/profiler.py): `profiler_ops`, `profiler_args`,
`profiler_quirks`. Ingested (ckProfiler logs and race bundles, by ckkb/kb/ingest/, carried over by
every rebuild): `races`, `race_results`, `ingest_errors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import INGESTED, col, table


@table(
    "profiler_ops",
    "Every REGISTER_PROFILER_OPERATION in CK's profiler/src/: "
    "the ckProfiler op name, its description, where it "
    "is registered, the usage text it prints, and the "
    "device-op interfaces its profile_*_impl.hpp instantiates.",
    pk="name",
    fts=("name", "description"),
)
@dataclass(kw_only=True, slots=True)
class ProfilerOpRow:
    name: str = col("op name as typed after `ckProfiler`, e.g. gemm_universal")
    description: str = col("description registered with it, e.g. 'Universal GEMM'")
    file: str = col("source file, relative to the CK root")
    line: int = col("line of the REGISTER_PROFILER_OPERATION")
    function: str = col("the registered C++ function, e.g. profile_gemm_universal")
    gemm_family: bool = col(
        "GEMM-family op: its name contains 'gemm' (gemm, "
        "batched_gemm, grouped_gemm, fused GEMMs ...)"
    )
    usage: str = col(
        "the usage text the op prints when called with wrong arguments, literals concatenated", ""
    )
    usage_line: int | None = col("line of the first usage literal", None)
    legend_kind: str = col(
        "positional (arg1..argN) | options (--flags only) | none (no usage text found)", "none"
    )
    positional_args: int = col("number of positional arguments the legend names (arg1 counted)", 0)
    argc_allowed: list[Any] = col(
        "argc values the op's `if(argc != ...)` check accepts ([] when not a fixed list)",
        json=True,
        default=[],
    )
    impl_headers: list[Any] = col(
        "profiler/include/profiler/*_impl.hpp headers the source includes", json=True, default=[]
    )
    interfaces: list[Any] = col(
        "device-op interfaces the impl header asks "
        "DeviceOperationInstanceFactory for, e.g. ['DeviceGemm'], "
        "resolved through `using DeviceOp = ...`",
        json=True,
        default=[],
    )


@table(
    "profiler_args",
    "Each ckProfiler op's legend as its usage text prints "
    "it: one row per position (arg8 to 13 expanded), "
    "with the code table inside the text, plus --options of ops that take flags.",
    indexes=(("op", "position"),),
)
@dataclass(kw_only=True, slots=True)
class ProfilerArgRow:
    op: str = col("profiler_ops.name")
    position: int | None = col(
        "argv position as the legend numbers it (arg1 = the op name); NULL for --options", None
    )
    name: str = col(
        "what the position means, e.g. 'data type', 'M', 'StrideA', 'number of warm-up cycles'"
    )
    text: str = col("the legend entry as printed (continuation lines joined)")
    codes: dict[str, Any] = col(
        'code table inside the entry: {"0": "fp32", "1": "fp16", ...} ({} when none)',
        json=True,
        default={},
    )
    enum: dict[str, Any] = col(
        'enumerator names of the C++ enum the code indexes, when found: {"1": "MK_NK_MN"}',
        json=True,
        default={},
    )
    optional: bool = col("listed after 'optional:' or beyond the smallest accepted argc", False)
    default: str | None = col("default value the legend states, e.g. '1' for '(default 1)'", None)
    kind: str = col("positional | option", "positional")
    line: int = col("source line of the legend entry", 0)


@table(
    "profiler_quirks",
    "Behaviour of a ckProfiler op read from its source "
    "that changes what a result means, e.g. gemm_universal "
    "swapping M and N (with their strides) when N % 8 != 0 and M % 8 == 0.",
    indexes=(("op",),),
)
@dataclass(kw_only=True, slots=True)
class ProfilerQuirkRow:
    op: str = col("profiler_ops.name")
    kind: str = col("swap_args (two argv positions exchanged under a condition)")
    condition: str = col(
        "the C++ condition as written, argv indexes replaced by legend names in `summary`"
    )
    summary: str = col(
        "one sentence for people, e.g. 'when N % 8 != 0 && "
        "M % 8 == 0 the op swaps M<->N, StrideA<->StrideB'"
    )
    details: dict[str, Any] = col(
        '{"swaps": [[8, 9], [11, 12]], "names": [["M", "N"], '
        '...], "test": {"position", "mod", "op", "value"} list}',
        json=True,
        default={},
    )
    file: str = col("source file, relative to the CK root")
    line: int = col("line of the if statement")


@table(
    "races",
    "One ckProfiler run of one op on one shape, with the "
    "context it ran in (ingested from logs and bundles). "
    "Shape and arguments come from the command (via the op's "
    "legend) when known, else from the log's own lines.",
    pk="id",
    indexes=(("op", "dtype", "layout", "M", "N", "K"), ("arch",), ("sha256",)),
    kind=INGESTED,
)
@dataclass(kw_only=True, slots=True)
class RaceRow:
    id: int = col("race id")
    op: str | None = col("ckProfiler op, e.g. gemm (from the command or the log)", None)
    dtype: str | None = col(
        "data type label: fp16, bf16, fp32, int8, fp8 ... "
        "(legend code label or the Best line's datatype)",
        None,
    )
    dtype_code: int | None = col("arg2 data-type code as passed, when the command is known", None)
    layout: str | None = col(
        "layout name, e.g. mk_nk (A[m,k] * B[n,k]); from the "
        "legend code label or the Best line's A/B layouts",
        None,
    )
    layout_code: int | None = col("layout code as passed, when the command is known", None)
    M: int | None = col("M as ckProfiler reports it (after any swap the op made)", None)
    N: int | None = col("N", None)
    K: int | None = col("K", None)
    stride_a: int | None = col("StrideA", None)
    stride_b: int | None = col("StrideB", None)
    stride_c: int | None = col("StrideC", None)
    kbatch: int | None = col("split-K batch when the op takes one", None)
    verification: bool | None = col("verification requested (arg 'verification')", None)
    init: int | None = col("initialisation code", None)
    time_kernel: bool | None = col("time kernel requested", None)
    warmup: int | None = col(
        "warm-up cycles (from the command, else the log's 'Warm up N time' line)", None
    )
    iterations: int | None = col(
        "timed iterations (from the command, else 'Start running N times')", None
    )
    arch: str | None = col("GPU architecture, e.g. gfx942 (--arch or bundle host facts)", None)
    gpu: str | None = col("GPU marketing name (--gpu or host facts)", None)
    cu_count: int | None = col("compute units (--cu or host facts)", None)
    rocm: str | None = col("ROCm version (--rocm or host facts)", None)
    host: str | None = col("host name the race ran on", None)
    started_at: str | None = col("UTC time the race ran (bundle) or was ingested (plain log)", None)
    command: str | None = col(
        "the ckProfiler command line (--command, the bundle's argv, or a '# command:' line)", None
    )
    source_file: str = col("log or bundle path as given to ckkb ingest")
    source_line: int = col("first line of this race in that file (bundle: record line)", 1)
    sha256: str = col("sha256 of the ingested file (ingest_files.sha256)")
    instances_found: int | None = col("N of 'found N instances'", None)
    best_ms: float | None = col("time of the Best line", None)
    best_tflops: float | None = col("TFLOPS of the Best line", None)
    best_gbps: float | None = col("GB/s of the Best line", None)
    best_name: str | None = col(
        "instance named by the Best line (NULL when that line names none)", None
    )
    status: str = col("ok | crash | timeout | exit | garbage | no_output", "ok")
    failure: str | None = col(
        "cause when status is not ok, e.g. 'killed by signal 11', 'timeout after 30 s'", None
    )
    exit_code: int | None = col("ckProfiler exit status (bundles)", None)
    descriptors: list[Any] = col(
        'tensor descriptors printed: [{"name", "lengths", "strides"}]', json=True, default=[]
    )
    extra: dict[str, Any] = col(
        "anything else recorded (host facts, bundle keys)", json=True, default={}
    )
    name_tree: str | None = col(
        "the CK tree `ckkb ingest --tree` named: its schemas read this race's names (the "
        "race_names rows of that tree); NULL: each name is read by the tree chosen for it "
        "(the race_names row with chosen = 1)",
        None,
    )


@table(
    "race_results",
    "One row per instance line of a race: timed (Perf:), unsupported "
    "('does not support this problem') or failed verification.",
    pk="id",
    # no index on name: results are looked up by race; names join race_names through its primary key
    # (an index on 1M long names costs ~1.4 s of a bulk ingest)
    indexes=(("race_id",),),
    kind=INGESTED,
)
@dataclass(kw_only=True, slots=True)
class RaceResultRow:
    id: int = col("result id")
    race_id: int = col("races.id")
    ordinal: int = col("0-based order within the race")
    line: int = col("line in the ingested file")
    ms: float | None = col("average time in ms (NULL when not timed)", None)
    tflops: float | None = col("TFLOPS (NULL when the line has none, e.g. softmax)", None)
    gbps: float | None = col("GB/s", None)
    supported: bool = col("false for '... does not support this problem'", True)
    verified: bool | None = col(
        "verification outcome when printed (error: 0, Error: Incorrect results!), else NULL", None
    )
    kbatch: int | None = col("', KBatch N' suffix", None)
    name: str = col("instance string as printed (wrapped lines joined, KBatch suffix removed)")
    raw: str | None = col(
        "the text after 'GB/s,' as printed, when it differs from "
        "`name` (wrapped lines, KBatch suffix); NULL when identical",
        None,
    )


@table(
    "race_names",
    "Every distinct instance name seen in ingested races, parsed once per CK tree that read it "
    "(ckkb.names.parse with the name schemas of that tree, column tree): a name printed by two "
    "releases can read differently in each. A race ingested with `--tree` joins its tree's "
    "reading, any other race the name's chosen one. The view race_results_named joins it to "
    "every result.",
    pk=("name", "tree"),
    kind=INGESTED,
)
@dataclass(kw_only=True, slots=True)
class RaceNameRow:
    name: str = col("instance string as printed (race_results.name)")
    op_template: str | None = col("device-op name the string starts with", None)
    schema: str | None = col(
        "matched (a schema of this CK tree fits) | generic (older formats) | error", None
    )
    fields: dict[str, Any] = col(
        "parsed fields under CK's template parameter names, plus the printed Key: value properties",
        json=True,
        default={},
    )
    tree: str = col(
        "the CK tree whose name schemas read it ('' when the knowledge base had no CK tree): the "
        "one `ckkb ingest --tree` named, or the one chosen for the name (the first tree, in build "
        "order, whose schemas read it exactly, else the first tree)",
        "",
    )
    chosen: bool = col(
        "1 for the reading races ingested without --tree use: the first chosen reading stored "
        "for the name (a later ingest never replaces it); 0 for a reading only --tree asked for",
        False,
    )


@table(
    "ingest_errors",
    "Lines of ingested files that looked like ckProfiler output "
    "but could not be read, and bundle records that could "
    "not be stored: file, line, message. The rest of the file is stored.",
    pk="id",
    indexes=(("sha256",),),
    kind=INGESTED,
)
@dataclass(kw_only=True, slots=True)
class IngestErrorRow:
    id: int = col("error id")
    file: str = col("file as given to ckkb ingest")
    sha256: str = col("ingest_files.sha256")
    line: int = col("1-based line")
    message: str = col("what could not be read")
    text: str = col("the line as read (truncated to 500 characters)", "")
    race_id: int | None = col("race the line belongs to, when known", None)

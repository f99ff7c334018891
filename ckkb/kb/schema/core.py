"""Tables every knowledge base has, whatever was extracted into it."""

from __future__ import annotations

from dataclasses import dataclass

from ckkb.kb.schema.base import INGESTED, col, table


@table(
    "sources",
    "Source trees and files a build or an ingestion read: the provenance every row points to.",
    pk="id",
    provenance=False,
)
@dataclass(kw_only=True, slots=True)
class SourceRow:
    id: int = col("source id")
    kind: str = col("ck | aiter | log | bundle")
    path: str = col("absolute path of the tree or file as given")
    version: str | None = col("CK version from its CMakeLists.txt (ck trees)", None)
    wheel_version: str | None = col(
        "amd-aiter wheel version when the tree is the installed wheel", None
    )
    name: str | None = col(
        "tree name queries choose it by (`--tree NAME`, the `tree` parameter): given as NAME=PATH, "
        "else its version (its directory's name when it has none), plus @commit for a checkout",
        None,
    )
    commit: str | None = col("git commit of the tree when its path is a checkout", None)
    files: int | None = col("input files the build read from the tree", None)
    built: str | None = col("when this tree's rows were extracted (UTC, ISO 8601)", None)
    fingerprint: str | None = col(
        "hash of the tree's input files' contents and the extractors' versions: an unchanged "
        "tree's rows are copied, not extracted again",
        None,
    )
    rows_of: int | None = col(
        "id of the earlier tree of the same kind and fingerprint whose rows this tree reads (it "
        "has none of its own: `ckkb.kb.build.shared_rows`); null when it holds its own",
        None,
    )


@table(
    "dtype_spellings",
    "ckkb's one vocabulary of data types (ckkb/vocabulary.py), for SQL: every spelling sources, "
    "logs, aiter and users write, with the data type it names.",
    pk="spelling",
    provenance=False,
)
@dataclass(kw_only=True, slots=True)
class DtypeSpellingRow:
    spelling: str = col("a way of writing the data type (`bf16`, `BF16`, `bhalf_t`, `ck::bhalf_t`)")
    dtype: str = col("the canonical word, as in CK file names (`bf16`, `f16`, `f8`)")
    label: str = col("the word ckProfiler's legends use, as race rows store it (`fp16`)")
    cpp: str = col("the C++ element type instance rows carry (`half_t`)")


@table(
    "build_info",
    "Facts about the build that produced this file (schema version, ckkb version, timing).",
    pk="key",
    provenance=False,
)
@dataclass(kw_only=True, slots=True)
class BuildInfoRow:
    key: str = col("fact name")
    value: str = col("fact value")


@table(
    "diagnostics",
    "Everything an extractor could not read, with file and line: nothing is dropped silently.",
    indexes=(("stage",), ("file",)),
)
@dataclass(kw_only=True, slots=True)
class DiagnosticRow:
    stage: str = col("extractor that reported it")
    file: str = col("file, relative to its source tree")
    line: int = col("1-based line, 0 for the whole file")
    severity: str = col("warning | error")
    message: str = col("what went wrong")


@table(
    "ingest_files",
    "Every log, bundle or CSV ingested, by content hash, so re-ingesting adds nothing.",
    pk="sha256",
    kind=INGESTED,
    provenance=False,
)
@dataclass(kw_only=True, slots=True)
class IngestFileRow:
    sha256: str = col("sha256 of the file's bytes")
    path: str = col("path as given to `ckkb ingest`")
    kind: str = col("ckprofiler_log | race_bundle | harness_bundle | ...")
    ingested_at: str = col("UTC time of ingestion (ISO 8601)")
    rows_added: int = col("rows this file added", 0)

"""aiter's tuned and untuned config CSVs: every row with its file and line, key columns typed.

Reading is strict about what it cannot read (not UTF-8, binary, empty, wrong delimiter, ragged
rows) and says so with file and line; it never raises. The op family of a file is resolved in
`combine` (and by the audit) from the runtime config names of core.py.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ckkb.archs import parts_for
from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_tuners import config_paths as config_paths  # listed there
from ckkb.extract.aiter_tuners import display_rel, package_dir, stage_paths, untuned_name
from ckkb.kb.schema.aiter import AiterConfigFileRow, AiterConfigRowRow, AiterRuntimeConfigRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

STAGE_NAME = "aiter.configs"

KEY_COLUMNS = (
    "gfx",
    "cu_num",
    "M",
    "N",
    "K",
    "q_dtype_w",
    "B",
    "bias",
    "dtype",
    "outdtype",
    "scaleAB",
    "bpreshuffle",
    "libtype",
)
_KEY_SET = frozenset(KEY_COLUMNS)  # config_rows tests every column of every row against it
INT_KEYS = ("cu_num", "M", "N", "K", "B")
TYPED = ("kernelId", "kernelName", "splitK", "us")


@dataclass
class ConfigTable:
    """One parsed CSV. `rows` are (line, {column: value}), values typed (int, float, str, None)."""

    rel: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    error_line: int = 0
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, message): rows skipped

    @property
    def kind(self) -> str:
        name = Path(self.rel).name
        if "untuned" in name:
            return "untuned"
        if "tuned" in name or "kernelName" in self.columns or "us" in self.columns:
            return "tuned"
        return "other"


def parse_value(s: str) -> Any:
    s = s.strip()
    if s == "":
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def read_csv(rel: str, data: bytes) -> ConfigTable:
    t = ConfigTable(rel)
    if b"\x00" in data[:65536]:
        t.error, t.error_line = (
            "binary data (NUL bytes), not a CSV",
            data[: data.index(b"\x00")].count(b"\n") + 1,
        )
        return t
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        t.error = f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        t.error_line = data[: e.start].count(b"\n") + 1
        return t
    if not text.strip():
        t.error, t.error_line = "empty file: no header line", 1
        return t
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
        while not any(h.strip() for h in header):
            header = next(reader)
    except StopIteration:
        t.error, t.error_line = "empty file: no header line", 1
        return t
    except csv.Error as e:
        t.error, t.error_line = f"malformed CSV header: {e}", 1
        return t
    header_line = reader.line_num
    cols = [h.strip() for h in header]
    if len(cols) == 1:
        for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes")):
            if sep in header[0]:
                t.error, t.error_line = (
                    f"wrong delimiter: the header is separated by {name}, aiter reads commas",
                    header_line,
                )
                return t
    if len(set(cols)) != len(cols):
        dup = sorted({c for c in cols if cols.count(c) > 1})
        t.error, t.error_line = (
            f"duplicate column names in the header: {', '.join(dup)}",
            header_line,
        )
        return t
    t.columns = cols
    n = len(cols)
    rows = t.rows
    parsed: dict[str, Any] = {}  # a column's cells repeat down the file: each text parsed once

    def cell(text: str) -> Any:
        try:
            return parsed[text]
        except KeyError:
            value = parsed[text] = parse_value(text)
            return value

    try:
        for rec in reader:
            ln = reader.line_num
            if len(rec) != n:
                if not any(x.strip() for x in rec):
                    continue
                t.problems.append((ln, f"{len(rec)} fields, the header has {n}; row skipped"))
                continue
            rows.append((ln, dict(zip(cols, map(cell, rec), strict=True))))
    except csv.Error as e:
        t.problems.append((reader.line_num, f"malformed CSV: {e}; rest of file skipped"))
    return t


def arch_of(values: dict[str, Any]) -> str | None:
    gfx = values.get("gfx")
    if isinstance(gfx, str) and gfx:
        return gfx
    cu = values.get("cu_num")
    if isinstance(cu, int):
        return _arch_of_cu(cu)
    return None


@lru_cache(maxsize=256)
def _arch_of_cu(cu: int) -> str | None:
    """The one gfx of the parts with `cu` CUs (None if none or several).

    Cached (module state, pure function of `cu`): asked once per config row."""
    from ckkb.archs import PARTS

    archs = {p.gfx for p in PARTS if p.cu_num == cu}
    return archs.pop() if len(archs) == 1 else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _float(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def config_rows(file_id: int, t: ConfigTable, op: str | None) -> list[Any]:
    kind = t.kind
    out: list[Any] = [
        AiterConfigFileRow(
            id=file_id,
            file=t.rel,
            kind=kind,
            op=op,
            columns=t.columns,
            rows=len(t.rows),
            error=t.error,
        )
    ]
    for ln, v in t.rows:
        get = v.get
        us = _float(get("us"))
        out.append(
            AiterConfigRowRow(
                file_id=file_id,
                file=t.rel,
                line=ln,
                op=op,
                kind=kind,
                gfx=_str(get("gfx")),
                cu_num=_int(get("cu_num")),
                arch=arch_of(v),
                M=_int(get("M")),
                N=_int(get("N")),
                K=_int(get("K")),
                B=_int(get("B")),
                q_dtype_w=_str(get("q_dtype_w")),
                bias=_str(get("bias")),
                dtype=_str(get("dtype")),
                outdtype=_str(get("outdtype")),
                scaleAB=_str(get("scaleAB")),
                bpreshuffle=_str(get("bpreshuffle")),
                libtype=_str(get("libtype")),
                kernelId=_int(get("kernelId")),
                kernelName=_str(get("kernelName")),
                splitK=_int(get("splitK")),
                us=None if us is None or math.isnan(us) else us,
                values={
                    k: (None if isinstance(x, float) and math.isnan(x) else x)
                    for k, x in v.items()
                    if k not in _KEY_SET
                },
            )
        )
    return out


def diagnostics_of(t: ConfigTable) -> list[Diagnostic]:
    out = []
    if t.error:
        out.append(Diagnostic(t.rel, t.error_line, t.error, "error", STAGE_NAME))
    for ln, msg in t.problems:
        out.append(Diagnostic(t.rel, ln, msg, "warning", STAGE_NAME))
    return out


def op_of_file(rel: str, runtime: list[AiterRuntimeConfigRow]) -> str | None:
    """The op whose runtime config reads the CSV at `rel`: its default path, else the longest
    tuned-file name the file's name contains (untuned files by their untuned name)."""
    name = Path(rel).name
    stem = name[:-4] if name.endswith(".csv") else name
    for rc in runtime:
        if rc.default_path and Path(rc.default_path).name == name:
            return rc.op
    for rc in sorted(runtime, key=lambda r: -len(r.tuned_name or "")):
        if not rc.tuned_name:
            continue
        if "untuned" in stem:
            if untuned_name(rc.tuned_name) in stem:
                return rc.op
        elif rc.tuned_name in stem:
            return rc.op
    return None


class ConfigsStage:
    name = STAGE_NAME
    version = "2"
    tree = "aiter"
    reads = ("aiter_runtime_configs",)
    writes = ("aiter_config_files", "aiter_config_rows")
    combine_cost = 0.02

    def files(self, root: Path) -> list[Path]:
        return stage_paths(Path(root), config_paths(package_dir(Path(root))))

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        t = read_csv(display_rel(rel), data)
        return FileResult(diagnostics=diagnostics_of(t), facts={"table": t})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        """Every file's rows, with the op whose runtime config reads it (the audit stage reads the
        parsed tables themselves, from this stage's facts)."""
        runtime = ctx.table_rows("aiter_runtime_configs")
        tables = [r.facts["table"] for _, r in sorted(results.items()) if "table" in r.facts]
        rows: list[Any] = []
        for i, t in enumerate(tables, start=1):
            rows += config_rows(i, t, op_of_file(t.rel, runtime))
        return StageResult(rows=rows)


STAGE = ConfigsStage()

__all__ = ["STAGE", "ConfigTable", "read_csv", "config_rows", "arch_of", "parts_for"]

"""Shapes to time: from a plain CSV (M,N,K[,dtype]) or from an aiter tuned/untuned config's rows.

Everything is validated before any GPU work starts: a zero, negative or non-integer dimension, an
unknown dtype or a file that is not a CSV stops the run with one line naming file and line.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ckkb import csvcheck, vocabulary
from ckkb.errors import CkkbError
from ckkb.harness.timing import Shape

DTYPES = ("bf16", "fp16", "fp8")


def parse_dtype(text: str) -> str | None:
    """bf16 | fp16 | fp8 for any spelling of those data types (aiter's configs write torch's
    names: `torch.bfloat16`); None for what the harness can't time."""
    word = vocabulary.label(text)
    return word if word in DTYPES else None


def parse_dtype_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    out = []
    for part in text.split(","):
        p = part.strip().lower()
        if not p:
            continue
        if p not in DTYPES:
            raise CkkbError(
                f"unsupported dtype {part.strip()!r} in --dtype",
                hint="use a comma-separated list of bf16, fp16, fp8",
            )
        if p not in out:
            out.append(p)
    return out or None


def _int(value: str | None, col: str, where: str) -> int:
    try:
        v = int(str(value).strip())
    except (TypeError, ValueError):
        raise CkkbError(f"{where}: {col} is not an integer: {value!r}") from None
    if v <= 0:
        raise CkkbError(
            f"{where}: {col} must be positive, got {v}",
            hint="every GEMM dimension must be at least 1",
        )
    if v > 2**31 - 1:
        raise CkkbError(f"{where}: {col} is too large: {v}")
    return v


def _opt_int(value: str | None) -> int | None:
    try:
        return int(str(value).strip()) if value not in (None, "") else None
    except ValueError:
        return None


def _opt_float(value: str | None) -> float | None:
    try:
        return float(str(value).strip()) if value not in (None, "") else None
    except ValueError:
        return None


def config_dtype(path: Path, row: dict[str, str]) -> str | None:
    """The operand dtype an aiter config row implies."""
    name = path.name.lower()
    for key in ("q_dtype_w", "dtype"):
        if row.get(key):
            return parse_dtype(row[key])
    if name.startswith(("a8w8", "asm_a8w8")):
        return "fp8"
    if name.startswith("a4w4"):
        return None
    return "bf16"


def read_shapes(
    path: str | Path,
    *,
    config: str | None = None,
    dtypes: list[str] | None = None,
    limit: int | None = None,
) -> list[Shape]:
    """Shapes from a CSV with columns M, N, K (and optionally dtype, kernelId, splitK, us, config,
    config_row). `config`, when given, is the repo-style name recorded for rows read from an aiter
    config file. `dtypes` times every shape in each listed dtype instead of the row's own.
    Duplicate (M, N, K, dtype) keep their first row."""
    p = Path(path)
    if not p.is_file():
        raise CkkbError(f"shapes file not found: {p}")
    data = p.read_bytes()
    if b"\0" in data[:4096]:
        raise CkkbError(f"{p}: binary file, expected a CSV with columns M,N,K")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CkkbError(f"{p}: not UTF-8 text, expected a CSV with columns M,N,K") from None
    reader = csv.DictReader(io.StringIO(text), skipinitialspace=True)
    fields = [f.strip() for f in (reader.fieldnames or [])]
    reader.fieldnames = fields
    missing = [c for c in ("M", "N", "K") if c not in fields]
    if missing:
        raise CkkbError(
            f"{p}:1: missing column(s) {', '.join(missing)}",
            hint="a shapes CSV needs a header with M,N,K",
        )
    out: list[Shape] = []
    seen: set[tuple[int, int, int, str]] = set()
    for i, row in enumerate(csvcheck.rows(reader, p), start=1):
        where = f"{p}:{i + 1}"
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue
        if None in row:  # more fields than the header
            raise CkkbError(f"{where}: more fields than the header has")
        M, N, K = (_int(row.get(c), c, where) for c in ("M", "N", "K"))
        if config is not None:
            own = config_dtype(p, row)
        elif row.get("dtype"):
            own = parse_dtype(row["dtype"])
            if own is None:
                raise CkkbError(
                    f"{where}: unsupported dtype {row['dtype']!r}", hint="bf16, fp16 or fp8"
                )
        else:
            own = "bf16"
        if own is None:
            continue
        for dt in dtypes or [own]:
            key = (M, N, K, dt)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                Shape(
                    M,
                    N,
                    K,
                    dt,
                    config=config or (row.get("config") or None),
                    config_row=i if config is not None else _opt_int(row.get("config_row")),
                    kernel_id=_opt_int(row.get("kernelId")),
                    splitk=_opt_int(row.get("splitK")),
                    tuner_us=_opt_float(row.get("us")),
                )
            )
            if limit is not None and len(out) >= limit:
                return out
    if not out:
        raise CkkbError(f"{p}: no shapes to time")
    return out


def resolve_config(name: str | Path) -> Path:
    """A config path as given, else the same name under the default aiter tree's configs dir
    (`--from-config bf16_tuned_gemm.csv`,
    `--from-config model_configs/llama70B_untuned_gemm_bf16.csv`)."""
    p = Path(name)
    if p.exists() or p.is_absolute():
        return p
    try:
        from ckkb import sources

        cand = sources.aiter_tree(None).configs_dir / p
    except CkkbError:
        return p
    return cand if cand.is_file() else p


def config_name(path: Path) -> str:
    """A repo-style name (aiter/configs/x.csv) when the file is inside the default aiter tree."""
    try:
        from ckkb import sources

        tree = sources.aiter_tree(None)
        return tree.rel(path.resolve())
    except Exception:
        return path.name

"""Normalised cross-op columns, derived in one place from CK's own template parameter names.

Every device op names its knobs a little differently (MPerXDL vs MPerXdl vs MPerWmma, K0PerBlock*K1
vs KPerBlock, BlkGemmPipelineVer vs PipelineVer). Instance rows (from source) and parsed names (from
ckProfiler output) both go through `normalise`, so one query can compare winners across ops.
"""

from __future__ import annotations

from typing import Any

NORMALISED = (
    "a_layout",
    "b_layout",
    "c_layout",
    "a_dtype",
    "b_dtype",
    "c_dtype",
    "block_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "mfma_m",
    "mfma_n",
    "xdl_m",
    "xdl_n",
    "waves_m",
    "waves_n",
    "ak1",
    "bk1",
    "pipeline",
    "scheduler",
    "padding",
)

# normalised column -> CK parameter names that carry it, first match wins
SYNONYMS: dict[str, tuple[str, ...]] = {
    "a_layout": ("ALayout", "ALay"),
    "b_layout": ("BLayout", "BLay"),
    "c_layout": ("CLayout", "ELayout", "CLay", "ELay"),
    "a_dtype": ("ADataType", "ADataType_", "AType"),
    "b_dtype": ("BDataType", "BDataType_", "BType"),
    "c_dtype": ("CDataType", "EDataType", "CType", "EType"),
    "block_size": ("BlockSize", "BlkSize"),
    "tile_m": ("MPerBlock", "MPerBlock_"),
    "tile_n": ("NPerBlock", "NPerBlock_"),
    "tile_k": ("KPerBlock", "KPerBlock_"),
    "mfma_m": ("MPerXDL", "MPerXdl", "MPerWmma", "MPerWMMA", "MPerXdl_"),
    "mfma_n": ("NPerXDL", "NPerXdl", "NPerWmma", "NPerWMMA", "NPerXdl_"),
    "xdl_m": ("MXdlPerWave", "MRepeat", "MRepeatPerWave", "MXdlPerWave_"),
    "xdl_n": ("NXdlPerWave", "NRepeat", "NRepeatPerWave", "NXdlPerWave_"),
    "ak1": ("AK1", "K1", "AK1Value"),
    "bk1": ("BK1", "K1", "BK1Value"),
    "pipeline": (
        "BlkGemmPipelineVer",
        "BlkGemmPipelineVersion",
        "PipelineVer",
        "PipelineVersion",
        "GemmPipelineVer",
    ),
    "scheduler": (
        "BlkGemmPipeSched",
        "BlkGemmPipelineScheduler",
        "LoopSched",
        "LoopScheduler",
        "GemmLoopScheduler",
    ),
    "padding": ("GemmSpec", "GemmSpecialization", "GemmSpecialization_"),
}

INT_COLUMNS = {
    "block_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "mfma_m",
    "mfma_n",
    "xdl_m",
    "xdl_n",
    "waves_m",
    "waves_n",
    "ak1",
    "bk1",
}

_LAYOUTS = {"RowMajor": "Row", "ColumnMajor": "Col", "Row": "Row", "Col": "Col"}


# memo of a pure function over the few hundred enum spellings CK uses: bounded, safe to keep
_ENUM_WORDS: dict[str, str | None] = {}


def enum_word(value: Any) -> str | None:
    """`BlockGemmPipelineVersion::v3` -> `v3`; `ck::tensor_layout::gemm::RowMajor` -> `Row`."""
    if value is None:
        return None
    if type(value) is str:
        try:
            return _ENUM_WORDS[value]
        except KeyError:
            pass
        w = _enum_word(value)
        if len(_ENUM_WORDS) < 100_000:
            _ENUM_WORDS[value] = w
        return w
    return _enum_word(str(value))


def _enum_word(s: str) -> str | None:
    if "::" in s:
        s = s.rsplit("::", 1)[-1]
    s = s.strip()
    if not s:
        return None
    return _LAYOUTS.get(s, s)


def as_int(value: Any) -> int | None:
    t = type(value)
    if t is int:
        return value
    if (
        value is None or t is list or t is dict
    ):  # common and never a number: no exception to pay for
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    s = str(value).strip().rstrip("uUlL")
    if not s or not (s[0].isdigit() or s[0] in "+-"):  # what int(s, 0) would refuse anyway
        return None
    try:
        return int(s, 0)
    except ValueError:
        return None


def _first(fields: dict[str, Any], names: tuple[str, ...]) -> Any:
    for n in names:
        if n in fields and fields[n] is not None:
            return fields[n]
    return None


# Per key set, how to normalise it (module state on purpose: a pure function of the key set,
# asked once per row; a build has a few dozen distinct key sets).
_PLANS: dict[tuple[str, ...], list[tuple[str, tuple[str, ...], bool]]] = {}


def _plan(keys: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], bool]]:
    """Per column, the synonyms a field set has (in preference order) and whether it is an int.
    One plan per device op's parameter names, so 13,000 instances look their names up once."""
    plan = _PLANS.get(keys)
    if plan is None:
        have = set(keys)
        plan = _PLANS[keys] = [
            (col, tuple(n for n in names if n in have), col in INT_COLUMNS)
            for col, names in SYNONYMS.items()
        ]
    return plan


def normalise(fields: dict[str, Any]) -> dict[str, Any]:
    """CK-named fields -> the normalised columns (None where the op has no such knob)."""
    out: dict[str, Any] = {}
    for colname, names, is_int in _plan(tuple(fields)):
        v = None
        for n in names:
            v = fields[n]
            if v is not None:
                break
        if is_int:
            out[colname] = v if type(v) is int else as_int(v)
        else:
            out[colname] = enum_word(v)
    if out["tile_k"] is None:
        k0 = as_int(_first(fields, ("K0PerBlock", "KPerBlock0")))
        k1 = as_int(_first(fields, ("K1", "AK1")))
        if k0 is not None and k1 is not None:
            out["tile_k"] = k0 * k1
    if out["ak1"] is None and out["bk1"] is not None and "K1" in fields:
        out["ak1"] = out["bk1"]
    for axis in ("m", "n"):
        tile, mfma, xdl = out[f"tile_{axis}"], out[f"mfma_{axis}"], out[f"xdl_{axis}"]
        out[f"waves_{axis}"] = (
            tile // (mfma * xdl) if tile and mfma and xdl and tile % (mfma * xdl) == 0 else None
        )
    return out


# The words a normalised `pipeline` / `scheduler` takes (CK's BlockGemmPipelineVersion and
# BlockGemmPipelineScheduler / LoopScheduler enumerators). Any other value is a template
# parameter's name (PipVer, BlkGemmPipeVer, ...): the registering call binds it.
PIPELINES = ("v1", "v2", "v3", "v4", "v5")
SCHEDULERS = {
    "Intrawave": "Intrawave",
    "Interwave": "Interwave",
    "Default": "Default",
    # CK's make_default_loop_scheduler() returns LoopScheduler::Default (Interwave only when CK is
    # built with CK_EXPERIMENTAL_DEFAULT_TO_INTER_WAVE_SCHEDULING)
    "make_default_loop_scheduler()": "Default",
}


def pipeline_word(value: Any) -> str | None:
    """`v3` for a pipeline version, None for a template parameter's name (or nothing)."""
    w = enum_word(value)
    return w if w in PIPELINES else None


def scheduler_word(value: Any) -> str | None:
    """`Intrawave` / `Interwave` / `Default` by name, None for a template parameter's name."""
    w = enum_word(value)
    return SCHEDULERS.get(w) if w else None

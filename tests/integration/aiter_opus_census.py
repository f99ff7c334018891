"""A second method for the opus rows of aiter 2026-08, written apart from ckkb's static
evaluator: the opus list module (csrc/opus_gemm/opus_gemm_common.py: `import os` and
`dataclasses` only, at import time) is run by Python itself (runpy, in a fresh namespace), and
the csv module reads the rows. No libcst, no ckkb code.

The bf16 GEMM tuner writes (solidx, kernelName) = (kid, kernels_list[kid].name) for its opus
rows; the blockscale tuner races gfx942_a8w8_kernels_list as libtype opus with kernelId = kid.
Classes: "ok", "stale" (the id's entry has another name), "unknown" (no such id)."""

from __future__ import annotations

import csv
import runpy
from collections import Counter
from pathlib import Path


def _lists(root: Path) -> dict[str, dict]:
    ns = runpy.run_path(str(root / "csrc" / "opus_gemm" / "opus_gemm_common.py"))
    return {
        n: {k: v.name for k, v in ns[n].items()}
        for n in ("kernels_list", "gfx942_a8w8_kernels_list")
    }


def _rows(files: list[Path]) -> list[dict[str, str]]:
    out = []
    for p in files:
        with open(p, newline="") as fh:
            rd = csv.reader(fh)
            head = [h.strip() for h in next(rd)]
            for rec in rd:
                if rec:
                    out.append({k: v.strip() for k, v in zip(head, rec, strict=False)})
    return out


def opus_census(root: Path) -> dict[str, Counter]:
    """{"bf16": Counter, "blockscale": Counter} of the libtype-opus rows of the runtime's
    bf16 GEMM configs and a8w8 blockscale (bpreshuffle) configs."""
    cfg = root / "aiter" / "configs"
    lists = _lists(root)

    def files(pattern: str) -> list[Path]:
        return sorted(
            p
            for d in (cfg, cfg / "model_configs")
            for p in d.glob(pattern)
            if "untuned" not in p.name
        )

    out: dict[str, Counter] = {}
    for key, pattern, col, lst in (
        ("bf16", "*bf16_tuned_gemm*.csv", "solidx", "kernels_list"),
        ("blockscale", "*a8w8_blockscale*tuned_gemm*.csv", "kernelId", "gfx942_a8w8_kernels_list"),
    ):
        c: Counter = Counter()
        for r in _rows(files(pattern)):
            if r.get("libtype") != "opus":
                continue
            kid = int(r[col])
            d = lists[lst]
            c["unknown" if kid not in d else "ok" if d[kid] == r["kernelName"] else "stale"] += 1
        out[key] = c
    return out


def _tuners_naming(root: Path, text: str) -> list[Path]:
    """The tuner files (`*tune.py`, `*_tuner.py` under csrc/, hsa/, gradlib/) whose text holds
    `text` (grep)."""
    out = []
    for d in ("csrc", "hsa", "gradlib"):
        for p in sorted((root / d).rglob("*.py")):
            if p.name.endswith(("tune.py", "_tuner.py")) and text in p.read_text(errors="replace"):
                out.append(p)
    return out


def unchecked_census(root: Path) -> dict[str, int]:
    """What the audit cannot check on aiter 2026-08, counted by csv and grep: fhmoe and the
    batched mxscale op have no tuner that imports their config (so no list to read). (The a8w8
    bpreshuffle tuner's FlyDSL rows are checked: aiter_flydsl_census.py.)"""
    cfg = root / "aiter" / "configs"
    out: dict[str, int] = {}
    assert not _tuners_naming(root, "AITER_CONFIG_FHMOE")
    names = 0
    for r in _rows([cfg / "tuned_fhmoe.csv"]):
        for c in ("kernelName1", "kernelName2"):
            x = r.get(c, "")
            names += bool(x) and x != "Null" and not x.startswith("_Z")
    out["fhmoe"] = names
    assert not _tuners_naming(root, "AITER_CONFIG_BATCHED_GEMM_A8W8_BLOCKSCALE_MXSCALE")
    out["batched_gemm_a8w8_blockscale_mxscale"] = len(
        _rows(sorted(cfg.glob("model_configs/*batched_gemm_a8w8_blockscale_mxscale*.csv")))
    )
    return out

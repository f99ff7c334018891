"""A second method for the aiter figures the tree matrix pins, written apart from ckkb's extractor:
regular expressions over core.py and Python's csv module over the config files (no libcst, no
ckkb code). It follows aiter 2026-08's jit/core.py by hand: get_config_file globs
model_configs/*{tuned_name}*.csv (not "untuned"), update_config_files keys on the untuned CSV's
columns plus cu_num, gfx and _tag where the file has them."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path


def _norm(x: str) -> str:
    x = x.strip()
    try:
        return repr(float(x))
    except ValueError:
        return x


def _rows(p: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(p, newline="", encoding="utf-8", errors="replace") as fh:
        r = list(csv.reader(fh))
    if not r:
        return [], []
    h = [c.strip() for c in r[0]]
    return h, [
        dict(zip(h, row, strict=True))
        for row in r[1:]
        if len(row) == len(h) and any(c.strip() for c in row)
    ]


def tuned_names(pkg: Path) -> list[str]:
    core = (pkg / "jit" / "core.py").read_text()
    return re.findall(r'get_config_file\(\s*"AITER_CONFIG_\w+",\s*\w+,\s*"(\w+)"', core)


def merged_files(pkg: Path, tuned_name: str, default: str) -> list[Path]:
    """The default path, then model_configs/*{tuned_name}*.csv without "untuned" (as globbed)."""
    mc = pkg / "configs" / "model_configs"
    return [pkg / "configs" / default] + sorted(
        p for p in mc.glob(f"*{tuned_name}*.csv") if "untuned" not in p.name
    )


def data_rows(p: Path) -> int:
    """CSV records after the header (what pandas reads), counted by the csv module."""
    with open(p, newline="", encoding="utf-8", errors="replace") as fh:
        return sum(1 for _ in csv.reader(fh)) - 1


def audit_census(pkg: Path) -> dict[str, int]:
    """duplicate-key, us-invalid and op-unknown counts over aiter/configs and model_configs."""
    cfg = pkg / "configs"
    owner: dict[Path, str] = {}
    for tn in tuned_names(pkg):
        un = "untuned".join(tn.rsplit("tuned", 1))
        for p in [cfg / f"{tn}.csv"] + [
            p for p in (cfg / "model_configs").glob(f"*{tn}*.csv") if "untuned" not in p.name
        ]:
            owner.setdefault(p, tn)
        for p in [cfg / f"{un}.csv"] + list((cfg / "model_configs").glob(f"*{un}*.csv")):
            owner.setdefault(p, tn)
    out = {"duplicate-key": 0, "us-invalid": 0, "op-unknown": 0}
    for p in sorted(cfg.glob("*.csv")) + sorted((cfg / "model_configs").glob("*.csv")):
        h, rows = _rows(p)
        tn = owner.get(p)
        if tn is None:
            out["op-unknown"] += "us" in h and "untuned" not in p.name
            continue
        un = cfg / ("untuned".join(tn.rsplit("tuned", 1)) + ".csv")
        if un.is_file():
            key = [c for c in dict.fromkeys(_rows(un)[0] + ["cu_num", "gfx", "_tag"]) if c in h]
            seen: set[tuple[str, ...]] = set()
            for v in rows:
                k = tuple(_norm(v[c]) for c in key)
                out["duplicate-key"] += k in seen
                seen.add(k)
        if "us" in h:
            for v in rows:
                try:
                    u = float(v["us"])
                    out["us-invalid"] += math.isnan(u) or math.isinf(u) or u <= 0
                except ValueError:
                    out["us-invalid"] += 1
    return out


def moe_kernel_names(pkg: Path, tuned_name: str) -> int:
    """Cells of kernelName1/kernelName2 that name a kernel (not empty, not Null, not an
    assembly `_Z` symbol) in the files the runtime merges for a MoE config, counting only
    records with the header's field count (the short ones are input-error findings)."""
    n = 0
    for p in merged_files(pkg, tuned_name, f"{tuned_name}.csv"):
        with open(p, newline="") as f:
            r = csv.reader(f)
            head = [c.strip() for c in next(r, [])]
            cols = [i for i, c in enumerate(head) if c in ("kernelName1", "kernelName2")]
            for rec in r:
                if len(rec) != len(head):
                    continue
                for i in cols:
                    v = rec[i].strip()
                    n += bool(v) and v != "Null" and not v.startswith("_Z")
    return n

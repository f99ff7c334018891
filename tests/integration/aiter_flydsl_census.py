"""A second method for the FlyDSL rows of aiter 2026-08's a8w8 bpreshuffle configs, written
apart from ckkb's static evaluator: the FlyDSL tune-space modules are run by Python itself
(runpy, in a fresh namespace per arch), with `GPU_ARCHS` set to the arch (their own `get_gfx`
reads it first; ckkb's model goes through chip_info instead) and a stand-in `torch` whose
`cuda` calls raise (the modules fall back to aiter's per-arch LDS table, as on a host that
cannot compile). The csv module reads the rows. No libcst, no ckkb code.

The tuner (csrc/ck_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_tune.py) races, for a row's gfx,
the lists of `PIPELINES` in order (getKernelName: the first holding the id), except on gfx1250,
where it races the WMMA module's `kernels_list`. Classes: "ok", "mismatch" (the id's entry has
another name, and another id has the row's), "stale" (no entry has the row's name), "unknown"
(no such id)."""

from __future__ import annotations

import os
import runpy
import sys
import types
from collections import Counter
from pathlib import Path

from tests.integration.aiter_opus_census import _rows

TUNE = "aiter/ops/flydsl/gemm_tune"


def _fake_torch() -> types.ModuleType:
    def no_device(*a: object, **k: object) -> object:
        raise RuntimeError("no device")

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        current_device=no_device, get_device_properties=no_device
    )
    torch.device = type("device", (), {})  # type: ignore[attr-defined]
    torch.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
    return torch


def _lists(root: Path, gfx: str) -> list[dict[int, str]]:
    """{id: name} of each list the tuner races on gfx, in the order it asks them."""
    saved_env = os.environ.get("GPU_ARCHS")
    saved_path = list(sys.path)
    saved_mods = dict(sys.modules)
    os.environ["GPU_ARCHS"] = gfx
    sys.path.insert(0, str(root))
    sys.modules["torch"] = _fake_torch()
    for m in [m for m in sys.modules if m == "aiter" or m.startswith("aiter.")]:
        del sys.modules[m]
    try:
        for pkg in ("aiter", "aiter.ops", "aiter.ops.flydsl", "aiter.ops.flydsl.gemm_tune"):
            mod = types.ModuleType(pkg)  # the packages' __init__ import all of aiter: skipped
            mod.__path__ = [str(root / pkg.replace(".", "/"))]
            sys.modules[pkg] = mod
        if gfx == "gfx1250":
            ns = runpy.run_path(str(root / TUNE / "flydsl_gemm_a8w8_bpreshuffle_wmma_common.py"))
            return [{k: v.name for k, v in ns["kernels_list"].items()}]
        ns = runpy.run_path(str(root / TUNE / "flydsl_gemm_a8w8_bpreshuffle_common.py"))
        return [{k: v.name for k, v in p.kernels_list.items()} for p in ns["PIPELINES"]]
    finally:
        sys.modules.clear()
        sys.modules.update(saved_mods)
        sys.path[:] = saved_path
        if saved_env is None:
            os.environ.pop("GPU_ARCHS", None)
        else:
            os.environ["GPU_ARCHS"] = saved_env


def lists_by_arch(root: Path) -> dict[str, list[dict[int, str]]]:
    """The lists the tuner races on each arch the configs name (gfx942, gfx950, gfx1250)."""
    return {g: _lists(root, g) for g in ("gfx942", "gfx950", "gfx1250")}


def flydsl_census(root: Path) -> Counter:
    """Counter of (gfx, class) over the libtype-flydsl rows of the a8w8 bpreshuffle configs."""
    cfg = root / "aiter" / "configs"
    files = [cfg / "a8w8_bpreshuffle_tuned_gemm.csv"] + sorted(
        p
        for p in cfg.glob("model_configs/*a8w8_bpreshuffle_tuned_gemm*.csv")
        if "untuned" not in p.name
    )
    lists: dict[str, list[dict[int, str]]] = {}
    out: Counter = Counter()
    for r in _rows(files):
        if r.get("libtype") != "flydsl":
            continue
        gfx, kid = r["gfx"], int(r["kernelId"])
        if gfx not in lists:
            lists[gfx] = _lists(root, gfx)
        name = r["kernelName"]
        d = next((d for d in lists[gfx] if kid in d), None)
        elsewhere = any(name in x.values() for x in lists[gfx])
        cls = (
            "unknown"
            if d is None
            else "ok"
            if d[kid] == name
            else "mismatch"
            if elsewhere
            else "stale"
        )
        out[(gfx, cls)] += 1
    return out


if __name__ == "__main__":
    print(flydsl_census(Path(sys.argv[1])))

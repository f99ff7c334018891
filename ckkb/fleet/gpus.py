"""Which GPUs this host has, which of them `--gpus` picks, and how a worker is pinned to one.

Discovery for `ckkb race` needs no torch (ckProfiler hosts often have none): `amd-smi list
--json` when it is on PATH, else `rocm-smi --showuniqueid --showbus --json`, else the kernel's
own topology under /sys/class/kfd (every node with SIMDs is a GPU; nodes are numbered as the
runtime numbers them). `ckkb harness` asks torch (`torch.cuda.device_count()`), which is what
will time on them. `CKKB_KFD_ROOT` points the sysfs reader at another folder (tests write a fake
topology there).

Pinning: a worker gets the variables its runtime reads before it starts anything on the GPU.
On ROCm `ROCR_VISIBLE_DEVICES=<i>` (the lowest layer: HIP, OpenCL and torch then see only that
GPU) and `HIP_VISIBLE_DEVICES=0` / `CUDA_VISIBLE_DEVICES=0` (the one device left, overriding
anything inherited); on CUDA `CUDA_VISIBLE_DEVICES=<i>`. `CKKB_FLEET_GPU=<i>` names the physical
index for the provenance.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError

KFD_ROOT = Path("/sys/class/kfd/kfd/topology/nodes")
PIN_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass
class Gpu:
    """One GPU as discovery saw it; fields a source does not give stay None."""

    index: int
    uuid: str | None = None
    pci_bus: str | None = None
    arch: str | None = None
    cu_count: int | None = None
    max_sclk_mhz: int | None = None
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _kfd_root() -> Path:
    env = os.environ.get("CKKB_KFD_ROOT")
    return Path(env) if env else KFD_ROOT


def _gfx(version: int) -> str | None:
    """kfd's gfx_target_version (e.g. 90402) as an arch name (gfx942)."""
    if version <= 0:
        return None
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _pci(domain: int, location: int) -> str:
    """kfd's location_id (bus << 8 | device << 3 | function) as a PCI address."""
    return f"{domain:04x}:{location >> 8:02x}:{(location >> 3) & 0x1F:02x}.{location & 0x7}"


def kfd_gpus(root: Path | None = None) -> list[Gpu]:
    """GPU nodes of the kfd topology, in node order (the runtime's numbering)."""
    root = root or _kfd_root()
    if not root.is_dir():
        return []
    nodes = sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    out: list[Gpu] = []
    for node in nodes:
        try:
            text = (node / "properties").read_text()
        except OSError:
            continue
        props: dict[str, int] = {}
        for line in text.splitlines():
            k, _, v = line.strip().partition(" ")
            try:
                props[k] = int(v.strip())
            except ValueError:
                continue
        if props.get("simd_count", 0) <= 0:
            continue  # a CPU node
        per_cu = props.get("simd_per_cu") or 0
        uid = props.get("unique_id")
        out.append(
            Gpu(
                index=len(out),
                uuid=f"{uid:016x}" if uid else None,
                pci_bus=_pci(props.get("domain", 0), props["location_id"])
                if "location_id" in props
                else None,
                arch=_gfx(props.get("gfx_target_version", 0)),
                cu_count=props["simd_count"] // per_cu if per_cu else None,
                max_sclk_mhz=props.get("max_engine_clk_fcompute") or None,
                source="kfd",
            )
        )
    return out


def _run_json(argv: list[str]) -> Any:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _amd_smi() -> list[Gpu] | None:
    data = _run_json(["amd-smi", "list", "--json"])
    if not isinstance(data, list) or not data:
        return None
    out = []
    for i, g in enumerate(data):
        if not isinstance(g, dict):
            continue
        out.append(
            Gpu(
                index=int(g.get("gpu", i)),
                uuid=g.get("uuid"),
                pci_bus=g.get("bdf"),
                source="amd-smi",
            )
        )
    return out or None


def _rocm_smi() -> list[Gpu] | None:
    data = _run_json(["rocm-smi", "--showuniqueid", "--showbus", "--json"])
    if not isinstance(data, dict):
        return None
    out = []
    cards = sorted((k for k in data if k.startswith("card")), key=lambda k: int(k[4:] or 0))
    for k in cards:
        v = data[k] if isinstance(data[k], dict) else {}
        out.append(
            Gpu(
                index=int(k[4:] or 0),
                uuid=v.get("Unique ID"),
                pci_bus=v.get("PCI Bus"),
                source="rocm-smi",
            )
        )
    return out or None


def discover_rocm() -> list[Gpu]:
    """This host's AMD GPUs without torch: amd-smi, rocm-smi, else /sys/class/kfd."""
    kfd = kfd_gpus()
    for smi in (_amd_smi, _rocm_smi):
        found = smi()
        if found:
            # the kfd topology adds arch, CUs and clocks to what the tool reports
            for g in found:
                k = next((x for x in kfd if x.index == g.index), None)
                if k is not None:
                    g.arch, g.cu_count, g.max_sclk_mhz = k.arch, k.cu_count, k.max_sclk_mhz
                    g.uuid = g.uuid or k.uuid
                    g.pci_bus = g.pci_bus or k.pci_bus
            return found
    return kfd


def discover_torch() -> tuple[list[Gpu], str]:
    """GPUs torch sees on this host, and the runtime (`rocm` or `cuda`)."""
    from ckkb.harness.run import require_torch_gpu

    torch = require_torch_gpu()
    runtime = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    return [Gpu(index=i, source="torch") for i in range(torch.cuda.device_count())], runtime


def parse_spec(spec: str, found: list[Gpu]) -> list[Gpu]:
    """`all`, a count `N` (the first N), or indices `i,j,...` (`3,` is GPU 3 alone)."""
    s = spec.strip().lower()
    if not found:
        raise CkkbError(
            f"--gpus {spec}: no GPU found on this host",
            hint="run on the GPU host, or use --scheduler ADDRESS with workers that have GPUs",
        )
    if s == "all":
        return list(found)
    by_index = {g.index: g for g in found}
    if "," not in s:
        try:
            n = int(s)
        except ValueError:
            raise CkkbError(f"--gpus {spec}: expected all, a count N or indices i,j,...") from None
        if not 1 <= n <= len(found):
            raise CkkbError(f"--gpus {spec}: this host has {len(found)} GPU(s)")
        return list(found[:n])
    picked: list[Gpu] = []
    for part in (p.strip() for p in s.split(",")):
        if not part:
            continue
        try:
            i = int(part)
        except ValueError:
            raise CkkbError(f"--gpus {spec}: {part!r} is not a GPU index") from None
        if i not in by_index:
            have = ", ".join(str(g.index) for g in found)
            raise CkkbError(f"--gpus {spec}: no GPU {i} on this host (found: {have})")
        if by_index[i] not in picked:
            picked.append(by_index[i])
    if not picked:
        raise CkkbError(f"--gpus {spec}: no GPU index given")
    return picked


def pin_env(index: int, runtime: str) -> dict[str, str]:
    """The environment that pins a worker (and every process it starts) to GPU `index`."""
    if runtime == "rocm":
        env = {"ROCR_VISIBLE_DEVICES": str(index), "HIP_VISIBLE_DEVICES": "0"}
        env["CUDA_VISIBLE_DEVICES"] = "0"
    else:
        env = {"CUDA_VISIBLE_DEVICES": str(index)}
    env["CKKB_FLEET_GPU"] = str(index)
    return env


def pinned_device(env: dict[str, str] | None = None) -> tuple[int | str | None, dict[str, str]]:
    """The physical GPU a process is pinned to, from its environment (ROCR, then HIP or CUDA
    indexing into what ROCR left), and the pinning variables as set."""
    env = dict(os.environ if env is None else env)
    seen = {k: env[k] for k in (*PIN_VARS, "CKKB_FLEET_GPU") if env.get(k) not in (None, "")}
    if "CKKB_FLEET_GPU" in seen:
        v = seen["CKKB_FLEET_GPU"]
        return (int(v) if v.isdigit() else v), seen
    ids: list[int | str] | None = None
    for var in PIN_VARS:
        if var not in seen:
            continue
        if var == "CUDA_VISIBLE_DEVICES" and "HIP_VISIBLE_DEVICES" in seen:
            continue  # on ROCm HIP_VISIBLE_DEVICES wins; on CUDA only CUDA's is set
        vals: list[int | str] = [int(x) if x.isdigit() else x for x in seen[var].split(",")]
        if ids is None:
            ids = vals
        else:
            ids = [ids[v] if isinstance(v, int) and v < len(ids) else v for v in vals]
    return (ids[0] if ids else None), seen

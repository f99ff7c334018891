"""What runs on a fleet worker: one shape of a race (ckProfiler) or of a harness run (torch).

Each task returns `{"records": [...], "task": {...}}`: the bundle records of its shape, each with
its `key` (run id, host, GPU, shape, candidate, pass) and the worker's `provenance`, and when and
where it ran. The worker's device is its own environment (set by `--gpus`, or by whoever started
the worker for `--scheduler`); ckProfiler inherits it unchanged.

A ckProfiler run killed by a signal raises `ProfilerCrashed` carrying its record, so that Dask's
own `retries` runs it again (maybe on another GPU); the driver records the last one as failed.
Every ckProfiler process group in flight is registered here so that `kill_children` (run on every
worker by the driver on SIGINT, and by the worker plugin when a worker closes) can end it.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from ckkb import __version__
from ckkb.fleet.gpus import kfd_gpus, pinned_device

# Module-level on purpose: a Dask worker process runs many tasks, and these outlive each one.
# _CHILDREN: process groups in flight, for kill_children (SIGINT, worker close).
# _STATE: what a worker reads or measures once (its GPU's provenance; the harness device,
# backend and ceilings), not again for every shape.
_CHILDREN: set[int] = set()
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}
AMDGPU_VERSION = Path("/sys/module/amdgpu/version")


class ProfilerCrashed(Exception):
    """ckProfiler was killed by a signal; args[0] is the record of that run."""


def kill_children() -> int:
    """Kill every ckProfiler process group this worker process started and that still runs."""
    with _LOCK:
        pgids = list(_CHILDREN)
        _CHILDREN.clear()
    n = 0
    for pg in pgids:
        try:
            os.killpg(pg, signal.SIGKILL)
            n += 1
        except (ProcessLookupError, PermissionError):
            pass
    return n


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def gpu_key(prov: dict[str, Any]) -> str:
    """The GPU part of a result key: its UUID, else its PCI bus id, else its index."""
    for k in ("uuid", "pci_bus", "gpu_index"):
        if prov.get(k) not in (None, ""):
            return str(prov[k])
    return "?"


def result_key(run_id: str, prov: dict[str, Any], *parts: Any) -> str:
    return "|".join([run_id, str(prov.get("hostname")), gpu_key(prov), *map(str, parts)])


def _task_times(t0: float, setup: float) -> dict[str, Any]:
    return {
        "worker": os.environ.get("DASK_WORKER_NAME") or _worker_name(),
        "pid": os.getpid(),
        "start": t0,
        "end": time.time(),
        "setup_seconds": round(setup, 4),
    }


def _worker_name() -> str | None:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return None


# ----------------------------------------------------------------------------- race


def rocm_provenance() -> dict[str, Any]:
    """Where a ckProfiler run happens, read once per worker without torch: rocminfo's first
    agent (the pinned GPU), the kfd topology's UUID, PCI bus, CUs and clocks for that GPU."""
    if "rocm" in _STATE:
        return dict(_STATE["rocm"])
    from ckkb.runner import host_facts

    facts = host_facts()
    index, pins = pinned_device()
    prov: dict[str, Any] = {
        "hostname": facts.get("hostname") or socket.gethostname(),
        "gpu": facts.get("gpu"),
        "arch": facts.get("arch"),
        "cu_count": facts.get("cu_count"),
        "rocm": facts.get("rocm"),
        "gpu_index": index,
        "uuid": None,
        "pci_bus": None,
        "clocks": {},
        "driver": _read(AMDGPU_VERSION),
        "ckkb": __version__,
        "pinned": pins,
    }
    g = next((x for x in kfd_gpus() if x.index == index), None) if isinstance(index, int) else None
    if g is not None:
        prov["uuid"], prov["pci_bus"] = g.uuid, g.pci_bus
        prov["arch"] = prov["arch"] or g.arch
        prov["cu_count"] = prov["cu_count"] or g.cu_count
        if g.max_sclk_mhz:
            prov["clocks"] = {"sclk_max_mhz": g.max_sclk_mhz}
    _STATE["rocm"] = prov
    return dict(prov)


def race_shape(job: dict[str, Any]) -> dict[str, Any]:
    """Run one shape's ckProfiler command on this worker's GPU; its race_log record."""
    from ckkb.runner import run_once

    t0 = time.time()
    prov = rocm_provenance()
    setup = time.time() - t0
    pids: list[int] = []

    def spawned(pid: int) -> None:
        pids.append(pid)
        with _LOCK:
            _CHILDREN.add(pid)

    try:
        r = run_once(job["argv"], job["timeout"], on_spawn=spawned)
    finally:
        with _LOCK:
            _CHILDREN.difference_update(pids)
    rec = dict(job["record"])
    rec.update(
        {
            "output": r.output,
            "exit_code": r.exit_code,
            "status": r.status,
            "failure": r.failure,
            "seconds": round(r.seconds, 3),
            "started_at": r.started_at,
            "host": prov,
            "key": result_key(job["run_id"], prov, *job["key_parts"]),
            "run_id": job["run_id"],
        }
    )
    out = {"records": [rec], "task": _task_times(t0, setup)}
    if r.status == "crash":
        raise ProfilerCrashed(out)
    return out


# ----------------------------------------------------------------------------- harness


def torch_provenance(dev: Any) -> dict[str, Any]:
    """Where a harness shape is timed: the device torch sees (the pinned GPU), its UUID and PCI
    bus, SM/CU count, clocks, driver and runtime versions."""
    import torch

    from ckkb.harness import torch_backend as tb

    p = torch.cuda.get_device_properties(0)
    index, pins = pinned_device()
    prov = dev.host()
    prov.update(
        {
            "gpu_index": index,
            "uuid": str(p.uuid) if getattr(p, "uuid", None) else None,
            "pci_bus": None,
            "cu_count": dev.sm_count,
            "driver": None,
            "cuda": getattr(torch.version, "cuda", None),
            "hip": getattr(torch.version, "hip", None),
            "ckkb": __version__,
            "pinned": pins,
        }
    )
    if getattr(p, "pci_bus_id", None) is not None:
        prov["pci_bus"] = (
            f"{getattr(p, 'pci_domain_id', 0):04x}:{p.pci_bus_id:02x}:"
            f"{getattr(p, 'pci_device_id', 0):02x}.0"
        )
    if prov["hip"]:
        prov["driver"] = _read(AMDGPU_VERSION)
    else:
        try:
            import pynvml

            pynvml.nvmlInit()
            prov["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            pass
    prov["clocks"] = tb.read_clocks() or prov.get("clocks")
    return prov


def _harness_session(run_id: str) -> dict[str, Any]:
    """Device, backend, ceilings and methodology, made once per worker process and run."""
    st = _STATE.get("harness")
    if st is not None and st["run_id"] == run_id:
        return st
    from ckkb.harness import torch_backend as tb
    from ckkb.harness.candidates import aiter_status, fp8_supported
    from ckkb.harness.roofline import match_part
    from ckkb.harness.run import ceiling_rows, ceilings_from, common_extra, require_torch_gpu
    from ckkb.harness.timing import Policy

    require_torch_gpu()
    dev = tb.device_info()
    ast = aiter_status()
    policy = Policy()
    peaks = match_part(dev.name, dev.arch)
    measured = tb.measure_ceilings(dev, fp8=fp8_supported(dev.arch))
    prov = torch_provenance(dev)
    st = {
        "run_id": run_id,
        "dev": dev,
        "backend": tb.TorchBackend(dev),
        "policy": policy,
        "aiter": ast.available,
        "peaks": peaks,
        "ceilings": ceilings_from(measured, peaks),
        "ceiling_rows": ceiling_rows(run_id, dev, measured),
        "common": common_extra(dev, policy, ast.message),
        "provenance": prov,
        "ceilings_sent": False,
    }
    _STATE["harness"] = st
    return st


def harness_shape(job: dict[str, Any]) -> dict[str, Any]:
    """Time one shape (one pass) on this worker's GPU; its harness_results records (and, with
    the worker's first shape, its harness_ceilings)."""
    from ckkb.harness.bundle import record
    from ckkb.harness.run import time_one

    t0 = time.time()
    st = _harness_session(job["run_id"])
    setup = time.time() - t0
    s, p = job["shape"], job["pass_no"]
    rows = time_one(
        s,
        p,
        backend=st["backend"],
        policy=st["policy"],
        aiter=st["aiter"],
        run_id=job["run_id"],
        dev=st["dev"],
        ceilings=st["ceilings"],
        peaks=st["peaks"],
        common=st["common"],
    )
    prov = st["provenance"]
    recs = []
    if not st["ceilings_sent"]:
        for c in st["ceiling_rows"]:
            rec = record(c)
            rec["extra"] = dict(rec.get("extra") or {}, provenance=prov)
            rec["key"] = result_key(job["run_id"], prov, "ceiling", c.what, c.size)
            recs.append(rec)
        st["ceilings_sent"] = True
    for r in rows:
        rec = record(r)
        rec["provenance"] = prov
        rec["key"] = result_key(
            job["run_id"], prov, f"#{job['index']}", s.label, r.layout, r.candidate, r.regime, p
        )
        recs.append(rec)
    return {"records": recs, "task": _task_times(t0, setup)}

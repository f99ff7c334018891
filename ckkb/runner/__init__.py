"""`ckkb race`: run ckProfiler once per shape and write a portable race bundle.

- The argv of every run comes from the op's legend in the knowledge base (ckkb.profiler_cmd), run
  with `subprocess` as a list, never through a shell, in its own process group.
- Verification is on for the first run of each shape the knowledge base has never seen raced
  (and the first time a shape appears in the shapes file); warm-up and iterations default to 5 and
  20, above ckProfiler's 1 and 10.
- Output is streamed to the terminal (or a callback) while it is kept for the bundle.
- One shape's crash (killed by a signal), hang (no exit after --timeout: the whole process group is
  killed), non-zero exit or garbage output is recorded with its cause; the next shape runs.
- The bundle (see ckkb.kb.ingest for the format) gets one `race_log` record per shape, flushed and
  fsynced as each shape finishes, so whatever finished survives a crash of the runner itself.
- Host facts (hostname, GPU name, arch, CU count from `rocminfo`; ROCm version from
  /opt/rocm/.info/version) go into the bundle header; a fact the platform does not report is null.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb import csvcheck, procs
from ckkb.errors import CkkbError
from ckkb.logs import parse_text
from ckkb.profiler_cmd import (
    INT_MAX,
    PROFILER,
    Command,
    build_command,
    code_label,
    resolve_code,
)
from ckkb.profiler_legend import Legend
from ckkb.queries.profiler import raced_before

DEFAULT_WARMUP, DEFAULT_ITERS = 5, 20
ROCM_VERSION_FILE = Path("/opt/rocm/.info/version")


@dataclass
class Shape:
    M: int
    N: int
    K: int
    stride_a: int | None = None
    stride_b: int | None = None
    stride_c: int | None = None
    kbatch: int | None = None
    line: int = 0

    def key(self) -> tuple[int, int, int]:
        return (self.M, self.N, self.K)


def read_shapes(path: str | Path) -> list[Shape]:
    """CSV with a header naming M, N, K (any case) and optionally stride_a/b/c, kbatch."""
    p = Path(path)
    if not p.is_file():
        raise CkkbError(f"shapes file not found: {p}", hint="a CSV with a header line: M,N,K")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CkkbError(f"cannot read shapes file {p}: {e}") from None
    lines = [
        i + 1
        for i, line in enumerate(text.splitlines())
        if line.strip() and not line.lstrip().startswith("#")
    ]
    reader = csv.reader(
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )
    rows = list(csvcheck.rows(reader, p, lambda n: lines[min(n, len(lines)) - 1]))
    if not rows:
        raise CkkbError(f"{p}: no shapes", hint="a CSV with a header line: M,N,K")
    header = [
        h.strip().lower().replace("stride", "stride_").replace("stride__", "stride_")
        for h in rows[0]
    ]
    for need in ("m", "n", "k"):
        if need not in header:
            raise CkkbError(
                f"{p}:1: header has no {need.upper()} column (found: {', '.join(rows[0])})",
                hint="first line: M,N,K",
            )
    shapes = []
    for row, lineno in zip(rows[1:], lines[1:], strict=True):
        vals = dict(zip(header, (c.strip() for c in row), strict=False))
        try:
            s = Shape(
                M=int(vals["m"]),
                N=int(vals["n"]),
                K=int(vals["k"]),
                stride_a=int(vals["stride_a"]) if vals.get("stride_a") else None,
                stride_b=int(vals["stride_b"]) if vals.get("stride_b") else None,
                stride_c=int(vals["stride_c"]) if vals.get("stride_c") else None,
                kbatch=int(vals["kbatch"]) if vals.get("kbatch") else None,
                line=lineno,
            )
        except (KeyError, ValueError):
            raise CkkbError(
                f"{p}:{lineno}: not a shape (need integers M,N,K): {','.join(row)}"
            ) from None
        if min(s.M, s.N, s.K) <= 0:
            raise CkkbError(f"{p}:{lineno}: M, N and K must be positive")
        if max(s.M, s.N, s.K) > INT_MAX:
            raise CkkbError(f"{p}:{lineno}: M, N and K must be at most {INT_MAX} (a C int)")
        shapes.append(s)
    if not shapes:
        raise CkkbError(f"{p}: header only, no shapes")
    return shapes


# ----------------------------------------------------------------------------- host facts


def _run_quiet(argv: list[str], timeout: float = 15) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", errors="replace") if out.returncode == 0 else None


def parse_rocminfo(text: str) -> dict[str, Any]:
    """First GPU agent of `rocminfo` output: name (gfx arch), marketing name, compute units."""
    facts: dict[str, Any] = {}
    for block in text.split("*******"):
        if (
            "Device Type:" not in block
            or "GPU" not in block.split("Device Type:", 1)[1].splitlines()[0]
        ):
            continue
        for line in block.splitlines():
            k, sep, v = line.strip().partition(":")
            if not sep:
                continue
            k, v = k.strip(), v.strip()
            if k == "Name" and v.startswith("gfx") and "arch" not in facts:
                facts["arch"] = v
            elif k == "Marketing Name" and "gpu" not in facts:
                facts["gpu"] = v
            elif k == "Compute Unit" and "cu_count" not in facts:
                try:
                    facts["cu_count"] = int(v)
                except ValueError:
                    pass
        if facts:
            break
    return facts


def host_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "gpu": None,
        "arch": None,
        "cu_count": None,
        "rocm": None,
    }
    try:
        facts["rocm"] = ROCM_VERSION_FILE.read_text().strip() or None
    except OSError:
        pass
    info = _run_quiet(["rocminfo"])
    if info:
        facts.update(parse_rocminfo(info))
    facts["platform"] = sys.platform
    return facts


# ----------------------------------------------------------------------------- one run


@dataclass
class RunResult:
    argv: list[str]
    output: str
    exit_code: int | None
    status: str  # ok | crash | timeout | exit | garbage
    failure: str | None
    seconds: float
    started_at: str


def run_once(
    argv: list[str],
    timeout: float,
    echo: Callable[[str], None] | None = None,
    on_spawn: Callable[[int], None] | None = None,
) -> RunResult:
    """Run one ckProfiler command (argv list, no shell, own process group), streaming its output.
    `on_spawn(pid)` learns the process group as soon as it exists (the fleet kills it on SIGINT)."""
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return RunResult(
            argv, "", None, "exit", f"cannot start {argv[0]}: {e.strerror or e}", 0.0, started_at
        )
    if on_spawn is not None:
        on_spawn(proc.pid)
    chunks: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            chunks.append(line)
            if echo:
                echo(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except BaseException:  # Ctrl-C, SIGTERM (procs.stop_on_term): ckProfiler's group goes too
        _kill_group(proc)
        raise
    reader.join(timeout=5)
    if proc.stdout:
        proc.stdout.close()
    seconds = time.monotonic() - t0
    output = "".join(chunks)
    rc = proc.returncode
    if timed_out:
        return RunResult(
            argv,
            output,
            rc,
            "timeout",
            f"no exit after {timeout:g} s; process group killed",
            seconds,
            started_at,
        )
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        return RunResult(argv, output, rc, "crash", f"killed by {sig}", seconds, started_at)
    if rc:
        return RunResult(argv, output, rc, "exit", f"exit status {rc}", seconds, started_at)
    races, _ = parse_text(output)
    if not any(r.results or r.info.best for r in races):
        return RunResult(
            argv,
            output,
            rc,
            "garbage",
            "exit status 0 but no ckProfiler result line in the output",
            seconds,
            started_at,
        )
    return RunResult(argv, output, rc, "ok", None, seconds, started_at)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# ----------------------------------------------------------------------------- the race


@dataclass
class RaceSummary:
    bundle: Path
    runs: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"bundle": str(self.bundle), "runs": self.runs}


def resolve_profiler(profiler: str | None) -> str:
    p = profiler or PROFILER
    if os.sep in p or p.startswith("."):
        path = Path(p)
        if not path.is_file():
            raise CkkbError(f"ckProfiler not found: {p}")
        if not os.access(path, os.X_OK):
            raise CkkbError(f"not executable: {p}", hint=f"chmod +x {p}")
        return str(path.resolve())
    found = shutil.which(p)
    if found is None:
        raise CkkbError(
            f"{p} is not on PATH",
            hint="install ckProfiler (apt package composablekernel-ckprofiler) "
            "or pass --profiler PATH",
        )
    return found


def race(
    legend: Legend,
    shapes: list[Shape],
    *,
    dtype: str,
    layout: str | None,
    out: str | Path,
    profiler: str | None = None,
    timeout: float = 600.0,
    warmup: int = DEFAULT_WARMUP,
    iters: int = DEFAULT_ITERS,
    db: Any = None,
    echo: Callable[[str], None] | None = None,
    host: dict[str, Any] | None = None,
) -> RaceSummary:
    """Run `legend.op` on every shape; append a race_log record per shape to the bundle at `out`."""
    exe = resolve_profiler(profiler)
    out = Path(out)
    if out.exists() and out.is_dir():
        raise CkkbError(f"--out {out} is a directory")
    if not out.parent.exists():
        raise CkkbError(f"output folder does not exist: {out.parent}")
    # Build every command first: a bad dtype/layout/shape fails before anything runs.
    plans = plan_race(
        legend, shapes, dtype=dtype, layout=layout, profiler=exe, db=db, warmup=warmup, iters=iters
    )
    facts = host if host is not None else host_facts()
    summary = RaceSummary(out)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    # SIGTERM stops a race like Ctrl-C: the running shape's process group is killed, the shapes
    # already finished stay in the bundle (each record is flushed and fsynced as it ends)
    def kept() -> str:
        return f"{len(summary.runs)} finished shape(s) kept in {out}"

    with procs.stop_on_term(kept), open(out, "a", encoding="utf-8") as f:
        if f.tell() == 0:
            f.write(
                json.dumps({"record": "bundle", "kind": "race", "created": created, "host": facts})
                + "\n"
            )
            f.flush()
        for s, cmd in plans:
            if echo:
                echo(f"$ {' '.join(cmd.argv)}\n")
            r = run_once(cmd.argv, timeout, echo)
            rec = race_record(legend, s, cmd, r, timeout, facts)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())
            summary.runs.append(
                {
                    "M": s.M,
                    "N": s.N,
                    "K": s.K,
                    "status": r.status,
                    "failure": r.failure,
                    "exit_code": r.exit_code,
                    "seconds": round(r.seconds, 3),
                }
            )
            if echo and r.status != "ok":
                echo(f"ckkb: {legend.op} M={s.M} N={s.N} K={s.K}: {r.status}: {r.failure}\n")
    return summary


def first_is_verify(legend: Legend, argv: list[str]) -> bool:
    v = legend.by_role().get("verify")
    if v is None or v["position"] >= len(argv):
        return False
    return argv[v["position"]] == "1"


def plan_race(
    legend: Legend,
    shapes: list[Shape],
    *,
    dtype: str,
    layout: str | None,
    profiler: str,
    db: Any,
    warmup: int = DEFAULT_WARMUP,
    iters: int = DEFAULT_ITERS,
) -> list[tuple[Shape, Any]]:
    """Every shape's command, built before anything runs (a bad dtype, layout or shape fails
    first). Verification is on for a shape's first run when the knowledge base never raced it."""
    roles = legend.by_role()
    dlabel = (
        code_label(roles["dtype"], resolve_code(roles["dtype"], dtype, "data type")[0])
        if "dtype" in roles
        else None
    )
    llabel = (
        code_label(roles["layout"], resolve_code(roles["layout"], layout, "layout")[0])
        if "layout" in roles and layout
        else None
    )
    seen: set[tuple[int, int, int]] = set()
    plans = []
    for s in shapes:
        first = s.key() not in seen and not raced_before(
            db, legend.op, s.M, s.N, s.K, dlabel, llabel
        )
        seen.add(s.key())
        cmd = build_command(
            legend,
            dtype=dtype,
            layout=layout,
            M=s.M,
            N=s.N,
            K=s.K,
            verify=first,
            warmup=warmup,
            iters=iters,
            stride_a=s.stride_a,
            stride_b=s.stride_b,
            stride_c=s.stride_c,
            kbatch=s.kbatch,
            profiler=profiler,
            db=db,
        )
        plans.append((s, cmd))
    return plans


def race_record(
    legend: Legend, s: Shape, cmd: Command, r: RunResult, timeout: float, facts: dict[str, Any]
) -> dict[str, Any]:
    """The bundle's `race_log` record of one run (see ckkb.kb.ingest for the format)."""
    return {
        "record": "race_log",
        "op": legend.op,
        "argv": [PROFILER] + cmd.argv[1:],
        "executable": cmd.argv[0],
        "shape": {"M": s.M, "N": s.N, "K": s.K, "line": s.line},
        "verification": first_is_verify(legend, cmd.argv),
        "warnings": cmd.warnings,
        "output": r.output,
        "exit_code": r.exit_code,
        "status": r.status,
        "failure": r.failure,
        "seconds": round(r.seconds, 3),
        "started_at": r.started_at,
        "timeout": timeout,
        "host": facts,
    }

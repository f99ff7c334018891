"""`ckkb serve` under load, under hostile SQL and during ingests: issue 14.

    python3 benchmarks/serve_load.py [--db PATH] [--clients 50] [--requests 20] [--logs LOG ...]

Serves a temporary copy of the knowledge base (so ingests do not touch the original) with
`ckkb serve` in a subprocess, then runs three phases, each with --clients concurrent HTTP clients
(asyncio, one connection each) cycling through every canned query with real parameters (those of
benchmarks/serve.py), --requests requests per client:

  1. load:    canned queries only.
  2. writes:  the same canned load while `ckkb ingest` stores --logs one by one into the served
              file (default: the ckProfiler samples in ../shared).
  3. quiet / hostile: --light clients (default 5) on the canned queries, first alone, then while
              one more client sends hostile SQL back to back: the issue's
              `replace(hex(zeroblob(200000000)),'0','ab')` (a single call no progress handler
              stops), an endless recursive CTE and a self cross join (stopped by the time limit).

Prints requests/s, p50 / p95 / max latency and errors (any non-200 answer) per phase, and the delay
hostile SQL adds to a canned query: the hostile phase's max latency minus the quiet phase's (at 50
clients the server is saturated and queueing, not the hostile query, sets the latency). Goals:
0 errors in every phase, that delay <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402
import serve as canned  # noqa: E402  (benchmarks/serve.py: the parameters per canned query)

from ckkb import settings  # noqa: E402
from ckkb.web.metadata import canned_queries  # noqa: E402

HOSTILE = [
    "select length(replace(hex(zeroblob(200000000)),'0','ab'))",
    "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c",
    "select count(*) from instances a, instances b",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], p: float) -> float:
    return canned.pct(xs, p) if xs else float("nan")


async def clients(base: str, urls: list[str], n: int, per: int) -> tuple[list[float], int, float]:
    """n clients, `per` requests each over the canned URLs: (latencies s, errors, wall s)."""
    lat: list[float] = []
    errors = 0
    if True:  # each client its own connection, busy back to back (a pool shared by all clients
        # leaves some connections idle past uvicorn's 5 s keep-alive: a request sent on one as
        # the server closes it fails in the client, not in the server)

        async def one(k: int) -> None:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                await one_client(k, client)

        async def one_client(k: int, client: httpx.AsyncClient) -> None:
            nonlocal errors
            for i in range(per):
                url = urls[(k + i) % len(urls)]
                t = time.perf_counter()
                try:
                    r = await client.get(url)
                    ok = r.status_code == 200
                    why = f"{r.status_code} {r.text[:160]}"
                except httpx.HTTPError as e:
                    ok, why = False, f"{type(e).__name__}: {e}"
                lat.append(time.perf_counter() - t)
                if not ok:
                    errors += 1
                    print(f"error: {url}: {why}", file=sys.stderr)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(n)))
        return lat, errors, time.perf_counter() - t0


async def hostile(base: str, stop: asyncio.Event, db: str) -> list[tuple[int, float]]:
    out = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            r = await client.get(f"/{db}.json", params={"sql": HOSTILE[i % len(HOSTILE)]})
            out.append((r.status_code, time.perf_counter() - t))
            i += 1
    return out


async def with_hostile(base, urls, n, per, db):
    stop = asyncio.Event()
    h = asyncio.create_task(hostile(base, stop, db))
    res = await clients(base, urls, n, per)
    stop.set()
    return res, await h


async def with_ingests(base, urls, n, per, db_path: Path, logs: list[Path]):
    async def writer() -> list[int]:
        codes = []
        for log in logs:
            p = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ckkb",
                "ingest",
                "--db",
                str(db_path),
                str(log),
                "--arch",
                "gfx942",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            codes.append(await p.wait())
        return codes

    w = asyncio.create_task(writer())
    res = await clients(base, urls, n, per)
    return res, await w


def row(name: str, lat: list[float], errors: int, wall: float) -> str:
    ms = [x * 1000 for x in lat]
    return (
        f"{name:<9} {len(lat):>8} {errors:>6} {len(lat) / wall:>8.1f} {pct(ms, 0.5):>8.0f} "
        f"{pct(ms, 0.95):>8.0f} {max(ms):>8.0f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="knowledge base (default: $CKKB_DB or db/ckkb.db)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=20, help="requests per client per phase")
    ap.add_argument("--light", type=int, default=5, help="canned clients beside hostile SQL")
    ap.add_argument("--logs", nargs="*", type=Path, default=None)
    args = ap.parse_args()
    src = Path(settings.db_path(args.db))
    logs = args.logs
    if logs is None:
        logs = sorted((HERE.parent.parent / "shared" / "ckprofiler_samples").glob("*.txt"))
    tmp = tempfile.TemporaryDirectory(prefix="ckkb-serve-load-")
    db = Path(tmp.name) / "kb.db"
    shutil.copy(src, db)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    urls = []
    for name, q in canned_queries().items():
        params = canned.params_for(conn, name, q.params)
        qs = httpx.QueryParams({**params, "_shape": "array"})
        urls.append(f"/kb/{name}.json?{qs}")
    conn.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/-/versions.json").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise SystemExit("ckkb serve did not start")
        asyncio.run(clients(base, urls, 5, 4))  # warm-up
        n, per = args.clients, args.requests
        load = asyncio.run(clients(base, urls, n, per))
        (write_load, codes) = asyncio.run(with_ingests(base, urls, n, per, db, logs))
        quiet = asyncio.run(clients(base, urls, args.light, per * 6))
        light = args.light
        (hostile_load, hostile_answers) = asyncio.run(
            with_hostile(base, urls, light, per * 6, "kb")
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        tmp.cleanup()
    print(
        f"ckkb serve on a copy of {src} ({src.stat().st_size / 1e6:.0f} MB): {n} concurrent "
        f"clients x {per} requests over {len(urls)} canned queries per phase"
    )
    print(
        f"{'phase':<9} {'requests':>8} {'errors':>6} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'max ms':>8}"
    )
    print(row("load", *load))
    print(row("writes", *write_load))
    print(row("quiet", *quiet) + f"   ({light} clients)")
    print(row("hostile", *hostile_load) + f"   ({light} clients + 1 sending hostile SQL)")
    hs = [t for _, t in hostile_answers]
    print(
        f"hostile queries: {len(hostile_answers)} sent, answers "
        f"{sorted({c for c, _ in hostile_answers})}, slowest {max(hs):.2f} s"
    )
    delay = max(hostile_load[0]) - max(quiet[0])
    print(
        f"delay a hostile query adds to canned queries (max latency): {delay:+.2f} s (goal <= 1 s)"
    )
    print(f"ingests during the writes phase: {len(codes)}, failed: {sum(c != 0 for c in codes)}")


if __name__ == "__main__":
    main()

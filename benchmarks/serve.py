"""Latency of every canned query over HTTP from `ckkb serve` on the default knowledge base: issue 6.

    python3 benchmarks/serve.py [--db PATH] [--requests N] [--warmup N]
        [--ingest LOG ... --arch ARCH]

Starts `ckkb serve` as a subprocess on a free 127.0.0.1 port (read-only, as users run it), then
for each canned query sends N sequential GET requests for its JSON (`?_shape=array`, real
parameters: the part2 tile on gfx950, gemm_universal, ...) over one keep-alive HTTP connection and
reports p50 / p95 / max wall time per request, the rows returned, and the query's own SQL time
(median of 20 direct executions on a read-only sqlite3 connection), so server overhead and SQL
cost can be told apart. Goal: p95 <= 50 ms for each query.

--ingest copies the knowledge base to a temporary file and ingests the given ckProfiler logs into
the copy first (with --arch), so the race queries have rows to return; the original is untouched.
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from ckkb import queries, settings  # noqa: E402
from ckkb.web.app import check_db  # noqa: E402
from ckkb.web.metadata import canned_queries  # noqa: E402

GOAL_P95_MS = 50.0

# Real parameters per query (anything not listed is sent empty).
PARAMS: dict[str, dict[str, str]] = {
    "why_missing": {"tile": "256x224x64", "arch": "gfx950"},
    "pool": {"dir": "gemm_universal", "arch": "gfx950"},
    "pool_counts": {"dir": "gemm_universal", "dtype": "bhalf_t"},
    "gate_census": {"kind": "device_name", "arch": "gfx950"},
    "arch_diff": {"arch_a": "gfx942", "arch_b": "gfx950"},
    "race_spread": {"race_id": ""},
    "winner_moves": {},
    "audit_findings": {"rule": "", "severity": "", "file": ""},
    "tuner_vs_cold": {"arch": ""},
    "names_coverage": {"status": ""},
    # the wheel's CK against itself: the whole pairing, nothing to list (a second tree: trees.py)
    "version_diff": {
        "from": "1.2.0",
        "to": "1.2.0",
        "arch": "gfx942",
        "dir": "gemm_universal",
        "dtype": "bhalf_t",
    },
}
# Parameters read from the knowledge base itself.
LOOKUPS: dict[str, tuple[str, str]] = {
    "names_locate": (
        "key",
        "select key from instance_keys where list_name like '%_part2' order by id limit 1",
    ),
    "names_availability": (
        "registration_id",
        "select id from registrations where list_name like '%_part2' order by id limit 1",
    ),
}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def params_for(conn: sqlite3.Connection, name: str, wanted: tuple[str, ...]) -> dict[str, str]:
    out = {p: "" for p in wanted}
    out.update({k: v for k, v in PARAMS.get(name, {}).items() if k in wanted})
    if name in LOOKUPS:
        key, sql = LOOKUPS[name]
        try:
            row = conn.execute(sql).fetchone()
        except sqlite3.Error:
            row = None
        out[key] = str(row[0]) if row else ""
    return out


def sql_ms(conn: sqlite3.Connection, name: str, params: dict[str, str], n: int = 20) -> float:
    text = queries.sql(name)
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        conn.execute(text, params).fetchall()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--db", default=None, help="knowledge base (default: $CKKB_DB, else db/ckkb.db)"
    )
    ap.add_argument(
        "--requests", type=int, default=200, help="timed requests per query (default 200)"
    )
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument(
        "--ingest",
        nargs="*",
        default=[],
        help="ckProfiler logs to ingest into a temporary copy first",
    )
    ap.add_argument(
        "--arch", default="gfx942", help="arch the --ingest logs ran on (default gfx942)"
    )
    args = ap.parse_args()
    db = check_db(settings.db_path(args.db))
    tmp = None
    if args.ingest:
        import shutil
        import tempfile

        from ckkb.kb.ingest import ingest

        tmp = tempfile.TemporaryDirectory()
        copy = Path(tmp.name) / db.name
        shutil.copy(db, copy)
        summary = ingest(copy, args.ingest, arch=args.arch)
        print(
            f"ingested {summary.races_added} races, "
            f"{summary.results_added} results into a copy of {db}"
        )
        db = copy
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    base = f"http://127.0.0.1:{port}"
    rows_out = []
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(300):
                try:
                    if client.get("/-/ckkb").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                raise SystemExit("ckkb serve did not start")
            for name, q in canned_queries().items():
                params = params_for(conn, name, q.params)
                qs = {**params, "_shape": "array"}
                for _ in range(args.warmup):
                    r = client.get(f"/{db.stem}/{name}.json", params=qs)
                status, n_rows = r.status_code, (len(r.json()) if r.status_code == 200 else 0)
                ts = []
                for _ in range(args.requests):
                    t = time.perf_counter()
                    r = client.get(f"/{db.stem}/{name}.json", params=qs)
                    r.read()
                    ts.append((time.perf_counter() - t) * 1000)
                rows_out.append(
                    (
                        name,
                        status,
                        n_rows,
                        pct(ts, 0.5),
                        pct(ts, 0.95),
                        max(ts),
                        sql_ms(conn, name, params),
                        params,
                    )
                )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        conn.close()
    print(
        f"ckkb serve on {db} ({db.stat().st_size / 1e6:.0f} MB), "
        f"{args.requests} requests per query, one keep-alive connection"
    )
    print(
        f"{'query':<20} {'status':>6} {'rows':>6} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'max ms':>8} {'sql ms':>8} {'p95/goal':>9}  params"
    )
    for name, status, n, p50, p95, mx, sq, params in rows_out:
        shown = ", ".join(f"{k}={v[:24]}" for k, v in params.items())
        print(
            f"{name:<20} {status:>6} {n:>6} {p50:>8.1f} {p95:>8.1f} "
            f"{mx:>8.1f} {sq:>8.1f} {p95 / GOAL_P95_MS:>8.2f}x  {shown}"
        )
    if tmp is not None:
        tmp.cleanup()
    over = [r[0] for r in rows_out if r[4] > GOAL_P95_MS]
    print(
        f"goal p95 <= {GOAL_P95_MS:.0f} ms: {len(rows_out) - len(over)} "
        f"of {len(rows_out)} queries meet it" + (f"; over: {', '.join(over)}" if over else "")
    )


if __name__ == "__main__":
    main()

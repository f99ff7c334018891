"""Several trees in one knowledge base: what they cost to build and to read (issue 15).

    python3 benchmarks/trees.py [--ck-old PATH] [--runs N] [--cli-runs N] [--requests N]

Goals (each a ratio to the single-tree figure, or an absolute bound):
  (a) the wheel's trees plus the 2024-10 CK tree in one database, cold (new file, no cache),
      cost at most 1.5x the wheel's trees alone, cold;
  (b) adding a tree identical to one already there (a copy of the wheel's CK tree at another
      path) costs at most 0.2x the wheel-alone cold build;
  (c) `ckkb why` / `ckkb pool` latency with three trees (wheel CK + 2024-10 CK + wheel aiter:
      the database of (a)) is at most 1.2x the single-tree figure (the database of the wheel
      alone), median wall time of the whole command;
  (d) every Datasette canned query, served by `ckkb serve` over the three-tree database, has
      p95 <= 50 ms, for the default trees and for `tree=` the 2024-10 tree (benchmarks/serve.py's
      approach: sequential GETs of its JSON over one keep-alive connection).

Builds and commands run as subprocesses (`python -m ckkb`) without PYTHONDONTWRITEBYTECODE (the
workplace shell sets it; it makes each subprocess recompile ckkb, ~0.5 CPU-s). Figures depend on
the machine's load: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from ckkb import sources  # noqa: E402
from ckkb.kb.trees import scope  # noqa: E402
from ckkb.web.metadata import canned_queries, served_sql  # noqa: E402


def _load_serve() -> Any:
    spec = importlib.util.spec_from_file_location("ckkb_bench_serve", ROOT / "benchmarks/serve.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


serve = _load_serve()  # params_for, pct, free_port, GOAL_P95_MS: one approach, not a copy

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CK_OLD = "/work/ref/trees/composable_kernel"  # the 2024-10 CK tree (../shared/trees)
GOALS = {"a": 1.5, "b": 0.2, "c": 1.2}


def ckkb(*args: str) -> tuple[float, str]:
    """Wall seconds and stdout of `python -m ckkb ARGS` (fails loudly on a non-zero exit)."""
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "ckkb", *args], capture_output=True, text=True, env=ENV
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"ckkb {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return wall, p.stdout


def build(db: Path, *trees: str) -> tuple[float, dict[str, Any]]:
    wall, out = ckkb("build", "--db", str(db), "--json", *trees)
    try:
        info = json.loads(out)
    except ValueError:
        info = {}
    return wall, info


def cold(workdir: Path, label: str, runs: int, *trees: str) -> tuple[float, dict[str, Any], Path]:
    """Median wall time of `runs` builds each into a new directory (no database, no cache)."""
    walls, info, db = [], {}, workdir
    for k in range(runs):
        d = workdir / f"{label}-{k}"
        d.mkdir()
        db = d / "kb.db"
        wall, info = build(db, *trees)
        walls.append(wall)
    return statistics.median(walls), info, db


def cli_ms(db: Path, runs: int, *args: str) -> float:
    ckkb(*args, "--db", str(db))  # warm the page cache
    return statistics.median(ckkb(*args, "--db", str(db))[0] for _ in range(runs)) * 1000


def serve_p95(db: Path, tree: str, requests: int) -> list[tuple[str, int, int, float, float]]:
    """(query, status, rows, p50 ms, p95 ms) for every canned query read with `tree=`."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scope(conn, tree or None)  # the parameters a user of that tree would ask with
    port = serve.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    out = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(300):
                try:
                    if client.get("/-/ckkb").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                raise SystemExit("ckkb serve did not start")
            for name, q in canned_queries().items():
                params = serve.params_for(conn, name, tuple(p for p in q.params if p != "tree"))
                qs = {**params, "tree": tree, "_shape": "array"}
                for _ in range(3):
                    r = client.get(f"/{db.stem}/{name}.json", params=qs)
                n = len(r.json()) if r.status_code == 200 else 0
                ts = []
                for _ in range(requests):
                    t = time.perf_counter()
                    r = client.get(f"/{db.stem}/{name}.json", params=qs)
                    r.read()
                    ts.append((time.perf_counter() - t) * 1000)
                out.append((name, r.status_code, n, serve.pct(ts, 0.5), serve.pct(ts, 0.95)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        conn.close()
    return out


def sql_ms(db: Path, name: str, tree: str) -> float:
    """The served (scoped) SQL's own time on a plain read-only connection, median of 10."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scoped = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scope(scoped, tree or None)
    q = canned_queries()[name]
    params = serve.params_for(scoped, name, tuple(p for p in q.params if p != "tree"))
    text = served_sql(q)
    ts = []
    for _ in range(10):
        t = time.perf_counter()
        conn.execute(text, {**params, "tree": tree}).fetchall()
        ts.append((time.perf_counter() - t) * 1000)
    conn.close()
    scoped.close()
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ck-old", default=CK_OLD, help=f"the 2024-10 CK tree (default {CK_OLD})")
    ap.add_argument("--runs", type=int, default=1, help="cold builds per figure (median)")
    ap.add_argument("--cli-runs", type=int, default=5, help="runs per why/pool figure (median)")
    ap.add_argument("--requests", type=int, default=100, help="timed GETs per canned query")
    ap.add_argument("--skip-serve", action="store_true", help="skip (d)")
    args = ap.parse_args()
    wheel_ck = sources.default_ck_root()
    load0 = os.getloadavg()
    rows: list[tuple[str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="ckkb-trees-") as tmp:
        work = Path(tmp)
        # (a) cold builds
        one, info1, db1 = cold(work, "wheel", args.runs)
        two, info2, db3 = cold(
            work, "wheel+old", args.runs, "--ck", str(wheel_ck), "--ck", args.ck_old
        )
        rows.append(
            (
                "(a) cold build: wheel + 2024-10 CK vs wheel",
                f"{one:.1f} s",
                f"{two:.1f} s",
                f"{two / one:.2f}x",
                f"<= {GOALS['a']}x",
            )
        )
        parsed = f"parsed {info1.get('parsed')} vs {info2.get('parsed')} files"
        # (b) an identical tree added to the wheel-alone database
        copy = work / "ck-copy"
        shutil.copytree(wheel_ck, copy, symlinks=True)
        added, info_b = build(db1, "--ck", f"copy={copy}")
        rows.append(
            (
                "(b) add a copy of the wheel's CK tree",
                f"{one:.1f} s",
                f"{added:.1f} s",
                f"{added / one:.2f}x",
                f"<= {GOALS['b']}x",
            )
        )
        ckkb("build", "--db", str(db1), "--drop", "copy")  # back to one tree of each kind
        # (c) why / pool with one tree of each kind vs three trees
        for label, cmd in (
            ("why", ("why", "--tile", "256x224x64", "--arch", "gfx950", "--json")),
            ("pool", ("pool", "--dir", "gemm_universal", "--json")),
        ):
            a = cli_ms(db1, args.cli_runs, *cmd)
            b = cli_ms(db3, args.cli_runs, *cmd)
            rows.append(
                (
                    f"(c) ckkb {label}: three trees vs one",
                    f"{a:.0f} ms",
                    f"{b:.0f} ms",
                    f"{b / a:.2f}x",
                    f"<= {GOALS['c']}x",
                )
            )
        served: dict[str, list[tuple[str, int, int, float, float]]] = {}
        single: dict[str, tuple[str, int, int, float, float]] = {}
        if not args.skip_serve:
            held = json.loads(ckkb("trees", "--db", str(db3), "--json")[1])["trees"]
            old = next(
                t["name"]
                for t in held
                if t["kind"] == "ck" and Path(t["path"]).resolve() == Path(args.ck_old).resolve()
            )
            for tree in ("", old):
                served[tree] = serve_p95(db3, tree, args.requests)
            # the same queries on the one-tree database, under the same load, for the ratio
            single = {r[0]: r for r in serve_p95(db1, "", args.requests)}
            sqls = {
                (tree, r[0]): sql_ms(db3, r[0], tree) for tree, rs in served.items() for r in rs
            }
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.1f}, after {load1[0]:.1f} ({os.cpu_count()} cores)")
    print(f"cold builds: median of {args.runs}; (a) {parsed}; (b) parsed {info_b.get('parsed')}")
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}} {'one tree':>10} {'trees':>10} {'ratio':>7} {'goal':>8}  met")
    for name, a, b, ratio, goal in rows:
        met = float(ratio.rstrip("x")) <= float(goal.split()[1].rstrip("x"))
        print(f"{name:<{w}} {a:>10} {b:>10} {ratio:>7} {goal:>8}  {'yes' if met else 'NO'}")
    for tree, rs in served.items():
        print(
            f"\n(d) ckkb serve, three trees, tree={tree or '(default)'}: {args.requests} GETs each"
        )
        print(
            f"{'query':<20} {'status':>6} {'rows':>6} {'p50 ms':>8} {'p95 ms':>8} {'sql ms':>8}"
            f" {'1-tree p95':>10} {'ratio':>6}"
        )
        for name, status, n, p50, p95 in rs:
            sq, p1 = sqls[(tree, name)], single[name][4]
            print(
                f"{name:<20} {status:>6} {n:>6} {p50:>8.1f} {p95:>8.1f} {sq:>8.1f}"
                f" {p1:>10.1f} {p95 / p1:>5.2f}x"
            )
        over = [r[0] for r in rs if r[4] > serve.GOAL_P95_MS]
        print(
            f"goal p95 <= {serve.GOAL_P95_MS:.0f} ms: {len(rs) - len(over)} of {len(rs)}"
            + (f"; over: {', '.join(over)}" if over else "")
        )


if __name__ == "__main__":
    main()

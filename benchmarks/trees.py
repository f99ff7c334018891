"""Several trees in one knowledge base: what they cost to build and to read (issue 15).

    python3 benchmarks/trees.py [--ck-old PATH] [--runs N] [--cli-runs N] [--requests N]
        [--skip-serve] [--keep DIR]

Goals (each a ratio to the single-tree figure, or an absolute bound):
  (a) the wheel's trees plus the 2024-10 CK tree in one database, cold (new file, no cache),
      cost at most 1.5x the wheel's trees alone, cold: wall time, and CPU time of the build and
      its workers beside (what the machine's other jobs change least), median of --runs builds
      of each, interleaved;
  (b) adding a tree identical to one already there (a copy of the wheel's CK tree at another
      path) costs at most 0.2x the wheel-alone cold build;
  (c) `ckkb why` / `ckkb pool` latency with three trees (wheel CK + 2024-10 CK + wheel aiter:
      the database of (a)) is at most 1.2x the single-tree figure (the database of the wheel
      alone), median wall time of the whole command (interleaved runs); the same commands in
      this process too (no interpreter start or imports): what the extra trees themselves cost;
  (d) every Datasette canned query, served by `ckkb serve` over the three-tree database, has
      p95 <= 50 ms, for the default trees and for `tree=` the 2024-10 tree (benchmarks/serve.py's
      approach: sequential GETs of its JSON over one keep-alive connection), with the server's
      CPU per request beside (what the query costs whatever else the machine runs).

Builds and commands run as subprocesses (`python -m ckkb`) without PYTHONDONTWRITEBYTECODE (the
workplace shell sets it; it makes each subprocess recompile ckkb, ~0.5 CPU-s). Figures depend on
the machine's load: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
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


def children_cpu() -> float:
    """user+sys CPU seconds of this process's finished children (a build and its workers)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build(db: Path, *trees: str) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds (the build and its workers) and the build's JSON summary."""
    cpu0 = children_cpu()
    wall, out = ckkb("build", "--db", str(db), "--json", *trees)
    cpu = children_cpu() - cpu0
    try:
        info = json.loads(out)
    except ValueError:
        info = {}
    return wall, cpu, info


Cold = tuple[float, float, dict[str, Any], Path]  # median wall, median CPU, a summary, a database


def cold(workdir: Path, runs: int, **kinds: tuple[str, ...]) -> dict[str, Cold]:
    """label -> median wall and CPU of `runs` builds each into a new directory (no database, no
    cache), the labels' builds interleaved run by run (a load that changes during the benchmark
    weighs on each alike). CPU (the build and its workers) is what the build itself costs, which
    the machine's other jobs do not change as much as they change wall time."""
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    cpus: dict[str, list[float]] = {k: [] for k in kinds}
    info: dict[str, dict[str, Any]] = {}
    db: dict[str, Path] = {}
    for k in range(runs):
        for label, trees in kinds.items():
            d = workdir / f"{label}-{k}"
            d.mkdir()
            db[label] = d / "kb.db"
            wall, cpu, info[label] = build(db[label], *trees)
            walls[label].append(wall)
            cpus[label].append(cpu)
    return {
        k: (statistics.median(walls[k]), statistics.median(cpus[k]), info[k], db[k]) for k in kinds
    }


def cli_ms(dbs: list[Path], runs: int, *args: str) -> list[float]:
    """Median wall ms of `ckkb ARGS --db DB` per database, the databases interleaved run by run
    (a load that changes during the benchmark weighs on each alike)."""
    times: list[list[float]] = [[] for _ in dbs]
    for k in range(runs + 1):
        for i, db in enumerate(dbs):
            wall = ckkb(*args, "--db", str(db))[0]
            if k:  # the first round warms the page cache
                times[i].append(wall * 1000)
    return [statistics.median(t) for t in times]


def inproc_ms(dbs: list[Path], runs: int, *args: str) -> list[float]:
    """As cli_ms, in this process (click's runner): the command's own time, without the
    interpreter's start and imports, which a whole command pays once whatever the database."""
    from click.testing import CliRunner

    from ckkb.cli import main as cli

    runner = CliRunner()
    times: list[list[float]] = [[] for _ in dbs]
    for k in range(runs + 1):
        for i, db in enumerate(dbs):
            start = time.perf_counter()
            result = runner.invoke(cli, [*args, "--db", str(db)])
            if result.exit_code != 0:
                raise SystemExit(f"ckkb {' '.join(args)} failed: {result.output[-2000:]}")
            if k:
                times[i].append((time.perf_counter() - start) * 1000)
    return [statistics.median(t) for t in times]


LOOKUP_FALLBACK = {  # a tree with no part2 list (CK 2024-10): any row
    "key": "select key from instance_keys order by id limit 1",
    "registration_id": "select id from registrations order by id limit 1",
}


# for `tree=` the 2024-10 CK tree, which builds no gfx950: the same questions of an arch it builds
# (serve.PARAMS' gfx950 would answer 0 rows there, timing nothing)
OLD_TREE_PARAMS: dict[str, dict[str, str]] = {
    "why_missing": {"arch": "gfx942"},
    "pool": {"arch": "gfx942"},
    "gate_census": {"arch": "gfx942"},
    "arch_diff": {"arch_a": "gfx90a", "arch_b": "gfx942"},
}


def _params(
    conn: sqlite3.Connection, name: str, wanted: tuple[str, ...], tree: str = ""
) -> dict[str, str]:
    out: dict[str, str] = serve.params_for(conn, name, wanted)
    for key, sql in LOOKUP_FALLBACK.items():
        if key in out and not out[key]:
            row = conn.execute(sql).fetchone()
            out[key] = str(row[0]) if row else ""
    if tree:
        out.update(OLD_TREE_PARAMS.get(name, {}))
    ck_sql = "select name from main.sources where kind = 'ck' order by id"
    cks = [r[0] for r in conn.execute(ck_sql)]
    if name == "version_diff" and len(cks) > 1:  # two CK trees: the older against the wheel's
        out.update({"from": cks[1], "to": cks[0]})
    return out


Target = tuple[Path, str]  # a database and the tree asked for ('' = the defaults)


def _start(db: Path) -> tuple[subprocess.Popen[bytes], httpx.Client]:
    port = serve.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckkb", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    for _ in range(600):
        try:
            if client.get("/-/ckkb").status_code == 200:
                return proc, client
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.terminate()
    raise SystemExit(f"ckkb serve --db {db} did not start")


Served = tuple[str, int, int, float, float, float]  # query, status, rows, p50, p95, server CPU


def server_cpu_ms(pid: int) -> float:
    """user+sys CPU of process `pid` so far (/proc; clock ticks, 10 ms on Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def serve_p95(targets: list[Target], requests: int) -> dict[Target, list[Served]]:
    """target -> [(query, status, rows, p50 ms, p95 ms, server CPU ms per request)] for every
    canned query, one `ckkb serve` per database; each round sends one GET per target
    (interleaved, as cli_ms). The server's CPU per request (its CPU before and after each GET,
    summed per target) does not count the time other jobs take the cores from it, which wall
    times on a shared machine do."""
    servers = {db: _start(db) for db in dict.fromkeys(db for db, _ in targets)}
    conns = {}
    for db, tree in targets:
        conns[(db, tree)] = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        scope(conns[(db, tree)], tree or None)  # parameters a user of that tree would ask with
    out: dict[Target, list[Served]] = {t: [] for t in targets}
    try:
        for name, q in canned_queries().items():
            wanted = tuple(p for p in q.params if p != "tree")
            qs = {
                t: {**_params(conns[t], name, wanted, t[1]), "tree": t[1], "_shape": "array"}
                for t in targets
            }
            ts: dict[Target, list[float]] = {t: [] for t in targets}
            cpu = dict.fromkeys(targets, 0.0)
            last = {}
            for k in range(requests + 3):
                for t in targets:
                    proc, client = servers[t[0]]
                    cpu0 = server_cpu_ms(proc.pid)
                    start = time.perf_counter()
                    r = client.get(f"/{t[0].stem}/{name}.json", params=qs[t])
                    r.read()
                    if k >= 3:  # three warm-up rounds
                        ts[t].append((time.perf_counter() - start) * 1000)
                        cpu[t] += server_cpu_ms(proc.pid) - cpu0
                    last[t] = r
            for t in targets:
                r = last[t]
                n = len(r.json()) if r.status_code == 200 else 0
                p50, p95 = serve.pct(ts[t], 0.5), serve.pct(ts[t], 0.95)
                out[t].append((name, r.status_code, n, p50, p95, cpu[t] / requests))
    finally:
        for proc, client in servers.values():
            client.close()
            proc.terminate()
            proc.wait(timeout=10)
        for c in conns.values():
            c.close()
    return out


def sql_ms(db: Path, name: str, tree: str) -> float:
    """The served (scoped) SQL's own time on a plain read-only connection, median of 10."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scoped = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    scope(scoped, tree or None)
    q = canned_queries()[name]
    params = _params(scoped, name, tuple(p for p in q.params if p != "tree"), tree)
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
    ap.add_argument("--cli-runs", type=int, default=9, help="runs per why/pool figure (median)")
    ap.add_argument("--requests", type=int, default=100, help="timed GETs per canned query")
    ap.add_argument("--skip-serve", action="store_true", help="skip (d)")
    ap.add_argument("--keep", default=None, help="build in this directory and keep it")
    args = ap.parse_args()
    wheel_ck = sources.default_ck_root()
    load0 = os.getloadavg()
    rows: list[tuple[str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="ckkb-trees-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        # (a) cold builds
        built = cold(
            work,
            args.runs,
            wheel=(),
            **{"wheel+old": ("--ck", str(wheel_ck), "--ck", args.ck_old)},
        )
        one, one_cpu, info1, db1 = built["wheel"]
        two, two_cpu, info2, db3 = built["wheel+old"]
        rows.append(
            (
                "(a) cold build: wheel + 2024-10 CK vs wheel",
                f"{one:.1f} s",
                f"{two:.1f} s",
                f"{two / one:.2f}x",
                f"<= {GOALS['a']}x",
            )
        )
        rows.append(
            (
                "(a) the same builds' CPU (build + workers)",
                f"{one_cpu:.1f} s",
                f"{two_cpu:.1f} s",
                f"{two_cpu / one_cpu:.2f}x",
                f"<= {GOALS['a']}x",
            )
        )
        parsed = f"parsed {info1.get('parsed')} vs {info2.get('parsed')} files"
        # (b) an identical tree added to the wheel-alone database
        copy = work / "ck-copy"
        shutil.copytree(wheel_ck, copy, symlinks=True)
        added, added_cpu, info_b = build(db1, "--ck", f"copy={copy}")
        rows.append(
            (
                "(b) add a copy of the wheel's CK tree",
                f"{one:.1f} s",
                f"{added:.1f} s",
                f"{added / one:.2f}x",
                f"<= {GOALS['b']}x",
            )
        )
        rows.append(
            (
                "(b) the same build's CPU (build + workers)",
                f"{one_cpu:.1f} s",
                f"{added_cpu:.1f} s",
                f"{added_cpu / one_cpu:.2f}x",
                f"<= {GOALS['b']}x",
            )
        )
        ckkb("build", "--db", str(db1), "--drop", "copy")  # back to one tree of each kind
        # (c) why / pool with one tree of each kind vs three trees
        for label, cmd in (
            ("why", ("why", "--tile", "256x224x64", "--arch", "gfx950", "--json")),
            ("pool", ("pool", "--dir", "gemm_universal", "--json")),
        ):
            a, b = cli_ms([db1, db3], args.cli_runs, *cmd)
            a_in, b_in = inproc_ms([db1, db3], 5 * args.cli_runs, *cmd)
            rows.append(
                (
                    f"(c) ckkb {label}, whole command: 3 trees vs 1",
                    f"{a:.0f} ms",
                    f"{b:.0f} ms",
                    f"{b / a:.2f}x",
                    f"<= {GOALS['c']}x",
                )
            )
            rows.append(
                (
                    f"(c) ckkb {label}, in-process (no start-up)",
                    f"{a_in:.1f} ms",
                    f"{b_in:.1f} ms",
                    f"{b_in / a_in:.2f}x",
                    "(info)",
                )
            )
        served: dict[Target, list[Served]] = {}
        sqls: dict[tuple[str, str, str], float] = {}
        if not args.skip_serve:
            held = json.loads(ckkb("trees", "--db", str(db3), "--json")[1])["trees"]
            old = next(
                t["name"]
                for t in held
                if t["kind"] == "ck" and Path(t["path"]).resolve() == Path(args.ck_old).resolve()
            )
            targets = [(db1, ""), (db3, ""), (db3, old)]
            served = serve_p95(targets, args.requests)
            sqls = {
                (str(db), tree, r[0]): sql_ms(db, r[0], tree)
                for (db, tree), rs in served.items()
                for r in rs
            }
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.1f}, after {load1[0]:.1f} ({os.cpu_count()} cores)")
    print(
        f"cold builds: median of {args.runs}, interleaved; (a) {parsed}; (b) parsed "
        f"{info_b.get('parsed')}"
    )
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}} {'one tree':>10} {'trees':>10} {'ratio':>7} {'goal':>8}  met")
    for name, one_s, trees_s, ratio, goal in rows:
        met = "" if goal == "(info)" else "yes"
        if goal != "(info)" and float(ratio.rstrip("x")) > float(goal.split()[1].rstrip("x")):
            met = "NO"
        print(f"{name:<{w}} {one_s:>10} {trees_s:>10} {ratio:>7} {goal:>8}  {met}")
    if not served:
        return
    single = {r[0]: r for r in served[targets[0]]}
    for (db, tree), rs in served.items():
        if db != db3:
            continue
        shown = tree or "(the defaults)"
        print(f"\n(d) ckkb serve, three trees, tree={shown}: {args.requests} GETs per query")
        print(
            f"{'query':<20} {'status':>6} {'rows':>6} {'p50 ms':>7} {'p95 ms':>7} {'sql ms':>7}"
            f" {'cpu ms':>7} | 1 tree: {'p50':>6} {'p95':>6} {'sql':>6} {'cpu':>6}"
            " | p50 and p95 ratios"
        )
        for name, status, n, p50, p95, cpu in rs:
            sq, ref = sqls[(str(db), tree, name)], single[name]
            sq1 = sqls[(str(targets[0][0]), "", name)]
            print(
                f"{name:<20} {status:>6} {n:>6} {p50:>7.1f} {p95:>7.1f} {sq:>7.1f} {cpu:>7.1f}"
                f" |         {ref[3]:>6.1f} {ref[4]:>6.1f} {sq1:>6.1f} {ref[5]:>6.1f} |"
                f" {p50 / ref[3]:>5.2f}x {p95 / ref[4]:>5.2f}x"
            )
        over = [r[0] for r in rs if r[4] > serve.GOAL_P95_MS]
        print(
            f"goal p95 <= {serve.GOAL_P95_MS:.0f} ms: {len(rs) - len(over)} of {len(rs)}"
            + (f"; over: {', '.join(over)}" if over else "")
        )
    over1 = [r[0] for r in served[targets[0]] if r[4] > serve.GOAL_P95_MS]
    print(
        f"one tree, same rounds: {len(single) - len(over1)} of {len(single)} <= "
        f"{serve.GOAL_P95_MS:.0f} ms" + (f"; over: {', '.join(over1)}" if over1 else "")
    )


if __name__ == "__main__":
    main()

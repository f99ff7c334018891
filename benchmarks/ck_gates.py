"""Registrations, gates, factories and CMake rules on the default (wheel) CK tree: extraction cost
against a bare tree-sitter parse of the same files, per-arch evaluation cost, and query latency.

    python3 benchmarks/ck_gates.py [--db /tmp/a2/ck.db]

Single process, no cache: the figures are what one worker spends on these stages in a cold build.
The knowledge base given with --db (built with `ckkb build --no-aiter` if missing) supplies the
instance lists the registrations stage resolves against, and is what the queries are timed on.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb import (
    pipeline,
    sources,  # noqa: E402
)
from ckkb.extract import cmake, factories, registrations  # noqa: E402
from ckkb.extract.cpp import parse  # noqa: E402
from ckkb.kb.build import build  # noqa: E402
from ckkb.kb.db import open_db  # noqa: E402
from ckkb.kb.schema.ck_instances import InstanceListRow  # noqa: E402
from ckkb.kb.stages import BuildContext  # noqa: E402
from ckkb.queries import ck as q  # noqa: E402


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="/tmp/a2/ck.db")
    args = ap.parse_args()
    tree = sources.ck_tree(None)
    root = tree.root
    db_path = Path(args.db)
    if not db_path.exists():
        build(db_path, {"ck": tree}, jobs=1, stages=pipeline.stages())

    stages = [cmake.STAGE, factories.STAGE, registrations.STAGE]
    files = {
        s.name: [(p.relative_to(root).as_posix(), p.read_bytes()) for p in s.files(root)]
        for s in stages
    }
    cpp = [d for s in ("ck.factories", "ck.registrations") for _rel, d in files[s]]

    t_ref, _ = timed(lambda: [parse(d) for d in cpp])
    rows = []
    results = {}
    for s in stages:
        t, res = timed(lambda s=s: {rel: s.extract(root, rel, d) for rel, d in files[s.name]})
        results[s.name] = res
        rows.append((f"extract {s.name}", len(files[s.name]), t))

    db = open_db(db_path, readonly=True)
    lists = [
        InstanceListRow(
            **{
                k: (json.loads(v) if k == "template_params" else v)
                for k, v in r.items()
                if k != "source_id"
            }
        )
        for r in db.query("SELECT * FROM instance_lists")
    ]
    ctx = BuildContext(trees={"ck": tree}, rows={"instance_lists": lists})
    t_cm, out = timed(lambda: cmake.STAGE.combine(root, results["ck.cmake"], ctx))
    for r in out.rows:
        ctx.rows.setdefault(type(r).__table__, []).append(r)
    rows.append(("combine ck.cmake (8 archs)", len(ctx.table_rows("file_builds")), t_cm))
    t_rg, out = timed(lambda: registrations.STAGE.combine(root, results["ck.registrations"], ctx))
    rows.append(("combine ck.registrations (+availability)", len(out.rows), t_rg))

    tile = "256x224x64"
    part2 = "list_name=device_gemm_xdl_universal_bf16_bf16_bf16_mk_nk_mn_comp_instances_part2"
    queries = [
        ("gates --json", lambda: q.gates(db)),
        ("gates --kind device_name --json", lambda: q.gates(db, "device_name")),
        (f"why --tile {tile} --arch gfx950", lambda: q.why(db, tile, arch="gfx950")),
        (
            f"why --tile {tile} {part2[:9]}... --arch gfx950",
            lambda: q.why(db, tile, [part2], arch="gfx950"),
        ),
        (
            "pool --dir gemm_universal --dtype bf16",
            lambda: q.pool_counts(db, "gemm_universal", "bf16"),
        ),
        (
            "instances --dir gemm_universal --arch gfx950",
            lambda: q.instances(db, "gemm_universal", (), "gfx950"),
        ),
    ]
    qrows = [(name, timed(fn, repeat=5)[0]) for name, fn in queries]

    ext = sum(t for name, _n, t in rows if name.startswith("extract"))
    print(f"CK tree: {root} (version {tree.version}, wheel {tree.wheel_version})")
    print(f"\n{'step':<46}{'items':>8}{'seconds':>10}")
    print(f"{'bare tree-sitter parse (reference)':<46}{len(cpp):>8}{t_ref:>10.2f}")
    for name, n, t in rows:
        print(f"{name:<46}{n:>8}{t:>10.2f}")
    print(f"\nextract (3 stages) / reference parse: {ext / t_ref:.2f}x")
    print(f"extract + combine / reference parse:  {(ext + t_cm + t_rg) / t_ref:.2f}x")
    print(f"\n{'query (library call, median of 5)':<58}{'ms':>8}")
    for name, t in qrows:
        print(f"{name:<58}{t * 1000:>8.0f}")
    print(f"\npeak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

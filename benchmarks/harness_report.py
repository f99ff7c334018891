"""Summarise a harness bundle: ceilings vs do_bench, achieved vs bound per shape class, the
warm-vs-cold ratio distribution and the run-to-run spread between the two passes.

    python3 benchmarks/harness_report.py [benchmarks/results/h200_harness.jsonl]

Reads the bundle directly (what `ckkb ingest` stores); prints plain-text tables for the README.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb.harness.bundle import read_bundle  # noqa: E402

DEFAULT = Path(__file__).parent / "results" / "h200_harness.jsonl"


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def table(title: str, head: list[str], rows: list[list[object]]) -> None:
    print(f"\n{title}")
    cells = [head] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(head))]
    for j, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)))
        if j == 0:
            print("  " + "  ".join("-" * x for x in w))


def m_class(m: int) -> str:
    return "small M (<=64)" if m <= 64 else "large M (>64)"


def main(path: Path) -> None:
    head, recs = read_bundle(path)
    host = head["host"]
    res = [r for r in recs if r["record"] == "harness_results"]
    ceil = [r for r in recs if r["record"] == "harness_ceilings"]
    ok = [r for r in res if r["status"] == "ok"]
    shapes = {(r["M"], r["N"], r["K"], r["dtype"]) for r in res}
    print(
        f"bundle {path.name}: {host['device']} ({host['arch']}), "
        f"torch {host['torch']}, {host['runtime']}, "
        f"last-level cache {host['llc_bytes'] / 2**20:.0f} MiB ({host['llc_source']})"
    )
    print(
        f"{len(shapes)} shapes ({sum(1 for s in shapes if s[3] == 'bf16')} "
        f"bf16, {sum(1 for s in shapes if s[3] == 'fp8')} fp8), "
        f"{len(res)} timings ({len(ok)} ok), passes {sorted({r['pass_no'] for r in res})}; "
        f"methods: graph {sum(1 for r in ok if r['method'] == 'graph')}, "
        f"events {sum(1 for r in ok if r['method'] == 'events')}"
    )
    clk = host.get("clocks") or {}
    clk_end = host.get("clocks_end") or {}
    if clk:
        print(
            f"clocks: SM {clk.get('sm_mhz')} MHz at start, "
            f"{clk_end.get('sm_mhz')} MHz at end (max {clk.get('sm_max_mhz')}), "
            f"memory {clk.get('mem_mhz')} MHz, power limit {clk.get('power_limit_w')} W"
        )

    rows = []
    for c in ceil:
        e = c["extra"]
        rows.append(
            [
                c["what"],
                c["size"],
                c["us"],
                c["do_bench_us"],
                c["ratio"],
                f"{c['value']:.0f} {c['unit']}",
                e.get("burst_us"),
                f"{e.get('burst_value', 0):.0f} {c['unit']}",
                ",".join(str(x) for x in e.get("sm_mhz_after_rounds", [])),
            ]
        )
    table(
        "Ceilings: harness (events, median) vs "
        "triton.testing.do_bench over the same settled window",
        [
            "op",
            "size",
            "harness us",
            "do_bench us",
            "ratio",
            "harness rate",
            "burst us",
            "burst rate",
            "SM MHz",
        ],
        rows,
    )

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in ok:
        groups[(r["dtype"], m_class(r["M"]), r["regime"])].append(r)
    rows = []
    for k in sorted(groups):
        g = groups[k]
        pct = [r["pct_of_bound"] for r in g]
        rows.append(
            [
                *k,
                len(g),
                sum(1 for r in g if r["bound"] == "memory"),
                statistics.median(pct),
                q(pct, 0.1),
                max(pct),
                statistics.median([r["tflops"] for r in g]),
                statistics.median([r["gbps"] for r in g]),
            ]
        )
    table(
        "Achieved vs roofline bound (bound from the ceilings measured in the run), per shape class",
        [
            "dtype",
            "class",
            "regime",
            "n",
            "mem-bound",
            "median %",
            "p10 %",
            "max %",
            "median TFLOP/s",
            "median GB/s",
        ],
        rows,
    )

    by = {
        (r["M"], r["N"], r["K"], r["dtype"], r["candidate"], r["pass_no"], r["regime"]): r
        for r in ok
    }
    ratios: dict[tuple, list[float]] = defaultdict(list)
    allr = []
    top = []
    for (M, N, K, dt, cand, p, reg), r in by.items():
        if reg != "warm":
            continue
        c = by.get((M, N, K, dt, cand, p, "cold"))
        if not c:
            continue
        x = c["us"] / r["us"]
        ratios[(dt, m_class(M))].append(x)
        allr.append(x)
        if p == 1:
            top.append(
                (
                    x,
                    M,
                    N,
                    K,
                    dt,
                    cand,
                    r["us"],
                    c["us"],
                    c["extra"].get("buffers"),
                    c["extra"].get("set_bytes"),
                )
            )
    rows = []
    for k in sorted(ratios) + [("all", "all")]:
        xs = ratios[k] if k in ratios else allr
        rows.append(
            [
                *k,
                len(xs),
                min(xs),
                q(xs, 0.1),
                statistics.median(xs),
                q(xs, 0.9),
                max(xs),
                sum(1 for x in xs if x > 1.05),
                sum(1 for x in xs if x > 1.20),
            ]
        )
    table(
        "Warm-vs-cold ratio cold_us / warm_us (above 1: "
        "the warm, tuner-style number is optimistic)",
        ["dtype", "class", "n", "min", "p10", "median", "p90", "max", ">1.05", ">1.20"],
        rows,
    )
    top.sort(reverse=True)
    table(
        "Largest warm-vs-cold ratios (pass 1)",
        [
            "ratio",
            "M",
            "N",
            "K",
            "dtype",
            "candidate",
            "warm us",
            "cold us",
            "cold sets",
            "set MiB",
        ],
        [
            [t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], f"{(t[9] or 0) / 2**20:.1f}"]
            for t in top[:8]
        ],
    )

    diffs: dict[str, list[float]] = defaultdict(list)
    for (M, N, K, dt, cand, p, reg), r in by.items():
        if p != 1:
            continue
        r2 = by.get((M, N, K, dt, cand, 2, reg))
        if r2:
            d = abs(r2["us"] - r["us"]) / r["us"] * 100
            diffs[reg].append(d)
            diffs["all"].append(d)
    if diffs:
        rows = [
            [k, len(v), statistics.median(v), q(v, 0.9), max(v), sum(1 for x in v if x > 2.0)]
            for k, v in sorted(diffs.items())
        ]
        table(
            "Run-to-run spread: |pass 2 - pass 1| / pass "
            "1, percent, per (shape, candidate, regime)",
            ["regime", "n", "median %", "p90 %", "max %", ">2 %"],
            rows,
        )
    spreads = [r["spread"] for r in ok]
    print(
        "\nwithin-slot spread (p75-p25)/median: median "
        f"{statistics.median(spreads) * 100:.2f} %, p90 {q(spreads, 0.9) * 100:.2f} %, "
        f"max {max(spreads) * 100:.2f} %; verification error max {max(r['err'] for r in ok):.2e}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)

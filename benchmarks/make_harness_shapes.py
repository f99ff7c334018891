"""Pick the shapes the H200 harness run times, from the installed aiter wheel's configs.

The device machine has no aiter wheel, so the chosen rows are copied (shapes and the tuner's own
numbers only) into benchmarks/harness_shapes_h200.csv, which travels with the working tree.

    python3 benchmarks/make_harness_shapes.py > benchmarks/harness_shapes_h200.csv

bf16: every row of aiter/configs/bf16_tuned_gemm.csv, plus rows of model_configs/*bf16*: one M
per (N, K) pair cycling 1, 64, 1024, and M = 4096 for two pairs, at most MAX_FLOPS per call (keeps
the run inside a lease).
fp8: rows of aiter/configs/a8w8_tuned_gemm.csv (rowwise-scaled, as torch._scaled_mm rowwise does)
with N and K multiples of 16, spread over M.
"""

from __future__ import annotations

import csv
import sys

from ckkb import sources

MAX_FLOPS = 1.2e12


def main() -> None:
    tree = sources.aiter_tree(None)
    cfg = tree.configs_dir
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["M", "N", "K", "dtype", "config", "config_row", "kernelId", "splitK", "us"])
    seen = set()

    def emit(row, dtype, path, i):
        key = (int(row["M"]), int(row["N"]), int(row["K"]), dtype)
        if key in seen:
            return False
        seen.add(key)
        w.writerow(
            [
                *key,
                tree.rel(path),
                i,
                row.get("kernelId", ""),
                row.get("splitK", ""),
                row.get("us", ""),
            ]
        )
        return True

    p = cfg / "bf16_tuned_gemm.csv"
    with p.open() as f:
        for i, row in enumerate(csv.DictReader(f), start=1):
            emit(row, "bf16", p, i)
    for p in sorted((cfg / "model_configs").glob("*bf16*.csv")):
        with p.open() as f:
            rows = list(enumerate(csv.DictReader(f), start=1))
        pairs = list(dict.fromkeys((int(r["N"]), int(r["K"])) for _, r in rows))
        # one M per (N, K) pair, cycling 1, 64, 1024 (small and large M alike), plus M = 4096
        # for the first two pairs that stay under MAX_FLOPS
        want = {pair: (1, 64, 1024)[j % 3] for j, pair in enumerate(pairs)}
        big = [pair for pair in pairs if 2 * 4096 * pair[0] * pair[1] <= MAX_FLOPS][:2]
        for i, row in rows:
            M, N, K = int(row["M"]), int(row["N"]), int(row["K"])
            if (M == want[(N, K)] or (M == 4096 and (N, K) in big)) and 2 * M * N * K <= MAX_FLOPS:
                emit(row, "bf16", p, i)
    p = cfg / "a8w8_tuned_gemm.csv"
    want_m = {1: 3, 16: 2, 64: 2, 256: 2, 1024: 2, 4096: 2}
    with p.open() as f:
        for i, row in enumerate(csv.DictReader(f), start=1):
            M, N, K = int(row["M"]), int(row["N"]), int(row["K"])
            if (
                row["cu_num"] == "256"
                and N % 16 == 0
                and K % 16 == 0
                and want_m.get(M, 0) > 0
                and 2 * M * N * K <= MAX_FLOPS
            ):
                if emit(row, "fp8", p, i):
                    want_m[M] -= 1


if __name__ == "__main__":
    main()

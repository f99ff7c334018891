"""The harness reads shapes from the installed wheel's aiter configs; the H200 shape list came from
them."""

from __future__ import annotations

import csv
from pathlib import Path

from ckkb.harness.shapes import config_name, read_shapes, resolve_config

SHAPES = Path(__file__).resolve().parents[2] / "benchmarks" / "harness_shapes_h200.csv"


def test_from_config_reads_the_default_bf16_tuned_gemm(wheel_trees):
    p = wheel_trees["aiter"].configs_dir / "bf16_tuned_gemm.csv"
    name = config_name(p)
    assert name == "aiter/configs/bf16_tuned_gemm.csv"
    shapes = read_shapes(p, config=name)
    assert len(shapes) == 8
    assert {s.dtype for s in shapes} == {"bf16"} and {(s.N, s.K) for s in shapes} == {(256, 5120)}
    assert shapes[0].M == 64 and shapes[0].tuner_us == 8.3 and shapes[0].config_row == 1


def test_from_config_model_and_a8w8_files(wheel_trees):
    cfg = wheel_trees["aiter"].configs_dir
    for p in sorted((cfg / "model_configs").glob("*bf16*.csv")):
        shapes = read_shapes(p, config=config_name(p))
        assert len(shapes) > 100 and {s.dtype for s in shapes} == {"bf16"}
    a8 = read_shapes(cfg / "a8w8_tuned_gemm.csv", config="aiter/configs/a8w8_tuned_gemm.csv")
    assert {s.dtype for s in a8} == {"fp8"} and all(s.kernel_id is not None for s in a8)


def test_the_h200_shape_list_matches_the_wheel_rows(wheel_trees):
    tree = wheel_trees["aiter"]
    rows = list(csv.DictReader(SHAPES.open()))
    assert (
        sum(r["dtype"] == "bf16" for r in rows) >= 40
        and sum(r["dtype"] == "fp8" for r in rows) >= 10
    )
    cache: dict[str, list[dict]] = {}
    for r in rows:
        path = tree.package_dir / r["config"].removeprefix("aiter/")
        src = cache.setdefault(r["config"], list(csv.DictReader(path.open())))
        row = src[int(r["config_row"]) - 1]
        assert (int(row["M"]), int(row["N"]), int(row["K"])) == (
            int(r["M"]),
            int(r["N"]),
            int(r["K"]),
        ), r


def test_bare_config_names_resolve_to_the_default_tree(wheel_trees, tmp_path, monkeypatch):
    cfg = wheel_trees["aiter"].configs_dir
    monkeypatch.chdir(tmp_path)
    assert resolve_config("bf16_tuned_gemm.csv") == cfg / "bf16_tuned_gemm.csv"
    assert (
        resolve_config("model_configs/llama70B_untuned_gemm_bf16.csv")
        == cfg / "model_configs" / "llama70B_untuned_gemm_bf16.csv"
    )
    assert resolve_config("no_such.csv") == Path("no_such.csv")
    (tmp_path / "bf16_tuned_gemm.csv").write_text("M,N,K\n1,2,3\n")  # a local file wins
    assert resolve_config("bf16_tuned_gemm.csv") == Path("bf16_tuned_gemm.csv")

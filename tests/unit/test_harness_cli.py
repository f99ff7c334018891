"""`ckkb harness`: shapes from CSVs and aiter configs, and every refusal as one line, nothing
written."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckkb.harness
from ckkb.cli import main
from ckkb.errors import CkkbError
from ckkb.harness.shapes import parse_dtype, parse_dtype_list, read_shapes
from ckkb.harness.timing import Shape

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "harness"


def run(*args):
    return CliRunner().invoke(main, list(args))


# ----- shapes -------------------------------------------------------------------------------------


def test_shapes_csv_with_dtypes_whitespace_and_duplicates():
    shapes = read_shapes(FIX / "shapes.csv")
    assert [(s.M, s.N, s.K, s.dtype) for s in shapes] == [
        (1, 1280, 8192, "bf16"),
        (64, 2560, 8192, "bf16"),
        (1024, 8192, 2048, "fp16"),
        (16, 1280, 8192, "fp8"),
    ]  # the repeated first row is dropped
    assert all(s.config is None for s in shapes)


def test_dtype_option_times_every_shape_in_each_dtype_and_limit_cuts():
    shapes = read_shapes(FIX / "shapes.csv", dtypes=["bf16", "fp8"])
    assert [(s.M, s.dtype) for s in shapes][:4] == [
        (1, "bf16"),
        (1, "fp8"),
        (64, "bf16"),
        (64, "fp8"),
    ]
    assert len(read_shapes(FIX / "shapes.csv", limit=2)) == 2


def test_from_bf16_config_rows():
    shapes = read_shapes(FIX / "bf16_tuned_gemm.csv", config="aiter/configs/bf16_tuned_gemm.csv")
    assert shapes == [
        Shape(32, 512, 4096, "bf16", "aiter/configs/bf16_tuned_gemm.csv", 1, None, 4, 7.5),
        Shape(96, 512, 4096, "bf16", "aiter/configs/bf16_tuned_gemm.csv", 2, None, 2, 9.25),
    ]


def test_from_a8w8_config_rows_are_fp8_with_kernel_ids():
    shapes = read_shapes(FIX / "a8w8_tuned_gemm.csv", config="aiter/configs/a8w8_tuned_gemm.csv")
    assert [(s.M, s.dtype, s.kernel_id, s.splitk, s.tuner_us, s.config_row) for s in shapes] == [
        (16, "fp8", 12, 0, 10.5, 1),
        (256, "fp8", 0, 1, 14.0, 2),
    ]


def test_config_the_harness_cannot_time_is_refused():
    with pytest.raises(CkkbError, match="no shapes to time"):
        read_shapes(FIX / "a4w4_tuned_gemm.csv", config="aiter/configs/a4w4_tuned_gemm.csv")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("M,N,K\n1,2,3\n0,2,3\n", r"x.csv:3: M must be positive, got 0"),
        ("M,N,K\n1,-2,3\n", r"x.csv:2: N must be positive, got -2"),
        ("M,N,K\n1,2,3.5\n", r"x.csv:2: K is not an integer: '3.5'"),
        ("M,N,K\n1,2,\n", r"x.csv:2: K is not an integer: ''"),
        ("M,N\n1,2\n", r"x.csv:1: missing column\(s\) K"),
        ("M,N,K\n1,2,3,4\n", r"x.csv:2: more fields than the header has"),
        ("M,N,K,dtype\n1,2,3,int4\n", r"x.csv:2: unsupported dtype 'int4'"),
        ("M,N,K\n", r"x.csv: no shapes to time"),
    ],
)
def test_bad_shapes_name_file_and_line(tmp_path, text, message):
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(CkkbError, match=message):
        read_shapes(p)


def test_binary_and_missing_files(tmp_path):
    p = tmp_path / "x.csv"
    p.write_bytes(b"\x7fELF\x00\x00\x01")
    with pytest.raises(CkkbError, match="binary file"):
        read_shapes(p)
    p.write_bytes(b"M,N,K\n\xff\xfe,1,1\n")
    with pytest.raises(CkkbError, match="not UTF-8"):
        read_shapes(p)
    with pytest.raises(CkkbError, match="shapes file not found"):
        read_shapes(tmp_path / "missing.csv")


def test_dtype_spellings():
    assert [
        parse_dtype(t)
        for t in (
            "torch.bfloat16",
            "bf16",
            "torch.float16",
            "torch.float8_e4m3fnuz",
            "torch.float8_e4m3fn",
            "torch.int8",
        )
    ] == ["bf16", "bf16", "fp16", "fp8", "fp8", None]
    assert parse_dtype_list("bf16, fp8,bf16") == ["bf16", "fp8"]
    assert parse_dtype_list(None) is None
    with pytest.raises(CkkbError, match="unsupported dtype 'fp4'"):
        parse_dtype_list("bf16,fp4")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(
    st.lists(
        st.tuples(st.integers(1, 1 << 20), st.integers(1, 1 << 20), st.integers(1, 1 << 20)),
        min_size=1,
        max_size=20,
        unique=True,
    )
)
def test_any_positive_shapes_round_trip(tmp_path, dims):
    p = tmp_path / "h.csv"
    p.write_text("M,N,K\n" + "".join(f"{m}, {n},{k}\n" for m, n, k in dims))
    assert [(s.M, s.N, s.K) for s in read_shapes(p)] == dims


# ----- the command: refusals, one line each, nothing written ---------------------------------


def _one_line_error(res, text):
    assert res.exit_code != 0
    err = [ln for ln in res.output.splitlines() if ln.startswith("ckkb: error:")]
    assert len(err) == 1 and text in err[0], res.output
    assert "Traceback" not in res.output


def test_zero_dimension_is_refused_before_anything(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("M,N,K\n64,0,128\n")
    out = tmp_path / "b.jsonl"
    res = run("harness", "--shapes", str(p), "--out", str(out))
    _one_line_error(res, "s.csv:2: N must be positive, got 0")
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ([], "give exactly one of --shapes FILE or --from-config CSV"),
        (
            ["--shapes", "a.csv", "--from-config", "b.csv"],
            "give exactly one of --shapes FILE or --from-config CSV",
        ),
        (
            ["--shapes", str(FIX / "shapes.csv"), "--dtype", "int8"],
            "unsupported dtype 'int8' in --dtype",
        ),
        (["--shapes", str(FIX / "shapes.csv"), "--limit", "0"], "--limit must be positive"),
        (
            ["--shapes", str(FIX / "shapes.csv"), "--out", "/nonexistent-dir/b.jsonl"],
            "output folder does not exist",
        ),
    ],
)
def test_usage_errors(args, text):
    _one_line_error(run("harness", *args), text)


def test_no_torch_says_so_plainly(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    out = tmp_path / "b.jsonl"
    res = run("harness", "--shapes", str(FIX / "shapes.csv"), "--out", str(out))
    _one_line_error(res, "torch is not installed")
    assert "pip install 'ckkb[gpu]'" in res.output
    assert res.exit_code == 3 and not out.exists()


def _fake_torch(available: bool):
    t = types.ModuleType("torch")
    t.cuda = types.SimpleNamespace(is_available=lambda: available)
    t.version = types.SimpleNamespace(hip=None, cuda="13.0")
    return t


def test_no_gpu_present(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(False))
    out = tmp_path / "b.jsonl"
    res = run("harness", "--shapes", str(FIX / "shapes.csv"), "--out", str(out))
    _one_line_error(res, "no GPU present")
    assert res.exit_code == 3 and not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_fp8_on_a_device_without_fp8(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(True))
    fake_tb = types.ModuleType("ckkb.harness.torch_backend")
    fake_tb.device_info = lambda: types.SimpleNamespace(name="NVIDIA A100-SXM4-80GB", arch="sm_80")
    monkeypatch.setitem(sys.modules, "ckkb.harness.torch_backend", fake_tb)
    monkeypatch.setattr(ckkb.harness, "torch_backend", fake_tb, raising=False)
    out = tmp_path / "b.jsonl"
    res = run("harness", "--shapes", str(FIX / "shapes.csv"), "--dtype", "fp8", "--out", str(out))
    _one_line_error(res, "fp8 is not supported on NVIDIA A100-SXM4-80GB (sm_80)")
    assert not out.exists()
    # bf16 alone passes the preflight on that device (then would time; not here: no real GPU)
    from ckkb.harness.run import preflight

    assert preflight(read_shapes(FIX / "shapes.csv", dtypes=["bf16"])).arch == "sm_80"


def test_help_names_the_contract_options():
    res = run("harness", "--help")
    assert res.exit_code == 0
    for opt in ("--shapes", "--from-config", "--dtype", "--out", "--limit", "--passes"):
        assert opt in res.output


def test_harness_package_imports_without_torch():
    # in a fresh interpreter where `import torch` fails, everything but the torch backend imports
    import subprocess

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import ckkb.harness.roofline, ckkb.harness.timing, ckkb.harness.candidates, "
        "ckkb.harness.shapes\n"
        "import ckkb.harness.bundle, ckkb.harness.run, ckkb.harness.command, ckkb.cli.harness\n"
        "print('ok')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr

"""Config CSV ingestion, tuner facts, runtime configs and
the merge preview, on the hand-written aiter_mini tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckkb import pipeline, sources
from ckkb.audit.context import add_default_tables, load_tree, read_env_file
from ckkb.audit.engine import audit
from ckkb.audit.rules_keys import merge_preview
from ckkb.audit.summary import summary
from ckkb.cli import main
from ckkb.extract.aiter_configs import config_rows, read_csv
from ckkb.kb.build import build
from ckkb.kb.db import open_db
from ckkb.kb.schema.aiter import AiterConfigFileRow, AiterConfigRowRow
from ckkb.queries import sql

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_mini"


def _ctx(root=MINI, env=None):
    ctx = load_tree(sources.aiter_tree(str(root)))
    if env:
        ctx.env = read_env_file(env)
    add_default_tables(ctx)
    return ctx


# ---------------------------------------------------------------- CSV reading


def test_rows_keep_file_line_key_columns_and_the_rest_as_json():
    data = (
        b"M,N,K,q_dtype_w,cu_num,kernelId,splitK,us,kernelName,errRatio\n\n "
        b"1, 2 ,3,torch.float8_e4m3fn,256,5,0,8.25,k5,nan\n"
    )
    t = read_csv("aiter/configs/x_tuned_gemm.csv", data)
    assert t.error is None and t.kind == "tuned"
    assert t.rows == [
        (
            3,
            {
                "M": 1,
                "N": 2,
                "K": 3,
                "q_dtype_w": "torch.float8_e4m3fn",
                "cu_num": 256,
                "kernelId": 5,
                "splitK": 0,
                "us": 8.25,
                "kernelName": "k5",
                "errRatio": t.rows[0][1]["errRatio"],
            },
        )
    ]
    rows = config_rows(7, t, "gemm_x")
    f, r = rows
    assert isinstance(f, AiterConfigFileRow) and (f.id, f.rows, f.op, f.kind) == (
        7,
        1,
        "gemm_x",
        "tuned",
    )
    assert isinstance(r, AiterConfigRowRow)
    assert (r.line, r.M, r.N, r.K, r.cu_num, r.arch, r.q_dtype_w, r.kernelId, r.us) == (
        3,
        1,
        2,
        3,
        256,
        "gfx950",
        "torch.float8_e4m3fn",
        5,
        8.25,
    )
    assert r.values == {
        "kernelId": 5,
        "splitK": 0,
        "us": 8.25,
        "kernelName": "k5",
        "errRatio": None,
    }


@pytest.mark.parametrize(
    ("data", "line", "needle"),
    [
        (b"", 1, "empty file"),
        (b"\n\n", 1, "empty file"),
        (b"M;N;K\n1;2;3\n", 1, "wrong delimiter"),
        (b"M\tN\tK\n1\t2\t3\n", 1, "wrong delimiter"),
        (b"M,N,K\n1,2,\xff3\n", 2, "not UTF-8"),
        (b"M,N,K\x00\x01\x02", 1, "binary"),
        (b"M,N,M\n1,2,3\n", 1, "duplicate column"),
    ],
)
def test_unreadable_csvs_say_why_with_a_line(data, line, needle):
    t = read_csv("bad.csv", data)
    assert t.rows == [] and t.error_line == line and needle in t.error


def test_ragged_rows_are_skipped_with_their_lines():
    t = read_csv("r.csv", b"M,N,K\n1,2,3\n4,5\n6,7,8\n")
    assert [ln for ln, _ in t.rows] == [2, 4]
    assert t.problems == [(3, "2 fields, the header has 3; row skipped")]


# ---------------------------------------------------------------- tuner and runtime facts


def test_tuner_options_with_actions_and_defaults():
    ctx = _ctx()
    base = {o.option: o for o in ctx.options if o.tuner == "base"}
    d = {k: json.loads(o.default) for k, o in base.items()}
    assert (
        base["--splitK"].flags == ["-k", "--splitK"]
        and base["--splitK"].action == "store_true"
        and d["--splitK"] is False
    )
    assert d["--errRatio"] == 0.05 and base["--errRatio"].type == "float"
    assert base["--compare"].action == "store_true"
    assert d["--min_improvement_pct"] == 3.0
    assert base["--update_improved"].action == "store_true"
    a8 = {o.option: o for o in ctx.options if o.tuner == "gemm_a8w8_tune"}
    # the per-op ARG_DEFAULTS override, cited where it is written
    assert (
        json.loads(a8["--errRatio"].default) == 0.02
        and a8["--errRatio"].file == "csrc/ck_gemm_a8w8/gemm_a8w8_tune.py"
    )
    assert json.loads(a8["--untune_file"].default) == "aiter/configs/a8w8_untuned_gemm.csv"
    assert (
        json.loads(a8["--splitK"].default) is False
        and a8["--splitK"].file == "aiter/utility/base_tuner.py"
    )
    assert ctx.err_ratio_threshold() == 0.05 and ctx.err_ratio_threshold("gemm_a8w8") == 0.02


def test_runtime_configs_env_vars_default_paths_and_merge_rule():
    ctx = _ctx()
    rc = {r.op: r for r in ctx.runtime}
    assert set(rc) == {"gemm_a8w8", "gemm_a4w4", "gemm_mini_bf16"}
    a8 = rc["gemm_a8w8"]
    assert (a8.env_var, a8.attribute, a8.tuned_name) == (
        "AITER_CONFIG_GEMM_A8W8",
        "AITER_CONFIG_GEMM_A8W8_FILE",
        "a8w8_tuned_gemm",
    )
    assert (a8.default_path, a8.default_exists, a8.line) == (
        "aiter/configs/a8w8_tuned_gemm.csv",
        True,
        44,
    )
    assert (
        a8.merge_key == ["M", "N", "K"] and a8.untuned_path == "aiter/configs/a8w8_untuned_gemm.csv"
    )
    assert a8.model_configs == ["aiter/configs/model_configs/a8w8_tuned_gemm_modelx.csv"]
    assert (a8.merge_rule, a8.merge_rule_line) == ("keep-fastest", 25)
    assert a8.merge_evidence == {
        "first_file_required": 14,
        "single_file_passthrough": 10,
        "assert_same_columns": 18,
        "sort_by_us": 25,
        "drop_duplicates_keep_first": 25,
    }
    assert (a8.kernel_list_file, a8.kernel_list) == (
        "csrc/ck_gemm_a8w8/gemm_a8w8_common.py",
        "kernels_list",
    )
    assert (
        rc["gemm_mini_bf16"].default_exists is False
        and rc["gemm_mini_bf16"].kernel_list_file is None
    )


def test_newer_merge_rule_is_recognised_and_unknown_is_said(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(MINI, root)
    core = root / "aiter" / "jit" / "core.py"
    text = core.read_text()
    core.write_text(
        text.replace(
            '        merge_df = merge_df.sort_values("us")'
            '.drop_duplicates(subset=keys, keep="first")\n',
            '        merge_df = merge_df.sort_values("us")\n'
            "        if merge_df.duplicated(subset=keys).any():\n"
            '            raise ValueError("duplicate shapes in tuned configs")\n',
        )
    )
    assert _ctx(root).runtime_for("gemm_a8w8").merge_rule == "reject-duplicates"
    p = merge_preview(_ctx(root), _ctx(root).runtime_for("gemm_a8w8"))
    assert p["refuses_to_start"] is True
    core.write_text(
        text.replace(
            'merge_df.sort_values("us").drop_duplicates(subset=keys, keep="first")', "merge_df"
        )
    )
    ctx = _ctx(root)
    assert ctx.runtime_for("gemm_a8w8").merge_rule == "unknown"
    p = merge_preview(ctx, ctx.runtime_for("gemm_a8w8"))
    assert [e["kind"] for e in p["errors"]] == ["rule-unknown"] and p["losers"] == []


# ---------------------------------------------------------------- merge preview


def test_merge_preview_default_set():
    ctx = _ctx()
    p = merge_preview(ctx, ctx.runtime_for("gemm_a8w8"))
    assert p["env_set"] is False and p["rule"]["id"] == "keep-fastest" and p["rule"]["line"] == 25
    assert [(f["file"], f["rows"]) for f in p["files"]] == [
        ("aiter/configs/a8w8_tuned_gemm.csv", 3),
        ("aiter/configs/model_configs/a8w8_tuned_gemm_modelx.csv", 2),
    ]
    assert p["merged_rows"] == 3
    losers = sorted(
        (lo["file"], lo["line"], lo["same_part"], lo["winner"]["line"]) for lo in p["losers"]
    )
    assert losers == [
        ("aiter/configs/a8w8_tuned_gemm.csv", 2, False, 2),
        ("aiter/configs/a8w8_tuned_gemm.csv", 4, True, 2),
    ]
    assert p["dropped_by_cu_num"] == {"304": 1}
    assert len(p["gfx_missing"]) == 5
    assert {(g["cu_num"], g["gfx"]) for g in p["gfx_missing"]} == {(304, "gfx942"), (256, "gfx950")}


def test_merge_preview_with_env_replaces_the_default_set(tmp_path):
    env = tmp_path / "a.env"
    a = MINI / "cases" / "merge_collision_a__a8w8_tuned_gemm.csv"
    b = MINI / "cases" / "merge_collision_b__a8w8_tuned_gemm.csv"
    env.write_text(f'export AITER_CONFIG_GEMM_A8W8="{a}:{b}"\n')
    ctx = _ctx(env=env)
    p = merge_preview(ctx, ctx.runtime_for("gemm_a8w8"))
    assert p["env_set"] is True and [f["file"] for f in p["files"]] == [str(a), str(b)]
    assert p["merged_rows"] == 1 and len(p["losers"]) == 1 and p["losers"][0]["file"] == str(a)
    env.write_text(f"AITER_CONFIG_GEMM_A8W8={tmp_path}/missing.csv:{b}\n")
    ctx = _ctx(env=env)
    p = merge_preview(ctx, ctx.runtime_for("gemm_a8w8"))
    assert p["merged_rows"] is None and p["errors"][0]["kind"] == "first-file-missing"


def test_merge_cli_json_and_text():
    r = CliRunner().invoke(main, ["aiter", "merge", "gemm_a8w8", "--aiter", str(MINI), "--json"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)
    assert p["op"] == "gemm_a8w8" and p["merged_rows"] == 3 and len(p["losers"]) == 2
    r = CliRunner().invoke(main, ["aiter", "merge", "AITER_CONFIG_GEMM_A8W8", "--aiter", str(MINI)])
    assert (
        r.exit_code == 0
        and "rule keep-fastest (aiter/jit/core.py:25)" in r.output
        and "merged rows: 3" in r.output
    )
    r = CliRunner().invoke(main, ["aiter", "merge", "nope", "--aiter", str(MINI)])
    assert r.exit_code == 2 and "unknown op 'nope'" in r.output and "Traceback" not in r.output


def test_summary_pinned_on_the_fixture():
    s = summary(_ctx())
    ops = {o["op"]: (o["kernel_ids"], o["tuned_rows"]) for o in s["ops"]}
    assert ops == {"gemm_a8w8": (5, 5), "gemm_a4w4": (2, 2), "gemm_mini_bf16": (0, 1)}
    assert s["totals"] == {
        "kernel_files": 3,
        "kernel_lists": 4,
        "kernel_ids": 10,
        "tuned_files": 5,
        "tuned_rows": 8,
    }
    r = CliRunner().invoke(main, ["aiter", "summary", "--aiter", str(MINI), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["totals"]["kernel_ids"] == 10


# ---------------------------------------------------------------- bad input through `ckkb audit`


def test_bad_files_each_get_one_clear_finding_and_the_rest_is_audited(tmp_path):
    files = {
        "empty__a8w8_tuned_gemm.csv": b"",
        "header_only__a8w8_tuned_gemm.csv": b"cu_num,M,N,K,kernelId,splitK,us,kernelName\n",
        "nokeys__a8w8_tuned_gemm.csv": b"cu_num,M,kernelId,splitK,us\n304,1,0,1,3.0\n",
        "semicolon__a8w8_tuned_gemm.csv": b"cu_num;M;N;K\n304;1;2;3\n",
        "latin1__a8w8_tuned_gemm.csv": b"cu_num,M,N,K,us\n304,1,2,3,4.0\n304,1,2,\xe93,4.0\n",
    }
    paths = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    paths.append(str(MINI / "cases" / "clean__a8w8_tuned_gemm.csv"))
    paths.append(str(tmp_path / "does_not_exist.csv"))
    r = CliRunner().invoke(main, ["audit", "--aiter", str(MINI), "--format", "json", *paths])
    assert r.exit_code == 1 and "Traceback" not in r.output
    out = json.loads(r.output)
    by_file: dict[str, list] = {}
    for f in out["findings"]:
        by_file.setdefault(Path(f["file"]).name, []).append((f["rule"], f["line"]))
    assert by_file["empty__a8w8_tuned_gemm.csv"] == [("input-error", 1)]
    assert by_file["header_only__a8w8_tuned_gemm.csv"] == [("tuned-empty", 1)]
    assert by_file["nokeys__a8w8_tuned_gemm.csv"] == [("key-columns-missing", 1)]
    assert by_file["semicolon__a8w8_tuned_gemm.csv"] == [("input-error", 1)]
    assert by_file["latin1__a8w8_tuned_gemm.csv"] == [("input-error", 3)]
    assert by_file["does_not_exist.csv"] == [("input-error", 0)]
    assert "clean__a8w8_tuned_gemm.csv" not in by_file  # still audited, and clean
    files_out = {Path(f["file"]).name: f for f in out["files"]}
    assert files_out["clean__a8w8_tuned_gemm.csv"]["kernel_checked"] == 4
    msg = {Path(f["file"]).name: f["message"] for f in out["findings"]}
    assert "wrong delimiter" in msg["semicolon__a8w8_tuned_gemm.csv"]
    assert "not UTF-8" in msg["latin1__a8w8_tuned_gemm.csv"]
    assert "missing key columns N, K" in msg["nokeys__a8w8_tuned_gemm.csv"]


def test_a_100000_row_file(tmp_path):
    p = tmp_path / "big__a8w8_tuned_gemm.csv"
    name = "mini_a8w8_256x128x128x64_32x32_intrawave_v3_nopad"
    with open(p, "w") as f:
        f.write("cu_num,M,N,K,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n")
        for i in range(100_000):
            f.write(f"304,{i + 1},1280,8192,0,{i % 2},{5 + i % 7}.5,{name},1.0,1.0,0.0\n")
    r = audit(str(MINI), [str(p)])
    assert r.rows == 100_000
    assert [f.rule for f in r.findings] == ["rules-skipped"]
    assert r.files[0]["kernel_checked"] == 100_000


# ---------------------------------------------------------------- the build stages


def test_build_of_the_fixture_tree_fills_tables_views_and_the_canned_query(tmp_path):
    db_path = tmp_path / "kb.db"
    summ = build(
        db_path, {"aiter": sources.aiter_tree(str(MINI))}, stages=pipeline.stages(), jobs=1
    )
    t = summ.tables
    assert t["aiter_kernel_lists"] == 4 and t["aiter_kernels"] == 10
    assert t["aiter_runtime_configs"] == 3 and t["aiter_config_files"] == 9
    db = open_db(db_path, readonly=True)
    rows = list(
        db.query(
            "select file, line, M, kernelId, arch from aiter_config_rows "
            "where file = 'aiter/configs/a8w8_tuned_gemm.csv' order by line"
        )
    )
    assert [(r["line"], r["M"], r["kernelId"], r["arch"]) for r in rows] == [
        (2, 1, 0, "gfx942"),
        (3, 32, 1, "gfx942"),
        (4, 1, 2, "gfx950"),
    ]
    got = {
        (r["rule"], r["findings"])
        for r in db.query(sql("audit_findings"), {"rule": "", "severity": "", "file": ""})
    }
    assert got == {
        ("kernel-id-duplicate", 1),
        ("merge-columns-differ", 1),
        ("default-config-missing", 1),
        ("kernel-duplicate", 1),
        ("merge-collision", 1),
        ("merge-drops-rows", 1),
        # mini_bf16_tuned_gemm.csv's row: no tuner imports its config (named, never skipped)
        ("kernel-list-unresolved", 1),
    }
    diags = {
        (r["file"], r["line"])
        for r in db.query("select file, line from diagnostics where stage = 'aiter.kernels'")
    }
    assert diags == {
        ("csrc/ck_unsupported/unsupported_common.py", 12),
        ("csrc/ck_unsupported/unsupported_common.py", 17),
    }
    fr = list(
        db.query("select rule, M, cu_num from aiter_finding_rows where rule = 'merge-drops-rows'")
    )
    assert fr == [{"rule": "merge-drops-rows", "M": 1, "cu_num": 304}]
    usage = {
        (r["kernel_id"], r["tuned_rows"])
        for r in db.query(
            "select kernel_id, tuned_rows from aiter_kernel_usage "
            "where op = 'gemm_a8w8' and list_name = 'kernels_list'"
        )
    }
    assert usage == {(0, 2), (1, 2), (2, 1), (3, 0), (4, 0)}
    opts = {
        r["option"]: r["default"]
        for r in db.query("select option, [default] from aiter_tuner_options where tuner = 'base'")
    }
    assert opts["--errRatio"] == "0.05" and opts["--splitK"] == "false"
    db.close()


# ---------------------------------------------------- property: what is written is what is read

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_cell = st.one_of(
    st.integers(min_value=-(10**9), max_value=10**9),
    st.floats(allow_nan=False, allow_infinity=False, width=32).filter(
        lambda f: not float(f).is_integer()
    ),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.", min_size=1, max_size=12).filter(
        lambda s: not _numeric(s)
    ),
)


def _numeric(s: str) -> bool:
    """Text that Python (and pandas) reads as a number,
    e.g. 'nan', 'inf': read as float on purpose."""
    try:
        float(s)
        return True
    except ValueError:
        return False


@settings(max_examples=80, deadline=None)
@given(
    cols=st.lists(
        st.sampled_from(
            ["cu_num", "M", "N", "K", "kernelId", "us", "kernelName", "q_dtype_w", "x1", "x2"]
        ),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    data=st.data(),
    blank_every=st.integers(min_value=0, max_value=4),
)
def test_csv_roundtrip(cols, data, blank_every):
    n = data.draw(st.integers(min_value=0, max_value=12))
    rows = [[data.draw(_cell) for _ in cols] for _ in range(n)]
    lines, expect = [",".join(cols)], []
    for r in rows:
        if blank_every and len(lines) % (blank_every + 1) == 0:
            lines.append("")
        lines.append(",".join(repr(v) if isinstance(v, float) else str(v) for v in r))
        expect.append((len(lines), dict(zip(cols, r, strict=True))))
    t = read_csv("p.csv", ("\n".join(lines) + "\n").encode())
    assert t.error is None and t.columns == cols and t.problems == []
    assert [ln for ln, _ in t.rows] == [ln for ln, _ in expect]
    for (_, got), (_, want) in zip(t.rows, expect, strict=True):
        for c in cols:
            if isinstance(want[c], float):
                assert got[c] == pytest.approx(want[c])
            else:
                assert got[c] == want[c]


def test_arch_of_a_cu_count_names_one_gfx_only():
    from ckkb.extract.aiter_configs import arch_of

    assert (
        arch_of({"cu_num": 304}) == "gfx942" and arch_of({"cu_num": 304}) == "gfx942"
    )  # second: cached
    assert arch_of({"cu_num": 104}) == "gfx90a"
    assert arch_of({"cu_num": 7}) is None and arch_of({"cu_num": "304"}) is None
    assert arch_of({"gfx": "gfx950", "cu_num": 304}) == "gfx950"


def test_audit_reads_the_rows_of_a_knowledge_base_built_from_the_same_tree(tmp_path):
    """`ckkb audit --db X` uses X's kernel lists and runtime rows when X's build read that aiter
    tree (nothing parsed again) and finds exactly what an audit that extracts the tree finds."""
    from ckkb.audit import context
    from ckkb.kb.rows import stored_rows

    db_path = tmp_path / "kb.db"
    build(db_path, {"aiter": sources.aiter_tree(str(MINI))}, stages=pipeline.stages(), jobs=1)
    from_kb = audit(str(MINI), db_path=str(db_path))
    assert from_kb.aiter["read_from"] == f"knowledge base {db_path}"
    extracted = context.load_tree(sources.aiter_tree(str(MINI)))
    db = open_db(db_path, readonly=True)
    assert stored_rows(db, "aiter_kernels") == extracted.kernels
    assert stored_rows(db, "aiter_tuner_options") == extracted.options
    other = tmp_path / "other_aiter"
    shutil.copytree(MINI, other)
    from_tree = audit(str(other), db_path=str(db_path))  # another tree: extracted, not X's rows
    assert from_tree.aiter["read_from"] == "extracted from the tree"
    assert [(f.rule, f.file, f.line, f.message) for f in from_kb.findings] == [
        (f.rule, f.file, f.line, f.message) for f in from_tree.findings
    ]

"""Issue 13: a build shows the damage that changes answers (`ckkb build` summary line,
`ckkb diagnostics`, `ckkb build --strict`), and keeps exiting 0 without --strict.

ck_mini carries one such diagnostic by design: gemm_mx's registration names a list that is in
no file (read off the fixture by hand: gemm_mx/..._default_instance.cpp:14)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ckkb.cli import main

MX = (
    "library/src/tensor_operation_instance/gpu/gemm_mx/device_gemm_mx_xdl_f8_f8_bf16/"
    "device_gemm_mx_xdl_f8_f8_bf16_mk_nk_mn_default_instance.cpp"
)


def _build(root, db, *extra):
    return CliRunner().invoke(
        main, ["build", "--ck", str(root), "--no-aiter", "--db", str(db), "--jobs", "1", *extra]
    )


def test_build_summarises_damage_and_strict_fails(copy_tree, tmp_path):
    root = copy_tree("ck_mini")
    db = tmp_path / "kb.db"
    r = _build(root, db)
    assert r.exit_code == 0, r.output
    line = [ln for ln in r.output.splitlines() if ln.startswith("damage:")]
    assert len(line) == 1
    assert "1 registration(s) name an instance list that was not found" in line[0]
    assert MX in r.output
    r = CliRunner().invoke(main, ["diagnostics", "--json", "--db", str(db)])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["counts"]["list_not_found"] == 1
    (nf,) = [d for d in res["diagnostics"] if d["kind"] == "list_not_found"]
    assert (nf["file"], nf["line"]) == (MX, 14)
    r = _build(root, db, "--strict")
    assert r.exit_code == 1
    assert "change answers" in r.output


def test_diagnostics_table_output(copy_tree, tmp_path):
    root = copy_tree("ck_mini")
    db = tmp_path / "kb.db"
    assert _build(root, db).exit_code == 0
    r = CliRunner().invoke(main, ["diagnostics", "--db", str(db)])
    assert r.exit_code == 0 and "list_not_found" in r.output and "damage:" in r.output

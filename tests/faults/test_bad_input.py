"""Every bad input of issue 14, fed through the CLI: one clear line naming the file and line (or
field), a non-zero exit where nothing could be done, no traceback (the `cli` helper fails on any
exception that escapes the CLI), and nothing stored lost."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.conftest import FIXTURES, SAMPLES
from tests.faults.conftest import BUILD, cli, count, one_line_error, stored

HEADER = {"record": "bundle", "kind": "race", "created": "2026-01-01T00:00:00Z", "host": {}}
GOOD_LOG = {
    "record": "race_log",
    "op": "gemm",
    "argv": ["ckProfiler", "gemm", "1", "0", "1", "2", "0", "1", "64", "64", "64"],
    "output": "",
    "exit_code": 139,
    "status": "crash",
    "failure": "killed by SIGSEGV",
    "shape": {"M": 64, "N": 64, "K": 64, "line": 2},
    "host": {"hostname": "box"},
}
GOOD_RESULT = {
    "record": "harness_results",
    "run_id": "r1",
    "device": "MI300X",
    "arch": "gfx942",
    "M": 64,
    "N": 64,
    "K": 64,
    "dtype": "bf16",
    "out_dtype": "bf16",
    "layout": "tn",
    "regime": "cold",
    "candidate": "torch.mm",
    "status": "ok",
    "us": 10.0,
}

# (what, the bad record as JSON text, the field the one line must name)
BAD_RECORDS = [
    ("host given as a string", json.dumps({**GOOD_LOG, "host": "box"}), "field host"),
    ("argv as an int", json.dumps({**GOOD_LOG, "argv": 7}), "field argv"),
    ("a shape as a list", json.dumps({**GOOD_LOG, "shape": [1, 2, 3]}), "field shape"),
    ("M='x'", json.dumps({**GOOD_RESULT, "M": "x"}), "field M"),
    (
        "K=Infinity",
        json.dumps({**GOOD_RESULT, "K": 1}).replace('"K": 1', '"K": Infinity'),
        "field K",
    ),
    ("us=-1", json.dumps({**GOOD_RESULT, "us": -1}), "field us"),
    (
        "a required column missing",
        json.dumps({k: v for k, v in GOOD_RESULT.items() if k != "arch"}),
        "field arch",
    ),
    (
        "results for a race that does not exist",
        json.dumps(
            {
                "record": "race_results",
                "race_id": 987654,
                "ordinal": 0,
                "line": 1,
                "name": "DeviceGemmXdl<1>",
                "ms": 1.0,
            }
        ),
        "field race_id",
    ),
]


@pytest.mark.parametrize("what,bad,field", BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_bad_bundle_record(kb, tmp_path, what, bad, field):
    """Seen 7/8: wrong types gave tracebacks; M='x', K=Inf, us=-1 and orphan results were stored."""
    before = stored(kb)
    bundle = tmp_path / "b.jsonl"
    lines = [json.dumps(HEADER), bad, json.dumps(GOOD_LOG), json.dumps(GOOD_RESULT)]
    bundle.write_text("\n".join(lines) + "\n")
    r = cli("ingest", "--db", kb, bundle)
    assert r.returncode == 0, r.stderr  # the good records are stored
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and f"{bundle}:2:" in warnings[0] and field in warnings[0], r.stderr
    after = stored(kb)
    assert after["races"] == before["races"] + 1  # GOOD_LOG
    assert after["harness_results"] == before["harness_results"] + 1  # GOOD_RESULT, not the bad
    assert after["race_results"] == before["race_results"]
    assert count(kb, "select count(*) from ingest_errors where line = 2") == 1


def test_bad_bundle_header_is_one_line(kb, tmp_path):
    bundle = tmp_path / "b.jsonl"
    bundle.write_text(json.dumps({**HEADER, "host": ["box"]}) + "\n" + json.dumps(GOOD_LOG) + "\n")
    r = cli("ingest", "--db", kb, bundle)
    assert r.returncode == 0
    assert [ln for ln in r.stderr.splitlines() if "warning" in ln][0].count(f"{bundle}:1:") == 1


def _cut_log(tmp_path):
    """001.txt cut in the middle of an instance name: 'DeviceGemmXd'."""
    text = (SAMPLES / "001.txt").read_text()
    cut = text.index("DeviceGemmXdl<256, 128, 256") + len("DeviceGemmXd")
    p = tmp_path / "cut.txt"
    p.write_text(text[:cut])
    return p


def test_log_cut_mid_line(kb, tmp_path):
    """Seen 8: a log cut mid-line stored the cut name `DeviceGemmXd` as a valid result."""
    log = _cut_log(tmp_path)
    r = cli("ingest", "--db", kb, log)
    assert "Traceback" not in r.stderr
    assert count(kb, "select count(*) from race_results where name like 'DeviceGemmXd'") == 0
    assert count(kb, "select count(*) from race_results where name not like 'Device%<%'") == 0
    line = len(log.read_text().splitlines())  # the cut line's number, counted apart
    assert f"{log}:{line}: last line is cut off" in r.stderr


def test_crlf_and_extra_newline_copies_are_the_same_log(kb, tmp_path):
    """Seen 8: a CRLF copy of a log, or one with an extra newline, was stored as a second race."""
    text = (SAMPLES / "002.txt").read_text()
    (tmp_path / "a.txt").write_text(text)
    (tmp_path / "b.txt").write_bytes(text.replace("\n", "\r\n").encode())
    (tmp_path / "c.txt").write_text(text + "\n\n")
    r = cli("ingest", "--db", kb, tmp_path / "a.txt")
    assert r.returncode == 0
    before = stored(kb)
    for name in ("b.txt", "c.txt"):
        r = cli("ingest", "--db", kb, tmp_path / name)
        assert r.returncode == 0 and "already ingested" in r.stdout
    assert stored(kb) == before


@pytest.mark.parametrize(
    "args",
    [
        [
            "profiler",
            "cmd",
            "gemm",
            "--dtype",
            "fp16",
            "--m",
            "99999999999999999999999",
            "--n",
            "1",
            "--k",
            "1",
        ],
        ["profiler", "cmd", "gemm", "--dtype", "fp16", "--m", "-4", "--n", "1", "--k", "1"],
        ["profiler", "cmd", "gemm", "--dtype", "fp16", "--m", "4", "--n", "0", "--k", "1"],
        [
            "profiler",
            "cmd",
            "gemm",
            "--dtype",
            "fp16",
            "--m",
            "4",
            "--n",
            "4",
            "--k",
            "4",
            "--iters",
            "0",
        ],
        ["race", "gemm", "--dtype", "fp16", "--shapes", "s.csv", "--timeout", "nan"],
        ["race", "gemm", "--dtype", "fp16", "--shapes", "s.csv", "--timeout", "-1"],
        ["race", "gemm", "--dtype", "fp16", "--shapes", "s.csv", "--timeout", "inf"],
        ["race", "gemm", "--dtype", "fp16", "--shapes", "s.csv", "--iters", "-1"],
        ["build", "--jobs", "-3"],
        ["ingest", "--cu", "-1", "x.txt"],
    ],
    ids=lambda a: " ".join(a[:2] + a[-2:]),
)
def test_numeric_options(kb, args):
    """Seen 7/8: --m 99999999999999999999999 was an OverflowError; negative sizes and
    iterations and --timeout nan were accepted."""
    r = cli(*args, "--db", kb)
    assert r.returncode == 2
    assert "Invalid value" in one_line_error(r)


def test_huge_csv_field(kb, tmp_path):
    """Seen 7: a 10 MB CSV field to `race` and `harness` was a traceback."""
    big = tmp_path / "big.csv"
    big.write_text("M,N,K\n64,64,64\n64,64," + "9" * (10 << 20) + "\n")
    r = cli("race", "gemm", "--dtype", "fp16", "--shapes", big, "--db", kb)
    assert r.returncode == 2 and f"{big}:3:" in one_line_error(r)
    r = cli("harness", "--shapes", big)
    assert r.returncode == 2 and f"{big}:3:" in one_line_error(r)


def test_paths_that_are_not_files(kb, tmp_path):
    """Seen 9: directories and symlink loops were reported as "not found"."""
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    folder = tmp_path / "dir"
    folder.mkdir()
    for args, says in [
        (["ingest", "--db", kb, loop], "symlink loop"),
        (["ingest", "--db", kb, folder], "is a directory"),
        (["races", "--db", loop], "symlink loop"),
        (["races", "--db", folder], "is a directory"),
    ]:
        r = cli(*args)
        assert r.returncode != 0 and says in one_line_error(r), (args, r.stderr)


def test_symlinked_0600_database_keeps_link_and_mode(kb, tmp_path):
    """Seen 9: a symlinked --db was replaced by a regular file; a 0600 database became 0644."""
    os.chmod(kb, 0o600)
    link = tmp_path / "link.db"
    os.symlink(kb, link)
    before = stored(kb)
    r = cli(*BUILD, "--db", link, "--force")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(kb)
    assert stat.S_IMODE(kb.stat().st_mode) == 0o600
    assert stored(kb) == before
    r = cli("ingest", "--db", link, SAMPLES / "003.txt")
    assert r.returncode == 0 and link.is_symlink()
    assert stat.S_IMODE(kb.stat().st_mode) == 0o600


def test_audit_env_audits_the_files_it_names(tmp_path):
    """Seen 8: `audit --env FILE` never audited the CSV the env file points at."""
    cases = FIXTURES / "aiter_mini" / "cases"
    (tmp_path / "dup.csv").write_bytes((cases / "duplicate_key__a8w8_tuned_gemm.csv").read_bytes())
    env = tmp_path / "run.env"
    env.write_text("export AITER_CONFIG_GEMM_A8W8=dup.csv\n")  # relative to the env file
    r = cli("audit", "--aiter", FIXTURES / "aiter_mini", "--env", env, "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    assert any(f["file"] == "dup.csv" and f["rule"] == "duplicate-key" for f in findings), findings

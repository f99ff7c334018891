"""The CLI's contract for user errors: one line, a hint, a non-zero exit, no traceback."""

from __future__ import annotations

from click.testing import CliRunner

from ckkb.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_help_lists_build():
    r = run("--help")
    assert r.exit_code == 0
    assert "build" in r.output


def test_missing_ck_path(tmp_path):
    r = run("build", "--ck", str(tmp_path / "nope"), "--no-aiter", "--db", str(tmp_path / "kb.db"))
    assert r.exit_code == 2
    assert "ckkb: error: CK tree not found" in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "kb.db").exists()


def test_directory_that_is_not_ck(tmp_path):
    (tmp_path / "src").mkdir()
    r = run("build", "--ck", str(tmp_path), "--no-aiter", "--db", str(tmp_path / "kb.db"))
    assert r.exit_code == 2
    assert "is not a CK tree" in r.output
    assert "hint:" in r.output


def test_file_given_as_ck_tree(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    r = run("build", "--ck", str(f), "--no-aiter", "--db", str(tmp_path / "kb.db"))
    assert r.exit_code == 2
    assert "not a directory" in r.output


def test_bad_aiter_path(tmp_path, fixtures):
    r = run(
        "build",
        "--ck",
        str(fixtures / "ck_mini"),
        "--aiter",
        str(tmp_path / "none"),
        "--db",
        str(tmp_path / "kb.db"),
    )
    assert r.exit_code == 2
    assert "aiter tree not found" in r.output


def test_lazy_command_table_matches_modules():
    """ckkb.cli.COMMANDS names exactly the commands each module registers."""
    import importlib

    import click

    from ckkb.cli import COMMAND_MODULES, COMMANDS

    seen = {}
    for mod in COMMAND_MODULES:
        g = click.Group()
        importlib.import_module(mod).register(g)
        seen.update({name: mod for name in g.commands})
    assert seen == COMMANDS


def test_build_as_a_process_prints_everything_and_exits_cleanly(tmp_path, fixtures):
    """`ckkb build` as a process (run()): the output whole in a pipe, the database in place, the
    exit status 0; an error exits non-zero with one line."""
    import subprocess
    import sys

    db = tmp_path / "kb.db"
    cmd = [
        sys.executable,
        "-m",
        "ckkb",
        "build",
        "--ck",
        str(fixtures / "ck_mini"),
        "--no-aiter",
        "--db",
        str(db),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # issue 13: the build ends with its one-line damage summary, after the files/timing line
    last = r.stdout.rstrip().splitlines()
    assert last[-1].startswith("damage: ") and "files (" in last[-2] and last[-2].endswith(" s")
    assert db.is_file() and not list(tmp_path.glob("kb.db.tmp-*"))
    r = subprocess.run(
        cmd[:-1]
        + [str(tmp_path / "no" / "such" / "dir" / "kb.db"), "--ck", str(tmp_path / "none")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.startswith("ckkb: error:")
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("}")

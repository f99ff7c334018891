"""Docs that test themselves: generated pages stay current, README commands and JSON keys exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
from click.testing import CliRunner

from ckkb.cli import main
from ckkb.cli.reference import cli_reference
from ckkb.kb.schema_doc import schema_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_schema_page_is_current():
    assert (ROOT / "docs" / "schema.md").read_text() == schema_markdown(), (
        "docs/schema.md is stale: run `ckkb schema > docs/schema.md`"
    )


def test_cli_reference_is_current():
    import difflib

    committed, current = (ROOT / "docs" / "cli.md").read_text(), cli_reference()
    diff = "\n".join(
        difflib.unified_diff(
            committed.splitlines(), current.splitlines(), "docs/cli.md", "--help", lineterm=""
        )
    )
    assert committed == current, (
        f"docs/cli.md is stale: run `python -m ckkb.cli.reference > docs/cli.md`\n{diff[:3000]}"
    )


def _readme_commands() -> list[list[str]]:
    """Every `ckkb ...` invocation in the README's code blocks, split into words."""
    text = (ROOT / "README.md").read_text()
    cmds = []
    for block in re.findall(r"```(?:\w+)?\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            for part in re.split(r"&&|\|", line):
                part = part.strip()
                if part.startswith("ckkb "):
                    cmds.append(shlex.split(part.split("#", 1)[0]))
    return cmds


def test_readme_commands_exist():
    """Each README command names a real command, and
    every option it passes is one that command takes."""
    cmds = _readme_commands()
    assert len(cmds) >= 10
    for words in cmds:
        cmd: click.Command = main
        path = ["ckkb"]
        rest = words[1:]
        while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
            assert rest[0] in cmd.commands, (
                f"README: `{' '.join(words)}`: no command {rest[0]!r} in {' '.join(path)}"
            )
            cmd = cmd.commands[rest[0]]
            path.append(rest.pop(0))
        opts = {
            o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])
        }
        for w in rest:
            if w.startswith("--"):
                assert w.split("=", 1)[0] in opts, (
                    f"README: `{' '.join(words)}`: {' '.join(path)} has no option {w}"
                )
        r = CliRunner().invoke(main, path[1:] + ["--help"])
        assert r.exit_code == 0, r.output

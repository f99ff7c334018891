"""The CLI reference page (docs/cli.md), generated from the commands' own --help texts.

A test regenerates it and fails when the committed page drifts from the code.
"""

from __future__ import annotations

from collections.abc import Iterator

import click


def _walk(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _walk(cmd.commands[name], path + [name])


def cli_reference() -> str:
    from ckkb.cli import main

    out = [
        "# ckkb command reference",
        "",
        "Generated from `--help` by `python -m ckkb.cli.reference`; a test keeps it current.",
        "",
    ]
    for path, cmd in _walk(main, ["ckkb"]):
        if cmd.hidden:
            continue
        ctx = click.Context(
            cmd,
            info_name=" ".join(path),
            terminal_width=100,
            max_content_width=100,
            help_option_names=["-h", "--help"],
        )
        out += [f"## `{' '.join(path)}`", "", "```", cmd.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(cli_reference(), end="")

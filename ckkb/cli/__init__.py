"""The `ckkb` command: one click group; each command family lives in its own module.

User errors (CkkbError) print one line, plus a hint, and exit non-zero: never a traceback.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
from typing import Any

import click

from ckkb import __version__
from ckkb.errors import CkkbError, write_error

# command name -> the module whose register(group) adds it. Modules are imported only when one of
# their commands runs (or for --help), so `ckkb build` does not pay for Datasette, torch checks or
# lark grammars. A test checks this table against what each module registers.
COMMANDS: dict[str, str] = {
    "build": "ckkb.cli.build",
    "schema": "ckkb.cli.build",
    "gates": "ckkb.cli.ck",
    "instances": "ckkb.cli.ck",
    "pool": "ckkb.cli.ck",
    "archs": "ckkb.cli.ck",
    "diagnostics": "ckkb.cli.diagnostics",
    "why": "ckkb.cli.ck",
    "locate": "ckkb.cli.names",
    "names": "ckkb.cli.names",
    "parse": "ckkb.cli.names",
    "ingest": "ckkb.cli.profiler",
    "profiler": "ckkb.cli.profiler",
    "race": "ckkb.cli.profiler",
    "races": "ckkb.cli.profiler",
    "aiter": "ckkb.cli.aiter",
    "audit": "ckkb.cli.aiter",
    "serve": "ckkb.cli.serve",
    "harness": "ckkb.cli.harness",
    "trees": "ckkb.cli.trees",
    "diff": "ckkb.cli.versions",
    "review": "ckkb.cli.versions",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


class CkkbGroup(click.Group):
    """One group; command modules load lazily (see COMMANDS); user errors become one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(COMMANDS[name]).register(self)
        return self.commands.get(name)

    def invoke(self, ctx: click.Context) -> Any:

        try:
            return super().invoke(ctx)
        except CkkbError as e:
            click.echo(f"ckkb: error: {e.message}", err=True)
            if e.hint:
                click.echo(f"ckkb: hint: {e.hint}", err=True)
            sys.exit(e.exit_code)
        except BrokenPipeError:
            sys.exit(0)
        except KeyboardInterrupt as e:
            click.echo(f"ckkb: {e.args[0] if e.args else 'interrupted'}", err=True)
            sys.exit(130)
        except (OSError, sqlite3.DatabaseError) as e:
            err = write_error(e, getattr(e, "filename", None))
            if err is None:
                raise
            click.echo(f"ckkb: error: {err.message}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=CkkbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckkb")
def main() -> None:
    """ckkb: which Composable Kernel GEMM instances exist on which GPU, and why not.

    Build the knowledge base once (`ckkb build`), then ask: `ckkb why`, `ckkb gates`,
    `ckkb instances`, `ckkb parse`, `ckkb locate`, `ckkb races`, `ckkb audit`, `ckkb serve`.
    It can hold several CK and aiter trees (`ckkb build --ck NAME=PATH`, `ckkb trees`): every
    query takes `--tree NAME`.

    \b
    A team shares one knowledge base file (--db or $CKKB_DB) on the machine that holds it:
      writers  `ckkb ingest` of the bundles GPU hosts write (`ckkb race`, `ckkb harness`)
               and `ckkb build` after a `git pull`, as many as like, at any time: one
               writes at a time (lock file <db>.lock), the others wait; nothing is lost;
      server   one `ckkb serve` for everyone, left running: it shows each ingest and
               each rebuild as it lands, with no restart;
      readers  every query command, any time, never blocked for long.
    A write killed midway leaves the old data readable; the next command cleans up.
    """


def run() -> None:
    """The console entry point (`ckkb`, `python -m ckkb.cli`)."""
    main()

"""The `ckkb` command: one click group; each command family lives in its own module.

User errors (CkkbError) print one line, plus a hint, and exit non-zero: never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from ckkb import __version__
from ckkb.errors import CkkbError

COMMAND_MODULES = (
    "ckkb.cli.build",
    "ckkb.cli.ck",
    "ckkb.cli.names",
    "ckkb.cli.profiler",
    "ckkb.cli.aiter",
    "ckkb.cli.serve",
    "ckkb.cli.harness",
)


class CkkbGroup(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CkkbError as e:
            click.echo(f"ckkb: error: {e.message}", err=True)
            if e.hint:
                click.echo(f"ckkb: hint: {e.hint}", err=True)
            sys.exit(e.exit_code)
        except BrokenPipeError:
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("ckkb: interrupted", err=True)
            sys.exit(130)


@click.group(cls=CkkbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckkb")
def main() -> None:
    """ckkb: which Composable Kernel GEMM instances exist on which GPU, and why not.

    Build the knowledge base once (`ckkb build`), then ask: `ckkb why`, `ckkb gates`,
    `ckkb instances`, `ckkb parse`, `ckkb locate`, `ckkb races`, `ckkb audit`, `ckkb serve`.
    """


for _mod in COMMAND_MODULES:
    try:
        _m = importlib.import_module(_mod)
    except ModuleNotFoundError as _e:
        if _e.name != _mod:
            raise
        continue
    _m.register(main)

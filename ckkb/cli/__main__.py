"""`python -m ckkb.cli` runs the CLI."""

from ckkb.cli import run

run()

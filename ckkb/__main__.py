"""`python -m ckkb` runs the CLI."""

from ckkb.cli import run

run()

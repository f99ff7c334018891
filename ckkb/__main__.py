"""`python -m ckkb` runs the CLI."""

from ckkb.cli import main

main()

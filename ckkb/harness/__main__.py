"""`python -m ckkb.harness ...`: the same command as `ckkb harness`, without the rest of the CLI."""

from __future__ import annotations

import sys

from ckkb.errors import CkkbError
from ckkb.harness.command import harness_command


def main() -> None:
    try:
        harness_command.main(standalone_mode=False)
    except CkkbError as e:
        print(f"ckkb: error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"ckkb: hint: {e.hint}", file=sys.stderr)
        sys.exit(e.exit_code)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()

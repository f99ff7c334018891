"""`ckkb harness`: cold vs warm GEMM timings (the command lives in ckkb.harness.command)."""

from __future__ import annotations

import click

from ckkb.harness.command import harness_command


def register(group: click.Group) -> None:
    group.add_command(harness_command)

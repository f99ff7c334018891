"""Runtime: config paths core.py reads by default that do not exist, and env files setting the
AITER_CONFIG_*_FILE names (attributes of aiter.jit.core, never read from the environment)."""

from __future__ import annotations

import re
from pathlib import Path

from ckkb.audit.context import AuditContext, merged_elsewhere
from ckkb.audit.model import Finding, finding

_FILE_VAR = re.compile(r"^AITER_CONFIG_\w+_FILE$")


def runtime_findings(ctx: AuditContext) -> list[Finding]:
    out: list[Finding] = []
    if ctx.defaults:
        for rc in ctx.runtime:
            if (
                rc.default_path
                and not rc.default_exists
                and not merged_elsewhere(ctx, rc, rc.default_path)
            ):
                near = ""
                if (
                    rc.tuned_name
                    and ctx.pkg is not None
                    and (ctx.pkg / "configs" / f"{rc.tuned_name}.csv").is_file()
                ):
                    near = (
                        f"; aiter/configs/{rc.tuned_name}.csv "
                        "exists but is not what the runtime reads"
                    )
                out.append(
                    finding(
                        "default-config-missing",
                        rc.file,
                        rc.line,
                        f"{rc.env_var} defaults to {rc.default_path}, which does "
                        f"not exist: op {rc.op} runs untuned, silently{near}",
                        op=rc.op,
                        env_var=rc.env_var,
                        default_path=rc.default_path,
                    )
                )
    if ctx.env is not None:
        known = {rc.env_var for rc in ctx.runtime}
        for var, line in sorted(ctx.env.lines.items(), key=lambda kv: kv[1]):
            if _FILE_VAR.match(var):
                real = var[: -len("_FILE")]
                hint = f"; export {real} instead" if real in known or not known else ""
                out.append(
                    finding(
                        "env-file-var-ignored",
                        ctx.env.path,
                        line,
                        f"{var} is not an environment variable aiter "
                        "reads (it is an attribute of aiter.jit.core): "
                        f"this setting is silently ignored{hint}",
                        var=var,
                        reads=real,
                    )
                )
    return out


__all__ = ["runtime_findings", "Path"]

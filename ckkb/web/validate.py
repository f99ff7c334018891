"""Validation of canned-query parameters, so bad input gets a page that says what is wrong.

Datasette runs a canned query with whatever the query string holds (a missing parameter becomes
''), which would answer "0 rows" to a typo. The plugin's ASGI wrapper calls `check()` first and
answers 400 with these messages instead. Rules are chosen by parameter name:

- every parameter not marked optional (`name?` in `-- params:`) must be given and non-empty;
- `arch` and names like `arch_a`, `other_arch`, `arch2`: one of the archs the knowledge base
  answers for (`archs`, from the tree; ckkb.archs.ARCHS when not given);
- `tile`: MxNxK (MPerBlock x NPerBlock x KPerBlock), three positive integers;
- `dir`: a directory under gpu/ that the knowledge base knows (when the caller passes `dirs`);
- `id` and names ending in `_id`: an integer.

Values are also normalised (`256X224X64` -> `256x224x64`, ` GFX950` -> `gfx950`); the wrapper
redirects to the normalised URL so the SQL sees one spelling.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ckkb.archs import ARCHS

TILE_RE = re.compile(r"^\s*(\d+)\s*[xX×*,]\s*(\d+)\s*[xX×*,]\s*(\d+)\s*$")
ARCH_PARAM_RE = re.compile(r"(^|_)arch(\d*|_.*)$")


def is_arch_param(name: str) -> bool:
    return bool(ARCH_PARAM_RE.search(name))


def parse_tile(value: str) -> tuple[int, int, int] | None:
    m = TILE_RE.match(value or "")
    if not m:
        return None
    dims = tuple(int(g) for g in m.groups())
    if any(d <= 0 for d in dims):
        return None
    return dims  # type: ignore[return-value]


@dataclass
class Checked:
    errors: list[str] = field(default_factory=list)
    normalised: dict[str, str] = field(default_factory=dict)  # only values that changed

    @property
    def ok(self) -> bool:
        return not self.errors


def _close(value: str, options: Collection[str]) -> str:
    near = difflib.get_close_matches(value, list(options), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


def check(
    params: Collection[str],
    required: Collection[str],
    args: Mapping[str, str],
    *,
    dirs: Collection[str] | None = None,
    archs: Collection[str] | None = None,
) -> Checked:
    """Check query-string `args` against a canned query's parameters."""
    out = Checked()
    known = list(archs) if archs else list(ARCHS)
    for p in params:
        raw = args.get(p)
        value = (raw or "").strip()
        if not value:
            if p in required:
                out.errors.append(f"missing parameter '{p}': {_hint(p, known)}")
            continue
        if p == "tile":
            dims = parse_tile(value)
            if dims is None:
                out.errors.append(
                    f"malformed tile '{value}': expected MxNxK "
                    "(MPerBlock x NPerBlock x KPerBlock), "
                    "three positive integers, e.g. 256x224x64"
                )
                continue
            value = "x".join(str(d) for d in dims)
        elif is_arch_param(p):
            value = value.lower()
            if value not in known:
                out.errors.append(
                    f"unknown arch '{value}' for '{p}'{_close(value, known)}: "
                    f"known archs are {', '.join(known)}"
                )
                continue
        elif p == "id" or p.endswith("_id"):
            if not value.isdigit():
                out.errors.append(f"'{p}' must be an integer id, not '{value}'")
                continue
        elif p == "dir" and dirs is not None and value not in dirs:
            out.errors.append(
                f"unknown dir '{value}'{_close(value, dirs)}: a directory right under "
                "library/src/tensor_operation_instance/gpu/, e.g. gemm_universal"
            )
            continue
        if raw is not None and value != raw:
            out.normalised[p] = value
    return out


def _hint(p: str, known: list[str]) -> str:
    if p == "tile":
        return "give a tile as MxNxK, e.g. 256x224x64"
    if is_arch_param(p):
        return f"give an architecture, one of {', '.join(known)}"
    if p == "dir":
        return "give a directory under gpu/, e.g. gemm_universal"
    return "give a value"

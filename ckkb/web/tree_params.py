"""Canned-query parameters that name trees: `tree` (any tree), and version_diff's `from` and `to`
(CK trees). A name the knowledge base does not hold is a 400 that lists the trees it does, never
an empty table: version_diff's SQL would read an unknown name as no tree and answer "0 rows".
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from ckkb.web.tree_scope import Trees

# parameter -> the kind of tree it names (None: any kind)
KINDS: dict[str, str | None] = {"tree": None, "from": "ck", "to": "ck"}


def errors(known: Trees, params: Collection[str], args: Mapping[str, str]) -> list[str]:
    """One message per tree-naming parameter of `params` whose value `known` lacks."""
    out = []
    for p in params:
        if p not in KINDS:
            continue
        value = (args.get(p) or "").strip()
        kind = KINDS[p]
        if kind is None:
            error = known.error(value)
            if error:
                out.append(error)
            continue
        if not value:
            continue  # a missing required value is validate.check's message
        tree = known.named(value)
        held = known.of_kind(kind)
        names = ", ".join(t.name for t in held) or "none"
        if tree is None:
            near = difflib.get_close_matches(value, [t.name for t in held], n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            out.append(
                f"unknown {kind.upper()} tree '{value}' for '{p}'{hint}: "
                f"this knowledge base holds the {kind.upper()} trees {names}"
            )
        elif tree.kind != kind:
            out.append(
                f"'{value}' is an {tree.kind} tree; '{p}' names one of the {kind.upper()} trees "
                f"{names}"
            )
    return out

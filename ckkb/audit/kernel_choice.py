"""The kernel list one tuned row's kernelId indexes, where the tuner chooses per row.

The choice is the tuner's `getKernelName` as ckkb.extract.aiter_tuner_choice ran it (stored in
`aiter_runtime_configs.kernel_list_choice`): the row's selector values (its `libtype` column,
`preshuffleB` from the config the row is in) pick a case, the case names an imported list, and
the list's value for the row's gfx is the one the module builds for that arch (`arch_when`,
ckkb.extract.aiter_derived).
"""

from __future__ import annotations

from typing import Any

from ckkb.extract.aiter_pyexec import arch_matches

OTHER = "*"


def _truthy(x: Any) -> bool:
    return str(x).strip().lower() in ("1", "true", "yes")


class RowLists:
    """Per-row list lookup for one op whose tuner picks a list per row."""

    def __init__(self, ctx: Any, rc: Any) -> None:
        self.ctx = ctx
        self.rc = rc
        self.choice: dict[str, Any] = rc.kernel_list_choice or {}
        self.params: list[dict[str, Any]] = self.choice.get("params", [])
        self.cases: dict[tuple[Any, ...], dict[str, Any]] = {
            tuple(c["when"].get(p["name"]) for p in self.params): c
            for c in self.choice.get("cases", [])
        }
        self.values: list[set[Any]] = [{k[i] for k in self.cases} for i in range(len(self.params))]
        self._dicts: dict[int, dict[int, Any]] = {}

    def _selector(self, i: int, p: dict[str, Any], columns: list[str], v: dict[str, Any]) -> Any:
        col = next((c for c in columns if c.lower() == p["name"].lower()), None)
        if isinstance(p.get("default"), bool):
            if col is not None:
                return _truthy(v.get(col))
            if p.get("true_for_env"):
                return self.rc.env_var in p["true_for_env"]
            return p["default"]
        x = str(v.get(col)) if col is not None and v.get(col) is not None else p.get("default")
        return x if x in self.values[i] else OTHER

    def lookup(
        self, columns: list[str], v: dict[str, Any]
    ) -> tuple[str, dict[int, Any] | None, str]:
        """("list", {id: kernel}, "file:list"), ("none", None, why): the tuner names no CK list
        for the row, or ("unresolved", None, why)."""
        key = tuple(self._selector(i, p, columns, v) for i, p in enumerate(self.params))
        case = self.cases.get(key)
        when = ", ".join(f"{p['name']}={k!r}" for p, k in zip(self.params, key, strict=True))
        if case is None:
            return "unresolved", None, f"getKernelName case {when} not run"
        if case.get("none"):
            return "none", None, f"getKernelName returns None for {when}"
        if "error" in case:
            return "unresolved", None, f"{when}: {case['error']}"
        gfx = str(v.get("gfx") or "")
        lists = [kl for kl in self.ctx.lists if kl.file == case["file"] and kl.name == case["list"]]
        fitting = [
            kl for kl in lists if not kl.arch_when or (gfx and arch_matches(kl.arch_when, gfx))
        ]
        fitting.sort(key=lambda kl: not kl.derived)  # a name rebound by code: its last value
        where = f"{case['file']}:{case['list']}"
        if not fitting:
            if not lists:
                return "unresolved", None, f"{when}: {where} is not built statically"
            return "unresolved", None, f"{when}: {where} has no value built for gfx {gfx!r}"
        kl = fitting[0]
        if kl.id not in self._dicts:
            self._dicts[kl.id] = {
                k.kernel_id: k
                for k in self.ctx.kernels
                if k.list_id == kl.id and not k.shadowed and k.kernel_id is not None
            }
        return "list", self._dicts[kl.id], where


def row_lists(ctx: Any, rc: Any) -> RowLists | None:
    if rc is None or not getattr(rc, "kernel_list_choice", None):
        return None
    cache = ctx.__dict__.setdefault("_row_lists", {})
    if rc.op not in cache:
        cache[rc.op] = RowLists(ctx, rc)
    return cache[rc.op]

"""The kernel list one tuned row's kernelId indexes: `resolve` is the one answer every rule and
the `aiter_row_kernels` table read (the op's one list, the list its tuner's getKernelName picks
for the row, or a list the tuner imports that gives kernelId the row's kernelName).

The choice is the tuner's `getKernelName` as ckkb.extract.aiter_tuner_choice ran it (stored in
`aiter_runtime_configs.kernel_list_choice`): the row's selector values (its `libtype` column,
`preshuffleB` from the config the row is in) pick a case, the case names an imported list, and
the list's value for the row's gfx is the one the module builds for that arch (`arch_when`,
ckkb.extract.aiter_derived).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.audit.list_eval import by_name_prefix, evaluated
from ckkb.extract.aiter_configs import ConfigTable
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
        self._columns: dict[tuple[str, ...], list[str | None]] = {}  # a table's -> per param
        self._looked: dict[tuple[tuple[Any, ...], str], Any] = {}  # (key, gfx) -> lookup's

    def _selector(self, i: int, p: dict[str, Any], col: str | None, v: dict[str, Any]) -> Any:
        if isinstance(p.get("default"), bool):
            if col is not None:
                return _truthy(v.get(col))
            if p.get("true_for_env"):
                return self.rc.env_var in p["true_for_env"]
            return p["default"]
        x = str(v.get(col)) if col is not None and v.get(col) is not None else p.get("default")
        return x if x in self.values[i] else OTHER

    def case(self, columns: list[str], v: dict[str, Any]) -> dict[str, Any] | None:
        """The getKernelName case the row's selector values pick (None: a case not run)."""
        return self.cases.get(self._key(columns, v))

    def _key(self, columns: list[str], v: dict[str, Any]) -> tuple[Any, ...]:
        cols = self._columns.get(tuple(columns))
        if cols is None:  # the column each param reads, found once per table, not per row
            cols = [
                next((c for c in columns if c.lower() == p["name"].lower()), None)
                for p in self.params
            ]
            self._columns[tuple(columns)] = cols
        return tuple(self._selector(i, p, cols[i], v) for i, p in enumerate(self.params))

    def lookup(
        self, columns: list[str], v: dict[str, Any]
    ) -> tuple[str, dict[int, Any] | None, str, int | None]:
        """("list", {id: kernel}, "file:list", list id), ("none", None, why, None): the tuner
        names no CK list for the row, or ("unresolved", None, why, None)."""
        key, gfx = self._key(columns, v), str(v.get("gfx") or "")
        if (key, gfx) not in self._looked:  # the answer for every row of these selector values
            self._looked[(key, gfx)] = self._lookup(key, gfx)
        return self._looked[(key, gfx)]

    def _lookup(
        self, key: tuple[Any, ...], gfx: str
    ) -> tuple[str, dict[int, Any] | None, str, int | None]:
        case = self.cases.get(key)
        when = ", ".join(f"{p['name']}={k!r}" for p, k in zip(self.params, key, strict=True))
        if case is None:
            return "unresolved", None, f"getKernelName case {when} not run", None
        if case.get("none"):
            return "none", None, f"getKernelName returns None for {when}", None
        if "error" in case:
            return "unresolved", None, f"{when}: {case['error']}", None
        lists = [kl for kl in self.ctx.lists if kl.file == case["file"] and kl.name == case["list"]]
        fitting = [
            kl for kl in lists if not kl.arch_when or (gfx and arch_matches(kl.arch_when, gfx))
        ]
        fitting.sort(key=lambda kl: not kl.derived)  # a name rebound by code: its last value
        where = f"{case['file']}:{case['list']}"
        if not fitting:
            if not lists:
                return "unresolved", None, f"{when}: {where} is not built statically", None
            why = f"{when}: {where} has no value built for gfx {gfx!r}"
            return "unresolved", None, why, None
        kl = fitting[0]
        if kl.id not in self._dicts:
            self._dicts[kl.id] = {
                k.kernel_id: k
                for k in self.ctx.kernels
                if k.list_id == kl.id and not k.shadowed and k.kernel_id is not None
            }
        return "list", self._dicts[kl.id], where, kl.id


def row_lists(ctx: Any, rc: Any) -> RowLists | None:
    if rc is None or not getattr(rc, "kernel_list_choice", None):
        return None
    cache = ctx.__dict__.setdefault("_row_lists", {})
    if rc.op not in cache:
        cache[rc.op] = RowLists(ctx, rc)
    return cache[rc.op]


def is_ck_row(t: ConfigTable, v: dict[str, Any]) -> bool:
    """A row a CK (or cktile) kernel list can index: libtype ck/cktile (or no libtype column),
    and a kernelName that is not a mangled assembly symbol (`_Z...`)."""
    if "libtype" in t.columns:
        lt = str(v.get("libtype") or "").lower()
        if lt not in ("ck", "cktile", "ck_tile"):
            return False
    name = v.get("kernelName")
    return not (isinstance(name, str) and name.startswith("_Z"))


@dataclass(frozen=True)
class RowKernel:
    """What one tuned row's kernelId indexes. status: "checked" (kernels is the list),
    "not_ck" (no CK list is meant: an assembly kernel, a libtype the tuner names no list for)
    or "no_kernel_list" (where says why); how: "list" (the op's one list), "choice" (the list
    getKernelName picks for the row) or "candidates" (the imported list that agrees)."""

    status: str
    kernels: dict[Any, Any] | None = None
    where: str = ""
    list_id: int | None = None
    how: str = ""


def _list_id(d: dict[Any, Any], kid: Any) -> int | None:
    k = d.get(kid) if isinstance(kid, int) and not isinstance(kid, bool) else None
    if k is None:
        k = next(iter(d.values()), None)
    return getattr(k, "list_id", None)


def candidates(ctx: Any, rc: Any) -> list[dict[Any, Any]]:
    """The kernel lists an op's tuner imports (all of them), as {id: kernel}, cached on ctx."""
    cache = ctx.__dict__.setdefault("_candidate_lists", {})
    if rc.op not in cache:
        lists = []
        for f, n in getattr(rc, "kernel_list_candidates", None) or []:
            d = {
                k.kernel_id: k
                for k in ctx.kernels
                if k.file == f and k.list_name == n and not k.shadowed and k.kernel_id is not None
            }
            if d:
                lists.append(d)
        cache[rc.op] = lists
    return cache[rc.op]


def resolve(ctx: Any, t: ConfigTable, op: str | None, v: dict[str, Any]) -> RowKernel:
    """The list one tuned row's kernelId indexes (see the module docstring)."""
    rc = ctx.runtime_for(op)
    if not is_ck_row(t, v):
        return _other_backend(ctx, t, rc, v, "")
    chooser = row_lists(ctx, rc)
    kid = v.get("kernelId")
    if chooser is not None:
        kind, d, where, lid = chooser.lookup(t.columns, v)
        if kind == "none":
            return _other_backend(ctx, t, rc, v, where)
        if d is None:
            return RowKernel("no_kernel_list", where=where)
        return RowKernel("checked", d, where, lid, "choice")
    klist = ctx.kernel_list(op)
    if klist is not None and rc is not None:  # (a kernel list is always found through rc)
        where = f"{rc.kernel_list_file}:{rc.kernel_list}"
        return RowKernel("checked", klist, where, _list_id(klist, kid), "list")
    name = v.get("kernelName")
    for d in candidates(ctx, rc) if rc is not None else []:
        k = d.get(kid) if kid is not None else None
        if k is not None and k.name == name:  # kernelId names kernelName in this list
            return RowKernel("checked", d, f"{k.file}:{k.list_name}", k.list_id, "candidates")
    return RowKernel("no_kernel_list")


def _built_lists(ctx: Any, rc: Any) -> set[tuple[str, str]]:
    """(file, list) of the candidate lists the kernels stage built (cached per op on ctx)."""
    cache = ctx.__dict__.setdefault("_built_lists", {})
    if rc.op not in cache:
        cache[rc.op] = {(k.file, k.list_name) for d in candidates(ctx, rc) for k in d.values()}
    got: set[tuple[str, str]] = cache[rc.op]
    return got


def _other_backend(ctx: Any, t: ConfigTable, rc: Any, v: dict[str, Any], why: str) -> RowKernel:
    """A row no CK list is chosen for (libtype opus, asm, flydsl, ...): checked when a list the
    tuner imports gives its kernelId its kernelName (aiter 2026's blockscale tuner races
    `gfx942_a8w8_kernels_list` as libtype opus; getKernelName returns None for it), else not_ck
    with the reason."""
    kid, name = v.get("kernelId"), v.get("kernelName")
    lt = v.get("libtype") if "libtype" in t.columns else None
    lib = f"libtype {lt!r}: " if lt is not None else ""
    if isinstance(name, str) and name.startswith("_Z"):
        return RowKernel("not_ck", where=why or f"{lib}an assembly kernel (_Z name)")
    if rc is None or not rc.tuner_file:
        return RowKernel(
            "no_kernel_list", where=getattr(rc, "kernel_list_note", None) or "no tuner"
        )
    if rc is not None and isinstance(kid, int) and not isinstance(kid, bool):
        for d in candidates(ctx, rc):
            k = d.get(kid)
            if k is not None and k.name == name:
                return RowKernel("checked", d, f"{k.file}:{k.list_name}", k.list_id, "candidates")
        ev = evaluated(ctx)
        gfx = str(v.get("gfx") or "")
        built = _built_lists(ctx, rc)
        unread = []
        for f, n in getattr(rc, "kernel_list_candidates", None) or []:
            if ev is None or not gfx or (f, n) in built:
                continue
            got = ev.names(f, n, gfx)
            if isinstance(got, dict) and got.get(kid) == name:
                lid = next((kl.id for kl in ctx.lists if kl.file == f and kl.name == n), None)
                return RowKernel("checked", {}, f"{f}:{n}", lid, "candidates")
            if isinstance(got, str):
                unread.append(got)
        if unread:  # the row's list may be one ckkb cannot build: not checked, and why
            return RowKernel("no_kernel_list", where=f"{lib}{why + '; ' if why else ''}{unread[0]}")
        chooser = row_lists(ctx, rc)
        case = chooser.case(t.columns, v) if chooser is not None else None
        if ev is not None and gfx and case is not None and "error" in case:
            chosen = by_name_prefix(ev, ctx, rc, built, gfx, str(name))
            if chosen is not None:  # checked against it (rules_kernels: _chosen_findings)
                return RowKernel("checked", chosen[0], chosen[1], chosen[2], "choice")
    base = why or f"libtype {lt!r}"
    return RowKernel("not_ck", where=f"{base}; no list the tuner imports gives kernelId its name")


def op_lists(ctx: Any, rc: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """(list id, how, when) of every list rc's rows may index: each value (per arch) of the
    op's one list, of each getKernelName case's list (the cases `lists_by_row` keeps for this
    op's config), or of each list its tuner imports."""
    wanted: list[tuple[str, str, str, dict[str, Any]]] = []
    if getattr(rc, "kernel_list_choice", None):
        wanted = [
            (b["file"], b["list"], "choice", b["when"])
            for b in lists_by_row(ctx, rc)
            if "file" in b
        ]
    elif rc.kernel_list_file:
        wanted = [(rc.kernel_list_file, rc.kernel_list, "list", {})]
    else:
        wanted = [(f, n, "candidates", {}) for f, n in rc.kernel_list_candidates or []]
    moe = ctx.__dict__.get("_moe_choice", {}).get(rc.op)
    if moe is not None:  # MoE: the literals the getters copied for the op's rows
        wanted += [(f, n, "getter", {}) for f, n in sorted(moe.lists())]
    out: list[tuple[int, str, dict[str, Any]]] = []
    seen: set[int] = set()
    for f, n, how, when in wanted:
        for kl in ctx.lists:
            if kl.file == f and kl.name == n and kl.id not in seen:
                seen.add(kl.id)
                out.append((kl.id, how, when))
    return out


def lists_by_row(ctx: Any, rc: Any) -> list[dict[str, Any]]:
    """The tuner's getKernelName cases (aiter 2026: libtype, preshuffleB): the file and list each
    one indexes, with the entries of each arch's value of that list."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    choice = getattr(rc, "kernel_list_choice", None) or {}
    # a bool the tuner sets by the config it writes (preshuffleB) is fixed for this op
    fixed = {
        p["name"]: rc.env_var in p["true_for_env"]
        for p in choice.get("params", [])
        if isinstance(p.get("default"), bool) and p.get("true_for_env")
    }
    for c in choice.get("cases", []):
        if any(c["when"].get(k) != v for k, v in fixed.items()):
            continue
        item: dict[str, Any] = {"when": c["when"]}
        if "file" in c:
            variants = [kl for kl in ctx.lists if kl.file == c["file"] and kl.name == c["list"]]
            item.update(
                file=c["file"],
                list=c["list"],
                arch_when=[kl.arch_when for kl in variants],
                ids=[kl.entries for kl in variants],
                first=(c["file"], c["list"]) not in seen,
            )
            seen.add((c["file"], c["list"]))
        elif c.get("none"):
            item["none"] = True
        else:
            item["error"] = c.get("error")
        out.append(item)
    return out

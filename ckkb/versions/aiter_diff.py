"""What changed between two aiter trees: kernel-list ids, the kernels tuned rows' ids name, and
tuned config rows keyed the way the runtime looks them up.

Kernels are identified by their parameters (the fields both lists' dataclasses have), never by
id. Config rows are identified by op and lookup key: the key columns the audit derives per file
from the tuner and core.py merge (ckkb.audit.rules_keys.lookup_key), the union of both trees'
for an op; a key column a file lacks is read the way aiter 2026's merge fills it (gfx from
cu_num, `_tag` empty). Where a tree has several rows under one key, the row that stands for it is
the one the run-time merge keeps (ckkb.audit.rules_keys.merge_preview): from a loaded file, not
a loser. Files with no lookup key (no op, or an op without an untuned CSV) are compared as whole
rows; no key is guessed from column names.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ckkb.audit.context import merged_set
from ckkb.audit.kernel_choice import is_ck_row
from ckkb.audit.rules_keys import lookup_key, merge_preview
from ckkb.extract.aiter_configs import ConfigTable
from ckkb.kb.schema.aiter import AiterKernelListRow, AiterKernelRow
from ckkb.versions.aiter_side import AiterSide, canon, from_connection, key_values, row_text


def aiter_diff(from_conn: Any, to_conn: Any) -> dict[str, Any]:
    """Compare the aiter trees two scoped knowledge-base connections read (FROM, then TO).

    Returns (JSON-ready; every list sorted; `file`/`line` are the tree's own, repo-style):

    - `from`, `to`: {"name", "path", "version", "commit"} of each tree.
    - `lists`: {"added", "removed"}: kernel lists ({"op", "list", "file"}) in one tree only.
    - `kernels`: kernel-list ids, per list (lists matched by op and name, and each op's tuner
      list matched to the other tree's):
      - `added` / `removed`: {"op", "list", "file", "line", "id", "kernel"} (kernel: its name);
      - `renumbered`: {"kind": "moved", "op", "list", "file", "kernel", "params", "from_ids",
        "to_ids", "from_line", "to_line"} (the same kernel under other ids) and {"kind":
        "reassigned", "op", "list", "file", "id", "from_kernel", "to_kernel", "from_params",
        "to_params", "from_line", "to_line"} (another kernel under the same id). A kernel is its
        name when the name property could be evaluated (else null), params its field values.
    - `rows_kernel_changed`: TO's tuned CK rows whose kernelId names another kernel in TO's tuner
      list than in FROM's: {"op", "file", "line", "key", "kernelId", "kernelName",
      "from_kernel", "to_kernel", "carried"} (carried: FROM has the same key with the same id).
    - `config_rows`: {"key_columns": {op: [...]}, "added", "removed", "retimed", "changed",
      "unkeyed": {"added", "removed"}}. A row item is {"op", "file", "line", "key", "us",
      "kernelId", "kernelName"}; `retimed` items (same key, other us) are {"op", "key",
      "from": row, "to": row, "ratio"} with ratio = from us / to us (above 1: TO is faster;
      null when a time is missing or not positive); `changed`: same key and us, other kernel.
      unkeyed items are {"file", "line", "row"} (row: column -> value).
    - `counts`: the length of each list above, by dotted name.
    """
    return compare(from_connection(from_conn), from_connection(to_conn))


def compare(a: AiterSide, b: AiterSide) -> dict[str, Any]:
    """aiter_diff over two sides however they were read (see aiter_diff for the shape)."""
    lists, kernels, pairs = kernel_diff(a, b)
    rows_a, unkeyed_a = side_rows(a)
    rows_b, unkeyed_b = side_rows(b)
    key_cols = {op: key_columns(a, b, op) for op in sorted(set(rows_a) | set(rows_b))}
    ka = {op: by_key(rows, key_cols[op]) for op, rows in rows_a.items()}
    kb = {op: by_key(rows, key_cols[op]) for op, rows in rows_b.items()}
    config: dict[str, Any] = {"key_columns": key_cols}
    config.update(config_changes(ka, kb))
    config["unkeyed"] = unkeyed_changes(unkeyed_a, unkeyed_b)
    out = {
        "from": _origin(a),
        "to": _origin(b),
        "lists": lists,
        "kernels": kernels,
        "rows_kernel_changed": rows_kernel_changed(a, b, ka, kb, pairs),
        "config_rows": config,
    }
    out["counts"] = counts(out)
    return out


def _origin(s: AiterSide) -> dict[str, Any]:
    o = s.origin
    return {
        "name": s.label,
        "path": o.get("path"),
        "version": o.get("version"),
        "commit": o.get("commit"),
    }


def counts(d: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in ("lists", "kernels", "config_rows"):
        for sub, v in d[k].items():
            if isinstance(v, list):
                out[f"{k}.{sub}"] = len(v)
    for sub, v in d["config_rows"]["unkeyed"].items():
        out[f"config_rows.unkeyed.{sub}"] = len(v)
    out["rows_kernel_changed"] = len(d["rows_kernel_changed"])
    return out


# ---------------------------------------------------------------- kernel lists


@dataclass(frozen=True)
class ListPair:
    op: str
    name: str
    a: AiterKernelListRow
    b: AiterKernelListRow


def _entries(s: AiterSide, kl: AiterKernelListRow) -> dict[Any, AiterKernelRow]:
    return {
        (k.kernel_id if k.kernel_id is not None else k.key): k
        for k in s.ctx.kernels
        if k.list_id == kl.id and not k.shadowed
    }


def identity(k: AiterKernelRow, fields: list[str]) -> str:
    """A kernel by its parameters: the values of `fields` (the fields both lists declare); a
    bool as the int Python compares it equal to (a field's default False became 0)."""
    vals = [k.values.get(f) for f in fields]
    return json.dumps([int(v) if isinstance(v, bool) else v for v in vals], default=str)


def _runtime_list(s: AiterSide, op: str) -> AiterKernelListRow | None:
    rc = s.ctx.runtime_for(op)
    if rc is None or not rc.kernel_list_file:
        return None
    for kl in s.ctx.lists:
        if kl.file == rc.kernel_list_file and kl.name == rc.kernel_list:
            return kl
    return None


def list_pairs(a: AiterSide, b: AiterSide) -> tuple[list[ListPair], dict[str, ListPair]]:
    """Lists matched by (op, name); each op's tuner list also matched to the other tree's
    (returned by op too: the pair a tuned row's kernelId indexes)."""
    la = {(kl.op, kl.name): kl for kl in a.ctx.lists}
    lb = {(kl.op, kl.name): kl for kl in b.ctx.lists}
    pairs = {k: ListPair(k[0], k[1], la[k], lb[k]) for k in sorted(set(la) & set(lb))}
    by_op: dict[str, ListPair] = {}
    for rc in a.ctx.runtime:
        ra, rb = _runtime_list(a, rc.op), _runtime_list(b, rc.op)
        if ra is None or rb is None:
            continue
        p = pairs.get((ra.op, ra.name))
        if p is None or p.b.id != rb.id:
            p = ListPair(ra.op, ra.name if ra.name == rb.name else f"{ra.name}->{rb.name}", ra, rb)
            pairs[(p.op, p.name)] = p
        by_op[rc.op] = p
    return list(pairs.values()), by_op


def _fields(p: ListPair) -> list[str]:
    fa, fb = list(p.a.fields or []), set(p.b.fields or [])
    return [f for f in fa if f in fb]


def kernel_diff(
    a: AiterSide, b: AiterSide
) -> tuple[dict[str, Any], dict[str, Any], dict[str, ListPair]]:
    la = {(kl.op, kl.name): kl for kl in a.ctx.lists}
    lb = {(kl.op, kl.name): kl for kl in b.ctx.lists}
    pairs, by_op = list_pairs(a, b)
    paired_a = {p.a.id for p in pairs}
    paired_b = {p.b.id for p in pairs}

    def lst(kl: AiterKernelListRow) -> dict[str, Any]:
        return {"op": kl.op, "list": kl.name, "file": kl.file}

    lists = {
        "added": [lst(kl) for k, kl in sorted(lb.items()) if kl.id not in paired_b],
        "removed": [lst(kl) for k, kl in sorted(la.items()) if kl.id not in paired_a],
    }
    added: list[dict] = []
    removed: list[dict] = []
    renumbered: list[dict] = []
    for p in pairs:
        ea, eb = _entries(a, p.a), _entries(b, p.b)
        fields = _fields(p)

        def item(i: Any, k: AiterKernelRow, p: ListPair = p) -> dict[str, Any]:
            return {
                "op": p.op,
                "list": p.name,
                "file": k.file,
                "line": k.line,
                "id": i,
                "kernel": k.name,
            }

        added += [item(i, eb[i]) for i in _sorted(set(eb) - set(ea))]
        removed += [item(i, ea[i]) for i in _sorted(set(ea) - set(eb))]
        ids_a: dict[str, list[Any]] = defaultdict(list)
        ids_b: dict[str, list[Any]] = defaultdict(list)
        for i, k in ea.items():
            ids_a[identity(k, fields)].append(i)
        for i, k in eb.items():
            ids_b[identity(k, fields)].append(i)
        for ident in sorted(set(ids_a) & set(ids_b)):
            fa, fb = _sorted(ids_a[ident]), _sorted(ids_b[ident])
            if fa != fb:
                k, old = eb[fb[0]], ea[fa[0]]
                renumbered.append(
                    {
                        "kind": "moved",
                        "op": p.op,
                        "list": p.name,
                        "file": k.file,
                        "kernel": k.name or old.name,
                        "params": k.values,
                        "from_ids": fa,
                        "to_ids": fb,
                        "from_line": old.line,
                        "to_line": k.line,
                    }
                )
        for i in _sorted(set(ea) & set(eb)):
            if identity(ea[i], fields) != identity(eb[i], fields):
                renumbered.append(
                    {
                        "kind": "reassigned",
                        "op": p.op,
                        "list": p.name,
                        "file": eb[i].file,
                        "id": i,
                        "from_kernel": ea[i].name,
                        "to_kernel": eb[i].name,
                        "from_params": ea[i].values,
                        "to_params": eb[i].values,
                        "from_line": ea[i].line,
                        "to_line": eb[i].line,
                    }
                )
    kernels = {"added": added, "removed": removed, "renumbered": renumbered}
    return lists, kernels, by_op


def _sorted(xs: Any) -> list[Any]:
    return sorted(xs, key=lambda x: (not isinstance(x, int), x if isinstance(x, int) else str(x)))


# ---------------------------------------------------------------- tuned rows


@dataclass
class RowRef:
    """A tuned row of one tree: where it is, and what the run-time merge does with it."""

    op: str
    table: ConfigTable
    line: int
    values: dict[str, Any]
    loaded: bool  # its file is in the op's run-time merged set
    loser: dict[str, Any] | None  # merge_preview's loser entry: the merge drops or shadows it

    @property
    def file(self) -> str:
        return self.table.rel

    def rank(self) -> tuple:
        return (not self.loaded, self.loser is not None, self.file, self.line)


def side_rows(s: AiterSide) -> tuple[dict[str, list[RowRef]], list[ConfigTable]]:
    """op -> its tuned rows (every tuned file of the op, loaded or not); the tables with no
    lookup key. Computed once per side."""
    if "rows" not in s.cache:
        s.cache["rows"] = _side_rows(s)
    rows: tuple[dict[str, list[RowRef]], list[ConfigTable]] = s.cache["rows"]
    return rows


def _side_rows(s: AiterSide) -> tuple[dict[str, list[RowRef]], list[ConfigTable]]:
    ctx = s.ctx
    loaded: dict[str, set[str]] = {}
    losers: dict[tuple[str, int], dict[str, Any]] = {}
    for rc in ctx.runtime:
        loaded[rc.op] = set(merged_set(ctx, rc)[0])
        for lo in merge_preview(ctx, rc)["losers"]:
            losers[(lo["file"], lo["line"])] = lo
    out: dict[str, list[RowRef]] = defaultdict(list)
    unkeyed: list[ConfigTable] = []
    for t in ctx.tables:
        if t.error is not None:
            continue
        op = ctx.ops.get(t.rel)
        keyed = t.kind == "tuned" and op is not None and lookup_key(ctx, t, op)
        if not keyed or op is None:
            unkeyed.append(t)
            continue
        is_loaded = t.rel in loaded.get(op, set())
        for ln, v in t.rows:
            lo = losers.get((t.rel, ln)) if is_loaded else None
            out[op].append(RowRef(op, t, ln, v, is_loaded, lo))
    return dict(out), unkeyed


def key_columns(a: AiterSide, b: AiterSide, op: str) -> list[str]:
    cols: dict[str, None] = {}
    for s in (a, b):
        for t in s.ctx.tables:
            if t.error is None and s.ctx.ops.get(t.rel) == op and t.kind == "tuned":
                cols.update(dict.fromkeys(lookup_key(s.ctx, t, op)))
    return list(cols)


def key_of(r: RowRef, cols: list[str]) -> tuple:
    return key_values(r.table, r.values, cols)


def by_key(rows: list[RowRef], cols: list[str]) -> dict[tuple, tuple[list[str], RowRef]]:
    """key -> (key columns, the row standing for it: the one the merge keeps)."""
    groups: dict[tuple, list[RowRef]] = defaultdict(list)
    for r in rows:
        groups[key_of(r, cols)].append(r)
    return {k: (cols, min(g, key=RowRef.rank)) for k, g in groups.items()}


def _order(k: tuple) -> tuple:
    """A key tuple's sort order: numbers as numbers, before text (None last)."""
    return tuple(
        (0, x, "") if isinstance(x, (int, float)) else (1 if x is not None else 2, 0, str(x))
        for x in k
    )


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
        return None
    return float(x)


def row_item(r: RowRef, cols: list[str], key: tuple) -> dict[str, Any]:
    v = r.values
    return {
        "op": r.op,
        "file": r.file,
        "line": r.line,
        "key": dict(zip(cols, key, strict=True)),
        "us": _num(v.get("us")),
        "kernelId": canon("kernelId", v.get("kernelId")),
        "kernelName": v.get("kernelName"),
    }


def ratio(old: float | None, new: float | None) -> float | None:
    """old us / new us: above 1, the new row is faster."""
    if old is None or new is None or old <= 0 or new <= 0 or math.isinf(old) or math.isinf(new):
        return None
    return round(old / new, 4)


def config_changes(
    ka: dict[str, dict[tuple, tuple[list[str], RowRef]]],
    kb: dict[str, dict[tuple, tuple[list[str], RowRef]]],
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {
        "added": [],
        "removed": [],
        "retimed": [],
        "changed": [],
    }
    for op in sorted(set(ka) | set(kb)):
        ra, rb = ka.get(op, {}), kb.get(op, {})
        for k in sorted(set(rb) - set(ra), key=_order):
            cols, r = rb[k]
            out["added"].append(row_item(r, cols, k))
        for k in sorted(set(ra) - set(rb), key=_order):
            cols, r = ra[k]
            out["removed"].append(row_item(r, cols, k))
        for k in sorted(set(ra) & set(rb), key=_order):
            (cols, old), (_, new) = ra[k], rb[k]
            io, inew = row_item(old, cols, k), row_item(new, cols, k)
            kernel_o = (io["kernelId"], io["kernelName"])
            kernel_n = (inew["kernelId"], inew["kernelName"])
            if io["us"] == inew["us"] and kernel_o == kernel_n:
                continue
            del io["op"], io["key"], inew["op"], inew["key"]
            item = {
                "op": op,
                "key": dict(zip(cols, k, strict=True)),
                "from": io,
                "to": inew,
                "ratio": ratio(io["us"], inew["us"]),
            }
            out["retimed" if io["us"] != inew["us"] else "changed"].append(item)
    return out


def unkeyed_changes(ta: list[ConfigTable], tb: list[ConfigTable]) -> dict[str, list[dict]]:
    """Whole rows of the files with no lookup key, in one tree and not the other (per file)."""
    out: dict[str, list[dict]] = {"added": [], "removed": []}
    fa = {t.rel: t for t in ta}
    fb = {t.rel: t for t in tb}
    for rel in sorted(set(fa) | set(fb)):
        rows_a = _texts(fa.get(rel))
        rows_b = _texts(fb.get(rel))
        for name, src, other in (("added", rows_b, rows_a), ("removed", rows_a, rows_b)):
            left: dict[str, int] = defaultdict(int)
            for text, _, _ in other:
                left[text] += 1
            for text, ln, row in src:
                if left[text] > 0:
                    left[text] -= 1
                else:
                    out[name].append({"file": rel, "line": ln, "row": row})
    return out


def _texts(t: ConfigTable | None) -> list[tuple[str, int, dict[str, Any]]]:
    if t is None:
        return []
    return [(row_text(t.columns, v), ln, v) for ln, v in t.rows]


# ---------------------------------------------------------------- ids naming other kernels


def rows_kernel_changed(
    a: AiterSide,
    b: AiterSide,
    ka: dict[str, dict[tuple, tuple[list[str], RowRef]]],
    kb: dict[str, dict[tuple, tuple[list[str], RowRef]]],
    pairs: dict[str, ListPair],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for op in sorted(kb):
        p = pairs.get(op)
        if p is None:
            continue
        ea, eb = _entries(a, p.a), _entries(b, p.b)
        fields = _fields(p)
        for k, (cols, r) in sorted(kb[op].items(), key=lambda kv: (kv[1][1].file, kv[1][1].line)):
            if not is_ck_row(r.table, r.values):
                continue
            kid = canon("kernelId", r.values.get("kernelId"))
            if not isinstance(kid, int) or kid not in ea or kid not in eb:
                continue
            if identity(ea[kid], fields) == identity(eb[kid], fields):
                continue
            old = ka.get(op, {}).get(k)
            carried = old is not None and canon("kernelId", old[1].values.get("kernelId")) == kid
            item = row_item(r, cols, k)
            del item["us"]
            item.update(from_kernel=ea[kid].name, to_kernel=eb[kid].name, carried=carried)
            out.append(item)
    return out

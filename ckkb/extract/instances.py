"""Stage `ck.instances`: instance lists (`using NAME = std::tuple<...>`) under CK's instance
trees -> `instance_lists`, `instances`.

`extract` (per file, in a worker: `instance_reader`) reads each file's aliases, includes and
lists. `combine` (once, in the parent) resolves each entry's arguments with the aliases of the
file and of the headers it includes (transitively, within the trees read here), picks the device
op the entry names (`device_ops`, by the header the file includes when two headers define the
same name), maps positional arguments to the op's template parameter names and derives the
normalised columns.

Files read: the instance library roots' files (`instance_roots`; CK's
`library/src/tensor_operation_instance/gpu/**`: `.cpp`, `.hpp`, `.in`) and the headers under the
factory directories (`include_dirs.factory_dirs`; CK's
`library/include/ck/library/tensor_operation_instance/gpu/**`), which hold the instance lists (and
aliases) that many convolution and reduction sources include. `#include "X"` is resolved against
the including file's directory, then the include directories the tree's CMake gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ckkb import fields as ckfields
from ckkb.diagnostics import Diagnostic
from ckkb.extract.files import list_files
from ckkb.extract.include_dirs import factory_dirs, factory_files, include_dirs
from ckkb.extract.instance_exprs import Plan, Resolver, map_fields, plan_of, substitute
from ckkb.extract.instance_reader import NAME, dir_of, extract
from ckkb.extract.instance_roots import instance_roots
from ckkb.kb.schema.ck_instances import DeviceOpRow, InstanceListRow, InstanceRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

VERSION = "3"  # bump whenever extract() output changes: cached per-file results are keyed by it
SUFFIXES = (".cpp", ".hpp", ".in")


class _Index:
    """Files of this stage by path, for `#include` resolution."""

    def __init__(self, rels: list[str], dirs: tuple[str, ...]):
        self.rels = set(rels)
        self.dirs = dirs  # where `#include "X"` may point, relative to the CK root
        self.by_base: dict[str, list[str]] = {}
        for r in rels:
            self.by_base.setdefault(_basename(r), []).append(r)

    def resolve(self, inc: str, from_rel: str) -> str | None:
        here = from_rel.rsplit("/", 1)[0] if "/" in from_rel else ""
        cands = [_norm(f"{here}/{inc}" if here and not inc.startswith("/") else inc)] + [
            f"{d}/{inc}" if d else inc for d in self.dirs
        ]
        for c in cands:
            if c in self.rels:
                return c
        same = self.by_base.get(_basename(inc), [])
        tail = [r for r in same if r.endswith("/" + inc)]
        if len(tail) == 1:
            return tail[0]
        return None


def _parts(p: str) -> list[str]:
    """Path components as PurePosixPath reads them: empty and `.` components dropped, a leading
    `/` kept."""
    parts = [c for c in p.split("/") if c and c != "."]
    return ["/", *parts] if p.startswith("/") else parts


def _basename(p: str) -> str:
    """PurePosixPath(p).name, on strings (this runs for every include of every file)."""
    parts = _parts(p)
    return parts[-1] if parts and parts[-1] != "/" else ""


def _norm(p: str) -> str:
    """Resolve `..` and `.` lexically (an include path is not a file system path)."""
    parts: list[str] = []
    for part in _parts(p):
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    if not parts:
        return "."
    return "/" + "/".join(parts[1:]) if parts[0] == "/" else "/".join(parts)


def combine(root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
    out = StageResult()
    roots = (*instance_roots(root).roots, *factory_dirs(root))
    ops: dict[str, list[DeviceOpRow]] = {}
    for op in ctx.table_rows("device_ops"):
        ops.setdefault(op.name, []).append(op)
    shapes = {id(op): plan_of(op.params) for cands in ops.values() for op in cands}
    facts = {rel: fr.facts for rel, fr in results.items() if fr.facts}
    index = _Index(sorted(facts), include_dirs(root).dirs)
    list_names = {lst["name"] for f in facts.values() for lst in f.get("lists", [])}
    classes = {  # class name -> (file, line, first base) of the classes these files define
        name: (rel, c[0], c[1])
        for rel in sorted(facts, reverse=True)
        for name, c in facts[rel].get("classes", {}).items()
    }

    closure_cache: dict[str, tuple[list[str], set[str]]] = {}

    def closure(rel: str) -> tuple[list[str], set[str]]:
        """Files whose aliases `rel` sees (itself first, then includes breadth-first) and every
        include string seen."""
        if rel in closure_cache:
            return closure_cache[rel]
        order, seen, strings = [rel], {rel}, set()
        k = 0
        while k < len(order):
            cur = order[k]
            k += 1
            for inc in facts.get(cur, {}).get("includes", []):
                strings.add(_basename(inc))
                tgt = index.resolve(inc, cur)
                if tgt is not None and tgt not in seen:
                    seen.add(tgt)
                    order.append(tgt)
        closure_cache[rel] = (order, strings)
        return order, strings

    env_cache: dict[str, dict[str, dict]] = {}

    def env_of(rel: str) -> dict[str, dict]:
        if rel not in env_cache:
            env: dict[str, dict] = {}
            for f in reversed(closure(rel)[0]):  # the file's own aliases win over its includes'
                env.update(facts[f].get("aliases", {}))
            env_cache[rel] = env
        return env_cache[rel]

    memos: dict[tuple[str, frozenset], dict] = {}
    counter = {"list": 0, "inst": 0}
    rows: list[Any] = []
    where: dict[str, list[tuple[str, dict]]] = {}  # list name -> [(file, list facts)]

    def emit(
        lst: dict, list_rel: str, entries_rel: str, resolve: Resolver, alias_of: str = ""
    ) -> None:
        counter["list"] += 1
        lid = counter["list"]
        d = dir_of(list_rel, roots)
        inc_names = closure(entries_rel)[1]
        n_active = n_out = 0
        for ordinal, e in enumerate(lst["entries"]):
            counter["inst"] += 1
            if e["status"] == "active":
                n_active += 1
            else:
                n_out += 1
            row, diag = _instance_row(
                e,
                entries_rel,
                d,
                lst,
                lid,
                counter["inst"],
                ordinal,
                resolve,
                ops,
                inc_names,
                list_names,
                shapes,
                classes,
            )
            if alias_of:
                row.list_name = lst["name"] if "alias_name" not in lst else lst["alias_name"]
            if (
                diag is not None and not alias_of
            ):  # an alias repeats its target's entries: reported once, there
                out.diagnostics.append(diag)
            rows.append(row)
        rows.append(
            InstanceListRow(
                id=lid,
                name=lst.get("alias_name", lst["name"]),
                dir=d,
                file=list_rel,
                line=lst.get("alias_line", lst["line"]),
                template_params=lst.get("alias_params", lst["template_params"]),
                comment=lst.get("alias_comment", lst["comment"]),
                entries=n_active,
                commented_out=n_out,
                cmake_vars=lst.get("cmake_vars", []),
                guard=lst.get("alias_guard", lst.get("guard", "")),
                alias_of=alias_of,
            )
        )

    for rel in sorted(facts):
        for lst in facts[rel].get("lists", []):
            where.setdefault(lst["name"], []).append((rel, lst))
            tparams = frozenset(p["name"] for p in lst["template_params"])
            memo = memos.setdefault((rel, tparams), {})
            emit(lst, rel, rel, Resolver(env_of(rel), set(tparams), memo=memo))

    # `using X_instance = other_list<args>;`: X is a list too, with other_list's entries and its
    # template parameters bound to args. Aliases of aliases resolve over a few passes.
    pending = [(rel, a) for rel in sorted(facts) for a in facts[rel].get("list_aliases", [])]
    for _ in range(4):
        later = []
        for rel, a in pending:
            cands = where.get(a["target"])
            if not cands:
                later.append((rel, a))
                continue
            seen = set(closure(rel)[0])
            target_rel, target = next(((r, t) for r, t in cands if r in seen), cands[0])
            outer = Resolver(env_of(rel), {p["name"] for p in a["template_params"]})
            values = [outer(x) for x in a["target_args"]]
            bindings = {
                p["name"]: v for p, v in zip(target["template_params"], values, strict=False)
            }
            merged = dict(
                target,
                alias_name=a["name"],
                alias_line=a["line"],
                alias_params=a["template_params"],
                alias_comment=a["comment"],
                alias_guard=a["guard"],
            )
            emit(
                merged,
                rel,
                target_rel,
                Resolver(env_of(target_rel), set(), bindings),
                alias_of=a["text"],
            )
            where.setdefault(a["name"], []).append((rel, dict(target, name=a["name"])))
        if len(later) == len(pending):
            break
        pending = later
    out.rows = rows
    return out


def _through_aliases(
    tname: str, template: str, exprs: tuple, resolve: Resolver, ops: dict[str, list[DeviceOpRow]]
) -> tuple[str, tuple]:
    """`template <...> using MyGemm = DeviceGemm_Xdl_CShuffleV3<..., P, ...>;` then `MyGemm<...>`
    in a list: the device op and arguments the alias stands for (aliases of aliases too), or the
    entry as written when the alias names no device op."""
    name, args = template, exprs
    for _ in range(8):
        hit = resolve.lookup(name)
        if hit is None or "params" not in hit or hit["expr"][0] != "tmpl":
            break
        sub = substitute(hit["expr"], hit["params"], list(args))
        name, args = sub[1], sub[2]
        if name.rsplit("::", 1)[-1] in ops:
            return name.rsplit("::", 1)[-1], args
    return tname, exprs


def _pick_op(cands: list[DeviceOpRow], inc_names: set[str], n_args: int) -> DeviceOpRow:
    if len(cands) == 1:
        return cands[0]
    by_inc = [c for c in cands if _basename(c.file) in inc_names]
    if len(by_inc) == 1:
        return by_inc[0]
    pool = by_inc or cands
    fits = [c for c in pool if map_fields(c.params, [None] * n_args)[2]]
    return (fits or pool)[0]


def _instance_row(
    e: dict[str, Any],
    rel: str,
    d: str,
    lst: dict[str, Any],
    list_id: int,
    inst_id: int,
    ordinal: int,
    resolve: Resolver,
    ops: dict[str, list[DeviceOpRow]],
    inc_names: set[str],
    list_names: set[str],
    shapes: dict[int, Plan],
    classes: dict[str, tuple[str, int, str]] | None = None,
) -> tuple[InstanceRow, Diagnostic | None]:
    diag = None
    template = e["template"]
    tname = template.rsplit("::", 1)[-1]
    exprs = e["exprs"]
    if exprs is None:
        # not `Template<...>`: an alias of one (using X = Op<...>), or another list nested in
        # this one
        hit = resolve.lookup(template)
        if hit is not None and hit["expr"][0] == "tmpl" and "params" not in hit:
            tname, exprs = hit["expr"][1].rsplit("::", 1)[-1], hit["expr"][2]
    if exprs is not None and tname not in ops:
        tname, exprs = _through_aliases(tname, template, exprs, resolve, ops)
    resolved = resolve.all(exprs) if exprs is not None else []
    op = None
    cls = (classes or {}).get(tname) if tname not in ops else None
    fields: dict[str, Any] = {}
    defaulted: list[str] = []
    if exprs is None:
        mapping = "not_template"
        diag = Diagnostic(
            rel,
            e["line"],
            f"entry {template!r} of {lst['name']} is not a device-op template instantiation",
            "warning",
            NAME,
        )
    elif tname in list_names and tname not in ops:
        mapping = "nested_list"
        diag = Diagnostic(
            rel,
            e["line"],
            f"entry of {lst['name']} is another instance list ({tname}); "
            "its entries are listed there",
            "warning",
            NAME,
        )
    elif cls is not None and "Device" not in tname and "Device" not in cls[2]:
        mapping = "not_device_op"
        diag = Diagnostic(
            rel,
            e["line"],
            f"entry of {lst['name']} is not a device op: {tname} is a class ({cls[0]}:{cls[1]}) "
            "with no device-op base, so the list holds configurations, not instances",
            "warning",
            NAME,
        )
    elif tname not in ops:
        mapping = "unknown_template"
        diag = Diagnostic(
            rel, e["line"], f"unknown device-op template {tname} in {lst['name']}", "warning", NAME
        )
    else:
        op = _pick_op(ops[tname], inc_names, len(resolved))
        fields, defaulted, ok = map_fields(op.params, resolved, shapes.get(id(op)))
        mapping = "ok" if ok else "arity_mismatch"
        if not ok:
            req = sum(1 for p in op.params if p["kind"] != "pack" and p.get("default") is None)
            diag = Diagnostic(
                rel,
                e["line"],
                f"{tname} takes {req}..{len(op.params)} template arguments "
                f"({op.file}:{op.line}), entry of {lst['name']} has {len(resolved)}",
                "warning",
                NAME,
            )
    norm = ckfields.normalise(fields) if fields else {}
    row = InstanceRow(
        id=inst_id,
        list_id=list_id,
        list_name=lst["name"],
        dir=d,
        file=rel,
        line=e["line"],
        ordinal=ordinal,
        template=tname,
        template_file=op.file if op else None,
        device_op_id=op.id if op else None,
        status=e["status"],
        reason=e.get("reason", ""),
        guard=e.get("guard", ""),
        args=e["args"],
        resolved=resolved,
        fields=fields,
        defaulted=defaulted,
        mapping=mapping,
        **norm,
    )
    return row, diag


class _Stage:
    name = NAME
    version = VERSION
    tree = "ck"
    reads = ("device_ops",)
    writes = ("instance_lists", "instances")
    combine_cost = 0.47  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        out: list[Path] = []
        for base in instance_roots(root).roots:
            out.extend(list_files(root, base, SUFFIXES))
        return out + factory_files(root, (".hpp",))

    extract = staticmethod(extract)
    combine = staticmethod(combine)


STAGE = _Stage()

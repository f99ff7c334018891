"""Stage `ck.registrations`: add functions, the lists they register, and the conditions around them.

For every `add_*_instances` function defined under `library/src/tensor_operation_instance/gpu/**`
(`.cpp`, `.hpp`, CMake `.in` templates), each
`add_device_operation_instances(instances, LIST<ARGS>{})` call is recorded with the tuple alias it
instantiates, the template arguments it passes, those arguments bound to the list's own template
parameters (`GemmSpec -> Default`, via the file's aliases and the instance_lists rows of the
instances stage), and the full guard chain from the outermost `#if` down to the innermost `if`: each
guard with its branch (`then` / `else`), its kind (`device_name`, `capability`, `preprocessor`,
`other`) and a small expression tree that `ckkb.extract.availability` evaluates per arch.

Also read: `include/ck/ck.hpp` (its unconditional `#define`s: what `#if CK_EXPERIMENTAL_...` sees)
and `include/ck/host_utility/device_prop.hpp` (the `is_*_supported()` functions whose body is a
single `return` of device-name compares: the capability table is read from CK, not hand-written;
see availability.py for the fallback).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract import availability
from ckkb.extract.files import list_files
from ckkb.extract.instance_roots import instance_roots
from ckkb.extract.registration_files import (
    CK_HPP,
    DEVICE_PROP_HPP,
    SUFFIXES,
    extract_capabilities,
    extract_defines,
    extract_file,
    gpu_dir,
)
from ckkb.fields import enum_word
from ckkb.kb.schema.ck_registrations import AddFunctionRow, GateRow, RegistrationRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

# ---------------------------------------------------------------- combine


def _resolve(value: str, aliases: dict[str, str], depth: int = 0) -> str:
    v = value.strip()
    if depth < 5 and v in aliases:
        return _resolve(aliases[v], aliases, depth + 1)
    return v


def _bind_value(raw: str, aliases: dict[str, str]) -> Any:
    v = _resolve(raw, aliases)
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    if "::" in v and "<" not in v:
        return enum_word(v)
    return v


class RegistrationsStage:
    name = "ck.registrations"
    version = "9"
    tree = "ck"
    reads = ("instance_lists", "build_defines", "file_builds", "build_rules", "tree_archs")
    writes = ("add_functions", "availability", "gates", "registrations")
    combine_cost = 0.1  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        out = [p for r in instance_roots(root).roots for p in list_files(root, r, SUFFIXES)]
        for extra in (CK_HPP, DEVICE_PROP_HPP):
            if (root / extra).is_file():
                out.append(root / extra)
        return out

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if rel == CK_HPP:
            return extract_defines(rel, data)
        if rel == DEVICE_PROP_HPP:
            return extract_capabilities(rel, data)
        return extract_file(rel, data)

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        diags: list[Diagnostic] = []
        rows: list[Any] = []
        roots = instance_roots(root).roots
        lists_by_name: dict[str, list[Any]] = defaultdict(list)
        for lr in ctx.table_rows("instance_lists"):
            lists_by_name[lr.name].append(lr)
        global_aliases: dict[str, set[str]] = defaultdict(set)
        for fr in results.values():
            for k, v in fr.facts.get("aliases", {}).items():
                global_aliases[k].add(v)
        by_base: dict[str, list[str]] = defaultdict(list)
        for rel in results:
            by_base[rel.rsplit("/", 1)[-1]].append(rel)

        unique_aliases = {k: next(iter(v)) for k, v in global_aliases.items() if len(v) == 1}

        def file_aliases(rel: str) -> dict[str, str]:
            al = dict(unique_aliases)
            fr = results.get(rel)
            if fr is None:
                return al
            for inc in fr.facts.get("includes", []):
                base = inc.rsplit("/", 1)[-1]
                cands = [
                    r for r in by_base.get(base, []) if r.rsplit("/", 1)[0] == rel.rsplit("/", 1)[0]
                ] or by_base.get(base, [])
                for r in cands[:1]:
                    al.update(results[r].facts.get("aliases", {}))
            al.update(fr.facts.get("aliases", {}))
            return al

        def find_list(name: str, rel: str) -> Any:
            cands = lists_by_name.get(name, [])
            if len(cands) <= 1:
                return cands[0] if cands else None
            folder = rel.rsplit("/", 1)[0]
            inc = {i.rsplit("/", 1)[-1] for i in results[rel].facts.get("includes", [])}
            for pred in (
                lambda lr: lr.file == rel,
                lambda lr: (
                    lr.file.rsplit("/", 1)[-1] in inc and lr.file.rsplit("/", 1)[0] == folder
                ),
                lambda lr: lr.file.rsplit("/", 1)[0] == folder,
                lambda lr: lr.dir == gpu_dir(rel, roots),
            ):
                hit = [lr for lr in cands if pred(lr)]
                if hit:
                    return hit[0]
            return cands[0]

        fid = rid = gid = 0
        gates: dict[tuple[str, int], GateRow] = {}
        regs: list[RegistrationRow] = []
        for rel in sorted(results):
            fr = results[rel]
            funcs = fr.facts.get("functions") or []
            if not funcs:
                continue
            aliases = file_aliases(rel)
            d = gpu_dir(rel, roots)
            for f in funcs:
                fid += 1
                rows.append(
                    AddFunctionRow(
                        id=fid,
                        name=f["name"],
                        dir=d,
                        file=rel,
                        line=f["line"],
                        interface=f["interface"],
                    )
                )
                for c in f["calls"]:
                    rid += 1
                    lr = find_list(c["list"], rel)
                    bindings: dict[str, Any] = {}
                    if lr is None:
                        diags.append(
                            Diagnostic(
                                rel,
                                c["line"],
                                f"instance list {c['list']} not found: "
                                "registration kept without a list",
                                "warning",
                                self.name,
                            )
                        )
                    else:
                        params = [p.get("name") for p in (lr.template_params or [])]
                        for p, a in zip(params, c["args"], strict=False):
                            if p:
                                bindings[p] = _bind_value(a, aliases)
                    guards = c["guards"]
                    for g in guards:
                        if g["kind"] == "other" and not g["text"]:
                            continue
                        key = (g["file"], g["line"])
                        if key not in gates:
                            gid += 1
                            gates[key] = GateRow(
                                id=gid,
                                kind=g["kind"],
                                arch=g["arch"],
                                effect=g["op"],
                                dir=d,
                                file=g["file"],
                                line=g["line"],
                                condition=g["text"],
                                has_else=bool(g["has_else"]),
                                function=f["name"] if g["kind"] != "preprocessor" else None,
                            )
                    regs.append(
                        RegistrationRow(
                            id=rid,
                            function=f["name"],
                            function_id=fid,
                            dir=d,
                            file=rel,
                            line=c["line"],
                            list_name=c["list"],
                            list_id=lr.id if lr is not None else None,
                            args=c["args"],
                            bindings=bindings,
                            condition=" && ".join(
                                (f"!({g['text']})" if g["branch"] == "else" else g["text"])
                                for g in guards
                            ),
                            conditions=guards,
                        )
                    )
        rows.extend(regs)
        rows.extend(gates.values())
        ck_hpp, device_prop = results.get(CK_HPP), results.get(DEVICE_PROP_HPP)
        defines = ck_hpp.facts.get("defines", {}) if ck_hpp else {}
        caps = device_prop.facts.get("capabilities", {}) if device_prop else {}
        # headers holding (templated) add functions -> the sources that include them
        reg_headers = {r.file for r in regs if not r.file.endswith((".cpp", ".in"))}
        includers: dict[str, list[str]] = defaultdict(list)
        for rel, fr in results.items():
            if not rel.endswith((".cpp", ".in")):
                continue
            for inc in fr.facts.get("includes", []):
                base = inc.rsplit("/", 1)[-1]
                for h in by_base.get(base, []):
                    if h in reg_headers and (inc == h or h.endswith("/" + inc) or "/" not in inc):
                        includers[h].append(rel)
        rows.extend(availability.compute(regs, ctx, defines, caps, includers))
        return StageResult(rows=rows, diagnostics=diags)


STAGE = RegistrationsStage()

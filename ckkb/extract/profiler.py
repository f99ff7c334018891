"""Stage `ck.profiler`: ckProfiler's ops, their positional legends, code tables and quirks.

Read with tree-sitter from CK's `profiler/src/*.cpp`:

- every `REGISTER_PROFILER_OPERATION(name, description, function)`, macros such as `#define OP_NAME
  "gemm"` resolved;
- the usage text each op prints when called with the wrong arguments: the string literals of the
  `printf(...)` calls / `std::cout << ...` chains in the block that prints `arg1...` (or
  `--options`), concatenated literals and string macros joined, other operands kept as
  `{expression}`;
- the legend parsed from that text: `argN: name (code: label; ...)`, `arg8 to 13: M, N, K, ...`
  ranges expanded, continuation lines joined, `optional:` and `(default N)` honoured; enumerators of
  the file's `enum struct ...DataType` / `...Layout` attached to the code tables;
- the accepted argc values from `if(argc != 14 && argc != 16)`;
- quirks: an `if (...) {X = argv[a]; ...} else {X = argv[b]; ...}` whose branches read the same
  variables from different argv positions (gemm_universal swaps M/N and StrideA/StrideB when
  `N % 8 != 0 && M % 8 == 0`), with the condition's `argv[i] % m == v` tests kept so a command
  builder can tell whether a shape triggers it;
- the device-op interfaces each op races: the `profiler/profile_*_impl.hpp` it includes and the
  `DeviceOperationInstanceFactory<DeviceOp>` there, `using DeviceOp = ...DeviceGemm<...>` resolved.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tree_sitter as ts

from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.conditions import NodeIndex
from ckkb.extract.files import list_files
from ckkb.extract.profiler_usage import (
    literal,
    nodes,
    parse_legend,
    string_macros,
    usage_text,
)
from ckkb.kb.schema.profiler import ProfilerArgRow, ProfilerOpRow, ProfilerQuirkRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

SRC_DIR = "profiler/src"
IMPL_DIR = "profiler/include"
REGISTER = "REGISTER_PROFILER_OPERATION"
FACTORY = "DeviceOperationInstanceFactory"
# what one query over an op source finds (one query costs about a tree walk, however many types)
_SRC_TYPES = (
    "preproc_def",
    "expression_statement",
    "enum_specifier",
    "if_statement",
    "call_expression",
    "preproc_include",
    "assignment_expression",
)
_IMPL_TYPES = ("alias_declaration", "template_type")


# ----------------------------------------------------------------------------- enums, argc, quirks


def _enums(root: ts.Node, src: bytes, idx: NodeIndex | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in nodes(root, "enum_specifier", idx):
        name = n.child_by_field_name("name")
        body = n.child_by_field_name("body")
        if name is None or body is None:
            continue
        vals: list[str] = []
        nxt = 0
        for en in body.named_children:
            if en.type != "enumerator":
                continue
            v = en.child_by_field_name("value")
            if v is not None:
                try:
                    nxt = int(cpp.text(v, src), 0)
                except ValueError:
                    pass
            while len(vals) < nxt:
                vals.append("")
            en_name = en.child_by_field_name("name")
            vals.append(cpp.text(en_name, src) if en_name is not None else "")
            nxt += 1
        out[cpp.text(name, src)] = vals
    return out


def _argc_allowed(root: ts.Node, src: bytes, idx: NodeIndex | None = None) -> list[int]:
    for n in nodes(root, "if_statement", idx):
        cond = n.child_by_field_name("condition")
        if cond is None:
            continue
        t = re.sub(r"\s+", "", cpp.text(cond, src)).strip("()")
        parts = t.split("&&")
        vals: list[int] = []
        for p in parts:
            m = re.fullmatch(r"\(?argc!=(\d+)\)?", p)
            if not m:
                vals = []
                break
            vals.append(int(m.group(1)))
        if vals:
            return sorted(set(vals))
    return []


_ARGV = re.compile(r"argv\s*\[\s*(\d+)\s*\]")


def _assignments(node: ts.Node | None, src: bytes, idx: NodeIndex | None = None) -> dict[str, int]:
    out: dict[str, int] = {}
    if node is None:
        return out
    for a in (
        idx.within("assignment_expression", node)
        if idx is not None
        else cpp.walk(node, "assignment_expression")
    ):
        left = a.child_by_field_name("left")
        right = a.child_by_field_name("right")
        if left is None or right is None or left.type != "identifier":
            continue
        positions = _ARGV.findall(cpp.text(right, src))
        if len(positions) == 1:
            out[cpp.text(left, src)] = int(positions[0])
    return out


def _tests(cond: ts.Node, src: bytes) -> list[dict[str, Any]]:
    tests = []
    for b in cpp.walk(cond, "binary_expression"):
        op_node = b.child_by_field_name("operator")
        left, right = b.child_by_field_name("left"), b.child_by_field_name("right")
        if op_node is None or left is None or right is None:
            continue
        op = cpp.text(op_node, src)
        if op not in ("==", "!=", "<", ">"):
            continue
        try:
            value = int(cpp.text(right, src), 0)
        except ValueError:
            continue
        lt = cpp.text(left, src)
        m = re.fullmatch(r"(?s)(.*argv\s*\[\s*(\d+)\s*\].*?)(?:%\s*(\d+))?", lt)
        if not m:
            continue
        mod = re.search(r"%\s*(\d+)\s*$", lt)
        tests.append(
            {
                "position": int(m.group(2)),
                "mod": int(mod.group(1)) if mod else None,
                "cmp": op,
                "value": value,
            }
        )
    return tests


def _quirks(
    root: ts.Node, src: bytes, names: dict[int, str], idx: NodeIndex | None = None
) -> list[dict[str, Any]]:
    out = []
    for n in nodes(root, "if_statement", idx):
        alt = n.child_by_field_name("alternative")
        cons = n.child_by_field_name("consequence")
        cond = n.child_by_field_name("condition")
        if alt is None or cons is None or cond is None:
            continue
        then, other = _assignments(cons, src, idx), _assignments(alt, src, idx)
        common = [v for v in then if v in other and then[v] != other[v]]
        if len(common) < 2:
            continue
        pairs = sorted({tuple(sorted((then[v], other[v]))) for v in common})
        if sorted(then[v] for v in common) != sorted(other[v] for v in common):
            continue  # not a permutation of the same positions
        tests = _tests(cond, src)
        ctext = re.sub(r"\s+", " ", cpp.text(cond, src)).strip()
        if ctext.startswith("(") and ctext.endswith(")"):
            ctext = ctext[1:-1].strip()

        def nm(p: int) -> str:
            return names.get(p, f"arg{p}")

        readable = (
            " && ".join(
                f"{nm(t['position'])}{' % ' + str(t['mod']) if t['mod'] else ''} "
                f"{t['cmp']} {t['value']}"
                for t in tests
            )
            or ctext
        )
        swaps = ", ".join(f"{nm(a)}<->{nm(b)}" for a, b in pairs)
        out.append(
            {
                "kind": "swap_args",
                "condition": ctext,
                "summary": f"when {readable} the op swaps {swaps} before running, "
                "so it races (and reports) the swapped problem",
                "details": {
                    "swaps": [list(p) for p in pairs],
                    "names": [[nm(a), nm(b)] for a, b in pairs],
                    "tests": tests,
                    "combine": "||" if "||" in ctext and "&&" not in ctext else "&&",
                },
                "line": cpp.line(n),
            }
        )
    return out


# ----------------------------------------------------------------------------- registrations


def _registrations(
    root: ts.Node, src: bytes, macros: dict[str, str], idx: NodeIndex | None = None
) -> list[dict[str, Any]]:
    out = []
    for c in nodes(root, "call_expression", idx):
        fn = c.child_by_field_name("function")
        if fn is None or cpp.text(fn, src) != REGISTER:
            continue
        args = c.child_by_field_name("arguments")
        if args is None or args.named_child_count < 3:
            continue
        a = args.named_children
        name = literal(a[0], src, macros)
        desc = literal(a[1], src, macros)
        out.append(
            {
                "name": name,
                "description": desc,
                "function": cpp.text(a[2], src),
                "line": cpp.line(c),
                "raw": cpp.text(args, src),
            }
        )
    return out


def _includes(root: ts.Node, src: bytes, idx: NodeIndex | None = None) -> list[str]:
    out = []
    for inc in nodes(root, "preproc_include", idx):
        p = inc.child_by_field_name("path")
        if p is None:
            continue
        t = cpp.text(p, src).strip('"<>')
        if t.startswith("profiler/") and t.endswith("_impl.hpp"):
            out.append(f"{IMPL_DIR}/{t}")
    return out


def _interfaces(root: ts.Node, src: bytes, idx: NodeIndex | None = None) -> list[str]:
    aliases: dict[str, str] = {}
    for a in nodes(root, "alias_declaration", idx):
        name = a.child_by_field_name("name")
        typ = a.child_by_field_name("type")
        if name is not None and typ is not None:
            aliases.setdefault(cpp.text(name, src), cpp.text(typ, src))
    out: list[str] = []
    for t in nodes(root, "template_type", idx):
        name = t.child_by_field_name("name")
        if name is None or cpp.text(name, src).split("::")[-1] != FACTORY:
            continue
        args = t.child_by_field_name("arguments")
        if args is None or args.named_child_count == 0:
            continue
        arg = cpp.text(args.named_children[0], src).strip()
        arg = aliases.get(arg, arg)
        base = re.split(r"[<\s]", arg.strip(), maxsplit=1)[0].split("::")[-1]
        if base and base not in out:
            out.append(base)
    return out


# ----------------------------------------------------------------------------- the stage


class ProfilerStage:
    name = "ck.profiler"
    version = "3"
    tree = "ck"
    reads = ()
    writes = ("profiler_args", "profiler_ops", "profiler_quirks")
    combine_cost = 0.003  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        return list_files(root, SRC_DIR, (".cpp",)) + list_files(root, IMPL_DIR, ("_impl.hpp",))

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if rel.endswith(".hpp"):
            if FACTORY.encode() not in data:
                return FileResult()
            tree = cpp.parse(data)
            return FileResult(
                facts={
                    "interfaces": _interfaces(
                        tree.root_node, data, NodeIndex(tree.root_node, _IMPL_TYPES)
                    )
                }
            )
        if REGISTER.encode() not in data:
            return FileResult()
        if cpp.is_binary(data):
            return FileResult(
                diagnostics=[Diagnostic(rel, 0, "binary file, not C++", "warning", self.name)]
            )
        tree = cpp.parse(data)
        root_node = tree.root_node
        idx = NodeIndex(root_node, _SRC_TYPES)
        diags = []
        macros = string_macros(root_node, data, idx)
        regs = _registrations(root_node, data, macros, idx)
        if not regs:
            if re.search(rb"^\s*" + REGISTER.encode() + rb"\s*\(", data, re.M):
                diags.append(
                    Diagnostic(
                        rel,
                        0,
                        f"{REGISTER}(...) found but not readable (malformed C++?)",
                        "warning",
                        self.name,
                    )
                )
            return FileResult(diagnostics=diags)
        usage, usage_line = usage_text(root_node, data, macros, idx)
        legend = parse_legend(usage)
        enums = _enums(root_node, data, idx)
        argc = _argc_allowed(root_node, data, idx)
        names = {e["position"]: e["name"] for e in legend if e["position"] is not None}
        quirks = _quirks(root_node, data, names, idx)
        if usage_line is not None:
            # tree-sitter recovery inside the usage block means the legend may be incomplete
            # (recovery elsewhere in CK's template-heavy code is common and harmless for this stage)
            span = range(usage_line, usage_line + usage.count("\n") + 3)
            bad = sorted(
                {
                    cpp.line(n)
                    for n in _error_nodes(root_node)
                    if cpp.line(n) in span
                    and not (
                        n.parent is not None and n.parent.type == "concatenated_string"
                    )  # "a" MACRO "b": resolved above
                }
            )
            for ln in bad[:3]:
                diags.append(
                    Diagnostic(
                        rel,
                        ln,
                        "C++ not fully parsed inside the usage text; the legend may be incomplete",
                        "warning",
                        self.name,
                    )
                )
        return FileResult(
            diagnostics=diags,
            facts={
                "regs": regs,
                "usage": usage,
                "usage_line": usage_line,
                "legend": legend,
                "enums": enums,
                "argc": argc,
                "quirks": quirks,
                "includes": _includes(root_node, data, idx),
            },
        )

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        rows: list[Any] = []
        diags: list[Diagnostic] = []
        interfaces = {
            rel: fr.facts.get("interfaces", [])
            for rel, fr in results.items()
            if rel.endswith(".hpp")
        }
        seen: dict[str, str] = {}
        for rel in sorted(results):
            f = results[rel].facts
            if "regs" not in f:
                continue
            for reg in f["regs"]:
                name = reg["name"]
                if not name:
                    diags.append(
                        Diagnostic(
                            rel,
                            reg["line"],
                            f"op name of {REGISTER}({reg['raw']}) is "
                            "not a string literal or string macro",
                            "warning",
                            self.name,
                        )
                    )
                    continue
                if name in seen:
                    diags.append(
                        Diagnostic(
                            rel,
                            reg["line"],
                            f"op {name!r} registered twice (also "
                            f"in {seen[name]}); the first is kept",
                            "warning",
                            self.name,
                        )
                    )
                    continue
                seen[name] = rel
                legend = f["legend"]
                positional = [e for e in legend if e["position"] is not None]
                ifaces: list[str] = []
                for h in f["includes"]:
                    for i in interfaces.get(h, []):
                        if i not in ifaces:
                            ifaces.append(i)
                kind = "positional" if positional else ("options" if legend else "none")
                rows.append(
                    ProfilerOpRow(
                        name=name,
                        description=reg["description"] or "",
                        file=rel,
                        line=reg["line"],
                        function=reg["function"],
                        gemm_family="gemm" in name,
                        usage=f["usage"],
                        usage_line=f["usage_line"],
                        legend_kind=kind,
                        positional_args=max((e["position"] for e in positional), default=0),
                        argc_allowed=f["argc"],
                        impl_headers=f["includes"],
                        interfaces=ifaces,
                    )
                )
                if not legend:
                    diags.append(
                        Diagnostic(
                            rel,
                            reg["line"],
                            f"op {name!r}: no usage legend found",
                            "warning",
                            self.name,
                        )
                    )
                min_argc = min(f["argc"]) if f["argc"] else None
                for e in legend:
                    enum = _match_enum(e, f["enums"])
                    optional = e["optional"] or (
                        min_argc is not None
                        and e["position"] is not None
                        and e["position"] >= min_argc
                    )
                    rows.append(
                        ProfilerArgRow(
                            op=name,
                            position=e["position"],
                            name=e["name"],
                            text=e["text"],
                            codes=e["codes"],
                            enum=enum,
                            optional=optional,
                            default=e["default"],
                            kind=e["kind"],
                            line=f["usage_line"] or 0,
                        )
                    )
                for q in f["quirks"]:
                    rows.append(
                        ProfilerQuirkRow(
                            op=name,
                            kind=q["kind"],
                            condition=q["condition"],
                            summary=q["summary"],
                            details=q["details"],
                            file=rel,
                            line=q["line"],
                        )
                    )
        return StageResult(rows=rows, diagnostics=diags)


def _error_nodes(root: ts.Node) -> list[ts.Node]:
    """ERROR and MISSING nodes under root. Only subtrees whose `has_error` is set are entered (it
    marks every ancestor of an ERROR or MISSING node, and those nodes themselves)."""
    out = []
    stack = [root] if root.has_error else []
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            out.append(n)
        stack.extend(c for c in n.children if c.has_error)
    return out


def _match_enum(entry: dict[str, Any], enums: dict[str, list[str]]) -> dict[str, str]:
    codes = entry["codes"]
    if not codes:
        return {}
    low = entry["name"].lower()
    want = (
        "layout"
        if "layout" in low
        else ("datatype" if "data type" in low and "index" not in low else None)
    )
    if want is None:
        return {}
    for ename, vals in enums.items():
        if want in ename.lower() and len([v for v in vals if v]) == len(codes):
            return {str(i): v for i, v in enumerate(vals) if v and str(i) in codes}
    return {}


STAGE = ProfilerStage()

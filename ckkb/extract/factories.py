"""Stage `ck.factories`: which add functions serve
which device-op interface, data types and layouts.

Reads the factory headers where `#include "ck/library/tensor_operation_instance/gpu/..."` leads
by the tree's own include directories (`ckkb.extract.include_dirs`; CK's
`library/include/ck/library/tensor_operation_instance/gpu/`): `*.hpp` and the `*.inc` declaration
files they include, subdirectories too. Two kinds of rows:

- `call`: an `add_*_instances(op_ptrs)` call inside a
  `DeviceOperationInstanceFactory<Interface<ALayout, ..., ADataType, ...>>` specialisation. Its
  data types and layouts are the values the enclosing `if constexpr(is_same_v<ADataType, bhalf_t>
  && is_same_v<ALayout, Row> ...)` chain binds to the interface's parameters, in the interface's
  parameter order (a parameter left unbound keeps its name);
- `declaration`: a declaration `void add_*_instances(std::vector<std::unique_ptr<Interface<Row, Col,
  Row, BF16, ...>>>&)`: data types and layouts are the interface's arguments as written.

Each row carries the `#if`/`#ifdef` sections around it (outermost first; `#else of X` for an else
branch).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import tree_sitter as ts

from ckkb.diagnostics import Diagnostic
from ckkb.extract.conditions import (
    DirectiveStack,
    NodeIndex,
    callee,
    directives,
    field_text,
    strip_ws,
)
from ckkb.extract.cpp import error_lines, function_declarator, is_binary, line, parse, text, walk
from ckkb.extract.include_dirs import factory_files
from ckkb.kb.schema.ck_registrations import FactoryRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

_ADD_FN = re.compile(r"^add_\w*instances?\w*$")
# the registration helper every add function calls: not a factory
ADD_CALL = "add_device_operation_instances"
# A name that can be a factory row (a declared or called add function other than the helper). A file
# without one (an instance header that only calls the helper) has nothing to read: it is not parsed.
_FACTORY_NAME = re.compile(rb"\badd_(?!device_operation_instances?\b)\w*instance")
_LAYOUT_WORDS = {"Row", "Col", "RowMajor", "ColumnMajor"}
_DTYPE_WORDS = {
    "F16",
    "BF16",
    "F32",
    "F64",
    "F8",
    "BF8",
    "I8",
    "I32",
    "I4",
    "F4",
    "F6",
    "BF6",
    "half_t",
    "bhalf_t",
    "float",
    "double",
    "int8_t",
    "int32_t",
    "f8_t",
    "bf8_t",
    "pk_i4_t",
    "f4x2_pk_t",
    "f6x32_pk_t",
    "bf6x32_pk_t",
    "e8m0_bexp_t",
    "tf32_t",
    "int4_t",
    "f8_fnuz_t",
    "bf8_fnuz_t",
    "f8_ocp_t",
    "bf8_ocp_t",
}


_TEMPLATE_ARGS = re.compile(r"<.*")
_LAYOUT_NAME = re.compile(r"G?N[DHW]*[CGK]+[DHW]*[CGK]*|G?K[ZYX]*[CG]+[ZYX]*|N[A-Z]+|G[A-Z]+")


# Process-wide memo of a pure function of its arguments (why module state): a factory file repeats
# the same few type names thousands of times.
@lru_cache(maxsize=4096)
def _last(name: str) -> str:
    return (_TEMPLATE_ARGS.sub("", name) if "<" in name else name).rsplit("::", 1)[-1].strip()


# Process-wide memo of a pure function of its arguments (why module state): asked per
# template argument.
@lru_cache(maxsize=4096)
def _is_layout(v: str, param: str | None = None) -> bool:
    if param is not None:
        return "Layout" in param or param.endswith("Lay")
    w = _last(v)
    return w in _LAYOUT_WORDS or bool(_LAYOUT_NAME.fullmatch(w))


# Process-wide memo of a pure function of its arguments (why module state): asked per
# template argument.
@lru_cache(maxsize=4096)
def _is_dtype(v: str, param: str | None = None) -> bool:
    if param is not None:
        return "DataType" in param or (param.endswith(("Type", "Type_")) and "Layout" not in param)
    w = _last(v)
    return w in _DTYPE_WORDS or w.endswith("_t")


def _template_args(node: ts.Node, src: bytes) -> tuple[str, list[str]]:
    """A (possibly qualified) template type -> (name, [argument texts])."""
    while node.type in ("qualified_identifier", "type_descriptor"):
        inner = node.child_by_field_name("name") or node.child_by_field_name("type")
        if inner is None:
            break
        node = inner
    if node.type not in ("template_type", "template_function"):
        return _last(text(node, src)), []
    args = node.child_by_field_name("arguments")
    vals = (
        [strip_ws(text(c, src)) for c in args.named_children if c.type != "comment"]
        if args is not None
        else []
    )
    name = node.child_by_field_name("name")
    return (text(name, src) if name is not None else ""), vals


def _same_bindings(cond: ts.Node, src: bytes) -> dict[str, str]:
    """`is_same_v<ADataType, bhalf_t> && is_same_v<ALayout, Row>`
    -> {ADataType: bhalf_t, ALayout: Row}."""
    out: dict[str, str] = {}
    for n in walk(cond, ("template_function", "template_type")):
        name_node = n.child_by_field_name("name")
        if name_node is None:
            continue
        nm = text(name_node, src)
        if nm not in ("is_same_v", "is_same"):
            continue
        args = n.child_by_field_name("arguments")
        vals = (
            [strip_ws(text(c, src)) for c in args.named_children if c.type != "comment"]
            if args is not None
            else []
        )
        if len(vals) == 2:
            out.setdefault(vals[0], vals[1])
    return out


def _if_bindings(
    call: ts.Node,
    stop: ts.Node,
    src: bytes,
    memo: dict[tuple[int, int], dict[str, str]] | None = None,
) -> dict[str, str]:
    """Bindings of every enclosing `if constexpr` whose then-branch holds `call` (inner wins);
    `memo` keeps each condition's _same_bindings (the calls of one branch share their ifs)."""
    out: dict[str, str] = {}
    if memo is None:
        memo = {}
    child, node = call, call.parent
    while node is not None and node != stop:
        if node.type == "if_statement":
            alt = node.child_by_field_name("alternative")
            cond = node.child_by_field_name("condition")
            in_else = (
                alt is not None
                and alt.start_byte <= child.start_byte
                and child.end_byte <= alt.end_byte
            )
            if cond is not None and not in_else:
                key = (cond.start_byte, cond.end_byte)
                sb = memo.get(key)
                if sb is None:
                    sb = memo[key] = _same_bindings(cond, src)
                for k, v in sb.items():
                    out.setdefault(k, v)
        child, node = node, node.parent
    return out


def _guards(
    stacks: list[DirectiveStack], sections: dict[int, list[tuple[int, str]]], ln: int
) -> list[str]:
    out = []
    for dline, txt, section in stacks[ln] if ln < len(stacks) else ():
        branches = sections.get(dline) or [(dline, txt)]
        if section == 0:
            out.append(txt)
        else:
            k = min(section, len(branches) - 1)
            btxt = branches[k][1]
            if btxt.lstrip("# ").startswith("else"):
                out.append(f"#else of {txt}")
            else:
                out.append(btxt)
    return out


_INDEX_TYPES = (
    "struct_specifier",
    "class_specifier",
    "call_expression",
    "declaration",
    "field_declaration",
    "template_type",
)


def extract_file(rel: str, data: bytes) -> FileResult:
    res = FileResult()
    if is_binary(data):
        res.diagnostics.append(
            Diagnostic(rel, 0, "binary data, not C++: skipped", "warning", "ck.factories")
        )
        return res
    if b"add_" not in data or not _FACTORY_NAME.search(data):
        return res
    tree = parse(data)
    stacks, sections = directives(data)
    idx = NodeIndex(tree.root_node, _INDEX_TYPES)
    memo: dict[tuple[int, int], dict[str, str]] = {}
    rows: list[FactoryRow] = []
    seen_calls: set[int] = set()
    # calls inside factory specialisations
    for spec in idx.merged(("struct_specifier", "class_specifier")):
        name = spec.child_by_field_name("name")
        if (
            name is None
            or name.type != "template_type"
            or "InstanceFactory" not in field_text(name, "name", data)
        ):
            continue
        args = name.child_by_field_name("arguments")
        if args is None or not args.named_children:
            continue
        iface, iargs = _template_args(args.named_children[0], data)
        body = spec.child_by_field_name("body")
        if body is None:
            continue
        for call in idx.within("call_expression", body):
            fn = callee(call, data)
            if not _ADD_FN.match(fn) or fn == ADD_CALL:
                continue
            seen_calls.add(call.start_byte)
            b = _if_bindings(call, body, data, memo)
            vals = [(p, b.get(p, p)) for p in iargs]
            rows.append(
                FactoryRow(
                    file=rel,
                    line=line(call),
                    function=fn,
                    interface=_last(iface),
                    kind="call",
                    dtypes=[v for p, v in vals if _is_dtype(v, p)],
                    layouts=[v for p, v in vals if _is_layout(v, p)],
                    guards=_guards(stacks, sections, line(call)),
                )
            )
    # declarations: void add_x_instances(std::vector<std::unique_ptr<Iface<...>>>&);
    for decl in idx.merged(("declaration", "field_declaration")):
        fd = function_declarator(decl)
        if fd is None:
            continue
        nm = fd.child_by_field_name("declarator")
        fname = _last(text(nm, data)) if nm is not None else ""
        if not _ADD_FN.match(fname) or fname == ADD_CALL:
            continue
        iface, iargs = "", []
        for n in idx.within("template_type", fd):
            tn = n.child_by_field_name("name")
            if tn is not None and text(tn, data) == "unique_ptr":
                a = n.child_by_field_name("arguments")
                if a is not None and a.named_children:
                    iface, iargs = _template_args(a.named_children[0], data)
                break
        rows.append(
            FactoryRow(
                file=rel,
                line=line(decl),
                function=fname,
                interface=_last(iface),
                kind="declaration",
                dtypes=[v for v in iargs if _is_dtype(v)],
                layouts=[v for v in iargs if _is_layout(v)],
                guards=_guards(stacks, sections, line(decl)),
            )
        )
    errs = _outside_extern_templates(error_lines(tree), data)
    if errs and not rows:
        res.diagnostics.append(
            Diagnostic(
                rel,
                errs[0],
                "malformed C++ (parse errors at line(s) "
                f"{', '.join(map(str, errs[:5]))}); no factory read",
                "warning",
                "ck.factories",
            )
        )
    res.rows = rows
    return res


_EXTERN_TEMPLATE = re.compile(rb"^[ \t]*extern\s+template\b[^;]*;", re.M)


def _outside_extern_templates(errs: list[int], data: bytes) -> list[int]:
    """Error lines not inside an `extern template ...;` declaration. Those are valid C++ (an
    explicit instantiation declaration, CK's reduce headers hold hundreds) that tree-sitter-cpp
    does not parse; they declare no factory, so nothing is lost by skipping them."""
    if not errs or b"extern" not in data:
        return errs
    spans = []
    for m in _EXTERN_TEMPLATE.finditer(data):
        first = data.count(b"\n", 0, m.start()) + 1
        spans.append((first, first + m.group(0).count(b"\n")))
    return [e for e in errs if not any(a <= e <= b for a, b in spans)]


class FactoriesStage:
    name = "ck.factories"
    version = "2"
    tree = "ck"
    reads = ()
    writes = ("factories",)
    combine_cost = 0.0  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        return factory_files(root, (".hpp", ".inc"))

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        return extract_file(rel, data)

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        rows: list[Any] = []
        for rel in sorted(results):
            rows.extend(results[rel].rows)
        return StageResult(rows=rows)


STAGE = FactoriesStage()

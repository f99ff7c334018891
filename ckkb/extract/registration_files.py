"""Reading one file for stage `ck.registrations` (in a worker): add functions, the
`add_device_operation_instances` calls in them with their guard chains, the file's aliases and
includes; `ck.hpp`'s defines and `device_prop.hpp`'s capability functions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import tree_sitter as ts

from ckkb.diagnostics import Diagnostic
from ckkb.extract.conditions import (
    Directives,
    DirectiveStack,
    NodeIndex,
    callee,
    classify,
    device_effect,
    directives,
    expr_tree,
    field_text,
    preprocessor_guards,
    strip_ws,
)
from ckkb.extract.cpp import error_lines, function_declarator, is_binary, line, parse, text, walk
from ckkb.extract.instance_roots import dir_under
from ckkb.kb.stages import FileResult
from ckkb.sources import CK_INSTANCE_DIR

CK_HPP = "include/ck/ck.hpp"
DEVICE_PROP_HPP = "include/ck/host_utility/device_prop.hpp"
SUFFIXES = (".cpp", ".hpp", ".in")
ADD_CALL = "add_device_operation_instances"
_ADD_CALL_B = ADD_CALL.encode()
_ADD_FN = re.compile(r"^add_\w*instances?\w*$")
_WRAPPERS = ("filter_tuple",)
# cheap pre-check for an add function definition: `\bvoid\s+add_\w*instance`, searched from its
# literal `void` (fast) with the word boundary before it checked by _first_add_def
_ADD_DEF = re.compile(rb"void\s+add_\w*instance")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# one-line alias declarations
# `^[ \t]*(?:using\s+\w+\s*=|static\s+constexpr\s+auto\s+\w+\s*=)[^;{}]{0,400};` (multiline): each
# alternative searched from its literal, the line start checked by _alias_decls
_ALIAS_USING = re.compile(rb"using\s+\w+\s*=[^;{}]{0,400};")
_ALIAS_STATIC = re.compile(rb"static\s+constexpr\s+auto\s+\w+\s*=[^;{}]{0,400};")
_INDEX_TYPES = (
    "function_definition",
    "compound_statement",
    "call_expression",
    "alias_declaration",
    "declaration",
    "template_type",
)


def gpu_dir(rel: str, roots: tuple[str, ...] = (CK_INSTANCE_DIR,)) -> str:
    """The directory right under gpu/, or under another instance-library root of `roots`
    ('' for a file directly in a root)."""
    return dir_under(rel, roots)


# ---------------------------------------------------------------- expressions


# ---------------------------------------------------------------- per file


_PREPROC_IF = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef")


def _field_is(parent: ts.Node, child: ts.Node, name: str) -> bool:
    f = parent.child_by_field_name(name)
    return f is not None and f.start_byte == child.start_byte and f.end_byte == child.end_byte


def guard_chain(call: ts.Node, src: bytes, rel: str) -> list[dict[str, Any]]:
    """C++ `if` guards around `call`, outermost first
    (preprocessor guards: see directive_stacks)."""
    out: list[dict[str, Any]] = []
    child, node = call, call.parent
    while node is not None:
        if node.type == "if_statement":
            alt = node.child_by_field_name("alternative")
            cond = node.child_by_field_name("condition")
            in_else = (
                alt is not None
                and alt.start_byte <= child.start_byte
                and child.end_byte <= alt.end_byte
            )
            in_cond = (
                cond is not None
                and cond.start_byte <= child.start_byte
                and child.end_byte <= cond.end_byte
            )
            if not in_cond:
                tree = expr_tree(cond, src)
                ctext = strip_ws(text(cond, src)) if cond is not None else ""
                if ctext.startswith("constexpr"):
                    ctext = ctext[len("constexpr") :].strip()
                if ctext.startswith("(") and ctext.endswith(")"):
                    ctext = ctext[1:-1].strip()
                kind = classify(tree, False)
                effect, arch = device_effect(tree) if kind == "device_name" else (None, None)
                out.append(
                    {
                        "kind": kind,
                        "text": ctext,
                        "branch": "else" if in_else else "then",
                        "file": rel,
                        "line": line(node),
                        "arch": arch,
                        "op": effect,
                        "expr": tree,
                        "has_else": alt is not None,
                    }
                )
        child, node = node, node.parent
    out.reverse()
    return out


def _function_name(fn: ts.Node, src: bytes) -> str | None:
    decl = function_declarator(fn)
    if decl is None:
        return None
    name = decl.child_by_field_name("declarator")
    return text(name, src).rsplit("::", 1)[-1] if name is not None else None


def _interface(fn: ts.Node, src: bytes, idx: NodeIndex | None = None) -> str:
    """`std::vector<std::unique_ptr<DeviceGemmV2<...>>>& instances` -> `DeviceGemmV2<...>`."""
    decl = function_declarator(fn)
    params = decl.child_by_field_name("parameters") if decl is not None else None
    if params is None:
        return ""
    for n in (
        idx.within("template_type", params) if idx is not None else walk(params, "template_type")
    ):
        name = n.child_by_field_name("name")
        if name is not None and text(name, src) == "unique_ptr":
            args = n.child_by_field_name("arguments")
            if args is not None and args.named_children:
                return strip_ws(text(args.named_children[0], src))
    return ""


def _last_name(node: ts.Node) -> ts.Node:
    """`a::b::C<...>` -> the node of `C<...>`: a qualified identifier's innermost name."""
    while node.type == "qualified_identifier":
        name = node.child_by_field_name("name")
        if name is None:
            break
        node = name
    return node


def _list_arg(call: ts.Node, src: bytes) -> tuple[str, list[str]] | None:
    args = call.child_by_field_name("arguments")
    if args is None:
        return None
    named = [c for c in args.named_children if c.type != "comment"]
    if len(named) < 2:
        return None
    a = named[-1]
    ty = a.child_by_field_name("type") if a.type == "compound_literal_expression" else a
    if ty is None:
        return None
    ty = _last_name(ty)
    if ty.type == "template_type":
        name = field_text(ty, "name", src)
        targs = ty.child_by_field_name("arguments")
        if name.startswith(_WRAPPERS) and targs is not None and targs.named_children:
            # ck::util::filter_tuple_by_modulo_t<LIST<...>, Shards, ShardIndex>: a slice of LIST
            inner = targs.named_children[0]
            inner = _last_name(inner.child_by_field_name("type") or inner)
            if inner.type in ("template_type", "type_identifier"):
                ty = inner
                if ty.type == "type_identifier":
                    return text(ty, src), []
                name = field_text(ty, "name", src)
                targs = ty.child_by_field_name("arguments")
        vals = (
            [strip_ws(text(c, src)) for c in targs.named_children if c.type != "comment"]
            if targs is not None
            else []
        )
        return name, vals
    name = strip_ws(text(ty, src))
    name = re.sub(r"\{\s*\}$", "", name).strip()
    return name.rsplit("::", 1)[-1], []


def _aliases(tree: ts.Tree, src: bytes, idx: NodeIndex | None = None) -> dict[str, str]:
    """File-level `using X = Y;` and `static constexpr auto X = Y;` (both give X's value)."""
    out: dict[str, str] = {}
    if idx is None:
        idx = NodeIndex(tree.root_node, ("alias_declaration", "declaration"))
    for n in idx.merged(("alias_declaration", "declaration")):
        if n.type == "alias_declaration":
            name = n.child_by_field_name("name")
            ty = n.child_by_field_name("type")
            if name is not None and ty is not None:
                v = strip_ws(text(ty, src))
                if not v.startswith("std::tuple"):
                    out[text(name, src)] = v
        else:
            decl = n.child_by_field_name("declarator")
            if decl is not None and decl.type == "init_declarator":
                name = decl.child_by_field_name("declarator")
                val = decl.child_by_field_name("value")
                if (
                    name is not None
                    and val is not None
                    and name.type == "identifier"
                    and len(text(val, src)) < 200
                ):
                    out[text(name, src)] = strip_ws(text(val, src))
    return out


def _includes(tree: ts.Tree, src: bytes) -> list[str]:
    out = []
    for n in walk(tree.root_node, "preproc_include"):
        p = n.child_by_field_name("path")
        if p is not None:
            out.append(text(p, src).strip('"<>'))
    return out


def _function_units(
    tree: ts.Tree, src: bytes, idx: NodeIndex
) -> Iterator[tuple[str, int, str, ts.Node]]:
    """(name, line, interface, body) of every add function definition.

    tree-sitter sometimes reads a long `std::vector<std::unique_ptr<Op<..., ck::Tuple<Row>, ...>>>&`
    parameter as an expression, which turns the definition into a `declaration` followed by a
    free-standing `{ ... }` block. Such a pair is recognised too: the block is the body, the add
    function name is the identifier in the declaration.
    """
    seen: set[int] = set()
    for fn in idx["function_definition"]:
        name = _function_name(fn, src)
        body = fn.child_by_field_name("body")
        if not name or not _ADD_FN.match(name) or name == ADD_CALL or body is None:
            continue
        seen.add(body.start_byte)
        yield name, line(fn), _interface(fn, src, idx), body
    for blk in idx["compound_statement"]:
        parent = blk.parent
        if (
            blk.start_byte in seen
            or parent is None
            or parent.type
            not in (
                "declaration_list",
                "translation_unit",
                "preproc_if",
                "preproc_ifdef",
                "preproc_else",
            )
        ):
            continue
        prev = blk.prev_named_sibling
        while prev is not None and prev.type == "comment":
            prev = prev.prev_named_sibling
        if prev is None or prev.type not in ("declaration", "ERROR", "expression_statement"):
            continue
        name = next(
            (
                text(n, src)
                for n in walk(prev, "identifier")
                if _ADD_FN.match(text(n, src)) and text(n, src) != ADD_CALL
            ),
            None,
        )
        if name is None:
            continue
        decl_text = strip_ws(text(prev, src))
        m = re.search(r"unique_ptr\s*<\s*(.*?)\s*>\s*>\s*&", decl_text)
        yield name, line(prev), m.group(1) if m else "", blk


def _collect(
    tree: ts.Tree,
    data: bytes,
    rel: str,
    line_offset: int,
    res: FileResult,
    pp: Directives,
    idx: NodeIndex | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """Add functions in `tree` (parsed from `data`, which starts at file line line_offset + 1);
    `pp` is the whole file's (directive_stacks, directive_sections); `idx` the tree's NodeIndex of
    _INDEX_TYPES."""
    stacks, sections = pp
    if idx is None:
        idx = NodeIndex(tree.root_node, _INDEX_TYPES)
    funcs: list[dict[str, Any]] = []
    covered: list[tuple[int, int]] = []
    for name, fn_line, iface, body in _function_units(tree, data, idx):
        covered.append((body.start_byte, body.end_byte))
        calls = []
        for call in idx.within("call_expression", body):
            if callee(call, data) != ADD_CALL:
                continue
            la = _list_arg(call, data)
            cl = line(call) + line_offset
            if la is None:
                res.diagnostics.append(
                    Diagnostic(
                        rel,
                        cl,
                        f"{ADD_CALL}(...) without a tuple argument: not recorded",
                        "warning",
                        "ck.registrations",
                    )
                )
                continue
            calls.append(
                {
                    "line": cl,
                    "list": la[0],
                    "args": la[1],
                    "guards": _guards(call, data, rel, line_offset, stacks, sections),
                }
            )
        funcs.append(
            {
                "name": name,
                "line": fn_line + line_offset,
                "interface": iface,
                "calls": calls,
                "span": (
                    body.start_point[0] + 1 + line_offset,
                    body.end_point[0] + 1 + line_offset,
                ),
            }
        )
    return funcs, covered


def _guards(
    call: ts.Node,
    data: bytes,
    rel: str,
    line_offset: int,
    stacks: list[DirectiveStack],
    sections: dict[int, list[tuple[int, str]]],
) -> list[dict[str, Any]]:
    guards = guard_chain(call, data, rel)
    for g in guards:
        g["line"] += line_offset
    cl = line(call) + line_offset
    guards += preprocessor_guards(stacks[cl] if cl < len(stacks) else (), sections, rel)
    return sorted(guards, key=lambda g: g["line"])


# `^\s*#\s*include\s*[<"]([^>"]+)[>"]` (multiline), searched from its `#`; _includes_of checks that
# only blanks stand before it on its line
_INCLUDE = re.compile(rb'#\s*include\s*[<"]([^>"]+)[>"]')


def _includes_of(data: bytes) -> list[str]:
    out = []
    pos = 0
    while (m := _INCLUDE.search(data, pos)) is not None:
        s = m.start()
        if data[data.rfind(b"\n", 0, s) + 1 : s].strip():
            pos = s + 1  # not at the start of a line: a later match may begin inside this one
            continue
        out.append(m.group(1).decode("utf-8", "replace"))
        pos = m.end()
    return out


def _first_add_def(data: bytes) -> int:
    """Offset of the first `void` + blanks + `add_...instance` that starts a word, -1 when none."""
    pos = 0
    while (m := _ADD_DEF.search(data, pos)) is not None:
        s = m.start()
        if s == 0 or data[s - 1] not in _WORD_BYTES:
            return s
        pos = s + 1
    return -1


def _alias_decls(data: bytes) -> list[bytes]:
    """The one-line alias declarations, each from the start of its line, in order."""
    cands = []
    for rx in (_ALIAS_USING, _ALIAS_STATIC):
        pos = 0
        while (m := rx.search(data, pos)) is not None:
            cands.append(m)
            pos = m.start() + 1
    cands.sort(key=lambda m: m.start())
    out = []
    pos = 0
    for m in cands:
        s = m.start()
        if s < pos:
            continue  # inside the declaration taken before
        ls = data.rfind(b"\n", 0, s) + 1
        if data[ls:s].strip(b" \t"):
            continue
        out.append(data[ls : m.end()])
        pos = m.end()
    return out


def _line_aliases(data: bytes) -> dict[str, str]:
    """`using X = Y;` / `static constexpr auto X = Y;`
    declarations (no braces), parsed by tree-sitter."""
    if b"using" not in data and b"constexpr" not in data:
        return {}
    decls = b"\n".join(_alias_decls(data))
    return _aliases(parse(decls), decls) if decls else {}


def extract_file(rel: str, data: bytes) -> FileResult:
    res = FileResult()
    if is_binary(data):
        res.diagnostics.append(
            Diagnostic(rel, 0, "binary data, not C++: skipped", "warning", "ck.registrations")
        )
        return res
    includes = _includes_of(data)
    first = _first_add_def(data)
    if first < 0 and _ADD_CALL_B not in data:
        # no registration here: only the file's one-line aliases matter (for bindings), so parse
        # just those declarations instead of the (often large) instance lists around them
        res.facts = {"functions": [], "aliases": _line_aliases(data), "includes": includes}
        return res
    # Parse from the first add function on: what comes before is instance lists and aliases
    # (read by the instances stage and by _line_aliases); #if sections come from the whole file.
    off = data.rfind(b"\n", 0, first) + 1 if first >= 0 else 0
    base = data.count(b"\n", 0, off)
    body_data = data[off:]
    pp = directives(data)
    tree = parse(body_data)
    idx = NodeIndex(tree.root_node, _INDEX_TYPES)
    funcs, covered = _collect(tree, body_data, rel, base, res, pp, idx)
    # A construct tree-sitter cannot read above a function (e.g. an `#if` inside a tuple that
    # starts with a comma) can swallow the definition into an ERROR node. Re-read such a function
    # from the start of its own line.
    stray = [
        c
        for c in idx["call_expression"]
        if callee(c, body_data) == ADD_CALL and not any(a <= c.start_byte < b for a, b in covered)
    ]
    if stray:
        known = {f["name"] for f in funcs}
        for ident in walk(tree.root_node, "identifier"):
            name = text(ident, body_data)
            if (
                name in known
                or not _ADD_FN.match(name)
                or name == ADD_CALL
                or ident.start_byte > stray[-1].start_byte
            ):
                continue
            if ident.parent is None or ident.parent.type not in (
                "ERROR",
                "function_declarator",
                "init_declarator",
                "declaration",
            ):
                continue
            cut = body_data.rfind(b"\n", 0, ident.start_byte) + 1
            more, _ = _collect(
                parse(body_data[cut:]), body_data[cut:], rel, base + ident.start_point[0], res, pp
            )
            for f in more:
                f["span"] = None  # errors here come from the cut, not from the source
                if f["name"] == name and name not in known:
                    known.add(name)
                    funcs.append(f)
        # Still unplaced (the function itself is damaged): attribute each call to the add function
        # named last before it, best effort; the malformed-C++ warning below says where.
        placed = {c["line"] for f in funcs for c in f["calls"]}
        names = [
            (n.start_byte, text(n, body_data), line(n) + base)
            for n in walk(tree.root_node, "identifier")
            if _ADD_FN.match(text(n, body_data)) and text(n, body_data) != ADD_CALL
        ]
        for c in stray:
            owner = [x for x in names if x[0] < c.start_byte]
            la = _list_arg(c, body_data)
            if not owner or la is None or line(c) + base in placed:
                continue
            _, name, nline = owner[-1]
            fn = next((f for f in funcs if f["name"] == name), None)
            if fn is None:
                fn = {"name": name, "line": nline, "interface": "", "calls": []}
                funcs.append(fn)
            fn["span"] = (1, 1 << 30)  # damaged: every parse error in the file may matter
            fn["calls"].append(
                {
                    "line": line(c) + base,
                    "list": la[0],
                    "args": la[1],
                    "guards": _guards(c, body_data, rel, base, *pp),
                }
            )
    if funcs or _ADD_CALL_B in data:
        # Errors inside an add function's body may hide calls; a misread parameter list does not.
        spans = [sp for sp in (f.pop("span") for f in funcs) if sp]
        errs = [e + base for e in error_lines(tree)]
        errs = [e for e in errs if not funcs or any(a <= e <= b for a, b in spans)]
        if (
            funcs and errs
        ):  # a lone closing brace: tree-sitter nested an #if wrongly, the directive scan did not
            src_lines = data.split(b"\n")
            errs = [
                e
                for e in errs
                if e > len(src_lines) or src_lines[e - 1].strip() not in (b"}", b"};")
            ]
        if errs:
            res.diagnostics.append(
                Diagnostic(
                    rel,
                    errs[0],
                    "malformed C++ (tree-sitter recovered at "
                    f"line(s) {', '.join(map(str, errs[:5]))}); "
                    "registrations near these lines may be incomplete",
                    "warning",
                    "ck.registrations",
                )
            )
    aliases = _line_aliases(data)
    aliases.update(_aliases(tree, body_data, idx))
    res.facts = {"functions": funcs, "aliases": aliases, "includes": includes}
    return res


def extract_defines(rel: str, data: bytes) -> FileResult:
    """ck.hpp: `#define NAME VALUE` at file level, or the default branch of `#ifndef NAME`."""
    tree = parse(data)
    out: dict[str, tuple[str, int]] = {}
    for n in walk(tree.root_node, "preproc_def"):
        name = n.child_by_field_name("name")
        val = n.child_by_field_name("value")
        if name is None:
            continue
        nm = text(name, data)
        anc, ok = n.parent, True
        while anc is not None:
            if anc.type in _PREPROC_IF or anc.type in ("preproc_else",):
                guard = text(anc, data).split("\n", 1)[0]
                if not re.match(rf"#\s*ifndef\s+{re.escape(nm)}\b", guard):
                    ok = False
                    break
            anc = anc.parent
        if ok:
            out[nm] = (strip_ws(text(val, data)) if val is not None else "1", line(n))
    return FileResult(facts={"defines": out})


def extract_capabilities(rel: str, data: bytes) -> FileResult:
    """device_prop.hpp: `bool is_X() { return <device-name compares / is_Y()>; }`
    -> expression trees."""
    tree = parse(data)
    out: dict[str, Any] = {}
    for fn in walk(tree.root_node, "function_definition"):
        name = _function_name(fn, data)
        body = fn.child_by_field_name("body")
        if (
            not name
            or body is None
            or fn.parent is None
            or fn.parent.type == "template_declaration"
        ):
            continue
        stmts = [c for c in body.named_children if c.type != "comment"]
        if len(stmts) == 1 and stmts[0].type == "return_statement" and stmts[0].named_children:
            out[name] = {"expr": expr_tree(stmts[0].named_children[0], data), "line": line(fn)}
    return FileResult(facts={"capabilities": out})

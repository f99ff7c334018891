"""Stage `ck.instances`, per file (in a worker): one C++ file -> its instance lists and aliases.

Reads with tree-sitter: the file's aliases (`using BF16 = bhalf_t;`,
`template <index_t... Is> using S = Sequence<Is...>;`, `static constexpr auto GemmDefault = ...;`),
its `#include`s, and every tuple alias with its template parameters, the comment block above it
and its entries (active ones and the ones commented out inside the tuple, each with its nearest
reason comment). Arguments are kept as small expression trees (plain tuples, picklable: see
`instance_exprs.Expr`); `ckkb.extract.instances.combine` resolves them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ckkb import fields as ckfields
from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.include_dirs import is_factory_header
from ckkb.extract.instance_exprs import Expr, short
from ckkb.kb.stages import FileResult

NAME = "ck.instances"

_CMAKE_VAR = re.compile(rb"@([A-Za-z_][A-Za-z0-9_]*)@")  # CMake configure_file tokens (not C++)
# Byte pre-filter only (the parse is tree-sitter's): a source that may alias another instance
# list, `using X_instance = device_..._instance<F64, ...>;`, with no `tuple` of its own.
_MAYBE_LIST_ALIAS = re.compile(rb"using\s+\w+\s*=\s*[\w:]+_instances?\s*<")


def dir_of(rel: str, roots: tuple[str, ...]) -> str:
    """The directory right under gpu/ or another of `roots` ('' for a file directly in one)."""
    for base in roots:
        if rel.startswith(base + "/"):
            rest = rel[len(base) + 1 :].split("/")
            return rest[0] if len(rest) > 1 else ""
    return ""


def _is_header_comment(body: str) -> bool:
    """CK's `//####| ALayout| BLayout|...` column tables and `clang-format` switches: never a
    reason."""
    b = body.strip()
    return (
        b.startswith("#")
        or b.count("|") >= 3
        or b.startswith("clang-format")
        or not b.strip("-=#*/ ")
    )


_NAMES = frozenset(("type_identifier", "identifier", "primitive_type", "namespace_identifier"))


@lru_cache(maxsize=1)  # the grammar's kind id of a comment: looked up once per process
def _comment_id() -> int:
    kind = cpp.language().id_for_node_kind("comment", True)
    if kind is None:
        raise RuntimeError("the C++ grammar has no comment node")
    return kind


def template_parts(node: Any) -> tuple[Any, list[Any]] | None:
    """(name node, argument nodes) when `node` is a template instantiation `Name<args>`, else
    None."""
    if node.type in ("template_type", "template_function"):
        args = node.child_by_field_name("arguments")
        return node.child_by_field_name("name"), (args.named_children if args is not None else [])
    return None


def node_args(node: Any) -> list[Any]:
    """Argument nodes of a (possibly qualified) template type node."""
    parts = template_parts(node)
    cur = (
        node.child_by_field_name("type")
        if parts is None and node.type == "type_descriptor"
        else node
    )
    while parts is None and cur is not None:
        parts = template_parts(cur)
        if parts is not None or cur.type != "qualified_identifier":
            break
        cur = cur.child_by_field_name("name")
    return list(parts[1]) if parts is not None else []


class _Reader:
    """Reads expressions and list entries of one file. Its memos live as long as the file's read:
    CK repeats the same template arguments (`S<8, 32, 1>`, `PassThrough`, `256`) hundreds of times
    in one file, and reading each once saves a third of this stage's extract time. Keys are the
    node type and text, so a snippet parsed apart (a commented-out entry) shares them."""

    def __init__(self) -> None:
        self.exprs: dict[tuple[str, bytes], Expr] = {}
        self.facts: dict[tuple[int, bytes], tuple[Expr, str]] = {}

    def expr(self, node: Any, src: bytes) -> Expr:
        """The expression tree of a C++ node (the common node types first: this is hot)."""
        t = node.type
        if t == "type_descriptor":
            if node.named_child_count == 1:
                return self.expr(node.named_child(0), src)
            return ("text", cpp.squash(cpp.text(node, src)))
        if t == "number_literal":
            s = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
            try:
                return ("int", int(s))
            except ValueError:
                v = ckfields.as_int(s)
                return ("int", v) if v is not None else ("text", s)
        if t in _NAMES:
            return ("name", src[node.start_byte : node.end_byte].decode("utf-8", "replace"))
        if t in ("template_type", "template_function"):
            # `S<0>` in an expression position reads as a template_function
            name = node.child_by_field_name("name")
            args = node.child_by_field_name("arguments")
            return (
                "tmpl",
                cpp.text(name, src),
                tuple(
                    self.arg_expr(a, src)
                    for a in (args.named_children if args else [])
                    if a.type != "comment"
                ),
            )
        if t in ("true", "false"):
            return ("bool", t == "true")
        if t == "sized_type_specifier":
            return ("name", cpp.squash(cpp.text(node, src)))
        if t == "qualified_identifier":
            return self._qualified(node, src)
        if t == "parameter_pack_expansion":
            inner = node.named_children[0] if node.named_child_count else None
            return ("pack", cpp.squash(cpp.text(inner, src)) if inner is not None else "")
        if t == "parenthesized_expression" and node.named_child_count == 1:
            return self.expr(node.named_children[0], src)
        if t == "binary_expression":
            op = node.child_by_field_name("operator")
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op is not None and left is not None and right is not None:
                return ("bin", cpp.text(op, src), self.expr(left, src), self.expr(right, src))
        if t == "unary_expression":
            op = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            if op is not None and arg is not None and cpp.text(op, src) == "-":
                return ("neg", self.expr(arg, src))
        return ("text", cpp.squash(cpp.text(node, src)))

    def _qualified(self, node: Any, src: bytes) -> Expr:
        scope, cur = [], node
        while cur is not None and cur.type == "qualified_identifier":
            sc = cur.child_by_field_name("scope")
            if sc is not None:
                if sc.type not in ("namespace_identifier", "type_identifier"):
                    return ("text", cpp.squash(cpp.text(node, src)))
                scope.append(cpp.text(sc, src))
            cur = cur.child_by_field_name("name")
        if cur is None:
            return ("text", cpp.squash(cpp.text(node, src)))
        prefix = "::".join(scope) + "::" if scope else ""
        if cur.type in ("template_type", "template_function"):
            inner = self.expr(cur, src)
            return ("tmpl", prefix + inner[1], inner[2])
        return ("name", prefix + cpp.text(cur, src))

    def arg_expr(self, node: Any, src: bytes) -> Expr:
        """expr() of a template argument, memoised on its node type and text."""
        key = (node.type, src[node.start_byte : node.end_byte])
        e = self.exprs.get(key)
        if e is None:
            e = self.exprs[key] = self.expr(node, src)
        return e

    def args_facts(self, nodes: list[Any], src: bytes) -> list[tuple[Expr, str]]:
        """(expression, text as written minus layout) of each template argument but comments,
        memoised. One loop for all of an entry's arguments: it runs ~475,000 times a build."""
        out = []
        memo = self.facts
        comment = _comment_id()
        for node in nodes:
            # keyed on the node's kind id: an int, cheaper to read than its type's name
            key = (node.kind_id, src[node.start_byte : node.end_byte])
            if key[0] == comment:
                continue
            f = memo.get(key)
            if f is None:
                f = memo[key] = (
                    self.arg_expr(node, src),
                    " ".join(key[1].decode("utf-8", "replace").split()),
                )
            out.append(f)
        return out

    def entry_facts(self, node: Any, src: bytes, line: int) -> dict[str, Any]:
        """One list entry: {"line", "template", "args" (texts), "exprs"} (exprs None, and "expr"
        set, when the entry is not `Template<...>`)."""
        inner = (
            node.named_child(0)
            if node.type == "type_descriptor" and node.named_child_count == 1
            else node
        )
        parts = template_parts(inner)
        if parts is not None:  # the common entry `Op<a, b, ...>`
            # one pass over the (expression, text) pairs; an entry `Op<>` has none
            exprs, texts = tuple(zip(*self.args_facts(parts[1], src), strict=True)) or ((), ())
            return {
                "line": line,
                "template": cpp.text(parts[0], src),
                "args": list(texts),
                "exprs": exprs,
            }
        e = self.expr(node, src)
        if e[0] == "tmpl":
            args_nodes = [a for a in node_args(node) if a.type != "comment"]
            return {
                "line": line,
                "template": e[1],
                "args": [cpp.squash(cpp.text(a, src)) for a in args_nodes],
                "exprs": e[2],
            }
        return {
            "line": line,
            "template": cpp.squash(cpp.text(node, src)),
            "args": [],
            "exprs": None,
            "expr": e,
        }

    def commented_entries(self, group: list[tuple[int, str]]) -> list[dict] | None:
        """Parse commented-out text (lines of one comment group) as tuple entries; None when it is
        prose."""
        body = "\n".join(b for _, b in group).rstrip()
        if body.endswith(","):
            body = body[:-1]
        prefix = "using __ckkb_commented = std::tuple<"
        wrapped = (prefix + body + ">;").encode()
        tree = cpp.parse(wrapped)
        if tree.root_node.has_error:
            return None
        decl = cpp.find(tree.root_node, "alias_declaration")
        args = _tuple_args(decl[0], wrapped) if decl else None
        if args is None:
            return None
        out = []
        for a in args.named_children:
            if a.type == "comment":
                continue
            e = self.entry_facts(a, wrapped, group[min(a.start_point[0], len(group) - 1)][0])
            if e["exprs"] is None:
                return None  # `foo<bar` in prose, not an entry
            out.append(e)
        return out or None

    def list_entries(self, args: Any, src: bytes, rel: str, diags: list[Diagnostic]) -> list[dict]:
        """Entries of a tuple's argument list, in order, with commented-out ones in place."""
        entries: list[dict] = []
        reason = ""
        reason_end = -2
        children = list(args.children)
        i = 0
        while i < len(children):
            c = children[i]
            t = c.type
            if t == "comment":
                body = cpp.strip_comment(cpp.text(c, src))
                if _is_header_comment(body):
                    i += 1
                    continue
                if _looks_like_entry(body):
                    # a commented-out entry may span several comment lines
                    group = [(cpp.line(c) + k, ln) for k, ln in enumerate(body.splitlines())]
                    j = i + 1
                    depth = body.count("<") - body.count(">")
                    while (
                        depth > 0
                        and j < len(children)
                        and children[j].type == "comment"
                        and children[j].start_point[0] == children[j - 1].end_point[0] + 1
                    ):
                        more = cpp.strip_comment(cpp.text(children[j], src))
                        group.extend(
                            (cpp.line(children[j]) + k, ln)
                            for k, ln in enumerate(more.splitlines())
                        )
                        depth += more.count("<") - more.count(">")
                        j += 1
                    parsed = self.commented_entries(group)
                    if parsed is not None:
                        for e in parsed:
                            e["status"] = "commented_out"
                            e["reason"] = reason
                            entries.append(e)
                        i = j
                        continue
                # a reason comment: consecutive lines form one reason
                if c.start_point[0] == reason_end + 1 and reason:
                    reason = reason + " " + body
                else:
                    reason = body
                reason_end = c.end_point[0]
                i += 1
                continue
            if t in ("<", ">", ","):
                i += 1
                continue
            if t == "ERROR":
                diags.append(
                    Diagnostic(
                        rel,
                        cpp.line(c),
                        f"unreadable text in instance list: {cpp.squash(cpp.text(c, src))[:60]!r}",
                        "warning",
                        NAME,
                    )
                )
                i += 1
                continue
            e = self.entry_facts(c, src, cpp.line(c))
            e["status"] = "active"
            e["reason"] = reason
            entries.append(e)
            i += 1
        return entries

    def aliases(self, found: dict[str, list], src: bytes) -> dict[str, dict]:
        """Namespace-level aliases and constants of one file: name -> {"params": [...]?, "expr":
        Expr, "line"}. Instance lists themselves (`using X = std::tuple<...>`) are not aliases
        anything resolves through."""
        out: dict[str, dict] = {}
        for decl in found["alias_declaration"]:
            if cpp.is_nested_in(decl, ("compound_statement", "field_declaration_list")):
                continue
            if _tuple_args(decl, src) is not None:
                continue
            name = decl.child_by_field_name("name")
            td = decl.child_by_field_name("type")
            if name is None or td is None:
                continue
            tdecl, plist = _template_params_of(decl)
            entry: dict[str, Any] = {"expr": self.expr(td, src), "line": cpp.line(decl)}
            if plist is not None:
                entry["params"] = [p["name"] for p in cpp.template_params(plist, src)]
            out[cpp.text(name, src)] = entry
        for decl in found["declaration"]:
            if not any(
                c.type == "type_qualifier" and cpp.text(c, src) == "constexpr"
                for c in decl.children
            ):
                continue
            if cpp.is_nested_in(
                decl, ("compound_statement", "field_declaration_list", "template_declaration")
            ):
                continue
            for init in decl.named_children:
                if init.type != "init_declarator":
                    continue
                d, v = init.child_by_field_name("declarator"), init.child_by_field_name("value")
                if d is not None and v is not None and d.type == "identifier":
                    out[cpp.text(d, src)] = {"expr": self.expr(v, src), "line": cpp.line(init)}
        for td in found["type_definition"]:  # typedef X Y;
            ty, d = td.child_by_field_name("type"), td.child_by_field_name("declarator")
            if (
                ty is not None
                and d is not None
                and d.type == "type_identifier"
                and not cpp.is_nested_in(td, ("compound_statement", "field_declaration_list"))
            ):
                out[cpp.text(d, src)] = {"expr": self.expr(ty, src), "line": cpp.line(td)}
        return out

    def list_alias(self, decl: Any, src: bytes, data: bytes, guards: dict) -> dict | None:
        """`using NAME = other_list<args>;` (NAME ending in _instance/_instances): a candidate
        alias of another instance list; `combine` keeps it when `other_list` is one."""
        name_node = decl.child_by_field_name("name")
        td = decl.child_by_field_name("type")
        if (
            name_node is None
            or td is None
            or cpp.is_nested_in(decl, ("compound_statement", "field_declaration_list"))
        ):
            return None
        name = cpp.text(name_node, data)
        if not (name.endswith("_instance") or name.endswith("_instances")):
            return None
        e = self.expr(td, data)
        if e[0] not in ("tmpl", "name"):
            return None
        tdecl, plist = _template_params_of(decl)
        tparams = (
            [
                {"name": p["name"], "type": p["type"], "kind": p["kind"]}
                for p in cpp.template_params(plist, data)
            ]
            if plist is not None
            else []
        )
        above = tdecl if tdecl is not None else decl
        return {
            "name": name,
            "line": cpp.line(decl),
            "template_params": tparams,
            "comment": _comment_block_above(above, data),
            "guard": " && ".join(guards.get(cpp.line(decl), ())),
            "target": short(e[1]).rsplit("::", 1)[-1],
            "target_args": e[2] if e[0] == "tmpl" else [],
            "text": cpp.squash(cpp.text(td, data)),
        }


def _mask_cmake(data: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """`@VAR@` -> `_VAR_` (same length, so offsets and lines hold) and where each token was."""
    found = [(m.start(), m.group(1).decode()) for m in _CMAKE_VAR.finditer(data)]
    if not found:
        return data, []
    return _CMAKE_VAR.sub(lambda m: b"_" + m.group(1) + b"_", data), found


def _comment_block_above(node: Any, src: bytes) -> str:
    """The contiguous comment lines ending on the line just above `node`, without markers."""
    lines: list[str] = []
    expect = node.start_point[0] - 1
    prev = node.prev_sibling
    while prev is not None and prev.type == "comment" and prev.end_point[0] == expect:
        body = cpp.strip_comment(cpp.text(prev, src))
        if not _is_header_comment(body):
            lines.append(body)
        expect = prev.start_point[0] - 1
        prev = prev.prev_sibling
    return "\n".join(reversed(lines))


def _template_params_of(decl: Any) -> tuple[Any, Any]:
    """(template_declaration node, its template_parameter_list node), or (None, None), for an
    alias declaration."""
    parent = decl.parent
    if parent is not None and parent.type == "template_declaration":
        return parent, parent.child_by_field_name("parameters")
    return None, None


def _tuple_args(decl: Any, src: bytes) -> Any:
    """The template_argument_list of `std::tuple<...>` when `decl` is
    `using X = std::tuple<...>`."""
    td = decl.child_by_field_name("type")
    ty = td.child_by_field_name("type") if td is not None else None
    if ty is None:
        return None
    if ty.type == "qualified_identifier":
        scope = ty.child_by_field_name("scope")
        name = ty.child_by_field_name("name")
        if (
            scope is None
            or cpp.text(scope, src) != "std"
            or name is None
            or name.type != "template_type"
        ):
            return None
        ty = name
    if ty.type != "template_type" or cpp.text(ty.child_by_field_name("name"), src) != "tuple":
        return None
    return ty.child_by_field_name("arguments")


def _looks_like_entry(body: str) -> bool:
    b = body.lstrip()
    return bool(b) and (b[0].isalpha() or b[0] == "_") and "<" in b and "|" not in b


_DECL_TYPES = (
    "alias_declaration",
    "declaration",
    "type_definition",
    "preproc_include",
    "struct_specifier",
    "class_specifier",
)


def _declarations(root: Any) -> dict[str, list[Any]]:
    """The file's declarations of _DECL_TYPES in source order, from a cursor walk that does not
    enter template argument lists: those hold most of an instance file's nodes (every entry's
    arguments) and no declaration, so a query over the whole tree (or a full walk) spends most of
    its time there."""
    out: dict[str, list] = {t: [] for t in _DECL_TYPES}
    cur = root.walk()
    while True:
        node = cur.node
        t = node.type
        if t in out:
            out[t].append(node)
        if t != "template_argument_list" and cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return out


def _includes(found: dict[str, list], src: bytes) -> list[str]:
    out = []
    for inc in found["preproc_include"]:
        p = inc.child_by_field_name("path")
        if p is not None and p.type == "string_literal":
            out.append(cpp.text(p, src).strip('"'))
    return out


def extract(root: Path, rel: str, data: bytes) -> FileResult:
    """The stage's per-file facts: "aliases", "includes", "classes", "lists",
    "list_aliases"."""
    res = FileResult()
    if cpp.is_binary(data):
        res.diagnostics.append(Diagnostic(rel, 0, "binary file, not C++: skipped", "warning", NAME))
        return res
    has_tuple = b"tuple" in data  # `std::tuple<`, also written `std::\n    tuple<`
    maybe_alias = not has_tuple and _MAYBE_LIST_ALIAS.search(data) is not None
    if (
        not has_tuple
        and not maybe_alias
        and (not rel.endswith(".hpp") or (b"using" not in data and b"constexpr" not in data))
    ):
        return res  # nothing this stage reads: no parse
    if not has_tuple and is_factory_header(rel):
        return res  # factory headers (A2's stage) declare add functions, not aliases lists need
    src, cmake_vars = _mask_cmake(data) if rel.endswith(".in") else (data, [])
    src, guards = cpp.mask_conditionals(src) if b"#if" in src else (src, {})
    tree = cpp.parse(src)
    found = _declarations(tree.root_node)
    reader = _Reader()
    res.facts["aliases"] = reader.aliases(found, data)
    res.facts["includes"] = _includes(found, data)
    res.facts["classes"] = cpp.namespace_classes(
        found["struct_specifier"] + found["class_specifier"], data
    )
    lists: list[dict[str, Any]] = []
    list_aliases: list[dict[str, Any]] = []
    if has_tuple or maybe_alias:
        for decl in found["alias_declaration"]:
            args = _tuple_args(decl, src)
            if args is None:
                alias = reader.list_alias(decl, src, data, guards)
                if alias is not None:
                    list_aliases.append(alias)
                continue
            name = cpp.text(decl.child_by_field_name("name"), data)
            tdecl, plist = _template_params_of(decl)
            tparams = (
                [
                    {"name": p["name"], "type": p["type"], "kind": p["kind"]}
                    for p in cpp.template_params(plist, data)
                ]
                if plist is not None
                else []
            )
            above = tdecl if tdecl is not None else decl
            diags: list[Diagnostic] = []
            entries = reader.list_entries(args, data, rel, diags)
            for e in entries:
                e["guard"] = " && ".join(guards.get(e["line"], ()))
            res.diagnostics.extend(diags)
            lists.append(
                {
                    "name": name,
                    "line": cpp.line(decl),
                    "template_params": tparams,
                    "comment": _comment_block_above(above, data),
                    "cmake_vars": sorted(
                        {v for off, v in cmake_vars if above.start_byte <= off < decl.end_byte}
                    ),
                    "guard": " && ".join(guards.get(cpp.line(decl), ())),
                    "entries": entries,
                }
            )
    res.facts["lists"] = lists
    res.facts["list_aliases"] = list_aliases
    if tree.root_node.has_error and lists:
        # report recovery only where it can matter: inside an instance list
        spans = [
            (lst["line"], lst["entries"][-1]["line"] if lst["entries"] else lst["line"])
            for lst in lists
        ]
        for ln in cpp.error_lines(tree):
            if any(a <= ln <= b + 2 for a, b in spans):
                res.diagnostics.append(
                    Diagnostic(
                        rel,
                        ln,
                        "malformed C++ in an instance list (parser had to recover)",
                        "warning",
                        NAME,
                    )
                )
    elif tree.root_node.has_error and not lists and has_tuple:
        lines = cpp.error_lines(tree)
        res.diagnostics.append(
            Diagnostic(
                rel,
                lines[0] if lines else 0,
                "malformed C++: no instance list readable (parse errors at lines "
                + ", ".join(map(str, lines[:5]))
                + ")",
                "warning",
                NAME,
            )
        )
    return res

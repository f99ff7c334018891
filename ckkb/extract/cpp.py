"""tree-sitter helpers shared by the C++ extractors (parse once, walk, read text and lines)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import tree_sitter as ts
import tree_sitter_cpp


@lru_cache(maxsize=1)
def language() -> ts.Language:
    return ts.Language(tree_sitter_cpp.language())


@lru_cache(maxsize=1)
def parser() -> ts.Parser:
    return ts.Parser(language())


def parse(data: bytes) -> ts.Tree:
    return parser().parse(data)


def text(node: ts.Node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def line(node: ts.Node) -> int:
    """1-based line of the node's first byte."""
    return node.start_point[0] + 1


def walk(node: ts.Node, types: str | tuple[str, ...] | None = None) -> Iterator[ts.Node]:
    """Depth-first pre-order over descendants (and node itself), optionally filtered by type."""
    if isinstance(types, str):
        types = (types,)
    cursor = node.walk()
    visited_children = False
    while True:
        if not visited_children:
            n = cursor.node
            if types is None or n.type in types:
                yield n
            if cursor.goto_first_child():
                continue
        if cursor.goto_next_sibling():
            visited_children = False
        elif cursor.goto_parent():
            visited_children = True
        else:
            return


def function_declarator(node: ts.Node) -> ts.Node | None:
    """The function_declarator under a function definition or declaration (through pointer,
    reference and other wrapping declarators); None when it has none."""
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    return decl


def error_lines(tree: ts.Tree) -> list[int]:
    """Lines of ERROR / MISSING nodes: where tree-sitter had to recover (malformed C++)."""
    out = []
    if not tree.root_node.has_error:
        return out
    for n in walk(tree.root_node):
        if n.type == "ERROR" or n.is_missing:
            out.append(line(n))
    return sorted(set(out))


def is_binary(data: bytes) -> bool:
    """NUL bytes or invalid UTF-8 in the first 8 KiB: not a source file."""
    head = data[:8192]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 4  # a multibyte char cut at the boundary is fine
    return False


def squash(s: str) -> str:
    """Collapse whitespace runs to one space (argument text 'as written', minus layout)."""
    return " ".join(s.split())


def strip_comment(s: str) -> str:
    """The body of a `// ...` or `/* ... */` comment, without the markers (one line or several)."""
    s = s.strip()
    if s.startswith("/*"):
        s = s[2:]
        if s.endswith("*/"):
            s = s[:-2]
        lines = [ln.strip().lstrip("*").strip() for ln in s.splitlines()]
        return "\n".join(ln for ln in lines).strip()
    if s.startswith("//"):
        return s[2:].strip()
    return s


def is_nested_in(node: ts.Node, types: tuple[str, ...]) -> bool:
    """Whether an ancestor of node has one of `types` (e.g. inside a class body or function)."""
    p = node.parent
    while p is not None:
        if p.type in types:
            return True
        p = p.parent
    return False


def template_params(plist: ts.Node, src: bytes) -> list[dict]:
    """A `template_parameter_list` node -> [{"name", "kind": type|value|pack|template, "type", "default"}].

    Unnamed parameters (e.g. `typename std::enable_if<...>::type = false`) get the name "".
    """
    out = []
    for p in plist.named_children:
        t = p.type
        if t == "comment":
            continue
        name, kind, ptype, default = "", "value", None, None
        if t in ("type_parameter_declaration", "optional_type_parameter_declaration", "variadic_type_parameter_declaration"):
            kind = "pack" if t.startswith("variadic") else "type"
            ptype = "typename"
            ident = p.child_by_field_name("name") or next((c for c in p.named_children if c.type == "type_identifier"), None)
            name = text(ident, src) if ident is not None else ""
            d = p.child_by_field_name("default_type")
            default = squash(text(d, src)) if d is not None else None
        elif t in ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"):
            ty = p.child_by_field_name("type")
            ptype = squash(text(ty, src)) if ty is not None else None
            decl = p.child_by_field_name("declarator")
            if decl is not None and decl.type == "variadic_declarator":
                kind = "pack"
                ident = next((c for c in decl.named_children if c.type == "identifier"), None)
                name = text(ident, src) if ident is not None else ""
            elif decl is not None:
                name = squash(text(decl, src))
            if t == "variadic_parameter_declaration":
                kind = "pack"
            d = p.child_by_field_name("default_value")
            default = squash(text(d, src)) if d is not None else None
        elif t == "template_template_parameter_declaration":
            kind, ptype = "template", "template"
            inner = next((c for c in p.named_children if c.type.endswith("parameter_declaration")), None)
            if inner is not None:
                ident = inner.child_by_field_name("name") or next((c for c in inner.named_children if c.type == "type_identifier"), None)
                name = text(ident, src) if ident is not None else ""
                d = inner.child_by_field_name("default_type")
                default = squash(text(d, src)) if d is not None else None
        else:  # ERROR or something tree-sitter could not classify
            kind, name, ptype = "unknown", squash(text(p, src)), None
        out.append({"name": name, "kind": kind, "type": ptype, "default": default})
    return out


@lru_cache(maxsize=64)
def _query(pattern: str) -> ts.Query:
    return ts.Query(language(), pattern)


def find(node: ts.Node, node_type: str) -> list[ts.Node]:
    """All descendants of `node` (itself included) of one type, in source order, found in C
    (a tree-sitter query), so big files need no Python-level walk."""
    caps = ts.QueryCursor(_query(f"({node_type}) @n")).captures(node)
    return sorted(caps.get("n", []), key=lambda n: n.start_byte)


def find_many(node: ts.Node, node_types: tuple[str, ...]) -> dict[str, list[ts.Node]]:
    """Descendants of several types in one query pass: type -> nodes in source order."""
    pattern = "[" + " ".join(f"({t})" for t in node_types) + "] @n"
    caps = ts.QueryCursor(_query(pattern)).captures(node).get("n", [])
    out: dict[str, list[ts.Node]] = {t: [] for t in node_types}
    for n in sorted(caps, key=lambda n: n.start_byte):
        out[n.type].append(n)
    return out

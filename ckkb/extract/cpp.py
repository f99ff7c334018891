"""tree-sitter helpers shared by the C++ extractors (parse once, walk, read text and lines)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import tree_sitter as ts
import tree_sitter_cpp


# The grammar and the parser are made once per process (module state on purpose): both are
# immutable and every C++ reader needs them.
@lru_cache(maxsize=1)
def language() -> ts.Language:
    return ts.Language(tree_sitter_cpp.language())


@lru_cache(maxsize=1)
def parser() -> ts.Parser:
    return ts.Parser(language())


# Trees by their bytes, only inside shared_parses() (None outside it): see there.
_shared: dict[bytes, ts.Tree] | None = None


def parse(data: bytes) -> ts.Tree:
    """Parse C++ bytes into a tree-sitter tree (never edited by the extractors)."""
    if _shared is None:
        return parser().parse(data)
    tree = _shared.get(data)
    if tree is None:
        tree = _shared[data] = parser().parse(data)
    return tree


@contextmanager
def shared_parses() -> Iterator[None]:
    """Within the block, parse() gives equal bytes one tree. The build extracts a file for every
    stage that reads it in one block (kb.build.workers.extract_file), so stages that parse the same
    bytes (templates and typestrings: for_parsing() of a device-op header) share one parse: 126
    parses, 0.5 s CPU of a cold build of the wheel's trees (measured). The trees go with the
    block."""
    global _shared
    outer, _shared = _shared, {} if _shared is None else _shared
    try:
        yield
    finally:
        _shared = outer


def text(node: ts.Node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def line(node: ts.Node) -> int:
    """1-based line of the node's first byte."""
    return node.start_point[0] + 1


def walk(node: ts.Node, types: str | tuple[str, ...] | None = None) -> Iterator[ts.Node]:
    """Depth-first pre-order over descendants (and node itself), optionally filtered by type.

    With `types`, the search runs in C (a tree-sitter query) and only the matches reach Python:
    a Python-level visit of every node of a big CK header costs more than parsing it.
    """
    if types is None:
        return _walk_all(node)
    if isinstance(types, str):
        types = (types,)
    nodes = _find_sorted(node, types)
    return iter(nodes) if nodes is not None else (n for n in _walk_all(node) if n.type in types)


def _walk_all(node: ts.Node) -> Iterator[ts.Node]:
    cursor = node.walk()
    visited_children = False
    while True:
        if not visited_children:
            n = cursor.node
            if n is not None:  # typed Optional; a cursor on a tree always has a node
                yield n
            if cursor.goto_first_child():
                continue
        if cursor.goto_next_sibling():
            visited_children = False
        elif cursor.goto_parent():
            visited_children = True
        else:
            return


def _find_sorted(node: ts.Node, types: tuple[str, ...]) -> list[ts.Node] | None:
    """Nodes of `types` under node (itself included) in pre-order: by start, then outermost first.
    None when two matches share one extent (pre-order between them needs the tree walk)."""
    pattern = (
        "[" + " ".join(f"({t})" for t in types) + "] @n" if len(types) > 1 else f"({types[0]}) @n"
    )
    try:
        query = _query(pattern)
    except (
        ts.QueryError
    ):  # a type this grammar does not name (or ERROR/MISSING spellings): walk instead
        return None
    caps = ts.QueryCursor(query).captures(node).get("n", [])
    if len(caps) < 2:
        return caps
    keys = [(n.start_byte, -n.end_byte) for n in caps]
    order = sorted(range(len(caps)), key=keys.__getitem__)
    out = [caps[i] for i in order]
    for a, b in zip(order, order[1:], strict=False):
        if keys[a] == keys[b]:
            return None
    return out


def function_declarator(node: ts.Node) -> ts.Node | None:
    """The function_declarator under a function definition or declaration (through pointer,
    reference and other wrapping declarators); None when it has none."""
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    return decl


def error_lines(tree: ts.Tree) -> list[int]:
    """Lines of ERROR / MISSING nodes: where tree-sitter had to recover (malformed C++).

    Only subtrees whose `has_error` is set are entered (it marks every ancestor of an ERROR or
    MISSING node), so a clean region of a big file costs nothing."""
    out: set[int] = set()
    stack = [tree.root_node] if tree.root_node.has_error else []
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            out.add(n.start_point[0] + 1)
        stack.extend(c for c in n.children if c.has_error)
    return sorted(out)


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


_CONDITIONALS = (b"if", b"ifdef", b"ifndef", b"elif", b"else", b"endif")


def mask_conditionals(data: bytes) -> tuple[bytes, dict[int, tuple[str, ...]]]:
    """Blank `#if/#ifdef/#ifndef/#elif/#else/#endif` lines (same length, so offsets and lines hold)
    and return, per 1-based line inside a conditional, the chain of conditions guarding it.

    CK puts such directives inside `std::tuple<...>` argument lists, where tree-sitter cannot
    recover; with them blanked every branch's entries are read and each keeps its guard. The
    text of an `#if 0` branch is blanked too: the compiler never reads it, nor does this."""
    if b"#" not in data:
        return data, {}
    lines = data.split(b"\n")
    out: list[bytes] = []
    guards: dict[int, tuple[str, ...]] = {}
    stack: list[
        list
    ] = []  # per open #if: [conditions of its branches so far, condition of the current branch]
    cont = False
    for i, ln in enumerate(lines, start=1):
        s = ln.lstrip()
        if cont or (
            s.startswith(b"#")
            and s[1:].lstrip().split(b" ", 1)[0].split(b"(", 1)[0].rstrip(b"\r") in _CONDITIONALS
        ):
            if not cont:
                rest = s[1:].lstrip()
                word = rest.split(b" ", 1)[0].split(b"(", 1)[0].rstrip(b"\r")
                arg = rest[len(word) :].strip().rstrip(b"\\").strip().decode("utf-8", "replace")
                arg = arg.split("//", 1)[0].strip()
                if word in (b"if", b"ifdef", b"ifndef"):
                    cond = {b"ifdef": f"defined({arg})", b"ifndef": f"!defined({arg})"}.get(
                        word, arg
                    )
                    stack.append([[cond], cond])
                elif word in (b"elif", b"else") and stack:
                    conds = stack[-1][0]
                    negs = [f"!({c})" for c in conds]
                    stack[-1][1] = " && ".join(negs + [arg] if word == b"elif" else negs)
                    if word == b"elif":
                        conds.append(arg)
                elif word == b"endif" and stack:
                    stack.pop()
            cont = ln.rstrip(b"\r").endswith(b"\\")
            out.append(b" " * len(ln))
            continue
        if any(g[1] == "0" or g[1] == "!(1)" or g[1].startswith("!(1) &&") for g in stack):
            out.append(
                b" " * len(ln)
            )  # `#if 0` text is dead (and often not valid C++): nothing to read
            continue
        if stack:
            guards[i] = tuple(g[1] for g in stack)
        out.append(ln)
    return b"\n".join(out), guards


# whole lines, each matched with the newline before it: a pattern that starts with a literal is
# found by a fast scan, where `^` would be tried at every byte (see _lines)
_MACRO_LINE = re.compile(rb"\n[ \t]*[A-Z][A-Z0-9_]{2,}[ \t]*$", re.M)
_PP_IF = re.compile(rb"\n[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$", re.M)


def _lines(pattern: re.Pattern[bytes], data: bytes) -> Iterator[tuple[int, int, re.Match[bytes]]]:
    """(start, end, match) of each line of `data` that `pattern` (one of the above) matches."""
    for m in pattern.finditer(b"\n" + data):
        yield m.start(), m.end() - 1, m


def _blank(buf: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if buf[i] not in (10, 13):
            buf[i] = 32


def for_parsing(data: bytes) -> bytes:
    """A copy of a device-op header that tree-sitter reads without losing the class structure, byte
    offsets kept (the templates and typestrings stages both parse it: one parse serves both).

    Not an extraction (no value is read from it): CK headers use constructs a C++ grammar without a
    preprocessor cannot follow, so they are blanked out: a line that is only a macro invocation
    (GET_NXDL_PER_WAVE_IMPL, REGISTER_EXTRA_PRINTING_METHODS), the dead branch and the directives
    of `#if 0` / `#if 1`, and the comparison in `enable_if<N >= 1 && N <= 3>` (made `==`).
    """
    buf = bytearray(data)
    for start, end, _m in _lines(_MACRO_LINE, data):
        _blank(buf, start, end)
    stack: list[tuple[bytes, int]] = []  # (constant "0"/"1"/"", start of the region to blank)
    for line_start, line_end, m in _lines(_PP_IF, data):
        kind, rest = m.group(1), m.group(2).split(b"//")[0].strip()
        if kind == b"if":
            const = rest if rest in (b"0", b"1") else b""
            stack.append((const, line_start))
            if const:
                _blank(buf, line_start, line_end)
        elif kind in (b"ifdef", b"ifndef"):
            stack.append((b"", line_start))
        elif kind in (b"else", b"elif") and stack:
            const, start = stack[-1]
            if const == b"0":
                _blank(buf, start, line_end)  # the dead #if 0 branch
                stack[-1] = (b"live", line_end)
            elif const == b"1":
                stack[-1] = (b"dead", line_start)
        elif kind == b"endif" and stack:
            const, start = stack.pop()
            if const == b"0" or const == b"dead":
                _blank(buf, start, line_end)
            elif const in (b"1", b"live"):
                _blank(buf, line_start, line_end)
    out = bytes(buf)
    return out.replace(b">=", b"==").replace(b"<=", b"==")


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
    """A `template_parameter_list` node -> [{"name", "kind": type|value|pack|template, "type",
    "default"}].

    Unnamed parameters (e.g. `typename std::enable_if<...>::type = false`) get the name "".
    """
    out = []
    for p in plist.named_children:
        t = p.type
        if t == "comment":
            continue
        name, kind, ptype, default = "", "value", None, None
        if t in (
            "type_parameter_declaration",
            "optional_type_parameter_declaration",
            "variadic_type_parameter_declaration",
        ):
            kind = "pack" if t.startswith("variadic") else "type"
            ptype = "typename"
            ident = p.child_by_field_name("name") or next(
                (c for c in p.named_children if c.type == "type_identifier"), None
            )
            name = text(ident, src) if ident is not None else ""
            d = p.child_by_field_name("default_type")
            default = squash(text(d, src)) if d is not None else None
        elif t in (
            "parameter_declaration",
            "optional_parameter_declaration",
            "variadic_parameter_declaration",
        ):
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
            inner = next(
                (c for c in p.named_children if c.type.endswith("parameter_declaration")), None
            )
            if inner is not None:
                ident = inner.child_by_field_name("name") or next(
                    (c for c in inner.named_children if c.type == "type_identifier"), None
                )
                name = text(ident, src) if ident is not None else ""
                d = inner.child_by_field_name("default_type")
                default = squash(text(d, src)) if d is not None else None
        else:  # ERROR or something tree-sitter could not classify
            kind, name, ptype = "unknown", squash(text(p, src)), None
        out.append({"name": name, "kind": kind, "type": ptype, "default": default})
    return out


# Compiled queries per process (module state on purpose): compiling one costs more than a walk.
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


def namespace_classes(nodes: list[ts.Node], src: bytes) -> dict[str, list]:
    """The class definitions among `nodes` (struct/class specifiers) that are not nested in a
    function or class body: name -> [line, first base's name or ""]. Tells a configuration
    struct (CK's `ReductionConfiguration_1`) from a device op, which derives from one."""
    out: dict[str, list] = {}
    for node in nodes:
        name, body = node.child_by_field_name("name"), node.child_by_field_name("body")
        if name is None or body is None or name.type != "type_identifier":
            continue
        if is_nested_in(node, ("compound_statement", "field_declaration_list")):
            continue
        bases = next((c for c in node.named_children if c.type == "base_class_clause"), None)
        first = (
            next((c for c in bases.named_children if c.type != "access_specifier"), None)
            if bases is not None
            else None
        )
        base = squash(text(first, src)).split("<", 1)[0] if first is not None else ""
        out.setdefault(text(name, src), [line(node), base.rsplit("::", 1)[-1]])
    return out

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

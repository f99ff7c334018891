"""What a ckProfiler op prints when called wrongly, read from its source, and the positional
legend parsed from that text (`argN: name (code: label; ...)`), for stage `ck.profiler`."""

from __future__ import annotations

import re
from typing import Any

import tree_sitter as ts

from ckkb.extract import cpp
from ckkb.extract.conditions import NodeIndex


def nodes(root: ts.Node, node_type: str, idx: NodeIndex | None) -> list[ts.Node]:
    """Nodes of one type under root, in pre-order: from the index when there is one."""
    return idx[node_type] if idx is not None else list(cpp.walk(root, node_type))


# ----------------------------------------------------------------------------- literals


_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "?": "?",
}


_ESCAPE = re.compile(r"\\(.)", re.S)


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESC.get(m[1], m[1]), body)


def literal(node: ts.Node, src: bytes, macros: dict[str, str]) -> str | None:
    """The value of a string literal, concatenated string (macros resolved), else None."""
    t = node.type
    if t == "string_literal":
        raw = cpp.text(node, src)
        q = raw.find('"')
        return _unescape(raw[q + 1 : -1]) if q >= 0 and raw.endswith('"') else None
    if t == "raw_string_literal":
        raw = cpp.text(node, src)
        m = re.match(r'^\w*R"([^(]*)\((.*)\)\1"$', raw, re.S)
        return m.group(2) if m else None
    if t == "concatenated_string":
        parts = []
        for ch in node.named_children:
            v = literal(ch, src, macros)
            if v is None:
                return None
            parts.append(v)
        return "".join(parts)
    if t == "identifier":
        return macros.get(cpp.text(node, src))
    if t == "ERROR" and node.named_child_count:
        # tree-sitter wraps a macro between two literals ("a" OP_NAME "b") in an ERROR node
        parts = []
        for ch in node.named_children:
            v = literal(ch, src, macros)
            if v is None:
                return None
            parts.append(v)
        return "".join(parts)
    if t == "parenthesized_expression" and node.named_child_count == 1:
        return literal(node.named_children[0], src, macros)
    return None


def string_macros(root: ts.Node, src: bytes, idx: NodeIndex | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for d in nodes(root, "preproc_def", idx):
        name = d.child_by_field_name("name")
        value = d.child_by_field_name("value")
        if name is None or value is None:
            continue
        v = cpp.text(value, src).strip()
        sub = cpp.parse(("const char* x = " + v + ";").encode())
        for n in cpp.walk(sub.root_node, ("string_literal", "concatenated_string")):
            lit = literal(n, ("const char* x = " + v + ";").encode(), out)
            if lit is not None:
                out[cpp.text(name, src)] = lit
            break
    return out


# ----------------------------------------------------------------------------- usage text


def _print_text(stmt: ts.Node, src: bytes, macros: dict[str, str]) -> str | None:
    """Text printed by one statement (`printf("...")` or `std::cout << ... ;`), else None."""
    if stmt.type != "expression_statement" or stmt.named_child_count == 0:
        return None
    e = stmt.named_children[0]
    if e.type == "call_expression":
        fn = e.child_by_field_name("function")
        if fn is None or cpp.text(fn, src) not in ("printf", "std::printf", "puts", "std::puts"):
            return None
        args = e.child_by_field_name("arguments")
        if args is None or args.named_child_count == 0:
            return None
        v = literal(args.named_children[0], src, macros)
        if v is None:
            return None
        return v + ("\n" if cpp.text(fn, src).endswith("puts") else "")
    if e.type == "binary_expression":
        ops: list[ts.Node] = []
        n: ts.Node | None = e
        while n is not None and n.type == "binary_expression":
            op, right = n.child_by_field_name("operator"), n.child_by_field_name("right")
            if op is None or right is None or cpp.text(op, src) != "<<":
                break
            ops.append(right)
            n = n.child_by_field_name("left")
        if n is None:
            return None
        if cpp.text(n, src).replace(" ", "") not in ("std::cout", "std::cerr", "cout", "cerr"):
            return None
        parts = []
        for o in reversed(ops):
            t = cpp.text(o, src).strip()
            if t in ("std::endl", "endl"):
                parts.append("\n")
                continue
            v = literal(o, src, macros)
            parts.append(v if v is not None else "\n{" + t + "}\n")
        return "".join(parts)
    return None


_LEGEND_START = re.compile(r"(^|\n)\s*(arg\d+|--\w)")


def usage_text(
    root: ts.Node, src: bytes, macros: dict[str, str], idx: NodeIndex | None = None
) -> tuple[str, int | None]:
    """The usage text: every print statement of the block holding the first legend print."""
    for stmt in nodes(root, "expression_statement", idx):
        t = _print_text(stmt, src, macros)
        if t is None or not _LEGEND_START.search(t):
            continue
        block = stmt.parent
        if block is None:
            continue
        parts = []
        for s in block.named_children:
            pt = _print_text(s, src, macros)
            if pt is not None:
                parts.append(pt)
        return "".join(parts), cpp.line(stmt)
    return "", None


# ----------------------------------------------------------------------------- legend


_ENTRY = re.compile(
    r"^\s*arg(?P<a>\d+)(?:/\d+)?(?:\s*(?:to|-)\s*(?:arg)?(?P<b>\d+)(?:/\d+)?)?\s*:\s*(?P<rest>.*)$"
)
_OPTION = re.compile(r"^\s*(?P<flag>--[\w-]+)(?:\s+or\s+(?P<short>-\w))?\s*[:,]?\s*(?P<rest>.*)$")
_CODE = re.compile(r"(?:(?<=[(;,])|(?<=^)|(?<=\s))(\d+)\s*[:=]\s*")
_DEFAULT = re.compile(r"default\s*[:=]?\s*(-?[\w.]+)", re.I)


def parse_codes(text: str) -> dict[str, str]:
    """'data type (0: fp32; 1: fp16; 2: bf16)' -> {'0': 'fp32', '1': 'fp16', '2': 'bf16'}."""
    p = text.find("(")
    if p < 0:
        return {}
    body = text[p + 1 :]
    hits = list(_CODE.finditer(body))
    out: dict[str, str] = {}
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(body)
        label = body[m.end() : end].strip()
        if i + 1 == len(hits) and label.endswith(")") and label.count(")") > label.count("("):
            label = label[: label.rfind(")")]
        label = re.sub(r"\s+", " ", label).strip().rstrip(";,").strip()
        if m.group(1) in out:
            continue
        out[m.group(1)] = label
    return out


def _entry_name(rest: str) -> str:
    name = rest.split("(", 1)[0].strip()
    return re.sub(r"\s+", " ", name).rstrip(":").strip() or rest.strip()


def parse_legend(usage: str, first_line: int = 0) -> list[dict[str, Any]]:
    """Usage text -> legend entries: {position, name, text, codes, optional, default, kind}."""
    entries: list[dict[str, Any]] = []
    optional = False
    cur: dict[str, Any] | None = None
    for raw in usage.split("\n"):
        s = raw.strip()
        if not s:
            cur = None
            continue
        if s.lower().rstrip(":") in ("optional", "optional arguments"):
            optional = True
            cur = None
            continue
        m = _ENTRY.match(raw)
        if m:
            cur = {
                "a": int(m.group("a")),
                "b": int(m.group("b")) if m.group("b") else None,
                "text": s,
                "optional": optional,
                "kind": "positional",
            }
            entries.append(cur)
            continue
        m = _OPTION.match(raw)
        if m:
            cur = {"flag": m.group("flag"), "text": s, "optional": True, "kind": "option"}
            entries.append(cur)
            continue
        if s.startswith("{"):
            cur = (
                None  # a non-literal operand (e.g. a helper message function): not part of an entry
            )
            continue
        if cur is not None:
            cur["text"] += "\n" + s
    out = []
    for e in entries:
        text = e["text"]
        flat = re.sub(r"\s*\n\s*", " ", text)
        if e["kind"] == "option":
            out.append(
                {
                    "position": None,
                    "name": e["flag"],
                    "text": text,
                    "codes": {},
                    "optional": True,
                    "default": _default(flat),
                    "kind": "option",
                }
            )
            continue
        rest = flat.split(":", 1)[1].strip()
        opt = e["optional"] or "(optional)" in rest.lower()
        if e["b"] is not None and e["b"] >= e["a"]:
            names = [n.strip() for n in rest.split(",")]
            count = e["b"] - e["a"] + 1
            if len(names) == count and all(names):
                for i, n in enumerate(names):
                    out.append(
                        {
                            "position": e["a"] + i,
                            "name": n,
                            "text": text,
                            "codes": {},
                            "optional": opt,
                            "default": None,
                            "kind": "positional",
                        }
                    )
                continue
        out.append(
            {
                "position": e["a"],
                "name": _entry_name(rest),
                "text": text,
                "codes": parse_codes(flat),
                "optional": opt,
                "default": _default(flat),
                "kind": "positional",
            }
        )
    return out


def _default(text: str) -> str | None:
    m = _DEFAULT.search(text)
    return m.group(1).rstrip(",)") if m else None

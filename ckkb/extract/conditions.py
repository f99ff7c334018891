"""C++ and preprocessor conditions as small JSON-able
expression trees (shared by the CK extractors).

`expr_tree` turns a tree-sitter condition node into {"op": ...} dicts that
ckkb.extract.availability evaluates per arch; `directive_stacks` / `preprocessor_guards` find the
`#if` sections around a line from the directive lines themselves.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache
from typing import Any

import tree_sitter as ts

from ckkb.extract.cpp import language, parse, text, walk

DEVICE_NAME_FN = "get_device_name"

# the #if sections open around one line: (directive line, directive text, section index)
DirectiveStack = tuple[tuple[int, str, int], ...]
# (directive_stacks, directive_sections) of one file
Directives = tuple[list[DirectiveStack], dict[int, list[tuple[int, str]]]]
_TEMPLATE_ARGS = re.compile(r"<.*")


def strip_ws(s: str) -> str:
    return " ".join(s.split())


def callee(node: ts.Node, src: bytes) -> str:
    """Last identifier of a call's function (`ck::is_xdl_supported` -> is_xdl_supported)."""
    fn = node.child_by_field_name("function")
    if fn is None:
        return ""
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name") or fn
    t = text(fn, src)
    if "<" in t:
        t = _TEMPLATE_ARGS.sub("", t)
    return t.rsplit("::", 1)[-1].strip()


def field_text(node: ts.Node, field: str, src: bytes) -> str:
    """The text of a node's child `field`, '' when it has none."""
    child = node.child_by_field_name(field)
    return text(child, src) if child is not None else ""


class NodeIndex:
    """Nodes of several types found by one tree-sitter query over a whole tree (a query costs about
    a tree walk however many types it matches): per type in pre-order (as cpp.walk gives them),
    the ones under a node (its descendants: a subtree is a byte range) found by bisection."""

    def __init__(self, node: ts.Node, types: tuple[str, ...]):
        self.node = node
        caps = ts.QueryCursor(_type_query(types)).captures(node)
        self.by_type: dict[str, list[ts.Node]] = {}
        self.starts: dict[str, list[int]] = {}
        for t in types:
            nodes = caps.get(t, [])
            keys = [(n.start_byte, -n.end_byte) for n in nodes]
            if len(nodes) > 1:
                if len(set(keys)) < len(keys):  # one extent twice: the walk knows which is outer
                    nodes = list(walk(node, t))
                    keys = [(n.start_byte, -n.end_byte) for n in nodes]
                else:
                    order = sorted(range(len(nodes)), key=keys.__getitem__)
                    nodes = [nodes[i] for i in order]
                    keys = [keys[i] for i in order]
            self.by_type[t] = nodes
            self.starts[t] = [k[0] for k in keys]

    def __getitem__(self, t: str) -> list[ts.Node]:
        return self.by_type[t]

    def within(self, t: str, outer: ts.Node) -> list[ts.Node]:
        nodes, starts = self.by_type[t], self.starts[t]
        a, b = outer.start_byte, outer.end_byte
        i, out = bisect_left(starts, a), []
        while i < len(nodes) and starts[i] <= b:
            n = nodes[i]
            if n.end_byte <= b:
                out.append(n)
            i += 1
        return out

    def merged(self, types: tuple[str, ...]) -> list[ts.Node]:
        """Nodes of several of the types, together in pre-order."""
        out = [n for t in types for n in self.by_type[t]]
        if len(types) < 2 or len(out) < 2:
            return out
        keys = [(n.start_byte, -n.end_byte) for n in out]
        if len(set(keys)) < len(keys):
            return list(walk(self.node, types))
        return [out[i] for i in sorted(range(len(out)), key=keys.__getitem__)]


# Compiled queries per process (module state on purpose): compiling one costs more than a walk.
@lru_cache(maxsize=16)
def _type_query(types: tuple[str, ...]) -> ts.Query:
    """One pattern per type, each captured under its type's name."""
    return ts.Query(language(), " ".join(f"({t}) @{t}" for t in types))


def _string_value(node: ts.Node, src: bytes) -> str | None:
    if node.type == "string_literal":
        return text(node, src).strip().strip('"')
    return None


def expr_tree(node: ts.Node | None, src: bytes, preproc: bool = False) -> dict[str, Any]:
    """A C++ (or #if) condition -> a small JSON-able tree the availability evaluator understands.

    {"op": "and"|"or", "args": [...]} | {"op": "not", "arg": ...} |
    {"op": "dev", "cmp": "=="|"!=", "arch": "gfx950"} | {"op": "cap", "name": "is_xdl_supported"} |
    {"op": "defined", "name": M} | {"op": "macro", "name": M} | {"op": "int", "value": n} |
    {"op": "cmp", "cmp": op, "args": [a, b]} | {"op": "unknown", "text": ...}
    """
    if node is None:
        return {"op": "unknown", "text": ""}
    t = node.type
    if t in ("parenthesized_expression", "condition_clause"):
        inner = node.child_by_field_name("value") or next(
            (c for c in node.named_children if c.type != "comment"), None
        )
        return expr_tree(inner, src, preproc)
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        ops = text(op, src) if op is not None else ""
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if ops in ("&&", "||", "and", "or"):
            kind = "and" if ops in ("&&", "and") else "or"
            args: list[dict[str, Any]] = []
            for side in (left, right):
                sub = expr_tree(side, src, preproc)
                args.extend(sub["args"] if sub["op"] == kind else [sub])
            return {"op": kind, "args": args}
        if ops in ("==", "!="):
            for a, b in ((left, right), (right, left)):
                if (
                    a is not None
                    and b is not None
                    and a.type == "call_expression"
                    and callee(a, src) == DEVICE_NAME_FN
                ):
                    lit = _string_value(b, src)
                    if lit is not None:
                        return {"op": "dev", "cmp": ops, "arch": lit}
        if ops in ("==", "!=", "<", ">", "<=", ">=") and preproc:
            return {
                "op": "cmp",
                "cmp": ops,
                "args": [expr_tree(left, src, preproc), expr_tree(right, src, preproc)],
            }
        return {"op": "unknown", "text": strip_ws(text(node, src))}
    if t == "unary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and text(op, src) in ("!", "not"):
            return {
                "op": "not",
                "arg": expr_tree(node.child_by_field_name("argument"), src, preproc),
            }
        return {"op": "unknown", "text": strip_ws(text(node, src))}
    if t == "call_expression":
        name = callee(node, src)
        if preproc and name == "defined":
            arg_list = node.child_by_field_name("arguments")
            macro = text(arg_list, src).strip("() \t") if arg_list is not None else ""
            return {"op": "defined", "name": macro}
        return {"op": "cap", "name": name, "text": strip_ws(text(node, src))}
    if t == "preproc_defined":
        ident = next((c for c in node.named_children if c.type == "identifier"), None)
        return {"op": "defined", "name": text(ident, src) if ident is not None else ""}
    if t == "number_literal":
        try:
            return {"op": "int", "value": int(text(node, src).rstrip("uUlL"), 0)}
        except ValueError:
            return {"op": "unknown", "text": text(node, src)}
    if t in ("true", "false"):
        return {"op": "int", "value": 1 if t == "true" else 0}
    if t == "identifier" and preproc:
        return {"op": "macro", "name": text(node, src)}
    return {"op": "unknown", "text": strip_ws(text(node, src))}


def atoms(tree: dict[str, Any]) -> list[dict[str, Any]]:
    if tree["op"] in ("and", "or", "cmp"):
        return [a for sub in tree["args"] for a in atoms(sub)]
    if tree["op"] == "not":
        return atoms(tree["arg"])
    return [tree]


def classify(tree: dict[str, Any], preproc: bool) -> str:
    """device_name | capability | preprocessor | other."""
    if preproc:
        return "preprocessor"
    ops = {a["op"] for a in atoms(tree)}
    if "dev" in ops:
        return "device_name"
    if "cap" in ops:
        return "capability"
    return "other"


def device_effect(tree: dict[str, Any]) -> tuple[str | None, str | None]:
    """For a device-name if: (effect of its then-branch, arch). `!=` excludes, `==` is 'only'; each
    enclosing `!` flips it; for an `&&`/`||` of several compares the first compare decides."""

    def find(t: dict[str, Any], neg: bool) -> tuple[str, str] | None:
        if t["op"] == "dev":
            eq = (t["cmp"] == "==") != neg
            return ("only" if eq else "exclude"), t["arch"]
        if t["op"] == "not":
            return find(t["arg"], not neg)
        for a in t.get("args", []) if t["op"] in ("and", "or") else []:
            r = find(a, neg)
            if r:
                return r
        return None

    return find(tree, False) or (None, None)


_DIRECTIVE = re.compile(rb"^\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b(.*)$")
# The same directive found from its `#` (a literal the regex engine searches for fast); the line's
# text before the `#` must be blank, which directives() checks.
_DIRECTIVE_HASH = re.compile(rb"#[^\S\n]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")


def directive_stacks(data: bytes) -> list[DirectiveStack]:
    """Per 1-based line: the open #if sections around it, outermost first, as
    (line of the directive, directive text, section index: 0 = first branch, k = after the k-th
    #elif/#else). Read from the directive lines themselves, so a construct tree-sitter cannot
    parse (an `#if` inside a template argument list) cannot make it nest code wrongly."""
    return directives(data)[0]


def directive_sections(data: bytes) -> dict[int, list[tuple[int, str]]]:
    """#if line -> its branch directives [(line, text)] in order (#if, #elif..., #else)."""
    return directives(data)[1]


def _directive_lines(data: bytes) -> tuple[list[tuple[int, int, str, str]], int]:
    """(first line, last line, kind, text) of every directive, in order, and the file's line count.
    A line ending in a backslash continues on the next (a directive spans them, and a directive
    cannot start on a continued line)."""
    if b"\\\n" in data:  # continued lines: read line by line (rare in CK's instance sources)
        return _directive_lines_joined(data)
    out: list[tuple[int, int, str, str]] = []
    nl, lineno, pos = 0, 1, 0
    while True:
        m = _DIRECTIVE_HASH.search(data, pos)
        if m is None:
            break
        s = m.start()
        ls = data.rfind(b"\n", 0, s) + 1
        pos = m.end()
        if data[ls:s].strip():
            continue  # `#` not at the start of its line
        lineno += data.count(b"\n", nl, ls)
        nl = ls
        le = data.find(b"\n", s)
        raw = data[ls:] if le < 0 else data[ls:le]
        pos = max(pos, ls + len(raw))
        txt = strip_ws(raw.decode("utf-8", "replace")).split("//", 1)[0].strip()
        out.append((lineno, lineno, m.group(1).decode(), txt))
    return out, data.count(b"\n") + 1


def _directive_lines_joined(data: bytes) -> tuple[list[tuple[int, int, str, str]], int]:
    lines = data.split(b"\n")
    out: list[tuple[int, int, str, str]] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        n = i + 1
        while raw.endswith(b"\\") and i + 1 < len(lines):
            i += 1
            raw = raw[:-1] + b" " + lines[i]
        m = _DIRECTIVE.match(raw)
        if m:
            txt = strip_ws(raw.decode("utf-8", "replace")).split("//", 1)[0].strip()
            out.append((n, i + 1, m.group(1).decode(), txt))
        i += 1
    return out, len(lines)


def directives(data: bytes) -> Directives:
    """(directive_stacks(data), directive_sections(data)) from one scan of the directive lines."""
    found, nlines = _directive_lines(data)
    stacks: list[DirectiveStack] = [()]
    sections: dict[int, list[tuple[int, str]]] = {}
    stack: list[list[Any]] = []  # [line, text, section]
    cur: DirectiveStack = ()
    for first, last, kind, txt in found:
        # lines before the directive, and the directive's own lines: the sections open before it
        stacks.extend([cur] * (last + 1 - len(stacks)))
        if kind in ("if", "ifdef", "ifndef"):
            stack.append([first, txt, 0])
            sections[first] = [(first, txt)]
        elif kind.startswith("elif") or kind == "else":
            if stack:
                stack[-1][2] += 1
                sections[stack[-1][0]].append((first, txt))
        elif kind == "endif" and stack:
            stack.pop()
        else:
            continue
        cur = tuple((e[0], e[1], e[2]) for e in stack)
    stacks.extend([cur] * (nlines + 1 - len(stacks)))
    return stacks, sections


# Process-wide memo of a pure function of its arguments (why module state): a tree repeats the same
# few `#if` lines in thousands of files; each parse is a tree-sitter run.
@lru_cache(maxsize=4096)
def directive_expr(directive: str) -> dict[str, Any]:
    """`#ifdef X` / `#if defined(A) || B` -> expression tree (parsed by tree-sitter on its own)."""
    m = re.match(r"#\s*(\w+)\s*(.*)$", directive)
    if not m:
        return {"op": "unknown", "text": directive}
    kind, rest = m.group(1), m.group(2).strip()
    if kind in ("ifdef", "elifdef"):
        return {"op": "defined", "name": rest.split()[0] if rest else ""}
    if kind in ("ifndef", "elifndef"):
        return {"op": "not", "arg": {"op": "defined", "name": rest.split()[0] if rest else ""}}
    src = f"#if {rest}\n#endif\n".encode()
    tree = parse(src)
    node = next(iter(walk(tree.root_node, "preproc_if")), None)
    if node is None:
        return {"op": "unknown", "text": directive}
    return expr_tree(node.child_by_field_name("condition"), src, preproc=True)


def preprocessor_guards(
    stack: DirectiveStack, sections: dict[int, list[tuple[int, str]]], rel: str
) -> list[dict[str, Any]]:
    """Guards for a line inside `stack`: for section k>0, every earlier branch is false and the
    k-th (#elif) is true (#else has no condition of its own)."""
    out = []
    for dline, _text, section in stack:
        branches = sections.get(dline) or [(dline, _text)]
        for k in range(min(section, len(branches) - 1) + 1):
            bline, btext = branches[k]
            if k < section:
                if btext.lstrip("#").strip().startswith("else"):
                    continue
                out.append(_pp(bline, btext, "else", rel, len(branches) > 1))
            elif not btext.lstrip("# ").startswith("else"):
                out.append(_pp(bline, btext, "then", rel, len(branches) > 1))
    return out


def _pp(line_no: int, txt: str, branch: str, rel: str, has_else: bool) -> dict[str, Any]:
    return {
        "kind": "preprocessor",
        "text": txt,
        "branch": branch,
        "file": rel,
        "line": line_no,
        "arch": None,
        "op": None,
        "expr": directive_expr(txt),
        "has_else": has_else,
    }

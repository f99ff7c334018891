"""Device-op class templates (`include/ck/tensor_operation/gpu/device/impl/*.hpp`) -> `device_ops`.

Every namespace-level class template whose name or first base names a `Device*` type is a device
op; its template parameter list, in order, names the fields of every instance that instantiates it.
Generic over the whole directory: nothing here knows a particular op.

CK's headers are hard on tree-sitter (macros such as `GET_NXDL_PER_WAVE_IMPL`, `__launch_bounds__`
under `#if`), so a class may sit inside an ERROR node. The parameter list and the `struct` that
follows it are still siblings there, and that is all this stage needs. When a header defines a
class template twice (a primary and a partial specialisation, or a forward declaration and the
definition), the primary definition wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tree_sitter as ts

from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.conditions import field_text
from ckkb.extract.files import list_files
from ckkb.kb.schema.ck_instances import DeviceOpRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult
from ckkb.sources import CK_IMPL_DIR

NAME = "ck.templates"

_NESTED = ("field_declaration_list", "compound_statement")


def _outer_param_lists(root: ts.Node) -> list[ts.Node]:
    """Template parameter lists not nested in a class or function body, in pre-order (= source
    order). A cursor walk that does not enter those bodies visits a small part of a device-op
    header, where a query (or a full walk) has to cover all of it."""
    out = []
    cur = root.walk()
    while (node := cur.node) is not None:
        t = node.type
        if t == "template_parameter_list":
            out.append(node)
        if t not in _NESTED and cur.goto_first_child():
            continue
        while not cur.goto_next_sibling():
            if not cur.goto_parent():
                return out
    return out


def _head(plist: ts.Node, src: bytes) -> dict[str, Any] | None:
    """The class declared right after a template
    parameter list: name, base, body, specialisation."""
    nxt = plist.next_sibling
    while nxt is not None and nxt.type == "comment":
        nxt = nxt.next_sibling
    if nxt is None:
        return None
    if (
        nxt.type == "declaration"
        and nxt.named_child_count
        and nxt.named_children[0].type in ("struct_specifier", "class_specifier")
    ):
        nxt = nxt.named_children[0]  # `struct X : Base {...} MACRO;` recovered as a declaration
    if nxt.type in ("struct_specifier", "class_specifier"):
        name = nxt.child_by_field_name("name")
        has_body = nxt.child_by_field_name("body") is not None
        bases = next((c for c in nxt.named_children if c.type == "base_class_clause"), None)
    elif nxt.type in ("struct", "class") or (
        nxt.type == "ERROR" and cpp.text(nxt, src).strip() in ("struct", "class")
    ):
        # Recovered inside an ERROR node: `struct` Name base_class_clause ... as loose siblings.
        name = nxt.next_named_sibling
        bases = name.next_named_sibling if name is not None else None
        if bases is not None and bases.type != "base_class_clause":
            bases = None
        # the body follows in the recovered region; this is not a bare forward declaration
        has_body = True
    else:
        return None
    if name is None or name.type not in ("type_identifier", "template_type"):
        return None
    specialised = name.type == "template_type"
    cls = field_text(name, "name", src) if specialised else cpp.text(name, src)
    base, base_args = None, []
    if bases is not None:
        first = next(
            (c for c in bases.named_children if c.type not in ("access_specifier", "comment")), None
        )
        if first is not None:
            if first.type == "template_type":
                base = field_text(first, "name", src)
                args = first.child_by_field_name("arguments")
                base_args = (
                    [
                        cpp.squash(cpp.text(a, src))
                        for a in args.named_children
                        if a.type != "comment"
                    ]
                    if args
                    else []
                )
            elif first.type == "qualified_identifier":
                base = cpp.squash(cpp.text(first, src))
                if "<" in base:
                    base = base.split("<", 1)[0]
            else:
                base = cpp.squash(cpp.text(first, src))
            base = base.rsplit("::", 1)[-1]
    return {
        "name": cls,
        "specialised": specialised,
        "has_body": has_body,
        "base": base,
        "base_args": base_args,
    }


def _is_ge(toks: list, k: int, src: bytes) -> bool:
    """`>` lexed apart from a following `=` (tree-sitter splits `>=` inside template arguments)."""
    return (
        k + 1 < len(toks)
        and toks[k + 1][1] == "="
        and toks[k][0].end_byte == toks[k + 1][0].start_byte
    )


def _from_tokens(tree: ts.Tree, src: bytes, rel: str, diags: list[Diagnostic]) -> list[DeviceOpRow]:
    """Fallback when no class template could be read from the tree (e.g. CK's
    `typename std::enable_if<N >= 1 && N <= 3, bool>::type = false` parameter, which tree-sitter
    cannot parse): walk the tokens back from `struct Device...` to `template <`, split the
    parameter list at top-level commas and parse each parameter on its own."""
    toks = [
        (n, cpp.text(n, src))
        for n in cpp.walk(tree.root_node)
        if n.child_count == 0 and n.type != "comment" and n.end_byte > n.start_byte
    ]
    rows = []
    for i, (_node, word) in enumerate(toks):
        if word not in ("struct", "class") or i + 1 >= len(toks) or "Device" not in toks[i + 1][1]:
            continue
        name = toks[i + 1][1]
        if i + 2 < len(toks) and toks[i + 2][1] == "<":
            continue  # a specialisation
        if i < 2 or toks[i - 1][1] != ">":
            continue
        depth, k, start = 0, i - 1, None
        while k >= 0:
            w = toks[k][1]
            if w == ">" and not _is_ge(toks, k, src):
                depth += 1
            elif w == ">>":
                depth += 2
            elif w == "<":
                depth -= 1
                if depth == 0:
                    start = k
                    break
            k -= 1
        if start is None or start == 0 or toks[start - 1][1] != "template":
            continue
        chunks: list[list] = [[]]
        depth = 0
        for k in range(start + 1, i - 1):
            w = toks[k][1]
            if w in ("<", "(", "["):
                depth += 1
            elif (w == ">" and not _is_ge(toks, k, src)) or w in (")", "]"):
                depth -= 1
            elif w == ">>":
                depth -= 2
            if w == "," and depth == 0:
                chunks.append([])
            else:
                chunks[-1].append(toks[k])
        params = [_param_from_chunk(c, src) for c in chunks if c]
        bad = [p for p in params if p["kind"] == "unknown"]
        line = cpp.line(toks[start - 1][0])
        if bad:
            diags.append(
                Diagnostic(
                    rel,
                    line,
                    f"template parameters of {name} only partly readable",
                    "warning",
                    NAME,
                )
            )
        base = None
        if i + 2 < len(toks) and toks[i + 2][1] == ":":
            for _n, w in toks[i + 3 : i + 12]:
                if w in ("public", "private", "protected", "virtual", "::"):
                    continue
                if w in ("<", "{"):
                    break
                base = w
        rows.append(
            DeviceOpRow(name=name, file=rel, line=line, params=params, base=base, base_args=[])
        )
    return rows


def _param_from_chunk(chunk: list, src: bytes) -> dict:
    text = src[chunk[0][0].start_byte : chunk[-1][0].end_byte].decode("utf-8", "replace")
    wrapped = f"template <{text}> struct __ckkb_p;".encode()
    tree = cpp.parse(wrapped)
    if not tree.root_node.has_error:
        plist = cpp.find(tree.root_node, "template_parameter_list")
        got = cpp.template_params(plist[0], wrapped) if plist else []
        if len(got) == 1:
            return got[0]
    # unparseable alone too: a SFINAE parameter
    # (`typename std::enable_if<...>::type = false`) is unnamed
    eq = [
        k
        for k, (n, w) in enumerate(chunk)
        if w == "="
        and not (k and chunk[k - 1][1] == ">" and chunk[k - 1][0].end_byte == n.start_byte)
    ]
    if eq:
        head = src[chunk[0][0].start_byte : chunk[eq[-1] - 1][0].end_byte].decode(
            "utf-8", "replace"
        )
        default = (
            src[chunk[eq[-1] + 1][0].start_byte : chunk[-1][0].end_byte].decode("utf-8", "replace")
            if eq[-1] + 1 < len(chunk)
            else None
        )
        return {
            "name": "",
            "kind": "value",
            "type": cpp.squash(head),
            "default": cpp.squash(default) if default else None,
        }
    return {"name": cpp.squash(text), "kind": "unknown", "type": None, "default": None}


def _found_in_tree(
    tree: ts.Tree, rel: str, data: bytes, diags: list[Diagnostic]
) -> dict[str, tuple[int, DeviceOpRow]]:
    """Device-op class templates declared at namespace level
    in `tree`: name -> (rank, row); lower rank wins."""
    found: dict[str, tuple[int, DeviceOpRow]] = {}
    # (member templates - Argument, Invoker, ... - sit in class bodies: not device ops)
    for plist in _outer_param_lists(tree.root_node):
        if plist.parent is None or plist.parent.type == "template_template_parameter_declaration":
            continue
        head = _head(plist, data)
        if head is None:
            continue
        if "Device" not in head["name"] and "Device" not in (head["base"] or ""):
            continue
        params = cpp.template_params(plist, data)
        tpl = plist.prev_sibling
        line = cpp.line(tpl if tpl is not None and tpl.type == "template" else plist)
        bad = [p for p in params if p["kind"] == "unknown"]
        if bad or plist.has_error:
            err = next((n for n in cpp.walk(plist) if n.type == "ERROR" or n.is_missing), plist)
            diags.append(
                Diagnostic(
                    rel,
                    cpp.line(err),
                    f"template parameters of {head['name']} only partly readable",
                    "warning",
                    NAME,
                )
            )
        # primary definition (0) beats forward declaration (1) beats partial specialisation (2)
        rank = 2 if head["specialised"] else (0 if head["has_body"] else 1)
        row = DeviceOpRow(
            name=head["name"],
            file=rel,
            line=line,
            params=params,
            base=head["base"],
            base_args=head["base_args"],
        )
        if head["name"] not in found or rank < found[head["name"]][0]:
            found[head["name"]] = (rank, row)
    return found


def extract(root: Path, rel: str, data: bytes) -> FileResult:
    res = FileResult()
    if cpp.is_binary(data):
        res.diagnostics.append(Diagnostic(rel, 0, "binary file, not C++: skipped", "warning", NAME))
        return res
    if b"template" not in data or b"Device" not in data:
        return res
    # The view typestrings parses too (macro lines and dead #if branches blanked): in a build, one
    # parse serves both stages. Where that view loses every class (tree-sitter recovers
    # differently), the header is read as written.
    diags: list[Diagnostic] = []
    tree = cpp.parse(cpp.for_parsing(data))
    found = _found_in_tree(tree, rel, data, diags)
    if not found:
        diags = []
        tree = cpp.parse(data)
        found = _found_in_tree(tree, rel, data, diags)
    res.diagnostics.extend(diags)
    if (
        not found
        and tree.root_node.has_error
        and (b"struct Device" in data or b"class Device" in data)
    ):
        for row in _from_tokens(tree, data, rel, res.diagnostics):
            found.setdefault(row.name, (0, row))
    res.rows = [row for _, row in found.values()]
    res.facts["ranks"] = {name: rank for name, (rank, _) in found.items()}
    if (
        not found
        and tree.root_node.has_error
        and (b"struct Device" in data or b"class Device" in data)
    ):
        lines = cpp.error_lines(tree)
        where = ", ".join(map(str, lines[:5]))
        res.diagnostics.append(
            Diagnostic(
                rel,
                lines[0] if lines else 0,
                f"no device-op template readable (parse errors at lines {where})",
                "warning",
                NAME,
            )
        )
    return res


def combine(root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
    """One row per (name, header): two headers defining the same class template are both kept
    (instances pick theirs by what they include); forward declarations elsewhere are dropped."""
    out = StageResult()
    by_name: dict[str, list[tuple[int, DeviceOpRow]]] = {}
    for rel in sorted(results):
        fr = results[rel]
        ranks = fr.facts.get("ranks", {})
        for row in fr.rows:
            by_name.setdefault(row.name, []).append((ranks.get(row.name, 0), row))
    rows: list[DeviceOpRow] = []
    for name in sorted(by_name):
        cands = by_name[name]
        best = min(r for r, _ in cands)
        rows.extend(row for r, row in cands if r == best)
    for i, row in enumerate(rows, start=1):
        row.id = i
    out.rows = rows
    return out


class _Stage:
    name = NAME
    version = "3"  # bump whenever extract() output changes
    tree = "ck"
    reads = ()
    writes = ("device_ops",)
    combine_cost = 0.0  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        return list_files(root, CK_IMPL_DIR, (".hpp",))

    extract = staticmethod(extract)
    combine = staticmethod(combine)


STAGE = _Stage()

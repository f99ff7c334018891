"""Instance lists (`using NAME = std::tuple<...>`) under CK's instance trees -> `instance_lists`, `instances`.

`extract` (per file, in a worker) reads with tree-sitter: the file's aliases (`using BF16 = bhalf_t;`,
`template <index_t... Is> using S = Sequence<Is...>;`, `static constexpr auto GemmDefault = ...;`),
its `#include`s, and every tuple alias with its template parameters, the comment block above it and
its entries (active ones and the ones commented out inside the tuple, each with its nearest reason
comment). Arguments are kept as small expression trees (plain tuples, picklable).

`combine` (once, in the parent) resolves each entry's arguments with the aliases of the file and of
the headers it includes (transitively, within the trees read here), picks the device op the entry
names (`device_ops`, by the header the file includes when two headers define the same name), maps
positional arguments to the op's template parameter names and derives the normalised columns.

Files read: `library/src/tensor_operation_instance/gpu/**` (`.cpp`, `.hpp`, `.in`) and the headers
under `library/include/ck/library/tensor_operation_instance/gpu/**`, which hold the instance lists
(and aliases) that many convolution and reduction sources include.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ckkb import fields as ckfields
from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.files import list_files
from ckkb.kb.schema.ck_instances import DeviceOpRow, InstanceListRow, InstanceRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult
from ckkb.sources import CK_FACTORY_DIR, CK_INSTANCE_DIR

NAME = "ck.instances"
VERSION = "2"  # bump whenever extract() output changes: cached per-file results are keyed by it

ROOTS = (CK_INSTANCE_DIR, CK_FACTORY_DIR)
SUFFIXES = (".cpp", ".hpp", ".in")

# Where `#include "X"` may point, relative to the CK root (CK's include directories).
INCLUDE_DIRS = ("include", "library/include", "library/src/tensor_operation_instance/gpu")

_CMAKE_VAR = re.compile(rb"@([A-Za-z_][A-Za-z0-9_]*)@")  # CMake configure_file tokens (not C++)
# Byte pre-filter only (the parse is tree-sitter's): a source that may alias another instance list,
# `using X_instance = device_..._instance<F64, ...>;`, with no `tuple` of its own.
_MAYBE_LIST_ALIAS = re.compile(rb"using\s+\w+\s*=\s*[\w:]+_instances?\s*<")
_NS_PREFIXES = (
    "ck::tensor_operation::device::instance::",
    "ck::tensor_operation::device::",
    "ck::tensor_operation::",
    "ck::",
)

Expr = tuple  # ("int", v) | ("bool", v) | ("name", s) | ("tmpl", name, [Expr]) | ("pack", s) | ("bin", op, a, b) | ("neg", a) | ("text", s)


# ---------------------------------------------------------------- small helpers


def dir_of(rel: str) -> str:
    """The directory right under gpu/ ('' for a file directly in gpu/)."""
    for base in ROOTS:
        if rel.startswith(base + "/"):
            rest = rel[len(base) + 1 :].split("/")
            return rest[0] if len(rest) > 1 else ""
    return ""


_SHORT: dict[str, str] = {}


def short(name: str) -> str:
    """Spell a qualified name the way CK's instance files do inside `ck::tensor_operation::device::instance`."""
    s = _SHORT.get(name)
    if s is None:
        s = name
        for p in _NS_PREFIXES:
            if name.startswith(p):
                s = name[len(p) :]
                break
        if len(_SHORT) < 100_000:
            _SHORT[name] = s
    return s


def _is_header_comment(body: str) -> bool:
    """CK's `//####| ALayout| BLayout|...` column tables and `clang-format` switches: never a reason."""
    b = body.strip()
    return (
        b.startswith("#")
        or b.count("|") >= 3
        or b.startswith("clang-format")
        or not b.strip("-=#*/ ")
    )


# ---------------------------------------------------------------- C++ -> expression trees


_NAMES = frozenset(("type_identifier", "identifier", "primitive_type", "namespace_identifier"))
_LT = ord("<")


def template_parts(node, src: bytes):
    """(name node, argument nodes) when `node` is a template instantiation `Name<args>`, else None.

    Also reads the form cpp.tuple_lists_as_calls' view gives it, a call `Name(args)` whose `(` is a
    `<` in `src` (the real text): a real call is not a template."""
    t = node.type
    if t == "template_type" or t == "template_function":
        args = node.child_by_field_name("arguments")
        return node.child_by_field_name("name"), (args.named_children if args is not None else [])
    if t == "call_expression":
        args = node.child_by_field_name("arguments")
        if args is not None and src[args.start_byte] == _LT:
            return node.child_by_field_name("function"), args.named_children
    return None


def _misread_in_view(found: dict[str, list], src: bytes) -> bool:
    """Whether an entry of a list reads as a function type in the view (`Op(Row, Col)`, every
    argument a type name), where tree-sitter may take `true` for a type: such a file is read as written."""
    for decl in found["alias_declaration"]:
        args = _tuple_args(decl, src)
        for c in args.named_children if args is not None else ():
            if c.type == "type_descriptor" and c.named_child_count == 2:
                d = c.child_by_field_name("declarator")
                if (
                    d is not None
                    and d.type == "abstract_function_declarator"
                    and src[d.start_byte] == _LT
                ):
                    return True
    return False


def to_expr(node, src: bytes) -> Expr:
    # hot path (a million nodes on the full tree): the common node types first, cheap calls only
    t = node.type
    if t == "type_descriptor":
        if node.named_child_count == 1:
            return to_expr(node.named_child(0), src)
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
    if t in (
        "template_type",
        "template_function",
    ):  # `S<0>` in an expression position reads as a template_function
        name = node.child_by_field_name("name")
        args = node.child_by_field_name("arguments")
        return (
            "tmpl",
            cpp.text(name, src),
            tuple(
                _arg_expr(a, src)
                for a in (args.named_children if args else [])
                if a.type != "comment"
            ),
        )
    if t in ("true", "false"):
        return ("bool", t == "true")
    if t == "call_expression":
        parts = template_parts(node, src)
        if parts is not None:
            return _tmpl_expr(parts, src)
    if t == "sized_type_specifier":
        return ("name", cpp.squash(cpp.text(node, src)))
    if t == "qualified_identifier":
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
            inner = to_expr(cur, src)
            return ("tmpl", prefix + inner[1], inner[2])
        return ("name", prefix + cpp.text(cur, src))
    if t == "parameter_pack_expansion":
        inner = node.named_children[0] if node.named_child_count else None
        return ("pack", cpp.squash(cpp.text(inner, src)) if inner is not None else "")
    if t == "parenthesized_expression" and node.named_child_count == 1:
        return to_expr(node.named_children[0], src)
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is not None and left is not None and right is not None:
            return ("bin", cpp.text(op, src), to_expr(left, src), to_expr(right, src))
    if t == "unary_expression":
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        if op is not None and arg is not None and cpp.text(op, src) == "-":
            return ("neg", to_expr(arg, src))
    return ("text", cpp.squash(cpp.text(node, src)))


def _tmpl_expr(parts, src: bytes) -> Expr:
    """("tmpl", name, args) of a template read as a call (see template_parts); the name as to_expr
    spells it, so `ck::Tuple(Row)` reads like `ck::Tuple<Row>`."""
    name_node, args = parts
    name = to_expr(name_node, src)
    if name[0] != "name":
        return ("text", cpp.squash(cpp.text(name_node.parent, src)))
    return ("tmpl", name[1], tuple(_arg_expr(a, src) for a in args if a.type != "comment"))


_ARG_MEMO: dict[tuple[str, bytes], Expr] = {}


def _arg_expr(node, src: bytes) -> Expr:
    """to_expr of a template argument, memoised on its node type and text: CK repeats the same
    arguments (`S<8, 32, 1>`, `PassThrough`, `256`) tens of thousands of times. Exprs are tuples."""
    key = (node.type, src[node.start_byte : node.end_byte])
    e = _ARG_MEMO.get(key)
    if e is None:
        if len(_ARG_MEMO) > 200_000:
            _ARG_MEMO.clear()
        e = _ARG_MEMO[key] = to_expr(node, src)
    return e


# ---------------------------------------------------------------- per-file extraction


def _mask_cmake(data: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """`@VAR@` -> `_VAR_` (same length, so offsets and lines hold) and where each token was."""
    found = [(m.start(), m.group(1).decode()) for m in _CMAKE_VAR.finditer(data)]
    if not found:
        return data, []
    return _CMAKE_VAR.sub(lambda m: b"_" + m.group(1) + b"_", data), found


def _comment_block_above(node, src: bytes) -> str:
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


def _template_params_of(decl) -> tuple[Any, list[dict]]:
    """(template_declaration node or None, [{"name", "type"}]) for an alias declaration."""
    parent = decl.parent
    if parent is not None and parent.type == "template_declaration":
        return parent, parent.child_by_field_name("parameters")
    return None, None


def _tuple_args(decl, src: bytes):
    """The template_argument_list of `std::tuple<...>` when `decl` is `using X = std::tuple<...>`."""
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


# A comma between arguments: the next bracket after it (if any) is not a `>`. Only ever splits too
# much (a comma inside `X<A, B<1>>`), never too little, so a count that agrees with the tree's is right.
_ARG_COMMA = re.compile(rb",(?![^<>]*>)")


def _split_args(body: bytes) -> list[bytes]:
    """The arguments in the real text of a view-form argument list (`Row, 256, S<8, 32, 1>`), each as
    its node's text; in a list the view changed, every `<`/`>` is a template bracket (see
    cpp.tuple_lists_as_calls). The caller checks the count against the tree's."""
    return [p.strip() for p in _ARG_COMMA.split(body)]


# Facts of a view-form argument by its text: in a call's argument list each text has one reading
# (no `<` to guess at), so the node type need not be part of the key (it is in _ARG_FACTS').
_VIEW_ARG_FACTS: dict[bytes, tuple[Expr, str]] = {}


def _entry_facts(node, src: bytes, line: int) -> dict:
    inner = (
        node.named_child(0)
        if node.type == "type_descriptor" and node.named_child_count == 1
        else node
    )
    if inner.type == "call_expression":
        facts = _view_entry_facts(node, inner, src, line)
        if facts is not None:
            return facts
    return _entry_facts_from_nodes(node, inner, src, line)


def _view_entry_facts(node, call, src: bytes, line: int) -> dict | None:
    """An entry of the view (`Op(Row, 256, S(8, 32, 1))`, see template_parts), its arguments read
    from the real text between the tree's brackets instead of one node each, when the tree agrees
    on how many there are: most arguments were seen before. None: not that form (the node reader
    takes it)."""
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if fn is None or fn.type != "identifier" or args is None or src[args.start_byte] != _LT:
        return None
    body = src[args.start_byte + 1 : args.end_byte - 1]
    if b"/" in body:  # a comment to step over
        return None
    pieces = _split_args(body)
    if len(pieces) != args.named_child_count:
        return None
    get = _VIEW_ARG_FACTS.get
    facts = [get(p) for p in pieces]
    if None in facts:  # read it from the nodes, and remember what each text reads as
        entry = _entry_facts_from_nodes(node, call, src, line)
        exprs = entry["exprs"]
        if exprs is not None and len(exprs) == len(pieces) and len(_VIEW_ARG_FACTS) < 200_000:
            for p, e, a in zip(pieces, exprs, entry["args"], strict=True):  # lengths checked above
                _VIEW_ARG_FACTS[p] = (e, a)
        return entry
    return {
        "line": line,
        "template": cpp.text(fn, src),
        "args": [f[1] for f in facts],
        "exprs": tuple(f[0] for f in facts),
    }


def _entry_facts_from_nodes(node, inner, src: bytes, line: int) -> dict:
    parts = template_parts(inner, src)
    if parts is not None and (
        inner.type in ("template_type", "template_function")
        or parts[0].type in ("type_identifier", "identifier")
    ):
        # the common entry `Op<a, b, ...>`: each argument's expression and text from one memo
        memo = _ARG_FACTS
        facts = []
        for a in parts[1]:  # the build's hottest loop: inlined memo
            t = a.type
            if t == "comment":
                continue
            f = memo.get((t, src[a.start_byte : a.end_byte]))
            facts.append(f if f is not None else _arg_facts(a, src))
        return {
            "line": line,
            "template": cpp.text(parts[0], src),
            "args": [f[1] for f in facts],
            "exprs": tuple(f[0] for f in facts),
        }
    e = to_expr(node, src)
    if e[0] == "tmpl":
        args_nodes = [a for a in node_args(node, src) if a.type != "comment"]
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


_ARG_FACTS: dict[tuple[str, bytes], tuple[Expr, str]] = {}


def _arg_facts(node, src: bytes) -> tuple[Expr, str]:
    """(expression, text as written minus layout) of a template argument, memoised like _arg_expr."""
    key = (node.type, src[node.start_byte : node.end_byte])
    f = _ARG_FACTS.get(key)
    if f is None:
        if len(_ARG_FACTS) > 200_000:
            _ARG_FACTS.clear()
        f = _ARG_FACTS[key] = (
            _arg_expr(node, src),
            " ".join(key[1].decode("utf-8", "replace").split()),
        )
    return f


def node_args(node, src: bytes):
    """Argument nodes of a (possibly qualified) template type node (or of its view form: template_parts)."""
    parts = template_parts(node, src)
    cur = (
        node.child_by_field_name("type")
        if parts is None and node.type == "type_descriptor"
        else node
    )
    while parts is None and cur is not None:
        parts = template_parts(cur, src)
        if parts is not None or cur.type != "qualified_identifier":
            break
        cur = cur.child_by_field_name("name")
    return list(parts[1]) if parts is not None else []


def _looks_like_entry(body: str) -> bool:
    b = body.lstrip()
    return bool(b) and (b[0].isalpha() or b[0] == "_") and "<" in b and "|" not in b


def _commented_entries(group: list[tuple[int, str]]) -> list[dict] | None:
    """Parse commented-out text (lines of one comment group) as tuple entries; None when it is prose."""
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
        e = _entry_facts(a, wrapped, group[min(a.start_point[0], len(group) - 1)][0])
        if e["exprs"] is None:
            return None  # `foo<bar` in prose, not an entry
        out.append(e)
    return out or None


def _list_entries(args, src: bytes, rel: str, diags: list[Diagnostic]) -> list[dict]:
    """Entries of a tuple's argument list, in order, with commented-out ones in place."""
    entries: list[dict] = []
    reason = ""
    reason_end = -2
    children = list(args.children)
    i = 0
    while i < len(children):
        c = children[i]
        if c.type == "comment":
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
                        (cpp.line(children[j]) + k, ln) for k, ln in enumerate(more.splitlines())
                    )
                    depth += more.count("<") - more.count(">")
                    j += 1
                parsed = _commented_entries(group)
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
        if c.type in ("<", ">", ","):
            i += 1
            continue
        if c.type == "ERROR":
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
        e = _entry_facts(c, src, cpp.line(c))
        e["status"] = "active"
        e["reason"] = reason
        entries.append(e)
        i += 1
    return entries


_DECL_TYPES = ("alias_declaration", "declaration", "type_definition", "preproc_include")


def _declarations(root) -> dict[str, list]:
    """The file's declarations of _DECL_TYPES in source order, from a cursor walk that does not enter
    template argument lists: those hold most of an instance file's nodes (every entry's arguments)
    and no declaration, so a query over the whole tree (or a full walk) spends most of its time there."""
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


def _aliases(found: dict[str, list], src: bytes) -> dict[str, dict]:
    """Namespace-level aliases and constants of one file: name -> {"params": [...]?, "expr": Expr, "line"}.

    Instance lists themselves (`using X = std::tuple<...>`) are not aliases anything resolves through."""
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
        entry: dict[str, Any] = {"expr": to_expr(td, src), "line": cpp.line(decl)}
        if plist is not None:
            entry["params"] = [p["name"] for p in cpp.template_params(plist, src)]
        out[cpp.text(name, src)] = entry
    for decl in found["declaration"]:
        if not any(
            c.type == "type_qualifier" and cpp.text(c, src) == "constexpr" for c in decl.children
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
                out[cpp.text(d, src)] = {"expr": to_expr(v, src), "line": cpp.line(init)}
    for td in found["type_definition"]:  # typedef X Y;
        ty, d = td.child_by_field_name("type"), td.child_by_field_name("declarator")
        if (
            ty is not None
            and d is not None
            and d.type == "type_identifier"
            and not cpp.is_nested_in(td, ("compound_statement", "field_declaration_list"))
        ):
            out[cpp.text(d, src)] = {"expr": to_expr(ty, src), "line": cpp.line(td)}
    return out


def _includes(found: dict[str, list], src: bytes) -> list[str]:
    out = []
    for inc in found["preproc_include"]:
        p = inc.child_by_field_name("path")
        if p is not None and p.type == "string_literal":
            out.append(cpp.text(p, src).strip('"'))
    return out


def _list_alias(decl, src: bytes, data: bytes, guards: dict) -> dict | None:
    """`using NAME = other_list<args>;` (NAME ending in _instance/_instances): a candidate alias of
    another instance list; `combine` keeps it when `other_list` is one."""
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
    e = to_expr(td, data)
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


def extract(root: Path, rel: str, data: bytes) -> FileResult:
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
    if rel.startswith(CK_FACTORY_DIR + "/") and not has_tuple and dir_of(rel) == "":
        return res  # factory headers (A2's stage) declare add functions, not aliases lists need
    src, cmake_vars = _mask_cmake(data) if rel.endswith(".in") else (data, [])
    src, guards = cpp.mask_conditionals(src) if b"#if" in src else (src, {})
    view = (
        cpp.tuple_lists_as_calls(src) if has_tuple else src
    )  # parses in half the time (see there)
    tree = cpp.parse(view)
    found = _declarations(tree.root_node)
    if view is not src and (tree.root_node.has_error or _misread_in_view(found, data)):
        # damaged somewhere, or an entry the view cannot read: read (and report) as from the real text
        tree = cpp.parse(src)
        found = _declarations(tree.root_node)
    res.facts["aliases"] = _aliases(found, data)
    res.facts["includes"] = _includes(found, data)
    lists = []
    list_aliases = []
    if has_tuple or maybe_alias:
        for decl in found["alias_declaration"]:
            args = _tuple_args(decl, src)
            if args is None:
                alias = _list_alias(decl, src, data, guards)
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
            entries = _list_entries(args, data, rel, diags)
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


# ---------------------------------------------------------------- resolution (combine)


_MISS = object()


class Resolver:
    """Resolve expression trees with an alias environment (a file's aliases over its includes')."""

    def __init__(
        self,
        env: dict[str, dict],
        tparams: set[str],
        bindings: dict[str, Any] | None = None,
        memo: dict | None = None,
    ):
        self.env = env
        self.tparams = tparams
        self.bindings = (
            bindings or {}
        )  # template parameter -> value, when a list alias instantiates a list
        # expression -> value; shared by every list of one file with the same parameters (the same
        # `S<1, 0, 2>` recurs thousands of times). Values are shared, never mutated.
        self.memo = memo if memo is not None and not self.bindings else None

    def lookup(self, name: str) -> dict | None:
        if name in self.tparams:
            return None
        hit = self.env.get(name)
        if hit is None and "::" in name:
            hit = self.env.get(short(name))
        return hit

    def __call__(self, e: Expr, depth: int = 0) -> Any:
        memo = self.memo
        if memo is None:
            return self._resolve(e, depth)
        try:
            return memo[e]
        except KeyError:
            v = memo[e] = self._resolve(e, depth)
            return v
        except TypeError:  # an unhashable expression (a bound pack): no memo
            return self._resolve(e, depth)

    def all(self, exprs: tuple[Expr, ...]) -> list[Any]:
        """[self(e) for e in exprs], with the memo read inline: 475,000 arguments go through here."""
        memo = self.memo
        if memo is None:
            return [self(e) for e in exprs]
        get = memo.get
        out = []
        try:
            for e in exprs:
                v = get(e, _MISS)
                out.append(self(e) if v is _MISS else v)
        except TypeError:  # an unhashable expression (a bound pack)
            return [self(e) for e in exprs]
        return out

    def _resolve(self, e: Expr, depth: int) -> Any:
        if depth > 40:
            return fmt(e)
        kind = e[0]
        if kind in ("int", "bool"):
            return e[1]
        if kind == "name":
            if e[1] in self.bindings:
                return self.bindings[e[1]]
            hit = self.lookup(e[1])
            if hit is not None and "params" not in hit and hit["expr"] != e:
                return self(hit["expr"], depth + 1)
            return short(e[1])
        if kind == "tmpl":
            name, args = e[1], e[2]
            hit = self.lookup(name)
            if hit is not None and "params" in hit:
                return self(substitute(hit["expr"], hit["params"], args), depth + 1)
            if hit is not None and hit["expr"][0] == "name":
                name = self(hit["expr"], depth + 1)  # using Seq = ck::Sequence; (rare)
            vals = [self(a, depth + 1) for a in args]
            if short(str(name)).rsplit("::", 1)[-1] == "Sequence":
                return vals
            return f"{short(str(name))}<{', '.join(fmt_value(v) for v in vals)}>"
        if kind == "bin":
            a, b = self(e[2], depth + 1), self(e[3], depth + 1)
            return binop(e[1], a, b)
        if kind == "neg":
            a = self(e[1], depth + 1)
            return -a if isinstance(a, int) and not isinstance(a, bool) else f"-{fmt_value(a)}"
        if kind == "pack":
            return e[1] + "..."
        return e[1]


def substitute(e: Expr, params: list[str], args: list[Expr]) -> Expr:
    """Replace a template alias's parameters by the arguments it is used with (a pack takes the rest)."""
    binding: dict[str, Any] = {}
    for i, p in enumerate(params):
        if _is_pack_use(e, p):
            binding[p] = list(args[i:])
            break
        if i < len(args):
            binding[p] = args[i]

    def sub(x: Expr) -> Expr:
        k = x[0]
        if k == "name" and x[1] in binding and not isinstance(binding[x[1]], list):
            return binding[x[1]]
        if k == "tmpl":
            new: list[Expr] = []
            for a in x[2]:
                if a[0] == "pack" and a[1] in binding:
                    b = binding[a[1]]
                    new.extend(b if isinstance(b, list) else [b])
                else:
                    new.append(sub(a))
            return ("tmpl", x[1], tuple(new))
        if k == "bin":
            return ("bin", x[1], sub(x[2]), sub(x[3]))
        if k == "neg":
            return ("neg", sub(x[1]))
        return x

    return sub(e)


def _is_pack_use(e: Expr, p: str) -> bool:
    if e[0] == "pack":
        return e[1] == p
    if e[0] == "tmpl":
        return any(_is_pack_use(a, p) for a in e[2])
    return False


def binop(op: str, a: Any, b: Any) -> Any:
    if (
        isinstance(a, int)
        and isinstance(b, int)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        try:
            return {
                "+": a + b,
                "-": a - b,
                "*": a * b,
                "/": int(a / b) if b else None,
                "%": a % b if b else None,
                "<<": a << b,
                ">>": a >> b,
                "&": a & b,
                "|": a | b,
                "<": a < b,
                ">": a > b,
                "<=": a <= b,
                ">=": a >= b,
                "==": a == b,
                "!=": a != b,
            }.get(op, f"{a} {op} {b}")
        except (ValueError, OverflowError):
            pass
    return f"{fmt_value(a)} {op} {fmt_value(b)}"


def fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "Sequence<" + ", ".join(fmt_value(x) for x in v) + ">"
    return str(v)


def fmt(e: Expr) -> str:
    k = e[0]
    if k in ("int",):
        return str(e[1])
    if k == "bool":
        return "true" if e[1] else "false"
    if k == "tmpl":
        return f"{e[1]}<{', '.join(fmt(a) for a in e[2])}>"
    if k == "bin":
        return f"{fmt(e[2])} {e[1]} {fmt(e[3])}"
    if k == "neg":
        return "-" + fmt(e[1])
    if k == "pack":
        return e[1] + "..."
    return str(e[1])


def _default_value(default: str | None, fields: dict[str, Any]) -> Any:
    if default is None:
        return None
    d = default.strip()
    if d in fields:
        return fields[d]
    if d in ("true", "false"):
        return d == "true"
    v = ckfields.as_int(d)
    if v is not None:
        return v
    return short(d)


def arity(params: list[dict]) -> tuple[int, bool]:
    """(required argument count, has a pack) of a template parameter list."""
    return sum(1 for p in params if p["kind"] != "pack" and p.get("default") is None), any(
        p["kind"] == "pack" for p in params
    )


Plan = tuple[
    int, bool, tuple[tuple[str, bool, Any], ...]
]  # required args, has a pack, (name, is pack, default) per param


def plan_of(params: list[dict]) -> Plan:
    """What map_fields needs of a parameter list, read once per device op instead of once per entry."""
    required, has_pack = arity(params)
    return (
        required,
        has_pack,
        tuple(
            (p["name"] or f"_{k}", p["kind"] == "pack", p.get("default"))
            for k, p in enumerate(params)
        ),
    )


def map_fields(
    params: list[dict], values: list[Any], plan: Plan | None = None
) -> tuple[dict[str, Any], list[str], bool]:
    """Positional values -> {param name: value}; defaults fill the rest. Returns (fields, defaulted, arity_ok)."""
    fields: dict[str, Any] = {}
    defaulted: list[str] = []
    required, has_pack, slots = plan or plan_of(params)
    n = len(values)
    ok = required <= n and (has_pack or n <= len(slots))
    # trailing defaulted parameters before a pack are rare; map positionally
    i = 0
    for name, is_pack, default in slots:
        if is_pack:
            fields[name] = values[i:]
            i = n
            continue
        if i < n:
            fields[name] = values[i]
            i += 1
        elif default is not None:
            fields[name] = _default_value(default, fields)
            defaulted.append(name)
    return fields, defaulted, ok


class _Index:
    """Files of this stage by path, for `#include` resolution."""

    def __init__(self, rels: list[str]):
        self.rels = set(rels)
        self.by_base: dict[str, list[str]] = {}
        for r in rels:
            self.by_base.setdefault(_basename(r), []).append(r)

    def resolve(self, inc: str, from_rel: str) -> str | None:
        here = from_rel.rsplit("/", 1)[0] if "/" in from_rel else ""
        cands = [_norm(f"{here}/{inc}" if here and not inc.startswith("/") else inc)] + [
            f"{d}/{inc}" for d in INCLUDE_DIRS
        ]
        for c in cands:
            if c in self.rels:
                return c
        same = self.by_base.get(_basename(inc), [])
        tail = [r for r in same if r.endswith("/" + inc)]
        if len(tail) == 1:
            return tail[0]
        return None


def _parts(p: str) -> list[str]:
    """Path components as PurePosixPath reads them: empty and `.` components dropped, a leading `/` kept."""
    parts = [c for c in p.split("/") if c and c != "."]
    return ["/", *parts] if p.startswith("/") else parts


def _basename(p: str) -> str:
    """PurePosixPath(p).name, on strings (this runs for every include of every file)."""
    parts = _parts(p)
    return parts[-1] if parts and parts[-1] != "/" else ""


def _norm(p: str) -> str:
    """Resolve `..` and `.` lexically (an include path is not a file system path)."""
    parts: list[str] = []
    for part in _parts(p):
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    if not parts:
        return "."
    return "/" + "/".join(parts[1:]) if parts[0] == "/" else "/".join(parts)


def combine(root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
    out = StageResult()
    ops: dict[str, list[DeviceOpRow]] = {}
    for op in ctx.table_rows("device_ops"):
        ops.setdefault(op.name, []).append(op)
    shapes = {id(op): plan_of(op.params) for cands in ops.values() for op in cands}
    facts = {rel: fr.facts for rel, fr in results.items() if fr.facts}
    index = _Index(sorted(facts))
    list_names = {lst["name"] for f in facts.values() for lst in f.get("lists", [])}

    closure_cache: dict[str, tuple[list[str], set[str]]] = {}

    def closure(rel: str) -> tuple[list[str], set[str]]:
        """Files whose aliases `rel` sees (itself first, then includes breadth-first) and every include string seen."""
        if rel in closure_cache:
            return closure_cache[rel]
        order, seen, strings = [rel], {rel}, set()
        k = 0
        while k < len(order):
            cur = order[k]
            k += 1
            for inc in facts.get(cur, {}).get("includes", []):
                strings.add(_basename(inc))
                tgt = index.resolve(inc, cur)
                if tgt is not None and tgt not in seen:
                    seen.add(tgt)
                    order.append(tgt)
        closure_cache[rel] = (order, strings)
        return order, strings

    env_cache: dict[str, dict[str, dict]] = {}

    def env_of(rel: str) -> dict[str, dict]:
        if rel not in env_cache:
            env: dict[str, dict] = {}
            for f in reversed(closure(rel)[0]):  # the file's own aliases win over its includes'
                env.update(facts[f].get("aliases", {}))
            env_cache[rel] = env
        return env_cache[rel]

    memos: dict[tuple[str, frozenset], dict] = {}
    counter = {"list": 0, "inst": 0}
    rows: list[Any] = []
    where: dict[str, list[tuple[str, dict]]] = {}  # list name -> [(file, list facts)]

    def emit(
        lst: dict, list_rel: str, entries_rel: str, resolve: Resolver, alias_of: str = ""
    ) -> None:
        counter["list"] += 1
        lid = counter["list"]
        d = dir_of(list_rel)
        inc_names = closure(entries_rel)[1]
        n_active = n_out = 0
        for ordinal, e in enumerate(lst["entries"]):
            counter["inst"] += 1
            if e["status"] == "active":
                n_active += 1
            else:
                n_out += 1
            row, diag = _instance_row(
                e,
                entries_rel,
                d,
                lst,
                lid,
                counter["inst"],
                ordinal,
                resolve,
                ops,
                inc_names,
                list_names,
                shapes,
            )
            if alias_of:
                row.list_name = lst["name"] if "alias_name" not in lst else lst["alias_name"]
            if (
                diag is not None and not alias_of
            ):  # an alias repeats its target's entries: reported once, there
                out.diagnostics.append(diag)
            rows.append(row)
        rows.append(
            InstanceListRow(
                id=lid,
                name=lst.get("alias_name", lst["name"]),
                dir=d,
                file=list_rel,
                line=lst.get("alias_line", lst["line"]),
                template_params=lst.get("alias_params", lst["template_params"]),
                comment=lst.get("alias_comment", lst["comment"]),
                entries=n_active,
                commented_out=n_out,
                cmake_vars=lst.get("cmake_vars", []),
                guard=lst.get("alias_guard", lst.get("guard", "")),
                alias_of=alias_of,
            )
        )

    for rel in sorted(facts):
        for lst in facts[rel].get("lists", []):
            where.setdefault(lst["name"], []).append((rel, lst))
            tparams = frozenset(p["name"] for p in lst["template_params"])
            memo = memos.setdefault((rel, tparams), {})
            emit(lst, rel, rel, Resolver(env_of(rel), set(tparams), memo=memo))

    # `using X_instance = other_list<args>;`: X is a list too, with other_list's entries and its
    # template parameters bound to args. Aliases of aliases resolve over a few passes.
    pending = [(rel, a) for rel in sorted(facts) for a in facts[rel].get("list_aliases", [])]
    for _ in range(4):
        later = []
        for rel, a in pending:
            cands = where.get(a["target"])
            if not cands:
                later.append((rel, a))
                continue
            seen = set(closure(rel)[0])
            target_rel, target = next(((r, t) for r, t in cands if r in seen), cands[0])
            outer = Resolver(env_of(rel), {p["name"] for p in a["template_params"]})
            values = [outer(x) for x in a["target_args"]]
            bindings = {
                p["name"]: v for p, v in zip(target["template_params"], values, strict=False)
            }
            merged = dict(
                target,
                alias_name=a["name"],
                alias_line=a["line"],
                alias_params=a["template_params"],
                alias_comment=a["comment"],
                alias_guard=a["guard"],
            )
            emit(
                merged,
                rel,
                target_rel,
                Resolver(env_of(target_rel), set(), bindings),
                alias_of=a["text"],
            )
            where.setdefault(a["name"], []).append((rel, dict(target, name=a["name"])))
        if len(later) == len(pending):
            break
        pending = later
    out.rows = rows
    return out


def _pick_op(cands: list[DeviceOpRow], inc_names: set[str], n_args: int) -> DeviceOpRow:
    if len(cands) == 1:
        return cands[0]
    by_inc = [c for c in cands if _basename(c.file) in inc_names]
    if len(by_inc) == 1:
        return by_inc[0]
    pool = by_inc or cands
    fits = [c for c in pool if map_fields(c.params, [None] * n_args)[2]]
    return (fits or pool)[0]


def _instance_row(
    e, rel, d, lst, list_id, inst_id, ordinal, resolve, ops, inc_names, list_names, shapes
):
    diag = None
    template = e["template"]
    tname = template.rsplit("::", 1)[-1]
    exprs = e["exprs"]
    if exprs is None:
        # not `Template<...>`: an alias of one (using X = Op<...>), or another list nested in this one
        hit = resolve.lookup(template)
        if hit is not None and hit["expr"][0] == "tmpl" and "params" not in hit:
            tname, exprs = hit["expr"][1].rsplit("::", 1)[-1], hit["expr"][2]
    resolved = resolve.all(exprs) if exprs is not None else []
    op = None
    fields: dict[str, Any] = {}
    defaulted: list[str] = []
    if exprs is None:
        mapping = "not_template"
        diag = Diagnostic(
            rel,
            e["line"],
            f"entry {template!r} of {lst['name']} is not a device-op template instantiation",
            "warning",
            NAME,
        )
    elif tname in list_names and tname not in ops:
        mapping = "nested_list"
        diag = Diagnostic(
            rel,
            e["line"],
            f"entry of {lst['name']} is another instance list ({tname}); its entries are listed there",
            "warning",
            NAME,
        )
    elif tname not in ops:
        mapping = "unknown_template"
        diag = Diagnostic(
            rel, e["line"], f"unknown device-op template {tname} in {lst['name']}", "warning", NAME
        )
    else:
        op = _pick_op(ops[tname], inc_names, len(resolved))
        fields, defaulted, ok = map_fields(op.params, resolved, shapes.get(id(op)))
        mapping = "ok" if ok else "arity_mismatch"
        if not ok:
            req = sum(1 for p in op.params if p["kind"] != "pack" and p.get("default") is None)
            diag = Diagnostic(
                rel,
                e["line"],
                f"{tname} takes {req}..{len(op.params)} template arguments ({op.file}:{op.line}), entry of {lst['name']} has {len(resolved)}",
                "warning",
                NAME,
            )
    norm = ckfields.normalise(fields) if fields else {}
    row = InstanceRow(
        id=inst_id,
        list_id=list_id,
        list_name=lst["name"],
        dir=d,
        file=rel,
        line=e["line"],
        ordinal=ordinal,
        template=tname,
        template_file=op.file if op else None,
        device_op_id=op.id if op else None,
        status=e["status"],
        reason=e.get("reason", ""),
        guard=e.get("guard", ""),
        args=e["args"],
        resolved=resolved,
        fields=fields,
        defaulted=defaulted,
        mapping=mapping,
        **norm,
    )
    return row, diag


class _Stage:
    name = NAME
    version = VERSION
    tree = "ck"
    reads = ("device_ops",)
    writes = ("instance_lists", "instances")
    combine_cost = 0.47  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        out: list[Path] = []
        for base in ROOTS:
            out.extend(list_files(root, base, SUFFIXES if base == CK_INSTANCE_DIR else (".hpp",)))
        return out

    extract = staticmethod(extract)
    combine = staticmethod(combine)


STAGE = _Stage()

"""Stage ck.typestrings: every device op's GetTypeString() as a name schema, and the printed-name key
of every (instance, registration binding).

`extract` reads one impl header with tree-sitter: for each GetTypeString() it follows the `<<` chains
into the op's string stream and turns each operand into a token:

    "DeviceGemmXdlUniversal"                        {"lit": "DeviceGemmXdlUniversal"}
    getGemmSpecializationString(GemmSpec)           {"ref": "GemmSpec", "conv": "spec"}
    std::string(ALayout::name)[0]                   {"ref": "ALayout", "conv": "layout_initial"}
    BlkGemmPipelineSchedulerToString[BlkGemmPipeSched]  {"ref": "BlkGemmPipeSched", "conv": "enum", "map": {...}}
    BlockSize                                       {"ref": "BlockSize", "conv": "value", "kind": "int"}
    PrefetchStages (a local or a pipeline constant) {"derived": "PrefetchStages", "expr": "..."}
    cond ? "A<" : "B<"                              {"alt": [[...], [...]], "cond": "..."}

`combine` stores one NameSchemaRow per implementation and, from the rows of the instances and
registrations stages, one InstanceKeyRow per (instance, registration binding).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import operator
import re
from collections.abc import Callable, Iterator
from itertools import compress
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.cpp import for_parsing
from ckkb.extract.files import list_files
from ckkb.fields import SYNONYMS, as_int, enum_word, normalise
from ckkb.kb.schema.names import InstanceKeyRow, NameSchemaRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

IMPL_DIR = "include/ck/tensor_operation/gpu/device/impl"
GRID_DIR = "include/ck/tensor_operation/gpu/grid"  # gridwise GEMMs a device op may delegate to
STAGE_NAME = "ck.typestrings"

INT_TYPES = {
    "index_t",
    "ck::index_t",
    "int",
    "int32_t",
    "uint32_t",
    "int64_t",
    "long_index_t",
    "ck::long_index_t",
    "unsigned",
    "unsigned int",
    "size_t",
    "std::size_t",
    "short",
    "long",
    "ck::index_t const",
}
SPEC_FN = re.compile(r"^(?:ck::)?(?:tensor_operation::device::)?get\w*SpecializationString$")
STRING_FNS = {"std::string", "::std::string", "std::to_string", "::std::to_string", "ck::to_string"}
CAST_FNS = re.compile(
    r"^(?:static_cast|std::to_string|::std::to_string|std::string|::std::string|ck::type_convert)\b"
)


# --------------------------------------------------------------------------- per file


def _lit(node, src: bytes) -> str:
    raw = cpp.text(node, src)
    if node.type == "concatenated_string":
        return "".join(
            _lit(c, src)
            for c in node.named_children
            if c.type in ("string_literal", "raw_string_literal")
        )
    if node.type == "char_literal":
        body = raw[1:-1]
    elif node.type == "raw_string_literal":
        m = re.match(r'R"([^(]*)\((.*)\)\1"$', raw, re.S)
        return m.group(2) if m else raw
    else:
        body = raw[raw.index('"') + 1 : raw.rindex('"')] if '"' in raw else raw
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except (UnicodeDecodeError, UnicodeEncodeError):
        return body


def _param_kind(type_text: str | None, is_type: bool) -> str:
    if is_type:
        return "type"
    t = " ".join((type_text or "").replace("const", "").split())
    if t == "bool":
        return "bool"
    if t in INT_TYPES or t.endswith("index_t"):
        return "int"
    return "enum"


def template_params(tdecl, src: bytes) -> list[dict[str, Any]]:
    plist = tdecl.child_by_field_name("parameters")
    return _params_of_list(plist, src) if plist is not None else []


def _params_of_list(plist, src: bytes) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in plist.named_children:
        t = p.type
        if t in ("type_parameter_declaration", "variadic_type_parameter_declaration"):
            names = [c for c in p.named_children if c.type == "type_identifier"]
            if names:
                out.append(
                    {
                        "name": cpp.text(names[-1], src),
                        "kind": "pack" if "variadic" in t else "type",
                        "type": "typename",
                        "default": None,
                    }
                )
        elif t == "optional_type_parameter_declaration":
            n = p.child_by_field_name("name")
            d = p.child_by_field_name("default_type")
            if n is not None:
                out.append(
                    {
                        "name": cpp.text(n, src),
                        "kind": "type",
                        "type": "typename",
                        "default": cpp.text(d, src) if d else None,
                    }
                )
        elif t in (
            "parameter_declaration",
            "optional_parameter_declaration",
            "variadic_parameter_declaration",
        ):
            ty = p.child_by_field_name("type")
            dc = p.child_by_field_name("declarator")
            dv = p.child_by_field_name("default_value")
            if dc is None:
                continue
            name = cpp.text(dc, src).lstrip(".").strip()
            ty_text = cpp.text(ty, src) if ty is not None else ""
            kind = "pack" if "variadic" in t else _param_kind(ty_text, False)
            out.append(
                {
                    "name": name,
                    "kind": kind,
                    "type": ty_text,
                    "default": cpp.text(dv, src) if dv else None,
                }
            )
    return out


class _Ctx:
    def __init__(self, src: bytes, params: list[dict[str, Any]], members: dict[str, str]) -> None:
        self.src = src
        self.params = {p["name"]: p for p in params}
        self.members = members
        self.maps: dict[str, dict[str, str]] = {}
        self.locals: dict[str, str] = {}
        self.streams: set[str] = set()
        self.reasons: list[str] = []
        self.unsupported: list[str] = []
        self.aliases: dict[str, dict[str, Any]] = {}

    def ref(self, name: str, conv: str = "value", **extra: Any) -> dict[str, Any]:
        p = self.params[name]
        t = {"ref": name, "conv": conv, "kind": p["kind"]}
        if p.get("default") is not None:
            t["default"] = p["default"]
        t.update(extra)
        return t

    def derived(self, name: str, expr: str, why: str) -> dict[str, Any]:
        self.reasons.append(f"derived: {name} ({why})")
        return {"derived": name, "expr": expr}


def _ident(node, src: bytes) -> str | None:
    if node is None:
        return None
    if node.type in ("identifier", "field_identifier", "type_identifier"):
        return cpp.text(node, src)
    return None


def _operand(node, ctx: _Ctx) -> list[dict[str, Any]]:
    src = ctx.src
    t = node.type
    text = cpp.text(node, src)
    if t in ("string_literal", "concatenated_string", "char_literal", "raw_string_literal"):
        return [{"lit": _lit(node, src)}]
    if t == "number_literal":
        return [{"lit": text.rstrip("uUlL")}]
    if t in ("true", "false"):
        return [{"lit": "1" if t == "true" else "0"}]
    if t == "parenthesized_expression" and node.named_children:
        return _operand(node.named_children[0], ctx)
    if t == "identifier":
        if text in ctx.params:
            return [ctx.ref(text)]
        if text in ctx.locals:
            return [ctx.derived(text, ctx.locals[text], "a local variable set at run time")]
        if text in ctx.members:
            m = re.fullmatch(r"(?:ck::)?Number<\s*(\w+)\s*>\s*\{\s*\}", ctx.members[text])
            if m and m.group(1) in ctx.params:  # static constexpr auto K1 = Number<K1Value>{};
                return [ctx.ref(m.group(1))]
            return [ctx.derived(text, ctx.members[text], "a class constant")]
        return [ctx.derived(text, text, "not a template parameter")]
    if t == "qualified_identifier":
        scope = node.child_by_field_name("scope")
        name = node.child_by_field_name("name")
        sc = cpp.text(scope, src) if scope is not None else ""
        nm = cpp.text(name, src) if name is not None else text
        if sc in ctx.params and nm == "name":
            return [ctx.ref(sc, "layout_name")]
        return [ctx.derived(text.rsplit("::", 1)[-1], text, "computed from another type")]
    if t == "subscript_expression":
        arg = node.child_by_field_name("argument")
        idx = node.child_by_field_name("indices") or node.child_by_field_name("index")
        idx_nodes = (
            [c for c in idx.named_children]
            if idx is not None and idx.type == "subscript_argument_list"
            else [idx]
        )
        idx_node = idx_nodes[0] if idx_nodes and idx_nodes[0] is not None else None
        inner = _unwrap_string(arg, src)
        if (
            inner is not None
            and inner.type == "qualified_identifier"
            and idx_node is not None
            and cpp.text(idx_node, src) == "0"
        ):
            sc = inner.child_by_field_name("scope")
            nm = inner.child_by_field_name("name")
            if (
                sc is not None
                and cpp.text(sc, src) in ctx.params
                and nm is not None
                and cpp.text(nm, src) == "name"
            ):
                return [ctx.ref(cpp.text(sc, src), "layout_initial")]
        aname = _ident(arg, src)
        iname = _ident(idx_node, src) if idx_node is not None else None
        if aname in ctx.maps and iname in ctx.params:
            return [ctx.ref(iname, "enum", map=ctx.maps[aname])]
        if aname in ctx.params and idx_node is not None:
            m = re.search(r"\d+", cpp.text(idx_node, src))
            if m:
                return [ctx.ref(aname, "at", index=int(m.group()))]
        return [ctx.derived(text, text, "an expression")]
    if t == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        fn_text = cpp.text(fn, src) if fn is not None else ""
        argv = list(args.named_children) if args is not None else []
        if SPEC_FN.match(fn_text) and len(argv) == 1 and _ident(argv[0], src) in ctx.params:
            return [ctx.ref(cpp.text(argv[0], src), "spec", fn=fn_text.rsplit("::", 1)[-1])]
        if (fn_text in STRING_FNS or CAST_FNS.match(fn_text)) and len(argv) == 1:
            return _operand(argv[0], ctx)
        if fn is not None and fn.type == "field_expression":  # Map.at(Param)
            obj = fn.child_by_field_name("argument")
            fld = fn.child_by_field_name("field")
            if (
                _ident(obj, src) in ctx.maps
                and fld is not None
                and cpp.text(fld, src) == "at"
                and len(argv) == 1
                and _ident(argv[0], src) in ctx.params
            ):
                return [ctx.ref(cpp.text(argv[0], src), "enum", map=ctx.maps[cpp.text(obj, src)])]
        if fn is not None and fn.type == "qualified_identifier":
            sc = fn.child_by_field_name("scope")
            nm = fn.child_by_field_name("name")
            sc_t = cpp.text(sc, src) if sc is not None else ""
            nm_t = cpp.text(nm, src) if nm is not None else ""
            if sc_t in ctx.params and nm_t == "At" and len(argv) == 1:
                m = re.search(r"\d+", cpp.text(argv[0], src))
                if m:
                    return [ctx.ref(sc_t, "at", index=int(m.group()))]
            if nm_t == "GetTypeString":
                return [_delegate(sc_t, fn_text, text, ctx)]
        if fn_text.endswith("GetTypeString"):
            obj = (
                fn.child_by_field_name("argument")
                if fn is not None and fn.type == "field_expression"
                else None
            )
            cls = (
                obj.child_by_field_name("type")
                if obj is not None and obj.type == "compound_literal_expression"
                else obj
            )
            return [_delegate(cpp.text(cls, src) if cls is not None else "", fn_text, text, ctx)]
        if fn_text in ctx.maps and len(argv) == 1 and _ident(argv[0], src) in ctx.params:
            return [ctx.ref(cpp.text(argv[0], src), "enum", map=ctx.maps[fn_text])]
        if len(argv) == 1 and _ident(argv[0], src) in ctx.params and fn_text.endswith("ToString"):
            return [ctx.ref(cpp.text(argv[0], src), "enum")]
        return [ctx.derived(fn_text or text, text, "a function call evaluated at run time")]
    if t == "conditional_expression":
        cond = node.child_by_field_name("condition")
        a = node.child_by_field_name("consequence")
        b = node.child_by_field_name("alternative")
        if a is not None and b is not None:
            ctx.reasons.append(f"conditional: {cpp.text(cond, src) if cond else '?'}")
            return [
                {
                    "alt": [_operand(a, ctx), _operand(b, ctx)],
                    "cond": cpp.text(cond, src) if cond else "",
                }
            ]
    if t in ("cast_expression", "static_cast_expression"):
        v = node.child_by_field_name("value")
        if v is not None:
            return _operand(v, ctx)
    return [ctx.derived(text, text, "an expression")]


def _delegate(cls: str, fn_text: str, text: str, ctx: _Ctx) -> dict[str, Any]:
    """`X::GetTypeString()`: the output of another type. X is followed through the class's aliases
    (`using GridwiseGemm64 = GridwiseGemmBase<...>`, `template <...> using GridwiseGemmBase = G<...>`)
    to a class template and its arguments; `combine` splices that class's schema in."""
    if cls in ctx.params:
        ctx.unsupported.append(
            f"delegates to {fn_text}(): {cls} is a template parameter, so the name is that op's"
        )
    else:
        ctx.unsupported.append(f"delegates to {fn_text}() (another type's GetTypeString)")
    tok: dict[str, Any] = {"derived": f"{fn_text}()", "expr": text, "delegate": True}
    target = _resolve_alias(cls, [], ctx.aliases, 0)
    if target is not None:
        tok["target"], tok["args"] = target
    return tok


def _resolve_alias(
    name: str, args: list[str], aliases: dict[str, dict[str, Any]], depth: int
) -> tuple[str, list[str]] | None:
    a = aliases.get(name)
    if a is None:
        return (name, args) if depth > 0 else None
    if depth > 6:
        return None
    subst = dict(zip(a["params"], args, strict=False))
    new_args = [subst.get(x, x) for x in a["args"]]
    return _resolve_alias(a["target"], new_args, aliases, depth + 1)


def _aliases(body, src: bytes) -> dict[str, dict[str, Any]]:
    """`using X = T<args>` and `template <P...> using X = T<args>` in a class body."""
    out: dict[str, dict[str, Any]] = {}
    if body is None:
        return out
    for n in body.named_children:
        params: list[str] = []
        decl = n
        if n.type == "template_declaration":
            plist = n.child_by_field_name("parameters")
            params = [p["name"] for p in _params_of_list(plist, src)] if plist is not None else []
            decl = next((c for c in n.named_children if c.type == "alias_declaration"), None)
        if decl is None or decl.type != "alias_declaration":
            continue
        name = decl.child_by_field_name("name")
        ty = decl.child_by_field_name("type")
        tt = ty.named_children[0] if ty is not None and ty.named_children else None
        if name is None or tt is None:
            continue
        if tt.type == "template_type":
            tname = tt.child_by_field_name("name")
            targs = tt.child_by_field_name("arguments")
            args = [
                " ".join(cpp.text(c, src).split())
                for c in (targs.named_children if targs is not None else [])
                if c.type != "comment"
            ]
            out[cpp.text(name, src)] = {
                "params": params,
                "target": cpp.text(tname, src).rsplit("::", 1)[-1],
                "args": args,
            }
        else:
            out[cpp.text(name, src)] = {
                "params": params,
                "target": cpp.text(tt, src).rsplit("::", 1)[-1],
                "args": [],
            }
    return out


def _unwrap_string(node, src: bytes):
    """std::string(X) -> X (returns the node itself when not wrapped)."""
    while node is not None and node.type in ("call_expression", "parenthesized_expression"):
        if node.type == "parenthesized_expression":
            node = node.named_children[0] if node.named_children else None
            continue
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if (
            fn is None
            or cpp.text(fn, src) not in STRING_FNS
            or args is None
            or len(args.named_children) != 1
        ):
            return node
        node = args.named_children[0]
    return node


def _chain(node, ctx: _Ctx) -> list[Any] | None:
    """Operands of `stream << a << b ...` (left-nested binary expressions), or None when the leftmost
    operand is not one of the op's streams."""
    operands = []
    while (
        node is not None
        and node.type == "binary_expression"
        and cpp.text(node.child_by_field_name("operator"), ctx.src) == "<<"
    ):
        operands.append(node.child_by_field_name("right"))
        node = node.child_by_field_name("left")
    if node is None:
        return None
    base = cpp.text(node, ctx.src)
    if base not in ctx.streams:
        return None
    return list(reversed(operands))


def _declaration(node, ctx: _Ctx) -> None:
    src = ctx.src
    ty = node.child_by_field_name("type")
    ty_text = cpp.text(ty, src) if ty is not None else ""
    for d in node.children_by_field_name("declarator"):
        name_node = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        name = cpp.text(name_node, src) if name_node is not None else ""
        value = d.child_by_field_name("value") if d.type == "init_declarator" else None
        vtext = cpp.text(value, src) if value is not None else ""
        if "stringstream" in ty_text or "ostringstream" in ty_text or "stringstream" in vtext:
            ctx.streams.add(name)
        elif "map" in ty_text and value is not None:
            entries: dict[str, str] = {}
            for il in cpp.walk(value, "initializer_list"):
                kids = il.named_children
                if len(kids) == 2 and kids[1].type in ("string_literal", "concatenated_string"):
                    entries[cpp.text(kids[0], src)] = _lit(kids[1], src)
            ctx.maps[name] = entries
        else:
            ctx.locals[name] = vtext


def _statements(node, ctx: _Ctx) -> list[Any]:
    tokens: list[Any] = []
    for st in node.named_children:
        t = st.type
        if t == "declaration":
            _declaration(st, ctx)
        elif t == "expression_statement" and st.named_children:
            expr = st.named_children[0]
            ops = _chain(expr, ctx)
            if ops is not None:
                for o in ops:
                    tokens.extend(_operand(o, ctx))
            elif expr.type == "assignment_expression":
                left = _ident(expr.child_by_field_name("left"), ctx.src)
                if left in ctx.locals:
                    ctx.locals[left] = cpp.text(expr.child_by_field_name("right"), ctx.src)
        elif t == "compound_statement":
            tokens.extend(_statements(st, ctx))
        elif t == "if_statement":
            cons = st.child_by_field_name("consequence")
            alt = st.child_by_field_name("alternative")
            if alt is not None and alt.type == "else_clause":
                alt = alt.named_children[-1] if alt.named_children else None
            a = _statements(_as_block(cons), ctx) if cons is not None else []
            b = _statements(_as_block(alt), ctx) if alt is not None else []
            if a or b:
                cond = st.child_by_field_name("condition")
                ctext = cpp.text(cond, ctx.src) if cond is not None else ""
                ctx.reasons.append(f"conditional: if {ctext} (line {cpp.line(st)})")
                tokens.append({"alt": [a, b], "cond": ctext})
        elif t in ("for_statement", "for_range_loop", "while_statement", "do_statement"):
            inner = _statements(_as_block(st.child_by_field_name("body") or st), ctx)
            if inner:
                ctx.unsupported.append(f"output streamed in a loop (line {cpp.line(st)})")
        elif t == "return_statement" and st.named_children:
            expr = st.named_children[0]
            rtext = cpp.text(expr, ctx.src)
            if not re.fullmatch(r"\w+\s*\.\s*str\s*\(\s*\)", rtext):
                toks = _operand(expr, ctx)
                if "GetTypeString" not in rtext:
                    ctx.unsupported.append(
                        f"returns {' '.join(rtext.split())[:80]!r} instead of its stream"
                    )
                tokens.extend(toks)
    return tokens


class _Block:
    """A single statement seen as a block of one (if/else without braces)."""

    def __init__(self, node) -> None:
        self.named_children = [node] if node is not None else []


def _as_block(node):
    return node if node is not None and node.type == "compound_statement" else _Block(node)


def _merge_literals(tokens: list[Any]) -> list[Any]:
    out: list[Any] = []
    for t in tokens:
        if "alt" in t:
            t = {**t, "alt": [_merge_literals(a) for a in t["alt"]]}
        if "lit" in t and out and "lit" in out[-1]:
            out[-1] = {"lit": out[-1]["lit"] + t["lit"]}
        elif "lit" in t and not t["lit"]:
            continue
        else:
            out.append(t)
    return out


_OP_RE = re.compile(r"\s*([A-Za-z_][\w:]*)")


def ops_of(tokens: list[Any]) -> list[str]:
    """Printed op names: the identifier the stream starts with (each branch of a leading conditional)."""
    if not tokens:
        return []
    first = tokens[0]
    if "lit" in first:
        m = _OP_RE.match(first["lit"])
        return [m.group(1).rstrip("_")] if m and m.group(1).rstrip("_") else []
    if "alt" in first:
        out = []
        for a in first["alt"]:
            for o in ops_of(list(a) + list(tokens[1:])):
                if o not in out:
                    out.append(o)
        return out
    return []


def _members(body, src: bytes) -> dict[str, str]:
    out = {}
    if body is None:
        return out
    for fd in body.named_children:
        if fd.type not in ("field_declaration", "declaration"):
            continue
        dv = fd.child_by_field_name("default_value")
        dc = fd.child_by_field_name("declarator")
        if dc is not None and dc.type == "init_declarator":
            dv = dc.child_by_field_name("value")
            dc = dc.child_by_field_name("declarator")
        if dc is not None and dv is not None:
            out[cpp.text(dc, src)] = cpp.text(dv, src)
    return out


def example(tokens: list[Any]) -> str:
    """A name rendered from the schema with placeholder values (the first branch of conditionals)."""
    out = []
    for t in tokens:
        if "lit" in t:
            out.append(t["lit"])
        elif "alt" in t:
            out.append(example(t["alt"][0] or t["alt"][-1]))
        elif "ref" in t:
            out.append(placeholder(t))
        else:
            out.append("0")
    return "".join(out)


def placeholder(t: dict[str, Any], i: int = 0) -> str:
    conv, kind = t.get("conv"), t.get("kind")
    if conv == "spec":
        return "Default"
    if conv == "layout_initial":
        return "RC"[i % 2]
    if conv == "layout_name":
        return ("RowMajor", "ColumnMajor")[i % 2]
    if conv == "enum" and t.get("map"):
        vals = list(t["map"].values())
        return vals[i % len(vals)]
    if kind == "bool":
        return "01"[i % 2]
    if kind == "int" or conv == "at":
        return str([1, 2, 4, 8, 16, 32, 64, 128, 256][i % 9])
    return f"{t['ref']}_v"


def _is_device_op(node, src: bytes, any_class: bool = False) -> bool:
    n = node.child_by_field_name("name")
    return (
        n is not None
        and node.child_by_field_name("body") is not None
        and (any_class or cpp.text(n, src).startswith("Device"))
    )


class _Outline:
    """The device-op classes and template parameter lists of a tree, in source order; found (by a query
    over the whole tree) only when a GetTypeString() is not inside its class (see _enclosing_op)."""

    def __init__(self, tree, src: bytes, any_class: bool) -> None:
        self.tree, self.src, self.any_class = tree, src, any_class

    @functools.cached_property
    def structs(self) -> list[Any]:
        nodes = cpp.walk(self.tree.root_node, ("struct_specifier", "class_specifier"))
        return [n for n in nodes if _is_device_op(n, self.src, self.any_class)]

    @functools.cached_property
    def plists(self) -> list[Any]:
        return list(cpp.walk(self.tree.root_node, "template_parameter_list"))


def _enclosing_op(fn, src: bytes, outline: _Outline, any_class: bool = False):
    """The device-op class template that defines `fn`, and its template parameters.

    Where tree-sitter had to recover from CK's macros (`GET_NXDL_PER_WAVE_IMPL`, `#if 0` inside
    functions, `enable_if<N >= 1>` defaults) the class may not be an ancestor of the function: then it
    is the last device-op class that starts before it, and its parameters are the template parameter
    list just before that class.
    """
    cls = fn.parent
    while cls is not None and not (
        cls.type in ("struct_specifier", "class_specifier") and _is_device_op(cls, src, any_class)
    ):
        cls = cls.parent
    if cls is None:
        before = [s for s in outline.structs if s.start_byte < fn.start_byte]
        if not before:
            return None, []
        cls = before[-1]
    if cls.parent is not None and cls.parent.type == "template_declaration":
        return cls, template_params(cls.parent, src)
    lists = [p for p in outline.plists if p.end_byte <= cls.start_byte]
    if not lists:
        return cls, []
    return cls, _params_of_list(lists[-1], src)


_GTS = b"GetTypeString"


def _type_string_functions(tree, parsed: bytes) -> list[Any]:
    """Every function definition whose name ends in GetTypeString, in source (pre-)order.

    Such a name is spelled out in the text, so the definitions are found from the text's occurrences
    (the innermost function definition around each) instead of a visit of the whole tree.
    """
    found: dict[tuple[int, int], Any] = {}
    at = parsed.find(_GTS)
    while at >= 0:
        n = tree.root_node.descendant_for_byte_range(at, at + len(_GTS))
        while n is not None and n.type != "function_definition":
            n = n.parent
        if n is not None:
            found.setdefault((n.start_byte, -n.end_byte), n)
        at = parsed.find(_GTS, at + len(_GTS))
    return [found[k] for k in sorted(found)]


def extract_schemas(
    rel: str, data: bytes, any_class: bool = False
) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """Every GetTypeString() in one header as a schema dict (pure; no database). Device ops only
    (classes named Device*), unless any_class (the gridwise headers a device op delegates to)."""
    diags: list[Diagnostic] = []
    if b"GetTypeString" not in data:
        return [], diags
    if cpp.is_binary(data):
        return [], [Diagnostic(rel, 0, "binary file skipped", "warning", STAGE_NAME)]
    parsed = for_parsing(data)
    tree = cpp.parse(parsed)  # same byte offsets as data; every text is read from data
    errs = cpp.error_lines(tree)
    outline = _Outline(tree, data, any_class)
    out = []
    for fn in _type_string_functions(tree, parsed):
        decl = cpp.function_declarator(fn)
        if decl is None:
            continue
        fname = decl.child_by_field_name("declarator")
        if fname is None or cpp.text(fname, data).rsplit("::", 1)[-1] != "GetTypeString":
            continue
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        cls, params = _enclosing_op(fn, data, outline, any_class)
        if cls is None:
            continue  # a free function: not a device op's
        cname_node = cls.child_by_field_name("name")
        cname = cpp.text(cname_node, data) if cname_node is not None else "?"
        ctx = _Ctx(data, params, _members(cls.child_by_field_name("body"), data))
        ctx.aliases = _aliases(cls.child_by_field_name("body"), data)
        tokens = _merge_literals(_statements(body, ctx))
        ops = ops_of(tokens)
        reasons = list(dict.fromkeys(ctx.reasons))
        if ctx.unsupported:
            status = "unsupported"
            reasons = list(dict.fromkeys(ctx.unsupported)) + reasons
        elif not tokens:
            status = "unsupported"
            reasons = ["no output streamed into a string stream"] + reasons
        elif not ops:
            status = "unsupported"
            reasons = ["the output does not start with a literal op name"] + reasons
        elif reasons:
            status = "partial"
        else:
            status = "matched"
        line = cpp.line(fn)
        if any(fn.start_point[0] + 1 <= e <= fn.end_point[0] + 1 for e in errs):
            diags.append(
                Diagnostic(
                    rel,
                    line,
                    f"{cname}::GetTypeString(): C++ parse errors inside; schema may be incomplete",
                    "warning",
                    STAGE_NAME,
                )
            )
        out.append(
            {
                "device_op": cname,
                "file": rel,
                "line": line,
                "tokens": tokens,
                "params": params,
                "ops": ops,
                "status": status,
                "reasons": reasons,
            }
        )
    return out, diags


# --------------------------------------------------------------------------- delegation


def _substitute(
    tokens: list[Any],
    target: dict[str, Any],
    args: list[str],
    dev_params: dict[str, dict[str, Any]],
    reasons: list[str],
) -> list[Any]:
    """The target's tokens with its template parameters replaced by the device op's arguments."""
    names = [p["name"] for p in target["params"]]
    binding = dict(zip(names, args, strict=False))
    out: list[Any] = []
    for t in tokens:
        if "alt" in t:
            out.append(
                {**t, "alt": [_substitute(a, target, args, dev_params, reasons) for a in t["alt"]]}
            )
        elif "ref" in t:
            a = binding.get(t["ref"])
            if a is not None and a in dev_params:
                p = dev_params[a]
                nt = {**t, "ref": a, "kind": p["kind"]}
                nt.pop("default", None)
                if p.get("default") is not None:
                    nt["default"] = p["default"]
                out.append(nt)
            else:
                expr = (
                    a
                    if a is not None
                    else (
                        next(
                            (p.get("default") for p in target["params"] if p["name"] == t["ref"]),
                            None,
                        )
                        or t["ref"]
                    )
                )
                reasons.append(f"derived: {t['ref']} ({expr})")
                out.append({"derived": t["ref"], "expr": expr})
        else:
            out.append(t)
    return out


def splice_delegates(s: dict[str, Any], targets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Replace `X::GetTypeString()` tokens by X's own schema (X resolved through the class's aliases
    at extract time) when X's class template is known; the schema is then no longer unsupported."""
    if not any(t.get("delegate") for t in _flat(s["tokens"])):
        return s
    reasons: list[str] = []
    missing: list[str] = []
    dev_params = {p["name"]: p for p in s["params"]}

    def expand(tokens: list[Any]) -> list[Any]:
        out: list[Any] = []
        for t in tokens:
            if "alt" in t:
                out.append({**t, "alt": [expand(a) for a in t["alt"]]})
            elif t.get("delegate"):
                tgt = targets.get(t.get("target") or "")
                if tgt is None or tgt is s or any(x.get("delegate") for x in _flat(tgt["tokens"])):
                    missing.append(t["derived"])
                    out.append(t)
                    continue
                reasons.append(
                    f"via {tgt['device_op']}::GetTypeString() ({tgt['file']}:{tgt['line']})"
                )
                reasons.extend(r for r in tgt["reasons"] if not r.startswith("derived:"))
                out.extend(
                    _substitute(tgt["tokens"], tgt, t.get("args") or [], dev_params, reasons)
                )
            else:
                out.append(t)
        return out

    tokens = _merge_literals(expand(s["tokens"]))
    if missing:
        return s
    has_alt = any("alt" in t for t in tokens)
    keep = [r for r in s["reasons"] if not r.startswith(("delegates to", "returns"))]
    all_reasons = list(dict.fromkeys(reasons + keep))
    ops = ops_of(tokens)
    derivedish = any("derived" in t for t in _flat(tokens)) or has_alt
    status = "partial" if derivedish else "matched"
    if not ops:
        status, all_reasons = (
            "unsupported",
            ["the output does not start with a literal op name", *all_reasons],
        )
    return {**s, "tokens": tokens, "ops": ops, "status": status, "reasons": all_reasons}


# --------------------------------------------------------------------------- join: instance -> printed key


_SPEC_PREFIXES = ("Gemm", "ConvFwd", "ConvBwdData", "ConvBwdWeight", "Conv")
_ARITH = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
}


@functools.lru_cache(maxsize=4096)
def _parse_expr(expr: str) -> ast.Expression | None:
    try:
        return ast.parse(expr.replace("::", "_"), mode="eval")
    except SyntaxError:
        return None


def _eval(expr: str, fields: dict[str, Any]) -> int | None:
    """Integer arithmetic over template parameters (`AK1 * 2`); None for anything else."""
    try:
        return _compiled_expr(expr)(fields)
    except (ValueError, ZeroDivisionError):
        return None


def _unsupported(what: str) -> Callable[[dict[str, Any]], int]:
    def fail(fields: dict[str, Any]) -> int:
        raise ValueError(what)

    return fail


@functools.lru_cache(maxsize=4096)
def _compiled_expr(expr: str) -> Callable[[dict[str, Any]], int]:
    """`expr` as a function of the fields, made once: it raises ValueError where a value is unknown or
    the expression is not integer arithmetic, as it reaches that part (left operand first)."""
    tree = _parse_expr(expr)
    return _unsupported("syntax") if tree is None else _compile_node(tree)


def _compile_node(n: ast.AST) -> Callable[[dict[str, Any]], int]:
    if isinstance(n, ast.Expression):
        return _compile_node(n.body)
    if isinstance(n, ast.Constant) and isinstance(n.value, int):
        value = n.value
        return lambda fields: value
    if isinstance(n, ast.Name):
        name = n.id

        def field(fields: dict[str, Any]) -> int:
            v = as_int(fields.get(name))
            if v is None:
                raise ValueError(name)
            return v

        return field
    if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
        op, left, right = _ARITH[type(n.op)], _compile_node(n.left), _compile_node(n.right)
        return lambda fields: op(left(fields), right(fields))
    return _unsupported(type(n).__name__)


class _Printed(dict):
    """printed_value of one ref token by (type of the value, value), each computed on first use: the
    type tells 1, True and 1.0 apart (equal keys, printed differently). Valid as printed_value is pure."""

    def __init__(self, token: dict[str, Any]) -> None:
        super().__init__()
        self.token = token

    def __missing__(self, key: tuple[type, Any]) -> str | None:
        p = self[key] = printed_value(self.token, key[1])
        return p


def printed_value(t: dict[str, Any], v: Any) -> str | None:
    """How GetTypeString() prints the value `v` of the ref token `t` (None when unknown)."""
    if v is None:
        return None
    conv = t.get("conv")
    if conv == "at":
        if isinstance(v, (list, tuple)) and t.get("index", 0) < len(v):
            return str(v[t["index"]])
        return None
    if isinstance(v, (list, tuple, dict)):
        return None
    w = enum_word(v)
    if w is None:
        return None
    if conv == "spec":
        for p in _SPEC_PREFIXES:
            if w.startswith(p) and len(w) > len(p) and (w[len(p)].isupper() or w[len(p)].isdigit()):
                return w[len(p) :]
        return w
    if conv == "layout_initial":
        return {"Row": "R", "Col": "C"}.get(w, w[0])
    if conv == "layout_name":
        return {"Row": "RowMajor", "Col": "ColumnMajor"}.get(w, w)
    if conv == "enum":
        for k, printed in (t.get("map") or {}).items():
            if enum_word(k) == w:
                return printed
        return w
    if t.get("kind") == "bool":
        return {"true": "1", "false": "0"}.get(w, w)
    if t.get("kind") == "int":
        i = as_int(v)
        return str(i) if i is not None else None
    return w


def _cond_value(cond: str, fields: dict[str, Any]) -> bool | None:
    """A condition over template parameters: `P`, `!P`, `P == X`, `P != X`; None when not decidable."""
    c = cond.strip()
    while c.startswith("(") and c.endswith(")"):
        c = c[1:-1].strip()
    m = re.fullmatch(r"(!?)\s*(\w+)", c)
    if m and m.group(2) in fields:
        v = enum_word(fields[m.group(2)])
        truth = {"true": True, "1": True, "false": False, "0": False}.get(str(v).lower())
        if truth is None:
            return None
        return not truth if m.group(1) else truth
    m = re.fullmatch(r"(\w+)\s*(==|!=)\s*([\w:]+)", c)
    if not m or m.group(1) not in fields or fields[m.group(1)] is None:
        return None
    same = enum_word(fields[m.group(1)]) == enum_word(m.group(3))
    return same if m.group(2) == "==" else not same


class _Run:
    """A run of tokens without conditionals as two templates, key and name: their literal parts with a
    slot between each two for a value (a ref's printed value or a run-time value). Rendering it is one
    pass over its refs and a join, rather than an interpretation of every token (or a str.format,
    which parses its format string on every call)."""

    def __init__(self, tokens: list[Any]) -> None:
        self.fields: list[str] = []  # per ref: the field it prints
        self.defaults: list[Any] = []  # per ref: its value where the field is None
        self.printed: list[_Printed] = []  # per ref
        self.exprs: list[
            str | None
        ] = []  # per run-time value: the expression to evaluate (None: never)
        self.derived: list[str] = []
        n_refs = sum(1 for t in tokens if "lit" not in t and "ref" in t)
        self.key_parts: list[str] = [""]  # literals at even positions, a slot per ref between
        self.name_parts: list[str] = [""]  # the same, a slot per ref or run-time value
        name_slots: list[
            int
        ] = []  # per name slot: its index in the refs' printed values + run-time values
        for t in tokens:
            if "lit" in t:
                self.key_parts[-1] += "".join(t["lit"].split())
                self.name_parts[-1] += t["lit"]
            elif "ref" in t:
                self.key_parts += ["", ""]
                self.name_parts += ["", ""]
                name_slots.append(len(self.fields))
                self.fields.append(t["ref"])
                self.defaults.append(t.get("default"))
                self.printed.append(_Printed(t))
            else:  # a run-time value: '*' in the key; in the name only where its expression evaluates
                self.key_parts[-1] += "*"
                self.name_parts += ["", ""]
                name_slots.append(n_refs + len(self.exprs))
                self.exprs.append(None if t.get("delegate") else (t.get("expr") or ""))
                self.derived.append(t.get("derived") or t.get("expr") or "?")
        self.name_slots = name_slots if name_slots != sorted(name_slots) else None  # None: in order

    def __call__(self, fields: dict[str, Any]) -> tuple[str, str | None, list[str]]:
        values = list(map(fields.get, self.fields))
        if None in values:
            values = [
                default if v is None else v
                for v, default in zip(values, self.defaults, strict=True)
            ]
        printed = self._printed(values)
        if None in printed:
            return (
                _fill(self.key_parts, [UNKNOWN if p is None else p for p in printed]),
                None,
                list(self.derived),
            )
        key = _fill(self.key_parts, printed)
        if not self.exprs:
            return key, _fill(self.name_parts, printed), list(self.derived)
        values = [_eval(e, fields) if e is not None else None for e in self.exprs]
        if None in values:
            return key, None, list(self.derived)
        slots = [*printed, *map(str, values)]
        if self.name_slots is not None:
            slots = [slots[i] for i in self.name_slots]
        return key, _fill(self.name_parts, slots), list(self.derived)

    def _printed(self, values: list[Any]) -> list[str | None]:
        """printed_value of each ref's value, through the memos (C-level loops: no Python step per ref).
        A list value (conv "at") is looked up frozen to a tuple: printed_value prints both alike."""
        printed = self.printed
        try:
            return list(map(operator.getitem, printed, zip(map(type, values), values, strict=True)))
        except TypeError:
            pass
        frozen = [tuple(v) if type(v) is list else v for v in values]
        try:
            return list(map(operator.getitem, printed, zip(map(type, values), frozen, strict=True)))
        except TypeError:  # still unhashable (a nested list, a dict): not memoised
            return [printed_value(memo.token, v) for memo, v in zip(printed, values, strict=True)]


def _fill(parts: list[str], values: list[str]) -> str:
    """`parts` (literals at even positions) with `values` in its odd positions, joined."""
    out = parts.copy()
    out[1::2] = values
    return "".join(out)


class _Rendering:
    """A token list prepared once to render many instances' fields (see `render`): runs without
    conditionals (_Run) and, between them, conditionals with their branches prepared."""

    def __init__(self, tokens: list[Any]) -> None:
        self.steps: list[_Run | tuple[str, list[_Rendering]]] = []
        run: list[Any] = []
        for t in tokens:
            if "alt" in t and "lit" not in t:
                if run:
                    self.steps.append(_Run(run))
                    run = []
                self.steps.append((t.get("cond", ""), [_Rendering(a) for a in t["alt"]]))
            else:
                run.append(t)
        if run or not self.steps:
            self.steps.append(_Run(run))

    def __call__(self, fields: dict[str, Any]) -> tuple[str, str | None, list[str]]:
        if len(self.steps) == 1 and type(self.steps[0]) is _Run:
            return self.steps[0](fields)
        key: list[str] = []
        name: list[str] | None = []
        derived: list[str] = []
        for step in self.steps:
            if type(step) is _Run:
                k, n, d = step(fields)
                key.append(k)
            else:  # '*' in the key: a printed name does not say which branch was taken
                key.append("*")
                cond, branches = step
                c = _cond_value(cond, fields)
                if c is None:
                    name = None
                    continue
                _k, n, d = branches[0 if c else 1](fields)
            derived.extend(d)
            if n is None:
                name = None
            elif name is not None:
                name.append(n)
        return "".join(key), ("".join(name) if name is not None else None), derived


def render(tokens: list[Any], fields: dict[str, Any]) -> tuple[str, str | None, list[str]]:
    """(key, printed name or None, derived names) of one instance's fields under a schema."""
    return _Rendering(tokens)(fields)


UNKNOWN = "{unknown}"  # in a key: a value no registration binds (never matches a printed name)


# The normalised columns an InstanceKeyRow stores, in two groups memoised apart: sizes (the same for
# all registrations of an instance) and kinds (layouts and padding, often bound by the registration).
# normalise computes a column from its SYNONYMS only (tile_k also from K0PerBlock*K1, waves from the
# tile and wave sizes), so each group is a function of its _INPUTS; a unit test checks this.
_SIZE_COLUMNS = (
    "block_size",
    "tile_m",
    "tile_n",
    "tile_k",
    "mfma_m",
    "mfma_n",
    "xdl_m",
    "xdl_n",
    "waves_m",
    "waves_n",
)
_KIND_COLUMNS = ("a_layout", "b_layout", "c_layout", "scheduler", "pipeline", "padding")
_VEC_FIELDS = (
    "ABlockTransferSrcScalarPerVector",
    "BBlockTransferSrcScalarPerVector",
)  # a_vec, b_vec
_SIZE_INPUTS = tuple(
    dict.fromkeys(
        [n for c in _SIZE_COLUMNS for n in SYNONYMS.get(c, ())]
        + ["K0PerBlock", "KPerBlock0", "K1", "AK1", *_VEC_FIELDS]
    )
)
_KIND_INPUTS = tuple(dict.fromkeys(n for c in _KIND_COLUMNS for n in SYNONYMS.get(c, ())))
_NAME = re.compile(r"\w+")


def _typed_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """`values` as a memo key that tells 1 from True and 1.0 (equal in Python, printed differently) and a
    list from a tuple; lists are frozen to tuples. Hashing it raises TypeError if a value is unhashable."""
    types = tuple(map(type, values))
    if list in types:
        values = tuple(tuple(v) if type(v) is list else v for v in values)
    return values, types


def _fields_read(tokens: list[Any]) -> list[str]:
    """Every field name `render` may read for `tokens`: refs, and (a superset) every word of a condition
    or of an evaluated expression. render's result is a function of these fields' values only."""
    out: list[str] = []
    for t in tokens:
        if "lit" in t:
            continue
        if "alt" in t:
            out += _NAME.findall(t.get("cond", ""))
            for branch in t["alt"]:
                out += _fields_read(branch)
        elif "ref" in t:
            out.append(t["ref"])
        elif not t.get("delegate"):
            out += _NAME.findall((t.get("expr") or "").replace("::", "_"))
    return list(dict.fromkeys(out))


class _KeyPlan:
    """What instance_keys needs of one schema, worked out once rather than per instance.

    A row's computed columns (key, printed name, derived names, normalised columns) are a function of
    the values of `inputs` only: the fields render reads, and the inputs of both column groups. So
    they are memoised in `results` by the instance's typed input values and the positions among them
    that name a list template parameter (which a registration may bind): for an instance with none,
    the entry is its columns, the same for every registration; else a dict by the bound values.

    `present`: every field name the schema's instances have (None: not known). An input that none has
    and that has no default is None in every instance, so it is left out of `inputs` (two thirds of
    them: the synonyms of other ops), and out of the memo keys of the groups.
    """

    def __init__(self, schema: NameSchemaRow, present: set[str] | None = None) -> None:
        self.schema = schema
        self.defaults = [
            (p["name"], p["default"]) for p in schema.params if p.get("default") is not None
        ]
        self.spec = next((t for t in _flat(schema.tokens) if t.get("conv") == "spec"), None)
        rendering = _Rendering(schema.tokens)
        steps = (
            rendering.steps
        )  # a schema without conditionals is one run: call it without the wrapper
        self.render: Callable[[dict[str, Any]], tuple[str, str | None, list[str]]] = (
            steps[0] if len(steps) == 1 and type(steps[0]) is _Run else rendering
        )
        self.kind_inputs = _KIND_INPUTS + ((self.spec["ref"],) if self.spec else ())
        self.render_inputs = tuple(_fields_read(schema.tokens))
        defaults = dict(self.defaults)
        every = dict.fromkeys((*self.render_inputs, *self.kind_inputs, *_SIZE_INPUTS))
        self.inputs = tuple(n for n in every if present is None or n in present or n in defaults)
        self.positions = range(len(self.inputs))
        where = {n: i for i, n in enumerate(self.inputs)}
        width = len(self.inputs)

        def group(names: tuple[str, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
            """The values, then the types, of those `names` that are inputs, from input values + types."""
            at = [where[name] for name in names if name in where]
            return _getter(at + [width + i for i in at])

        self.render_of = group(
            self.render_inputs
        )  # memo keys of the groups' inputs (the others are None)
        self.kinds_of = group(self.kind_inputs)
        self.sizes_of = group(_SIZE_INPUTS)
        # sizes are memoised across plans: their keys say which _SIZE_INPUTS the values are of
        self.size_names = tuple(name for name in _SIZE_INPUTS if name in where)
        self.input_defaults = [(i, defaults[n]) for i, n in enumerate(self.inputs) if n in defaults]
        self.schema_part = (schema.op, schema.device_op, schema.id)
        self.results: dict[tuple[Any, ...], Any] = {}
        self.kinds: dict[
            tuple[Any, ...], tuple[Any, ...]
        ] = {}  # _kinds by typed kind_inputs values
        self.renders: dict[
            tuple[Any, ...], tuple[str, str | None, list[str]]
        ] = {}  # render by typed render_inputs values

    def base_fields(self, inst: Any) -> dict[str, Any]:
        """The instance's fields, a parameter it leaves out (or None) set to the schema's default."""
        fields = dict(inst.fields or {})
        for name, default in self.defaults:
            if fields.get(name) is None:
                fields[name] = default
        return fields

    def input_values(self, inst: Any) -> tuple[Any, ...]:
        """The values of `inputs` in base_fields(inst), without building it."""
        vals = tuple(map((inst.fields or {}).get, self.inputs))
        if self.input_defaults and None in vals:
            filled = list(vals)
            for i, default in self.input_defaults:
                if filled[i] is None:
                    filled[i] = default
            vals = tuple(filled)
        return vals

    def _kinds(self, fields: dict[str, Any], norm: dict[str, Any]) -> tuple[Any, ...]:
        """_KIND_COLUMNS of an InstanceKeyRow; padding as the schema's spec token prints it, else normalised."""
        spec = self.spec
        padding = printed_value(spec, fields.get(spec["ref"])) if spec else norm["padding"]
        return (*(norm[c] for c in _KIND_COLUMNS[:-1]), padding)

    def columns(
        self,
        typed: tuple[Any, ...] | None,
        fields_of: Callable[[], dict[str, Any]],
        sizes_memo: dict[tuple[Any, ...], tuple[Any, ...]],
    ) -> tuple[list[str], tuple[Any, ...]]:
        """(derived, _ROW_COLUMNS values) of an instance's (bound) fields, `fields_of()`, whose `inputs`
        have the values, then the types, in `typed` (None: a value cannot be hashed, nothing is
        memoised). Render and the two column groups are memoised apart by their own inputs' values
        (many instances share a tile; sizes do not depend on the schema); fields_of is called only on
        a miss."""
        fields: dict[str, Any] | None = None
        if typed is None:
            rk = kk = sk = None
            rendered = kinds = sizes = None
        else:
            rk, kk, sk = (
                self.render_of(typed),
                self.kinds_of(typed),
                (self.size_names, self.sizes_of(typed)),
            )
            rendered = self.renders.get(rk)
            kinds = self.kinds.get(kk)
            sizes = sizes_memo.get(sk)
        if rendered is None:
            fields = fields_of()
            rendered = self.render(fields)
            if rk is not None:
                self.renders[rk] = rendered
        if kinds is None or sizes is None:
            if fields is None:
                fields = fields_of()
            norm = normalise(fields)
            if kinds is None:
                kinds = self._kinds(fields, norm)
                if kk is not None:
                    self.kinds[kk] = kinds
            if sizes is None:
                sizes = _sizes(fields, norm)
                if sk is not None:
                    sizes_memo[sk] = sizes
        key, printed_name, derived = rendered
        return derived, (key, printed_name, printed_name is not None, *kinds, *sizes)


def _getter(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A function picking `positions` of a tuple, as a tuple (itemgetter returns a bare item for one)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        i = positions[0]
        return lambda values: (values[i],)
    return lambda values: ()


def _sizes(fields: dict[str, Any], norm: dict[str, Any]) -> tuple[Any, ...]:
    """_SIZE_COLUMNS and the vector widths (a_vec, b_vec) of an InstanceKeyRow."""
    return (*(norm[c] for c in _SIZE_COLUMNS), *(as_int(fields.get(n)) for n in _VEC_FIELDS))


def _bindable(fields: dict[str, Any], params: set[str]) -> list[str]:
    """Fields whose value names a list template parameter (`GemmSpec: GemmSpec`) a registration may bind."""
    return [k for k, v in fields.items() if isinstance(v, str) and v in params] if params else []


def _bind(
    base: dict[str, Any], bindable: list[str], bindings: dict[str, Any], unbound: set[str]
) -> dict[str, Any]:
    """Substitute the list's template parameters (GemmSpec -> Default) by a registration's bindings;
    a parameter nothing binds becomes None (unknown), not its own name."""
    if not bindable:
        return base
    out = dict(base)
    for k in bindable:
        v = base[k]
        if v in bindings or v in unbound:
            out[k] = bindings.get(v)
    return out


# An InstanceKeyRow's fields in the order _make_row takes them: per row, per instance, then the
# computed columns (render's key and name, then _KIND_COLUMNS, then _SIZE_COLUMNS and a_vec, b_vec).
_ROW_PER_ROW = ("id", "registration_id", "bindings", "derived")
_ROW_PER_INSTANCE = (
    "status",
    "list_name",
    "file",
    "line",
    "instance_id",
    "op",
    "device_op",
    "schema_id",
)
_ROW_COLUMNS = ("key", "printed_name", "complete", *_KIND_COLUMNS, *_SIZE_COLUMNS, "a_vec", "b_vec")
_ROW_ORDER = (*_ROW_PER_ROW, *_ROW_PER_INSTANCE, *_ROW_COLUMNS)


def _row_maker() -> Callable[..., InstanceKeyRow]:
    """InstanceKeyRow from its values in _ROW_ORDER, positionally. The dataclass __init__ takes 33
    keywords (its call costs three times this); this sets the same attributes on a new object. Falls
    back to the keyword call if the row class is not a plain dataclass of exactly these fields."""
    cls = InstanceKeyRow
    params = getattr(cls, "__dataclass_params__", None)
    names = [f.name for f in dataclasses.fields(cls)] if params is not None else []
    if (
        sorted(names) != sorted(_ROW_ORDER)
        or params.frozen
        or hasattr(cls, "__post_init__")
        or cls.__new__ is not object.__new__
    ):
        return lambda *values: cls(**dict(zip(_ROW_ORDER, values, strict=True)))
    src = (
        f"def make({', '.join(_ROW_ORDER)}):\n    r = _new(_cls)\n"
        + "".join(f"    r.{n} = {n}\n" for n in _ROW_ORDER)
        + "    return r\n"
    )
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(src, namespace)  # noqa: S102 - source built from the field names above
    return namespace["make"]


_make_row = _row_maker()


def instance_keys(
    schemas: list[NameSchemaRow],
    instances: list[Any],
    registrations: list[Any],
    lists: list[Any] = (),
) -> list[InstanceKeyRow]:
    present: dict[str, set[str]] = {}  # per template: every field name of its instances
    for inst in instances:
        have = present.get(inst.template)
        if have is None:
            have = present[inst.template] = set()
        have.update(inst.fields or ())
    plans: dict[str, _KeyPlan] = {}
    for s in schemas:
        if s.status != "unsupported" and s.device_op not in plans:
            plans[s.device_op] = _KeyPlan(s, present.get(s.device_op, set()))
    regs_by_list: dict[Any, list[Any]] = {}
    for r in registrations:
        if getattr(r, "list_id", None) is not None:
            regs_by_list.setdefault(r.list_id, []).append(r)
    list_params = {
        lr.id: {p.get("name") for p in (lr.template_params or []) if p.get("name")} for lr in lists
    }
    # the names _bind replaces: the list's parameters, and whatever a registration of the list binds
    bind_names = {lid: set(params) for lid, params in list_params.items()}
    for lid, regs in regs_by_list.items():
        bind_names.setdefault(lid, set()).update(
            k for r in regs for k in (getattr(r, "bindings", None) or {})
        )
    # per list: (registration id, its bindings) of each registration, or one (None, {}) if none
    list_regs = {
        lid: [(r.id, getattr(r, "bindings", None) or {}) for r in regs]
        for lid, regs in regs_by_list.items()
    }
    no_regs = [(None, {})]
    signatures: dict[
        tuple[Any, tuple[str, ...]], list[Any]
    ] = {}  # (list, bound parameter names) -> per registration
    sizes_memo: dict[
        tuple[Any, ...], tuple[Any, ...]
    ] = {}  # shared: sizes do not depend on the schema
    rows: list[InstanceKeyRow] = []
    append = rows.append
    make = _make_row
    for inst in instances:
        plan = plans.get(inst.template)
        if plan is None:
            continue
        lid = inst.list_id
        regs = list_regs.get(lid) or no_regs
        names = bind_names.get(lid)
        vals = plan.input_values(inst)
        types = tuple(map(type, vals))
        if list in types:
            vals = tuple(tuple(v) if type(v) is list else v for v in vals)
        try:  # hashing raises TypeError for a value that cannot be hashed: nothing is memoised then
            # (a value in `names` is a str: no other hashable value equals one)
            bound = (
                tuple(compress(plan.positions, map(names.__contains__, vals)))
                if names and not names.isdisjoint(vals)
                else ()
            )
            ikey: tuple[Any, ...] | None = (vals, types, bound)
            entry = plan.results.get(ikey)
        except TypeError:
            ikey, entry = None, None
            base = plan.base_fields(inst)
            bound = tuple(_bindable(base, names)) if names else ()
        head = (
            getattr(inst, "status", "active") or "active",
            inst.list_name,
            inst.file,
            inst.line,
            inst.id,
            *plan.schema_part,
        )
        if not bound:  # no registration changes an input: the same columns for all of them
            if entry is None:
                entry = plan.columns(
                    vals + types if ikey is not None else None,
                    functools.partial(plan.base_fields, inst),
                    sizes_memo,
                )
                if ikey is not None:
                    plan.results[ikey] = entry
            derived, cols = entry
            values = head + cols
            for rid, bindings in regs:
                append(make(len(rows) + 1, rid, dict(bindings), list(derived), *values))
            continue
        if entry is None:
            entry = {}
            if ikey is not None:
                plan.results[ikey] = entry
        unbound = list_params.get(lid, set())
        binder = _Binder(
            plan, inst, [plan.inputs[i] for i in bound] if ikey is not None else bound, unbound
        )
        width = len(vals)  # the types of the inputs follow their values in `typed`
        if ikey is not None:
            pnames = tuple(vals[i] for i in bound)
            sigs = signatures.get((lid, pnames))
            if sigs is None:
                sigs = signatures[lid, pnames] = [
                    _signature(pnames, bindings, unbound) for _rid, bindings in regs
                ]
        else:
            sigs = [None] * len(regs)
        for (rid, bindings), sig in zip(regs, sigs, strict=True):
            got = entry.get(sig) if sig is not None else None
            if got is None:
                typed = None
                if sig is not None:  # the inputs as this registration binds them
                    bound_typed = [*vals, *types]
                    for i, v, t in zip(bound, *sig, strict=True):
                        bound_typed[i], bound_typed[width + i] = v, t
                    typed = tuple(bound_typed)
                got = plan.columns(typed, functools.partial(binder, bindings), sizes_memo)
                if sig is not None:
                    entry[sig] = got
            derived, cols = got
            append(make(len(rows) + 1, rid, dict(bindings), list(derived), *head, *cols))
    return rows


class _Binder:
    """An instance's fields as each of its registrations binds them. The base fields are made once (on
    the first call), then copied with the fields `bindable` substituted. With a memo key (instance_keys'
    ikey) these are only the bound inputs: the computed columns read no other field, so whatever the
    other bindable fields become cannot change them."""

    def __init__(
        self, plan: _KeyPlan, inst: Any, bindable: list[str] | tuple[str, ...], unbound: set[str]
    ) -> None:
        self.plan, self.inst, self.bindable, self.unbound = plan, inst, bindable, unbound
        self.base: dict[str, Any] | None = None

    def __call__(self, bindings: dict[str, Any]) -> dict[str, Any]:
        if self.base is None:
            self.base = self.plan.base_fields(self.inst)
        return _bind(self.base, self.bindable, bindings, self.unbound)


def _signature(
    pnames: tuple[str, ...], bindings: dict[str, Any], unbound: set[str]
) -> tuple[Any, ...] | None:
    """The typed values a registration gives the list parameters `pnames` (as _bind does), a memo key;
    None when one cannot be hashed."""
    vals = tuple(bindings.get(p) if p in bindings or p in unbound else p for p in pnames)
    try:
        key = _typed_key(vals)
        hash(key)
    except TypeError:
        return None
    return key


def _flat(tokens: list[Any]):
    for t in tokens:
        if "alt" in t:
            for a in t["alt"]:
                yield from _flat(a)
        else:
            yield t


# --------------------------------------------------------------------------- the stage


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: instance_keys allocates ~35k rows of dicts and lists (no
    cycles), and every collection it would trigger also walks the rows of the stages built before it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class TypeStringsStage:
    name = STAGE_NAME
    extract_with = "ck.templates"  # both parse cpp.for_parsing() of a device-op header: one parse
    version = "5"
    tree = "ck"
    reads = ("instances", "registrations", "instance_lists")
    writes = ("instance_keys", "name_schemas")
    combine_cost = 0.44  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        return list_files(Path(root), IMPL_DIR, (".hpp", ".h")) + list_files(
            Path(root), GRID_DIR, (".hpp", ".h")
        )

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if rel.startswith(GRID_DIR + "/"):
            if b"GetTypeString" not in data:
                return FileResult()
            schemas, diags = extract_schemas(rel, data, any_class=True)
            return FileResult(diagnostics=diags, facts={"gridwise": schemas})
        schemas, diags = extract_schemas(rel, data)
        return FileResult(diagnostics=diags, facts={"schemas": schemas})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        rows: list[NameSchemaRow] = []
        diags: list[Diagnostic] = []
        device = [s for rel in sorted(results) for s in results[rel].facts.get("schemas", [])]
        targets: dict[str, dict[str, Any]] = {}
        for s in [
            *device,
            *(s for rel in sorted(results) for s in results[rel].facts.get("gridwise", [])),
        ]:
            targets.setdefault(s["device_op"], s)
        for s in device:
            s = splice_delegates(s, targets)
            rows.append(
                NameSchemaRow(
                    id=len(rows) + 1,
                    device_op=s["device_op"],
                    op=s["ops"][0] if s["ops"] else None,
                    ops=s["ops"],
                    file=s["file"],
                    line=s["line"],
                    tokens=s["tokens"],
                    params=s["params"],
                    status=s["status"],
                    reasons=s["reasons"],
                    example=example(s["tokens"]) if s["status"] != "unsupported" else None,
                )
            )
        counts = {
            k: sum(1 for r in rows if r.status == k) for k in ("matched", "partial", "unsupported")
        }
        for r in rows:
            if r.status == "unsupported":
                diags.append(
                    Diagnostic(
                        r.file,
                        r.line,
                        f"{r.device_op}::GetTypeString(): no name schema: {'; '.join(r.reasons[:2])}",
                        "warning",
                        STAGE_NAME,
                    )
                )
        diags.append(
            Diagnostic(
                IMPL_DIR,
                0,
                f"GetTypeString() name schemas: {counts['matched'] + counts['partial']} of {len(rows)} implementations "
                f"({counts['matched']} matched, {counts['partial']} partial with derived or conditional values, "
                f"{counts['unsupported']} unsupported)",
                "info",
                STAGE_NAME,
            )
        )
        with _gc_paused():
            keys = instance_keys(
                rows,
                ctx.table_rows("instances"),
                ctx.table_rows("registrations"),
                ctx.table_rows("instance_lists"),
            )
        return StageResult(rows=[*rows, *keys], diagnostics=diags)


STAGE = TypeStringsStage()

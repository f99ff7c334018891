"""GetTypeString() bodies read into tokens: each operand streamed into the string stream
(a literal, a template parameter printed some way, a run-time value, a conditional)."""

from __future__ import annotations

import re
from typing import Any

from ckkb.extract import cpp

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


def _lit(node: Any, src: bytes) -> str:
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


def template_params(tdecl: Any, src: bytes) -> list[dict[str, Any]]:
    plist = tdecl.child_by_field_name("parameters")
    return params_of_list(plist, src) if plist is not None else []


def params_of_list(plist: Any, src: bytes) -> list[dict[str, Any]]:
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


class Ctx:
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


def _ident(node: Any, src: bytes) -> str | None:
    if node is None:
        return None
    if node.type in ("identifier", "field_identifier", "type_identifier"):
        return cpp.text(node, src)
    return None


def _operand(node: Any, ctx: Ctx) -> list[dict[str, Any]]:
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
        if aname in ctx.maps and iname is not None and iname in ctx.params:
            return [ctx.ref(iname, "enum", map=ctx.maps[aname])]
        if aname is not None and aname in ctx.params and idx_node is not None:
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


def _delegate(cls: str, fn_text: str, text: str, ctx: Ctx) -> dict[str, Any]:
    """`X::GetTypeString()`: the output of another type. X is followed through the class's aliases
    (`using GridwiseGemm64 = GridwiseGemmBase<...>`, `template <...> using GridwiseGemmBase =
    G<...>`) to a class template and its arguments; `combine` splices that class's schema in."""
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


def aliases(body: Any, src: bytes) -> dict[str, dict[str, Any]]:
    """`using X = T<args>` and `template <P...> using X = T<args>` in a class body."""
    out: dict[str, dict[str, Any]] = {}
    if body is None:
        return out
    for n in body.named_children:
        params: list[str] = []
        decl = n
        if n.type == "template_declaration":
            plist = n.child_by_field_name("parameters")
            params = [p["name"] for p in params_of_list(plist, src)] if plist is not None else []
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


def _unwrap_string(node: Any, src: bytes) -> Any:
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


def _chain(node: Any, ctx: Ctx) -> list[Any] | None:
    """Operands of `stream << a << b ...` (left-nested binary expressions), or None when the
    leftmost operand is not one of the op's streams."""
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


def _declaration(node: Any, ctx: Ctx) -> None:
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


def statements(node: Any, ctx: Ctx) -> list[Any]:
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
            tokens.extend(statements(st, ctx))
        elif t == "if_statement":
            cons = st.child_by_field_name("consequence")
            alt = st.child_by_field_name("alternative")
            if alt is not None and alt.type == "else_clause":
                alt = alt.named_children[-1] if alt.named_children else None
            a = statements(_as_block(cons), ctx) if cons is not None else []
            b = statements(_as_block(alt), ctx) if alt is not None else []
            if a or b:
                cond = st.child_by_field_name("condition")
                ctext = cpp.text(cond, ctx.src) if cond is not None else ""
                ctx.reasons.append(f"conditional: if {ctext} (line {cpp.line(st)})")
                tokens.append({"alt": [a, b], "cond": ctext})
        elif t in ("for_statement", "for_range_loop", "while_statement", "do_statement"):
            inner = statements(_as_block(st.child_by_field_name("body") or st), ctx)
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

    def __init__(self, node: Any) -> None:
        self.named_children = [node] if node is not None else []


def _as_block(node: Any) -> Any:

    return node if node is not None and node.type == "compound_statement" else _Block(node)

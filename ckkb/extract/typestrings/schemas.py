"""Name schemas of one header: every GetTypeString() found, its tokens, printed op names and
status; and delegation (`X::GetTypeString()` spliced from the schema of X)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract import cpp
from ckkb.extract.cpp import for_parsing
from ckkb.extract.typestrings.operands import (
    Ctx,
    aliases,
    params_of_list,
    statements,
    template_params,
)

IMPL_DIR = "include/ck/tensor_operation/gpu/device/impl"
GRID_DIR = "include/ck/tensor_operation/gpu/grid"  # gridwise GEMMs a device op may delegate to
STAGE_NAME = "ck.typestrings"


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
    """Printed op names: the identifier the stream starts with (each branch of a leading
    conditional)."""
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


def _members(body: Any, src: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
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
    """A name rendered from the schema with placeholder values (conditionals: the first branch)."""
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


def _is_device_op(node: Any, src: bytes, any_class: bool = False) -> bool:
    n = node.child_by_field_name("name")
    return (
        n is not None
        and node.child_by_field_name("body") is not None
        and (any_class or cpp.text(n, src).startswith("Device"))
    )


class _Outline:
    """The device-op classes and template parameter lists of a tree, in source order; found (by a
    query over the whole tree) only when a GetTypeString() is not inside its class (see
    _enclosing_op)."""

    def __init__(self, tree: Any, src: bytes, any_class: bool) -> None:
        self.tree, self.src, self.any_class = tree, src, any_class

    @functools.cached_property
    def structs(self) -> list[Any]:
        nodes = cpp.walk(self.tree.root_node, ("struct_specifier", "class_specifier"))
        return [n for n in nodes if _is_device_op(n, self.src, self.any_class)]

    @functools.cached_property
    def plists(self) -> list[Any]:
        return list(cpp.walk(self.tree.root_node, "template_parameter_list"))


def _enclosing_op(
    fn: Any, src: bytes, outline: _Outline, any_class: bool = False
) -> tuple[Any, list[dict[str, Any]]]:
    """The device-op class template that defines `fn`, and its template parameters.

    Where tree-sitter had to recover from CK's macros (`GET_NXDL_PER_WAVE_IMPL`, `#if 0` inside
    functions, `enable_if<N >= 1>` defaults) the class may not be an ancestor of the function: then
    it is the last device-op class that starts before it, and its parameters are the template
    parameter list just before that class."""
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
    return cls, params_of_list(lists[-1], src)


_GTS = b"GetTypeString"


def _type_string_functions(tree: Any, parsed: bytes) -> list[Any]:
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
        ctx = Ctx(data, params, _members(cls.child_by_field_name("body"), data))
        ctx.aliases = aliases(cls.child_by_field_name("body"), data)
        tokens = _merge_literals(statements(body, ctx))
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
    if not any(t.get("delegate") for t in flat(s["tokens"])):
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
                if tgt is None or tgt is s or any(x.get("delegate") for x in flat(tgt["tokens"])):
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
    derivedish = any("derived" in t for t in flat(tokens)) or has_alt
    status = "partial" if derivedish else "matched"
    if not ops:
        status, all_reasons = (
            "unsupported",
            ["the output does not start with a literal op name", *all_reasons],
        )
    return {**s, "tokens": tokens, "ops": ops, "status": status, "reasons": all_reasons}


def flat(tokens: list[Any]) -> Iterator[dict[str, Any]]:
    """Every token, those inside the branches of conditionals included."""
    for t in tokens:
        if "alt" in t:
            for a in t["alt"]:
                yield from flat(a)
        else:
            yield t

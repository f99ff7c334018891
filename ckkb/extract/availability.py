"""Per (registration, arch): is the list added, and if not, the first layer that removes it.

Layers, in the order a build meets them:
1. `build`        - CMake does not compile the registering file for the arch (`file_builds`, from
                    the ck.cmake stage);
2. `preprocessor` - an `#if`/`#ifdef` around the call is false in a default build for the arch.
                    Defined macros: the top-level CMake `add_definitions(-D...)` evaluated per arch
                    (`build_defines`: in a default build all `CK_ENABLE_*` data types are on, plus
                    `CK_USE_XDL`, `CK_USE_GFX94`, ... by arch) and the unconditional `#define`s of
                    include/ck/ck.hpp. Registration code runs on the host, so device-pass macros
                    such as `__gfx94__` are *not* defined; an undefined identifier in `#if` is 0;
3. `registration` - a `ck::get_device_name()` compare sends the call to the other branch;
4. `capability`   - an `is_*_supported()` call is false on the arch.
A guard whose value cannot be decided (a runtime variable, an `if constexpr` on a template
parameter) is assumed to let the call through.
"""

from __future__ import annotations

from typing import Any

from ckkb.extract.tree_archs import tree_archs
from ckkb.kb.schema.ck_registrations import AvailabilityRow, FileBuildRow
from ckkb.kb.stages import BuildContext

LAYER_ORDER = ("build", "preprocessor", "registration", "capability")
_LAYER_OF_KIND = {
    "preprocessor": "preprocessor",
    "device_name": "registration",
    "capability": "capability",
}

_GFX9 = ("gfx908", "gfx90a", "gfx942", "gfx950")
_GFX11 = ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152")
_GFX12 = ("gfx1200", "gfx1201")

# Capability functions, used only when include/ck/host_utility/device_prop.hpp is absent or a
# function there is not a single `return` of device-name compares (then CK's own body wins).
# Written from device_prop.hpp of CK 1.x: is_xdl_supported covers the gfx9 MFMA parts and, in
# this CK, also gfx11/gfx12 (their XDL ops map onto WMMA); lds-direct-load is gfx90a/gfx94x/gfx950.
CAPABILITY_FALLBACK: dict[str, tuple[str, ...]] = {
    "is_xdl_supported": _GFX9 + _GFX11 + _GFX12,
    "is_xdl_wmma_supported": _GFX9 + _GFX11 + _GFX12,
    "is_gfx11_supported": _GFX11,
    "is_gfx12_supported": _GFX12,
    "is_wmma_supported": _GFX11 + _GFX12,
    "is_lds_direct_load_supported": ("gfx90a", "gfx942", "gfx950"),
    "is_bf16_atomic_supported": ("gfx942", "gfx950") + _GFX12,
    "is_gfx101_supported": (),
    "is_gfx103_supported": (),
}


def _int(v: Any) -> int | None:
    try:
        return int(str(v).strip().rstrip("uUlL"), 0)
    except (TypeError, ValueError):
        return None


def evaluate(
    t: dict[str, Any], arch: str, defines: dict[str, str], caps: dict[str, Any], depth: int = 0
) -> int | None:
    """Three-valued: truthy int, 0, or None (cannot tell)."""
    op = t.get("op")
    if op == "dev":
        same = arch == t.get("arch")
        return int(same if t.get("cmp") == "==" else not same)
    if op == "cap":
        name = t.get("name", "")
        if name in caps and depth < 8:
            return evaluate(caps[name]["expr"], arch, defines, caps, depth + 1)
        if name in CAPABILITY_FALLBACK:
            return int(arch in CAPABILITY_FALLBACK[name])
        return None
    if op == "defined":
        return int(t.get("name") in defines)
    if op == "macro":
        if t.get("name") not in defines:
            return 0
        value = defines[t["name"]]
        iv = _int(value)
        if iv is None and value in defines and depth < 8:
            return evaluate({"op": "macro", "name": value}, arch, defines, caps, depth + 1)
        return iv
    if op == "int":
        return _int(t.get("value"))
    if op == "not":
        v = evaluate(t["arg"], arch, defines, caps, depth)
        return None if v is None else int(not v)
    if op in ("and", "or"):
        vals = [evaluate(a, arch, defines, caps, depth) for a in t.get("args", [])]
        if op == "and":
            if any(v is not None and not v for v in vals):
                return 0
            return None if any(v is None for v in vals) else 1
        if any(v for v in vals if v is not None):
            return 1
        return None if any(v is None for v in vals) else 0
    if op == "cmp":
        a, b = (evaluate(x, arch, defines, caps, depth) for x in t["args"])
        if a is None or b is None:
            return None
        return int(
            {"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[
                t["cmp"]
            ]
        )
    return None


def guard_text(g: dict[str, Any]) -> str:
    t = g.get("text", "")
    if g.get("kind") == "preprocessor":
        return t if g.get("branch") == "then" else f"#else of {t}"
    return f"if({t})" if g.get("branch") == "then" else f"else of if({t})"


def removing_guards(
    guards: list[dict[str, Any]], arch: str, defines: dict[str, str], caps: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """(layer, guard) for every guard that keeps the call from running on arch, outermost first."""
    out = []
    for g in guards:
        layer = _LAYER_OF_KIND.get(g.get("kind", ""))
        if layer is None:
            continue
        v = evaluate(g.get("expr") or {}, arch, defines, caps)
        if v is None:
            continue
        if bool(v) != (g.get("branch") == "then"):
            out.append((layer, g))
    return out


# When the tree has no top-level CMakeLists.txt that defines anything (small trees), a default
# build's data-type switches are assumed: with DTYPES unset, CK's CMake defines all of these.
DEFAULT_BUILD_DEFINES = (
    "CK_ENABLE_INT8",
    "CK_ENABLE_FP8",
    "CK_ENABLE_BF8",
    "CK_ENABLE_FP16",
    "CK_ENABLE_FP32",
    "CK_ENABLE_FP64",
    "CK_ENABLE_BF16",
)


def defines_by_arch(
    ctx: BuildContext, ck_defines: dict[str, tuple[str, int]]
) -> dict[str, dict[str, str]]:
    archs = tree_archs(ctx)
    out: dict[str, dict[str, str]] = {
        a: {k: v for k, (v, _line) in ck_defines.items()} for a in archs
    }
    if not ctx.table_rows("build_defines"):
        for a in archs:
            out[a].update(dict.fromkeys(DEFAULT_BUILD_DEFINES, "1"))
    for r in ctx.table_rows("build_defines"):
        out.setdefault(r.arch, {k: v for k, (v, _line) in ck_defines.items()})[r.name] = r.value
    return out


def _build_row(
    builds: dict[tuple[str, str], FileBuildRow],
    file: str,
    arch: str,
    includers: dict[str, list[str]],
) -> FileBuildRow | None:
    """file_builds row deciding whether `file` is compiled for arch. A header (a templated add
    function) is compiled through the sources that include it: it is built when any of them is,
    and otherwise the first includer's rule is the evidence."""
    fb = builds.get((file, arch))
    if fb is not None:
        return fb
    rows = [builds[(src, arch)] for src in includers.get(file, ()) if (src, arch) in builds]
    if not rows or any(r.built for r in rows):
        return None
    return rows[0]


def compute(
    regs: list[Any],
    ctx: BuildContext,
    ck_defines: dict[str, tuple[str, int]],
    caps: dict[str, Any],
    includers: dict[str, list[str]] | None = None,
) -> list[AvailabilityRow]:
    builds = {(r.file, r.arch): r for r in ctx.table_rows("file_builds")}
    rules = {r.id: r for r in ctx.table_rows("build_rules")}
    defs = defines_by_arch(ctx, ck_defines)
    out: list[AvailabilityRow] = []
    archs = tree_archs(ctx)
    for reg in regs:
        for arch in archs:
            fb = _build_row(builds, reg.file, arch, includers or {})
            if fb is not None and not fb.built:
                rule = rules.get(fb.rule_id) if fb.rule_id is not None else None
                out.append(
                    AvailabilityRow(
                        registration_id=reg.id,
                        arch=arch,
                        available=False,
                        layer="build",
                        file=rule.file if rule else reg.file,
                        line=fb.line,
                        condition=fb.condition,
                    )
                )
                continue
            failing = removing_guards(reg.conditions, arch, defs.get(arch, {}), caps)
            if not failing:
                out.append(AvailabilityRow(registration_id=reg.id, arch=arch, available=True))
                continue
            layer, g = min(failing, key=lambda lg: LAYER_ORDER.index(lg[0]))
            out.append(
                AvailabilityRow(
                    registration_id=reg.id,
                    arch=arch,
                    available=False,
                    layer=layer,
                    file=g.get("file"),
                    line=g.get("line"),
                    condition=guard_text(g),
                )
            )
    return out

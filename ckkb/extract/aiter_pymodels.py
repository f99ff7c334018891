"""Library functions aiter's kernel-list modules call, modelled on ckkb's values (never run):
`dataclasses.replace` and `copy.copy`/`copy.deepcopy` of a kernel instance, and
`field(default_factory=...)` defaults. aiter's opus lists (csrc/opus_gemm/opus_gemm_common.py,
2026) build their 4 GiB-safe variants with `from dataclasses import replace` inside a function.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyeval import Unsupported, dotted
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


def _is_instance(x: Any) -> bool:
    """A kernel instance (ckkb.extract.aiter_pyexec.Instance: not imported, which imports this
    module)."""
    return type(x).__name__ == "Instance" and hasattr(x, "cls") and hasattr(x, "values")


def copy_instance(x: Any) -> Any:
    """copy.copy / copy.deepcopy of a kernel instance (its field values copied)."""
    if _is_instance(x):
        return type(x)(x.cls, _copy.deepcopy(x.values), x.line, x.origin)
    return _copy.deepcopy(x)


def replace_instance(inst: Any, **changes: Any) -> Any:
    """dataclasses.replace: a new instance of the fields (attributes set outside them are not
    copied, as __init__ makes it), with `changes` applied; an unknown field is a TypeError."""
    if not _is_instance(inst):
        raise TypeError("replace() of a value that is not a dataclass instance")
    unknown = sorted(set(changes) - set(inst.cls.fields))
    if unknown:
        raise TypeError(f"replace() got unexpected fields {unknown}")
    values = {f: _copy.deepcopy(inst.values[f]) for f in inst.cls.fields if f in inst.values}
    return type(inst)(inst.cls, {**values, **changes}, inst.line, inst.origin)


MODELLED: dict[tuple[str, str], Callable[..., Any]] = {
    ("dataclasses", "replace"): replace_instance,
    ("copy", "copy"): copy_instance,
    ("copy", "deepcopy"): copy_instance,
}


def import_from(small: Any) -> dict[str, Callable[..., Any]]:
    """`from MOD import NAME` inside a function: name bound -> the modelled function; a name
    not modelled is Unsupported."""
    out: dict[str, Callable[..., Any]] = {}
    mod = dotted(small.module) if small.module is not None and not small.relative else ""
    if isinstance(small.names, cst.ImportStar):
        raise Unsupported(small, f"from {mod} import * inside a function")
    for a in small.names:
        name = dotted(a.name)
        f = MODELLED.get((mod, name))
        if f is None:
            raise Unsupported(small, f"from {mod or '.'} import {name} is not modelled")
        bound = a.asname.name.value if a.asname is not None else name
        out[bound] = f
    return out


def factory_default(node: Any) -> tuple[bool, Any]:
    """`field(default_factory=lambda: LITERAL)` or `field(default_factory=list|dict|set)`:
    (True, the value each instance starts with); (False, None) for anything else."""
    from ckkb.extract.aiter_pyeval import literal

    if not (isinstance(node, cst.Call) and dotted(node.func) in ("field", "dataclasses.field")):
        return False, None
    for a in node.args:
        if a.keyword is not None and a.keyword.value == "default_factory":
            v = a.value
            if isinstance(v, cst.Lambda) and not v.params.params:
                try:
                    return True, literal(v.body)
                except Unsupported:
                    return False, None
            if isinstance(v, cst.Name) and v.value in ("list", "dict", "set"):
                return True, {"list": [], "dict": {}, "set": set()}[v.value]
    return False, None

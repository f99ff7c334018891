"""What the aiter kernel-list readers find (ckkb.extract.aiter_kernels, aiter_derived): kernel
dataclasses, their lists and entries, and the kernelName an entry's `name` property gives."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_pyeval import Unsupported, compile_expr
from ckkb.extract.aiter_pyexec import ClassInfo, Instance, run_property

if TYPE_CHECKING:
    import libcst as cst


@dataclass
class KernelClass:
    name: str
    line: int
    fields: list[str]
    defaults: dict[str, Any]
    name_expr: cst.BaseExpression | None = None  # not pickled (see KernelFile)
    name_line: int = 0
    name_problem: str | None = None
    name_fn: Any = None  # name_expr compiled (aiter_pyeval.compile_expr), made on first use
    props: dict[str, Any] = field(default_factory=dict)  # property -> cst.FunctionDef (not pickled)
    name_cache: dict[str, Any] = field(default_factory=dict)  # entry_name's (not pickled)
    # the module names its properties read (ckkb.extract.aiter_name_env; not pickled)
    env: dict[str, Any] = field(default_factory=dict)


@dataclass
class KernelEntry:
    key: Any
    line: int
    values: dict[str, Any]
    name: str | None
    shadowed: bool = False
    duplicate_of: Any = None


@dataclass
class KernelList:
    name: str
    line: int
    class_name: str
    fields: list[str]
    entries: list[KernelEntry] = field(default_factory=list)
    duplicate_ids: list[Any] = field(default_factory=list)
    # built by code (ckkb.extract.aiter_derived): the arch tests that lead to it ([] = any arch)
    derived: bool = False
    when: list[Any] = field(default_factory=list)
    complete: bool = True  # every entry of the literal was read

    @property
    def arch(self) -> str | None:
        m = re.search(r"(gfx\d+[a-z]?)", self.name)
        return m.group(1) if m else None

    def by_id(self) -> dict[Any, KernelEntry]:
        """What Python builds from the literal: the last entry for each key."""
        return {e.key: e for e in self.entries if not e.shadowed}


@dataclass
class KernelFile:
    rel: str
    op: str
    classes: list[str]
    lists: list[KernelList]
    diagnostics: list[Diagnostic]


def entry_name(kc: KernelClass, values: dict[str, Any], classes: dict[str, KernelClass]) -> Any:
    """What kc's `name` property returns for one entry's field values (Unsupported if not
    evaluated statically): a single return expression compiled once, or the property's
    statements run (with the module names it reads, if any). Cached per field values: derived
    lists repeat their literals' entries."""
    key = repr(sorted(values.items()))
    name = kc.name_cache.get(key, _MISSING)
    if name is _MISSING:
        try:
            if kc.name_expr is not None and not kc.env:
                if kc.name_fn is None:
                    kc.name_fn = compile_expr(kc.name_expr, kc.name)
                name = kc.name_fn({}, values)
            else:
                name = run_property(kc.props["name"], Instance(class_info(kc), values, 0))
        except Unsupported as u:
            name = u
        kc.name_cache[key] = name
    if isinstance(name, Unsupported):
        raise name
    return name


_MISSING = object()


def class_info(kc: KernelClass) -> ClassInfo:
    info = ClassInfo(kc.name, kc.fields, kc.defaults, kc.props, env=kc.env or None)
    if "name" in kc.props:
        info.name_of = lambda values: entry_name(kc, values, {})
    return info

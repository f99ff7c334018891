"""Kernel lists the kernels stage does not build from literals, run statically per arch as the
tuner imports them: aiter 2026's opus `kernels_list` is `{**a16w16_kernels_list, ...}` over
dicts that functions fill (`_make_4g_safe` copies entries with `dataclasses.replace`), and its
`gfx942_a8w8_kernels_list` is built by a call. ckkb.extract.aiter_modrun runs the module (never
executed), reading only the audit stage's declared inputs (ckkb.audit.inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.audit.inputs import Readable, readable_for
from ckkb.extract.aiter_modrun import Modules
from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import Instance, is_known
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


class EvaluatedLists:
    """`names(file, list, gfx)`: {id: kernel name} of a module-level dict of kernel instances
    as the module builds it on gfx, or why it cannot be read statically (a string)."""

    def __init__(self, root: Path, pkg: Path | None, readable: Readable | None = None) -> None:
        self.root = root
        self.roots = [root] + ([pkg.parent] if pkg is not None and pkg.parent != root else [])
        self.readable = readable if readable is not None else Readable(root)
        self.modules: dict[str, Modules] = {}
        self.cache: dict[tuple[str, str, str], dict[Any, str] | str] = {}

    def names(self, file: str, name: str, gfx: str) -> dict[Any, str] | str:
        key = (file, name, gfx)
        if key not in self.cache:
            try:
                self.cache[key] = self._names(file, name, gfx)
            except (Unsupported, RecursionError, OSError, SyntaxError) as e:
                self.cache[key] = f"{file}:{name} on {gfx}: {getattr(e, 'what', e)}"
        return self.cache[key]

    def _names(self, file: str, name: str, gfx: str) -> dict[Any, str]:
        if gfx not in self.modules:
            self.modules[gfx] = Modules(self.roots, gfx, self.readable)
        env = self.modules[gfx].env(self.root / file)
        d = env.get(name)
        if d is None or not is_known(d):
            raise Unsupported(cst.Name(name), "not built statically")
        if not isinstance(d, dict):
            raise Unsupported(cst.Name(name), f"is a {type(d).__name__}, not a dict")
        out: dict[Any, str] = {}
        for k, inst in d.items():
            name_of = inst.cls.name_of if isinstance(inst, Instance) else None
            got = name_of(inst.values) if name_of is not None else None
            if not isinstance(got, str):
                raise Unsupported(cst.Name(name), f"entry {k!r} has no name statically")
            out[k] = got
        return out


def evaluated(ctx: Any) -> EvaluatedLists | None:
    """The audit's one EvaluatedLists (None without a tree root)."""
    if ctx.root is None:
        return None
    if "_evaluated_lists" not in ctx.__dict__:
        pkg = Path(ctx.pkg) if ctx.pkg is not None else None
        ctx.__dict__["_evaluated_lists"] = EvaluatedLists(Path(ctx.root), pkg, readable_for(ctx))
    ev: EvaluatedLists = ctx.__dict__["_evaluated_lists"]
    return ev

"""Kernel lists the kernels stage does not build from literals, run statically per arch as the
tuner imports them (once, when the module never asks for the arch): aiter 2026's opus
`kernels_list` is `{**a16w16_kernels_list, ...}` over dicts that functions fill
(`_make_4g_safe` copies entries with `dataclasses.replace`), and its `gfx942_a8w8_kernels_list`
is built by a call; its FlyDSL lists by code run at import (ckkb.extract.aiter_pystd).
ckkb.extract.aiter_modrun runs the module (never executed), reading only the audit stage's
declared inputs (ckkb.audit.inputs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ckkb.audit.inputs import Readable, readable_for
from ckkb.extract.aiter_derived import ARCH_FUNCTIONS
from ckkb.extract.aiter_modrun import Modules
from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import Instance, is_known
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


class _NoArch:
    """What `get_gfx()` returns in a run that learns whether a module asks for the arch: any
    use of it (a compare, a method, a format) raises Unsupported."""

    def _asked(self, *args: Any, **kwargs: Any) -> Any:
        raise Unsupported(cst.Name("get_gfx"), "the module asks for the arch")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _asked
    __bool__ = __str__ = __format__ = __len__ = __iter__ = __contains__ = _asked
    __getitem__ = __add__ = __radd__ = __mod__ = _asked

    def __getattr__(self, name: str) -> Any:
        return self._asked()


class EvaluatedLists:
    """`names(file, list, gfx)`: {id: kernel name} of a module-level dict of kernel instances
    as the module builds it on gfx, or why it cannot be read statically (a string)."""

    def __init__(self, root: Path, pkg: Path | None, readable: Readable | None = None) -> None:
        self.root = root
        self.roots = [root] + ([pkg.parent] if pkg is not None and pkg.parent != root else [])
        self.readable = readable if readable is not None else Readable(root)
        self.modules: dict[str, Modules] = {}
        self.probe: Modules | None = None  # modules run with an arch that raises when used
        self.cache: dict[tuple[str, str, str], dict[Any, str] | str] = {}
        self.lines: dict[tuple[str, str], int] = {}
        self.entries: dict[tuple[str, str, str], dict[Any, EvaluatedKernel]] = {}

    def names(self, file: str, name: str, gfx: str) -> dict[Any, str] | str:
        key = (file, name, gfx)
        if key not in self.cache:
            try:
                self.cache[key] = self._names(file, name, gfx)
            except (Unsupported, RecursionError, OSError, SyntaxError) as e:
                self.cache[key] = f"{file}:{name} on {gfx}: {getattr(e, 'what', e)}"
        return self.cache[key]

    def _names(self, file: str, name: str, gfx: str) -> dict[Any, str]:
        once = self.once(file, name)
        return once if once is not None else self._built(file, name, gfx)

    def once(self, file: str, name: str) -> dict[Any, str] | None:
        """The dict as the module builds it without ever asking for the arch (the same on every
        arch: built once), else None. A module whose text names no arch function is run with
        an arch that raises when used; one that names one, or asks, is built per arch."""
        key = (file, name, "*")
        if key not in self.cache:
            got: dict[Any, str] | str = "names an arch function"
            path = self.root / file
            text = path.read_text(encoding="utf-8", errors="replace") if self.readable(path) else ""
            if text and not any(f in text for f in ARCH_FUNCTIONS):
                if self.probe is None:
                    self.probe = Modules(self.roots, cast(str, _NoArch()), self.readable)
                try:
                    got = self._from(self.probe, file, name)
                except (Unsupported, RecursionError, OSError, SyntaxError) as e:
                    got = str(getattr(e, "what", e))
            self.cache[key] = got
        found = self.cache[key]
        return found if isinstance(found, dict) else None

    def line(self, file: str, name: str) -> int:
        """The line of the module-level statement that first binds `name` in `file` (0: none)."""
        if (file, name) not in self.lines:
            self.lines[(file, name)] = self._line(file, name)
        return self.lines[(file, name)]

    def _line(self, file: str, name: str) -> int:
        import ast

        path = self.root / file
        if not self.readable(path):
            return 0
        for node in ast.parse(path.read_text(encoding="utf-8", errors="replace")).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.lineno
        return 0

    def _built(self, file: str, name: str, gfx: str) -> dict[Any, str]:
        if gfx not in self.modules:
            self.modules[gfx] = Modules(self.roots, gfx, self.readable)
        return self._from(self.modules[gfx], file, name)

    def _from(self, modules: Modules, file: str, name: str) -> dict[Any, str]:
        env = modules.env(self.root / file)
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


@dataclass(frozen=True)
class EvaluatedKernel:
    """An entry of a list the audit builds (no aiter_kernels row): its name, and where the list
    is bound (file, line)."""

    kernel_id: Any
    name: str
    file: str
    line: int


def by_name_prefix(
    ev: EvaluatedLists, ctx: Any, rc: Any, built: set[tuple[str, str]], gfx: str, name: str
) -> tuple[dict[Any, EvaluatedKernel], str, int | None] | None:
    """The list the tuner imports that a row of a libtype its getKernelName names lists for
    (a case ckkb could not follow: aiter 2026's `for pipe in FLYDSL_PIPELINES`) indexes on gfx:
    among the lists the audit builds, one holding the row's kernelName, else the one whose names
    the row's is written like (the longest common prefix with its first entry), as the run time
    routes a FlyDSL kernel by its name's prefix. None when no such list is built on gfx."""
    import os.path

    best: tuple[tuple[bool, int], str, str, dict[Any, str]] | None = None
    for f, n in getattr(rc, "kernel_list_candidates", None) or []:
        if (f, n) in built:
            continue
        got = ev.names(f, n, gfx)
        if not isinstance(got, dict) or not got:
            continue
        like = next(iter(got.values()))
        score = (name in got.values(), len(os.path.commonprefix([name, like])))
        if best is None or score > best[0]:
            best = (score, f, n, got)
    if best is None:
        return None
    _, f, n, got = best
    if (f, n, gfx) not in ev.entries:
        line = ev.line(f, n)
        ev.entries[(f, n, gfx)] = {k: EvaluatedKernel(k, v, f, line) for k, v in got.items()}
    lid = next((kl.id for kl in ctx.lists if kl.file == f and kl.name == n), None)
    return ev.entries[(f, n, gfx)], f"{f}:{n}", lid


def evaluated(ctx: Any) -> EvaluatedLists | None:
    """The audit's one EvaluatedLists (None without a tree root)."""
    if ctx.root is None:
        return None
    if "_evaluated_lists" not in ctx.__dict__:
        pkg = Path(ctx.pkg) if ctx.pkg is not None else None
        ctx.__dict__["_evaluated_lists"] = EvaluatedLists(Path(ctx.root), pkg, readable_for(ctx))
    ev: EvaluatedLists = ctx.__dict__["_evaluated_lists"]
    return ev

"""Kernel lists the kernels stage does not build from literals, run statically per arch as the
tuner imports them: aiter 2026's opus `kernels_list` is `{**a16w16_kernels_list, ...}` over
dicts that functions fill (`_make_4g_safe` copies entries with `dataclasses.replace`), and its
`gfx942_a8w8_kernels_list` is built by a call. ckkb.extract.aiter_modrun runs the module (never
executed), reading only the audit stage's declared inputs (ckkb.audit.inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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


# imports a module may make and still build the same lists on every arch
STDLIB = frozenset(
    ("os", "sys", "math", "re", "dataclasses", "typing", "functools", "collections", "copy")
    + ("itertools", "enum", "__future__")
)


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
        if self._arch_free(file):  # the same dict on every arch: built once
            key = (file, name, "*")
            if key not in self.cache:
                self.cache[key] = self._built(file, name, gfx)
            got = self.cache[key]
            if isinstance(got, str):
                raise Unsupported(cst.Name(name), got.split(": ", 1)[-1])
            return got
        return self._built(file, name, gfx)

    def _arch_free(self, file: str) -> bool:
        """The module names no arch function and imports (at module level: a function's import
        runs statically only for the modelled `dataclasses.replace`/`copy`) only standard
        library modules: what it builds cannot depend on the arch."""
        import ast

        path = self.root / file
        if not self.readable(path):
            return False
        text = path.read_text(encoding="utf-8", errors="replace")
        if any(f in text for f in ARCH_FUNCTIONS):
            return False
        for node in _module_level(ast.parse(text)):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [("." * node.level) + (node.module or "")]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(m.split(".")[0] not in STDLIB for m in mods):
                return False
        return True

    def _built(self, file: str, name: str, gfx: str) -> dict[Any, str]:
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


def _module_level(tree: Any) -> list[Any]:
    """Every node outside function bodies."""
    import ast

    out: list[Any] = []
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
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

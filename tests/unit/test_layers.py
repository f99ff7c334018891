"""ckkb's imports flow one way: domain -> readers -> stages -> knowledge base -> queries and
audit -> the pipeline -> surfaces. This test reads every module's imports (function-level ones
too) with `ast` and fails on an upward edge or an import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ckkb"

# (module prefix, layer): the longest matching prefix decides; a module may import its own layer
# and any layer below it, never one above.
LAYERS: tuple[tuple[str, int], ...] = (
    ("ckkb", 0),  # ckkb/__init__.py: the version
    ("ckkb.errors", 0),
    ("ckkb.diagnostics", 0),
    ("ckkb.archs", 0),
    ("ckkb.fields", 0),
    ("ckkb.vocabulary", 0),
    ("ckkb.settings", 0),
    ("ckkb.sources", 0),
    ("ckkb.kb.schema", 1),  # the row types every layer above writes or reads
    ("ckkb.kb.stages", 1),  # what a stage is: the contract between extract and the build
    ("ckkb.profiler_legend", 1),
    ("ckkb.lang", 1),  # readers: no rows, no database
    ("ckkb.extract.lazy", 1),
    ("ckkb.extract.files", 1),
    ("ckkb.extract.cpp", 1),
    ("ckkb.extract.conditions", 1),
    ("ckkb.extract.pyscan", 1),
    ("ckkb.names", 1),
    ("ckkb.logs", 1),
    ("ckkb.extract", 2),
    ("ckkb.kb", 3),
    ("ckkb.queries", 4),
    ("ckkb.profiler_cmd", 4),
    ("ckkb.kb.ingest", 5),
    ("ckkb.kb.ingest_keys", 5),  # the result keys ingest skips (reads a lookup)
    ("ckkb.audit", 5),
    ("ckkb.versions", 5),  # two trees side by side: ckkb diff, ckkb review (reads the audit)
    ("ckkb.pipeline", 6),
    ("ckkb.harness", 7),
    ("ckkb.runner", 7),
    ("ckkb.fleet", 7),  # race and harness on a Dask cluster
    ("ckkb.web", 7),
    ("ckkb.cli", 8),
    ("ckkb.__main__", 8),
)


def layer(module: str) -> int:
    best = max(
        (p for p, _ in LAYERS if module == p or module.startswith(p + ".")),
        key=len,
    )
    return dict(LAYERS)[best]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported ckkb module, line, at module level) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    top = {id(n) for n in tree.body}
    for n in tree.body:  # imports under `if TYPE_CHECKING:` or try: still load at import time
        if isinstance(n, (ast.If, ast.Try)):
            top.update(id(c) for c in ast.walk(n))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            names = [base]
            # `from ckkb import x` imports the module ckkb.x when there is one
            for a in node.names:
                sub = f"{base}.{a.name}"
                if (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    PACKAGE.parent / sub.replace(".", "/")
                ).is_dir():
                    names.append(sub)
        out += [(m, node.lineno, id(node) in top) for m in names if m.split(".")[0] == "ckkb"]
    return out


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for mod, path in MODULES.items():
        for target, line, _ in imports(path):
            if layer(target) > layer(mod):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {mod} -> {target}")
    assert upward == []


def test_no_import_cycles_among_modules():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for target, _, _ in imports(path):
            if target in graph and target != mod and not mod.startswith(target + "."):
                graph[mod].add(target)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


@pytest.mark.parametrize("module", ["ckkb.extract.instances", "ckkb.kb.build.run", "ckkb.cli"])
def test_the_layer_table_knows_every_kind_of_module(module):
    assert module in MODULES and layer(module) >= 0

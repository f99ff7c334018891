"""The module-level names a kernel dataclass's properties read, evaluated statically.

aiter 2026-08's MoE kernel name ends with `ACT_OP_NAME[self.ActOP]`, where the module writes

    ACT_OP_MAP = {"gelu": 0, "silu": 1, "swiglu": 3}
    ACT_OP_NAME = {v: k for k, v in ACT_OP_MAP.items()}

(the wheel's spells `"silu" if self.ActOP else "gelu"`). A property runs after the module has
been imported, so it sees each name's final value: the top-level statements that bind or touch
the names its properties read are run in file order (ckkb.extract.aiter_pyexec.Interp), with the
names they read in turn. A name bound any other way (an import, a def or class, a compound
statement, `global` in a function) or by a statement that cannot be run is unknown: reading it
stays "not known statically", never guessed. Python's own meaning of a value is kept: a field
written `0` or `False` indexes a dict keyed by 0 alike, as in Python.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyexec import BUDGET, Interp, poison
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


def read_names(fn: ast.FunctionDef) -> set[str]:
    """Names a function reads that it does not bind itself (parameters, assignments, loop and
    comprehension targets, lambda parameters): the module's, or builtins."""
    loads: set[str] = set()
    bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    for stmt in fn.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name):
                (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
    return loads - bound


def property_names(tree: ast.Module, class_name: str) -> set[str]:
    """What the properties of the top-level class `class_name` read from outside themselves."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == class_name:
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and any(
                    isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
                ):
                    out |= read_names(item)
    return out


def _stores(nodes: list[Any]) -> set[str]:
    """Names the nodes bind or change: assigned names, a subscript's or attribute's base name."""
    out: set[str] = set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
                base: ast.expr = n
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if isinstance(base, ast.Name):
                    out.add(base.id)
            elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
    return out


def _receivers(stmt: ast.stmt) -> set[str]:
    """Names a method is called on (`X.update(..)` may change X in place)."""
    return {
        n.func.value.id
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
    }


def _reads(stmt: ast.stmt) -> set[str]:
    """Names a statement reads (comprehension and lambda variables left out)."""
    loads: set[str] = set()
    local: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.add(n.id)
        elif isinstance(n, ast.comprehension):
            local |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            local |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
    return loads - local


_RUNNABLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_SCOPED = re.compile(r"^[ \t]*(?:global|nonlocal)\b", re.M)


class _Statements:
    """The module's top-level statements and what each binds or may change, walked only as far
    as the names asked about need (kernel dict literals are large)."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.stmts = list(tree.body)
        self.lines = text.split("\n")
        self.walrus = ":=" in text
        self.scoped = _SCOPED.search(text) is not None
        self._bound = [self._binds(s) for s in self.stmts]
        self._recv: dict[int, set[str]] = {}

    def _binds(self, s: ast.stmt) -> set[str]:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out = {s.name}
            if self.scoped:  # a function that rebinds a module name when called
                for n in ast.walk(s):
                    if isinstance(n, (ast.Global, ast.Nonlocal)):
                        out.update(n.names)
            return out
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            return {(a.asname or a.name).split(".")[0] for a in s.names}
        if not isinstance(s, _RUNNABLE):
            return _stores([s]) | _receivers(s)  # a compound statement: anything inside
        targets: list[Any] = []
        if isinstance(s, ast.Assign):
            targets = list(s.targets)
        elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
            targets = [s.target]
        return _stores([s] if self.walrus else targets)

    def changes(self, i: int, wanted: set[str]) -> set[str]:
        """What statement i binds or may change, of the names in `wanted`."""
        out = self._bound[i] & wanted
        s = self.stmts[i]
        if isinstance(s, _RUNNABLE):
            text = "\n".join(self.lines[s.lineno - 1 : s.end_lineno or s.lineno])
            if any(w + "." in text for w in wanted):
                if i not in self._recv:
                    self._recv[i] = _receivers(s)
                out |= self._recv[i] & wanted
        return out


def module_env(tree: ast.Module, text: str, wanted: set[str]) -> dict[str, Any]:
    """The final values of the module names in `wanted` (and of the names their statements
    read) that the module binds; a name it binds or changes in a way not run here is poisoned
    (reading it raises Unsupported). Names the module never binds are left out (builtins stay
    builtins)."""
    st = _Statements(tree, text)
    wanted = set(wanted)
    while True:  # the names read by the statements that make a wanted name, to a fixed point
        more: set[str] = set()
        for i, s in enumerate(st.stmts):
            if isinstance(s, _RUNNABLE) and st.changes(i, wanted):
                more |= _reads(s)
        if more <= wanted:
            break
        wanted |= more
    env: dict[str, Any] = {}
    budget = [BUDGET]
    for i, s in enumerate(st.stmts):
        hit = st.changes(i, wanted)
        if not hit:
            continue
        if not isinstance(s, _RUNNABLE):
            poison(env, hit)
            continue
        try:
            node = cst.parse_statement(_segment(st.lines, s))
            Interp(env, budget).exec_stmt(node)
        except Exception:  # whatever running it raises, the names stay unknown
            poison(env, hit)
    return env


def _segment(lines: list[str], node: ast.stmt) -> str:
    """A statement's source (ast.get_source_segment splits the whole text on every call)."""
    end_line = node.end_lineno or node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else -1
    part = [ln.encode() for ln in lines[node.lineno - 1 : end_line]]
    part[-1] = part[-1][:end_col]
    part[0] = part[0][node.col_offset :]
    return "\n".join(p.decode() for p in part) + "\n"


def class_envs(tree: ast.Module, text: str, classes: list[str]) -> dict[str, dict[str, Any]]:
    """Each class's module names its properties read ({} for a class that reads none the module
    binds): one evaluation of the module's statements for all of them."""
    reads = {c: property_names(tree, c) for c in classes}
    env = module_env(tree, text, set().union(*reads.values())) if reads else {}
    return {c: (env if names & env.keys() else {}) for c, names in reads.items()}

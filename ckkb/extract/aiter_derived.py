"""Kernel lists an aiter module builds with code, per arch (ckkb.extract.aiter_pyexec runs it).

aiter 2026's cktile modules write base dicts as literals and then build the list the tuner and
codegen import:

    arch = get_gfx()
    if arch.startswith("gfx95"):
        candidate_kernels_cktile_dict = expand_blockpercu(kernels_list_95x)
    else:
        candidate_kernels_cktile_dict = expand_blockpercu(kernels_list_942)

The module's top-level statements are run once per outcome of the tests on the arch. A name
such a statement binds to a dict of kernel instances with integer ids is a derived list; its
`when` is the list of tests (and outcomes) that lead to it, `[]` where every path builds the same
dict; its entries come from the module's literal lists (copies keep their line). A statement
that cannot be run leaves the names it binds unknown (never guessed); where it
reads a kernel list or class, that is reported with its line.
"""

from __future__ import annotations

import ast
import copy as _copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_kernel_model import (
    KernelClass,
    KernelEntry,
    KernelFile,
    KernelList,
    class_info,
    entry_name,
)
from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import (
    ArchValue,
    ClassInfo,
    Explorer,
    Function,
    Instance,
    Interp,
    Native,
    is_known,
    poison,
)
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
    import libcst.metadata as cst_metadata
else:
    cst = lazy_module("libcst")
    cst_metadata = lazy_module("libcst.metadata")

MAX_PATHS = 32
ARCH_FUNCTIONS = ("get_gfx", "get_gfx_runtime")  # aiter's chip_info: the arch built for


@dataclass
class Derived:
    name: str
    line: int
    when: list[list[Any]]  # [[test, arg, outcome], ...]: the arch tests that lead here
    entries: dict[int, Instance]


def may_derive(text: str, names: set[str]) -> bool:
    """Whether a top-level statement other than a def, a class, an import or a kernel dict
    literal reads one of `names` (the module's kernel classes and literal lists): only then can
    the module build a list with code, and only then is it parsed whole (libcst, ~10x `ast`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in names
            and isinstance(stmt.value, ast.Dict)
        ):
            continue  # a literal the reader has read
        if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt)):
            return True
    return False


def _assigned(node: Any, imports: bool = True) -> set[str]:
    """Names a statement binds (assignment targets at any depth, for targets, defs, and imports
    unless `imports` is False)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            _names(n.target, out)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            _names(n.target, out)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            _names(n.target, out)

        def visit_For(self, n: cst.For) -> None:
            _names(n.target, out)

        def visit_ImportAlias(self, n: cst.ImportAlias) -> None:
            a = n.asname.name if n.asname is not None else n.name
            if imports and isinstance(a, cst.Name):
                out.add(a.value)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            out.add(n.name.value)
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            out.add(n.name.value)
            return False

    node.visit(V())
    return out


def _names(target: Any, out: set[str]) -> None:
    if isinstance(target, cst.Name):
        out.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            _names(el.value, out)
    elif isinstance(target, (cst.Attribute, cst.Subscript)):
        base = target.value
        while isinstance(base, (cst.Attribute, cst.Subscript)):
            base = base.value
        if isinstance(base, cst.Name):
            out.add(base.value)  # mutating an object changes what its name holds


def _read(node: Any) -> set[str]:
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


@dataclass
class _Stmt:
    """A top-level statement: a class or a kernel dict literal by name (never parsed again), or
    any other statement parsed alone with libcst (`first`: its first line in the file)."""

    kind: str  # "class", "literal", "code", "unparsed"
    name: str = ""
    node: Any = None
    first: int = 0
    bound: frozenset[str] = frozenset()  # what an unparsed statement binds (from `ast`)
    _pos: dict[int, int] | None = None

    def line(self, node: Any) -> int:
        """A node's line in the file (positions resolved on first use)."""
        if self._pos is None:
            pos = cst_metadata.MetadataWrapper(
                cst.Module(body=[self.node]), unsafe_skip_copy=True
            ).resolve(cst_metadata.PositionProvider)
            self._pos = {id(n): self.first - 1 + r.start.line for n, r in pos.items()}
        return self._pos.get(id(node), 0) or self.first


def _statements(text: str, tree: ast.Module, classes: set[str], literals: set[str]) -> list[_Stmt]:
    """The module's top-level statements, cut at the lines `ast` gives: only the statements that
    are neither a class nor a kernel dict literal are parsed (each alone, with libcst), so a
    module of large literals costs little more than its few statements of code."""
    lines = text.splitlines(keepends=True)
    out: list[_Stmt] = []
    last = 0
    for node in tree.body:
        if node.lineno <= last:
            continue  # `a = 1; b = 2`: parsed with the statement that starts the line
        if isinstance(node, ast.ClassDef):
            out.append(_Stmt("class", node.name))
            last = node.end_lineno or node.lineno
            continue
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in literals
            and isinstance(node.value, ast.Dict)
        ):
            out.append(_Stmt("literal", node.targets[0].id))
            last = node.end_lineno or node.lineno
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        last = node.end_lineno or node.lineno
        try:
            body = cst.parse_module("".join(lines[first - 1 : last])).body
        except cst.ParserSyntaxError:
            bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            out.append(_Stmt("unparsed", first=first, bound=frozenset(bound)))
            continue
        out += [_Stmt("code", node=b, first=first) for b in body]
    return out


def derive(
    text: str,
    classes: dict[str, ClassInfo],
    literals: dict[str, dict[int, Instance] | None],
) -> tuple[list[Derived], list[tuple[int, str]]]:
    """The derived kernel lists of a module, and (line, problem) for each statement that reads a
    kernel list or class and could not be run. `literals`: the module's kernel dict literals as
    read (None where an entry of one could not be read)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], []
    stmts = _statements(text, tree, set(classes), set(literals))
    explorer = Explorer()
    paths: list[tuple[list[list[Any]], dict[str, tuple[int, dict[int, Instance]]]]] = []
    problems: dict[tuple[int, str], None] = {}
    while True:
        found = _run(stmts, classes, literals, explorer, problems)
        paths.append(([list(t) for t in explorer.taken], found))
        if len(paths) >= MAX_PATHS or not explorer.next_path():
            break
    out: list[Derived] = []
    names = sorted(
        {n for _, f in paths for n in f}, key=lambda n: min(f[n][0] for _, f in paths if n in f)
    )
    for name in names:
        got = [(when, f[name]) for when, f in paths if name in f]
        same = len(got) == len(paths) and all(_same(g[1][1], got[0][1][1]) for g in got)
        if same:
            out.append(Derived(name, got[0][1][0], [], got[0][1][1]))
            continue
        for when, (line, entries) in got:
            out.append(Derived(name, line, when, entries))
    return out, list(problems)


def _same(a: dict[int, Instance], b: dict[int, Instance]) -> bool:
    return list(a) == list(b) and all(a[k] == b[k] for k in a)


def _run(
    stmts: list[_Stmt],
    classes: dict[str, ClassInfo],
    literals: dict[str, dict[int, Instance] | None],
    explorer: Explorer,
    problems: dict[tuple[int, str], None],
) -> dict[str, tuple[int, dict[int, Instance]]]:
    env: dict[str, Any] = {}
    budget = [200_000]
    kernel_names = set(classes) | set(literals)  # names a kernel list can come from
    derived_at: dict[str, int] = {}
    for st in stmts:
        if st.kind == "class":
            if st.name in classes:
                env[st.name] = classes[st.name]
            else:
                poison(env, {st.name})
            continue
        if st.kind == "literal":
            entries = literals[st.name]
            if entries is None:
                poison(env, {st.name})
            else:
                env[st.name] = {
                    k: Instance(v.cls, dict(v.values), v.line) for k, v in entries.items()
                }
            continue
        if st.kind == "unparsed":
            poison(env, set(st.bound))
            continue
        stmt = st.node
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            _imports(stmt, env, explorer)
            continue
        if isinstance(stmt, cst.FunctionDef) and not stmt.decorators:
            env[stmt.name.value] = Function(stmt, env)
            continue
        bound = _assigned(stmt)
        try:
            Interp(env, budget).exec_stmt(stmt)
        except Unsupported as u:
            if _read(stmt) & kernel_names:
                problems[(st.line(u.node), u.what)] = None
            poison(env, bound)
            continue
        if _read(stmt) & kernel_names:
            kernel_names |= bound
            for n in bound:
                derived_at[n] = _line_of_binding(st, n)
    out: dict[str, tuple[int, dict[int, Instance]]] = {}
    for n, ln in derived_at.items():
        v = env.get(n)
        if (
            is_known(v)
            and isinstance(v, dict)
            and v
            and all(isinstance(k, int) and not isinstance(k, bool) for k in v)
            and all(isinstance(x, Instance) and x.line > 0 for x in v.values())
        ):  # built from the literals read (an instance made by code has no entry line)
            out[n] = (ln, v)
    return out


def _literal_target(stmt: Any, literals: dict[str, Any]) -> str | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    a = stmt.body[0]
    if (
        isinstance(a, cst.Assign)
        and len(a.targets) == 1
        and isinstance(a.targets[0].target, cst.Name)
        and isinstance(a.value, cst.Dict)
        and a.targets[0].target.value in literals
    ):
        return a.targets[0].target.value
    return None


def _imports(stmt: Any, env: dict[str, Any], explorer: Explorer) -> None:
    for s in stmt.body:
        if isinstance(s.names, cst.ImportStar):
            continue  # names it would bind stay unknown (a later use is reported)
        for a in s.names:
            head = a.name
            while isinstance(head, cst.Attribute):
                head = head.value
            orig = a.name.value if isinstance(a.name, cst.Name) else ""
            if a.asname is not None and isinstance(a.asname.name, cst.Name):
                bound = a.asname.name.value
            else:
                bound = head.value if isinstance(head, cst.Name) else ""
            mod = (
                s.module.value
                if isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name)
                else None
            )
            if mod is not None and orig in ARCH_FUNCTIONS:
                env[bound] = Native(lambda: ArchValue(explorer))
            elif mod == "copy" and orig in ("copy", "deepcopy"):
                env[bound] = getattr(_copy, orig)
            else:
                poison(env, {bound})


def _line_of_binding(st: _Stmt, name: str) -> int:
    """The line of the first statement in `st` that binds `name` (an `if` binds in a branch)."""
    if not isinstance(st.node, cst.If):
        return st.first
    found: list[int] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            if not found and name in _assigned(n):
                found.append(st.line(n))

    st.node.visit(V())
    return found[0] if found else st.first


def add_derived(
    text: str,
    kf: KernelFile,
    classes: dict[str, KernelClass],
    report_at: Callable[..., None],
) -> None:
    """The lists the module builds with code from its literals (ckkb.extract.aiter_derived), each
    with the arch tests that lead to it."""
    if (
        not classes
        or not kf.lists
        or not may_derive(text, {*classes, *(kl.name for kl in kf.lists)})
    ):
        return
    infos = {n: class_info(kc) for n, kc in classes.items()}
    literals: dict[str, dict[int, Instance] | None] = {}
    for kl in kf.lists:
        literals[kl.name] = (
            {
                k: Instance(infos[kl.class_name], dict(e.values), e.line)
                for k, e in kl.by_id().items()
            }
            if kl.complete
            else None
        )
    found, problems = derive(text, infos, literals)
    for ln, what in problems:
        report_at(ln, f"kernel list not built statically: {what}")
    reported: set[str] = set()
    for d in found:
        first = next(iter(d.entries.values()))
        kl = KernelList(d.name, d.line, first.cls.name, list(first.cls.fields), derived=True)
        kl.when = d.when
        for k, inst in d.entries.items():
            kc = classes.get(inst.cls.name)
            name = None
            if kc is not None and "name" in kc.props:
                try:
                    name = entry_name(kc, inst.values, classes)
                except Unsupported as u:
                    if u.what not in reported:
                        reported.add(u.what)
                        report_at(d.line, f"{d.name}: name not evaluated statically: {u.what}")
            kl.entries.append(KernelEntry(key=k, line=inst.line, values=inst.values, name=name))
        kf.lists.append(kl)

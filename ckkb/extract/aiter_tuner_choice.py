"""Which kernel list a tuner's kernelId indexes, per row: its `getKernelName` run statically.

aiter 2026's tuners import several lists and choose one per result row:

    def getKernelName(self, kernelId, libType="ck", preshuffleB=False):
        if libType == "ck":
            kernel_list = bpreshuffle_dict if preshuffleB else candidate_kernels_dict
        elif libType == "cktile":
            kernel_list = candidate_kernels_cktile_dict
        else:
            return None
        ...
        return kernel_list[kernelId].name

The method is run (ckkb.extract.aiter_pyexec) once per combination of its selector parameters:
each string parameter takes every constant it is compared with and "*" (any other value), each
bool parameter True and False. The imported lists are stand-ins (`ListRef`), so the run returns
which import the row's kernelName comes from, None (the tuner names no kernel list), or a reason
it could not be followed.

Where a row's selector value comes from: the CSV column of the same name (case aside); else,
for a bool, True for the configs whose env var the tuner switches to under a test on an option
whose name starts the parameter's (`if getattr(args, "preshuffle", False):
self.ARG_DEFAULTS["config_env_name"] = "AITER_CONFIG_..._BPRESHUFFLE"`); else its default.
"""

from __future__ import annotations

import ast
import itertools
import textwrap
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import Interp, _Return
from ckkb.extract.aiter_tuner_reader import KERNEL_LIST_NAME
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
    import libcst.metadata as cst_metadata
else:
    cst = lazy_module("libcst")
    cst_metadata = lazy_module("libcst.metadata")

METHOD = "getKernelName"
OTHER = "*"  # a string selector value no branch compares with


class ListRef:
    """An imported kernel list, standing in for its dict while the method runs."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __len__(self) -> int:
        return 1 << 30  # ids are checked against the list when rows are audited

    def __getitem__(self, key: Any) -> _Entry:
        return _Entry(self.alias)

    def __contains__(self, key: Any) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ListRef) and other.alias == self.alias

    __hash__ = None  # type: ignore[assignment]


class _Entry:
    def __init__(self, alias: str) -> None:
        self.alias = alias

    def static_attr(self, name: str, node: Any) -> Any:
        if name == "name":
            return _Named(self.alias)
        raise Unsupported(node, f"attribute .{name} of a kernel other than .name")


class _Named:
    def __init__(self, alias: str) -> None:
        self.alias = alias


def read_choice(
    text: str, kernel_imports: list[tuple[str, str]]
) -> tuple[dict[str, Any] | None, list[tuple[int, str]]]:
    """The tuner's per-row choice (None when it has no `getKernelName` with selector parameters),
    and (line, problem) for each combination not followed. `kernel_imports`: (module, name) of
    the kernel lists the tuner imports (ckkb.extract.aiter_tuner_reader).

    Python's `ast` finds the imports and the methods; only `getKernelName` and the methods that
    set `config_env_name` are parsed with libcst (a tuner is ~800 lines; they are ~40)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None, []
    imports = _aliases(tree, set(kernel_imports))
    src = text.splitlines(keepends=True)
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        fns = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
        fn = next((f for f in fns if f.name == METHOD), None)
        if fn is None:
            continue
        method = _Method(src, fn)
        if method.node is None:
            return None, []
        switches = [
            m.node
            for f in fns
            if "config_env_name" in "".join(src[f.lineno - 1 : f.end_lineno])
            and (m := _Method(src, f)).node is not None
        ]
        choice, problems = _choice(switches, method, imports)
        inner = _inner_imports(tree, set(kernel_imports))
        if choice is not None and inner:
            choice["inner_imports"] = inner
        return choice, problems
    return None, []


def _inner_imports(tree: ast.Module, outer: set[tuple[str, str]]) -> list[list[str]]:
    """[module, name] of the kernel lists a function or method imports when it runs (aiter
    2026's bpreshuffle tuner imports the gfx1250 WMMA list in the method that races it), in
    source order, those imported at module level left out."""
    out: list[list[str]] = []
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = {
        (n.lineno, n.col_offset): n
        for f in fns
        for n in ast.walk(f)
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
    }
    for _, node in sorted(found.items()):
        if node.module:
            for a in node.names:
                key = (node.module, a.name)
                if KERNEL_LIST_NAME.search(a.name) and key not in outer and list(key) not in out:
                    out.append(list(key))
    return out


class _Method:
    """One method of a class, parsed alone (dedented) with libcst; lines are the file's."""

    def __init__(self, src: list[str], fn: ast.FunctionDef) -> None:
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        self.first = first
        self._pos: dict[int, int] | None = None
        try:
            body = cst.parse_module(textwrap.dedent("".join(src[first - 1 : fn.end_lineno]))).body
        except cst.ParserSyntaxError:
            self.node: Any = None
            return
        self.node = body[0] if body and isinstance(body[0], cst.FunctionDef) else None
        self.def_line = fn.lineno

    def line(self, node: Any) -> int:
        if self._pos is None:
            pos = cst_metadata.MetadataWrapper(
                cst.Module(body=[self.node]), unsafe_skip_copy=True
            ).resolve(cst_metadata.PositionProvider)
            self._pos = {id(n): self.first - 1 + r.start.line for n, r in pos.items()}
        return self._pos.get(id(node), 0) or self.def_line


def _choice(
    switches: list[Any], method: _Method, imports: dict[str, tuple[str, str]]
) -> tuple[dict[str, Any] | None, list[tuple[int, str]]]:
    fn = method.node
    params = list(fn.params.params)
    if len(params) < 3:  # self, kernelId: one list, read from the import
        return None, []
    kid = params[1].name.value
    selectors = []
    for p in params[2:]:
        default: Any = None
        if p.default is not None:
            try:
                default = Interp({}).eval(p.default)
            except Unsupported:
                default = None
        selectors.append({"name": p.name.value, "default": default})
    consts = _compared(fn, {s["name"] for s in selectors})
    domains: list[list[Any]] = []
    for s in selectors:
        if isinstance(s["default"], bool):
            domains.append([False, True])
        else:
            domains.append(sorted(consts.get(s["name"], set()) | {OTHER}, key=str))
    cases: list[dict[str, Any]] = []
    problems: dict[tuple[int, str], None] = {}
    for combo in itertools.product(*domains):
        when = {s["name"]: v for s, v in zip(selectors, combo, strict=True)}
        env: dict[str, Any] = {a: ListRef(a) for a in imports}
        env.update({kid: 0, **when})
        case: dict[str, Any] = {"when": when}
        try:
            Interp(env).exec_block(fn.body.body)
            case["none"] = True
        except _Return as r:
            if r.value is None:
                case["none"] = True
            elif isinstance(r.value, _Named):
                case["module"], case["name"] = imports[r.value.alias]
            else:
                case["error"] = f"{METHOD} returns {type(r.value).__name__}, not a list's .name"
        except Unsupported as u:
            case["error"] = f"{METHOD} not followed statically: {u.what}"
            problems[(method.line(u.node), u.what)] = None
        cases.append(case)
    for s in selectors:
        s["true_for_env"] = (
            _env_switches(switches, s["name"]) if isinstance(s["default"], bool) else []
        )
    return (
        {"method_line": method.def_line, "params": selectors, "cases": cases},
        list(problems),
    )


def _aliases(tree: ast.Module, wanted: set[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """alias -> (module, name) for the `from M import N [as A]` of the wanted lists (module
    level, `try` bodies included)."""
    out: dict[str, tuple[str, str]] = {}
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Try):
            todo[:0] = [*node.body, *(s for h in node.handlers for s in h.body), *node.orelse]
        elif isinstance(node, ast.If):
            todo[:0] = [*node.body, *node.orelse]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if (node.module, a.name) in wanted:
                    out[a.asname or a.name] = (node.module, a.name)
    return out


def _compared(fn: Any, names: set[str]) -> dict[str, set[str]]:
    """String constants each parameter is compared with (`libType == "ck"`, `x in ("a", "b")`)."""
    out: dict[str, set[str]] = {}

    class V(cst.CSTVisitor):
        def visit_Comparison(self, n: cst.Comparison) -> None:
            left = n.left
            for t in n.comparisons:
                right = t.comparator
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, cst.Name) and a.value in names:
                        for s in _strings(b):
                            out.setdefault(a.value, set()).add(s)
                left = right

    fn.visit(V())
    return out


def _strings(node: Any) -> list[str]:
    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return [v] if isinstance(v, str) else []
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return [s for e in node.elements for s in _strings(e.value)]
    return []


def _env_switches(methods: list[Any], param: str) -> list[str]:
    """Env vars the tuner writes its configs under when an option starting `param`'s name is
    set: `if <test naming "preshuffle">: ...["config_env_name"] = "AITER_CONFIG_X"`."""
    out: list[str] = []
    p = param.lower()

    def names_option(test: Any) -> bool:
        found = []

        class T(cst.CSTVisitor):
            def visit_SimpleString(self, n: cst.SimpleString) -> None:
                v = n.evaluated_value
                if isinstance(v, str) and len(v) >= 4 and p.startswith(v.lower()):
                    found.append(v)

            def visit_Attribute(self, n: cst.Attribute) -> None:
                v = n.attr.value
                if len(v) >= 4 and p.startswith(v.lower()):
                    found.append(v)

        test.visit(T())
        return bool(found)

    class V(cst.CSTVisitor):
        def visit_If(self, n: cst.If) -> None:
            if not names_option(n.test):
                return

            class A(cst.CSTVisitor):
                def visit_Assign(self, a: cst.Assign) -> None:
                    for t in a.targets:
                        tgt = t.target
                        if (
                            isinstance(tgt, cst.Subscript)
                            and len(tgt.slice) == 1
                            and isinstance(tgt.slice[0].slice, cst.Index)
                            and _strings(tgt.slice[0].slice.value) == ["config_env_name"]
                        ):
                            out.extend(_strings(_unparen(a.value)))

            n.body.visit(A())

    for m in methods:
        m.visit(V())
    return sorted(set(out))


def _unparen(node: Any) -> Any:
    return node

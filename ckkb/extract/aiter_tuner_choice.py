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

import itertools
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import Interp, _Return
from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import StatementLines

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")

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
    the kernel lists the tuner imports (ckkb.extract.aiter_tuner_reader)."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None, []
    lines = StatementLines(module)
    imports = _aliases(module, set(kernel_imports))
    for cls in module.body:
        if not isinstance(cls, cst.ClassDef) or not isinstance(cls.body, cst.IndentedBlock):
            continue
        for fn in cls.body.body:
            if isinstance(fn, cst.FunctionDef) and fn.name.value == METHOD:
                lines.resolve_positions(cls)
                return _choice(cls, fn, imports, lines)
    return None, []


def _choice(
    cls: Any, fn: Any, imports: dict[str, tuple[str, str]], lines: StatementLines
) -> tuple[dict[str, Any] | None, list[tuple[int, str]]]:
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
            problems[(lines.line(u.node) or lines.line(fn), u.what)] = None
        cases.append(case)
    for s in selectors:
        s["true_for_env"] = _env_switches(cls, s["name"]) if isinstance(s["default"], bool) else []
    return (
        {"method_line": lines.line(fn), "params": selectors, "cases": cases},
        list(problems),
    )


def _aliases(module: Any, wanted: set[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """alias -> (module, name) for the `from M import N [as A]` of the wanted lists (module
    level, `try` bodies included)."""
    out: dict[str, tuple[str, str]] = {}

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            return False

        def visit_ImportFrom(self, n: cst.ImportFrom) -> None:
            if n.module is None or isinstance(n.names, cst.ImportStar):
                return
            mod = module.code_for_node(n.module)
            for a in n.names:
                if not isinstance(a.name, cst.Name):
                    continue
                alias = a.name.value
                if a.asname is not None and isinstance(a.asname.name, cst.Name):
                    alias = a.asname.name.value
                if (mod, a.name.value) in wanted:
                    out[alias] = (mod, a.name.value)

    module.visit(V())
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


def _env_switches(cls: Any, param: str) -> list[str]:
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

    cls.visit(V())
    return sorted(set(out))


def _unparen(node: Any) -> Any:
    return node

"""The CK kernels a MoE tuned row may name, as aiter's MoE tuner builds them for that row.

aiter's MoE configs name kernels in kernelName1 / kernelName2, with no kernelId. The tuner
(2026: csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py) builds its CK lists per row:

    get_gemm1_kernels_list(dtype2str_dict[q_dtype_a], dtype2str_dict[q_dtype_w],
                           dtype2str_dict[dtype], False, int(q_type),
                           str(act_type).split(".")[-1].lower(), doweight_stage1, True)

Each call of an imported list getter is read from the tuner (Python's `ast` finds it, libcst
evaluates its arguments); the row's columns are bound to the names the call reads (the tuner
unpacks its untuned keys under the columns' names); imported names (`dtype2str_dict`) are
followed to the module that binds them and run statically (ckkb.extract.aiter_modrun); a
`torch.X` cell is that dtype and an `Enum.member` cell a member of the C++ enum of that name in
csrc/include/ (`QuantType`, `ActivationType`: pybind enums, int() is their value). The getter is
then run for the row's arch, and the names of what it returns are the row's candidates. Nothing
is executed; what cannot be followed is the reason a row is not checked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.audit.inputs import Readable, readable_for
from ckkb.extract.aiter_configs import arch_of
from ckkb.extract.aiter_modrun import Dtype, EnumValue, Modules, cpp_enum
from ckkb.extract.aiter_pyeval import Unsupported
from ckkb.extract.aiter_pyexec import Instance, Interp, call
from ckkb.extract.lazy import lazy_module
from ckkb.kb.stages import per_build

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


@dataclass
class Getter:
    file: str  # the kernel-list module, repo-style
    name: str  # get_gemm1_kernels_list
    # (line, positional args, keyword args, the names they read)
    calls: list[tuple[Any, list[Any], list[tuple[str, Any]], list[str]]] = field(
        default_factory=list
    )


@dataclass
class RowNames:
    """A row's candidates: name -> (getter file:name, id, (literal dict, key) it copies); or
    why there are none."""

    names: dict[str, tuple[str, Any, Any]] = field(default_factory=dict)
    reason: str | None = None


class MoeChoice:
    """The getters one MoE op's tuner imports and calls, evaluated per row (cached per args)."""

    def __init__(
        self,
        root: Path,
        tuner_rel: str,
        getters: list[tuple[str, str]],
        pkg: Path | None = None,
        readable: Readable | None = None,
    ) -> None:
        self.root = root
        # absolute imports resolve from the tree root and from the aiter package's parent
        self.roots = [root] + ([pkg.parent] if pkg is not None and pkg.parent != root else [])
        self.tuner = Path(tuner_rel)
        # the audit stage's inputs: the only files read
        self.readable = readable if readable is not None else Readable(root)
        self.getters = [Getter(f, n) for f, n in getters]
        self.modules: dict[str, Modules] = {}
        self.cache: dict[tuple[Any, ...], Any] = {}  # per row's call arguments
        self.runs: dict[tuple[Any, ...], Any] = {}  # per getter run
        self.enums: dict[str, dict[str, int] | None] = {}
        self.problem: str | None = None
        try:
            self._read_calls()
        except (OSError, SyntaxError, Unsupported) as e:
            self.problem = f"{tuner_rel}: {getattr(e, 'what', e)}"
        self.prefix = ""

    def _read_calls(self) -> None:
        path = self.root / self.tuner
        if not self.readable(path):
            raise Unsupported(cst.Name("x"), "the tuner is not an input of the build")
        text = path.read_text(encoding="utf-8", errors="replace")
        imports, calls = getter_calls(text, tuple(sorted({g.name for g in self.getters})))
        self.imports: dict[str, str] = dict(imports)
        by_name = {g.name: g for g in self.getters}
        for name, line, args, kws, names in calls:
            by_name[name].calls.append((line, list(args), list(kws), list(names)))
        if not any(g.calls for g in self.getters):
            some = ", ".join(f"{g.file}:{g.name}" for g in self.getters)
            raise Unsupported(cst.Name("x"), f"calls none of the list getters it imports ({some})")

    def lists(self) -> set[tuple[str, str]]:
        """(file, dict literal) of every list an evaluated getter call copied entries from."""
        out: set[tuple[str, str]] = set()
        for key, got in self.runs.items():
            if isinstance(got, dict):
                for _, origin in got.values():
                    if origin:
                        out.add((key[1], origin[0]))
        return out

    def _mods(self, gfx: str) -> Modules:
        if gfx not in self.modules:
            self.modules[gfx] = Modules(self.roots, gfx, self.readable)
        return self.modules[gfx]

    def _cell(self, v: Any) -> Any:
        """A config cell as the tuner holds it: torch dtypes and pybind enum members."""
        if isinstance(v, str) and v.startswith("torch."):
            return Dtype(v)
        if isinstance(v, str) and "." in v and v.split(".", 1)[0].isidentifier():
            enum, member = v.split(".", 1)
            values = self._enum(enum)
            if values is not None and member in values:
                return EnumValue(enum, member, values[member])
        return v

    def _enum(self, name: str) -> dict[str, int] | None:
        if name not in self.enums:
            self.enums[name] = None
            for h in sorted((self.root / "csrc" / "include").glob("*.h")):
                if not self.readable(h):
                    continue
                found = cpp_enum(h.read_text(encoding="utf-8", errors="replace"), name)
                if found is not None:
                    self.enums[name] = found
                    break
        return self.enums[name]

    def row_names(self, columns: list[str], v: dict[str, Any]) -> RowNames:
        if self.problem:
            return RowNames(reason=self.problem)
        gfx = arch_of(v)
        if not gfx:
            return RowNames(
                reason=f"no arch for the row (gfx {v.get('gfx')!r}, cu_num {v.get('cu_num')!r})"
            )
        row = {c: v.get(c) for c in columns}
        out = RowNames()
        mods = self._mods(gfx)
        for g in self.getters:
            for line, args, kws, names in g.calls:
                key = (gfx, g.name, line, tuple((n, row.get(n, self)) for n in names))
                if key not in self.cache:
                    try:
                        env = self._env(mods, row, names)
                        a = [Interp(env).eval(x) for x in args]
                        kw = {k: Interp(env).eval(x) for k, x in kws}
                        self.cache[key] = self._run(mods, gfx, g, a, kw)
                    except Unsupported as u:
                        self.cache[key] = f"{self.tuner}:{line} {g.name}(...): {u.what}"
                got = self.cache[key]
                if isinstance(got, str):
                    return RowNames(reason=got)
                for kid, (name, origin) in got.items():
                    out.names.setdefault(name, (f"{g.file}:{g.name}", kid, origin))
        return out

    def _env(self, mods: Modules, row: dict[str, Any], names: list[str]) -> dict[str, Any]:
        env: dict[str, Any] = {}
        for n in names:
            if n in row:
                env[n] = self._cell(row[n])
            elif n in self.imports:
                env[n] = mods.value(self.root / self.tuner, self.imports[n], n)
            elif n not in ("str", "int", "bool", "True", "False", "None", "float", "len"):
                raise Unsupported(cst.Name(n), f"{n} is neither a column of the row nor imported")
        return env

    def _run(
        self, mods: Modules, gfx: str, g: Getter, args: list[Any], kw: dict[str, Any]
    ) -> dict[Any, tuple[str, Any]]:
        key = (gfx, g.file, g.name, tuple(args), tuple(sorted(kw.items())))
        if key not in self.runs:
            try:
                env = mods.env(self.root / g.file)
                fn = env.get(g.name)
                if fn is None:
                    raise Unsupported(cst.Name(g.name), f"{g.file} does not define {g.name}")
                got = call(fn, list(args), dict(kw), cst.Name(g.name), [400_000])
                d = got[-1] if isinstance(got, tuple) else got
                if not isinstance(d, dict):
                    raise Unsupported(cst.Name(g.name), f"{g.name} returns no kernel dict")
                names: dict[Any, tuple[str, Any]] = {}
                for k, inst in d.items():
                    if not isinstance(inst, Instance) or inst.cls.name_of is None:
                        raise Unsupported(cst.Name(g.name), "an entry has no name property")
                    name = inst.cls.name_of(inst.values)
                    if not isinstance(name, str):
                        raise Unsupported(cst.Name(g.name), "a name is not a string")
                    names[k] = (name, inst.origin)
                self.runs[key] = names
            except Unsupported as u:
                self.runs[key] = u
        r = self.runs[key]
        if isinstance(r, Unsupported):
            raise r
        return dict(r)


Call = tuple[str, int, tuple[Any, ...], tuple[tuple[str, Any], ...], tuple[str, ...]]


@per_build  # a tuner several MoE ops share is read once
def getter_calls(
    text: str, getters: tuple[str, ...]
) -> tuple[tuple[tuple[str, str], ...], tuple[Call, ...]]:
    """A tuner's top-level `from M import N` (name, module), and each call of a getter in
    `getters`: (getter, line, positional args, keyword args, the names they read), the args as
    libcst expressions (Python's `ast` finds the calls, libcst parses each one's text)."""
    tree = ast.parse(text)
    imports = tuple(
        (a.asname or a.name, "." * node.level + (node.module or ""))
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for a in node.names
    )
    data = text.encode("utf-8")  # ast's columns are UTF-8 byte offsets
    starts = [0]
    for line in data.split(b"\n"):
        starts.append(starts[-1] + len(line) + 1)
    calls: list[Call] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in getters
            and node.end_lineno is not None
            and node.end_col_offset is not None
        ):
            continue
        seg = data[
            starts[node.lineno - 1] + node.col_offset : starts[node.end_lineno - 1]
            + node.end_col_offset
        ].decode("utf-8")
        expr = cst.parse_expression(seg)
        if not isinstance(expr, cst.Call):
            continue
        args = tuple(a.value for a in expr.args if a.keyword is None and not a.star)
        kws = tuple((a.keyword.value, a.value) for a in expr.args if a.keyword is not None)
        names = sorted({x.value for a in [*args, *(x for _, x in kws)] for x in _names(a)})
        calls.append((node.func.id, node.lineno, args, kws, tuple(names)))
    return imports, tuple(calls)


def _names(node: Any) -> list[Any]:
    out: list[Any] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: Any) -> None:
            out.append(n)

        def visit_Attribute(self, n: Any) -> bool:
            n.value.visit(self)  # `x.split`: only the receiver is a name
            return False

    node.visit(V())
    return out


def common_prefix(names: list[str]) -> str:
    """The longest common start of names, cut after its last `_` (a name family's stem)."""
    if not names:
        return ""
    lo, hi = min(names), max(names)
    i = 0
    while i < min(len(lo), len(hi)) and lo[i] == hi[i]:
        i += 1
    stem = lo[:i]
    return stem[: stem.rfind("_") + 1] if "_" in stem else stem


def moe_choice_for(ctx: Any, rc: Any, getters: list[tuple[str, str]]) -> MoeChoice | None:
    """The op's MoeChoice, made once per audit (None without a tree root or a tuner)."""
    if ctx.root is None or rc is None or not rc.tuner_file:
        return None
    cache = ctx.__dict__.setdefault("_moe_choice", {})
    if rc.op not in cache:
        pkg = Path(ctx.pkg) if ctx.pkg is not None else None
        cache[rc.op] = MoeChoice(Path(ctx.root), rc.tuner_file, getters, pkg, readable_for(ctx))
    mc: MoeChoice = cache[rc.op]
    return mc


def op_stem(ctx: Any, op: str | None, mc: MoeChoice, cols: list[str]) -> str:
    """The stem every name the getters build for the op's rows starts with (aiter 2026:
    `moe_ck2stages_`): a kernel name without it is another backend's (FlyDSL, opus, asm)."""
    if mc.prefix:
        return mc.prefix
    names: set[str] = set()
    for t in ctx.tables:
        if ctx.ops.get(t.rel) == op and t.kind == "tuned" and not t.error:
            for _, v in t.rows:
                names |= set(mc.row_names(t.columns, v).names)
    mc.prefix = common_prefix(sorted(names))
    return mc.prefix

"""A Python module of aiter run statically, top-level statement by statement (libcst, never
executed): the names it binds, for code that builds kernel lists per call.

aiter's MoE tuner builds its CK lists per row: `get_gemm1_kernels_list(dtype2str_dict[q_dtype_a],
..., int(q_type), str(act_type).split(".")[-1].lower(), doweight_stage1, True)`, a function of
`csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py` that copies a literal list and
sets fields per call. Reading that needs the module's names (dataclasses, dicts such as
`ACT_OP_NAME`, its functions), `aiter.utility.dtypes` (torch dtypes, `fp8` per arch) and the
`QuantType` enum. Each module is run with ckkb.extract.aiter_pyexec.Interp; a statement it cannot
run leaves the names it binds unknown (a later use says which). Torch is modelled by name only:
`torch.float16` is `Dtype("torch.float16")`, what a config CSV writes for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_derived import ARCH_FUNCTIONS, _assigned
from ckkb.extract.aiter_pyeval import Unsupported, dotted, literal
from ckkb.extract.aiter_pyexec import ClassInfo, Function, Instance, Interp, Native, poison
from ckkb.extract.aiter_pymodels import MODELLED, copy_instance, factory_default
from ckkb.extract.aiter_pystd import IMPORTS, STD_MODULES, NoDevice, transparent
from ckkb.extract.lazy import lazy_module
from ckkb.kb.stages import per_build

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


@dataclass(frozen=True)
class Dtype:
    """A torch dtype by its printed name (`torch.bfloat16`)."""

    name: str

    def __str__(self) -> str:
        return self.name


class _Torch:
    """`torch` as aiter's modules use it at import time: dtype attributes, nothing else."""

    def static_attr(self, name: str, node: Any) -> Any:
        if re.fullmatch(r"u?int\d+|float\d+\w*|bfloat16|bool|complex\d+", name):
            return Dtype(f"torch.{name}")
        if name == "cuda":
            return NoDevice()
        raise Unsupported(node, f"torch.{name} is not modelled")


@dataclass(frozen=True)
class EnumValue:
    """A member of a C++ enum exposed by pybind (aiter's QuantType): prints as `Enum.name`,
    `int()` gives its value."""

    enum: str
    name: str
    value: int

    def __int__(self) -> int:
        return self.value

    def __str__(self) -> str:
        return f"{self.enum}.{self.name}"


def cpp_enum(text: str, name: str) -> dict[str, int] | None:
    """`enum class NAME : int { A, B = 4, C }` -> {A: 0, B: 4, C: 5}; None if not found."""
    m = re.search(r"enum\s+(?:class\s+)?" + re.escape(name) + r"\b[^{;]*\{([^}]*)\}", text)
    if m is None:
        return None
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", m.group(1), flags=re.S)
    out: dict[str, int] = {}
    nxt = 0
    for item in (x.strip() for x in body.split(",")):
        if not item:
            continue
        k, _, v = item.partition("=")
        nxt = int(v.strip(), 0) if v.strip() else nxt
        out[k.strip()] = nxt
        nxt += 1
    return out


class _Module:
    """A module run statically, seen from another (`dtypes.fp8`)."""

    def __init__(self, name: str, env: dict[str, Any]) -> None:
        self.name = name
        self.env = env

    def static_attr(self, name: str, node: Any) -> Any:
        from ckkb.extract.aiter_pyexec import is_known

        v = self.env.get(name)
        if v is None or not is_known(v):
            raise Unsupported(node, f"{self.name}.{name} is not known statically")
        return v


class _CopyModule:
    def static_attr(self, name: str, node: Any) -> Any:
        if name in ("copy", "deepcopy"):
            return Native(copy_instance)
        raise Unsupported(node, f"copy.{name} is not modelled")


Importer = Callable[[str, str], Any]  # (module as written, name) -> value, or raise Unsupported
Readable = Callable[[Path], bool]  # whether a file may be read (ckkb.audit.inputs.Readable)


def run_module(
    text: str, gfx: str, importer: Importer | None = None, env: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The names a module binds at import time on `gfx` (get_gfx() and get_gfx_runtime()
    return it). Dataclasses become ClassInfo whose `name` property is run with the module's
    names; a statement that cannot run leaves the names it binds unknown."""
    module = parsed_module(text)
    env = {} if env is None else env
    env[IMPORTS] = _ImportHook(gfx, importer)
    budget = [400_000]
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            for s in stmt.body:
                _import(s, env, gfx, importer)
            continue
        if isinstance(stmt, cst.ClassDef):
            env[stmt.name.value] = _class(stmt, env)
            continue
        if isinstance(stmt, cst.FunctionDef):
            if not transparent(stmt.decorators):
                poison(env, {stmt.name.value})
            else:
                env[stmt.name.value] = Function(stmt, env)
            continue
        if _sets_torch_attr(stmt, env):
            continue  # `torch.int4 = getattr(torch, "int4", ...)`: torch is modelled by name
        try:
            Interp(env, budget).exec_stmt(stmt)
        except (Unsupported, RecursionError):
            # a failed `try: import x` keeps the x already imported
            rebound = _assigned(stmt, imports=False)
            poison(env, {n for n in _assigned(stmt) if n not in env or n in rebound})
            continue
        _tag_literal(stmt, env)
    return env


@per_build  # a module run for several archs (and by the MoE check again) is parsed once
def parsed_module(text: str) -> cst.Module:
    """A module's libcst tree (immutable, so every run shares it)."""
    return cst.parse_module(text)


def _tag_literal(stmt: Any, env: dict[str, Any]) -> None:
    """`name = {key: Kernel(...), ...}`: each instance remembers (name, key), so a list a
    function copies from it can be told apart (aiter_kernel_lists has the literal's id)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return
    a = stmt.body[0]
    if not (
        isinstance(a, cst.Assign)
        and isinstance(a.value, cst.Dict)
        and len(a.targets) == 1
        and isinstance(a.targets[0].target, cst.Name)
    ):
        return
    d = dict.get(env, a.targets[0].target.value)
    if isinstance(d, dict):
        for k, inst in d.items():
            if isinstance(inst, Instance) and inst.origin is None:
                inst.origin = (a.targets[0].target.value, k)


def _sets_torch_attr(stmt: Any, env: dict[str, Any]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    a = stmt.body[0]
    if not isinstance(a, cst.Assign):
        return False
    targets = [t.target for t in a.targets]
    return all(
        isinstance(t, cst.Attribute)
        and isinstance(t.value, cst.Name)
        and isinstance(dict.get(env, t.value.value), _Torch)
        for t in targets
    )


def _import(s: Any, env: dict[str, Any], gfx: str, importer: Importer | None) -> None:
    mod = dotted(s.module) if isinstance(s, cst.ImportFrom) and s.module else ""
    if isinstance(s, cst.ImportFrom):
        mod = "." * len(s.relative) + mod
    if isinstance(s.names, cst.ImportStar):
        return
    for a in s.names:
        full = dotted(a.name)
        bound = (
            a.asname.name.value
            if a.asname is not None and isinstance(a.asname.name, cst.Name)
            else full.split(".")[0]
        )
        if isinstance(s, cst.ImportFrom) and full in ARCH_FUNCTIONS:
            env[bound] = Native(lambda: gfx)
        elif isinstance(s, cst.Import) and full == "torch":
            env[bound] = _Torch()
        elif isinstance(s, cst.Import) and full == "copy":
            env[bound] = _CopyModule()
        elif isinstance(s, cst.Import) and full in STD_MODULES:  # os, math
            env[bound] = STD_MODULES[full]()
        elif isinstance(s, cst.ImportFrom) and (mod, full) in MODELLED:  # dataclasses.replace
            env[bound] = Native(MODELLED[(mod, full)])
        elif importer is not None and isinstance(s, cst.ImportFrom):
            try:
                env[bound] = importer(mod, full)
            except Unsupported:
                poison(env, {bound})
        else:
            poison(env, {bound})


class _ImportHook:
    """`from M import N` run as a statement (in a `try`, in a function): the modelled library
    functions, the arch function, else the tree's module as the module-level imports find it:
    at module level resolved when first read, as those are; in a function now (a name not
    known statically is Unsupported)."""

    def __init__(self, gfx: str, importer: Importer | None) -> None:
        self.gfx = gfx
        self.importer = importer

    def __call__(self, s: Any, env: dict[str, Any]) -> None:
        out: dict[str, Any] = {}
        _import(s, out, self.gfx, self.importer)
        for k, v in out.items():
            if v is _unknown():
                raise Unsupported(s, f"import of {k} is not followed statically")
            if isinstance(env, _LazyEnv):  # module level (a `try`): resolved when read
                dict.__setitem__(env, k, v)
            else:
                env[k] = v.thunk() if isinstance(v, _Lazy) else v


def _class(stmt: Any, env: dict[str, Any]) -> Any:
    """A dataclass of the module (fields, literal defaults, properties run with the module's
    names); any other class is unknown."""
    decorators = [
        dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
        for d in stmt.decorators
    ]
    if not any("dataclass" in d for d in decorators):
        return _unknown()
    fields: list[str] = []
    defaults: dict[str, Any] = {}
    props: dict[str, Any] = {}
    for item in stmt.body.body:
        if isinstance(item, cst.SimpleStatementLine):
            for small in item.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    fields.append(small.target.value)
                    if small.value is not None:
                        made, v = factory_default(small.value)  # field(default_factory=...)
                        if made:
                            defaults[small.target.value] = v
                            continue
                        try:
                            defaults[small.target.value] = literal(small.value)
                        except Unsupported:
                            pass  # no default known: a call must give it
        elif isinstance(item, cst.FunctionDef) and any(
            dotted(d.decorator) == "property" for d in item.decorators
        ):
            props[item.name.value] = item
    info = ClassInfo(stmt.name.value, fields, defaults, props)
    if "name" in props:
        info.name_of = lambda values: run_with_module(props["name"], info, values, env)
    return info


def _unknown() -> Any:
    from ckkb.extract.aiter_pyexec import _POISONED

    return _POISONED


def run_with_module(prop: Any, cls: ClassInfo, values: dict[str, Any], env: dict[str, Any]) -> Any:
    """A property's body with `self` bound and the module's names visible."""
    from ckkb.extract.aiter_pyexec import _Return, _Scope

    sub = Interp(_Scope(env, {"self": Instance(cls, values, 0)}))
    try:
        sub.exec_block(prop.body.body)
    except _Return as r:
        return r.value
    return None


def module_file(
    roots: list[Path], importing: Path, mod: str, readable: Readable | None = None
) -> Path | None:
    """The file `from MOD import ...` in the file `importing` names: relative imports from its
    package, absolute ones (`aiter.x.y`, `csrc.x.y`) from each of `roots` (the tree root and
    the directory holding the aiter package: they differ in an installed wheel). With
    `readable`, only the files it allows exist (the build's declared inputs)."""
    if mod.startswith("."):
        dots = len(mod) - len(mod.lstrip("."))
        base = importing.parent
        for _ in range(dots - 1):
            base = base.parent
        rest = mod.lstrip(".")
        bases = [base]
    else:
        bases, rest = list(roots), mod
    parts = rest.split(".") if rest else []
    for b in bases:
        for cand in (b.joinpath(*parts).with_suffix(".py"), b.joinpath(*parts, "__init__.py")):
            if parts and (cand.is_file() if readable is None else readable(cand)):
                return cand
    return None


_STAR_IMPORT = re.compile(r"\bimport\s*\*")


class _Lazy:
    """An imported name, resolved on first use (a module's imports are not all run)."""

    __slots__ = ("thunk",)

    def __init__(self, thunk: Callable[[], Any]) -> None:
        self.thunk = thunk


class _LazyEnv(dict[str, Any]):
    def __getitem__(self, key: str) -> Any:
        v = dict.__getitem__(self, key)
        if isinstance(v, _Lazy):
            try:
                v = v.thunk()
            except Unsupported:
                v = _unknown()
            dict.__setitem__(self, key, v)
        return v

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default


class Modules:
    """The modules of one aiter tree run statically for one arch, each once: `value(file,
    name)` follows `from X import name` through packages' star imports and submodules."""

    def __init__(self, roots: list[Path], gfx: str, readable: Readable | None = None) -> None:
        self.roots = roots
        self.gfx = gfx
        self.readable = readable
        self.envs: dict[Path, dict[str, Any]] = {}
        self.active: set[Path] = set()
        self.values: dict[tuple[Path, str, str], Any] = {}

    def env(self, rel: Path) -> dict[str, Any]:
        if rel not in self.envs:
            if rel in self.active:
                raise Unsupported(cst.Name(rel.stem), f"{rel.name} imports itself")
            self.active.add(rel)
            try:
                text = self.read(rel)
                self.envs[rel] = run_module(text, self.gfx, self._importer(rel), _LazyEnv())
            finally:
                self.active.discard(rel)
        return self.envs[rel]

    def read(self, path: Path) -> str:
        """A module's text; a file the build does not declare is not read (a stale answer)."""
        if self.readable is not None and not self.readable(path):
            raise Unsupported(cst.Name(path.stem), f"{path} is not an input of the build")
        return path.read_text(encoding="utf-8", errors="replace")

    def _importer(self, rel: Path) -> Importer:
        def imp(mod: str, name: str) -> Any:
            return _Lazy(lambda: self.value(rel, mod, name))

        return imp

    def value(self, importing: Path, mod: str, name: str) -> Any:
        key = (importing, mod, name)
        if key not in self.values:
            try:
                self.values[key] = self._value(importing, mod, name)
            except Unsupported as u:
                self.values[key] = u
        v = self.values[key]
        if isinstance(v, Unsupported):
            raise v
        return v

    def _value(self, importing: Path, mod: str, name: str) -> Any:
        dotted = mod + name if mod.endswith(".") else f"{mod}.{name}"
        sub = module_file(self.roots, importing, dotted, self.readable)
        if sub is not None:  # `from package import submodule`
            return _Module(name, self.env(sub))
        f = module_file(self.roots, importing, mod, self.readable)
        if f is None:
            raise Unsupported(cst.Name(name), f"module {mod} not found from {importing}")
        return self.name_in(f, name)

    def name_in(self, f: Path, name: str) -> Any:
        text = self.read(f)
        # a name a module binds is in its text: one that is not, in a module with no star
        # import, is not bound there (aiter's `__init__` star-imports ~20 modules; the one that
        # binds a name is found without parsing the others)
        found = name in text or _STAR_IMPORT.search(text)
        bound, stars = module_names(text) if found else (frozenset(), ())
        if name in bound:
            v = self.env(f).get(name)
            from ckkb.extract.aiter_pyexec import is_known

            if v is None or not is_known(v):
                raise Unsupported(cst.Name(name), f"{f}: {name} is not known statically")
            return v
        for s in stars:
            g = module_file(self.roots, f, s, self.readable)
            if g is not None and g not in self.active:
                try:
                    return self.name_in(g, name)
                except Unsupported:
                    continue
        raise Unsupported(cst.Name(name), f"{name} is not bound in {f} or its star imports")


@per_build  # asked once per name a module is imported for
def module_names(text: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """(the names a module's top-level statements bind, the modules it star-imports anywhere)."""
    import ast

    tree = ast.parse(text)
    stars = tuple(
        "." * node.level + (node.module or "")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    )
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            bound.update(a.asname or a.name for a in node.names)
    return frozenset(bound), stars

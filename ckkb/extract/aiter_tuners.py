"""Tuner facts and runtime config facts, read statically with libcst.

- `aiter/utility/base_tuner.py` and every per-op `*_tune.py`: argparse options (flags, action,
  default, type), `ARG_DEFAULTS` overrides, the kernel list each tuner imports and the
  `AITER_CONFIG_*` it writes to.
- `aiter/jit/core.py`: each config the runtime loads (`X = os.getenv("AITER_CONFIG_X", default)`
  and `X_FILE = get_config_file("AITER_CONFIG_X", X, "tuned_name")`), and the merge rule of
  `update_config_files`, recognised from the code and cited by line (MERGE_RULES).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_pyeval import Unsupported, literal
from ckkb.extract.files import list_files
from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import COMPOUND, SOFT, Fallback, SourceScan, StatementLines, parse_lines
from ckkb.kb.schema.aiter import AiterRuntimeConfigRow, AiterTunerOptionRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

cst = lazy_module("libcst")

STAGE_NAME = "aiter.tuners"

# Merge rules of aiter's update_config_files, by the code that implements them.
MERGE_RULES = {
    "keep-fastest": (
        "rows of all files are concatenated, sorted by `us` and de-duplicated on the columns of the op's untuned "
        "CSV keeping the first (fastest) row, silently; all files must have identical column lists (assert). "
        "A single file is used as is, without de-duplication."
    ),
    "reject-duplicates": (
        "rows of all files are concatenated; duplicate keys keep the lowest `us` and then the runtime refuses to "
        "start (raises); all files must have identical column lists."
    ),
    "unknown": "update_config_files was not recognised; merge results are not predicted",
}


@dataclass
class MergeRule:
    id: str = "unknown"
    line: int = 0
    evidence: dict[str, int] = field(default_factory=dict)  # feature -> core.py line
    fills_gfx: bool = False

    @property
    def description(self) -> str:
        return MERGE_RULES[self.id]


@dataclass
class RuntimeConfig:
    op: str
    env_var: str
    line: int
    default_path: str | None = None  # repo-style
    attribute: str | None = None
    tuned_name: str | None = None
    file_line: int = 0


@dataclass
class CoreFacts:
    rel: str
    configs: list[RuntimeConfig]
    rule: MergeRule
    glob_line: int = 0


@dataclass
class TunerOption:
    flags: list[str]
    line: int
    dest: str | None = None
    action: str | None = None
    default: Any = None
    type: str | None = None
    help: str | None = None
    default_key: str | None = None  # defaults["key"]: resolved from ARG_DEFAULTS

    @property
    def option(self) -> str:
        longs = [f for f in self.flags if f.startswith("--")]
        return (longs or self.flags or ["?"])[0]


@dataclass
class TunerFile:
    rel: str
    classes: dict[str, dict[str, Any]]  # class -> {"defaults": {k: (value, line)}, "spread": bool}
    options: list[TunerOption]
    config_imports: list[str]  # AITER_CONFIG_* names imported from aiter.jit.core
    kernel_import: (
        tuple[str, str] | None
    )  # (module, name) e.g. ("gemm_a8w8_common", "kernels_list")


def _pos(module: cst.Module, relevant: tuple[str, ...]):
    """Line numbers for the top-level statements whose code mentions one of `relevant` (others: statement line only)."""
    lines = StatementLines(module)
    for stmt in module.body:
        if any(r in lines.code[id(stmt)] for r in relevant):
            lines.resolve_positions(stmt)
    return module, lines.line


def _code(module: cst.Module, node: cst.CSTNode) -> str:
    return module.code_for_node(node).strip()


def _parse(rel: str, data: bytes, diags: list[Diagnostic]) -> cst.Module | None:
    try:
        return cst.parse_module(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        diags.append(
            Diagnostic(
                rel,
                data[: e.start].count(b"\n") + 1,
                f"not UTF-8 ({e.reason}); file skipped",
                "error",
                STAGE_NAME,
            )
        )
    except cst.ParserSyntaxError as e:
        diags.append(
            Diagnostic(
                rel,
                e.raw_line,
                f"Python syntax error: {e.message}; file skipped",
                "error",
                STAGE_NAME,
            )
        )
    return None


@functools.lru_cache(maxsize=1)
def _calls_visitor() -> type:
    """The visitor class, defined on first use (subclassing cst.CSTVisitor imports libcst)."""

    class _Calls(cst.CSTVisitor):
        def __init__(self) -> None:
            self.calls: list[cst.Call] = []
            self.asserts: list[cst.Assert] = []
            self.raises: list[cst.Raise] = []
            self.strings: list[cst.SimpleString] = []
            self.compares: list[cst.Comparison] = []

        def visit_Call(self, node: cst.Call) -> None:
            self.calls.append(node)

        def visit_Assert(self, node: cst.Assert) -> None:
            self.asserts.append(node)

        def visit_Raise(self, node: cst.Raise) -> None:
            self.raises.append(node)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            self.strings.append(node)

        def visit_Comparison(self, node: cst.Comparison) -> None:
            self.compares.append(node)

    return _Calls


def _Calls():  # noqa: N802  (reads like the class it builds)
    return _calls_visitor()()


def _attr_name(call: cst.Call) -> str | None:
    f = call.func
    if isinstance(f, cst.Attribute):
        return f.attr.value
    if isinstance(f, cst.Name):
        return f.value
    return None


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _lit(node: cst.BaseExpression | None) -> Any:
    if node is None:
        return None
    try:
        return literal(node)
    except Unsupported:
        return None


def _path_of(module: cst.Module, node: cst.BaseExpression) -> str | None:
    """f"{AITER_ROOT_DIR}/aiter/configs/x.csv" -> aiter/configs/x.csv (repo-style)."""
    if isinstance(node, cst.FormattedString):
        parts = []
        for p in node.parts:
            if isinstance(p, cst.FormattedStringText):
                parts.append(p.value)
            elif isinstance(p.expression, cst.Name) and p.expression.value in (
                "AITER_ROOT_DIR",
                "AITER_CORE_DIR",
            ):
                parts.append("{ROOT}")
            else:
                return None
        s = "".join(parts)
        return s[len("{ROOT}/") :] if s.startswith("{ROOT}/") else None
    v = _lit(node)
    return v if isinstance(v, str) else None


CORE_MARKERS = ("AITER_CONFIG", "def update_config_files", "def get_config_file")
_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")


def read_core(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    """Runtime configs and merge rule of aiter/jit/core.py, parsing only the statements that hold them
    (module-level lines naming AITER_CONFIG, the two functions); other shapes: the whole module."""
    try:
        return _read_core_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return _read_core_module(rel, data)


def _read_core_statements(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    scan = SourceScan(data.decode("utf-8"))
    diags: list[Diagnostic] = []
    facts = CoreFacts(rel, [], MergeRule())
    by_env: dict[str, RuntimeConfig] = {}
    lls = scan.logical
    for first, header, stop in scan.compounds():
        ll = lls[header]
        code = scan.code(ll)
        if ll.word in ("def", "async"):
            m = _DEF_NAME.match(code)
            if m is None:
                raise Fallback(f"line {ll.line}: def not recognised")
            if m.group(1) not in ("update_config_files", "get_config_file"):
                continue
        elif (
            first != header
            or stop != header + 1
            or ll.word in COMPOUND
            or "AITER_CONFIG" not in code
        ):
            continue
        elif ll.word in SOFT:
            raise Fallback(f"line {ll.line}: soft keyword")
        module, stmt, pos = parse_lines(scan, first, stop)
        _core_statement(
            rel, module, stmt, lambda n, pos=pos: pos.get(id(n), 0), facts, by_env, diags
        )
    return _core_done(rel, facts, by_env, diags)


def _read_core_module(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    facts = CoreFacts(rel, [], MergeRule())
    module = _parse(rel, data, diags)
    if module is None:
        return facts, diags
    module, line = _pos(module, CORE_MARKERS)
    by_env: dict[str, RuntimeConfig] = {}
    for stmt in module.body:
        _core_statement(rel, module, stmt, line, facts, by_env, diags)
    return _core_done(rel, facts, by_env, diags)


def _core_statement(
    rel: str,
    module: cst.Module,
    stmt: cst.CSTNode,
    line,
    facts: CoreFacts,
    by_env: dict[str, RuntimeConfig],
    diags: list[Diagnostic],
) -> None:
    if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "update_config_files":
        facts.rule = _merge_rule(stmt, line)
    if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "get_config_file":
        v = _Calls()
        stmt.visit(v)
        for c in v.calls:
            if _attr_name(c) == "glob":
                facts.glob_line = line(c)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return
    for small in stmt.body:
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
        ):
            continue
        attr = small.targets[0].target.value
        val = small.value
        if not (isinstance(val, cst.Call) and attr.startswith("AITER_CONFIG")):
            continue
        fname = _attr_name(val)
        args = [a.value for a in val.args if a.keyword is None]
        if fname == "getenv" and args:
            env = _lit(args[0])
            if not isinstance(env, str):
                continue
            rc = by_env.setdefault(
                env, RuntimeConfig(op=_op_of_env(env), env_var=env, line=line(small))
            )
            rc.line = line(small)
            if len(args) > 1:
                rc.default_path = _path_of(module, args[1])
                if rc.default_path is None:
                    diags.append(
                        Diagnostic(
                            rel,
                            line(args[1]),
                            f"{env}: default path not read statically: {_code(module, args[1])}",
                            "warning",
                            STAGE_NAME,
                        )
                    )
        elif fname == "get_config_file" and len(args) >= 1:
            env = _lit(args[0])
            if not isinstance(env, str):
                continue
            rc = by_env.setdefault(
                env, RuntimeConfig(op=_op_of_env(env), env_var=env, line=line(small))
            )
            rc.attribute = attr
            rc.file_line = line(small)
            if len(args) >= 3:
                tn = _lit(args[2])
                rc.tuned_name = tn if isinstance(tn, str) else None


def _core_done(
    rel: str, facts: CoreFacts, by_env: dict[str, RuntimeConfig], diags: list[Diagnostic]
) -> tuple[CoreFacts, list[Diagnostic]]:
    facts.configs = sorted(by_env.values(), key=lambda c: c.line)
    if not facts.configs:
        diags.append(
            Diagnostic(
                rel,
                0,
                "no AITER_CONFIG_* reads recognised in core.py; runtime configs unknown",
                "warning",
                STAGE_NAME,
            )
        )
    if facts.rule.id == "unknown":
        diags.append(
            Diagnostic(
                rel,
                facts.rule.line,
                "update_config_files merge rule not recognised; merge previews will say so",
                "warning",
                STAGE_NAME,
            )
        )
    return facts, diags


def _op_of_env(env: str) -> str:
    return env[len("AITER_CONFIG_") :].lower() if env.startswith("AITER_CONFIG_") else env.lower()


def _merge_rule(fn: cst.FunctionDef, line) -> MergeRule:
    v = _Calls()
    fn.visit(v)
    rule = MergeRule(line=line(fn))
    for c in v.calls:
        name = _attr_name(c)
        first = c.args[0].value if c.args else None
        if name == "sort_values" and _lit(first) == "us":
            rule.evidence["sort_by_us"] = line(c)
        elif name == "drop_duplicates":
            keep = _lit(_kw(c, "keep"))
            rule.evidence["drop_duplicates_keep_" + str(keep if keep is not None else "first")] = (
                line(c)
            )
        elif name in ("duplicated",):
            rule.evidence["duplicated"] = line(c)
        elif name == "exit":
            rule.evidence["exit"] = line(c)
    for a in v.asserts:
        src = cst.Module([]).code_for_node(a.test)
        if "columns" in src:
            rule.evidence["assert_same_columns"] = line(a)
    for r in v.raises:
        rule.evidence.setdefault("raise", line(r))
    for cmp in v.compares:
        src = cst.Module([]).code_for_node(cmp)
        if re.search(r"len\(\s*path_list\s*\)\s*<=\s*1", src):
            rule.evidence["single_file_passthrough"] = line(cmp)
    rule.fills_gfx = any("gfx" in s.value for s in v.strings)
    strict = "raise" in rule.evidence or "exit" in rule.evidence
    if (
        "sort_by_us" in rule.evidence
        and "drop_duplicates_keep_first" in rule.evidence
        and not strict
    ):
        # aiter 0.1.7.x (the default wheel), aiter/jit/core.py update_config_files:
        #   merge_df.sort_values("us").drop_duplicates(subset=keys, keep="first")  -- keys = untuned CSV columns
        rule.id = "keep-fastest"
        rule.line = rule.evidence["drop_duplicates_keep_first"]
    elif strict and ("sort_by_us" in rule.evidence or "duplicated" in rule.evidence):
        rule.id = "reject-duplicates"
        rule.line = rule.evidence.get("raise") or rule.evidence.get("exit") or rule.line
    return rule


def read_tuner(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    """Options, ARG_DEFAULTS, config imports and kernel-list import of one tuner file.

    Only the statements that can hold them are parsed (each alone, with libcst): module-level
    imports, class headers and their `ARG_DEFAULTS` lines, and the logical lines that name
    `add_argument`. A file in any other shape is read as a whole module (same facts, slower).
    """
    try:
        return _read_tuner_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return _read_tuner_module(rel, data)


def _read_tuner_statements(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    scan = SourceScan(data.decode("utf-8"))
    text = scan.text
    diags: list[Diagnostic] = []
    tf = TunerFile(rel, {}, [], [], None)
    lls = scan.logical
    for first, header, stop in scan.compounds():
        ll = lls[header]
        if first == header and stop == header + 1 and ll.word not in COMPOUND:
            if "import" in scan.code(ll):
                module, stmt, _pos = parse_lines(scan, header, stop)
                _tuner_imports(module, stmt, tf)
        elif ll.word == "class" and ll.indent == "":
            head = scan.code(ll)
            if not head.endswith(":") or stop == header + 1:
                raise Fallback(f"line {ll.line}: class on one line")
            src = text[lls[first].start : ll.end]
            try:
                cls_node = cst.parse_module(src + lls[header + 1].indent + "pass\n").body[0]
            except cst.ParserSyntaxError:
                raise Fallback(f"line {ll.line}: class header not parsed alone") from None
            if not isinstance(cls_node, cst.ClassDef):
                raise Fallback(f"line {ll.line}: not a class")
            whole = text[lls[first].start : lls[stop - 1].end]
            # as _pos: the `class` line where the class names a marker, else its first line (decorators)
            cls_line = ll.line if any(r in whole for r in TUNER_MARKERS) else lls[first].line
            cls = {"defaults": {}, "spread": False, "line": cls_line}
            body_indent = lls[header + 1].indent
            for j in range(header + 1, stop):
                item = lls[j]
                if (
                    item.indent != body_indent
                    or item.word in COMPOUND
                    or "ARG_DEFAULTS" not in scan.code(item)
                ):
                    continue
                if item.word in SOFT:
                    raise Fallback(f"line {item.line}: soft keyword")
                module, stmt, pos = parse_lines(scan, j, j + 1)
                _tuner_defaults(module, stmt, lambda n, pos=pos: pos.get(id(n), 0), cls)
            tf.classes[cls_node.name.value] = cls
    for j, ll in enumerate(lls):
        if "add_argument" not in scan.code(ll):
            continue
        if ll.word in COMPOUND or ll.word in SOFT:
            raise Fallback(f"line {ll.line}: add_argument in a compound statement header")
        module, stmt, pos = parse_lines(scan, j, j + 1)
        v = _Calls()
        stmt.visit(v)
        _tuner_options(rel, module, v.calls, lambda n, pos=pos: pos.get(id(n), 0), tf, diags)
    return tf, diags


TUNER_MARKERS = ("add_argument", "ARG_DEFAULTS")


def _read_tuner_module(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    tf = TunerFile(rel, {}, [], [], None)
    module = _parse(rel, data, diags)
    if module is None:
        return tf, diags
    module, line = _pos(module, TUNER_MARKERS)
    for stmt in module.body:
        _tuner_imports(module, stmt, tf)
        if isinstance(stmt, cst.ClassDef):
            cls = {"defaults": {}, "spread": False, "line": line(stmt)}
            for item in stmt.body.body:
                _tuner_defaults(module, item, line, cls)
            tf.classes[stmt.name.value] = cls
    v = _Calls()
    module.visit(v)
    _tuner_options(rel, module, v.calls, line, tf, diags)
    return tf, diags


def _tuner_imports(module: cst.Module, stmt: cst.CSTNode, tf: TunerFile) -> None:
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                mod = _code(module, small.module) if small.module is not None else ""
                names = [a.name.value for a in small.names if isinstance(a.name, cst.Name)]
                if mod == "aiter.jit.core":
                    tf.config_imports += [n for n in names if n.startswith("AITER_CONFIG_")]
                elif mod.endswith(("_common", "_instance")) and "kernels_list" in names:
                    tf.kernel_import = (mod, "kernels_list")


def _tuner_defaults(module: cst.Module, item: cst.CSTNode, line, cls: dict[str, Any]) -> None:
    """`ARG_DEFAULTS = {...}` in a class body."""
    if isinstance(item, cst.SimpleStatementLine):
        for small in item.body:
            if (
                isinstance(small, cst.Assign)
                and isinstance(small.targets[0].target, cst.Name)
                and small.targets[0].target.value == "ARG_DEFAULTS"
                and isinstance(small.value, cst.Dict)
            ):
                for el in small.value.elements:
                    if isinstance(el, cst.StarredDictElement):
                        cls["spread"] = True
                        continue
                    k = _lit(el.key)
                    try:
                        val = literal(el.value)
                    except Unsupported:
                        val = _code(module, el.value)
                        p = _path_of(module, el.value)
                        if isinstance(el.value, cst.FormattedString) and p is None:
                            val = _code(module, el.value)
                    if isinstance(k, str):
                        cls["defaults"][k] = (val, line(el))


def _tuner_options(
    rel: str,
    module: cst.Module,
    calls: list[cst.Call],
    line,
    tf: TunerFile,
    diags: list[Diagnostic],
) -> None:
    for c in calls:
        if _attr_name(c) != "add_argument":
            continue
        flags = [_lit(a.value) for a in c.args if a.keyword is None]
        flags = [f for f in flags if isinstance(f, str)]
        if not flags:
            diags.append(
                Diagnostic(
                    rel,
                    line(c),
                    "add_argument with no literal flags; skipped",
                    "warning",
                    STAGE_NAME,
                )
            )
            continue
        opt = TunerOption(flags=flags, line=line(c))
        for k in ("dest", "action", "help"):
            val = _lit(_kw(c, k))
            setattr(opt, k, val if isinstance(val, str) else None)
        t = _kw(c, "type")
        opt.type = _code(module, t) if t is not None else None
        d = _kw(c, "default")
        if d is not None:
            if (
                isinstance(d, cst.Subscript)
                and isinstance(d.value, cst.Name)
                and d.value.value == "defaults"
            ):
                key = (
                    _lit(d.slice[0].slice.value)
                    if d.slice and isinstance(d.slice[0].slice, cst.Index)
                    else None
                )
                opt.default_key = key if isinstance(key, str) else None
                opt.default = _code(module, d)
            else:
                try:
                    opt.default = literal(d)
                except Unsupported:
                    opt.default = _code(module, d)
        elif opt.action == "store_true":
            opt.default = False
        elif opt.action == "store_false":
            opt.default = True
        tf.options.append(opt)


# ---------------------------------------------------------------- stage


def package_dir(root: Path) -> Path | None:
    """The aiter package dir for a tree root (checkout: root/aiter; wheel: site-packages/aiter)."""
    root = Path(root)
    if (root / "aiter").is_dir():
        return root / "aiter"
    if (root.parent / "aiter").is_dir():
        return root.parent / "aiter"
    return None


def display_rel(rel: str) -> str:
    """Stage rels of wheel package files are '../aiter/...'; rows say 'aiter/...'."""
    return rel[3:] if rel.startswith("../") else rel


def stage_paths(root: Path, paths: list[Path]) -> list[Path]:
    """Paths relative to root (os.path.relpath), so files of the package dir outside root still read."""
    return [Path(os.path.relpath(p, Path(root).resolve())) for p in paths]


TUNER_DIRS = (
    "csrc",
    "hsa",
    "gradlib",
)  # per-op tuners live under csrc/ck_*/; the fmoe and bf16 (gradlib) ones elsewhere


def is_tuner_file(p: Path) -> bool:
    return p.name == "tune.py" or p.name.endswith(("_tune.py", "_tuner.py"))


def tuner_name(rel: str) -> str:
    """csrc/ck_gemm_a8w8/gemm_a8w8_tune.py -> gemm_a8w8_tune; elsewhere the path without .py (hsa/gfx942/fmoe_2stages/tune)."""
    p = Path(rel)
    return p.stem if p.parts[0] == "csrc" else p.with_suffix("").as_posix()


class TunersStage:
    name = STAGE_NAME
    worker_group = "libcst"  # read in one worker: libcst is imported once per build
    version = "3"
    tree = "aiter"
    reads = ()
    writes = ("aiter_runtime_configs", "aiter_tuner_options")
    combine_cost = 0.004  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        out: list[Path] = []
        pkg = package_dir(root)
        if pkg is not None:
            for p in (pkg / "utility" / "base_tuner.py", pkg / "jit" / "core.py"):
                if p.is_file():
                    out.append(p)
        for sub in TUNER_DIRS:
            out += [
                p.resolve()
                for p in list_files(Path(root), sub, ("tune.py", "_tuner.py"))
                if is_tuner_file(p)
            ]
        return stage_paths(Path(root), out)

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        drel = display_rel(rel)
        if drel.endswith("jit/core.py"):
            facts, diags = read_core(drel, data)
            return FileResult(diagnostics=diags, facts={"core": facts})
        if (
            b"add_argument" not in data
            and b"ARG_DEFAULTS" not in data
            and b"kernels_list" not in data
        ):
            return FileResult()
        tf, diags = read_tuner(drel, data)
        return FileResult(diagnostics=diags, facts={"tuner": tf})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        facts = TreeFacts.from_results(Path(root), results)
        rows: list[Any] = option_rows(facts) + runtime_rows(facts)
        return StageResult(rows=rows)


@dataclass
class TreeFacts:
    """Tuner and runtime facts of one aiter tree, for the audit and the build alike."""

    root: Path
    core: CoreFacts | None
    base: TunerFile | None
    tuners: list[TunerFile]

    @classmethod
    def from_results(cls, root: Path, results: dict[str, FileResult]) -> TreeFacts:
        core = None
        base = None
        tuners = []
        for _rel, r in sorted(results.items()):
            if "core" in r.facts:
                core = r.facts["core"]
            elif "tuner" in r.facts:
                tf = r.facts["tuner"]
                if tf.rel.endswith("utility/base_tuner.py"):
                    base = tf
                else:
                    tuners.append(tf)
        return cls(Path(root), core, base, tuners)

    def base_defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.base:
            for cls in self.base.classes.values():
                for k, (v, _) in cls["defaults"].items():
                    out.setdefault(k, v)
        return out

    def tuner_for(self, rc: RuntimeConfig) -> TunerFile | None:
        for t in self.tuners:
            if rc.env_var in t.config_imports:
                return t
        return None

    def effective_options(self, tuner: TunerFile | None) -> list[tuple[TunerOption, Any, str, int]]:
        """(option, effective default, file, line) for a tuner (base options + its own + its ARG_DEFAULTS)."""
        defaults = self.base_defaults()
        where: dict[str, tuple[str, int]] = {}
        if tuner is not None:
            for cls in tuner.classes.values():
                for k, (v, ln) in cls["defaults"].items():
                    defaults[k] = v
                    where[k] = (tuner.rel, ln)
        out = []
        opts = (self.base.options if self.base else []) + (
            tuner.options if tuner and tuner is not self.base else []
        )
        for o in opts:
            src = self.base if self.base and o in self.base.options else tuner
            d = o.default
            f, ln = (src.rel if src else ""), o.line
            if o.default_key is not None and o.default_key in defaults:
                d = defaults[o.default_key]
                if o.default_key in where:
                    f, ln = where[o.default_key]
            out.append((o, d, f, ln))
        return out

    def err_ratio_default(self) -> float | None:
        for o, d, _, _ in self.effective_options(None):
            if o.option == "--errRatio" and isinstance(d, (int, float)):
                return float(d)
        return None


def option_rows(facts: TreeFacts) -> list[Any]:
    rows: list[Any] = []
    groups: list[tuple[str, TunerFile | None]] = [("base", None)] if facts.base else []
    groups += [(tuner_name(t.rel), t) for t in facts.tuners]
    for name, t in groups:
        for o, d, f, ln in facts.effective_options(t):
            rows.append(
                AiterTunerOptionRow(
                    tuner=name,
                    op=(
                        Path(t.rel).parent.name.removeprefix("ck_")
                        if t and t.rel.startswith("csrc/")
                        else None
                    ),
                    file=f,
                    line=ln,
                    option=o.option,
                    flags=o.flags,
                    dest=o.dest,
                    action=o.action,
                    default=json.dumps(d),
                    type=o.type,
                    help=o.help,
                )
            )
    return rows


def untuned_name(tuned_name: str) -> str:
    # aiter 0.1.7 core.py update_config_files: names ending in "tuned" go through
    # re.sub(r"(?:_)?tuned$", r"\1untuned", ...) (which would raise: group 1 does not exist); every
    # shipped name ("a8w8_tuned_gemm", "tuned_fmoe", ...) takes the else branch: .replace("tuned", "untuned").
    return tuned_name.replace("tuned", "untuned")


def model_config_files(pkg: Path | None, tuned_name: str | None) -> list[Path]:
    """core.py get_config_file: model_configs/*{tuned_name}* that are files and not "untuned"."""
    if pkg is None or not tuned_name:
        return []
    d = pkg / "configs" / "model_configs"
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob(f"*{tuned_name}*") if p.is_file() and "untuned" not in p.name)


def csv_header(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [c.strip() for c in f.readline().strip().split(",") if c.strip()]
    except OSError:
        return []


def repo_rel(pkg: Path, path: Path) -> str:
    try:
        return "aiter/" + path.relative_to(pkg).as_posix()
    except ValueError:
        return path.as_posix()


def runtime_rows(facts: TreeFacts) -> list[Any]:
    rows: list[Any] = []
    if facts.core is None:
        return rows
    pkg = package_dir(facts.root)
    rule = facts.core.rule
    for rc in facts.core.configs:
        default_exists = False
        if pkg is not None and rc.default_path and rc.default_path.startswith("aiter/"):
            default_exists = (pkg / rc.default_path[len("aiter/") :]).is_file()
        untuned_path = None
        key: list[str] = []
        if rc.tuned_name and pkg is not None:
            up = pkg / "configs" / f"{untuned_name(rc.tuned_name)}.csv"
            untuned_path = repo_rel(pkg, up)
            key = csv_header(up)
        models = [repo_rel(pkg, p) for p in model_config_files(pkg, rc.tuned_name)] if pkg else []
        tuner = facts.tuner_for(rc)
        klist_file = klist = None
        if tuner is not None and tuner.kernel_import:
            klist_file = str(Path(tuner.rel).parent / (tuner.kernel_import[0] + ".py"))
            klist = tuner.kernel_import[1]
        rows.append(
            AiterRuntimeConfigRow(
                op=rc.op,
                env_var=rc.env_var,
                attribute=rc.attribute,
                tuned_name=rc.tuned_name,
                default_path=rc.default_path or "",
                default_exists=default_exists,
                untuned_path=untuned_path,
                merge_key=key,
                model_configs=models,
                merge_rule=rule.id,
                merge_rule_line=rule.line or None,
                merge_evidence=rule.evidence,
                merge_fills_gfx=rule.fills_gfx,
                kernel_list_file=klist_file,
                kernel_list=klist,
                tuner_file=tuner.rel if tuner else None,
                file=facts.core.rel,
                line=rc.line,
            )
        )
    return rows


STAGE = TunersStage()

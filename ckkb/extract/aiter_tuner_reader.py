"""aiter tuner and runtime-config files, read statically with libcst (never imported).

- `aiter/utility/base_tuner.py` and every per-op `*_tune.py` (`read_tuner`): argparse options
  (flags, action, default, type), `ARG_DEFAULTS` overrides, the kernel list each tuner imports and
  the `AITER_CONFIG_*` it writes to.
- `aiter/jit/core.py` (`read_core`): each config the runtime loads
  (`X = os.getenv("AITER_CONFIG_X", default)` and
  `X_FILE = get_config_file("AITER_CONFIG_X", X, "tuned_name")`), and the merge rule of
  `update_config_files`, recognised from the code and cited by line (MERGE_RULES).

Each has two readers behind one function: the statement reader parses only the statements that
can hold the facts, each alone (the token scan of ckkb.extract.pyscan finds them); the whole-module
reader (`read_core_module`, `read_tuner_module`) is its reference and reads the files in any other
shape. The fast path stays under the 20% rule for `ckkb audit --aiter TREE` on a tree not in the
knowledge base: extraction is most of that job, ~4x faster with it (README, Performance);
tests/unit/test_aiter_readers_equiv.py checks both give the same facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_cst import _attr_name, _Calls, _code_of, _kw, _lit
from ckkb.extract.aiter_pyeval import Unsupported, literal
from ckkb.extract.aiter_sys_path import sys_path_dir
from ckkb.extract.aiter_tuner_facts import MERGE_RULES as MERGE_RULES  # read from here
from ckkb.extract.aiter_tuner_facts import (
    CoreFacts,
    MergeRule,
    RuntimeConfig,
    TunerFile,
    TunerOption,
)
from ckkb.extract.aiter_tuner_try import try_imports
from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import (
    COMPOUND,
    SOFT,
    Fallback,
    Positions,
    SourceScan,
    StatementLines,
    parse_lines,
)

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module(
        "libcst"
    )  # imported on first use: workers that never read Python start sooner

STAGE_NAME = "aiter.tuners"


def _pos(
    module: cst.Module, relevant: tuple[str, ...]
) -> tuple[cst.Module, Callable[[cst.CSTNode], int]]:
    """Line numbers for the top-level statements whose code mentions one of `relevant` (others:
    statement line only)."""
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


# One class per process (module state on purpose): defining it imports libcst, which workers
# that read no Python never pay for.
def _path_of(module: cst.Module, node: cst.BaseExpression) -> str | None:
    """f"{AITER_ROOT_DIR}/aiter/configs/x.csv" -> aiter/configs/x.csv (repo-style)."""
    if isinstance(node, cst.FormattedString):
        parts = []
        for p in node.parts:
            if isinstance(p, cst.FormattedStringText):
                parts.append(p.value)
            elif (
                isinstance(p, cst.FormattedStringExpression)
                and isinstance(p.expression, cst.Name)
                and p.expression.value in ("AITER_ROOT_DIR", "AITER_CORE_DIR")
            ):
                parts.append("{ROOT}")
            else:
                return None
        s = "".join(parts)
        return s[len("{ROOT}/") :] if s.startswith("{ROOT}/") else None
    v = _lit(node)
    return v if isinstance(v, str) else None


_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")
CORE_MARKERS = ("AITER_CONFIG", "def update_config_files", "def get_config_file")


def _lines(pos: Positions) -> Callable[[cst.CSTNode], int]:
    """A statement parsed alone: its nodes' lines in the file (0: not known)."""
    return lambda node: pos.get(id(node), 0)


def read_core(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    """Runtime configs and merge rule of aiter/jit/core.py, parsing only the statements that hold
    them (module-level lines naming AITER_CONFIG, the two functions); other shapes: the whole
    module."""
    try:
        return _read_core_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return read_core_module(rel, data)


def _read_core_statements(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    if b"\nclass " in data and b"def get_config_file(self" in data:
        raise Fallback("configs as properties of a class (aiter 2026)")
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
        _core_statement(rel, module, stmt, _lines(pos), facts, by_env, diags)
    return _core_done(rel, facts, by_env, diags)


def read_core_module(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    """Runtime configs and merge rule of aiter/jit/core.py (the whole module, with libcst: the
    reference of read_core, and its reader for other shapes)."""
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
    line: Callable[[cst.CSTNode], int],
    facts: CoreFacts,
    by_env: dict[str, RuntimeConfig],
    diags: list[Diagnostic],
) -> None:
    if isinstance(stmt, cst.ClassDef):
        # aiter 2026: `class AITER_CONFIG` holds update_config_files/get_config_file as methods
        # and one @property per op returning self.get_config_file("AITER_CONFIG_X", X, "name")
        for item in stmt.body.body:
            _core_statement(rel, module, item, line, facts, by_env, diags)
            if isinstance(item, cst.FunctionDef) and item.name.value.startswith("AITER_CONFIG"):
                v = _Calls()
                item.visit(v)
                for c in v.calls:
                    if _attr_name(c) == "get_config_file":
                        _config_file_call(item.name.value, c, line, by_env)
        return
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
        elif fname == "get_config_file":
            _config_file_call(attr, val, line, by_env)


def _config_file_call(
    attr: str,
    call: cst.Call,
    line: Callable[[cst.CSTNode], int],
    by_env: dict[str, RuntimeConfig],
) -> None:
    """`X_FILE = get_config_file("AITER_CONFIG_X", X, "tuned_name")` (module level or in a
    property): the attribute the ops read and the tuned name model_configs/ files are globbed by."""
    args = [a.value for a in call.args if a.keyword is None]
    env = _lit(args[0]) if args else None
    if not isinstance(env, str):
        return
    rc = by_env.setdefault(env, RuntimeConfig(op=_op_of_env(env), env_var=env, line=line(call)))
    rc.attribute = attr
    rc.file_line = line(call)
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


def _merge_rule(fn: cst.FunctionDef, line: Callable[[cst.CSTNode], int]) -> MergeRule:
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
        elif name == "append" and _lit(first) in ("cu_num", "gfx"):
            # aiter 2026: keys = untuned columns + cu_num (+ gfx when the merged frame has it)
            rule.evidence["key_" + str(_lit(first))] = line(c)
        elif name == "insert" and _code_of(c.func).startswith("all_cols"):
            rule.evidence["union_columns"] = line(c)  # missing columns are added and filled
        elif name == "read_csv" and first is not None and "[0]" in _code_of(first):
            rule.evidence["first_file_required"] = line(c)  # pd.read_csv(path_list[0])
    for lst in v.lists:
        if [_lit(e.value) for e in lst.elements] == ["_tag"]:
            rule.evidence["key__tag"] = line(lst)  # dedup_keys = keys + ["_tag"] if has_tag
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
        #   merge_df.sort_values("us").drop_duplicates(subset=keys, keep="first")
        #   (keys = untuned CSV columns)
        rule.id = "keep-fastest"
        rule.line = rule.evidence["drop_duplicates_keep_first"]
    elif strict and ("sort_by_us" in rule.evidence or "duplicated" in rule.evidence):
        rule.id = (
            "reject-duplicates-fill" if "union_columns" in rule.evidence else "reject-duplicates"
        )
        rule.line = rule.evidence.get("raise") or rule.evidence.get("exit") or rule.line
    return rule


TUNER_MARKERS = ("add_argument", "ARG_DEFAULTS")


def read_tuner(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    """Options, ARG_DEFAULTS, config imports and kernel-list import of one tuner file.

    Only the statements that can hold them are parsed (each alone, with libcst): module-level
    imports, class headers and their `ARG_DEFAULTS` lines, and the logical lines that name
    `add_argument`. A file in any other shape is read as a whole module (same facts, slower).
    """
    try:
        return _read_tuner_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return read_tuner_module(rel, data)


def _read_tuner_statements(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    scan = SourceScan(data.decode("utf-8"))
    text = scan.text
    diags: list[Diagnostic] = []
    tf = TunerFile(rel, {}, [], [], None)
    lls = scan.logical
    compounds = scan.compounds()
    for k, (first, header, stop) in enumerate(compounds):
        ll = lls[header]
        if first == header and stop == header + 1 and ll.word not in COMPOUND:
            if "import" in scan.code(ll):
                module, stmt, _pos = parse_lines(scan, header, stop)
                _tuner_imports(module, stmt, tf)
        elif ll.word == "try" and ll.indent == "":
            end = stop  # the try's except/else/finally clauses are top-level lines too
            for _f, h, st in compounds[k + 1 :]:
                if lls[h].word not in ("except", "else", "finally"):
                    break
                end = st
            if any("import" in scan.code(lls[j]) for j in range(header, stop)):
                module, stmt, _pos = parse_lines(scan, first, end)
                try_imports(module, stmt, tf, _tuner_imports)
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
            # as _pos: the `class` line where the class names a marker, else its first line
            # (decorators)
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
                _tuner_defaults(module, stmt, _lines(pos), cls)
            tf.classes[cls_node.name.value] = cls
    for j, ll in enumerate(lls):
        if "add_argument" not in scan.code(ll):
            continue
        if ll.word in COMPOUND or ll.word in SOFT:
            raise Fallback(f"line {ll.line}: add_argument in a compound statement header")
        module, stmt, pos = parse_lines(scan, j, j + 1)
        v = _Calls()
        stmt.visit(v)
        _tuner_options(rel, module, v.calls, _lines(pos), tf, diags)
    for j, ll in enumerate(lls):
        if "sys.path.insert" not in scan.code(ll):
            continue
        if ll.word in COMPOUND or ll.word in SOFT:
            raise Fallback(f"line {ll.line}: sys.path.insert in a compound statement header")
        module, stmt, pos = parse_lines(scan, j, j + 1)
        v = _Calls()
        stmt.visit(v)
        _sys_paths(v.calls, tf)
    return tf, diags


def _sys_paths(calls: list[cst.Call], tf: TunerFile) -> None:
    for c in calls:
        if _attr_name(c) == "insert" and _code_of(c.func) == "sys.path.insert" and len(c.args) > 1:
            d = sys_path_dir(c.args[1].value)
            if d is not None:
                tf.sys_paths.append(d)


def read_tuner_module(rel: str, data: bytes) -> tuple[TunerFile, list[Diagnostic]]:
    """Options, ARG_DEFAULTS, config imports and kernel-list import of one tuner file (the whole
    module, with libcst: the reference of read_tuner, and its reader for
    other shapes)."""
    diags: list[Diagnostic] = []
    tf = TunerFile(rel, {}, [], [], None)
    module = _parse(rel, data, diags)
    if module is None:
        return tf, diags
    module, line = _pos(module, TUNER_MARKERS)
    for stmt in module.body:
        _tuner_imports(module, stmt, tf)
        try_imports(module, stmt, tf, _tuner_imports)
        if isinstance(stmt, cst.ClassDef):
            cls = {"defaults": {}, "spread": False, "line": line(stmt)}
            for item in stmt.body.body:
                _tuner_defaults(module, item, line, cls)
            tf.classes[stmt.name.value] = cls
    v = _Calls()
    module.visit(v)
    _tuner_options(rel, module, v.calls, line, tf, diags)
    _sys_paths(v.calls, tf)
    return tf, diags


def _tuner_imports(module: cst.Module, stmt: cst.CSTNode, tf: TunerFile) -> None:
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                mod = _code(module, small.module) if small.module is not None else ""
                names = [a.name.value for a in small.names if isinstance(a.name, cst.Name)]
                if mod == "aiter.jit.core":
                    tf.config_imports += [n for n in names if n.startswith("AITER_CONFIG_")]
                    return
                if mod.endswith(("_common", "_instance")) and "kernels_list" in names:
                    if tf.kernel_import is None:
                        tf.kernel_import = (mod, "kernels_list")
                tf.kernel_imports += [(mod, n) for n in names if KERNEL_LIST_NAME.search(n)]


# names a tuner imports as kernel lists: kernels_list, candidate_kernels_dict,
# gfx942_a8w8_kernels_list, get_gemm1_kernels_list, ...
KERNEL_LIST_NAME = re.compile(r"kernels_(?:list|dict)|kernels_\w*dict|kernels_list\w*")


def _tuner_defaults(
    module: cst.Module,
    item: cst.CSTNode,
    line: Callable[[cst.CSTNode], int],
    cls: dict[str, Any],
) -> None:
    """`ARG_DEFAULTS = {...}` in a class body."""
    if isinstance(item, cst.SimpleStatementLine):
        for small in item.body:
            # `ARG_DEFAULTS = {...}` or, in aiter 2026, `ARG_DEFAULTS: ClassVar[...] = {...}`
            value: cst.BaseExpression | None
            if isinstance(small, cst.Assign):
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign):
                target, value = small.target, small.value
            else:
                continue
            if (
                isinstance(target, cst.Name)
                and target.value == "ARG_DEFAULTS"
                and isinstance(value, cst.Dict)
            ):
                for el in value.elements:
                    if not isinstance(el, cst.DictElement):  # `**x`
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
    line: Callable[[cst.CSTNode], int],
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

"""aiter's CK kernel lists, read with libcst (never imported or executed).

For each `csrc/**/*_common.py` / `*_instance.py`: the kernel dataclasses (fields in order, defaults,
the `name` property), every module-level dict whose values instantiate one of them (`kernels_list`,
`default_kernels_dict`, per-arch lists) with each id, its field values and the kernelName the
`name` property composes, evaluated statically (ckkb.extract.aiter_pyeval). What cannot be
evaluated becomes a diagnostic with file and line; nothing is guessed. An id written twice in one
dict literal, and identical kernels under different ids, are recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_pyeval import Unsupported, compile_expr, literal
from ckkb.extract.files import list_files
from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import (
    _TRIVIA,
    COMPOUND,
    SOFT,
    Fallback,
    LogicalLine,
    SourceScan,
    StatementLines,
    parse_lines,
)
from ckkb.fields import normalise
from ckkb.kb.schema.aiter import AiterKernelListRow, AiterKernelRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

cst = lazy_module("libcst")

STAGE_NAME = "aiter.kernels"

# aiter field name -> CK template parameter name, so ckkb.fields.normalise derives the normalised columns.
AITER_TO_CK = {
    "BLOCK_SIZE": "BlockSize",
    "MPerBLOCK": "MPerBlock",
    "MPerBlock": "MPerBlock",
    "NPerBLOCK": "NPerBlock",
    "NPerBlock": "NPerBlock",
    "KPerBLOCK": "KPerBlock",
    "KPerBlock": "KPerBlock",
    "WAVE_TILE_M": "MPerXDL",
    "MPerXDL": "MPerXDL",
    "WAVE_TILE_N": "NPerXDL",
    "NPerXDL": "NPerXDL",
    "WAVE_MAP_M": "MXdlPerWave",
    "WAVE_MAP_N": "NXdlPerWave",
    "AK1": "AK1",
    "BK1": "BK1",
    "LOOP_SCHED": "BlkGemmPipeSched",
    "PIPELINE_Sched": "BlkGemmPipeSched",
}
PIPELINE_FIELDS = ("PIPELINE_VERSION", "GemmPipelineVersion")


@dataclass
class KernelClass:
    name: str
    line: int
    fields: list[str]
    defaults: dict[str, Any]
    name_expr: cst.BaseExpression | None = None  # not pickled (see KernelFile)
    name_line: int = 0
    name_problem: str | None = None
    name_fn: Any = None  # name_expr compiled (aiter_pyeval.compile_expr), made on first use


@dataclass
class KernelEntry:
    key: Any
    line: int
    values: dict[str, Any]
    name: str | None
    shadowed: bool = False
    duplicate_of: Any = None


@dataclass
class KernelList:
    name: str
    line: int
    class_name: str
    fields: list[str]
    entries: list[KernelEntry] = field(default_factory=list)
    duplicate_ids: list[Any] = field(default_factory=list)

    @property
    def arch(self) -> str | None:
        m = re.search(r"(gfx\d+[a-z]?)", self.name)
        return m.group(1) if m else None

    def by_id(self) -> dict[Any, KernelEntry]:
        """What Python builds from the literal: the last entry for each key."""
        return {e.key: e for e in self.entries if not e.shadowed}


@dataclass
class KernelFile:
    rel: str
    op: str
    classes: list[str]
    lists: list[KernelList]
    diagnostics: list[Diagnostic]


def op_of(rel: str) -> str:
    """csrc/ck_gemm_a8w8/gemm_a8w8_common.py -> gemm_a8w8."""
    parts = Path(rel).parts
    d = parts[-2] if len(parts) >= 2 else Path(rel).stem
    return d[3:] if d.startswith("ck_") else d


def _is_dataclass(node: cst.ClassDef) -> bool:
    for d in node.decorators:
        dec = d.decorator
        if isinstance(dec, cst.Call):
            dec = dec.func
        if (isinstance(dec, cst.Name) and dec.value == "dataclass") or (
            isinstance(dec, cst.Attribute) and dec.attr.value == "dataclass"
        ):
            return True
    return False


def _is_property(node: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "property"
        for d in node.decorators
    )


def read_kernel_file(rel: str, data: bytes) -> KernelFile:
    """Parse one kernel-list file. Never raises: problems become diagnostics.

    Reads only the statements that can hold kernel facts (top-level dataclasses and dict literals
    naming one of them), each parsed alone with libcst; a file in any other shape is read as a whole
    module (same facts, slower).
    """
    try:
        return _read_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return _read_module(rel, data)


def _read_statements(rel: str, data: bytes) -> KernelFile:
    text = data.decode("utf-8")
    scan = SourceScan(text)
    diags: list[Diagnostic] = []
    kf = KernelFile(rel=rel, op=op_of(rel), classes=[], lists=[], diagnostics=diags)
    known: dict[int, int] = {}  # lines the scanner gives (class and `def name` lines)
    positions: list[Any] = []  # each class's node lines, resolved only when a diagnostic needs one

    def line(node: cst.CSTNode) -> int:
        k = id(node)
        if k in known:
            return known[k]
        for pos in positions:
            ln = pos.get(k, None)
            if ln is not None:
                return ln
        return 0

    def report_at(ln: int, msg: str, severity: str = "warning") -> None:
        diags.append(Diagnostic(rel, ln, msg, severity, STAGE_NAME))

    lls = scan.logical
    groups = scan.compounds()
    classes: dict[str, KernelClass] = {}
    for first, header, stop in groups:
        if (
            lls[header].word != "class"
            or lls[header].indent != ""
            or "dataclass" not in text[lls[first].start : lls[header].start]
        ):
            continue  # a class without a decorator naming dataclass is not one (_is_dataclass)
        _module, stmt, pos = parse_lines(scan, first, stop)
        if not isinstance(stmt, cst.ClassDef):
            raise Fallback(f"line {lls[header].line}: not a class")
        if _is_dataclass(stmt):
            positions.append(pos)
            _class_lines(scan, header, stop, stmt, known)
            kc = _read_class(stmt, line, lambda node, msg: report_at(line(node), msg))
            classes[kc.name] = kc
    kf.classes = list(classes)

    reported: set[tuple[int, str]] = set()
    if len(_EXPRS) > _EXPRS_MAX:
        _EXPRS.clear()
        _LITERALS.clear()  # keyed by the ids of those nodes
    parsed = _EXPRS
    lit = _literals(_LITERALS)
    for first, header, stop in groups:
        ll = lls[header]
        if first != header or stop != header + 1 or ll.word in COMPOUND or not classes:
            continue  # compound statements: only module-level simple statements hold kernel dicts
        code = scan.code(ll)
        if not any(c in code for c in classes):
            continue  # names no kernel class: no entry can be a kernel call
        if ll.word in SOFT:
            raise Fallback(f"line {ll.line}: soft keyword")
        shape = _dict_statement(scan, ll, parsed)
        if shape is None:
            raise Fallback(f"line {ll.line}: names a kernel class but is not `name = {{...}}`")
        target, elements = shape
        _read_dict(target, ll.line, elements, classes, line, report_at, reported, kf, lit)
    for kc in classes.values():
        kc.name_expr = kc.name_fn = None  # keep KernelFile picklable
    return kf


# Expression texts of kernel dicts -> their libcst node, across the files a process reads (kernel lists of
# all ops repeat the same argument texts), and each node's literal value by id (the nodes stay alive here).
_EXPRS: dict[str, Any] = {}
_LITERALS: dict[int, Any] = {}
_EXPRS_MAX = 50_000


def _class_lines(
    scan: SourceScan, header: int, stop: int, stmt: cst.ClassDef, known: dict[int, int]
) -> None:
    """The lines _read_class always asks for, from the scanner: the class (its `class` keyword, where
    PositionProvider starts a ClassDef) and each `def name` of its body (a FunctionDef starts at `def`)."""
    lls = scan.logical
    known[id(stmt)] = lls[header].line
    if header + 1 >= stop or not isinstance(stmt.body, cst.IndentedBlock):
        return
    indent = lls[header + 1].indent
    defs = []
    for j in range(header + 1, stop):
        ll = lls[j]
        if ll.indent == indent and ll.word in ("def", "async"):
            m = _DEF_NAME.match(scan.code(ll))
            if m is not None and m.group(1) == "name":
                defs.append(ll.line)
    items = [
        item
        for item in stmt.body.body
        if isinstance(item, cst.FunctionDef) and item.name.value == "name"
    ]
    if len(items) == len(defs):  # else: resolved from the positions
        for item, ln in zip(items, defs, strict=True):
            known[id(item)] = ln


_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")
_NAME = re.compile(r"[^\W\d]\w*")
_KEYWORD = re.compile(r"([^\W\d]\w*)[ \t]*=(?!=)[ \t]*")
_DICT_TARGET = re.compile(r"([^\W\d]\w*)[ \t]*=[ \t]*\Z")


def _dict_statement(
    scan: SourceScan, ll: LogicalLine, parsed: dict[str, Any]
) -> tuple[str, list[tuple[int, Any, Any]]] | None:
    """`NAME = {k: v, ...}` alone on its logical line -> (NAME, [(entry line, key node, value node)]).

    Keys and values are parsed one by one with libcst from their tokens (comments and line breaks as
    one space; a text already in `parsed` is not parsed again). A `**x` entry has key
    None and value None.
    """
    kinds, starts, text = scan.kinds, scan.starts, scan.text
    i = ll.first
    while i <= ll.last and kinds[i] != "o":
        if kinds[i] in ("s", "x", "p"):
            return None
        i += 1
    if i > ll.last or text[starts[i]] != "{":
        return None
    m = _DICT_TARGET.match(text, starts[ll.first], starts[i])
    if m is None:
        return None
    depth = 0
    close = -1
    for j in range(i, ll.last + 1):
        k = kinds[j]
        if k == "o":
            depth += 1
        elif k == "x":
            depth -= 1
            if depth == 0:
                close = j
                break
    if close != ll.last or text[starts[close]] != "}":
        return None  # something follows the dict (an operator, a call) or it is not closed by `}`

    def parse(first: int, last: int) -> Any:
        src = scan.normalised(first, last)
        if src not in parsed:
            try:
                parsed[src] = cst.parse_expression(src)
            except cst.ParserSyntaxError:
                raise Fallback(
                    f"line {scan.line_of(first)}: {src[:40]!r} not an expression alone"
                ) from None
        return parsed[src]

    def parse_value(first: int, last: int) -> Any:
        """`NAME(arg, ..., kw=arg)`: each argument parsed alone (kernel lists repeat the same few), else the whole."""
        while first <= last and kinds[first] in _TRIVIA:
            first += 1
        while last >= first and kinds[last] in _TRIVIA:
            last -= 1
        if first > last or kinds[first] != "t" or kinds[last] != "x" or first + 1 > last:
            return parse(first, last)
        o = first + 1
        while o < last and kinds[o] in _TRIVIA:
            o += 1
        if (
            kinds[o] != "o"
            or text[starts[o]] != "("
            or not _NAME.fullmatch(text, starts[first], scan.ends[first])
        ):
            return parse(first, last)
        args: list[Any] = []
        depth = 0
        begin = o + 1
        for j in range(o + 1, last + 1):
            k = kinds[j]
            if k == "o":
                depth += 1
            elif k == "x" and j != last:
                depth -= 1
            elif k == "p" and depth == 0 and text[starts[j]] == ":":
                return parse(first, last)
            if (k == "p" and depth == 0 and text[starts[j]] == ",") or j == last:
                if depth != 0 or (j == last and text[starts[j]] != ")"):
                    return parse(first, last)
                a = begin
                while a < j and kinds[a] in _TRIVIA:
                    a += 1
                if a == j:
                    if j != last or (args and text[starts[begin - 1]] != ","):
                        return parse(first, last)
                    break
                kw = _KEYWORD.match(text, starts[a], starts[j])
                if text.startswith("*", starts[a]):
                    return parse(first, last)
                if kw is not None:
                    b = a
                    while starts[b] < kw.end():
                        b += 1
                    if starts[b] != kw.end():
                        return parse(first, last)
                    args.append(_Arg(parse(b, j - 1), _Ident(kw.group(1))))
                else:
                    args.append(_Arg(parse(a, j - 1), None))
                begin = j + 1
        return _SplitCall(_Ident(text[starts[first] : scan.ends[first]]), args)

    elements: list[tuple[int, Any, Any]] = []
    depth = 0
    begin = i + 1
    colon = -1
    for j in range(i + 1, close + 1):
        k = kinds[j]
        if k == "o":
            depth += 1
        elif k == "x" and j != close:
            depth -= 1
        elif (k == "p" and depth == 0) or j == close:
            ch = text[starts[j]]
            if ch == ":" and j != close:
                if colon < 0:
                    colon = j
                continue
            first = begin
            while first < j and kinds[first] in _TRIVIA:
                first += 1
            if first == j:  # trailing comma (or an empty dict)
                if colon >= 0 or (j != close and ch == ","):
                    return None
                break
            el_line = scan.line_of(first)
            if text.startswith("**", starts[first]):
                elements.append((el_line, None, None))
            elif colon < 0:
                return None  # a set, not a dict
            else:
                if "lambda" in scan.normalised(first, colon - 1):
                    raise Fallback(f"line {el_line}: lambda in a dict key")
                elements.append((el_line, parse(first, colon - 1), parse_value(colon + 1, j - 1)))
            begin, colon = j + 1, -1
    return m.group(1), elements


def _read_module(rel: str, data: bytes) -> KernelFile:
    """The whole module parsed with libcst (the reader for files _read_statements does not take)."""
    diags: list[Diagnostic] = []
    kf = KernelFile(rel=rel, op=op_of(rel), classes=[], lists=[], diagnostics=diags)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        diags.append(
            Diagnostic(rel, line, f"not UTF-8 ({e.reason}); file skipped", "error", STAGE_NAME)
        )
        return kf
    try:
        module = cst.parse_module(text)
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
        return kf
    lines = StatementLines(module)
    line = lines.line

    def report_at(ln: int, msg: str, severity: str = "warning") -> None:
        diags.append(Diagnostic(rel, ln, msg, severity, STAGE_NAME))

    classes: dict[str, KernelClass] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and _is_dataclass(stmt):
            lines.resolve_positions(stmt)
            kc = _read_class(stmt, line, lambda node, msg: report_at(line(node), msg))
            classes[kc.name] = kc
    kf.classes = list(classes)

    reported: set[tuple[int, str]] = set()
    lit = _literals()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not (
                isinstance(small, cst.Assign)
                and isinstance(small.value, cst.Dict)
                and len(small.targets) == 1
            ):
                continue
            target = small.targets[0].target
            if not isinstance(target, cst.Name):
                continue
            d = small.value
            if not any(
                isinstance(e, cst.DictElement) and _is_kernel_call(e.value, classes)
                for e in d.elements
            ):
                continue  # not a kernel dict (e.g. a dict of lists by dtype)
            lines.locate_elements(stmt, small, d)
            elements = [
                (line(el), el.key, el.value)
                if isinstance(el, cst.DictElement)
                else (line(el), None, None)
                for el in d.elements
            ]
            _read_dict(
                target.value, line(small), elements, classes, line, report_at, reported, kf, lit
            )
    for kc in classes.values():
        kc.name_expr = kc.name_fn = None  # keep KernelFile picklable
    return kf


@dataclass(frozen=True, slots=True)
class _Ident:
    value: str


@dataclass(frozen=True, slots=True)
class _Arg:
    """What _bind reads of a cst.Arg."""

    value: Any  # a libcst expression
    keyword: _Ident | None
    star: str = ""


@dataclass(frozen=True, slots=True)
class _SplitCall:
    """`NAME(args)` split by the scanner, each argument parsed with libcst: what _bind reads of a cst.Call
    (building libcst nodes for it costs their validation, once per entry)."""

    func: _Ident
    args: list[_Arg]


def _is_kernel_call(value: Any, classes: dict[str, KernelClass]) -> bool:
    if isinstance(value, _SplitCall):
        return value.func.value in classes
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value in classes
    )


def _read_class(stmt: cst.ClassDef, line, report) -> KernelClass:
    kc = KernelClass(stmt.name.value, line(stmt), [], {})
    for item in stmt.body.body:
        if isinstance(item, cst.SimpleStatementLine):
            for small in item.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    fname = small.target.value
                    kc.fields.append(fname)
                    if small.value is not None:
                        try:
                            kc.defaults[fname] = literal(small.value)
                        except Unsupported as u:
                            report(u.node, f"{kc.name}.{fname}: default not a literal ({u.what})")
        elif isinstance(item, cst.FunctionDef) and item.name.value == "name" and _is_property(item):
            kc.name_line = line(item)
            body = item.body.body if isinstance(item.body, cst.IndentedBlock) else []
            rets = [s for s in body if isinstance(s, cst.SimpleStatementLine)]
            if (
                len(body) == 1
                and rets
                and len(rets[0].body) == 1
                and isinstance(rets[0].body[0], cst.Return)
            ):
                kc.name_expr = rets[0].body[0].value
            else:
                kc.name_problem = "name property is not a single return statement"
                report(item, f"{kc.name}.name: {kc.name_problem}; names not evaluated")
    return kc


def _read_dict(
    target: str,
    stmt_line: int,
    elements: list[tuple[int, Any, Any]],
    classes: dict[str, KernelClass],
    line,
    report_at,
    reported: set[tuple[int, str]],
    kf: KernelFile,
    lit=literal,
) -> None:
    """One module-level dict literal: (entry line, key node, value node) per entry (None, None: `**x`).

    `lit` is `literal` or a cached one (_literals)."""
    if not any(key is not None and _is_kernel_call(value, classes) for _, key, value in elements):
        return  # not a kernel dict (e.g. a dict of lists by dtype)
    kl = None
    seen: dict[Any, KernelEntry] = {}
    for el_line, key_node, value in elements:
        if key_node is None:
            report_at(el_line, f"{target}: dict unpacking is not evaluated statically")
            continue
        if not _is_kernel_call(value, classes):
            report_at(el_line, f"{target}: entry is not a kernel instance call; skipped")
            continue
        kc = classes[value.func.value]
        if kl is None:
            kl = KernelList(target, stmt_line, kc.name, list(kc.fields))
        try:
            key = lit(key_node)
        except Unsupported as u:
            # lines are known for the entry (its key) and the class bodies only
            report_at(
                el_line if u.node is key_node else line(u.node),
                f"{target}: key not a literal ({u.what}); entry skipped",
            )
            continue
        values, problem = _bind(kc, value, lit)
        if problem:
            report_at(el_line, f"{target}[{key!r}]: {problem}; entry skipped", "error")
            continue
        name = None
        if kc.name_expr is not None:
            try:
                if kc.name_fn is None:
                    kc.name_fn = compile_expr(kc.name_expr, kc.name)
                name = kc.name_fn({}, values)
                if not isinstance(name, str):
                    raise Unsupported(
                        kc.name_expr, f"name evaluates to {type(name).__name__}, not str"
                    )
            except Unsupported as u:
                name = None
                k = (line(u.node), u.what)
                if k not in reported:
                    reported.add(k)
                    report_at(line(u.node), f"{kc.name}.name not evaluated statically: {u.what}")
        entry = KernelEntry(key=key, line=el_line, values=values, name=name)
        if key in seen:
            seen[key].shadowed = True
            if key not in kl.duplicate_ids:
                kl.duplicate_ids.append(key)
        seen[key] = entry
        kl.entries.append(entry)
    if kl is None:
        return
    first_by_values: dict[str, Any] = {}
    for e in kl.entries:
        if e.shadowed:
            continue
        sig = repr(sorted(e.values.items()))
        if sig in first_by_values:
            e.duplicate_of = first_by_values[sig]
        else:
            first_by_values[sig] = e.key
    kf.lists.append(kl)


def _bind(kc: KernelClass, call: cst.Call, lit=literal) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {}
    pos = 0
    for a in call.args:
        if a.star:
            return values, "starred arguments are not evaluated statically"
        try:
            v = lit(a.value)
        except Unsupported as u:
            return values, f"argument is not a literal ({u.what})"
        if a.keyword is not None:
            values[a.keyword.value] = v
        else:
            if pos >= len(kc.fields):
                return values, f"{len(kc.fields)} fields but more positional arguments"
            values[kc.fields[pos]] = v
            pos += 1
    for f in kc.fields:
        if f not in values:
            if f in kc.defaults:
                values[f] = kc.defaults[f]
            else:
                return values, f"field {f} has no value and no default"
    return values, None


def _literals(cache: dict[int, Any] | None = None):
    """`literal`, remembering each node's value by id in `cache` (the nodes must stay alive as long as
    it; kernel lists repeat the same argument texts, parsed once into the same node). Values are
    returned as fresh lists and dicts, as `literal` gives them; a node that does not evaluate is
    evaluated again."""
    if cache is None:
        cache = {}

    def lit(node: cst.BaseExpression) -> Any:
        k = id(node)
        if k in cache:
            return _fresh(cache[k])
        v = literal(node)
        if _plain(v):
            cache[k] = v
            return _fresh(v)
        return v

    return lit


_SCALARS = (int, float, str, bool, type(None))


def _plain(v: Any) -> bool:
    if type(v) in _SCALARS:
        return True
    if type(v) in (list, tuple):
        return all(_plain(x) for x in v)
    if type(v) is dict:
        return all(_plain(k) and _plain(x) for k, x in v.items())
    return False


def _fresh(v: Any) -> Any:
    t = type(v)
    if t is list:
        return [_fresh(x) for x in v]
    if t is tuple:
        return tuple([_fresh(x) for x in v])
    if t is dict:
        return {k: _fresh(x) for k, x in v.items()}
    return v


def normalised(values: dict[str, Any]) -> dict[str, Any]:
    """aiter kernel fields -> ckkb's normalised CK columns (through ckkb.fields.normalise)."""
    ck = {AITER_TO_CK[k]: v for k, v in values.items() if k in AITER_TO_CK}
    for p in PIPELINE_FIELDS:
        if p in values and values[p] is not None:
            ck["BlkGemmPipelineVer"] = f"v{values[p]}"
    return normalise(ck)


# ---------------------------------------------------------------- stage


def is_kernel_file(path: Path) -> bool:
    return path.name.endswith("_common.py") or path.name.endswith("_instance.py")


class KernelsStage:
    name = STAGE_NAME
    worker_group = "libcst"  # read in one worker: libcst is imported once per build
    version = "3"
    tree = "aiter"
    reads = ()
    writes = ("aiter_kernel_lists", "aiter_kernels")
    combine_cost = 0.006  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        root = Path(root)
        return [
            p.relative_to(root) for p in list_files(root, "csrc", ("_common.py", "_instance.py"))
        ]

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if b"dataclass" not in data:
            return FileResult()
        kf = read_kernel_file(rel, data)
        return FileResult(diagnostics=kf.diagnostics, facts={"kfile": kf})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        rows: list[Any] = []
        files = [r.facts["kfile"] for _, r in sorted(results.items()) if "kfile" in r.facts]
        rows.extend(kernel_rows(files))
        return StageResult(rows=rows)


def kernel_rows(files: list[KernelFile]) -> list[Any]:
    rows: list[Any] = []
    lid = 0
    for kf in files:
        for kl in kf.lists:
            lid += 1
            rows.append(
                AiterKernelListRow(
                    id=lid,
                    op=kf.op,
                    file=kf.rel,
                    line=kl.line,
                    name=kl.name,
                    class_name=kl.class_name,
                    fields=kl.fields,
                    entries=len(kl.entries),
                    duplicate_ids=kl.duplicate_ids,
                    arch=kl.arch,
                )
            )
            for e in kl.entries:
                n = normalised(e.values)
                rows.append(
                    AiterKernelRow(
                        list_id=lid,
                        op=kf.op,
                        list_name=kl.name,
                        file=kf.rel,
                        line=e.line,
                        kernel_id=e.key
                        if isinstance(e.key, int) and not isinstance(e.key, bool)
                        else None,
                        key=repr(e.key),
                        values=e.values,
                        name=e.name,
                        shadowed=e.shadowed,
                        duplicate_of=None if e.duplicate_of is None else repr(e.duplicate_of),
                        block_size=n["block_size"],
                        tile_m=n["tile_m"],
                        tile_n=n["tile_n"],
                        tile_k=n["tile_k"],
                        mfma_m=n["mfma_m"],
                        mfma_n=n["mfma_n"],
                        pipeline=n["pipeline"],
                        scheduler=n["scheduler"],
                    )
                )
    return rows


STAGE = KernelsStage()

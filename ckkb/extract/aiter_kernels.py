"""aiter's CK kernel lists, read with libcst (never imported or executed).

For each `csrc/**/*_common.py` / `*_instance.py`: the kernel dataclasses (fields in order, defaults,
the `name` property), every module-level dict whose values instantiate one of them (`kernels_list`,
`default_kernels_dict`, per-arch lists) with each id, its field values and the kernelName the
`name` property composes, evaluated statically (ckkb.extract.aiter_pyeval). What cannot be
evaluated becomes a diagnostic with file and line; nothing is guessed. An id written twice in one
dict literal, and identical kernels under different ids, are recorded.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_derived import add_derived
from ckkb.extract.aiter_kernel_model import (
    KernelClass,
    KernelEntry,
    KernelFile,
    KernelList,
    entry_name,
)
from ckkb.extract.aiter_kernel_scan import SplitCall, class_lines, dict_statement
from ckkb.extract.aiter_name_env import class_envs
from ckkb.extract.aiter_pyeval import Unsupported, literal
from ckkb.extract.aiter_pymodels import factory_default
from ckkb.extract.files import list_files
from ckkb.extract.lazy import lazy_module
from ckkb.extract.pyscan import COMPOUND, SOFT, Fallback, SourceScan, StatementLines, parse_lines
from ckkb.fields import normalise
from ckkb.kb.schema.aiter import AiterKernelListRow, AiterKernelRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module(
        "libcst"
    )  # imported on first use: workers that never read Python start sooner

STAGE_NAME = "aiter.kernels"

# aiter field name -> CK template parameter name, so ckkb.fields.normalise derives the normalised
# columns.
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
    module (same facts, slower; `_read_module`, the reference: see ckkb.extract.aiter_kernel_scan).
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
            class_lines(scan, header, stop, stmt, known)
            kc = _read_class(stmt, line, lambda node, msg: report_at(line(node), msg))
            classes[kc.name] = kc
    kf.classes = list(classes)
    _bind_envs(scan.tree, text, classes)

    reported: set[tuple[int, str]] = set()
    parsed: dict[str, Any] = {}  # expression text -> its node (kernel lists repeat the same texts)
    for first, header, stop in groups:
        ll = lls[header]
        if first != header or stop != header + 1 or ll.word in COMPOUND or not classes:
            continue  # compound statements: only module-level simple statements hold kernel dicts
        code = scan.code(ll)
        if not any(c in code for c in classes):
            continue  # names no kernel class: no entry can be a kernel call
        if ll.word in SOFT:
            raise Fallback(f"line {ll.line}: soft keyword")
        shape = dict_statement(scan, ll, parsed)
        if shape is None:
            raise Fallback(f"line {ll.line}: names a kernel class but is not `name = {{...}}`")
        target, elements = shape
        _read_dict(target, ll.line, elements, classes, line, report_at, reported, kf)
    add_derived(text, kf, classes, report_at)
    for kc in classes.values():
        kc.name_expr = kc.name_fn = None  # keep KernelFile picklable
        kc.props = {}
        kc.name_cache = {}
        kc.env = {}
    return kf


def _read_module(rel: str, data: bytes) -> KernelFile:
    """The whole module parsed with libcst: the reference reader, and the one for the files
    _read_statements does not take."""
    diags: list[Diagnostic] = []
    kf = KernelFile(rel=rel, op=op_of(rel), classes=[], lists=[], diagnostics=diags)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        ln = data[: e.start].count(b"\n") + 1
        diags.append(
            Diagnostic(rel, ln, f"not UTF-8 ({e.reason}); file skipped", "error", STAGE_NAME)
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
    try:
        _bind_envs(ast.parse(text), text, classes)
    except (SyntaxError, ValueError):
        pass  # libcst read it and Python does not: its properties see no module names

    reported: set[tuple[int, str]] = set()
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
            _read_dict(target.value, line(small), elements, classes, line, report_at, reported, kf)
    add_derived(text, kf, classes, report_at)
    for kc in classes.values():
        kc.name_expr = kc.name_fn = None  # keep KernelFile picklable
        kc.props = {}
        kc.name_cache = {}
        kc.env = {}
    return kf


def _bind_envs(tree: Any, text: str, classes: dict[str, KernelClass]) -> None:
    """The module names each class's properties read (aiter 2026's `ACT_OP_NAME[self.ActOP]`)."""
    if classes:
        for c, env in class_envs(tree, text, list(classes)).items():
            classes[c].env = env


def _is_kernel_call(value: Any, classes: dict[str, KernelClass]) -> bool:
    if isinstance(value, SplitCall):
        return value.func.value in classes
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value in classes
    )


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _read_class(
    stmt: cst.ClassDef,
    line: Callable[[cst.CSTNode], int],
    report: Callable[[cst.CSTNode, str], None],
) -> KernelClass:
    kc = KernelClass(stmt.name.value, line(stmt), [], {})
    for item in stmt.body.body:
        if isinstance(item, cst.SimpleStatementLine):
            for small in item.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    fname = small.target.value
                    kc.fields.append(fname)
                    made, v = factory_default(small.value)  # field(default_factory=...)
                    if made:
                        kc.defaults[fname] = v
                    elif small.value is not None:
                        try:
                            kc.defaults[fname] = literal(small.value)
                        except Unsupported as u:
                            report(u.node, f"{kc.name}.{fname}: default not a literal ({u.what})")
        elif isinstance(item, cst.FunctionDef) and _is_property(item):
            kc.props[item.name.value] = item
            if item.name.value != "name":
                continue
            kc.name_line = line(item)
            body = list(item.body.body) if isinstance(item.body, cst.IndentedBlock) else []
            if len(body) > 1 and _is_docstring(body[0]):
                body = body[1:]  # a docstring does not change what the property returns
            rets = [s for s in body if isinstance(s, cst.SimpleStatementLine)]
            if (
                len(body) == 1
                and rets
                and len(rets[0].body) == 1
                and isinstance(rets[0].body[0], cst.Return)
            ):
                kc.name_expr = rets[0].body[0].value
            # else: statements, run by ckkb.extract.aiter_pyexec (entry_name)
    return kc


def _read_dict(
    target: str,
    stmt_line: int,
    elements: list[tuple[int, Any, Any]],
    classes: dict[str, KernelClass],
    line: Callable[[cst.CSTNode], int],
    report_at: Callable[..., None],
    reported: set[tuple[int, str]],
    kf: KernelFile,
) -> None:
    """One module-level dict literal: (entry line, key node, value node) per entry (None, None:
    `**x`)."""
    if not any(key is not None and _is_kernel_call(value, classes) for _, key, value in elements):
        return  # not a kernel dict (e.g. a dict of lists by dtype)
    kl = None
    incomplete = False
    seen: dict[Any, KernelEntry] = {}
    for el_line, key_node, value in elements:
        if key_node is None:
            report_at(el_line, f"{target}: dict unpacking is not evaluated statically")
            incomplete = True
            continue
        if not _is_kernel_call(value, classes):
            report_at(el_line, f"{target}: entry is not a kernel instance call; skipped")
            incomplete = True
            continue
        kc = classes[value.func.value]
        if kl is None:
            kl = KernelList(target, stmt_line, kc.name, list(kc.fields))
        try:
            key = literal(key_node)
        except Unsupported as u:
            # lines are known for the entry (its key) and the class bodies only
            report_at(
                el_line if u.node is key_node else line(u.node),
                f"{target}: key not a literal ({u.what}); entry skipped",
            )
            incomplete = True
            continue
        values, problem = _bind(kc, value)
        if problem:
            report_at(el_line, f"{target}[{key!r}]: {problem}; entry skipped", "error")
            incomplete = True
            continue
        name = None
        if "name" in kc.props:
            try:
                name = entry_name(kc, values, classes)
                if not isinstance(name, str):
                    raise Unsupported(
                        kc.props["name"], f"name evaluates to {type(name).__name__}, not str"
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
    kl.complete = not incomplete
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


def _bind(kc: KernelClass, call: cst.Call) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {}
    pos = 0
    for a in call.args:
        if a.star:
            return values, "starred arguments are not evaluated statically"
        try:
            v = literal(a.value)
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
    version = "6"
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
                    derived=kl.derived,
                    arch_when=kl.when,
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

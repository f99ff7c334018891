"""aiter's tuner files and core.py read statement by statement: only the statements that can
hold their facts are parsed, each alone with libcst (the token scan of ckkb.extract.pyscan finds
them), by the same code as the whole-module readers of ckkb.extract.aiter_tuner_reader.

A fast path beside that reference (`read_core_module`, `read_tuner_module`): it makes
`ckkb audit --aiter TREE` on a tree not in the knowledge base ~4x faster (README, Performance);
tests/unit/test_aiter_readers_equiv.py checks both give the same facts. A shape it does not take
raises Fallback and the reference reads the file.
"""

from __future__ import annotations

import re

from ckkb.diagnostics import Diagnostic
from ckkb.extract.aiter_tuner_reader import (
    TUNER_MARKERS,
    CoreFacts,
    MergeRule,
    RuntimeConfig,
    TunerFile,
    _Calls,
    _core_done,
    _core_statement,
    _tuner_defaults,
    _tuner_imports,
    _tuner_options,
    cst,
    read_core_module,
    read_tuner_module,
)
from ckkb.extract.pyscan import COMPOUND, SOFT, Fallback, SourceScan, parse_lines

_DEF_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+([^\W\d]\w*)")


def read_core(rel: str, data: bytes) -> tuple[CoreFacts, list[Diagnostic]]:
    """Runtime configs and merge rule of aiter/jit/core.py, parsing only the statements that hold
    them (module-level lines naming AITER_CONFIG, the two functions); other shapes: the whole
    module."""
    try:
        return _read_core_statements(rel, data)
    except (Fallback, UnicodeDecodeError):
        return read_core_module(rel, data)


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

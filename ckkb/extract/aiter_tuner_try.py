"""Kernel lists a tuner imports inside a top-level `try:` (aiter 2026's bf16 GEMM tuner takes
its opus list as an optional backend):

    try:
        _opus_csrc = os.path.join(os.path.dirname(__file__), "../opus_gemm")
        if _opus_csrc not in sys.path:
            sys.path.insert(0, os.path.abspath(_opus_csrc))
        from opus_gemm_common import kernels_list as _opus_kernels_list
    except Exception as _opus_exc:
        ...

The imports of the `try` body (and of the `if`s in it) count as the tuner's imports, and a
directory put on sys.path from the file's own location (`os.path.dirname(__file__)`, directly
or through a name the body assigned) as one of its sys.path entries, repo-style. Both tuner
readers (statement by statement and whole module) call `try_imports` on the same `try` node.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckkb.extract.aiter_cst import _code_of
from ckkb.extract.aiter_sys_path import sys_path_dir
from ckkb.extract.aiter_tuner_facts import TunerFile
from ckkb.extract.lazy import lazy_module

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_module("libcst")


def try_imports(
    module: Any, stmt: Any, tf: TunerFile, imports: Callable[[Any, Any, TunerFile], None]
) -> None:
    """Read a top-level `try` statement's imports (with `imports`, the readers' own import
    reader) and its sys.path entries into tf."""
    if not isinstance(stmt, cst.Try):
        return
    names: dict[str, str] = {}
    for s in _statements(stmt.body.body):
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    imports(module, cst.SimpleStatementLine(body=[small]), tf)
                elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                    t = small.targets[0].target
                    d = _dir_of(small.value, tf.rel, names)
                    if isinstance(t, cst.Name) and d is not None:
                        names[t.value] = d
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    _insert(small.value, tf, names)


def _statements(body: Any) -> list[Any]:
    """The statements of a block and of the `if`s in it (both branches), in order."""
    out: list[Any] = []
    for s in body:
        if isinstance(s, cst.If):
            out += _statements(s.body.body)
            if isinstance(s.orelse, cst.If):
                out += _statements([s.orelse])
            elif isinstance(s.orelse, cst.Else):
                out += _statements(s.orelse.body.body)
        else:
            out.append(s)
    return out


def _insert(call: Any, tf: TunerFile, names: dict[str, str]) -> None:
    if _code_of(call.func) != "sys.path.insert" or len(call.args) < 2:
        return
    arg = call.args[1].value
    d = sys_path_dir(arg)  # the f"{AITER_CSRC_DIR}/x" form both readers read already
    if d is None:
        d = _dir_of(arg, tf.rel, names)
        if d is not None and d not in tf.sys_paths:
            tf.sys_paths.append(d)


def _dir_of(node: Any, rel: str, names: dict[str, str]) -> str | None:
    """`os.path.dirname(__file__)`, `os.path.join(DIR, "rel")`, `os.path.abspath(DIR)` or a name
    bound to one of them: the directory, repo-style (normalised); None for anything else."""
    if isinstance(node, cst.Name):
        return names.get(node.value)
    if not isinstance(node, cst.Call):
        return None
    f = _code_of(node.func)
    args = [a.value for a in node.args if a.keyword is None and not a.star]
    if f == "os.path.dirname" and len(args) == 1:
        if isinstance(args[0], cst.Name) and args[0].value == "__file__":
            return posixpath.dirname(rel)
        return None
    if f == "os.path.abspath" and len(args) == 1:
        return _dir_of(args[0], rel, names)
    if f == "os.path.join" and args:
        base = _dir_of(args[0], rel, names)
        parts = []
        for a in args[1:]:
            if not isinstance(a, cst.SimpleString):
                return None
            parts.append(str(a.evaluated_value))
        if base is None:
            return None
        out = posixpath.normpath(posixpath.join(base, *parts))
        return None if out.startswith("..") else ("" if out == "." else out)
    return None

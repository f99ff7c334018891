"""Stage `ck.cmake`: CK's build-time rules that keep or drop instance sources per target arch.

Reads the CMakeLists.txt of every instance library root the top CMakeLists.txt reaches
(`ckkb.extract.instance_roots`: CK's `library/src/tensor_operation_instance/gpu/`, a fork's
second library beside it, or a tree's only library elsewhere) and of every directory under them,
and evaluates them with the CMake interpreter of `ckkb.lang.cmake`, one arch at a time. A root's
file is run whole (`ckkb.extract.cmake_roots`): its directory loop (matching the `# ONLY
XDL_KERNELS` style markers of each directory's file), the if()s around per-library arch lists,
and aggregate libraries built from `$<TARGET_OBJECTS:...>`. The files CMake runs on the way from
the top to a root (CK's `library/CMakeLists.txt`) run first: the root inherits their variables,
and each directory sees the root's variables as they were at its `add_subdirectory`. Each
`add_instance_library` call runs the definition in effect where CMake makes it: the runs from the
top define functions in their taken branches only (so one inside an `if()` counts per arch), the
files they `include()` included (`ckkb.extract.cmake_includes`); a root without one uses the one
an earlier root defined. Nothing is hand-copied from CK: the rules are whatever the parsed CMake
says. A library target's own arch list (`ckkb.extract.library_archs`) is a build rule too
(`library_targets`).

Default-build environment, per arch A (assumptions, stated once here): a plain `cmake` of the CK
root with `SUPPORTED_GPU_TARGETS` = A (one target per build, so `INST_TARGETS` = A) and no -D
options. The variables gpu/ sees are *computed* by running the top-level CMakeLists.txt with the
same interpreter (its `option()` defaults, `set()`s and `add_definitions(-D...)`, the latter kept
as `build_defines` rows). For this CK that means: `DTYPES` and `MIOPEN_REQ_LIBS_ONLY` undefined;
`CK_USE_FP8_ON_UNSUPPORTED_ARCH` and `BUILD_MHA_LIB` OFF (`option(... OFF)`); and `DL_KERNELS` /
`DPP_KERNELS` ON, because CK's top level sets them unless `DISABLE_DL_KERNELS` /
`DISABLE_DPP_KERNELS` is given. When the root CMakeLists.txt is absent (small trees),
`DEFAULT_ENV` is used as is (DL/DPP undefined). `hip_VERSION_FLAT` is taken as a current ROCm
(600300000): it only gates a compression flag.
add_instance_library runs once per arch and call, with the call's whole source list as `ARGN`
(`ckkb.extract.cmake_calls`). A source file that its directory's CMakeLists.txt does not name in
any add_instance_library call is not built (`not_listed` rule, ckkb.extract.cmake_sources); a
`.in` template (configured into a source of another name) is evaluated by its own name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.archs import ARCHS
from ckkb.diagnostics import Diagnostic
from ckkb.extract.cmake_calls import Rules, call_verdicts, rule_of, run_call
from ckkb.extract.cmake_includes import SUFFIX, Modules, module_files
from ckkb.extract.cmake_roots import run_root
from ckkb.extract.cmake_sources import LIBRARY_FUNCTION, Recorder, read_dir
from ckkb.extract.cpp import is_binary
from ckkb.extract.files import tree_files
from ckkb.extract.instance_roots import instance_roots
from ckkb.extract.library_archs import LibraryArchs
from ckkb.extract.tree_archs import tree_archs
from ckkb.kb.schema.ck_registrations import BuildDefineRow, BuildRuleRow, FileBuildRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult
from ckkb.lang.cmake.conditions import variables
from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import (
    Branch,
    CMakeSyntaxError,
    Command,
    Foreach,
    Function,
    Stmt,
    parse_cmake,
    walk,
)
from ckkb.sources import CK_INSTANCE_DIR

GPU_CMAKE = f"{CK_INSTANCE_DIR}/CMakeLists.txt"
ROOT_CMAKE = "CMakeLists.txt"
SOURCE_SUFFIXES = (".cpp", ".in")  # .in: CMake templates configured into sources

DEFAULT_ENV: dict[str, str] = {
    "CK_USE_FP8_ON_UNSUPPORTED_ARCH": "OFF",
    "BUILD_MHA_LIB": "OFF",
    "CMAKE_BUILD_TYPE": "Release",
    "hip_VERSION_FLAT": "600300000",
}

RuleFor = Callable[[Branch | None], BuildRuleRow | None]


def _contains(stmts: list[Stmt], pred: Callable[[Command], bool]) -> bool:
    return any(isinstance(s, Command) and pred(s) for s in walk(stmts))


def _adds_subdirectory(c: Command) -> bool:
    return c.name == "add_subdirectory"


def _find_dir_loop(stmts: list[Stmt]) -> Foreach | None:
    """The top-level foreach whose body calls add_subdirectory (the directory loop)."""
    for s in stmts:
        if isinstance(s, Foreach) and _contains(s.body, _adds_subdirectory):
            return s
    return None


def _library_function(stmts: list[Stmt]) -> Function | None:
    found = _library_functions(stmts)
    return found[0] if found else None


def _library_functions(stmts: list[Stmt]) -> list[Function]:
    """Every definition of add_instance_library in `stmts`, taken branch or not."""
    return [
        s for s in walk(stmts) if isinstance(s, Function) and s.name.lower() == LIBRARY_FUNCTION
    ]


def _message(body: list[Stmt]) -> str:
    for s in body:
        if isinstance(s, Command) and s.name == "message":
            vals = [a.value for a in s.args]
            if vals and vals[0] in ("DEBUG", "STATUS", "WARNING", "NOTICE", "VERBOSE"):
                vals = vals[1:]
            return " ".join(vals)
    return ""


def _rule_action(s: Command, where: str, body: list[Stmt], guard_vars: set[str]) -> tuple:
    """(action or None, targets) of one command directly in an if-branch's body."""
    w = [a.value for a in s.args]
    if s.name == "list" and len(w) >= 2 and w[0] == "REMOVE_ITEM" and w[1] == "ARGN":
        return "remove_source", []
    if s.name == "list" and len(w) >= 2 and w[0] == "REMOVE_ITEM" and w[1] == "INST_TARGETS":
        return "remove_targets", w[2:]
    if s.name == "list" and len(w) >= 2 and w[0] == "FILTER" and w[1] == "INST_TARGETS":
        return "remove_targets", ["FILTER " + " ".join(w[2:])]
    if (
        where == "loop"
        and s.name == "set"
        and len(w) >= 2
        and w[0] in guard_vars
        and w[1] in ("0", "OFF", "FALSE")
        and not _contains(body, _adds_subdirectory)
    ):
        return "skip_directory", []
    return None, []


def _rule_rows(
    file: str, libs: list[Function], loop: Foreach | None, guard_vars: set[str]
) -> dict[int, BuildRuleRow]:
    """One BuildRuleRow per if() branch that removes sources/targets or skips a directory."""
    rows: dict[int, BuildRuleRow] = {}
    regions = [(lib.body, "function") for lib in libs] + [(loop.body if loop else [], "loop")]
    for body, where in regions:
        for node in walk(body):
            if not isinstance(node, Branch):
                continue
            for s in node.body:
                if not isinstance(s, Command):
                    continue
                action, targets = _rule_action(s, where, node.body, guard_vars)
                if action:
                    text = node.text if node.cond is not None or node.text else "else"
                    rows.setdefault(
                        node.line,
                        BuildRuleRow(
                            id=0,
                            file=file,
                            line=node.line,
                            condition=text,
                            action=action,
                            targets=targets,
                            message=_message(node.body),
                        ),
                    )
    for i, line in enumerate(sorted(rows), start=1):
        rows[line].id = i
    return rows


class CMakeStage:
    name = "ck.cmake"
    version = "4"
    tree = "ck"
    reads = ("tree_archs",)
    writes = ("build_defines", "build_rules", "file_builds")
    combine_cost = 1.2  # seconds on the default tree: a scheduling hint

    def files(self, root: Path) -> list[Path]:
        out = [root / ROOT_CMAKE] if (root / ROOT_CMAKE).is_file() else []
        found = instance_roots(root)
        for step in dict.fromkeys(d for via in found.chain for d in via):
            if (root / step / ROOT_CMAKE).is_file():  # on the way to a root: CK's library/
                out.append(root / step / ROOT_CMAKE)
        for inst_dir in found.roots:
            base = root / inst_dir
            top = base / "CMakeLists.txt"
            if top.is_file():
                out.append(top)
            if base.is_dir():
                for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
                    f = d / "CMakeLists.txt"
                    if f.is_file():
                        out.append(f)
        cmake_dirs = ["", *dict.fromkeys(d for via in found.chain for d in via), *found.roots]
        out.extend(root / f for f in module_files(root, cmake_dirs, found.roots))
        return out

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if is_binary(data):
            return FileResult(
                diagnostics=[
                    Diagnostic(rel, 0, "binary data, not CMake: skipped", "warning", self.name)
                ]
            )
        text = data.decode("utf-8", errors="replace")
        if rel.endswith(SUFFIX):  # a file include() may run: what it says counts where it runs
            try:
                return FileResult(facts={"stmts": parse_cmake(text)[0]})
            except CMakeSyntaxError as e:  # said in combine, where an include() reaches it
                return FileResult(facts={"syntax_error": (e.line, str(e))})
        try:
            stmts, diags = parse_cmake(text)
        except CMakeSyntaxError as e:
            return FileResult(
                diagnostics=[Diagnostic(rel, e.line, f"CMake syntax: {e}", "error", self.name)],
                facts={"text": text} if rel != ROOT_CMAKE else {},
            )
        if rel == ROOT_CMAKE:  # only option()/set()/add_definitions() matter; say nothing else
            return FileResult(facts={"stmts": stmts})
        diags = [Diagnostic(rel, d.line, d.message, "warning", self.name) for d in diags]
        # the text too: a directory loop matches against a directory's CMakeLists.txt
        return FileResult(diagnostics=diags, facts={"stmts": stmts, "text": text})

    def combine(self, root: Path, results: dict[str, FileResult], ctx: BuildContext) -> StageResult:
        archs = tree_archs(ctx)
        load = Modules(root, results)
        functions: dict[str, dict[str, Function]] = {}
        envs, rows = root_environments(results.get(ROOT_CMAKE), archs, load, functions)
        found = instance_roots(root)
        plans: list[Plan] = []
        diags: list[Diagnostic] = []
        for i, inst_dir in enumerate(found.roots or (CK_INSTANCE_DIR,)):
            file = f"{inst_dir}/CMakeLists.txt"
            res = results.get(file)
            if res is not None and "stmts" in res.facts:
                via = found.chain[i] if i < len(found.chain) else ()
                chain = [(f"{d}/{ROOT_CMAKE}", results.get(f"{d}/{ROOT_CMAKE}")) for d in via]
                steps = [(f, r.facts["stmts"]) for f, r in chain if r and "stmts" in r.facts]
                plans.append(Plan(inst_dir, file, res.facts["stmts"], steps))
            else:
                msg = "no build rules read: file missing or unparsable"
                diags.append(Diagnostic(file, 0, msg, "warning", self.name))
        if not plans:
            return StageResult(rows=rows, diagnostics=diags + _include_damage(load))
        texts = {k: v.facts.get("text", "") for k, v in results.items() if k != ROOT_CMAKE}
        dir_stmts = {k: v.facts.get("stmts") for k, v in results.items() if k != ROOT_CMAKE}
        top = results.get(ROOT_CMAKE)
        top_stmts = top.facts.get("stmts") if top is not None else None
        more, diags2 = evaluate_tree(
            root, plans, texts, dir_stmts, archs, envs, top_stmts, functions, load
        )
        return StageResult(rows=rows + more, diagnostics=diags + diags2 + _include_damage(load))


def _include_damage(load: Modules) -> list[Diagnostic]:
    """An error per file an include() reached that did not parse: its rules are unknown."""
    return [
        Diagnostic(
            rel,
            line,
            f"CMake syntax: {msg} (an include()d file: what it says is unknown)",
            "error",
            CMakeStage.name,
        )
        for rel, (line, msg) in sorted(load.failed.items())
    ]


def root_environments(
    res: FileResult | None,
    archs: tuple[str, ...] = ARCHS,
    load: Modules | None = None,
    functions: dict[str, dict[str, Function]] | None = None,
) -> tuple[dict[str, dict[str, str]], list[Any]]:
    """Run the top-level CMakeLists.txt once per arch: the variables gpu/ inherits, and its -D
    macros; the functions its taken branches define go to `functions[arch]`. With `load`, the
    files it include()s run too, and the tree's directory variables are the tree's path."""
    envs: dict[str, dict[str, str]] = {}
    rows: list[Any] = []
    dirs = {"PROJECT_SOURCE_DIR": load.root, "CMAKE_SOURCE_DIR": load.root} if load else {}
    for arch in archs:
        env = dict(DEFAULT_ENV, SUPPORTED_GPU_TARGETS=arch, GPU_TARGETS=arch, **dirs)
        if res is not None and "stmts" in res.facts:
            it = Interpreter(env, ROOT_CMAKE, load=load)
            try:
                it.run(res.facts["stmts"])
            except (Break, RecursionError):
                pass
            if functions is not None:
                functions[arch] = it.functions
            env = it.env
            env["SUPPORTED_GPU_TARGETS"] = arch  # one target per evaluated build
            for name, (value, line) in sorted(it.defines.items()):
                file = it.define_files.get(name, ROOT_CMAKE)  # an included file's, or the top's
                rows.append(BuildDefineRow(arch=arch, name=name, value=value, file=file, line=line))
        envs[arch] = env
    return envs, rows


def _guard_vars(loop: Foreach | None) -> set[str]:
    """Variables of the directory loop's conditions that decide whether add_subdirectory runs."""
    out: set[str] = set()
    for node in walk(loop.body if loop else []):
        if (
            isinstance(node, Branch)
            and node.cond is not None
            and _contains(node.body, _adds_subdirectory)
        ):
            out |= variables(node.cond)
    return out


def _skipped_row(path: str, arch: str, rule: BuildRuleRow | None) -> FileBuildRow:
    return FileBuildRow(
        file=path,
        arch=arch,
        built=False,
        rule_id=rule.id if rule else None,
        line=rule.line if rule else None,
        condition=rule.condition if rule else "directory not added",
    )


@dataclass
class Plan:
    """One instance root to evaluate."""

    inst_dir: str
    file: str  # its CMakeLists.txt
    stmts: list[Stmt]
    # the CMakeLists.txt CMake runs on the way from the top to it, top first (file, statements)
    via: list[tuple[str, list[Stmt]]] = field(default_factory=list)


def _pick_library(
    plan: Plan, plans: list[Plan], top: list[Stmt] | None
) -> tuple[Function, str] | None:
    """(add_instance_library, the file defining it) for `plan`'s root, as written (not
    evaluated): its own, else the nearest one on the way from the top, else another root's.
    Its build rules are numbered first; which definition a call runs is evaluated per arch."""
    own = _library_function(plan.stmts)
    if own is not None:
        return own, plan.file
    for file, st in [*reversed(plan.via), (ROOT_CMAKE, top or [])]:
        if (fn := _library_function(st)) is not None:
            return fn, file
    for other in plans:
        if (fn := _library_function(other.stmts)) is not None:
            return fn, other.file
    return None


def evaluate_tree(
    root: Path,
    plans: list[Plan],
    dir_texts: dict[str, str],
    dir_stmts: dict[str, list[Stmt] | None],
    archs: tuple[str, ...] = ARCHS,
    envs: dict[str, dict[str, str]] | None = None,
    top: list[Stmt] | None = None,
    functions: dict[str, dict[str, Function]] | None = None,
    load: Modules | None = None,
) -> tuple[list[Any], list[Diagnostic]]:
    """BuildRuleRows + FileBuildRows for every instance source × arch, over the instance roots
    `plans` (`instance_roots`, in its order). `dir_texts`/`dir_stmts` hold each directory's
    CMakeLists.txt (text, statements) by path; `top` is the top CMakeLists.txt's statements;
    `functions` the functions it defines per arch; `load` reads the files include() names."""
    diags: list[Diagnostic] = []
    libs = [_pick_library(p, plans, top) for p in plans]
    out: list[Any] = []
    shapes: list[tuple[Foreach | None, set[str], dict[int, BuildRuleRow]]] = []
    files_of = {id(lib[0]): lib[1] for lib in libs if lib is not None}

    def rules_of(fn: Function) -> dict[int, BuildRuleRow]:
        """A definition's rules, made the first time one is needed (numbered by `book`)."""
        if id(fn) not in files_of and load is not None:  # met through include(): its file
            files_of.update(load.defined_in(LIBRARY_FUNCTION))
        return _rule_rows(files_of.get(id(fn), ""), [fn], None, set())

    book = Rules(out, {}, rules_of)
    for plan in plans:
        loop = _find_dir_loop(plan.stmts)
        guard_vars = _guard_vars(loop)
        own = _library_functions(plan.stmts)
        rules = _rule_rows(plan.file, own, loop, guard_vars)
        book.number(rules)
        book.of_lib.update((id(fn), rules) for fn in own)
        files_of.update((id(fn), plan.file) for fn in own)
        shapes.append((loop, guard_vars, rules))
    for lib in libs:  # a function defined on the way to a root: its rules once, after those
        if lib is not None:
            book.of(lib[0])
    by_arch: dict[str, Function] = {}  # arch -> the function the roots so far defined
    for plan, (loop, guard_vars, rules) in zip(plans, shapes, strict=True):
        out.extend(
            _evaluate_root(
                root,
                plan,
                loop,
                guard_vars,
                rules,
                book,
                dir_texts,
                dir_stmts,
                archs,
                envs or {},
                functions or {},
                by_arch,
                load,
            )
        )
    if not by_arch:
        msg = "no add_instance_library function found"
        diags.append(Diagnostic(plans[0].file, 0, msg, "warning", "ck.cmake"))
    return out, diags


def chain_env(
    env: dict[str, str],
    via: list[tuple[str, list[Stmt]]],
    functions: dict[str, Function] | None = None,
    load: Modules | None = None,
) -> tuple[dict[str, str], LibraryArchs]:
    """What a root inherits from the files on the way to it: `env` (the top's) after they ran,
    and the per-library arch lists their taken branches give (an aggregate library may be made
    there, after the add_subdirectory that defines its objects). The functions their taken
    branches define are added to `functions`."""
    targets = LibraryArchs()
    for file, st in via:
        it = Recorder(env, file, functions, load)
        try:
            it.run(st)
        except (Break, RecursionError):
            pass
        if "CMAKE_CURRENT_SOURCE_DIR" not in env:
            it.env.pop("CMAKE_CURRENT_SOURCE_DIR", None)
        env = it.env
        targets.merge(it.targets)
    return env, targets


def _evaluate_root(
    root: Path,
    plan: Plan,
    loop: Foreach | None,
    guard_vars: set[str],
    rules: dict[int, BuildRuleRow],
    book: Rules,
    dir_texts: dict[str, str],
    dir_stmts: dict[str, list[Stmt] | None],
    archs: tuple[str, ...],
    envs: dict[str, dict[str, str]],
    top_functions: dict[str, dict[str, Function]],
    by_arch: dict[str, Function],
    load: Modules | None,
) -> list[Any]:
    """The rows of one instance library root; new rules are numbered by `book`. The root's
    CMakeLists.txt is run whole per arch (`cmake_roots.run_root`): which directories it adds,
    the per-library arch lists its taken branches give, and the functions defined when it adds
    each directory. Each add_instance_library call runs the definition in effect where it is
    made (else the one an earlier root defined for the arch), once per call."""
    out: list[Any] = []
    inst_dir, stmts = plan.inst_dir, plan.stmts
    base = Path(root) / inst_dir
    # dir -> (source, path from the CK root, file name, path from the dir, normalised)
    by_dir: dict[str, list[tuple[str, str, str, str]]] = {}
    for s in instance_sources(base):
        if "/" in s:
            by_dir.setdefault(s.split("/", 1)[0], []).append(
                (s, f"{inst_dir}/{s}", s.rsplit("/", 1)[-1], posixpath.normpath(s.split("/", 1)[1]))
            )

    def loop_rule(br: Branch | None) -> BuildRuleRow | None:
        return rules.get(br.line) if br is not None else None

    def dir_cmake(d: str) -> str:
        return f"{inst_dir}/{d}/CMakeLists.txt"

    made: dict[tuple[str, int], BuildRuleRow] = {}

    def new_rule(
        file: str, line: int, condition: str, action: str, targets: list, message: str = ""
    ) -> BuildRuleRow:
        if (file, line) not in made:
            made[(file, line)] = BuildRuleRow(
                id=book.next_id(),
                file=file,
                line=line,
                condition=condition,
                action=action,
                targets=targets,
                message=message,
            )
            out.append(made[(file, line)])
        return made[(file, line)]

    adds_dirs = _contains(stmts, _adds_subdirectory)
    for arch in archs:
        env = envs.get(arch) or dict(DEFAULT_ENV, SUPPORTED_GPU_TARGETS=arch, GPU_TARGETS=arch)
        functions = dict(top_functions.get(arch, {}))
        env, via_targets = chain_env(env, plan.via, functions, load)
        ran = run_root(
            stmts, env, root, inst_dir, dir_texts, loop, guard_vars, adds_dirs, functions, load
        )
        if LIBRARY_FUNCTION in ran.functions:
            by_arch.setdefault(arch, ran.functions[LIBRARY_FUNCTION])
        # (file name, id of the scope, function) -> verdict of a source no call names (a .in)
        verdicts: dict[tuple[str, int, int], tuple[bool, BuildRuleRow | None]] = {}
        for d, files in sorted(by_dir.items()):
            if ran.added is not None and d not in ran.added:
                rule = loop_rule(ran.guards.get(d))
                out.extend(_skipped_row(path, arch, rule) for _, path, _, _ in files)
                continue
            scope = ran.scopes.get(d, env)  # the variables the directory sees
            fscope = ran.function_scopes.get(d, ran.functions)  # and the functions
            st = dir_stmts.get(dir_cmake(d))
            got = read_dir(st, scope, dir_cmake(d), fscope, load) if st else None
            targets = LibraryArchs()
            if got is not None:
                targets.merge(got.targets)
            targets.merge(ran.targets)
            targets.merge(via_targets)
            lib = fscope.get(LIBRARY_FUNCTION) or by_arch.get(arch)
            by_call = call_verdicts(got, arch, book, by_arch.get(arch), GPU_CMAKE)
            for f, path, name, norm in files:
                rel = f.split("/", 1)[1]
                # a CMake template (.in) is configured into a source of another name: kept
                if got is not None and not f.endswith(".in") and rel not in got.library_of:
                    cond = "source not named by any add_instance_library call"
                    rule = new_rule(dir_cmake(d), got.first_line, cond, "not_listed", [])
                    out.append(_skipped_row(path, arch, rule))
                    continue
                hit = targets.of(got.library_of.get(rel, "")) if got is not None else None
                if hit is not None and arch not in hit[1].archs:
                    al = hit[1]
                    msg = f"{hit[0]} is compiled for {';'.join(al.archs)} only"
                    rule = new_rule(al.file, al.line, al.text, "library_targets", [*al.archs], msg)
                    out.append(_skipped_row(path, arch, rule))
                    continue
                verdict = by_call.get(norm)
                if verdict is None:
                    key = (name, id(scope), id(lib))
                    if key not in verdicts:
                        verdicts[key] = (
                            _run_library(lib, scope, f, arch, rule_of(book, lib))
                            if lib
                            else (True, None)
                        )
                    verdict = verdicts[key]
                built, why = verdict
                out.append(
                    FileBuildRow(
                        file=path,
                        arch=arch,
                        built=built,
                        rule_id=why.id if why else None,
                        line=why.line if why else None,
                        condition=why.condition if why else None,
                    )
                )
    return out


def instance_sources(base: Path) -> list[str]:
    """The `.cpp`/`.in` files under gpu/ (`base`), '/'-separated and relative to it, in the order
    of list_files(root, CK_INSTANCE_DIR, SOURCE_SUFFIXES), without a Path per file (the listing
    itself is the build's one listing of gpu/: `tree_files`)."""
    return [rel for rel in tree_files(str(base)) if rel.endswith(SOURCE_SUFFIXES)]


def _run_library(
    lib: Function, env: dict[str, str], source: str, arch: str, rule_for: RuleFor
) -> tuple[bool, BuildRuleRow | None]:
    """add_instance_library(device_instance <source>) for one arch, for a source no call names
    (a `.in` template, or a directory without calls): (built, the rule that removed the source
    or the arch)."""
    source = source.split("/", 1)[1] if "/" in source else source
    return run_call(lib, env, ["device_instance", source], arch, rule_for, GPU_CMAKE)[source]


STAGE = CMakeStage()

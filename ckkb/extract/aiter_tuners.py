"""Stage `aiter.tuners`: tuner facts and runtime config facts (read by `aiter_tuner_reader`) ->
`aiter_tuner_options`, `aiter_runtime_configs`.

Also the paths the aiter stages share (`package_dir`, `stage_paths`, `display_rel`) and the
config files a runtime config reads (`model_config_files`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckkb.extract.aiter_tuner_choice import read_choice
from ckkb.extract.aiter_tuner_reader import (
    STAGE_NAME,
    CoreFacts,
    RuntimeConfig,
    TunerFile,
    TunerOption,
    read_core,
    read_tuner,
)
from ckkb.extract.files import list_files
from ckkb.kb.schema.aiter import AiterRuntimeConfigRow, AiterTunerOptionRow
from ckkb.kb.stages import BuildContext, FileResult, StageResult, per_build


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
    """Paths relative to root (os.path.relpath), so files of the package dir outside root still
    read."""
    return [Path(os.path.relpath(p, Path(root).resolve())) for p in paths]


TUNER_DIRS = (
    "csrc",
    "hsa",
    "gradlib",
)  # per-op tuners live under csrc/ck_*/; the fmoe and bf16 (gradlib) ones elsewhere


def is_tuner_file(p: Path) -> bool:
    return p.name == "tune.py" or p.name.endswith(("_tune.py", "_tuner.py"))


def tuner_name(rel: str) -> str:
    """csrc/ck_gemm_a8w8/gemm_a8w8_tune.py -> gemm_a8w8_tune; elsewhere the path without .py
    (hsa/gfx942/fmoe_2stages/tune)."""
    p = Path(rel)
    return p.stem if p.parts[0] == "csrc" else p.with_suffix("").as_posix()


class TunersStage:
    name = STAGE_NAME
    worker_group = "libcst"  # read in one worker: libcst is imported once per build
    version = "8"
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
        return stage_paths(Path(root), out) + other_config_files(Path(root))

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult:
        if not rel.endswith(".py"):
            return FileResult()  # other_config_files: hashed for their presence, not read
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
        tf.args_read = args_read(data)
        if len(tf.kernel_imports) > 1 and b"def getKernelName" in data:
            tf.kernel_choice, _ = read_choice(data.decode("utf-8", "replace"), tf.kernel_imports)
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
        """(option, effective default, file, line) for a tuner (base options + its own + its
        ARG_DEFAULTS)."""
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


def args_read(data: bytes) -> list[str]:
    """Names a module reads as `args.NAME` (Python's tokenizer: comments and strings are not
    code). [] when the file does not tokenize."""
    import io
    import tokenize

    out: set[str] = set()
    try:
        toks = [
            t
            for t in tokenize.tokenize(io.BytesIO(data).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, SyntaxError):
        return []
    for a, dot, name in zip(toks, toks[1:], toks[2:], strict=False):
        if a.string == "args" and dot.string == "." and name.type == tokenize.NAME:
            out.add(name.string)
    return sorted(out)


def option_rows(facts: TreeFacts) -> list[Any]:
    rows: list[Any] = []
    groups: list[tuple[str, TunerFile | None]] = [("base", None)] if facts.base else []
    groups += [(tuner_name(t.rel), t) for t in facts.tuners]
    for name, t in groups:
        reads = set(facts.base.args_read if facts.base else [])
        reads |= set(t.args_read if t else [])
        for o, d, f, ln in facts.effective_options(t):
            dest = o.dest or o.option.lstrip("-").replace("-", "_")
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
                    read=dest in reads,
                )
            )
    return rows


def untuned_name(tuned_name: str) -> str:
    # aiter 0.1.7 core.py update_config_files: names ending in "tuned" go through
    # re.sub(r"(?:_)?tuned$", r"\1untuned", ...) (which would raise: group 1 does not exist); every
    # shipped name ("a8w8_tuned_gemm", "tuned_fmoe", ...) takes the else branch:
    # .replace("tuned", "untuned").
    return tuned_name.replace("tuned", "untuned")


# Columns a version's update_config_files appends to the untuned header (evidence key -> column).
KEY_EXTRAS = (("key_cu_num", "cu_num"), ("key_gfx", "gfx"), ("key__tag", "_tag"))


def merge_key_extras(evidence: dict[str, int], header: list[str]) -> list[str]:
    """cu_num, gfx, _tag where core.py appends them to the untuned columns (aiter 2026: gfx and
    _tag only when the merged frame has them; the audit filters by the file's columns)."""
    return [c for e, c in KEY_EXTRAS if e in evidence and c not in header]


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


def module_file(
    root: Path, tuner_rel: str, module: str, sys_paths: list[str] | None = None
) -> str | None:
    """Where `from MODULE import ...` in a tuner finds its module, repo-style: the tuner's own
    directory (it runs as a script), the directories it puts on sys.path, csrc/
    (`sys.path.insert(0, Path(__file__).parent.parent)`, AITER_CSRC_DIR) and the tree root
    (`from csrc.x import`); None when no such file is one of the build's modules
    (`is_python_input`: a file elsewhere is not looked for)."""
    sub = module.replace(".", "/") + ".py"
    extra = [Path(d) for d in sys_paths or []]
    for base in (Path(tuner_rel).parent, *extra, Path("csrc"), Path(".")):
        if is_python_input(root, (base / sub).as_posix()):
            return (base / sub).as_posix()
    return None


def kernel_list_of(
    root: Path, rc: RuntimeConfig, tuner: TunerFile | None
) -> tuple[str | None, str | None, str | None]:
    """(file, list, None) when the op's tuner imports exactly one kernel list and its file
    exists; else (None, None, why not): the audit reports the op, never skips it silently."""
    if tuner is None:
        return None, None, f"no tuner in this tree imports {rc.env_var}"
    imports = tuner.kernel_imports or ([tuner.kernel_import] if tuner.kernel_import else [])
    if not imports:
        return None, None, f"{tuner.rel} imports no kernel list"
    found = [(module_file(root, tuner.rel, m, tuner.sys_paths), m, n) for m, n in imports]
    missing = [f"{m}.{n}" for f, m, n in found if f is None]
    if missing:
        return None, None, f"{tuner.rel} imports {', '.join(missing)}: module file not found"
    if len(found) > 1:
        names = ", ".join(f"{f}:{n}" for f, _, n in found)
        return (
            None,
            None,
            (
                f"{tuner.rel} imports {len(found)} kernel lists ({names}) and picks one per row at "
                "run time (each row's: aiter_row_kernels)"
            ),
        )
    return found[0][0], found[0][2], None


def kernel_choice(root: Path, tuner: TunerFile | None) -> dict[str, Any]:
    """The tuner's per-row choice with each case's module found as the tuner finds it
    (module_file); a case whose module has no file says so."""
    if tuner is None or not tuner.kernel_choice:
        return {}
    cases = []
    for c in tuner.kernel_choice["cases"]:
        c = dict(c)
        if "module" in c:
            m = c.pop("module")
            f = module_file(root, tuner.rel, m, tuner.sys_paths)
            if f is None:
                c["error"] = f"{tuner.rel} imports {m}.{c.pop('name')}: module file not found"
            else:
                c["file"], c["list"] = f, c.pop("name")
        cases.append(c)
    return {**tuner.kernel_choice, "tuner": tuner.rel, "cases": cases}


def runtime_rows(facts: TreeFacts) -> list[Any]:
    rows: list[Any] = []
    if facts.core is None:
        return rows
    pkg = package_dir(facts.root)
    rule = facts.core.rule
    for rc in facts.core.configs:
        default_exists = False
        if pkg is not None and rc.default_path and rc.default_path.startswith("aiter/"):
            default_exists = is_config_input(facts.root, pkg / rc.default_path[len("aiter/") :])
        untuned_path = None
        key: list[str] = []
        if rc.tuned_name and pkg is not None:
            up = pkg / "configs" / f"{untuned_name(rc.tuned_name)}.csv"
            untuned_path = repo_rel(pkg, up)
            key = csv_header(up)
            if key:
                key += merge_key_extras(rule.evidence, key)
        models = (
            [
                repo_rel(pkg, p)
                for p in model_config_files(pkg, rc.tuned_name)
                if is_config_input(facts.root, p)  # (a file no stage lists is not looked at)
            ]
            if pkg
            else []
        )
        tuner = facts.tuner_for(rc)
        klist_file, klist, note = kernel_list_of(facts.root, rc, tuner)
        choice = kernel_choice(facts.root, tuner)
        if choice:
            note = None  # chosen per row (rules_kernels names rows whose list is not resolved)
        inner = [tuple(x) for x in (tuner and tuner.kernel_choice or {}).get("inner_imports", [])]
        cands = (
            [
                [f, n]
                for m, n in [*tuner.kernel_imports, *inner]
                if (f := module_file(facts.root, tuner.rel, m, tuner.sys_paths)) is not None
            ]
            if tuner is not None
            else []
        )
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
                kernel_list_note=note,
                kernel_list_candidates=cands if note or choice else [],
                kernel_list_choice=choice,
                file=facts.core.rel,
                line=rc.line,
            )
        )
    return rows


STAGE = TunersStage()


# -- files the combines may look at beyond their parsed inputs: every file whose presence
# changes an answer is an input the build hashes and fingerprints, so an incremental build never
# keeps a stale answer. `python_inputs`: every module a tuner's import or a statically run
# module may land on (the package's and the tuner directories' `.py`: the audit stage's files);
# a tuner's `from M import LIST` is resolved among them (`is_python_input`), never by asking
# the file system, so a module elsewhere (the tree root) is never found, whether or not it
# exists. `other_config_files`: files whose presence the tuners stage checks that the configs
# stage does not list (CSVs of the package outside configs/, where a default path may point;
# what configs/model_configs/ holds that is not a CSV but is named like a tuned config, which
# core.py's glob takes): the tuners stage's own files (hashed, nothing extracted). A model
# config no stage lists is left out, never looked at.


def audit_inputs(root: Path) -> list[Path]:
    """The package's and the tuner directories' `.py` files, and csrc/include's `.h` (the C++
    enums the MoE check reads), relative to root (the wheel's package files as `../aiter/...`)."""
    root = Path(root)
    out: list[Path] = []
    pkg = package_dir(root)
    if pkg is not None:
        out += list_files(pkg.parent, pkg.name, (".py",))
    for sub in TUNER_DIRS:
        out += list_files(root, sub, (".py",))
    inc = root / "csrc" / "include"
    if inc.is_dir():
        out += sorted(p for p in inc.iterdir() if p.suffix == ".h" and p.is_file())
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return stage_paths(root, unique)


@per_build  # the tuners stage asks it per import; the audit stage lists its files by it
def python_inputs(root: Path) -> frozenset[str]:
    """audit_inputs as normalised root-relative paths."""
    return frozenset(os.path.normpath(p) for p in audit_inputs(root))


def is_python_input(root: Path, rel: str) -> bool:
    return os.path.normpath(rel) in python_inputs(Path(root))


def other_config_files(root: Path) -> list[Path]:
    """See the module docstring: relative to root, sorted."""
    pkg = package_dir(Path(root))
    if pkg is None:
        return []
    configs = os.path.join(pkg, "configs")
    models = os.path.join(configs, "model_configs")
    out = [
        p
        for p in list_files(pkg.parent, pkg.name, (".csv",))
        if os.path.dirname(p) not in (configs, models)
    ]
    if os.path.isdir(models):  # core.py's glob is *{tuned name}*: names holding "tuned"
        out += sorted(
            Path(models, n)
            for n in os.listdir(models)
            if "tuned" in n and not n.endswith(".csv") and os.path.isfile(os.path.join(models, n))
        )
    return stage_paths(Path(root), out)


def is_config_input(root: Path, path: Path) -> bool:
    """Whether a file of the package is one the build lists (a CSV of configs/ or of
    model_configs/, the configs stage's, or one of other_config_files)."""
    return os.path.normpath(os.path.abspath(path)) in _config_inputs(Path(root))


def config_paths(pkg: Path | None) -> list[Path]:
    """The configs stage's files: the CSVs of the package's configs/ and model_configs/."""
    if pkg is None:
        return []
    out = []
    for d in (pkg / "configs", pkg / "configs" / "model_configs"):
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.suffix == ".csv" and p.is_file())
    return out


@per_build
def _config_inputs(root: Path) -> frozenset[str]:
    files = [*config_paths(package_dir(root)), *(root / p for p in other_config_files(root))]
    return frozenset(os.path.normpath(os.path.abspath(p)) for p in files)

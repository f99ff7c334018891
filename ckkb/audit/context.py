"""What an audit reads: kernel lists, runtime configs and tuner options (as knowledge-base rows, so
the build and `ckkb audit` run the same rules), the config tables, --arch, --env, and optional
knowledge-base indexes (CK availability, measured baselines).

`load_tree` extracts an aiter tree in-process, uncached (about a second: the build's content-hash
cache is the only cache); the build's audit stage (ckkb.audit.stage) takes the rows it made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckkb.diagnostics import Diagnostic
from ckkb.extract import aiter_configs, aiter_kernels, aiter_tuners
from ckkb.extract.aiter_configs import ConfigTable, op_of_file, read_csv
from ckkb.extract.aiter_tuners import (
    TreeFacts,
    model_config_files,
    option_rows,
    package_dir,
    runtime_rows,
)
from ckkb.kb.schema.aiter import (
    AiterKernelListRow,
    AiterKernelRow,
    AiterRuntimeConfigRow,
    AiterTunerOptionRow,
)
from ckkb.kb.stages import FileResult


@dataclass
class EnvFile:
    path: str
    vars: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def read_env_file(path: str | Path) -> EnvFile:
    """Shell / .env assignments (`export X=...`, `X=...`); quotes stripped; other lines ignored."""
    from ckkb.errors import CkkbError

    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise CkkbError(f"cannot read env file {path}: {e.strerror or e}") from None
    env = EnvFile(str(path))
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0] if not raw.strip().startswith("#") else ""
        m = _ENV_LINE.match(line)
        if not m:
            continue
        val = m.group(2)
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"":
            val = val[1:-1]
        env.vars[m.group(1)] = val
        env.lines[m.group(1)] = i
    return env


@dataclass
class AuditContext:
    root: Path | None  # aiter tree root (meta dir)
    pkg: Path | None  # aiter package dir
    kernels: list[AiterKernelRow]
    lists: list[AiterKernelListRow]
    runtime: list[AiterRuntimeConfigRow]
    options: list[AiterTunerOptionRow]
    tables: list[ConfigTable] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)  # table rel -> file on disk
    ops: dict[str, str | None] = field(default_factory=dict)  # table rel -> op
    defaults: bool = True  # auditing the tree's own config set (not CSVs given by the user)
    arch: str | None = None
    env: EnvFile | None = None
    ck: Any = None  # ckkb.audit.rules_kb.CkIndex
    baselines: Any = None  # ckkb.audit.rules_kb.BaselineIndex
    kb_reason: str | None = None  # why KB rules are skipped
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _by_list: dict[tuple[str, str | None], dict[int, AiterKernelRow]] | None = field(
        default=None, repr=False
    )

    # -------------------------------------------------------------- lookups
    def runtime_for(self, op: str | None) -> AiterRuntimeConfigRow | None:
        for r in self.runtime:
            if r.op == op:
                return r
        return None

    def kernel_list(self, op: str | None) -> dict[int, AiterKernelRow] | None:
        rc = self.runtime_for(op)
        if rc is None or not rc.kernel_list_file:
            return None
        return self._kernels_by_list().get((rc.kernel_list_file, rc.kernel_list)) or None

    def _kernels_by_list(self) -> dict[tuple[str, str | None], dict[int, AiterKernelRow]]:
        """(file, list name) -> kernel id -> kernel, of the lists' live entries: built once per
        context (a rule asks per tuned row: 46k rows would scan every kernel each time)."""
        if self._by_list is None:
            self._by_list = {}
            for k in self.kernels:
                if not k.shadowed and k.kernel_id is not None:
                    self._by_list.setdefault((k.file, k.list_name), {})[k.kernel_id] = k
        return self._by_list

    def err_ratio_threshold(self, op: str | None = None) -> float:
        """The --errRatio default of the tuner that writes
        op's configs (else the base tuner's, else 0.05).

        Justification: a tuner rejects candidates whose error ratio is above its own --errRatio, so
        a shipped row above it was written with a loosened gate or edited by hand; and even the base
        default (0.05) already passes a kernel that moves ~4% of output elements (seed §3). The fmoe
        tuners default to 0.5.
        """
        from ckkb.extract.aiter_tuners import tuner_name

        rc = self.runtime_for(op)
        wanted = [tuner_name(rc.tuner_file)] if rc is not None and rc.tuner_file else []
        for tuner in [*wanted, "base"]:
            for o in self.options:
                if o.tuner == tuner and o.option == "--errRatio":
                    v = json.loads(o.default) if o.default else None
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        return float(v)
        return 0.05

    def option_read(self, op: str | None, option: str) -> bool:
        """Whether the tuner that writes op's configs reads `option` (args.<dest>) at all: an
        option it never reads (aiter's MoE tuners inherit -k/--splitK and search ksplit on
        their own) says nothing about what it searched. False where no tuner is known."""
        from ckkb.extract.aiter_tuners import tuner_name

        rc = self.runtime_for(op)
        if rc is None or not rc.tuner_file:
            return False
        name = tuner_name(rc.tuner_file)
        return any(o.tuner == name and o.option == option and o.read for o in self.options)

    def op_of_table(self, rel: str, columns: list[str]) -> str | None:
        return op_of_file(rel, self.runtime)


def assign_ops(ctx: AuditContext) -> None:
    for t in ctx.tables:
        ctx.ops[t.rel] = ctx.op_of_table(t.rel, t.columns)


# ---------------------------------------------------------------- loading a tree in-process


def load_tree(tree: Any) -> AuditContext:
    """Extract an AiterTree (sources.aiter_tree) in-process:
    kernel lists, tuners, runtime configs, default CSVs."""
    root = Path(tree.root)
    diags: list[Diagnostic] = []

    def run(stage: Any) -> dict[str, FileResult]:
        out = {}
        for p in stage.files(root):
            rel = Path(p).as_posix()
            try:
                out[rel] = stage.extract(root, rel, (root / rel).read_bytes())
            except OSError as e:
                diags.append(
                    Diagnostic(
                        aiter_tuners.display_rel(rel),
                        0,
                        f"cannot read: {e.strerror or e}",
                        "error",
                        stage.name,
                    )
                )
                continue
            diags.extend(out[rel].diagnostics)
        return out

    kres = run(aiter_kernels.STAGE)
    kfiles = [r.facts["kfile"] for _, r in sorted(kres.items()) if "kfile" in r.facts]
    krows = aiter_kernels.kernel_rows(kfiles)
    facts = TreeFacts.from_results(root, run(aiter_tuners.STAGE))
    ctx = AuditContext(
        root=root,
        pkg=package_dir(root),
        kernels=[r for r in krows if isinstance(r, AiterKernelRow)],
        lists=[r for r in krows if isinstance(r, AiterKernelListRow)],
        runtime=runtime_rows(facts),
        options=option_rows(facts),
        diagnostics=diags,
    )
    return ctx


def _rows_current(db: Any) -> bool:
    """Whether the KB's aiter tables have every column this ckkb's rows have."""
    import dataclasses

    for table, cls in (
        ("aiter_kernels", AiterKernelRow),
        ("aiter_kernel_lists", AiterKernelListRow),
        ("aiter_runtime_configs", AiterRuntimeConfigRow),
        ("aiter_tuner_options", AiterTunerOptionRow),
    ):
        if table not in db.table_names():
            return False
        have = set(db[table].columns_dict)
        if any(f.name not in have for f in dataclasses.fields(cls)):
            return False
    return True


def load_from_kb(db: Any, tree: Any) -> AuditContext | None:
    """The aiter rows of a knowledge base whose build read `tree` (None when it read another
    tree, or none): the rows the build already has, so nothing is parsed again."""
    from ckkb.kb.rows import stored_rows
    from ckkb.queries import lookup

    root = Path(tree.root)
    built = list(db.query(lookup("tree_path"), {"kind": "aiter"}))
    if not built or built[0]["path"] != str(root):
        return None
    if not _rows_current(db):
        return None  # written by an older ckkb: extract the tree now rather than trust them
    diags = [
        Diagnostic(r["file"], r["line"], r["message"], r["severity"], r["stage"])
        for r in db.query(lookup("aiter_diagnostics"))
    ]
    return AuditContext(
        root=root,
        pkg=package_dir(root),
        kernels=stored_rows(db, "aiter_kernels"),
        lists=stored_rows(db, "aiter_kernel_lists"),
        runtime=stored_rows(db, "aiter_runtime_configs"),
        options=stored_rows(db, "aiter_tuner_options"),
        diagnostics=diags,
    )


def built_aiter_tree(db_path: str | Path, tree: str | None = None) -> tuple[str | None, str]:
    """The aiter tree a knowledge base was built from (its tree `tree`, else its first aiter
    tree), and a line saying so: `ckkb audit --db X` audits that tree, not whatever aiter is
    installed."""
    from ckkb.errors import CkkbError
    from ckkb.kb import db as kbdb
    from ckkb.queries import lookup

    db = kbdb.open_db(db_path, readonly=True, tree=tree)
    try:
        built = list(db.query(lookup("tree_path"), {"kind": "aiter"}))
    finally:
        db.close()
    root = built[0]["path"] if built else None
    if root:
        from ckkb import sources

        try:
            wheel = str(sources.default_aiter_tree().root)
        except CkkbError:
            wheel = None
        if root == wheel:
            return None, f"the installed amd-aiter wheel, which {db_path} was built from"
    if not root:
        return None, f"{db_path} was built without an aiter tree: auditing the installed wheel"
    if not Path(root).is_dir():
        raise CkkbError(
            f"{db_path} was built from the aiter tree {root}, which no longer exists",
            hint="pass --aiter PATH to audit another tree",
        )
    return str(root), f"the aiter tree {db_path} was built from"


def load(tree: Any, db_path: str | Path | None) -> tuple[AuditContext, str]:
    """The tree's kernel lists, runtime configs and tuner options, and where they came from: the
    knowledge base at db_path when its build read this tree, else extracted now (uncached)."""
    from ckkb.errors import CkkbError
    from ckkb.kb import db as kbdb
    from ckkb.kb import trees as kb_trees

    if db_path is not None and Path(db_path).is_file():
        try:
            db = kbdb.open_db(db_path, readonly=True)
            held = [
                t
                for t in kb_trees.list_trees(db.conn)
                if t.kind == "aiter" and t.path == str(tree.root)
            ]
            if held:  # the database holds this tree (maybe not as its first): read that one
                kb_trees.scope(db.conn, held[0].name)
        except CkkbError:
            db = None
        if db is not None:
            try:
                ctx = load_from_kb(db, tree)
            finally:
                db.close()
            if ctx is not None:
                return ctx, f"knowledge base {db_path}"
    return load_tree(tree), "extracted from the tree"


def add_default_tables(ctx: AuditContext) -> None:
    """The tree's own config set (aiter/configs, aiter/configs/model_configs)."""
    for p in aiter_configs.config_paths(ctx.pkg):
        rel = aiter_tuners.repo_rel(ctx.pkg, p) if ctx.pkg else p.as_posix()
        add_table(ctx, rel, p)
    ctx.defaults = True


def add_env_tables(ctx: AuditContext) -> None:
    """The CSVs the --env file points the runtime at (its AITER_CONFIG_<OP> variables), audited
    like the others. A relative path is taken from the current folder, else from the env file's
    folder; a missing one is the merge-file-missing finding's business."""
    if ctx.env is None:
        return
    base = Path(ctx.env.path).parent
    for rc in ctx.runtime:
        for name in (p for p in ctx.env.vars.get(rc.env_var, "").split(":") if p):
            path = resolve(ctx, name)
            if not path.is_absolute() and not path.exists() and (base / path).exists():
                path = base / path
            if name not in ctx.paths and path.is_file():
                add_table(ctx, name, path)
            if name in ctx.paths:
                ctx.ops[name] = rc.op  # the variable names the op, whatever the file's name


def add_table(ctx: AuditContext, rel: str, path: Path) -> ConfigTable:
    try:
        data = path.read_bytes()
        t = read_csv(rel, data)
    except IsADirectoryError:
        t = ConfigTable(rel, error="is a directory, not a CSV file", error_line=0)
    except OSError as e:
        t = ConfigTable(rel, error=f"cannot read: {e.strerror or e}", error_line=0)
    ctx.tables.append(t)
    ctx.paths[rel] = path
    ctx.ops[rel] = ctx.op_of_table(rel, t.columns)
    return t


def merged_set(ctx: AuditContext, rc: AiterRuntimeConfigRow) -> tuple[list[str], bool]:
    """Files the runtime loads for an op: (repo-style or given paths, env_set).

    With AITER_CONFIG_<OP> unset: the default path plus model_configs/*<tuned_name>* not "untuned"
    (core.py get_config_file). With it set (from --env): only those ':'-separated files.
    """
    if ctx.env is not None and rc.env_var in ctx.env.vars and ctx.env.vars[rc.env_var]:
        return [p for p in ctx.env.vars[rc.env_var].split(":") if p], True
    files = [rc.default_path] if rc.default_path else []
    if ctx.pkg is not None and rc.tuned_name:
        files += [
            aiter_tuners.repo_rel(ctx.pkg, p) for p in model_config_files(ctx.pkg, rc.tuned_name)
        ]
    else:
        files += list(rc.model_configs)
    return files, False


def merged_elsewhere(ctx: AuditContext, rc: AiterRuntimeConfigRow, rel: str | None) -> list[str]:
    """Files of rc's run-time merged set (core.py get_config_file) other than `rel` that exist
    and hold rows: with any, the op runs tuned even when `rel` is missing or empty."""
    if not ctx.defaults:
        return []
    files, _ = merged_set(ctx, rc)
    if len(files) < 2:
        return []
    rows = {t.rel: len(t.rows) for t in ctx.tables}
    return [
        f for f in files if f != rel and (rows[f] > 0 if f in rows else resolve(ctx, f).is_file())
    ]


def resolve(ctx: AuditContext, path: str) -> Path:
    """A repo-style path (aiter/...) or a user path -> file on disk."""
    if path in ctx.paths:
        return ctx.paths[path]
    if path.startswith("aiter/") and ctx.pkg is not None:
        return ctx.pkg / path[len("aiter/") :]
    return Path(path)

"""What the aiter tuner readers (ckkb.extract.aiter_tuner_reader) find: the merge rule of
aiter/jit/core.py's update_config_files (MERGE_RULES), its runtime configs, and each tuner's
options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Merge rules of aiter's update_config_files, by the code that implements them.
MERGE_RULES = {
    "keep-fastest": (
        "rows of all files are concatenated, sorted by `us` and de-duplicated on the columns of "
        "the op's untuned CSV keeping the first (fastest) row, silently; all files must have "
        "identical column lists (assert). "
        "A single file is used as is, without de-duplication."
    ),
    "reject-duplicates": (
        "rows of all files are concatenated; duplicate keys keep the lowest `us` and then the "
        "runtime refuses to "
        "start (raises); all files must have identical column lists."
    ),
    "reject-duplicates-fill": (
        "files that do not exist are skipped; the others are concatenated, columns missing from "
        "a file are added (gfx inferred from cu_num, others 0); rows are keyed on the op's "
        "untuned CSV columns plus cu_num, gfx and _tag where present; any duplicate key makes "
        "the runtime rewrite the files keeping the lowest `us` and refuse to start (raises)."
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
    # every kernel list or list getter the tuner imports, (module, name), in source order
    kernel_imports: list[tuple[str, str]] = field(default_factory=list)
    # directories added by `sys.path.insert(0, f"{AITER_CSRC_DIR}/x/")`, repo-style
    sys_paths: list[str] = field(default_factory=list)
    # getKernelName run per selector value (ckkb.extract.aiter_tuner_choice), None if not needed
    kernel_choice: dict[str, Any] | None = None
    # attributes the module reads off `args` (args.splitK): an option no code reads does nothing
    args_read: list[str] = field(default_factory=list)

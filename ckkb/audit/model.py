"""Findings and the rule catalogue of `ckkb audit`
(one entry per rule id, with its default severity)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("note", "warning", "error")  # ascending; SARIF levels use the same words


def severity_rank(s: str) -> int:
    return SEVERITIES.index(s) if s in SEVERITIES else 0


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    family: str
    summary: str


@dataclass
class Finding:
    rule: str
    severity: str
    file: str
    line: int
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    op: str | None = None

    def sort_key(self) -> tuple:
        return (self.file, self.line, -severity_rank(self.severity), self.rule)


_RULES = [
    # kernels: rows against kernel lists, and the kernel lists themselves
    Rule("kernel-id-unknown", "error", "kernels", "kernelId is not an id of the op's kernel list"),
    Rule(
        "kernel-name-stale",
        "error",
        "kernels",
        "kernelName differs from the name the kernel list gives that kernelId",
    ),
    Rule(
        "kernel-id-duplicate",
        "error",
        "kernels",
        "an id written twice in one kernel-list dict literal (Python keeps the last silently)",
    ),
    Rule(
        "kernel-id-name-mismatch",
        "error",
        "kernels",
        "kernelId and kernelName name different kernels of the list the row's tuner picks "
        "(or of the lists it imports)",
    ),
    Rule(
        "kernel-list-unresolved",
        "error",
        "kernels",
        "an op's CK rows cannot be checked: its kernel list is not resolved (op and reason)",
    ),
    Rule(
        "kernel-list-unsupported",
        "warning",
        "kernels",
        "a kernel-list construct the static reader does not evaluate (reported, not guessed)",
    ),
    Rule(
        "kernel-duplicate",
        "warning",
        "kernels",
        "identical kernels under different ids in one kernel list (raced twice)",
    ),
    # keys: duplicates and the runtime's merge
    Rule("duplicate-key", "error", "keys", "two rows of one file with the same lookup key"),
    Rule(
        "merge-collision",
        "warning",
        "keys",
        "rows of different files the runtime merges for one op share a key; one loses",
    ),
    Rule(
        "merge-drops-rows",
        "warning",
        "keys",
        "the merge key omits cu_num/gfx: rows of other parts for the same shape are dropped",
    ),
    Rule(
        "merge-columns-differ",
        "error",
        "keys",
        "files the runtime merges have different column lists (the merge fails)",
    ),
    Rule("merge-file-missing", "warning", "keys", "a file in the merged set does not exist"),
    # parts and dtypes
    Rule("part-unknown", "warning", "parts", "(gfx, cu_num) matches no known part"),
    Rule("arch-mismatch", "warning", "parts", "rows tagged for an arch other than --arch"),
    Rule("fp8-dialect", "error", "parts", "FNUZ fp8 on gfx950, or OCP fp8 (e4m3fn/e5m2) on gfx942"),
    # values
    Rule("us-invalid", "error", "values", "us missing, zero, negative, NaN or infinite"),
    Rule("err-ratio-invalid", "error", "values", "errRatio (or err1/err2) NaN or negative"),
    Rule("shape-invalid", "error", "values", "M, N or K not a positive integer"),
    Rule("splitk-negative", "error", "values", "splitK (or ksplit) below 0"),
    Rule("conflict-marker", "error", "values", "git conflict markers left in a config file"),
    Rule(
        "err-ratio-high", "warning", "values", "errRatio above the tuner's own default --errRatio"
    ),
    Rule("tuned-empty", "error", "values", "a tuned CSV with a header and no rows"),
    Rule(
        "splitk-never-searched",
        "warning",
        "values",
        "splitK is zero in every row (the tuner's -k/--splitK is off by default)",
    ),
    Rule(
        "mx-scale-block",
        "error",
        "values",
        "MX/FP4 row whose split-K or K-block does not divide into 32-element scale blocks",
    ),
    Rule(
        "input-error",
        "error",
        "values",
        "a config file that cannot be read, or rows that were skipped",
    ),
    Rule(
        "op-unknown",
        "note",
        "values",
        "a tuned file whose op the runtime configs do not "
        "name: kernel-list, duplicate-key and merge rules not applied",
    ),
    Rule(
        "key-columns-missing", "error", "values", "a config file without the key columns of its op"
    ),
    # runtime
    Rule(
        "default-config-missing",
        "warning",
        "runtime",
        "a config path the runtime reads by default does not exist (the op runs untuned)",
    ),
    Rule(
        "env-file-var-ignored",
        "error",
        "runtime",
        "an env file sets AITER_CONFIG_*_FILE, which the runtime never reads",
    ),
    # knowledge base
    Rule(
        "baseline-slower",
        "warning",
        "kb",
        "tuned us slower than a measured baseline for the same shape (sub-1.00x)",
    ),
    Rule(
        "baseline-missing",
        "note",
        "kb",
        "rows never compared against a measured baseline (a missing baseline is not a pass)",
    ),
    Rule(
        "tile-gated",
        "warning",
        "kb",
        "the row's kernel matches CK library instances "
        "that registration gates remove on the row's arch",
    ),
    Rule("rules-skipped", "note", "kb", "rules that need the knowledge base were not run"),
]
RULES: dict[str, Rule] = {r.id: r for r in _RULES}


def finding(
    rule: str,
    file: str,
    line: int,
    message: str,
    /,
    *,
    op: str | None = None,
    severity: str | None = None,
    **evidence: Any,
) -> Finding:
    return Finding(rule, severity or RULES[rule].severity, file, line, message, evidence, op)

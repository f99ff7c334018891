"""The inventory: which files each stage reads, and which of them the cache already holds."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ckkb.diagnostics import Diagnostic
from ckkb.kb.build.cache import Cache
from ckkb.kb.build.workers import Miss
from ckkb.kb.build.writer import FingerprintPart
from ckkb.kb.stages import Stage, per_build


@dataclass
class StagePlan:
    """One stage's inputs: every file (relative to the tree root), and those read from the cache."""

    root: Path
    rels: list[str] = field(default_factory=list)
    hits: set[str] = field(default_factory=set)
    misses: list[Miss] = field(default_factory=list)
    fingerprint: list[FingerprintPart] = field(default_factory=list)  # of the cached files
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # rel -> (root, size, mtime_ns, sha) of a hit whose result the cache holds for the same bytes
    # at the same path in another tree: identical files are extracted once across trees
    borrowed: dict[str, tuple[str, int, int, str]] = field(default_factory=dict)


def inventory(stage: Stage, root: Path, cache: Cache) -> StagePlan:
    """List the stage's files; a file whose size and mtime match its cached result is a hit.

    String operations, not pathlib: this loop runs for every input of a warm build."""
    root_str = os.fspath(root)
    prefix = root_str.rstrip(os.sep) + os.sep
    plan = StagePlan(root)
    try:
        paths = stage.files(root)
    except OSError as e:
        plan.diagnostics.append(
            Diagnostic(root_str, 0, f"cannot list files: {e}", "error", stage.name)
        )
        paths = []
    for p in paths:
        sp = os.fspath(p)
        if sp.startswith(prefix):
            sp = sp[len(prefix) :]
        elif os.path.isabs(sp):
            sp = os.path.relpath(sp, root_str)
        plan.rels.append(sp.replace(os.sep, "/"))
    cached = cache.load(stage, root_str)
    cache.prune(stage, root_str, set(plan.rels))
    elsewhere = cache.other_roots(stage, root_str)
    for rel in plan.rels:
        entry = cached.get(rel)
        if entry is None:  # never extracted here: the same bytes in another tree, or a miss
            if not (rel in elsewhere and _borrow(plan, stage, rel, elsewhere[rel])):
                plan.misses.append((stage.name, root_str, rel))
            continue
        try:
            st = os.stat(os.path.join(root_str, rel))
        except OSError:
            plan.misses.append((stage.name, root_str, rel))
            continue
        if entry[0] == st.st_size and entry[1] == st.st_mtime_ns:
            plan.hits.add(rel)
            plan.fingerprint.append((stage.name, stage.version, rel, entry[2]))
        else:
            plan.misses.append((stage.name, root_str, rel))
    return plan


def same_bytes(first_root: str, root: str, rel: str) -> tuple[int, int, str] | None:
    """(size, mtime_ns, sha256) of root/rel when its bytes are first_root/rel's, else None: two
    trees of one build that both miss a file extract it once."""
    try:
        a, b = os.path.join(first_root, rel), os.path.join(root, rel)
        st = os.stat(b)
        if os.stat(a).st_size != st.st_size:
            return None
        sha = file_sha(b)
        if file_sha(a) != sha:
            return None
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, sha


@per_build  # a header several stages list (instances, typestrings, ...) is read and hashed once
def file_sha(path: str) -> str:
    """sha256 of the file's bytes."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _borrow(plan: StagePlan, stage: Stage, rel: str, others: dict[tuple[int, str], str]) -> bool:
    """Take another tree's cached result for this file when its bytes are the same."""
    path = os.path.join(os.fspath(plan.root), rel)
    try:
        st = os.stat(path)
        if not any(size == st.st_size for size, _ in others):
            return False
        sha = file_sha(path)
    except OSError:
        return False
    other_root = others.get((st.st_size, sha))
    if other_root is None:
        return False
    plan.hits.add(rel)
    plan.borrowed[rel] = (other_root, st.st_size, st.st_mtime_ns, sha)
    plan.fingerprint.append((stage.name, stage.version, rel, sha))
    return True

"""What BASE and HEAD of `ckkb review` name: a tree of the knowledge base, an aiter tree on disk,
or a git revision of an aiter checkout (`PATH@REV`, or REV with --repo PATH).

A revision is written out with `git archive` into a temporary directory (only the parts the aiter
readers read: aiter/, csrc/, gradlib/ and hsa/'s Python): the user's checkout, index and
working tree are never touched.
"""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ckkb.errors import CkkbError
from ckkb.versions.aiter_side import AiterSide, from_connection, from_tree

_PARTS = ("aiter", "csrc", "gradlib")


class BadSpec(CkkbError):
    """A BASE or HEAD that names no aiter tree."""


def open_side(
    spec: str, *, db_path: Path | None, repo: str | None, stack: ExitStack, role: str
) -> AiterSide:
    """The aiter tree `spec` names (role: BASE or HEAD, for messages). Temporary directories
    live as long as `stack`."""
    if repo is not None:
        return revision(repo, spec, stack, role)
    trees = _kb_trees(db_path)
    match = [t for t in trees if t.name == spec]
    if match:
        if match[0].kind != "aiter":
            raise BadSpec(
                f"{role} {spec}: a {match[0].kind.upper()} tree; review compares aiter trees",
                hint="`ckkb trees` lists them; `ckkb diff` compares CK trees",
            )
        return _kb_side(db_path, spec)
    p = Path(spec).expanduser()
    if p.exists():
        return from_tree(p, spec)
    if "@" in spec:
        path, rev = spec.rsplit("@", 1)
        if path and Path(path).expanduser().is_dir():
            return revision(path, rev, stack, role)
    held = ", ".join(f"{t.name} ({t.kind})" for t in trees) or "none"
    where = f"knowledge base {db_path} (trees: {held})" if trees else "no knowledge base read"
    raise BadSpec(
        f"{role} {spec!r}: not a tree name ({where}), not a path, not PATH@REV",
        hint="give a tree of `ckkb trees`, an aiter checkout, PATH@REV, or --repo PATH REV",
    )


def _kb_trees(db_path: Path | None) -> list[Any]:
    if db_path is None or not db_path.is_file():
        return []
    from ckkb.kb import db as kbdb
    from ckkb.kb.trees import list_trees

    db = kbdb.open_db(db_path, readonly=True)
    try:
        return list_trees(db.conn)
    finally:
        db.close()


def _kb_side(db_path: Path | None, name: str) -> AiterSide:
    from ckkb.kb import db as kbdb

    assert db_path is not None
    db = kbdb.open_db(db_path, readonly=True, tree=name)
    try:
        return from_connection(db, name)
    finally:
        db.close()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise CkkbError("git is not installed: revisions cannot be read") from None


def revision(repo: str, rev: str, stack: ExitStack, role: str) -> AiterSide:
    """Revision `rev` of the aiter checkout at `repo`, written out with `git archive`."""
    root = Path(repo).expanduser()
    if not root.is_dir():
        raise BadSpec(f"{role} {repo}@{rev}: {repo} is not a directory")
    prefix = _git(root, "rev-parse", "--show-prefix")
    if prefix.returncode != 0:
        raise BadSpec(f"{role} {repo}@{rev}: {repo} is not a git checkout")
    got = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if got.returncode != 0 or not rev:
        raise BadSpec(f"{role} {repo}@{rev}: no revision {rev!r} in {repo}")
    commit = got.stdout.decode().strip()
    sub = prefix.stdout.decode().strip()
    top = Path(_git(root, "rev-parse", "--show-toplevel").stdout.decode().strip() or root)
    treeish = f"{commit}:{sub}" if sub else commit  # the checkout may be a folder of a repository
    names = _git(top, "ls-tree", "-r", "--name-only", treeish).stdout.decode().splitlines()
    tops = {n.split("/", 1)[0] for n in names}
    specs = [p for p in _PARTS if p in tops]
    if any(n.startswith("hsa/") and n.endswith(".py") for n in names):
        specs.append(":(glob)hsa/**/*.py")
    if "aiter" not in tops:
        raise BadSpec(f"{role} {repo}@{rev}: not an aiter tree at that revision (no aiter/)")
    out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ckkb-review-")))
    proc = subprocess.Popen(
        ["git", "-C", str(top), "archive", "--format=tar", treeish, "--", *specs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out, filter="data")
        else:  # pragma: no cover - Pythons without extraction filters
            tar.extractall(out)  # noqa: S202 (our own git's archive of the user's repository)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.wait() != 0:
        raise BadSpec(f"{role} {repo}@{rev}: git archive failed: {err.strip()}")
    label = f"{repo}@{rev}"
    origin = {"kind": "revision", "path": str(root), "rev": rev, "commit": commit, "version": None}
    return from_tree(out, label, origin)

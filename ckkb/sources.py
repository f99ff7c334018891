"""Find the CK and aiter source trees ckkb reads.

The embedded default is the installed `amd-aiter` wheel, which vendors a complete CK tree at
`aiter_meta/3rdparty/composable_kernel/`, aiter's CK kernel lists at `aiter_meta/csrc/` and the
tuned configs at `aiter/configs/`. It is located with `importlib.util.find_spec`, which finds a
package without executing it: `import aiter` needs ROCm and must never run here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from ckkb.errors import SourceNotFound

AITER_DIST = "amd-aiter"
CK_INSTANCE_DIR = "library/src/tensor_operation_instance/gpu"
CK_IMPL_DIR = "include/ck/tensor_operation/gpu/device/impl"
# The include path of CK's factory headers, as sources spell it (`#include "ck/library/..."`);
# where it lies in a tree is read from the tree's CMake (ckkb.extract.include_dirs).
CK_FACTORY_INCLUDE = "ck/library/tensor_operation_instance/gpu"
CK_PROFILER_DIR = "profiler/src"


@dataclass(frozen=True)
class CkTree:
    """A CK source tree. Row paths are relative to `root`."""

    root: Path
    version: str | None  # from the top-level CMakeLists.txt `set(version X)`
    wheel_version: str | None  # the amd-aiter version when the tree is the wheel's

    @property
    def kind(self) -> str:
        return "ck"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


@dataclass(frozen=True)
class AiterTree:
    """An aiter tree: the Python package dir and the C++ sources dir (csrc).

    In a git checkout both live under one root (`aiter/`, `csrc/`); in the wheel the package is
    `site-packages/aiter` and the rest is `site-packages/aiter_meta/`. Row paths are written the
    way the repository spells them (`aiter/configs/x.csv`, `csrc/ck_gemm_a8w8/...`) either way.
    """

    package_dir: Path  # .../aiter
    meta_dir: Path  # checkout root or .../aiter_meta (holds csrc/, 3rdparty/)
    version: str | None

    @property
    def kind(self) -> str:
        return "aiter"

    @property
    def root(self) -> Path:
        return self.meta_dir

    @property
    def csrc_dir(self) -> Path:
        return self.meta_dir / "csrc"

    @property
    def configs_dir(self) -> Path:
        return self.package_dir / "configs"

    def rel(self, path: Path) -> str:
        path = Path(path)
        try:
            return "aiter/" + path.relative_to(self.package_dir).as_posix()
        except ValueError:
            pass
        try:
            return path.relative_to(self.meta_dir).as_posix()
        except ValueError:
            return path.as_posix()


def wheel_version() -> str | None:
    try:
        return importlib.metadata.version(AITER_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None


def _find_package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # locates; does not execute the package
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_aiter_tree() -> AiterTree:
    pkg = _find_package_dir("aiter")
    meta = _find_package_dir("aiter_meta")
    if pkg is None or meta is None:
        raise SourceNotFound(
            f"the {AITER_DIST} wheel is not installed",
            hint=f"pip install '{AITER_DIST}==0.1.7.post2.dev18', or pass --aiter PATH",
        )
    return AiterTree(package_dir=pkg, meta_dir=meta, version=wheel_version())


def _dist_version(site: Path) -> str | None:
    """The amd-aiter version installed in another environment's site-packages (its dist-info)."""
    for info in sorted(site.glob("amd_aiter-*.dist-info")):
        return info.name[len("amd_aiter-") : -len(".dist-info")] or None
    return None


def _is_this_wheel(meta: Path) -> bool:
    found = _find_package_dir("aiter_meta")
    return found is not None and found.resolve() == meta.resolve()


def default_ck_root() -> Path:
    return default_aiter_tree().meta_dir / "3rdparty" / "composable_kernel"


def read_ck_version(root: Path) -> str | None:
    cmake = root / "CMakeLists.txt"
    try:
        text = cmake.read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"set\(\s*version\s+([0-9][0-9A-Za-z.\-]*)\s*\)", text)
    return m.group(1) if m else None


def ck_tree(path: str | Path | None = None) -> CkTree:
    """Resolve `--ck PATH` (or the wheel's tree) and check it looks like CK."""
    if path is None:
        root = default_ck_root()
        wv = wheel_version()
    else:
        root = Path(path).expanduser()
        wv = None
    if not root.exists():
        raise SourceNotFound(
            f"CK tree not found: {root}", hint="pass --ck PATH to a composable_kernel checkout"
        )
    if not root.is_dir():
        raise SourceNotFound(f"not a directory: {root}")
    root = root.resolve()
    markers = [root / CK_INSTANCE_DIR, root / "include" / "ck"]
    if not any(m.is_dir() for m in markers):
        raise SourceNotFound(
            f"{root} is not a CK tree: neither {CK_INSTANCE_DIR}/ nor include/ck/ exists",
            hint="pass --ck PATH to the root of a composable_kernel checkout",
        )
    if path is not None and wheel_version() and root == default_ck_root().resolve():
        wv = wheel_version()
    return CkTree(root=root, version=read_ck_version(root), wheel_version=wv)


def aiter_tree(path: str | Path | None = None) -> AiterTree:
    """Resolve `--aiter PATH` (a checkout root) or the wheel."""
    if path is None:
        return default_aiter_tree()
    root = Path(path).expanduser()
    if not root.is_dir():
        raise SourceNotFound(
            f"aiter tree not found: {root}", hint="pass --aiter PATH to an aiter checkout"
        )
    root = root.resolve()
    if (root / "aiter").is_dir():
        return AiterTree(package_dir=root / "aiter", meta_dir=root, version=None)
    if root.name == "aiter_meta" and (root.parent / "aiter" / "configs").is_dir():
        # an installed wheel's meta dir (how a knowledge base stores the wheel's tree)
        version = wheel_version() if _is_this_wheel(root) else _dist_version(root.parent)
        return AiterTree(package_dir=root.parent / "aiter", meta_dir=root, version=version)
    if root.name == "aiter" and (root / "configs").is_dir():
        meta = root.parent / "aiter_meta"
        return AiterTree(
            package_dir=root,
            meta_dir=meta if meta.is_dir() else root.parent,
            version=wheel_version(),
        )
    raise SourceNotFound(
        f"{root} is not an aiter tree: no aiter/ package directory in it",
        hint="pass --aiter PATH to the root of an aiter checkout",
    )


# ---------------------------------------------------------------- named trees (several per KB)


@dataclass(frozen=True)
class NamedTree:
    """One tree of a knowledge base that may hold several: its name is how queries choose it."""

    name: str
    kind: str  # "ck" | "aiter"
    tree: CkTree | AiterTree
    commit: str | None = None  # HEAD of a git checkout

    @property
    def root(self) -> Path:
        return self.tree.root

    @property
    def version(self) -> str | None:
        return self.tree.version


def split_tree_arg(arg: str) -> tuple[str | None, str]:
    """`NAME=PATH` -> (NAME, PATH); a bare PATH -> (None, PATH). A path that itself holds `=` is
    read as a path when it exists."""
    name, sep, path = arg.partition("=")
    if not sep or not name or Path(arg).expanduser().exists() or "/" in name:
        return None, arg
    return name, path


def git_commit(root: Path) -> str | None:
    """HEAD's commit when `root` is a git checkout (read from .git, without running git)."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: PATH"
        text = git.read_text(errors="replace").strip()
        if not text.startswith("gitdir:"):
            return None
        git = (root / text[len("gitdir:") :].strip()).resolve()
    head_file = git / "HEAD"
    if not head_file.is_file():
        return None
    head = head_file.read_text(errors="replace").strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head[len("ref:") :].strip()
    for base in (git, _common_dir(git)):
        loose = base / ref
        if loose.is_file():
            return loose.read_text(errors="replace").strip() or None
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(errors="replace").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref:
                    return sha
    return None


def _common_dir(git: Path) -> Path:
    common = git / "commondir"
    if common.is_file():
        return (git / common.read_text().strip()).resolve()
    return git


def default_tree_name(tree: CkTree | AiterTree, commit: str | None) -> str:
    """Its version (else its directory's name), plus its commit when it is a checkout."""
    base = tree.version or tree.root.name
    return f"{base}@{commit[:12]}" if commit else base


def named_tree(
    tree: CkTree | AiterTree, name: str | None = None, kind: str | None = None
) -> NamedTree:
    commit = git_commit(tree.root)
    return NamedTree(name or default_tree_name(tree, commit), kind or tree.kind, tree, commit)

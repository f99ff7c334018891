"""What a build stage is, and the order a build runs stages in.

A stage is pure: `files` lists its inputs, `extract` turns one file's bytes into rows (runs in a
worker process and is cached by content hash), `combine` resolves across files (runs once, in
the parent, with the rows of the tables it `reads`). Stages never open the database.

Each stage declares the tables its combine `reads` and the tables its rows go to (`writes`); the
build derives its order from those declarations (`build_order`) and refuses a stage that reads a
table it did not declare or writes one it did not name.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

from ckkb.diagnostics import Diagnostic
from ckkb.errors import CkkbError


class StageError(CkkbError):
    """Stage declarations that cannot make a build: a cycle, an undeclared read or write."""


@dataclass
class FileResult:
    """What one file yields: rows for the database, diagnostics, facts kept for `combine`."""

    rows: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageResult:
    rows: list[Any] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


class Stage(Protocol):
    """One kind of input. Optional attributes, read with getattr:

    - `extract_with`: an earlier stage that parses the same bytes of the files both read; the
      build extracts such a file for both stages in one worker task (one parse).
    - `worker_group`: consecutive files of stages with the same group go to one worker (for a
      costly per-process setup such as an import).
    - `reads_facts`: stages whose per-file facts this stage's combine reads (`ctx.file_facts`).
    - `combine_cost`: about how many seconds its combine takes on a full tree; only a scheduling
      hint (see `build_order`), never a dependency.
    """

    name: str  # unique, e.g. "ck.instances"
    version: str  # bump to invalidate cached per-file results
    tree: str  # "ck" | "aiter"
    reads: tuple[str, ...]  # tables other stages write that this stage's combine reads
    writes: tuple[str, ...]  # tables this stage's rows go to

    def files(self, root: Path) -> list[Path]: ...

    def extract(self, root: Path, rel: str, data: bytes) -> FileResult: ...

    def combine(
        self, root: Path, results: dict[str, FileResult], ctx: BuildContext
    ) -> StageResult: ...


@dataclass
class BuildContext:
    """What one stage's combine may see: the trees, and the rows and file facts it declared."""

    trees: dict[str, Any]  # "ck" -> CkTree, "aiter" -> AiterTree (absent when not built)
    rows: dict[str, list[Any]] = field(default_factory=dict)  # table -> rows, of finished stages
    facts: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=dict
    )  # stage -> rel -> facts
    stage: str | None = None  # the stage combining now; None: no declarations are checked
    allowed_tables: frozenset[str] = frozenset()
    allowed_facts: frozenset[str] = frozenset()

    def for_stage(self, stage: Stage) -> BuildContext:
        """A view for `stage`'s combine: the same rows, its declarations enforced."""
        return BuildContext(
            self.trees,
            self.rows,
            self.facts,
            stage.name,
            frozenset(stage.reads),
            frozenset(getattr(stage, "reads_facts", ())),
        )

    def table_rows(self, table: str) -> list[Any]:
        if self.stage is not None and table not in self.allowed_tables:
            raise StageError(f"stage {self.stage} reads table {table} but does not declare it")
        return self.rows.get(table, [])

    def file_facts(self, stage_name: str) -> dict[str, dict[str, Any]]:
        """rel -> facts of every file of `stage_name` (a stage named in `reads_facts`)."""
        if self.stage is not None and stage_name not in self.allowed_facts:
            raise StageError(
                f"stage {self.stage} reads {stage_name}'s facts but does not declare it"
            )
        return self.facts.get(stage_name, {})


def dependencies(stages: Sequence[Stage]) -> dict[str, set[str]]:
    """stage name -> the stages whose combine must come before its own: those that write a table
    it reads, and those whose file facts it reads."""
    writers: dict[str, list[str]] = {}
    for s in stages:
        for t in s.writes:
            writers.setdefault(t, []).append(s.name)
    out: dict[str, set[str]] = {}
    for s in stages:
        wanted = set(getattr(s, "reads_facts", ()))
        out[s.name] = {w for t in s.reads for w in writers.get(t, ()) if w != s.name} | {
            o.name for o in stages if o.name in wanted
        }
    return out


def build_order(stages: Sequence[Stage]) -> list[Stage]:
    """Stages in an order where each comes after every stage that writes a table it reads.

    Among the stages whose inputs are ready, the one heading the longest chain of combines
    (`combine_cost` summed along its dependants) goes first: the parent combines while the
    workers still extract, and the chain that would finish last starts soonest. Ties keep the
    order given. A stage that reads a table no stage here writes reads no rows (an aiter-only
    build has no CK instances). A cycle is an error.
    """
    check_reads(stages)
    index = {s.name: i for i, s in enumerate(stages)}
    needs: list[set[int]] = [{index[n] for n in deps} for deps in dependencies(stages).values()]
    dependants: list[set[int]] = [set() for _ in stages]
    for i, n in enumerate(needs):
        for j in n:
            dependants[j].add(i)
    chain: dict[int, float] = {}

    def chain_cost(i: int, seen: frozenset[int] = frozenset()) -> float:
        if i in seen:
            raise StageError(f"stages depend on each other in a cycle through {stages[i].name}")
        if i not in chain:
            below = [chain_cost(j, seen | {i}) for j in dependants[i]]
            chain[i] = float(getattr(stages[i], "combine_cost", 0.0)) + max(below, default=0.0)
        return chain[i]

    for i in range(len(stages)):
        chain_cost(i)
    done: set[int] = set()
    out: list[Stage] = []
    while len(out) < len(stages):
        ready = [i for i in range(len(stages)) if i not in done and needs[i] <= done]
        best = max(ready, key=lambda i: (chain[i], -i))
        done.add(best)
        out.append(stages[best])
    return out


def check_reads(stages: Sequence[Stage]) -> None:
    """A stage's combine sees the rows of its own tree only (`BuildContext`): a read of a table
    that stages over another kind of tree write would wait for them and then find no rows."""
    for s in stages:
        for t in s.reads:
            other = sorted(o.name for o in stages if t in o.writes and o.tree != s.tree)
            if other:
                raise StageError(
                    f"stage {s.name} ({s.tree} trees) reads {t}, which {', '.join(other)} "
                    f"writes over other trees: a stage sees only its own tree's rows"
                )


def check_writes(stage: Stage, tables: Iterable[str]) -> None:
    """A stage's rows must go to the tables it declared (its order depends on it)."""
    extra = sorted(set(tables) - set(stage.writes))
    if extra:
        raise StageError(f"stage {stage.name} wrote {', '.join(extra)} but does not declare it")


P = ParamSpec("P")
T = TypeVar("T")


class DerivedStore(Protocol):
    """Where a build keeps what it derived from a tree's files, for the next build to reuse while
    those files are unchanged (the build's cache, `kb.build.cache`)."""

    def recall(self, key: str, root: str) -> bytes | None: ...

    def remember(self, key: str, root: str, blob: bytes) -> None: ...


# Results of `per_build` functions while one build runs (`one_build`), else None; and the build's
# store with the process that opened it (a forked worker must not use the parent's connection).
# Global because stages' `files` and `combine` are called with a tree's root, not with a build.
_build_memo: dict[tuple[Any, ...], Any] | None = None
_build_store: tuple[int, DerivedStore] | None = None


@contextlib.contextmanager
def one_build(store: DerivedStore | None = None) -> Iterator[None]:
    """The block of one build: within it, a `per_build` function computes its result once per
    arguments, and every stage that asks gets that one (the results go with the block); `store`
    is the build's cache (`build_store`)."""
    global _build_memo, _build_store
    outer, _build_memo = _build_memo, {} if _build_memo is None else _build_memo
    outer_store = _build_store
    if store is not None:
        _build_store = (os.getpid(), store)
    try:
        yield
    finally:
        _build_memo, _build_store = outer, outer_store


def build_store() -> DerivedStore | None:
    """The running build's store, in the process running the build; else None."""
    if _build_store is None or _build_store[0] != os.getpid():
        return None
    return _build_store[1]


def per_build(fn: Callable[P, T]) -> Callable[P, T]:
    """A fact several stages derive from the same tree (CK's instance-library roots, a directory's
    files), computed once per build and shared: `fn` must return an immutable value. Outside a
    build (`one_build`) every call computes it afresh."""

    @functools.wraps(fn)
    def shared(*args: P.args, **kwargs: P.kwargs) -> T:
        memo = _build_memo
        if memo is None:
            return fn(*args, **kwargs)
        key = (fn, args, tuple(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = fn(*args, **kwargs)
        result: T = memo[key]
        return result

    return shared


_registered: dict[str, Stage] = {}  # name -> stage; read by forked workers (why it is global)


def register_stages(stages: Iterable[Stage]) -> None:
    """Make stages findable by name in this process and in the workers it forks."""
    for s in stages:
        _registered[s.name] = s


def get_stage(name: str) -> Stage:
    return _registered[name]

"""One `add_instance_library(name sources...)` call, run as CMake runs it: once per call, with the
call's whole source list as `ARGN`.

CK's function decides per source but may look at the whole list: CK 2024-10 tests
`elseif(ARGN MATCHES "_wmma")` inside its per-source loop, so a source's target list depends on
the other sources of its call. Running the function once per source name (as ckkb did) gives a
different `ARGN` from CMake's; running it once per call gives CMake's.

A source is built for the arch when it is still in `ARGN` at the end and the arch is in the
target list it gets: `INST_TARGETS` as it stands when `set_source_files_properties` gives the
source its compile flags (CK sets them per source, in its last loop over `ARGN`), else
`INST_TARGETS` at the end of the call. The rule that explains a verdict is the if-branch that
removed the source from `ARGN`, or the arch from `INST_TARGETS` since it was last `set()`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ckkb.extract.cmake_sources import DirLibraries
from ckkb.kb.schema.ck_registrations import BuildRuleRow
from ckkb.lang.cmake.interpreter import Break, Interpreter
from ckkb.lang.cmake.syntax import Branch, Command, Function

TARGETS = "INST_TARGETS"
R = TypeVar("R")
# (built, the rule that removed the source or the arch)
Verdict = tuple[bool, R | None]


class _CallRun(Interpreter):
    """The interpreter, keeping the removals from INST_TARGETS apart (they are reset by each
    set() of it) and the target list each source had when its properties were set."""

    def __init__(self, env: dict[str, str], file: str) -> None:
        super().__init__(env, file)
        self.target_removals: dict[tuple[str, str], Branch | None] = {}
        # source -> (INST_TARGETS then, or None when unset; removals from it then)
        self.snapshots: dict[str, tuple[str | None, dict[tuple[str, str], Branch | None]]] = {}

    def command(self, c: Command) -> None:
        if c.name == "set_source_files_properties":
            w = self.command_words(c)
            k = w.index("PROPERTIES") if "PROPERTIES" in w else len(w)
            snap = (self.env.get(TARGETS), dict(self.target_removals))
            for s in w[:k]:
                self.snapshots[s] = snap
            return
        if c.name == "set" and c.args and c.args[0].value == TARGETS:
            self.target_removals = {}
        Interpreter.command(self, c)

    def list_cmd(self, w: list[str]) -> None:
        if len(w) >= 2 and w[1] == TARGETS:
            saved, self.removed = self.removed, self.target_removals
            try:
                super().list_cmd(w)
            finally:
                self.removed = saved
        else:
            super().list_cmd(w)


def run_call(
    lib: Function,
    env: dict[str, str],
    words: list[str],
    arch: str,
    rule_for: Callable[[Branch | None], R | None],
    file: str,
) -> dict[str, Verdict[R]]:
    """Run `lib` once for the call `lib(words...)` under `env` (the caller's variables) for the
    single target `arch`: the verdict of each source the call names (its words past the
    function's parameters), keyed by the word as written."""
    it = _CallRun(env, file)
    it.functions[lib.name.lower()] = lib
    params = lib.params or ["INSTANCE_NAME"]
    for i, p in enumerate(params):
        it.env[p] = words[i] if i < len(words) else ""
    sources = words[len(params) :]
    it.env["ARGN"] = ";".join(sources)
    try:
        it.run(lib.body)
    except Break:
        pass
    left = {x for x in it.env.get("ARGN", "").split(";") if x}
    out: dict[str, Verdict[R]] = {}
    for s in sources:
        if s not in left:
            out[s] = (False, rule_for(it.removed.get(("ARGN", s))))
            continue
        targets, removals = it.snapshots.get(s) or (it.env.get(TARGETS), it.target_removals)
        if arch not in [x for x in (arch if targets is None else targets).split(";") if x]:
            out[s] = (False, rule_for(removals.get((TARGETS, arch))))
        else:
            out[s] = (True, None)
    return out


@dataclass
class Rules:
    """The build rules so far, numbered in the order they are made; a definition's rules are
    made (`make`) the first time one of its calls is evaluated, when not made up front."""

    out: list[Any]
    of_lib: dict[int, dict[int, BuildRuleRow]]  # id(definition) -> branch line -> rule
    make: Callable[[Function], dict[int, BuildRuleRow]]
    n: int = 0

    def number(self, rules: dict[int, BuildRuleRow]) -> None:
        for r in rules.values():
            r.id += self.n
        self.n += len(rules)
        self.out.extend(rules.values())

    def next_id(self) -> int:
        self.n += 1
        return self.n

    def of(self, fn: Function) -> dict[int, BuildRuleRow]:
        if id(fn) not in self.of_lib:
            self.of_lib[id(fn)] = self.make(fn)
            self.number(self.of_lib[id(fn)])
        return self.of_lib[id(fn)]


def rule_of(book: Rules, lib: Function) -> Callable[[Branch | None], BuildRuleRow | None]:
    """The rule a branch of `lib` stands for (None outside any rule)."""
    rules = book.of(lib)
    return lambda br: rules.get(br.line) if br is not None else None


def call_verdicts(
    got: DirLibraries | None, arch: str, book: Rules, fallback: Function | None, file: str
) -> dict[str, Verdict[BuildRuleRow]]:
    """Source (normalised, relative to the directory) -> verdict, from running each
    add_instance_library call of the directory once: built when one of the calls that name it
    builds it, else the first call's reason. A call made where no definition is in effect runs
    `fallback`; none: no verdict."""
    out: dict[str, Verdict[BuildRuleRow]] = {}
    for call in got.calls if got is not None else []:
        lib = call.function or fallback
        if lib is None:
            continue
        for source, verdict in run_call(
            lib, call.env, call.words, arch, rule_of(book, lib), file
        ).items():
            key = posixpath.normpath(source)
            if key not in out or (verdict[0] and not out[key][0]):
                out[key] = verdict
    return out

"""A small CMake interpreter: runs parsed statements over string variables, statement by
statement (`set`, `option`, `unset`, `if/elseif/else`, `foreach`, `break`, `function` and its
calls, `get_filename_component(... NAME|NAME_WE|DIRECTORY|PATH)`,
`list(REMOVE_ITEM|APPEND|FILTER|REMOVE_DUPLICATES)`, `file(READ|GLOB)`, `add_subdirectory`,
`add_definitions`/`add_compile_definitions`, `include`); other commands are no-ops. It records
which if-branch removed what, for the build rules that explain a verdict.

`include()` runs the included file in the same scope, as CMake does: a name that is not a full
path is first tried as a module `<name>.cmake` in each `CMAKE_MODULE_PATH` directory, then as a
path relative to the current source directory; `OPTIONAL` and `RESULT_VARIABLE` are honoured.
The caller's `Loader` reads the tree's files (a file it does not have is not found: CMake's own
modules, such as `CTest`, are no part of the tree)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Protocol

from ckkb.lang.cmake.conditions import Arg, words
from ckkb.lang.cmake.syntax import Branch, Command, Foreach, Function, If, Stmt


def filename_component(path: str, mode: str) -> str | None:
    """get_filename_component(<var> path <mode>); None for a mode the interpreter does not know."""
    if mode == "NAME":
        return path.rsplit("/", 1)[-1]
    if mode in ("DIRECTORY", "PATH"):
        return path.rsplit("/", 1)[0] if "/" in path else ""
    if mode == "NAME_WE":
        return path.rsplit("/", 1)[-1].split(".", 1)[0]
    return None


class Loader(Protocol):
    """Reads the tree's CMake files for include(): statements by absolute path, None when the
    tree has no such (parsable) file."""

    root: str  # the tree's absolute path: CMAKE_SOURCE_DIR

    def __call__(self, path: str) -> list[Stmt] | None: ...


class Break(Exception):
    """break() outside a loop body ends the run (callers catch it)."""


_INTERPRETED = frozenset(
    {
        "set",
        "option",
        "add_definitions",
        "add_compile_definitions",
        "unset",
        "get_filename_component",
        "list",
        "file",
        "add_subdirectory",
        "break",
        "include",
    }
)


class Interpreter:
    """Runs parsed CMake statements over string variables; records which rule removed what."""

    def __init__(
        self,
        env: dict[str, str],
        file: str,
        read_file: Callable[[str], str] | None = None,
        glob: Callable[[list[str]], list[str]] | None = None,
        load: Loader | None = None,
    ) -> None:
        self.env = dict(env)
        self.file = file
        self.read_file: Callable[[str], str] = read_file or (lambda p: "")
        # file(GLOB var exprs...): the caller lists the tree; without a lister the variable is
        # left as it was (nothing is known of the files)
        self.glob = glob
        self.stack: list[Branch] = []  # enclosing taken if-branches, innermost last
        # (list var, item) -> the branch that removed it
        self.removed: dict[tuple[str, str], Branch | None] = {}
        self.origin: dict[str, Branch | None] = {}  # var -> innermost branch of its last set()
        self.subdirs: list[str] = []
        self.defines: dict[str, tuple[str, int]] = {}  # -DNAME[=VALUE] -> (value, line)
        self.define_files: dict[str, str] = {}  # -DNAME -> the file of that line (list_file)
        self.functions: dict[str, Function] = {}
        self.load = load  # include(): the tree's files; None: include() is a no-op
        self.list_file = file  # the file being read: `file`, or the file it include()s
        self._including: list[str] = []  # files being included, innermost last (no cycles)

    def run(self, stmts: list[Stmt]) -> None:
        # `type(s) is`: the parser makes no subclasses, and this runs ~800,000 times a build
        for s in stmts:
            if type(s) is Command:
                self.command(s)
            elif type(s) is If:
                self.if_(s)
            elif type(s) is Foreach:
                self.foreach(s)
            elif type(s) is Function:
                self.functions[s.name.lower()] = s

    def if_(self, s: If) -> None:
        for br in s.branches:
            if br.cond is None and br.text:  # unparsable condition: never taken
                continue
            if br.cond is None or br.cond.holds(self.env):
                self.stack.append(br)
                try:
                    self.run(br.body)
                finally:
                    self.stack.pop()
                return

    def words(self, args: list[Arg]) -> list[str]:
        """The arguments expanded: an unquoted one splits on ';' (empty items dropped)."""
        return words(args, self.env)

    def command_words(self, c: Command | Foreach) -> list[str]:
        """`c`'s arguments expanded; read once when no argument names a variable."""
        plain = c.plain_words
        return list(plain) if plain is not None else words(c.args, self.env)

    def foreach(self, s: Foreach) -> None:
        got = self.foreach_items(s)
        if got is None:
            return
        var, items = got
        for it in items:
            self.env[var] = it
            try:
                self.run(s.body)
            except Break:
                break

    def foreach_items(self, s: Foreach) -> tuple[str, list[str]] | None:
        """(loop variable, the items it takes), or None for a foreach() without arguments."""
        words = self.command_words(s)
        if not words:
            return None
        var, rest = words[0], words[1:]
        items: list[str] = []
        if rest and rest[0] == "IN":
            mode = None
            for w in rest[1:]:
                if w in ("LISTS", "ITEMS"):
                    mode = w
                elif mode == "LISTS":
                    items.extend(x for x in self.env.get(w, "").split(";") if x)
                else:
                    items.append(w)
        elif len(rest) >= 2 and rest[0] == "RANGE":
            items = [str(i) for i in range(int(rest[1]) + 1)] if rest[1].isdigit() else []
        else:
            items = rest
        return var, items

    def here(self) -> Branch | None:
        return self.stack[-1] if self.stack else None

    def command(self, c: Command) -> None:
        name = c.name
        if name not in _INTERPRETED and name not in self.functions:  # message() etc.: no-ops
            return
        if name == "break":
            raise Break()
        w = self.command_words(c)
        if name == "set":
            self.set(w)
        elif name == "option":
            if w and w[0] not in self.env:
                self.env[w[0]] = w[2] if len(w) >= 3 else "OFF"
        elif name == "add_definitions" or name == "add_compile_definitions":
            for x in w:
                d = (
                    x[2:]
                    if x.startswith("-D")
                    else (x if name == "add_compile_definitions" else "")
                )
                if d:
                    k, eq, v = d.partition("=")
                    self.defines[k] = (v if eq else "1", c.line)
                    self.define_files[k] = self.list_file
        elif name == "unset":
            if w:
                self.env.pop(w[0], None)
        elif name == "get_filename_component":
            part = filename_component(w[1], w[2]) if len(w) >= 3 else None
            if part is not None:
                self.env[w[0]] = part
        elif name == "list":
            self.list_cmd(w)
        elif name == "file":
            if len(w) >= 3 and w[0] == "READ":
                self.env[w[2]] = self.read_file(w[1])
            elif len(w) >= 2 and w[0] in ("GLOB", "GLOB_RECURSE"):
                self.file_glob(w[1], w[2:])
        elif name == "add_subdirectory":
            if w:
                self.subdirs.append(w[0])
        elif name == "include":
            self.include(w)
        else:
            self.call(self.functions[name], w)

    def include(self, w: list[str]) -> None:
        """include(<file|module> [OPTIONAL] [RESULT_VARIABLE var] [NO_POLICY_SCOPE])."""
        if not w or self.load is None:
            return
        name, path, stmts = w[0], "", None
        if not name.startswith("/"):  # not a full path: maybe a module
            for d in self.env.get("CMAKE_MODULE_PATH", "").split(";"):
                if d:
                    cand = posixpath.normpath(posixpath.join(d, name + ".cmake"))
                    if (stmts := self._load(cand)) is not None:
                        path = cand
                        break
        if stmts is None:
            here = posixpath.join(self.load.root, posixpath.dirname(self.file))
            cand = posixpath.normpath(posixpath.join(here, name))
            if (stmts := self._load(cand)) is not None:
                path = cand
        if "RESULT_VARIABLE" in w[1:-1]:
            self.env[w[w.index("RESULT_VARIABLE") + 1]] = path or "NOTFOUND"
        if stmts is None:
            return
        saved = {k: self.env.get(k) for k in ("CMAKE_CURRENT_LIST_DIR", "CMAKE_CURRENT_LIST_FILE")}
        self.env["CMAKE_CURRENT_LIST_DIR"] = posixpath.dirname(path)
        self.env["CMAKE_CURRENT_LIST_FILE"] = path
        self._including.append(path)
        outer, self.list_file = self.list_file, posixpath.relpath(path, self.load.root)
        try:
            self.run(stmts)
        finally:
            self._including.pop()
            self.list_file = outer
            for k, v in saved.items():
                if v is None:
                    self.env.pop(k, None)
                else:
                    self.env[k] = v

    def _load(self, path: str) -> list[Stmt] | None:
        if self.load is None or path in self._including:  # an include cycle: CMake recurses
            return None
        return self.load(path)

    def file_glob(self, var: str, rest: list[str]) -> None:
        """file(GLOB var [LIST_DIRECTORIES b] [RELATIVE p] [CONFIGURE_DEPENDS] exprs...)."""
        if self.glob is None:
            return
        exprs: list[str] = []
        relative = ""
        i = 0
        while i < len(rest):
            if rest[i] in ("LIST_DIRECTORIES", "RELATIVE") and i + 1 < len(rest):
                relative = rest[i + 1].rstrip("/") + "/" if rest[i] == "RELATIVE" else relative
                i += 2
                continue
            if rest[i] != "CONFIGURE_DEPENDS":
                exprs.append(rest[i])
            i += 1
        found = self.glob(exprs)
        if relative:
            found = [p[len(relative) :] if p.startswith(relative) else p for p in found]
        self.env[var] = ";".join(found)
        self.origin[var] = self.here()

    def set(self, w: list[str]) -> None:
        if not w:
            return
        var, vals = w[0], [x for x in w[1:] if x != "PARENT_SCOPE"]
        if "CACHE" in vals:
            if var in self.env and "FORCE" not in vals:
                return
            vals = vals[: vals.index("CACHE")]
        if vals:
            self.env[var] = ";".join(vals)
        else:
            self.env.pop(var, None)
        self.origin[var] = self.here()

    def call(self, f: Function, words: list[str]) -> None:
        """A function runs in a scope of its own; a macro in its caller's, its parameters and
        ARGN standing for their values while it runs (CMake substitutes them in its text)."""
        args = {p: words[i] if i < len(words) else "" for i, p in enumerate(f.params)}
        args["ARGN"] = ";".join(words[len(f.params) :])
        if f.macro:
            hidden = {k: self.env.get(k) for k in args}
            self.env.update(args)
            try:
                self.run(f.body)
            finally:
                for k, v in hidden.items():
                    if v is None:
                        self.env.pop(k, None)
                    else:
                        self.env[k] = v
            return
        saved = self.env
        self.env = dict(saved, **args)
        try:
            self.run(f.body)
        finally:
            self.env = saved

    def list_cmd(self, w: list[str]) -> None:
        if len(w) < 2:
            return
        op, var = w[0], w[1]
        now = self.env.get(var, "")
        if op == "APPEND":
            # the list's items (empty ones dropped, as below) then the new ones, joined without
            # splitting a list that has no empty item: CK's add_instance_library appends one
            # source at a time to lists of hundreds
            if ";;" in now or now.startswith(";") or now.endswith(";"):
                now = ";".join(x for x in now.split(";") if x)
            self.env[var] = ";".join([now, *w[2:]] if now else w[2:])
            return
        cur = [x for x in now.split(";") if x]
        if op == "REMOVE_ITEM":
            for x in set(w[2:]).intersection(cur):
                self.removed.setdefault((var, x), self.here())
                while x in cur:
                    cur.remove(x)
        elif op == "FILTER" and len(w) >= 5 and w[3] == "REGEX":
            try:
                rx = re.compile(w[4])
            except re.error:
                return
            include = w[2] == "INCLUDE"
            keep = [x for x in cur if bool(rx.search(x)) == include]
            for x in cur:
                if x not in keep:
                    self.removed.setdefault((var, x), self.here())
            cur = keep
        elif op == "REMOVE_DUPLICATES":
            cur = list(dict.fromkeys(cur))
        else:
            return
        self.env[var] = ";".join(cur)

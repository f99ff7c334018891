"""Per-library target lists: a library target that CMake compiles for its own fixed archs.

Today's CK compiles each instance source for the targets `add_instance_library` computes
(`INST_TARGETS`, per source). An older tree, or a fork, instead gives a library target its own
list: `target_compile_options(device_operations PRIVATE --offload-arch=gfx908
--offload-arch=gfx90a)`, `set_target_properties(T PROPERTIES HIP_ARCHITECTURES "gfx90a;gfx942")`
or `set_property(TARGET T PROPERTY HIP_ARCHITECTURES ...)`. Such a library's sources are built for
those archs only, whatever the tree's global target list says. A list given to an aggregate
library holds for the object libraries it takes too: `add_library(A STATIC $<TARGET_OBJECTS:L>
...)`, `target_sources(A PRIVATE $<TARGET_OBJECTS:L>)`, or `target_link_libraries(A PRIVATE L)`
(linking an object library takes its objects; INTERFACE items take nothing), through aggregates
of aggregates too.

Read from the evaluated words of those commands (variables expanded under the arch's
environment); `ckkb.extract.cmake` turns a list that leaves an arch out into a `library_targets`
build rule, the build layer of the evidence chain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ckkb.lang.cmake.syntax import Command

TARGET_COMMANDS = frozenset(
    (
        "target_compile_options",
        "set_target_properties",
        "set_property",
        "add_library",
        "target_sources",
        "target_link_libraries",
    )
)
_LINK_SCOPES = ("PRIVATE", "PUBLIC", "INTERFACE", "LINK_PRIVATE", "LINK_PUBLIC")
ARCH_PROPERTIES = ("HIP_ARCHITECTURES", "AMDGPU_TARGETS", "GPU_TARGETS")
FLAG_PROPERTIES = ("COMPILE_OPTIONS", "COMPILE_FLAGS")
_FLAG = re.compile(r"--(?:offload-arch|amdgpu-target)=([\w:+-]+)")
_OBJECTS = re.compile(r"\$<TARGET_OBJECTS:([\w-]+)>")


@dataclass(frozen=True)
class ArchList:
    archs: tuple[str, ...]  # without target features (`gfx90a:xnack+` -> gfx90a)
    file: str
    line: int
    text: str  # the command as written, shortened


@dataclass
class LibraryArchs:
    """Arch lists by target, and the object libraries each aggregate library takes."""

    lists: dict[str, ArchList] = field(default_factory=dict)
    objects_of: dict[str, list[str]] = field(default_factory=dict)

    def read(self, c: Command, words: list[str], file: str) -> None:
        """Take one command's evaluated words (`c` one of TARGET_COMMANDS)."""
        if not words:
            return
        if c.name in ("add_library", "target_sources"):
            objs = [m for w in words[1:] for m in _OBJECTS.findall(w)]
            if objs:
                self.objects_of.setdefault(words[0], []).extend(objs)
            return
        if c.name == "target_link_libraries":
            self._links(words)
            return
        targets, archs = _targets_and_archs(c.name, words)
        if not archs:
            return
        text = f"{c.name}({' '.join(c.raw.split())})"
        for t in targets:
            self.lists[t] = ArchList(tuple(dict.fromkeys(archs)), file, c.line, text[:160])

    def _links(self, words: list[str]) -> None:
        """target_link_libraries(A [scope] L...): A takes the objects of the L it links,
        except INTERFACE ones (those only pass to A's users)."""
        scope, libs = "", []
        for w in words[1:]:
            if w in _LINK_SCOPES:
                scope = w
            elif scope != "INTERFACE" and not w.startswith(("-", "$<")):
                libs.append(w)
        if libs:
            self.objects_of.setdefault(words[0], []).extend(libs)

    def merge(self, other: LibraryArchs) -> None:
        """Add `other`'s lists where this one has none for a target (this one's win)."""
        for t, a in other.lists.items():
            self.lists.setdefault(t, a)
        for t, objs in other.objects_of.items():
            self.objects_of.setdefault(t, []).extend(objs)

    def of(self, library: str) -> tuple[str, ArchList] | None:
        """(target, its arch list) that decides `library`'s archs: its own, else that of the
        nearest aggregate taking its objects (directly or through other aggregates); None when
        no list is given."""
        if library in self.lists:
            return library, self.lists[library]
        if not self.lists:
            return None
        seen, todo = {library}, [library]
        while todo:
            nxt: list[str] = []
            for lib in todo:
                for agg, objs in self.objects_of.items():
                    if agg not in seen and lib in objs:
                        if agg in self.lists:
                            return agg, self.lists[agg]
                        seen.add(agg)
                        nxt.append(agg)
            todo = nxt
        return None


def _split(values: list[str]) -> list[str]:
    return [x for v in values for x in re.split(r"[;\s]+", v) if x]


def _targets_and_archs(name: str, words: list[str]) -> tuple[list[str], list[str]]:
    """(targets, archs) a target command names; archs empty when it sets no arch list."""
    if name == "target_compile_options":
        return [words[0]], [m.split(":")[0] for w in words[1:] for m in _FLAG.findall(w)]
    if name == "set_target_properties" and "PROPERTIES" in words:
        k = words.index("PROPERTIES")
        return words[:k], _from_properties(words[k + 1 :])
    if name == "set_property" and words[0] == "TARGET" and "PROPERTY" in words:
        k = words.index("PROPERTY")
        targets = [w for w in words[1:k] if w not in ("APPEND", "APPEND_STRING")]
        return targets, _from_properties(words[k + 1 : k + 2] + [" ".join(words[k + 2 :])])
    return [], []


def _from_properties(pairs: list[str]) -> list[str]:
    out: list[str] = []
    for key, value in zip(pairs[0::2], pairs[1::2], strict=False):
        if key in ARCH_PROPERTIES:
            out += [a.split(":")[0] for a in _split([value]) if a.startswith("gfx")]
        elif key in FLAG_PROPERTIES:
            out += [m.split(":")[0] for m in _FLAG.findall(value)]
    return out

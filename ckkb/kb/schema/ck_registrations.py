"""Registration code, its gates, factory headers and CMake build rules.

Owned by ckkb/extract/registrations.py, factories.py and cmake.py. Together with the instance
tables these answer "does instance X exist on arch Y, and if not, which file:line removed it".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckkb.kb.schema.base import col, table


@table(
    "add_functions",
    "Every `add_*_instances` function definition under gpu/.",
    pk="id",
    indexes=(("name",), ("dir",)),
    fts=("name", "file"),
)
@dataclass(kw_only=True, slots=True)
class AddFunctionRow:
    id: int = col("function id")
    name: str = col("function name")
    dir: str = col("directory right under gpu/")
    file: str = col("file, relative to the CK root")
    line: int = col("line of the definition")
    interface: str = col(
        "element type of the instances vector, e.g. DeviceGemmV2<Row, Col, Row, BF16, ...>", ""
    )


@table(
    "registrations",
    "Every add_device_operation_instances(...) call: which "
    "list it instantiates with which template arguments, "
    "inside which add function, under which condition chain.",
    pk="id",
    indexes=(("function",), ("list_name",), ("list_id",), ("dir",)),
)
@dataclass(kw_only=True, slots=True)
class RegistrationRow:
    id: int = col("registration id")
    function: str = col("enclosing add function")
    function_id: int | None = col("add_functions.id", None)
    dir: str = col("directory right under gpu/")
    file: str = col("file, relative to the CK root")
    line: int = col("line of the call")
    list_name: str = col("instance list alias instantiated")
    list_id: int | None = col("instance_lists.id it resolves to (NULL when not found)", None)
    args: list[Any] = col(
        "template arguments passed to the list, as written", json=True, default=[]
    )
    bindings: dict[str, Any] = col(
        "list template parameter -> value the call passes (e.g. GemmSpec -> Default)",
        json=True,
        default={},
    )
    condition: str = col(
        "the whole guarding condition chain as readable text ('' when unconditional)", ""
    )
    conditions: list[Any] = col(
        'guards, outermost first: [{"kind": '
        '"device_name"|"capability"|"preprocessor"|"other", "text", '
        '"branch": "then"|"else", "file", "line", "arch", "op"}]',
        json=True,
        default=[],
    )


@table(
    "gates",
    "One row per `if`/`#if` that guards registrations: "
    "device-name compares, capability calls, preprocessor "
    "guards. For device-name gates `effect` is exclude (adds "
    "skipped on `arch`) or only (adds happen only on `arch`).",
    pk="id",
    indexes=(("kind",), ("dir",), ("arch",)),
)
@dataclass(kw_only=True, slots=True)
class GateRow:
    id: int = col("gate id")
    kind: str = col("device_name | capability | preprocessor | other")
    arch: str | None = col("architecture named by a device-name compare", None)
    effect: str | None = col("exclude | only (device-name gates)", None)
    dir: str = col("directory right under gpu/")
    file: str = col("file, relative to the CK root")
    line: int = col("line of the if")
    condition: str = col("the condition as written")
    has_else: bool = col("whether the if has an else branch", False)
    function: str | None = col("enclosing add function", None)


@table(
    "availability",
    "Per (registration, arch): whether the registration "
    "adds its list on that arch, and if not the first layer "
    "that removes it (build, preprocessor, registration, capability) with file and line.",
    indexes=(("registration_id", "arch"), ("arch",)),
)
@dataclass(kw_only=True, slots=True)
class AvailabilityRow:
    registration_id: int = col("registrations.id")
    arch: str = col("architecture")
    available: bool = col("added on this arch after every layer")
    layer: str | None = col(
        "first layer that removes it: build | preprocessor | registration | capability", None
    )
    file: str | None = col("file of that evidence", None)
    line: int | None = col("line of that evidence", None)
    condition: str | None = col("the rule or condition text", None)


@table(
    "factories",
    "Factory headers under library/include/ck/library/tensor_operation_instance/gpu/: "
    "which add functions serve which "
    "device-op interface, data types and layouts, under which preprocessor guards.",
    indexes=(("function",), ("file",), ("interface",)),
)
@dataclass(kw_only=True, slots=True)
class FactoryRow:
    file: str = col("factory header, relative to the CK root")
    line: int = col("line of the declaration or call")
    function: str = col("add function name")
    kind: str = col(
        "call (inside a DeviceOperationInstanceFactory specialisation) | declaration", "call"
    )
    interface: str = col("device-op interface, e.g. DeviceGemmV2", "")
    dtypes: list[Any] = col(
        "data types of the interface's template arguments, in its order (A, B, ..., C/E); "
        "for calls the value the is_same_v<...> chain binds",
        json=True,
        default=[],
    )
    layouts: list[Any] = col(
        "layouts of the interface's template arguments, in its order (A, B, ..., C/E)",
        json=True,
        default=[],
    )
    guards: list[Any] = col(
        "enclosing preprocessor conditions, outermost first", json=True, default=[]
    )


@table(
    "build_rules",
    "CMake rules of the instance libraries (CK's gpu/CMakeLists.txt and the files they read) that "
    "drop sources, targets or directories by arch, file name or a library's own arch list.",
    pk="id",
)
@dataclass(kw_only=True, slots=True)
class BuildRuleRow:
    id: int = col("rule id")
    file: str = col("CMakeLists.txt path, relative to the CK root")
    line: int = col("line of the if()")
    condition: str = col("the if() condition as written")
    action: str = col(
        "remove_source | remove_targets | skip_directory | not_listed | library_targets (a "
        "library target compiled for its own arch list, in `targets`)"
    )
    targets: list[Any] = col("targets removed (remove_targets)", json=True, default=[])
    message: str = col("the rule's own DEBUG message, if any", "")


@table(
    "file_builds",
    "Per (instance source file, arch): whether CMake "
    "compiles it for that arch, and the rule that decides.",
    indexes=(("file",), ("arch",)),
)
@dataclass(kw_only=True, slots=True)
class FileBuildRow:
    file: str = col("source file, relative to the CK root")
    arch: str = col("architecture")
    built: bool = col("compiled for this arch by a default build")
    rule_id: int | None = col("build_rules.id that removed it", None)
    line: int | None = col("line of that rule", None)
    condition: str | None = col("that rule's condition", None)


@table(
    "build_defines",
    "Preprocessor macros a default build defines, per "
    "arch: CMake add_definitions(-D...) of the top-level "
    "CMakeLists.txt (evaluated per arch) and the unconditional #defines of include/ck/ck.hpp.",
    indexes=(("arch",), ("name",)),
)
@dataclass(kw_only=True, slots=True)
class BuildDefineRow:
    arch: str = col("architecture")
    name: str = col("macro name")
    value: str = col("macro value ('1' for a bare -DNAME)", "1")
    file: str = col("where it is defined, relative to the CK root")
    line: int = col("line of the add_definitions() or #define")

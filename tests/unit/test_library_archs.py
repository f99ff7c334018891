"""Per-library target lists (issue 13): the CMake forms that give a library target its own
archs, read by ckkb.extract.library_archs. Figures are read off the CMake text by hand."""

from __future__ import annotations

from ckkb.extract.library_archs import LibraryArchs
from ckkb.lang.cmake.interpreter import Interpreter
from ckkb.lang.cmake.syntax import tokenize

CMAKE = """
add_library(device_operations STATIC $<TARGET_OBJECTS:device_gemm_instance>
    $<TARGET_OBJECTS:device_conv_instance>)
target_compile_options(device_operations PRIVATE --offload-arch=gfx908 --offload-arch=gfx90a:xnack+)
set_target_properties(device_mha_instance PROPERTIES POSITION_INDEPENDENT_CODE ON
    HIP_ARCHITECTURES "${MHA_ARCHS}")
set_property(TARGET device_fork_instance APPEND PROPERTY HIP_ARCHITECTURES gfx942 gfx960)
target_compile_options(device_other_instance PRIVATE --offload-compress)
"""


def _read(env: dict[str, str]) -> LibraryArchs:
    out, it = LibraryArchs(), Interpreter(env, "x/CMakeLists.txt")
    for c in tokenize(CMAKE):
        out.read(c, it.words(c.args), "x/CMakeLists.txt")
    return out


def test_forms_and_aggregates():
    got = _read({"MHA_ARCHS": "gfx90a;gfx942"})
    target, al = got.of("device_gemm_instance")  # through the aggregate library's objects
    assert target == "device_operations" and al.archs == ("gfx908", "gfx90a")
    assert (al.file, al.line) == ("x/CMakeLists.txt", 4)
    assert got.of("device_mha_instance")[1].archs == ("gfx90a", "gfx942")
    assert got.of("device_fork_instance")[1].archs == ("gfx942", "gfx960")
    assert got.of("device_other_instance") is None  # options, but no arch list
    assert got.of("device_unknown_instance") is None


def test_merge_keeps_the_first_list():
    a, b = _read({"MHA_ARCHS": "gfx90a"}), _read({"MHA_ARCHS": "gfx950"})
    a.merge(b)
    assert a.of("device_mha_instance")[1].archs == ("gfx90a",)


LINKS = """
add_library(device_gemm_operations STATIC)
target_sources(device_gemm_operations PRIVATE $<TARGET_OBJECTS:device_gemm_a_instance>)
target_link_libraries(device_gemm_operations PRIVATE device_gemm_b_instance -lm)
add_library(device_operations STATIC)
target_link_libraries(device_operations PUBLIC device_gemm_operations INTERFACE device_c_instance)
target_compile_options(device_operations PRIVATE --offload-arch=gfx942)
"""


def test_linked_object_libraries_and_aggregates_of_aggregates():
    out, it = LibraryArchs(), Interpreter({}, "y/CMakeLists.txt")
    for c in tokenize(LINKS):
        out.read(c, it.words(c.args), "y/CMakeLists.txt")
    # a and b reach device_operations through device_gemm_operations (lines read by hand)
    for lib in ("device_gemm_a_instance", "device_gemm_b_instance", "device_gemm_operations"):
        target, al = out.of(lib)
        assert (target, al.archs, al.line) == ("device_operations", ("gfx942",), 7), lib
    assert out.of("device_c_instance") is None  # INTERFACE: passed to users, not taken
    assert out.objects_of["device_gemm_operations"] == [
        "device_gemm_a_instance",
        "device_gemm_b_instance",
    ]

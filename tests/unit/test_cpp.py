"""ckkb.extract.cpp: the typed walk (a tree-sitter query) and error_lines (has_error pruning) must
give exactly what a full Python walk of the tree gives, on clean and on malformed C++."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.extract import cpp

_FRAGMENTS = [
    "using L = std::tuple<Op<Row, Col, S<8, 32, 1>, 256>, Op<Row, Row, S<4, 64, 1>, 128>>;",
    "template <typename T, index_t N = 4> struct DeviceX "
    ": public Base<T> { int f() { return N; } };",
    "namespace ck { namespace device {",
    "}  // namespace",
    "#ifdef CK_ENABLE_FP8",
    "#endif",
    "#if 0\nbroken ( tokens\n#endif",
    "void add_x_instances(std::vector<std::unique_ptr<Iface<A, "
    "B>>>& v) { add_device_operation_instances(v, L{}); }",
    "static constexpr auto Spec = GemmSpecialization::Default;",
    'if(ck::get_device_name() != "gfx950") { f(); } else { g(); }',
    "struct { int a; } s;",
    "using X = ;",  # malformed
    "template < <",  # malformed
    "}}",  # unbalanced
    "// a comment with std::tuple<",
    "typedef int I;",
    '#include "ck/ck.hpp"',
]

_TYPES = [
    ("alias_declaration",),
    ("template_type",),
    ("call_expression", "identifier"),
    ("declaration", "field_declaration"),
    ("struct_specifier", "class_specifier"),
    ("compound_statement",),
    ("preproc_ifdef", "preproc_if", "preproc_include"),
    ("template_argument_list", "type_descriptor", "qualified_identifier"),
]


def _key(n) -> tuple[int, int, str]:
    return (n.start_byte, n.end_byte, n.type)


def _full_walk(node, types):
    return [_key(n) for n in cpp.walk(node) if n.type in types]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=12), st.sampled_from(_TYPES))
def test_typed_walk_is_the_filtered_full_walk(parts, types):
    src = "\n".join(parts).encode()
    tree = cpp.parse(src)
    assert [_key(n) for n in cpp.walk(tree.root_node, types)] == _full_walk(tree.root_node, types)
    # from an inner node too: the node itself counts when it has one of the types
    inner = (
        tree.root_node.named_children[-1] if tree.root_node.named_child_count else tree.root_node
    )
    assert [_key(n) for n in cpp.walk(inner, types)] == _full_walk(inner, types)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=12))
def test_error_lines_match_a_full_walk(parts):
    tree = cpp.parse("\n".join(parts).encode())
    expected = sorted(
        {cpp.line(n) for n in cpp.walk(tree.root_node) if n.type == "ERROR" or n.is_missing}
    )
    assert cpp.error_lines(tree) == expected


def test_error_lines_on_real_damage():
    tree = cpp.parse(b"namespace ck {\nusing L = std::tuple<\n  Op<1, 2,\n>;\n")
    assert tree.root_node.has_error
    assert cpp.error_lines(tree)  # at least one line, and the same as the full walk (above)
    assert cpp.error_lines(cpp.parse(b"int x = 1;\n")) == []


def test_walk_of_an_unknown_type_falls_back_to_the_full_walk():
    tree = cpp.parse(b"int x = 1;")
    assert list(cpp.walk(tree.root_node, "no_such_node_type")) == []
    assert [n.type for n in cpp.walk(tree.root_node, ("ERROR",))] == []


def test_equal_bytes_share_a_parse_only_inside_shared_parses():
    src = b"using L = std::tuple<Op<1, 2>>;\n" * 300
    assert cpp.parse(src) is not cpp.parse(src)  # outside the block: nothing is kept
    with cpp.shared_parses():
        tree = cpp.parse(src)
        assert cpp.parse(bytes(bytearray(src))) is tree  # equal bytes, another object
        with cpp.shared_parses():  # nested: the same memo
            assert cpp.parse(src) is tree
        other = cpp.parse(src + b"int x;\n")
        assert other is not tree and other.root_node.end_byte == len(src) + 7
    assert cpp.parse(src) is not tree and cpp._shared is None


def test_for_parsing_keeps_offsets_and_blanks_dead_code():
    src = (
        b"struct DeviceX {\n  MACRO_LINE\n#if 0\n  junk "
        b"( \n#endif\n  bool f() { return a >= b; }\n};\n"
    )
    out = cpp.for_parsing(src)
    assert len(out) == len(src) and out.count(b"\n") == src.count(b"\n")
    assert b"MACRO_LINE" not in out and b"junk" not in out and b">=" not in out
    assert not cpp.parse(out).root_node.has_error

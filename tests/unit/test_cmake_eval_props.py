"""The CMake evaluator answers as the plain rules it implements (issue 12's speed work changed
how it evaluates): each property compares the evaluator with a reference written here, apart
from it (the rules as the evaluator's docstrings state them), on generated input.

- AND/OR chains are tried flat, operands that expand no reference first: the answer is that of
  left-to-right short-circuit evaluation;
- MATCHES: the answer of `re.search`;
- references are substituted from remembered results: the answer of substituting every
  reference until none is left or nothing changes;
- list(APPEND) joins the new items to a list that has no empty item without splitting it, and
  REMOVE_ITEM removes each named item: the value and the removals of splitting, dropping empty
  items, then appending or removing.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.lang.cmake.conditions import And, Arg, Binary, Cond, Not, Or, expand
from ckkb.lang.cmake.interpreter import Interpreter
from tests.cmake_conditions import conditions

_names = st.sampled_from(["A", "B", "INST_TARGETS", "source_name", "x_1"])
_values = st.sampled_from(["gfx942", "gfx950", "_mx", "ON", "OFF", "1", "0", "", "a b", "${A}"])
_args = st.one_of(
    st.builds(Arg, _names),
    st.builds(lambda v: Arg(v, True), _values),
    st.builds(lambda n: Arg("${" + n + "}"), _names),
    st.builds(lambda n: Arg("x${" + n + "}", True), _names),
)
_cond = conditions(_args, ["DEFINED"], ["MATCHES", "STREQUAL"], max_leaves=10)
_env = st.dictionaries(_names, _values, max_size=5)


def _reference(c: Cond, env: dict[str, str]) -> bool:
    """Left to right, short-circuit, each leaf by its own test."""
    if isinstance(c, And):
        return _reference(c.left, env) and _reference(c.right, env)
    if isinstance(c, Or):
        return _reference(c.left, env) or _reference(c.right, env)
    if isinstance(c, Not):
        return not _reference(c.expr, env)
    return c.holds(env)


@settings(max_examples=400, deadline=None)
@given(_cond, _env)
def test_and_or_chains_answer_as_left_to_right(c, env):
    assert c.holds(env) is _reference(c, env)


_text = st.text(alphabet="ab_- .x|*", max_size=6)


@settings(max_examples=400, deadline=None)
@given(_text, _text)
def test_matches_answers_as_re_search(lhs, pattern):
    try:
        want = re.search(pattern, lhs) is not None
    except re.error:
        want = False  # a pattern re cannot read matches nothing
    assert Binary("MATCHES", Arg(lhs, True), Arg(pattern, True)).holds({}) is want


_VAR = re.compile(r"\$\{([^}]*)\}")


def _expand_reference(text: str, env: dict[str, str]) -> str:
    prev = None
    while prev != text and "${" in text:
        prev = text
        text = _VAR.sub(lambda m: env.get(m.group(1), ""), text)
    return text


_pieces = st.lists(
    st.one_of(_names.map(lambda n: "${" + n + "}"), st.sampled_from(["a", ";", "$", "{", "}"])),
    max_size=5,
).map("".join)


# values refer to variables no value defines: expansion ends (a cycle of values never would)
_values_with_refs = st.lists(st.sampled_from(["a", ";", "${y}", "${x_1}"]), max_size=4).map("".join)


@settings(max_examples=400, deadline=None)
@given(_pieces, st.dictionaries(_names.filter(lambda n: n != "x_1"), _values_with_refs))
def test_expand_answers_as_repeated_substitution(text, env):
    assert expand(text, env) == _expand_reference(text, env)
    assert expand(text, env) == _expand_reference(text, env)  # the remembered results too


_items = st.sampled_from(["a", "b", "c", ""])
_ops = st.lists(
    st.tuples(st.sampled_from(["APPEND", "REMOVE_ITEM"]), st.lists(_items, max_size=3)),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_items, max_size=4).map(";".join), _ops)
def test_list_append_and_remove_answer_as_split_and_join(start, ops):
    it = Interpreter({"L": start}, "CMakeLists.txt")
    value, removed = start, {}
    for op, words in ops:
        it.list_cmd([op, "L", *words])
        cur = [x for x in value.split(";") if x]
        if op == "APPEND":
            cur += words
        else:
            removed.update({("L", x): None for x in cur if x in words and ("L", x) not in removed})
            cur = [x for x in cur if x not in words]
        value = ";".join(cur)
        assert it.env["L"] == value
        assert it.removed == removed

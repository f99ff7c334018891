"""Generated CMake condition trees for the property tests of the condition evaluator."""

from __future__ import annotations

from hypothesis import strategies as st

from ckkb.lang.cmake.conditions import And, Arg, Binary, Cond, Not, Or, Truth, Unary


def conditions(
    args: st.SearchStrategy[Arg],
    unary_ops: list[str],
    binary_ops: list[str],
    max_leaves: int,
) -> st.SearchStrategy[Cond]:
    """NOT/AND/OR trees over truth tests, `unary_ops` and `binary_ops` of `args`."""
    leaf = st.one_of(
        st.builds(Truth, args),
        st.builds(Unary, st.sampled_from(unary_ops), args),
        st.builds(Binary, st.sampled_from(binary_ops), args, args),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(Not, inner), st.builds(And, inner, inner), st.builds(Or, inner, inner)
        ),
        max_leaves=max_leaves,
    )

"""ckkb.kb.validate: the streamed content hash over normalised line ends, and cut last lines."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb.kb.validate import complete_lines, normalised_sha256

TEXT = st.lists(st.sampled_from([b"a", b"Perf: 1 ms", b" ", b"\t", b"\r", b"\n", b"\r\n"]))


def _reference(data: bytes) -> str:
    """The same normalisation written apart: in memory, on the whole file at once."""
    body = data.replace(b"\r\n", b"\n").rstrip(b" \t\r\n")
    return hashlib.sha256(body + b"\n" if body else b"").hexdigest()


@settings(max_examples=200, deadline=None)
@given(parts=TEXT, chunk=st.integers(min_value=1, max_value=9))
def test_streamed_hash_matches_the_whole_file_at_once(tmp_path_factory, parts, chunk):
    p = tmp_path_factory.mktemp("h") / "log.txt"
    data = b"".join(parts)
    p.write_bytes(data)
    assert normalised_sha256(p, chunk) == _reference(data)


def test_crlf_and_trailing_newlines_hash_the_same(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b"x\ny\n")
    b.write_bytes(b"x\r\ny\r\n")
    c.write_bytes(b"x\ny\n\n\n")
    assert normalised_sha256(a) == normalised_sha256(b) == normalised_sha256(c)
    c.write_bytes(b"x\ny\nz\n")
    assert normalised_sha256(a) != normalised_sha256(c)


def test_a_cut_last_line_is_reported_not_yielded():
    cut: list[tuple[int, str]] = []
    lines = list(complete_lines(["a\n", "b\r\n", "DeviceGemmXd"], lambda n, t: cut.append((n, t))))
    assert lines == ["a\n", "b\r\n"] and cut == [(3, "DeviceGemmXd")]
    cut.clear()
    assert list(complete_lines(["a\n", "b\n"], lambda n, t: cut.append((n, t)))) == ["a\n", "b\n"]
    assert list(complete_lines(["a\n", "  "], lambda n, t: cut.append((n, t)))) == ["a\n", "  "]
    assert cut == []

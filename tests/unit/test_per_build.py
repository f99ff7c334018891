"""Facts shared within one build (`kb.stages.per_build`): computed once per build, never kept."""

from __future__ import annotations

from pathlib import Path

from ckkb import pipeline
from ckkb.extract import files, instance_roots
from ckkb.kb.build import build
from ckkb.kb.stages import one_build, per_build
from ckkb.sources import ck_tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_per_build_computes_once_within_a_build_and_afresh_outside():
    calls: list[tuple[str, int]] = []

    @per_build
    def fact(name: str, n: int = 0) -> tuple[str, int]:
        calls.append((name, n))
        return (name, len(calls))

    assert fact("a") == ("a", 1)
    assert fact("a") == ("a", 2)  # outside a build: every call computes
    with one_build():
        first = fact("a")
        assert fact("a") is first and fact("b") == ("b", 4)
        assert fact("a", n=1) == ("a", 5)  # other arguments: another fact
        with one_build():  # a nested block sees the outer build's facts
            assert fact("a") is first
    assert fact("a") == ("a", 6)  # the block's facts went with it
    assert calls == [("a", 0), ("a", 0), ("a", 0), ("b", 0), ("a", 1), ("a", 0)]


def test_a_build_walks_a_ck_tree_and_lists_a_directory_once(tmp_path, monkeypatch):
    # three stages list files by the instance roots and three combines read them; instances,
    # registrations and the CMake rules each list gpu/: one walk of each per build
    walks: list[Path] = []
    tops: list[str] = []
    walk_roots, os_walk = instance_roots._walk, files.os.walk

    def counted_roots(root: Path, *args: list[str]) -> instance_roots.InstanceRoots:
        walks.append(root)
        return walk_roots(root, *args)

    def counted_os_walk(top, *args, **kwargs):  # type: ignore[no-untyped-def]
        tops.append(str(top))
        return os_walk(top, *args, **kwargs)

    monkeypatch.setattr(instance_roots, "_walk", counted_roots)
    monkeypatch.setattr(files.os, "walk", counted_os_walk)
    tree = ck_tree(FIXTURES / "ck_mini")
    build(tmp_path / "kb.db", {"ck": tree}, stages=pipeline.stages(), jobs=1)
    assert walks == [tree.root]
    gpu = str(tree.root / "library/src/tensor_operation_instance/gpu")
    assert tops.count(gpu) == 1
    assert len(tops) == len(set(tops))  # no directory listed twice

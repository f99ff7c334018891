"""A knowledge base of two CK trees: tests/fixtures/ck_mini (named 1.2.0, the default) and
ck_mini_next (1.3.0): ck_mini with the overlay tests/fixtures/ck_mini_next copied over it (see its
README: part2's 224x256x64 entry gone, part2 registered on gfx950 too, entries two lines down)."""

from __future__ import annotations

from pathlib import Path

from ckkb import pipeline
from ckkb.kb.build import build
from ckkb.sources import ck_tree, named_tree
from tests.overlays import overlay_tree

FIXTURES = Path(__file__).parent / "fixtures"
OLD, NEW = "1.2.0", "1.3.0"


def next_tree(tmp: Path) -> Path:
    """ck_mini with the ck_mini_next overlay, under tmp."""
    return overlay_tree(tmp, "ck_mini_next")


def build_two_trees(tmp: Path) -> Path:
    """The two-tree knowledge base, built under tmp; its path."""
    db = tmp / "two.db"
    trees = [
        named_tree(ck_tree(FIXTURES / "ck_mini"), OLD),
        named_tree(ck_tree(next_tree(tmp)), NEW),
    ]
    build(db, trees, stages=pipeline.stages(), jobs=1)
    return db

"""Trees with the same contents share one set of rows.

A tree's fingerprint (`tree_fingerprint`) covers every input file's bytes and the extractors'
versions, whatever its path: two trees of one kind with one fingerprint have the same rows (the
premise `reuse` already copies rows on). So the later tree holds none of its own. Its `sources`
row names the earlier tree in `rows_of`, and readers scope by the tree's rows id
(`ckkb.kb.trees`). Adding a copy of a tree then costs its inventory, not a copy of its rows and of
their full-text entries; and one build of both trees writes what two builds adding them write.

Decided after the inventory, before anything is combined: a tree shares rows only when none of its
files is a miss of its own (each is cached, or a twin of an earlier tree's miss), so its
fingerprint is known then; the earlier tree's misses are hashed for the comparison (`file_sha`,
read once per build).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ckkb.kb.build.plan import StagePlan, file_sha
from ckkb.kb.build.writer import FingerprintPart, tree_fingerprint
from ckkb.sources import NamedTree

# the later trees' twins of an earlier tree's miss: (stage, first root, rel) -> [(root, size,
# mtime_ns, sha), ...] (ckkb.kb.build.run's `pair`)
Twins = Mapping[tuple[str, str, str], Sequence[tuple[str, int, int, str]]]


def shared_rows(
    trees: Sequence[NamedTree],
    plans: Mapping[tuple[str, str], StagePlan],
    parts: Mapping[str, Sequence[FingerprintPart]],
    twins: Twins,
    versions: Mapping[str, str],
) -> dict[str, str]:
    """tree name -> the name of the earlier tree whose rows it reads, for each tree of this build
    whose contents equal an earlier one's. `plans` are keyed by (stage, tree name); `parts` are
    each tree's fingerprint parts of its cached files."""
    of_tree: dict[str, list[StagePlan]] = {}
    for (_, name), plan in sorted(plans.items()):
        of_tree.setdefault(name, []).append(plan)
    rels = {
        name: sorted((stage, rel) for (stage, n), p in plans.items() if n == name for rel in p.rels)
        for name in of_tree
    }
    twin_parts: dict[str, list[FingerprintPart]] = {}
    by_root = {os.fspath(t.root): t.name for t in trees}
    for (stage, _, rel), later in twins.items():
        for root, _, _, sha in later:
            twin_parts.setdefault(by_root[root], []).append((stage, versions[stage], rel, sha))
    known: dict[str, str] = {}  # tree name -> fingerprint, computed when first needed

    def fp(t: NamedTree) -> str:
        if t.name not in known:
            own = [
                (stage, versions[stage], rel, file_sha(os.path.join(root, rel)))
                for p in of_tree.get(t.name, [])
                for stage, root, rel in p.misses
            ]
            every = [*parts.get(t.name, ()), *twin_parts.get(t.name, ()), *own]
            known[t.name] = tree_fingerprint(t.kind, every)
        return known[t.name]

    out: dict[str, str] = {}
    holders: list[NamedTree] = []
    for t in trees:
        if not any(p.misses for p in of_tree.get(t.name, [])):
            same = next(
                (
                    h
                    for h in holders
                    if h.kind == t.kind and rels.get(h.name) == rels.get(t.name) and fp(h) == fp(t)
                ),
                None,
            )
            if same is not None:
                out[t.name] = same.name
                continue
        holders.append(t)
    return out

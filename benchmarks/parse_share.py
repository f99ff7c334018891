"""How much of the workers' extraction is tree-sitter parsing, per CK stage, against the bare parse
that `benchmarks/build.py` takes as its reference.

    python3 benchmarks/parse_share.py [--ck PATH]

Runs every CK stage's per-file extraction in this one process, as the build's workers do (one
task per file, stages that extract with another in the same task, `cpp.shared_parses` around it),
with the C++ parser wrapped to time each parse. Prints per stage: parses, MiB parsed, parse CPU,
extraction CPU and what is left (reading the trees, in Python), then the reference's input
(every file of the directories the CK stages read, read and parsed once, as written). CPU seconds
(`time.process_time`): this shared machine's load moves them by 10-30% between runs; compare
shares, not seconds across runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.build import FILES, SUFFIXES, dirs  # noqa: E402
from ckkb import pipeline, sources  # noqa: E402
from ckkb.extract import cpp  # noqa: E402
from ckkb.extract.files import list_files  # noqa: E402
from ckkb.kb.build import workers  # noqa: E402
from ckkb.kb.stages import build_order, one_build, register_stages  # noqa: E402


class TimedParser:
    """cpp.parser()'s stand-in: the real parser, each parse timed and charged to `stage`."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.stage = ""
        self.parses: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.cpu: defaultdict[str, float] = defaultdict(float)

    def parse(self, data: bytes) -> Any:
        t0 = time.process_time()
        tree = self.real.parse(data)
        self.cpu[self.stage] += time.process_time() - t0
        self.parses[self.stage] += 1
        self.bytes[self.stage] += len(data)
        return tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ck", default=None, help="CK tree (default: the wheel's)")
    a = ap.parse_args()
    root = sources.ck_tree(a.ck).root
    stages = [s for s in build_order(pipeline.stages()) if s.tree == "ck"]
    register_stages(stages)
    misses: list[workers.Miss] = []
    with one_build():
        for s in stages:
            misses += [(s.name, str(root), os.path.relpath(p, root)) for p in s.files(root)]
    timed = TimedParser(cpp.parser())
    cpp.parser = lambda: timed  # type: ignore[assignment]  # this process only
    extract: defaultdict[str, float] = defaultdict(float)
    for task_root, rel, names in workers.file_tasks(misses):
        data = (Path(task_root) / rel).read_bytes()
        with cpp.shared_parses():
            for name in names:
                timed.stage = name
                t0 = time.process_time()
                workers.get_stage(name).extract(Path(task_root), rel, data)
                extract[name] += time.process_time() - t0
    print(f"CK tree: {root}")
    head = f"{'stage':<18} {'parses':>7} {'MiB':>7} {'parse s':>8} {'extract s':>10} {'rest s':>7}"
    print(head)
    print("-" * len(head))
    for s in stages:
        n = s.name
        print(
            f"{n:<18} {timed.parses[n]:>7} {timed.bytes[n] / 2**20:>7.2f} {timed.cpu[n]:>8.2f} "
            f"{extract[n]:>10.2f} {extract[n] - timed.cpu[n]:>7.2f}"
        )
    total_parse, total = sum(timed.cpu.values()), sum(extract.values())
    print("-" * len(head))
    print(
        f"{'all CK stages':<18} {sum(timed.parses.values()):>7} "
        f"{sum(timed.bytes.values()) / 2**20:>7.2f} {total_parse:>8.2f} {total:>10.2f} "
        f"{total - total_parse:>7.2f}  (parse {total_parse / total:.0%} of extraction)"
    )
    paths = [p for d in dirs(root) for p in list_files(root, d, SUFFIXES)]
    paths += [root / f for f in FILES if (root / f).is_file()]
    n_bytes, t0 = 0, time.process_time()
    for p in paths:  # benchmarks/build.py's reference, in CPU seconds
        data = p.read_bytes()
        timed.real.parse(data)
        n_bytes += len(data)
    print(
        f"{'reference':<18} {len(paths):>7} {n_bytes / 2**20:>7.2f} "
        f"{time.process_time() - t0:>8.2f}  (every file those stages read, parsed once as written)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

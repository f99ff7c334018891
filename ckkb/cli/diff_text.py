"""`ckkb diff` between two CK trees, for people: the counts first (instances by directory and data
type, availability flips by arch), then the items of each part when there are few enough to read.

A whole-tree diff (the wheel's CK against 2024-10) has some 12,000 instance items: listed one per
line they bury the answer. Past LIST_AT items a part says how many there are and how to narrow
them (--dir, --dtype, --layout, --arch); --json always holds every item.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ckkb.cli.output import console, print_table
from ckkb.fields import enum_word, normalise
from ckkb.sources import CK_INSTANCE_DIR

LIST_AT = 200  # the most items of one part (instances, gates, calls, ops) listed one per line
_MARKS = {"added": "+", "removed": "-"}


def _say(line: str) -> None:
    console.print(line, soft_wrap=True, highlight=False)


def print_ck(res: dict[str, Any]) -> None:
    """The text of a CK diff (res: ckkb.versions.diff.diff's answer)."""
    compared = [a["arch"] for a in res["archs"] if a["compared"]]
    one_side = [
        f"{a['arch']} ({res['from'] if a['from'] else res['to']} only)"
        for a in res["archs"]
        if a["from"] != a["to"]
    ]
    _say(f"{res['from']} -> {res['to']}; availability compared on: {', '.join(compared) or '-'}")
    if one_side:
        _say(f"archs one tree knows: {', '.join(one_side)}")
    inst = res["instances"]
    if sum(map(len, inst.values())):
        print_table(by_dir(inst), ["dir", "dtype", "added", "removed", "changed"], "instances")
    flips = by_arch(inst["changed"])
    if flips:
        print_table(flips, ["arch", "now available", "no longer available"], "changed, by arch")
    n = sum(map(len, inst.values()))
    if _listed("instance", n):
        for change in ("added", "removed"):
            for i in inst[change]:
                _say(f"{_MARKS[change]} {_describe(i)}  {_short(_where(i, change))}")
        for i in inst["changed"]:
            _say(f"~ {_describe(i)}  {', '.join(_flip(a) for a in i['archs'])}")
    gates = res["gates"]
    if _listed("gate", len(gates["added"]) + len(gates["removed"])):
        for change in ("added", "removed"):
            for g in gates[change]:
                _say(f"{_MARKS[change]} gate {g['condition']}  {_short(_where(g, change))}")
    regs = res["registrations"]
    if _listed("registering call", len(regs["added"]) + len(regs["removed"])):
        for change in ("added", "removed"):
            for r in regs[change]:
                where = _short(_where(r, change))
                _say(f"{_MARKS[change]} call {r['list']} in {r['function']}  {where}")
    ops = res["profiler_ops"]
    if _listed("ckProfiler op", sum(map(len, ops.values()))):
        for change in ("added", "removed"):
            for o in ops[change]:
                _say(f"{_MARKS[change]} ckProfiler {o['name']}")
        for o in ops["changed"]:
            _say(f"~ ckProfiler {o['name']}: {', '.join(o['changes'])}")
    summary = [
        ["instances", len(inst["added"]), len(inst["removed"]), len(inst["changed"])],
        ["gates", len(gates["added"]), len(gates["removed"]), ""],
        ["registrations", len(regs["added"]), len(regs["removed"]), ""],
        ["profiler ops", len(ops["added"]), len(ops["removed"]), len(ops["changed"])],
    ]
    print_table(summary, ["", "added", "removed", "changed"], title="--json lists every item")


def _listed(what: str, n: int) -> bool:
    """Whether a part's `n` items are listed; else one line saying how to see them."""
    if n <= LIST_AT:
        return True
    _say(
        f"{n} {what} items, not listed (more than {LIST_AT}): narrow with --dir, --dtype, "
        "--layout or --arch, or --json for every item"
    )
    return False


def by_dir(inst: dict[str, list[dict[str, Any]]]) -> list[list[Any]]:
    """[dir, dtype, added, removed, changed] per (dir, dtype) with an item, in dir order."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for change, items in inst.items():
        for i in items:
            key = (i["dir"] or "(gpu/)", i["dtype"] or "?")
            counts.setdefault(key, Counter())[change] += 1
    return [[d, t, c["added"], c["removed"], c["changed"]] for (d, t), c in sorted(counts.items())]


def by_arch(changed: list[dict[str, Any]]) -> list[list[Any]]:
    """[arch, changed instances available now, no longer] per arch with a flip."""
    gained: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    order: dict[str, None] = {}
    for i in changed:
        for a in i["archs"]:
            order.setdefault(a["arch"])
            if a["to"]["available"] and not a["from"]["available"]:
                gained[a["arch"]] += 1
            elif a["from"]["available"] and not a["to"]["available"]:
                lost[a["arch"]] += 1
    return [[a, gained[a], lost[a]] for a in sorted(order, key=lambda a: (len(a), a))]


def _describe(i: dict[str, Any]) -> str:
    n = normalise(i["fields"])
    words = [i["template"], i["dir"], i["dtype"], i["layout"], i["tile"]]
    words += [enum_word(n.get("pipeline")), enum_word(n.get("scheduler"))]
    return " ".join(str(w) for w in words if w)


def _short(path: str) -> str:
    """gpu/... for people (JSON keeps paths whole)."""
    prefix = CK_INSTANCE_DIR + "/"
    return "gpu/" + path[len(prefix) :] if path.startswith(prefix) else path


def _where(item: dict[str, Any], change: str) -> str:
    return str(item["to"] if change == "added" else item["from"])


def _flip(a: dict[str, Any]) -> str:
    def word(ev: dict[str, Any]) -> str:
        return "yes" if ev["available"] else "no"

    return f"{a['arch']}: {word(a['from'])} -> {word(a['to'])}"

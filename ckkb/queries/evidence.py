"""Whether an instance is available on an arch, and why: the one evaluator `why`, `instances` and
`ckkb diff` share.

An entry is available on an arch when it is active, some registering call of its list adds the
list on that arch (the availability table), and no #if inside the list drops it there
(instance_gates). The facts are read set-wise, a fixed number of statements for any number of
instances and archs (ckkb/queries/lookups/evidence_*.sql): the calls of every list named, their
availability on every arch asked, the list-internal gates of every instance on those archs.
`dress` then puts one instance on one arch together, and `reasons` names what removes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckkb.kb.db import json_value
from ckkb.queries import rows as run


@dataclass
class Facts:
    """The registering calls per list, their availability per (call, arch), and the list-internal
    gate per (instance, arch), for the instances and archs asked."""

    calls: dict[int, list[dict[str, Any]]]
    available: dict[tuple[int, str], dict[str, Any]]
    gates: dict[tuple[int, str], tuple[str, int, str]]


def facts(conn: Any, instances: Sequence[Mapping[str, Any]], archs: Iterable[str]) -> Facts:
    """The facts `dress` needs for `instances` (rows with id and list_id) on `archs`."""
    wanted = sorted(set(archs))
    list_ids = sorted({r["list_id"] for r in instances if r["list_id"] is not None})
    calls: dict[int, list[dict[str, Any]]] = {}
    for r in run(conn, "lookups", "evidence_registrations", {"list_ids": json.dumps(list_ids)}):
        calls.setdefault(r["list_id"], []).append(r)
    available: dict[tuple[int, str], dict[str, Any]] = {}
    gates: dict[tuple[int, str], tuple[str, int, str]] = {}
    if wanted and calls:
        params = {
            "registration_ids": json.dumps([c["id"] for cs in calls.values() for c in cs]),
            "archs": json.dumps(wanted),
        }
        for r in run(conn, "lookups", "evidence_availability", params):
            available[(r["registration_id"], r["arch"])] = r
    if wanted and instances:
        params = {"ids": json.dumps([r["id"] for r in instances]), "archs": json.dumps(wanted)}
        for r in run(conn, "lookups", "evidence_instance_gates", params):
            gates[(r["instance_id"], r["arch"])] = (r["file"], r["line"], r["condition"])
    return Facts(calls, available, gates)


def dress(
    r: Mapping[str, Any], found: Facts, arch: str | None, details: bool = True
) -> dict[str, Any]:
    """Instance row `r` on `arch` (None: no arch; availability unknown): its registering calls,
    each with whether it adds the entry there and the layer that decided, and `available`."""
    calls = found.calls.get(r["list_id"], []) if r["list_id"] is not None else []
    active = r["status"] == "active"
    status = r["status"] if not active or calls else "unregistered"
    gate = found.gates.get((r["id"], arch)) if arch is not None else None
    out = []
    for c in calls:
        a = found.available.get((c["id"], arch)) if arch is not None else None
        layer = a["layer"] if a else None
        where = (a["file"], a["line"], a["condition"]) if a else (None, None, None)
        avail = None if arch is None else bool(active and a and a["available"])
        if gate is not None and layer != "build":
            # an #if on arch macros inside the list drops the entry (instance_gates)
            avail = False
            layer, where = "preprocessor", gate
        out.append(
            {
                "function": c["function"],
                "file": c["file"],
                "line": c["line"],
                "args": json_value(c["args"]) if details else None,
                "available": avail,
                "_layer": layer,
                "_efile": where[0],
                "_eline": where[1],
                "_cond": where[2],
            }
        )
    return {
        "id": r["id"],
        "template": r["template"],
        "dir": r["dir"],
        "file": r["file"],
        "line": r["line"],
        "list": r["list_name"],
        "list_comment": r["list_comment"] or "",
        "status": status,
        "reason": r["reason"] or "",
        "fields": (json_value(r.get("fields")) or {}) if details else {},
        "registrations": out,
        "available": None if arch is None else any(x["available"] for x in out),
    }


def reasons(inst: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What removes a dressed instance on its arch: a commented-out entry, a list no call
    registers, else each distinct layer (file:line, condition) that keeps a call from adding it."""
    base = {"list": inst["list"], "list_comment": inst["list_comment"]}
    if inst["status"] == "commented_out":
        return [
            dict(
                layer="commented_out",
                file=inst["file"],
                line=inst["line"],
                condition=inst["reason"] or "entry is commented out",
                **base,
            )
        ]
    if not inst["registrations"]:
        return [
            dict(
                layer="registration",
                file=inst["file"],
                line=inst["line"],
                condition=f"no add_*_instances function registers {inst['list']}",
                **base,
            )
        ]
    out, seen = [], set()
    for g in inst["registrations"]:
        if g["available"] or g["_layer"] is None:
            continue
        key = (g["_layer"], g["_efile"], g["_eline"], g["_cond"])
        if key in seen:
            continue
        seen.add(key)
        out.append(
            dict(
                layer=g["_layer"], file=g["_efile"], line=g["_eline"], condition=g["_cond"], **base
            )
        )
    return out


def chain(inst: Mapping[str, Any]) -> dict[str, Any]:
    """{"available", "reasons", "added_by"} of a dressed instance: `why`'s answer in short."""
    return {
        "available": bool(inst["available"]),
        "reasons": [] if inst["available"] else reasons(inst),
        "added_by": [
            {"function": g["function"], "file": g["file"], "line": g["line"]}
            for g in inst["registrations"]
            if g["available"]
        ],
    }


def evidence_of(conn: Any, wanted: Mapping[str, Sequence[int]]) -> dict[tuple[int, str], Any]:
    """(instance id, arch) -> `chain` for every arch of `wanted` and each instance id it lists:
    four statements, whatever the number of instances and archs."""
    ids = sorted({i for per in wanted.values() for i in per})
    if not ids:
        return {}
    found = run(conn, "lookups", "evidence_instances", {"ids": json.dumps(ids)})
    by_id = {r["id"]: r for r in found}
    known = facts(conn, found, wanted)
    out: dict[tuple[int, str], Any] = {}
    # the chain of an entry that is not commented out, in a list some call registers, depends on
    # the entry only through its list, status and list-internal gate: one chain per such key,
    # shared (read-only) by the entries that have it
    same: dict[tuple[Any, ...], Any] = {}
    for arch, per in wanted.items():
        for i in per:
            r = by_id.get(i)
            if r is None:
                continue
            if r["status"] == "commented_out" or not known.calls.get(r["list_id"]):
                out[(i, arch)] = chain(dress(r, known, arch, details=False))
                continue
            key = (r["list_id"], r["list_name"], arch, r["status"], known.gates.get((i, arch)))
            if key not in same:
                same[key] = chain(dress(r, known, arch, details=False))
            out[(i, arch)] = same[key]
    return out

"""Per canned query: which column answers it, its evidence, its summary line, why it can be empty.

A query without an entry here gets the default page (its columns as the SQL orders them, a row
count as its summary), so a new .sql file under ckkb/queries/canned works before it has a spec.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlencode

import markupsafe

from ckkb.archs import is_arch_column
from ckkb.web.shape import Row, Spec, counts, tile_of, yes_no

_TILE = {"tile": tile_of}
_TILE_PARTS = ("tile_m", "tile_n", "tile_k")


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n:,} {word}"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n:,} {word[:-1]}ies"
    return f"{n:,} {word}s"


def _bits(d: dict[Any, int]) -> str:
    return ", ".join(f"{n} {escape(str(k))}" for k, n in sorted(d.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------- why_missing


def _instance_available(rows: list[Row]) -> bool:
    return any(r.get("available") for r in rows)


def _why_pick(rows: list[Row]) -> int:
    """The row that speaks for an instance: a call that adds it, else the first that does not."""
    return next((k for k, r in enumerate(rows) if r.get("available")), 0)


def _why_fold(rows: list[Row], cells: list[list[Any]], cols: list[str]) -> markupsafe.Markup:
    regs = [r for r in rows if r.get("registration_id") is not None]
    if not regs:
        return markupsafe.Markup('<span class="ckkb-note">no registering call</span>')
    added = sum(1 for r in regs if r.get("available"))
    items = "".join(
        f"<li>{yes_no(bool(r.get('available')))} <code>{escape(r.get('function') or '')}</code> "
        f'<span title="{escape(r.get("registration_file") or "")}">'
        f"{escape((r.get('registration_file') or '').rsplit('/', 1)[-1])}:"
        f"{r.get('registration_line')}</span></li>"
        for r in regs
    )
    return markupsafe.Markup(
        f"<details><summary>{added} of {len(regs)} calls add it</summary><ul>{items}</ul></details>"
    )


def _why_summary(rows: list[Row], args: dict[str, str]) -> str:
    per: dict[Any, list[Row]] = {}
    for r in rows:
        per.setdefault(r["instance_id"], []).append(r)
    avail = [i for i, rs in per.items() if _instance_available(rs)]
    missing = {i: rs[_why_pick(rs)] for i, rs in per.items() if not _instance_available(rs)}
    arch = escape(args.get("arch", ""))
    tile = escape(args.get("tile", "") or "any tile")
    out = (
        f"{_plural(len(per), 'instance')} with tile {tile}: <b>{len(missing)} missing</b>, "
        f"{len(avail)} available on {arch}"
    )
    if missing:
        out += f" (missing by layer: {_bits(counts(list(missing.values()), 'layer'))})"
    return out + f"; {_plural(len(rows), 'registering call')} in all."


WHY_MISSING = Spec(
    lead=(
        "available",
        "instance_id",
        "tile",
        "layer",
        "evidence_file",
        "evidence_line",
        "evidence",
        "list_comment",
        "registrations",
        "list_name",
    ),
    answer="available",
    decisive=("layer", "evidence", "evidence_file", "list_comment"),
    hide=(
        *_TILE_PARTS,
        "file",
        "line",
        "status",
        "reason",
        "registration_id",
        "function",
        "registration_file",
        "registration_line",
        "registration_args",
    ),
    group_by="instance_id",
    fold=_why_fold,
    pick=_why_pick,
    derived=_TILE,
    summary=_why_summary,
    empty="Leave <code>tile</code> empty to see every instance, or try a nearest tile.",
)


# ---------------------------------------------------------------- arch_diff


def _diff_summary(rows: list[Row], args: dict[str, str]) -> str:
    on = counts(rows, "present_on")
    a, b = args.get("arch_a", ""), args.get("arch_b", "")
    lists = len({r.get("list_name") for r in rows})
    return (
        f"{_plural(len(rows), 'instance')} in {_plural(lists, 'list')} (one row each) differ: "
        f"<b>{on.get(a, 0)} only on {escape(a)}</b>, <b>{on.get(b, 0)} only on {escape(b)}</b>; "
        "evidence is the first layer that removes each on the other arch."
    )


def _diff_fold(rows: list[Row], cells: list[list[Any]], cols: list[str]) -> markupsafe.Markup:
    """A list's instances in one cell: how many, their tiles, each linked to its explain page."""
    tiles = list(dict.fromkeys(tile_of(r) or "?" for r in rows))
    shown = ", ".join(tiles[:4]) + (", …" if len(tiles) > 4 else "")
    k = cols.index("instance_id")  # its cell links to the explain page (ckkb.web.cells)
    items = "".join(
        f"<li>{c[k]} {escape(tile_of(r) or '')}</li>" for r, c in zip(rows, cells, strict=True)
    )
    return markupsafe.Markup(
        f"<details><summary>{_plural(len(rows), 'instance')}: {escape(shown)}</summary>"
        f"<ul>{items}</ul></details>"
    )


ARCH_DIFF = Spec(
    lead=("present_on", "absent_on", "evidence", "instances", "list_name", "dir", "template"),
    answer="present_on",
    decisive=("absent_on", "evidence"),
    hide=(*_TILE_PARTS, "instance_id", "tile", "file", "line"),
    derived=_TILE,
    group_by="list_name",
    fold=_diff_fold,
    fold_name="instances",
    summary=_diff_summary,
    empty="The two archs register the same instances.",
)


# ---------------------------------------------------------------- pool


def _arch_columns(cols: list[str] | Row) -> list[str]:
    """The per-arch columns (pool's `per_arch` expanded): the tree's archs, in its order."""
    return [c for c in cols if is_arch_column(c)]


def _pool_archs(cols: list[str], rows: list[Row], args: dict[str, str]) -> list[str]:
    """Arch columns with anything on them (and the asked one); the others are all 'no'."""
    archs = _arch_columns(cols)
    keep = {a for a in archs if a == args.get("arch") or any(r.get(a) for r in rows)}
    return [c for c in cols if c not in archs or c in keep]


def _pool_differs(r: Row, shown: list[str]) -> str:
    archs = _arch_columns(shown)
    return "ckkb-differs" if len({bool(r.get(a)) for a in archs}) > 1 else ""


def _pool_summary(rows: list[Row], args: dict[str, str]) -> str:
    arch = args.get("arch", "")
    others = [a for a in _arch_columns(rows[0]) if a != arch and any(r.get(a) for r in rows)]
    also = ", ".join(f"{sum(1 for r in rows if r.get(a))} also on {a}" for a in others)
    differ = sum(1 for r in rows if len({bool(r.get(a)) for a in [arch, *others]}) > 1)
    return (
        f"<b>{_plural(len(rows), 'instance')}</b> under {escape(args.get('dir', ''))} are "
        f"registered on {escape(arch)}" + (f": {also}" if also else "") + ". "
        f"{_plural(differ, 'row')} where the archs differ are highlighted; a cell's tooltip "
        "counts the registering calls."
    )


def _calls(n: Any) -> Any:
    """One per-arch cell of pool: yes/no, the count of registering calls in the tooltip."""
    if not isinstance(n, int):
        return n
    return yes_no(n > 0, f"{n} registering call{'s' * (n != 1)} add it")


POOL = Spec(
    lead=("instance_id", "tile", "@expand", "layout", "pipeline", "scheduler", "block_size"),
    answer="@arch",
    answer_at=2,
    hide=(*_TILE_PARTS, "file", "line"),
    derived=_TILE,
    summary=_pool_summary,
    columns=_pool_archs,
    row_class=_pool_differs,
    empty="No instance under this directory is registered on this arch.",
    expand="per_arch",
    expand_cell=_calls,
)


# ---------------------------------------------------------------- the others


def _pool_counts_summary(rows: list[Row], args: dict[str, str]) -> str:
    per: dict[str, int] = {}
    for r in rows:
        per[r["arch"]] = per.get(r["arch"], 0) + (r.get("available") or 0)
    best = ", ".join(f"{a} {n:,}" for a, n in per.items() if n)
    return f"Available (instance, registering call) pairs per arch: {best or 'none'}."


def _census_summary(rows: list[Row], args: dict[str, str]) -> str:
    by: dict[str, int] = {}
    for r in rows:
        by[r.get("effect") or "?"] = by.get(r.get("effect") or "?", 0) + (r.get("gates") or 0)
    dirs = len({r.get("dir") for r in rows})
    return f"<b>{sum(by.values())} gates</b> in {dirs} directories: {_bits(by)}."


def _census_chart(
    datasette: Any, database: str, rows: list[Row], args: dict[str, str]
) -> tuple[str, str, str]:

    from ckkb.web import gate_chart, pages

    arch = args.get("arch", "")
    href = (
        datasette.urls.path(f"{pages.PREFIX}/chart/gate-census")
        + "?"
        + urlencode({"arch": arch, **({"tree": args["tree"]} if args.get("tree") else {})})
    )
    return gate_chart.census_svg(datasette, database, rows, arch), href, "gate census chart"


def _races_summary(rows: list[Row], args: dict[str, str]) -> str:
    timed = sum(1 for r in rows if r.get("timed"))
    shapes = {
        (r["op"], r["dtype"], r["layout"], r["M"], r["N"], r["K"], r["arch"])
        for r in rows
        if (r.get("repeats") or 1) > 1
    }
    worst = max((r.get("repeat_spread") or 1 for r in rows), default=1)
    no_arch = sum(1 for r in rows if not r.get("arch"))
    out = f"{_plural(len(rows), 'race')}, {timed} with timed results"
    if shapes:
        out += f"; {_plural(len(shapes), 'shape')} raced more than once"
        out += f" (best up to {worst:.2f}× apart)"
    if no_arch:
        out += (
            f"; <b>arch unknown for {no_arch}</b>: <code>ckkb ingest --arch gfx942 LOG</code> "
            "records it and fills <code>registered</code>"
        )
    return out + ". Each id opens the race's chart."


def _race_order(r: Row) -> Any:
    """Repeats of one shape next to each other, where the first of them is."""
    return (r.get("first_repeat") or r["id"], r["id"])


def _race_class(r: Row, shown: list[str]) -> str:
    return "ckkb-repeat" if (r.get("repeats") or 1) > 1 else ""


def _findings_summary(rows: list[Row], args: dict[str, str]) -> str:
    sev: dict[str, int] = {}
    for r in rows:
        sev[r["severity"]] = sev.get(r["severity"], 0) + (r.get("findings") or 0)
    rules = len({r["rule"] for r in rows})
    return f"<b>{sum(sev.values())} findings</b> of {_plural(rules, 'rule')}: {_bits(sev)}."


def _tuner_summary(rows: list[Row], args: dict[str, str]) -> str:
    opt = sum(1 for r in rows if (r.get("tuner_over_cold") or 1) < 1)
    return f"{_plural(len(rows), 'tuned row')} timed cold; <b>{opt} optimistic</b> (tuner < cold)."


def _coverage_summary(rows: list[Row], args: dict[str, str]) -> str:
    return (
        f"{_plural(len(rows), 'GetTypeString() implementation')}: {_bits(counts(rows, 'status'))}."
    )


def _locate_summary(rows: list[Row], args: dict[str, str]) -> str:
    entries = {(r["file"], r["line"]) for r in rows}
    active = {(r["file"], r["line"]) for r in rows if r.get("status") == "active"}
    verdict = "ambiguous" if len(active) > 1 else "unique" if active else "not compiled"
    return (
        f"{_plural(len(entries), 'source entry')} print this name, {len(active)} active: "
        f"<b>{verdict}</b>."
    )


def _locate_fold(rows: list[Row], cells: list[list[Any]], cols: list[str]) -> markupsafe.Markup:
    """An entry's registering calls in one cell: each linked, with its function and condition."""
    k = cols.index("registration_id")
    regs = [(r, c) for r, c in zip(rows, cells, strict=True) if r.get("registration_id")]
    if not regs:
        return markupsafe.Markup('<span class="ckkb-note">no registering call</span>')
    items = "".join(
        f"<li>{c[k]} <code>{escape(r.get('function') or '')}</code>"
        + (f" if <code>{escape(r['condition'])}</code>" if r.get("condition") else "")
        + "</li>"
        for r, c in regs
    )
    return markupsafe.Markup(
        f"<details><summary>{_plural(len(regs), 'registering call')}</summary>"
        f"<ul>{items}</ul></details>"
    )


def _availability_summary(rows: list[Row], args: dict[str, str]) -> str:
    on = [r["arch"] for r in rows if r.get("available")]
    off = [r["arch"] for r in rows if not r.get("available")]
    return f"Added on <b>{', '.join(on) or 'no arch'}</b>; not on {', '.join(off) or 'any other'}."


def _moves_summary(rows: list[Row], args: dict[str, str]) -> str:
    return f"{_plural(len(rows), 'shape')} whose winner differs between two archs."


def _version_diff_summary(rows: list[Row], args: dict[str, str]) -> str:
    by = counts(rows, "change")
    archs = ", ".join(sorted({str(r["arch"]) for r in rows if r.get("change") == "changed"}))
    old, new = escape(args.get("from", "")), escape(args.get("to", ""))
    return (
        f"From {old} to {new}: <b>{by.get('added', 0)} added, {by.get('removed', 0)} removed</b>"
        f", {by.get('changed', 0)} changed (one row per arch{': ' + escape(archs) if archs else ''}"
        "). An instance is its template and resolved arguments, never its file or line."
    )


SPECS: dict[str, Spec] = {
    "why_missing": WHY_MISSING,
    "arch_diff": ARCH_DIFF,
    "pool": POOL,
    "pool_counts": Spec(
        lead=("arch", "layout", "available", "instances", "pairs"),
        answer="available",
        answer_at=2,
        summary=_pool_counts_summary,
        empty="No instance under this directory has these data types.",
    ),
    "gate_census": Spec(
        lead=("dir", "effect", "arch", "gates", "with_else", "kind"),
        answer="gates",
        answer_at=3,
        summary=_census_summary,
        chart=_census_chart,
        empty="No gate of this kind names this arch.",
    ),
    "race_spread": Spec(
        lead=("id", "winner", "best", "worst", "unit", "spread", "timed", "registered"),
        answer="winner",
        answer_at=1,
        decisive=("winner",),
        hide=("first_repeat",),
        summary=_races_summary,
        order=_race_order,
        row_class=_race_class,
        empty="No races: ingest ckProfiler logs with <code>ckkb ingest --arch ARCH LOG</code>.",
    ),
    "winner_moves": Spec(
        lead=("op", "M", "N", "K", "arch_a", "winner_a", "best_a", "arch_b", "winner_b", "best_b"),
        answer="winner_a",
        answer_at=5,
        decisive=("winner_a", "winner_b"),
        summary=_moves_summary,
        empty=(
            "No shape was raced on two archs with different winners. A race counts once its "
            "arch is known: <code>ckkb ingest --arch gfx942 LOG</code>, then the same shape "
            "with <code>--arch gfx950</code>."
        ),
    ),
    "audit_findings": Spec(
        lead=("severity", "rule", "findings", "example", "file", "first_line", "op"),
        answer="rule",
        answer_at=1,
        decisive=("example", "file"),
        summary=_findings_summary,
        empty="No finding matches: leave the parameters empty for all of them.",
    ),
    "tuner_vs_cold": Spec(
        lead=("tuner_over_cold", "tuner_us", "cold_us", "M", "N", "K", "kernelName", "arch"),
        answer="tuner_over_cold",
        decisive=("kernelName",),
        summary=_tuner_summary,
        empty=(
            "No harness timing has the shape and arch of a tuned config row: run "
            "<code>ckkb harness --from-config CSV --out run.jsonl</code> on the GPU, then "
            "<code>ckkb ingest run.jsonl</code>."
        ),
    ),
    "names_coverage": Spec(
        lead=("status", "device_op", "reasons", "op"),
        answer="status",
        decisive=("reasons",),
        summary=_coverage_summary,
    ),
    "names_locate": Spec(
        lead=("instance_id", "status", "a_dtype", "list_name", "file", "line", "registrations"),
        answer="instance_id",
        hide=(
            "key",
            "printed_name",
            "op",
            "device_op",
            "list_id",
            "ordinal",
            "registration_id",
            "function",
            "condition",
            "bindings",
            "registration_file",
            "registration_line",
        ),
        group_by="instance_id",
        fold=_locate_fold,
        summary=_locate_summary,
        empty=(
            "No source entry prints this key: <code>ckkb locate NAME</code> computes the key of "
            "a printed name."
        ),
    ),
    "version_diff": Spec(
        lead=("change", "arch", "on_from", "on_to", "template", "layout", "dir"),
        answer="change",
        decisive=("from_file", "to_file"),
        hide=("from_id", "to_id", "resolved"),
        summary=_version_diff_summary,
        empty="The two trees hold the same instances, available on the same archs.",
    ),
    "names_availability": Spec(
        lead=("arch", "available", "layer", "file", "line", "condition"),
        answer="available",
        answer_at=1,
        decisive=("condition",),
        summary=_availability_summary,
        empty="No such registration: its id is in the registrations table.",
    ),
}


def spec_for(name: str) -> Spec:
    return SPECS.get(name) or Spec(answer="")

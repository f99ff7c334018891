"""ckProfiler commands from the legends stored in the knowledge base (table `profiler_args`).

- `Legend`: an op's positional legend, quirks and accepted argc values (read from the knowledge
  base by `ckkb.queries.profiler.load_legend`).
- `build_command(...)`: names -> positions and codes, the exact argv, and the checklist warnings
  (verification off on a never-raced shape, time-kernel off, warm-up/iterations at the defaults,
  a layout code whose meaning differs from the name given, strides inconsistent with the layout, the
  op's quirks from its source).
- `interpret_argv(legend, argv)`: the other direction, used by ingestion to read a race's command.

Roles: legend entries are matched to roles by the words the usage text uses ("data type",
"matrix layout", "verification", "warm-up", "iterations", "M", "StrideA", ...): see `role()`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckkb.errors import CkkbError
from ckkb.profiler_legend import Legend, role
from ckkb.queries.profiler import raced_before

if TYPE_CHECKING:
    import sqlite_utils

PROFILER = "ckProfiler"
INT_MAX = 2**31 - 1  # ckProfiler reads its numeric arguments into a C int
DEFAULT_WARMUP, DEFAULT_ITERS = 1, 10
INIT_CODES = {"none": 0, "no": 0, "integer": 1, "int": 1, "decimal": 2}


def layout_name(label: str) -> str | None:
    """'A[m, k] * B[n, k] = C[m, n]' -> 'mk_nk'."""
    a = re.search(r"A\s*\[\s*(\w+)\s*,\s*(\w+)\s*\]", label)
    b = re.search(r"B\s*\[\s*(\w+)\s*,\s*(\w+)\s*\]", label)
    if not a:
        return None
    out = (a.group(1) + a.group(2)).lower()
    if b:
        return out + "_" + (b.group(1) + b.group(2)).lower()
    rest = label[a.end() :]
    m = re.search(r"\*\s*(\w+)", rest)
    return out + "_" + m.group(1).lower() if m else out


def _code_names(entry: dict[str, Any], code: str) -> set[str]:
    names = {code}
    label = str(entry["codes"].get(code, ""))
    if label:
        names.add(label.strip().lower())
        first = re.split(r"[\s,;(]", label.strip(), maxsplit=1)[0].lower()
        if first:
            names.add(first)
        ln = layout_name(label)
        if ln:
            names.add(ln)
    en = entry.get("enum", {}).get(code)
    if en:
        low = en.lower()
        names.add(low)
        parts = low.split("_")
        if len(parts) == 3:
            names.add("_".join(parts[:2]))
        if len(set(parts)) == 1:
            names.add(parts[0])
    return names


def resolve_code(entry: dict[str, Any], value: str | int, what: str) -> tuple[str, str]:
    """A user's name or number for a coded legend entry -> (code, how it matched)."""
    v = str(value).strip().lower()
    codes = entry["codes"]
    if v in codes:
        return v, "number"
    hits = [c for c in codes if v in _code_names(entry, c)]
    if len(hits) == 1:
        return hits[0], "name"
    if len(hits) > 1:
        exact = [c for c in hits if str(codes[c]).strip().lower() == v]
        if len(exact) == 1:
            return exact[0], "name"
    choices = "; ".join(f"{c}: {codes[c]}" for c in codes)
    raise CkkbError(
        f"{what} {value!r} is not one of arg{entry['position']}'s codes ({choices})",
        hint=f"pass one of the numbers or names: {choices}",
    )


# ----------------------------------------------------------------------------- building


@dataclass
class Command:
    argv: list[str]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"argv": self.argv, "warnings": self.warnings}

    def text(self) -> str:
        return shlex.join(self.argv)


def _packed_strides(
    layout_label: str | None, M: int, N: int, K: int
) -> tuple[int, int, int] | None:
    ln = layout_name(layout_label or "") if layout_label else None
    if not ln or "_" not in ln:
        return None
    a, b = ln.split("_", 1)
    sa = {"mk": K, "km": M}.get(a)
    sb = {"kn": N, "nk": K}.get(b)
    if sa is None or sb is None:
        return None
    return sa, sb, N


def quirk_applies(q: dict[str, Any], values: Mapping[int, int | None]) -> bool | None:
    tests = q.get("details", {}).get("tests") or []
    if not tests:
        return None
    results = []
    for t in tests:
        v = values.get(t["position"])
        if v is None:
            return None
        lhs = v % t["mod"] if t.get("mod") else v
        results.append(
            {
                "==": lhs == t["value"],
                "!=": lhs != t["value"],
                "<": lhs < t["value"],
                ">": lhs > t["value"],
            }.get(t["cmp"], False)
        )
    return all(results) if q["details"].get("combine", "&&") == "&&" else any(results)


def build_command(
    legend: Legend,
    *,
    dtype: str,
    layout: str | None,
    M: int,
    N: int,
    K: int,
    verify: bool = False,
    init: str = "integer",
    log: bool = False,
    time_kernel: bool = True,
    warmup: int | None = None,
    iters: int | None = None,
    stride_a: int | None = None,
    stride_b: int | None = None,
    stride_c: int | None = None,
    kbatch: int | None = None,
    rotating: int | None = None,
    profiler: str = PROFILER,
    db: sqlite_utils.Database | None = None,
) -> Command:
    """The exact argv for `legend.op` and the checklist warnings that apply."""
    roles = legend.by_role()
    warnings: list[str] = []
    missing = [r for r in ("dtype", "M", "N", "K") if r not in roles]
    if missing:
        raise CkkbError(
            f"ckProfiler {legend.op} has no positional {', '.join(missing)} in its legend; "
            "the command builder handles GEMM-style legends",
            hint=f"read it with `ckkb profiler legend {legend.op}`",
        )
    values: dict[int, str] = {}
    set_by_user: set[int] = set()

    def put(r: str, v: Any, user: bool = True) -> None:
        if r in roles and v is not None:
            values[roles[r]["position"]] = str(v)
            if user:
                set_by_user.add(roles[r]["position"])

    dcode, _ = resolve_code(roles["dtype"], dtype, "data type")
    put("dtype", dcode)
    layout_label = None
    if "layout" in roles:
        if layout is None:
            raise CkkbError(
                f"ckProfiler {legend.op} needs a layout (arg{roles['layout']['position']})",
                hint="pass --layout, e.g. --layout mk_nk",
            )
        entry = roles["layout"]
        lcode, how = resolve_code(entry, layout, "layout")
        put("layout", lcode)
        layout_label = str(entry["codes"].get(lcode, ""))
        derived = layout_name(layout_label)
        enum = entry.get("enum", {}).get(lcode)
        if how == "number":
            warnings.append(
                f"layout given as code {lcode}: for {legend.op} it means {layout_label!r}"
                + (f" ({derived})" if derived else "")
                + "; check it matches what your workload issues"
            )
        elif (
            derived
            and str(layout).lower() != derived
            and not str(layout).lower().startswith(derived)
        ):
            warnings.append(
                f"layout {layout!r} is code {lcode}, "
                f"whose legend text says {layout_label!r} ({derived})"
                + (f" while its enum name is {enum}" if enum else "")
                + ": the meanings differ, check which one the op really runs"
            )
    elif layout is not None:
        warnings.append(
            f"ckProfiler {legend.op} takes no layout argument; --layout {layout} is ignored"
        )
    put("verify", int(verify))
    if init.lower() not in INIT_CODES and not init.isdigit():
        raise CkkbError(f"unknown initialisation {init!r}", hint="use integer, decimal or none")
    put("init", INIT_CODES.get(init.lower(), init))
    put("log", int(log))
    put("time", int(time_kernel))
    put("M", M)
    put("N", N)
    put("K", K)
    packed = _packed_strides(layout_label, M, N, K)
    for r, given, idx in (
        ("stride_a", stride_a, 0),
        ("stride_b", stride_b, 1),
        ("stride_c", stride_c, 2),
    ):
        if r not in roles:
            continue
        if given is None:
            put(r, packed[idx] if packed else -1, user=False)
            continue
        put(r, given)
        if packed and given >= 0 and given < packed[idx]:
            lead = {0: "A", 1: "B", 2: "C"}[idx]
            warnings.append(
                f"{roles[r]['name']}={given} is inconsistent with layout "
                f"{layout_name(layout_label or '')}: "
                f"{lead} needs a leading dimension of at least {packed[idx]}"
            )
    if kbatch is not None:
        put("kbatch", kbatch)
    elif "kbatch" in roles and not roles["kbatch"]["optional"]:
        put("kbatch", roles["kbatch"].get("default") or 1, user=False)
    put("warmup", warmup)
    put("iters", iters)
    put("rotating", rotating)

    # Positions: every required one, then optional ones up to the last given (gaps: legend
    # defaults), padded to the next argc the op accepts.
    required = [a["position"] for a in legend.args if not a["optional"] and a["position"] > 1]
    last = max([p for p in set_by_user] + required + [1])
    argc_ok = sorted(legend.argc_allowed)
    if argc_ok:
        fits = [c for c in argc_ok if c - 1 >= last]
        if fits:
            last = fits[0] - 1
    argv = [profiler, legend.op]
    by_pos = {a["position"]: a for a in legend.args}
    for p in range(2, last + 1):
        if p in values:
            argv.append(values[p])
            continue
        a = by_pos.get(p)
        if a is None or a.get("default") is None:
            what = a["name"] if a else "(not in the legend)"
            raise CkkbError(
                f"no value for arg{p} of {legend.op}: {what}",
                hint=f"read the legend with `ckkb profiler legend {legend.op}`",
            )
        argv.append(str(a["default"]))

    # Checklist.
    if not verify and not raced_before(
        db, legend.op, M, N, K, _label(roles["dtype"], dcode), _layout_label(roles, values)
    ):
        warnings.append(
            "verification is off on a shape never raced before: "
            "turn it on (--verify) for the first run of every new shape"
        )
    if not time_kernel and "time" in roles:
        warnings.append("time kernel is off: ckProfiler will print no timings")
    w = (
        int(argv[roles["warmup"]["position"]])
        if "warmup" in roles and roles["warmup"]["position"] < len(argv)
        else None
    )
    i = (
        int(argv[roles["iters"]["position"]])
        if "iters" in roles and roles["iters"]["position"] < len(argv)
        else None
    )
    dw = _int(roles.get("warmup", {}).get("default"), DEFAULT_WARMUP)
    di = _int(roles.get("iters", {}).get("default"), DEFAULT_ITERS)
    if "warmup" in roles and (w is None or w <= dw):
        warnings.append(
            f"warm-up at the default ({dw}): too few to be stable, raise it (--warmup 5)"
        )
    if "iters" in roles and (i is None or i <= di):
        warnings.append(
            f"iterations at the default ({di}): too few to be stable, raise them (--iters 20)"
        )
    nums = {p: int(v) for p, v in enumerate(argv) if p >= 1 and _isint(v)}
    for q in legend.quirks:
        applies = quirk_applies(q, nums)
        if applies:
            warnings.append(
                f"quirk of {legend.op} ({q['file']}:{q['line']}): {q['summary']}; "
                "it applies to this shape, so read its results with that in mind"
            )
    return Command(argv, warnings)


def _isint(v: str) -> bool:
    try:
        int(v)
        return True
    except ValueError:
        return False


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _label(entry: dict[str, Any], code: str) -> str:
    return code_label(entry, code)


def code_label(entry: dict[str, Any], code: str) -> str:
    """Short label of a code: 'bf16' for gemm's 2, 'mk_nk' for a layout text."""
    label = str(entry["codes"].get(str(code), "")).strip()
    ln = layout_name(label)
    if ln:
        return ln
    return re.split(r"[\s,;(]", label, maxsplit=1)[0].lower() if label else str(code)


def _layout_label(roles: dict[str, dict[str, Any]], values: dict[int, str]) -> str | None:
    if "layout" not in roles:
        return None
    return code_label(roles["layout"], values.get(roles["layout"]["position"], ""))


# ----------------------------------------------------------------------------- reading a command


def split_command(command: str) -> tuple[str | None, list[str]]:
    """'./bin/ckProfiler gemm 1 0 1 ... | grep x' -> ('gemm', ['gemm', '1', '0', ...])."""
    try:
        toks = shlex.split(command)
    except ValueError:
        toks = command.split()
    for i, t in enumerate(toks):
        if t.rsplit("/", 1)[-1] == PROFILER or t.endswith(PROFILER):
            rest = []
            for x in toks[i + 1 :]:
                if x in ("|", ">", ">>", "2>&1", "&&", ";", "||") or x.startswith(("|", ">")):
                    break
                rest.append(x)
            return (rest[0] if rest else None), rest
    return None, []


def interpret_argv(legend: Legend | None, args: list[str]) -> dict[str, Any]:
    """args[0] is the op (= arg1). Returns role -> value (ints where numeric, labels for codes)."""
    out: dict[str, Any] = {}
    if legend is None:
        return out
    for r, entry in legend.by_role().items():
        p = entry["position"]
        if p - 1 >= len(args) or r == "op":
            continue
        raw = args[p - 1]
        try:
            v: Any = int(raw)
        except ValueError:
            try:
                v = float(raw)
            except ValueError:
                v = raw
        if r in ("dtype", "layout"):
            out[r + "_code"] = v if isinstance(v, int) else None
            out[r] = code_label(entry, str(raw)) if str(raw) in entry["codes"] else None
        else:
            out[r] = v
    # not passed: the legend's default (kept apart, so a log's own 'Start running N times' can win)
    if "warmup" not in out and "warmup" in legend.by_role():
        out["warmup_default"] = _int(legend.by_role()["warmup"].get("default"), DEFAULT_WARMUP)
    if "iters" not in out and "iters" in legend.by_role():
        out["iters_default"] = _int(legend.by_role()["iters"].get("default"), DEFAULT_ITERS)
    # the op's swap quirk: the result is reported for the swapped shape
    nums = {i + 1: v for i, v in enumerate(out_values(args))}
    for q in legend.quirks:
        if quirk_applies(q, nums):
            out.setdefault("quirks", []).append(q["summary"])
            names = q["details"].get("names") or []
            for pair in names:
                ra, rb = role(pair[0]), role(pair[1])
                if ra in out and rb in out:
                    out[ra], out[rb] = out[rb], out[ra]
    return out


def out_values(args: list[str]) -> list[int | None]:
    vals: list[int | None] = []
    for a in args:
        try:
            vals.append(int(a))
        except ValueError:
            vals.append(None)
    return vals

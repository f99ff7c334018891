"""Streaming parser of ckProfiler output: lines in, events out (never the whole log in memory).

Every line shape ckProfiler has printed (see ../shared/ckprofiler_samples/ and the `std::cout`s in
CK's profiler/include/profiler/*_impl.hpp):

- tensor descriptors        `a_m_k: dim 2, lengths {49152, 768}, strides {768, 1}`
- instance count            `found 103 instances`
- timed instance            `Perf:    1.89904 ms, 122.129 TFlops, 201.263 GB/s, NAME[, KBatch 2]`
  (right-aligned times; no TFlops field for softmax; NAME may wrap onto indented lines)
- unsupported instance      `NAME does not support this problem`
- verification              `error: 0` after a Perf line (2022), `Error: Incorrect results!` /
                            `... failed verification` before the Perf line of the failing
                            instance (current CK)
- best line                 `Best Perf for datatype = f16 ALayout = RowMajor ... M = . N = . K = .
                            ... : t ms, x TFlops, y GB/s, NAME`, `Best Perf: t ms, x TFlops,
                            y GB/s[, NAME]`, `Best perf = t ms, y GB/s, NAME`, and the
                            multi-line `Best configuration parameters:` block (`name:`,
                            `avg_time:`, `tflops:`, `GB/s:`)
- chatter ckProfiler prints that carries no result (`launch_and_time_kernel: ...`, `Warm up 1 time`
  (-> warm-up), `Start running 100 times...` (-> iterations), DL debug `arg.e_grid_desc_m_n_{...}`).

Lines ckProfiler did not print (shell prompts, `#` comments, the provenance header of the samples)
are skipped, not errors; a `# command: ...` comment is kept as the race's command when nothing
better is known. A line that starts like a ckProfiler line but cannot be read (a truncated
`Perf:` line, a `found` without a number) becomes a `ParseError` with its line number and parsing
goes on.

A log may hold several races: a race ends after its Best line (or Best block); tensor descriptors
arriving after a race already has results also start a new one.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ckkb.log_events import Event, ParseError, RaceEnd, RaceStart, Result

# ----------------------------------------------------------------------------- line shapes

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)"
_PERF = re.compile(
    rf"^Perf:\s*(?P<ms>{_NUM})\s*ms,\s*(?:(?P<tflops>{_NUM})\s*TFlops,\s*)?(?P<gbps>{_NUM})\s*GB/s\s*(?:,\s*(?P<name>.*))?$"
)
_BODY = re.compile(
    rf"^\s*(?P<ms>{_NUM})\s*ms\s*(?:,\s*(?P<tflops>{_NUM})\s*TFlops)?\s*(?:,\s*(?P<gbps>{_NUM})\s*GB/s)?\s*(?:,\s*(?P<name>.*))?$"
)
_DESC = re.compile(
    r"^(?P<name>[A-Za-z_][\w ]*?)\s*: dim (?P<dim>\d+), "
    r"lengths \{(?P<len>[^}]*)\}, strides \{(?P<str>[^}]*)\}\s*$"
)
_FOUND = re.compile(r"^found (?P<n>\d+) instances?\s*$")
_UNSUP = re.compile(r"^(?P<name>\S.*?) does not support this problem\s*$")
_ERRV = re.compile(r"^error: (?P<v>\S+)\s*$")
_WARM = re.compile(r"^Warm up (?P<n>\d+) times?\s*$")
_RUNS = re.compile(r"^Start running (?P<n>\d+) times?\.*\s*$")
_KBATCH = re.compile(r",?\s*KBatch (?P<k>\d+)\s*$")
_HDR_KV = re.compile(r"(\w+) =\s*(\S+)")
_CHATTER = (
    "launch_and_time_kernel:",
    "arg.",
    "rotating count:",
    "Instance: ",
    "grouped_gemm_instance (",
    "Error: No kernel is applicable",
    "max err:",
    "pass",
    "fail",
)
_VERIFY_FAIL = ("Error: Incorrect results", "Incorrect results", "wrong result")


def _f(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _ints(s: str) -> list[int]:
    out = []
    for p in s.split(","):
        p = p.strip()
        if p:
            out.append(int(p))
    return out


def _balanced(name: str) -> bool:
    return name.count("<") <= name.count(">")


def _split_kbatch(name: str) -> tuple[str, int | None]:
    if "KBatch" not in name:
        return name, None
    m = _KBATCH.search(name)
    if not m:
        return name, None
    return name[: m.start()].rstrip().rstrip(","), int(m.group("k"))


def _perf_fast(s: str, lineno: int) -> Result | None:
    """'Perf: t ms, x TFlops, y GB/s, NAME' without a regex (the regex is the fallback)."""
    parts = s[5:].split(",", 3)
    if len(parts) < 3:
        return None
    p0, p1 = parts[0], parts[1]
    if not p0.endswith(" ms"):
        return None
    try:
        ms = float(p0[:-3])
        if p1.endswith(" TFlops"):
            tflops = float(p1[:-7])
            p2 = parts[2]
            if not p2.endswith(" GB/s"):
                return None
            gbps = float(p2[:-5])
            rest = parts[3] if len(parts) > 3 else ""
        elif p1.endswith(" GB/s"):
            tflops = None
            gbps = float(p1[:-5])
            rest = ",".join(parts[2:])
        else:
            return None
    except ValueError:
        return None
    rest = rest.strip()
    name, kb = _split_kbatch(rest) if "KBatch" in rest else (rest, None)
    return Result(lineno, name, rest, ms, tflops, gbps, True, None, kb)


def _best_header(hdr: str) -> dict[str, Any]:
    """'f16 ALayout =  RowMajor BLayout =  RowMajor M = 49152 ... KBatch = 2' -> dict."""
    out: dict[str, Any] = {}
    first = hdr.split(None, 1)
    if first and "=" not in first[0]:
        out["datatype"] = first[0]
    for k, v in _HDR_KV.findall(hdr):
        if k == "datatype":
            continue
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


# ----------------------------------------------------------------------------- the parser


def parse_lines(lines: Iterable[str], first_line: int = 1) -> Iterator[Event | _Verify]:
    """Parse ckProfiler output line by line (str lines, with or without newlines).

    Yields RaceStart, then that race's Result / ParseError events in order, then RaceEnd; again
    per race.
    Results are yielded once their (possibly wrapped) name is complete, so memory stays flat.
    """
    race: RaceEnd | None = None
    pending: Result | None = None  # result (or best) whose name may continue
    pending_is_best = False
    best_block: dict[str, Any] | None = None
    fail_next = False
    last: Result | None = None
    lineno = first_line - 1
    command_hint: str | None = None

    def finish_pending() -> Iterator[Event]:
        nonlocal pending, pending_is_best, last
        p = pending
        pending = None
        if p is None:
            return
        if not _balanced(p.name):
            yield ParseError(p.line, "instance name truncated (unbalanced '<')", p.raw[:500])
        if pending_is_best:
            assert race is not None and race.best is not None
            race.best["name"] = p.name or None
            race.best["raw"] = p.raw
            if p.kbatch is not None:
                race.best["kbatch"] = p.kbatch
            pending_is_best = False
            return
        assert race is not None  # a pending result is always read inside an open race
        race.results += 1
        if p.ms is not None:
            race.timed += 1
        last = p
        yield p

    def end_race(at: int) -> Iterator[Event]:
        nonlocal race, best_block, last, fail_next
        yield from finish_pending()
        if race is None:
            return
        if best_block is not None:
            race.best = best_block
            best_block = None
        race.end_line = at
        r = race
        race = None
        last = None
        fail_next = False
        if (
            r.results
            or r.best
            or r.descriptors
            or r.instances_found is not None
            or r.command
            or r.recognised == 0
        ):
            yield r
        # else: only chatter ('launch_and_time_kernel' after a Best line): not a race of its own

    def ensure_race(at: int) -> Generator[Event, None, RaceEnd]:
        """Start a race at `at` unless one is open; the open race (so callers hold a RaceEnd)."""
        nonlocal race, command_hint
        if race is None:
            race = RaceEnd(line=at, end_line=at, command=command_hint)
            command_hint = None
            yield RaceStart(at)
        return race

    for raw_line in lines:
        lineno += 1
        line = raw_line.rstrip("\r\n")
        s = line.strip()
        if not s:
            continue

        # -- fast path: the 99% line
        if line.startswith("Perf:"):
            if pending is not None:
                yield from finish_pending()
            if race is None or race.best is not None or best_block is not None:
                if race is not None:
                    yield from end_race(lineno - 1)
                race = yield from ensure_race(lineno)
            res = _perf_fast(s, lineno)
            if res is None:
                m = _PERF.match(s)
                if m is None:
                    yield ParseError(
                        lineno,
                        "malformed Perf: line (expected 'Perf: t ms, [x TFlops,] y GB/s, NAME')",
                        line[:500],
                    )
                    continue
                rest = m.group("name") or ""
                name, kb = _split_kbatch(rest.strip())
                res = Result(
                    lineno,
                    name,
                    rest,
                    _f(m.group("ms")),
                    _f(m.group("tflops")),
                    _f(m.group("gbps")),
                    True,
                    None,
                    kb,
                )
            if fail_next:
                res.verified = False
                fail_next = False
            race.recognised += 1
            name = res.name
            if name and name[-1] != "," and ("<" not in name or name.count("<") <= name.count(">")):
                race.results += 1
                if res.ms is not None:
                    race.timed += 1
                last = res
                yield res
            else:
                pending = res
            continue

        # -- a continuation of a wrapped name?
        if pending is not None:
            known = _known_shape(s)
            if not known and (
                line[:1].isspace()
                or not pending.name
                or pending.name.endswith(",")
                or not _balanced(pending.name)
            ):
                sep = "" if (not pending.name or pending.name.endswith("<")) else " "
                pending.name = (pending.name + sep + s).strip()
                pending.raw = (pending.raw + "\n" + line).strip("\n")
                name, kb = _split_kbatch(pending.name)
                pending.name = name
                if kb is not None:
                    pending.kbatch = kb
                assert race is not None  # a pending result is always read inside an open race
                race.recognised += 1
                continue
            yield from finish_pending()

        if s.startswith("#"):
            if race is None and s.startswith("# command:"):
                command_hint = s[len("# command:") :].strip() or None
                if command_hint == "unknown":
                    command_hint = None
            continue

        # -- Best configuration block lines
        if best_block is not None:
            key, sep, val = s.partition(":")
            key = key.strip()
            if sep and key in ("name", "avg_time", "tflops", "GB/s"):
                assert race is not None  # a Best block is only opened inside a race
                race.recognised += 1
                if key == "name":
                    best_block["name"] = val.strip()
                else:
                    v = _f(val.strip())
                    if v is None:
                        yield ParseError(
                            lineno,
                            f"malformed '{key}:' line in Best configuration block",
                            line[:500],
                        )
                    else:
                        best_block[{"avg_time": "ms", "tflops": "tflops", "GB/s": "gbps"}[key]] = v
                continue
            yield from end_race(lineno - 1)

        low = s[:9].lower()
        if low.startswith("best perf"):
            race = yield from ensure_race(lineno)
            race.recognised += 1
            best, err = _parse_best(s, lineno)
            if err:
                yield ParseError(lineno, err, line[:500])
                continue
            race.best = best
            race.header = {
                k: v
                for k, v in best.items()
                if k not in ("ms", "tflops", "gbps", "name", "line", "raw")
            }
            name = best.get("name") or ""
            if not name or name.endswith(",") or not _balanced(name):
                pending = Result(lineno, name, best.get("raw", ""))
                pending_is_best = True
            continue
        if s.startswith("Best configuration parameters"):
            race = yield from ensure_race(lineno)
            race.recognised += 1
            best_block = {"line": lineno}
            continue

        if race is not None and race.best is not None:
            # anything ckProfiler prints after the Best line belongs to the next race
            if _known_shape(s):
                yield from end_race(lineno - 1)

        m = _DESC.match(s)
        if m:
            if race is not None and race.results:
                yield from end_race(lineno - 1)
            race = yield from ensure_race(lineno)
            race.recognised += 1
            try:
                race.descriptors.append(
                    {
                        "name": m.group("name").strip(),
                        "lengths": _ints(m.group("len")),
                        "strides": _ints(m.group("str")),
                    }
                )
            except ValueError:
                yield ParseError(
                    lineno, "malformed tensor descriptor (non-integer length or stride)", line[:500]
                )
            continue
        if " dim " in s and ", lengths {" in s:
            race = yield from ensure_race(lineno)
            yield ParseError(lineno, "malformed tensor descriptor", line[:500])
            continue
        if s.startswith("found "):
            race = yield from ensure_race(lineno)
            m = _FOUND.match(s)
            if m:
                race.recognised += 1
                race.instances_found = int(m.group("n"))
            else:
                yield ParseError(lineno, "malformed 'found N instances' line", line[:500])
            continue
        if s.endswith("does not support this problem"):
            race = yield from ensure_race(lineno)
            m = _UNSUP.match(s)
            if m is None:
                yield ParseError(
                    lineno, "'does not support this problem' without an instance name", line[:500]
                )
                continue
            race.recognised += 1
            name, kb = _split_kbatch(m.group("name"))
            res = Result(lineno, name, m.group("name"), supported=False, kbatch=kb)
            fail_next = False
            race.results += 1
            last = res
            yield res
            continue
        if s.startswith("error:"):
            m = _ERRV.match(s)
            v = _f(m.group("v")) if m else None
            if v is None or last is None or race is None:
                race = yield from ensure_race(lineno)
                yield ParseError(
                    lineno,
                    "verification line 'error: N' not after a Perf: line"
                    if m and v is not None
                    else "malformed verification line 'error: N'",
                    line[:500],
                )
                continue
            race.recognised += 1
            yield _Verify(last.line, v == 0)
            continue
        if s.startswith(_VERIFY_FAIL) or "failed verification" in s:
            race = yield from ensure_race(lineno)
            race.recognised += 1
            fail_next = True
            continue
        m = _WARM.match(s)
        if m:
            race = yield from ensure_race(lineno)
            race.recognised += 1
            race.warmup = int(m.group("n"))
            continue
        m = _RUNS.match(s)
        if m:
            race = yield from ensure_race(lineno)
            race.recognised += 1
            race.iterations = int(m.group("n"))
            continue
        if s.startswith(_CHATTER):
            race = yield from ensure_race(lineno)
            race.recognised += 1
            continue
        # not printed by ckProfiler (shell chatter, banners ...): skipped, not an error
        if race is not None:
            race.skipped += 1
        elif "ckProfiler " in s and command_hint is None:
            command_hint = s[s.index("ckProfiler") :] if s.startswith(("$", "+", ">")) else s

    yield from end_race(lineno)


@dataclass(slots=True)
class _Verify:
    """Internal: the 'error: N' line after the result at `line` (verified when N == 0)."""

    line: int
    ok: bool


def _known_shape(s: str) -> bool:
    return (
        s.startswith(
            (
                "Perf:",
                "Best ",
                "best perf",
                "found ",
                "launch_and_time_kernel",
                "Warm up",
                "Start running",
                "error:",
                "#",
            )
        )
        or s.endswith("does not support this problem")
        or (" dim " in s and "lengths {" in s)
    )


def _parse_best(s: str, lineno: int) -> tuple[dict[str, Any], str | None]:
    hdr: dict[str, Any] = {}
    low = s.lower()
    if low.startswith("best perf for datatype"):
        head, sep, body = s.partition(" : ")
        if not sep:
            return {}, "malformed Best Perf line (no ' : ' before the timing)"
        hdr = _best_header(head[len("best perf for datatype") :].lstrip(" ="))
    elif low.startswith("best perf:"):
        body = s[len("best perf:") :]
    elif low.startswith("best perf ="):
        body = s[len("best perf =") :]
    else:
        head, sep, body = s.partition(":")
        if not sep:
            return {}, "malformed Best Perf line"
    m = _BODY.match(body)
    if m is None:
        return {}, "malformed Best Perf line (expected 't ms, [x TFlops,] [y GB/s,] NAME')"
    name, kb = _split_kbatch((m.group("name") or "").strip())
    best = {
        "ms": _f(m.group("ms")),
        "tflops": _f(m.group("tflops")),
        "gbps": _f(m.group("gbps")),
        "name": name or None,
        "line": lineno,
        "raw": m.group("name") or "",
    }
    if kb is not None:
        best["kbatch"] = kb
    best.update(hdr)
    return best, None


# ------------------------------------------------------------------------- whole-log convenience


@dataclass
class RaceLog:
    """A race with its results gathered (for tests and small logs; ingestion streams instead)."""

    info: RaceEnd
    results: list[Result]
    errors: list[ParseError]


def parse_text(text: str) -> tuple[list[RaceLog], list[ParseError]]:
    """All races of a log (errors outside any race in the second list)."""
    races: list[RaceLog] = []
    loose: list[ParseError] = []
    cur_results: list[Result] = []
    cur_errors: list[ParseError] = []
    by_line: dict[int, Result] = {}
    in_race = False
    for ev in iter_events(text.splitlines()):
        if isinstance(ev, RaceStart):
            in_race, cur_results, cur_errors, by_line = True, [], [], {}
        elif isinstance(ev, Result):
            cur_results.append(ev)
            by_line[ev.line] = ev
        elif isinstance(ev, ParseError):
            (cur_errors if in_race else loose).append(ev)
        elif isinstance(ev, RaceEnd):
            races.append(RaceLog(ev, cur_results, cur_errors))
            in_race = False
    return races, loose


def iter_events(lines: Iterable[str], first_line: int = 1) -> Iterator[Event]:
    """parse_lines with verification lines folded into their results (a Result is held back until
    the line after it, so an `error: N` that follows it can still mark it)."""
    held: Result | None = None
    for ev in parse_lines(lines, first_line):
        if isinstance(ev, _Verify):
            if held is not None and held.line == ev.line:
                held.verified = ev.ok
            continue
        if held is not None:
            yield held
            held = None
        if isinstance(ev, Result):
            held = ev
            continue
        yield ev
    if held is not None:
        yield held

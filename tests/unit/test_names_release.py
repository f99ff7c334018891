"""Names of any release: an identifier the tree's ops do not know is never cut down to a known op,
and every name printed in ../shared/ckprofiler_samples/ parses to the op its release printed."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ckkb import names
from ckkb.logs import parse_text
from ckkb.names import reader
from tests.conftest import SAMPLES
from tests.unit.test_names import NAME_TEXTS, SCHEMAS

# DeviceGemmXdlSplitKCShuffle's GetTypeString() as the typestrings stage reads it from the wheel's
# CK (name_schemas.tokens there): a name glued into one word
SPLIT_K = names.NameSchema(
    device_op="DeviceGemmXdlSplitKCShuffle",
    ops=("GemmXdlSplitKCShuffle",),
    tokens=(
        {"lit": "GemmXdlSplitKCShuffle_"},
        {"ref": "GemmSpec", "conv": "spec", "kind": "enum"},
        {"lit": "_"},
        {"ref": "ALayout", "conv": "layout_initial", "kind": "type"},
        {"ref": "BLayout", "conv": "layout_initial", "kind": "type"},
        {"ref": "CLayout", "conv": "layout_initial", "kind": "type"},
        {"lit": "_B"},
        {"ref": "BlockSize", "conv": "value", "kind": "int"},
        {"lit": "_Vec"},
        {"ref": "ABlockTransferSrcScalarPerVector", "conv": "value", "kind": "int"},
        {"lit": "x"},
        {"ref": "BBlockTransferSrcScalarPerVector", "conv": "value", "kind": "int"},
        {"lit": "x"},
        {"ref": "CBlockTransferScalarPerVector_NWaveNPerXDL", "conv": "value", "kind": "int"},
        {"lit": "_"},
        {"ref": "MPerBlock", "conv": "value", "kind": "int"},
        {"lit": "x"},
        {"ref": "NPerBlock", "conv": "value", "kind": "int"},
        {"lit": "x"},
        {"ref": "K0PerBlock", "conv": "value", "kind": "int"},
        {"lit": "x"},
        {"ref": "K1", "conv": "value", "kind": "int"},
        {"lit": " LoopScheduler: "},
        {"ref": "LoopSched", "conv": "enum", "kind": "enum", "map": {"a": "Default", "b": "Inter"}},
        {"lit": ", PipelineVersion: "},
        {"ref": "PipelineVer", "conv": "enum", "kind": "enum", "map": {"a": "v1", "b": "v2"}},
    ),
    file="split_k.hpp",
    line=1,
)


def _plain(op: str, n: int) -> names.NameSchema:
    """A schema printing `op<a0, ..., a{n-1}>`: a known op that other names start with."""
    toks: list[dict] = [{"lit": op + "<"}]
    for i in range(n):
        if i:
            toks.append({"lit": ", "})
        toks.append({"ref": f"P{i}", "conv": "value", "kind": "int"})
    toks.append({"lit": ">"})
    return names.NameSchema(device_op=op + "Impl", ops=(op,), tokens=tuple(toks), file=op, line=1)


# Ops that are `_`-prefixes (or plain prefixes) of ops the samples print: a reader that cut names
# down to a known op would attribute the samples to these.
PREFIX_OPS = (
    "DeviceGemm",
    "DeviceGemmMultipleD",
    "DeviceGroupedConvBwdData",
    "DeviceGroupedConvBwdDataMultipleD",
    "DeviceGroupedConvBwdDataMultipleD_Xdl",
    "DeviceGroupedConvBwdWeight",
    "DeviceImageTo",
    "DeviceElementwise",
    "DeviceReduce",
    "GemmXdlSplitK",
)


def schema_set(*extra: names.NameSchema) -> names.SchemaSet:
    out = names.SchemaSet(SCHEMAS)
    for s in extra:
        out[f"{s.device_op}@{s.file}"] = s
    return out


WITH_SPLIT_K = schema_set(SPLIT_K)
HOSTILE = schema_set(SPLIT_K, *(_plain(op, 4) for op in PREFIX_OPS))


# --------------------------------------------------------------------------- not cut down


def test_issue_example_reads_as_generic_under_its_own_op():
    for schemas in (SCHEMAS, HOSTILE):
        assert "DeviceGemmXdl" in schemas.by_op()
        p = names.parse("DeviceGemmXdl_C_Shuffle<256, 128, 128, 32, 8, 2>", schemas)
        assert (p.op, p.schema, p.fields, p.device_op) == (
            "DeviceGemmXdl_C_Shuffle",
            "generic",
            {},
            None,
        )
        assert p.args == ["256", "128", "128", "32", "8", "2"]
    # the op itself in an older form still maps its leading arguments (same op, other release)
    p = names.parse("DeviceGemmXdl<256, 128, 128, 4>", SCHEMAS)
    assert (p.op, p.schema) == ("DeviceGemmXdl", "generic")
    assert p.fields == {"BlockSize": 256, "MPerBlock": 128, "NPerBlock": 128, "K0PerBlock": 4}


def test_glued_names_need_the_whole_format():
    name = "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_32x16x8x8"
    full = name + " LoopScheduler: Default, PipelineVersion: v2"
    p = names.parse(full + ", KBatch 2", WITH_SPLIT_K)
    assert (p.op, p.schema, p.device_op) == (
        "GemmXdlSplitKCShuffle",
        "matched",
        "DeviceGemmXdlSplitKCShuffle",
    )
    assert (p.fields["BlockSize"], p.fields["K1"], p.props["KBatch"]) == (128, 8, "2")
    # the same start in another format: not that op's, nothing guessed
    for other in (
        "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128 LoopScheduler: Default",
        "GemmXdlSplitKCShuffle_Foo<256, 128>",
        "GemmXdlSplitKCShuffle_C_Shuffle",
    ):
        p = names.parse(other, WITH_SPLIT_K)
        assert (p.op, p.schema, p.fields, p.device_op) == (
            reader.read(other).op,
            "generic",
            {},
            None,
        ), other


IDENT = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,8}", fullmatch=True)
ARGS = st.lists(st.integers(0, 4096).map(str), min_size=0, max_size=8)
KEYS = st.sampled_from(["LoopScheduler", "PipelineVersion", "NumPrefetch", "BlkSize"])
PROPS = st.lists(st.tuples(KEYS, IDENT), max_size=3)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(HOSTILE.by_op())),
    st.lists(IDENT, min_size=1, max_size=3),
    ARGS,
    PROPS,
    st.booleans(),
)
def test_an_unknown_op_is_never_cut_down_to_a_known_one(known, tail, args, props, kbatch):
    """`<known op>_<more>` is an op of its own: generic, its whole identifier, no fields."""
    op = "_".join([known, *tail])
    assume(op not in HOSTILE.by_op())
    name = op + (f"<{', '.join(args)}>" if args else "")
    if props:
        name += " " + ", ".join(f"{k}: {v}" for k, v in props)
    if kbatch and props:  # ckProfiler's suffix after the properties
        name += ", KBatch 2"
    for schemas in (SCHEMAS, WITH_SPLIT_K, HOSTILE):
        p = names.parse(name, schemas)
        assert (p.op, p.schema, p.fields, p.device_op) == (op, "generic", {}, None), name


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NAME_TEXTS)
def test_the_op_is_what_the_name_prints(text):
    """Whatever the schema set, a name's op is its printed identifier; only a schema whose whole
    format reads the name may name a shorter op (the op it prints, glued to its fields)."""
    try:
        head = reader.read_with_grammar(text).op
    except Exception:  # noqa: BLE001 - not a name: parse reports the error, nothing to attribute
        assume(False)
    for schemas in (None, SCHEMAS, HOSTILE):
        p = names.parse(text, schemas)
        if p.schema != "matched":
            assert p.op == head and p.device_op is None, text
            continue
        s = next(s for s in schemas.values() if s.device_op == p.device_op)  # type: ignore[union-attr]
        assert p.op in s.ops, text
        glued = head.startswith(p.op + "_") and s in schemas.glued(head)  # type: ignore[union-attr]
        assert head == p.op or head.endswith("::" + p.op) or glued, text


# --------------------------------------------------------------------------- the samples

# The second method: the op each line of a sample prints, read from the raw text with these few
# regular expressions and nothing of ckkb (the identifier after `GB/s,` on Perf/Best lines, after
# `name:` in a Best block, before `does not support this problem`; a split-K name glued into one
# word ends its op before the GemmSpecialization word, as CK's GetTypeString() writes
# `"GemmXdlSplitKCShuffle_" << getGemmSpecializationString(GemmSpec) << "_" ...`).
_LINE_OPS = (
    re.compile(r"GB/s,\s*([A-Za-z_][\w:]*)"),
    re.compile(r"^\s*name:\s*([A-Za-z_][\w:]*)"),
    re.compile(r"^\s*([A-Za-z_][\w:]*)\S*(?:\s\S+)*\s+does not support this problem\s*$"),
)
_GLUED = re.compile(r"^([A-Za-z]\w*?)_(?:Default|MNKPadding|MNPadding|MKPadding|KPadding)_")


def ops_by_line(path: Path) -> dict[int, str]:
    out = {}
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        for rx in _LINE_OPS:
            m = rx.search(line)
            if m:
                ident = m.group(1)
                g = _GLUED.match(ident)
                out[i] = g.group(1) if g else ident
                break
    return out


# Per file, the ops printed and how often, counted with a shell pipeline apart from ckkb:
#   grep -oE "(Perf:.*GB/s, |name: |GB/s, )[A-Za-z_:0-9]+" F | sed -E 's/.*(GB\/s, |name: )//'
#   grep -oE "^[A-Za-z_][A-Za-z_0-9:]*.* does not support" F | awk '{print $1}' | sed 's/<.*//'
# then `sort | uniq -c`; 011's fourteen glued names counted by their GemmXdlSplitKCShuffle_ start.
_GEMM_2022 = {"DeviceGemmXdl": 55, "DeviceGemm_Xdl_CShuffle": 48, "DeviceGemmDl": 1}
_MULTI_D_2022 = {"DeviceGemmMultipleD_Xdl_CShuffle": 49}
SAMPLE_OPS: dict[str, dict[str, int]] = {
    "001.txt": _GEMM_2022,
    "002.txt": _MULTI_D_2022,
    "003.txt": {},
    "004.txt": {},
    "005.txt": {},
    "006.txt": {},
    "007.txt": {"DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1": 1},
    "008.txt": {"DeviceGroupedConvBwdWeight_Xdl_CShuffle": 1},
    "009.txt": {"DeviceImageToColumn": 1},
    "010.txt": {"DeviceElementwiseNormalizationImpl": 1},
    "011.txt": {"GemmXdlSplitKCShuffle": 14},
    "012.txt": _GEMM_2022,
    "013.txt": _GEMM_2022,
    "014.txt": _MULTI_D_2022,
    "015.txt": _MULTI_D_2022,
    "016.txt": {"DeviceGemmXdl": 6},
    "024.txt": {"DeviceGemm_Xdl_CShuffle": 1},
    "025.txt": {"DeviceReduceSoftmax": 1},
}


def logged_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every instance name ckkb.logs reads from a log: results and Best names."""
    races, _ = parse_text(path.read_text())
    out = [(r.line, r.name) for race in races for r in race.results if r.name]
    out += [
        (race.info.best["line"], race.info.best["name"])
        for race in races
        if race.info.best and race.info.best.get("name")
    ]
    return sorted(out)


def check_samples(schemas: names.SchemaSet) -> dict[str, Counter[str]]:
    """Every sample's names parsed with `schemas`: each to the op its line prints, a matched one
    by a schema that prints that op. Returns the op counts per file."""
    got: dict[str, Counter[str]] = {}
    for f in sorted(SAMPLES.glob("*.txt")):
        want = ops_by_line(f)
        got[f.name] = Counter()
        logged = logged_names(f)
        # the same names in the same order; a Best block's name is a few lines below its start
        assert len(logged) == len(want), f.name
        for (line, name), (wline, wop) in zip(logged, sorted(want.items()), strict=True):
            assert 0 <= wline - line <= 4, (f.name, line, wline)
            p = names.parse(name, schemas)
            assert p.schema != "error", (f.name, line, name, p.error)
            assert p.op == wop, (f.name, line, name, p.op)
            if p.schema == "matched":
                for d in p.device_ops:  # no class that prints another op
                    printing = [s for s in schemas.values() if s.device_op == d]
                    assert any(p.op in s.ops for s in printing), (f.name, line, d)
            else:
                assert p.device_op is None
            got[f.name][p.op] += 1
    return got


def test_every_sample_is_covered():
    assert sorted(p.name for p in SAMPLES.glob("*.txt")) == sorted(SAMPLE_OPS)
    for f in sorted(SAMPLES.glob("*.txt")):
        assert Counter(ops_by_line(f).values()) == Counter(SAMPLE_OPS[f.name]), f.name


def test_every_sample_name_parses_to_the_op_its_release_printed():
    for schemas in (WITH_SPLIT_K, HOSTILE):
        got = check_samples(schemas)
        assert {f: dict(c) for f, c in got.items()} == SAMPLE_OPS

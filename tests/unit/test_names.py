"""ckkb.names: the instance-name grammar, schema matching, bad input, and `ckkb parse`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import lark
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckkb import names
from ckkb.cli import main
from ckkb.extract import typestrings
from ckkb.names import reader
from tests.conftest import FIXTURES, SAMPLES

CK_MINI = FIXTURES / "ck_mini"

# --------------------------------------------------------------------------- helpers


def sample_names() -> list[tuple[str, int, str]]:
    """(file, line, name) of every instance name printed in ../shared/ckprofiler_samples/."""
    out = []
    for f in sorted(SAMPLES.glob("*.txt")):
        for i, line in enumerate(f.read_text().splitlines(), start=1):
            s = line.strip()
            name = None
            if s.startswith(("Perf:", "Best Perf", "Best perf")) and "GB/s," in s:
                name = s.split("GB/s,", 1)[1].strip()
            elif s.startswith("name:"):
                name = s[5:].strip()
            elif s.endswith("does not support this problem"):
                name = s[: -len("does not support this problem")].strip()
            if name:
                out.append((f.name, i, name))
    return out


def fixture_schemas() -> names.SchemaSet:
    out = names.SchemaSet()
    for f in typestrings.STAGE.files(CK_MINI):
        rel = f.relative_to(CK_MINI).as_posix()
        schemas, _ = typestrings.extract_schemas(rel, f.read_bytes())
        for s in schemas:
            if s["status"] != "unsupported":
                out[s["device_op"]] = names.NameSchema(
                    device_op=s["device_op"],
                    ops=tuple(s["ops"]),
                    tokens=tuple(s["tokens"]),
                    file=rel,
                    line=s["line"],
                    status=s["status"],
                )
    return out


SCHEMAS = fixture_schemas()

UNIVERSAL = (
    "DeviceGemmXdlUniversal<MNKPadding, RCR> BlkSize: 256, BlkTile: 256x256x64, "
    "WaveTile: 32x32, WaveMap: 4x4, "
    "VmemReadVec: 8x8, BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v3, "
    "BlkGemmPipelinePrefetchStages: 2, Kpack: 8"
)
CSHUFFLE_V2 = (
    "DeviceGemm_Xdl_CShuffleV2<Default, 256, 256, 256, 32, 8, 8, 32, 32, 4, 4, 8, 8, 1, 1> "
    "LoopScheduler: Default, PipelineVersion: v1"
)
MX = (
    "DeviceGemmMX_Xdl_CShuffleV3<Default, RCR> BlkSize: 256, BlkTile: 128x128x256, "
    "WaveTile: 16x16, "
    "BlkGemmPipelineScheduler: Intrawave, BlkGemmPipelineVersion: v3, "
    "BlkGemmPipelinePrefetchStages: 2, ScaleBlockSize: 32"
)


# --------------------------------------------------------------------------- the samples


def test_every_sample_name_parses():
    found = sample_names()
    assert len(found) > 300
    assert len({n for _, _, n in found}) > 100
    for f, line, name in found:
        for schemas in (None, SCHEMAS):
            p = names.parse(name, schemas)
            assert p.schema != "error", f"{f}:{line}: {name!r}: {p.error}"
            assert p.op and name.startswith(p.op)
    files = {f for f, _, _ in found}
    assert {
        "001.txt",
        "002.txt",
        "007.txt",
        "008.txt",
        "009.txt",
        "010.txt",
        "011.txt",
        "016.txt",
        "024.txt",
        "025.txt",
    } <= files


def test_sample_forms_field_by_field():
    # 001: an old DeviceGemmXdl with three properties; ck_mini's DeviceGemmXdl prints no properties,
    # so the name is generic and the leading arguments map to the schema's parameters one by one
    p = names.parse(
        "DeviceGemmXdl<256, 128, 128, 4, 8, 32, 32, 2, 2> "
        "NumPrefetch: 1, LoopScheduler: Interwave, PipelineVersion: v1",
        SCHEMAS,
    )
    assert p.schema == "generic"
    assert p.args == ["256", "128", "128", "4", "8", "32", "32", "2", "2"]
    assert p.props == {"NumPrefetch": "1", "LoopScheduler": "Interwave", "PipelineVersion": "v1"}
    assert p.fields == {
        "BlockSize": 256,
        "MPerBlock": 128,
        "NPerBlock": 128,
        "K0PerBlock": 4,
        "K1": 8,
        "MPerXDL": 32,
        "NPerXDL": 32,
        "MXdlPerWave": 2,
        "NXdlPerWave": 2,
    }
    assert (
        p.normalised["tile_k"] == 32
        and p.normalised["waves_m"] == 2
        and p.normalised["waves_n"] == 2
    )
    # 016: the 2022-02 form, four arguments
    p = names.parse("DeviceGemmXdl<128, 128, 64, 4>", SCHEMAS)
    assert p.fields == {"BlockSize": 128, "MPerBlock": 128, "NPerBlock": 64, "K0PerBlock": 4}
    # 024: no schema for DeviceGemm_Xdl_CShuffle in ck_mini: grammar only
    p = names.parse(
        "DeviceGemm_Xdl_CShuffle<Default, 64, 32, 64, 32, 8, 8, 32, 32, 1, 2, 8, 8, 1, 1> "
        "LoopScheduler: Default, PipelineVersion: v2",
        SCHEMAS,
    )
    assert (p.op, p.schema, p.fields) == ("DeviceGemm_Xdl_CShuffle", "generic", {})
    assert p.args[0] == "Default" and p.args[1:4] == ["64", "32", "64"] and len(p.args) == 15
    assert p.props == {"LoopScheduler": "Default", "PipelineVersion": "v2"}
    # 025: arguments without spaces
    p = names.parse(
        "DeviceReduceSoftmax<256,M_C4_S1,K_C64_S8,InSrcVectorDim_1_InSrcVectorSize_8_OutDstVectorSize_8>"
    )
    assert p.args == [
        "256",
        "M_C4_S1",
        "K_C64_S8",
        "InSrcVectorDim_1_InSrcVectorSize_8_OutDstVectorSize_8",
    ]
    # 011: a name glued into one word, and ckProfiler's own ", KBatch 2" suffix
    p = names.parse(
        "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_32x16x8x8 "
        "LoopScheduler: Default, PipelineVersion: v2, KBatch 2"
    )
    assert p.op == "GemmXdlSplitKCShuffle_MNKPadding_RRR_B128_Vec8x1x4_32x16x8x8" and p.args == []
    assert p.props == {"LoopScheduler": "Default", "PipelineVersion": "v2", "KBatch": "2"}
    # 007: a multi-line block's name
    p = names.parse(
        "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1"
        "<256, 128, 256, 32, 8, 2, Default, 32, 32, 2, 4, 8, 4, 1, 1>"
    )
    assert (
        p.op == "DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1"
        and p.args[6] == "Default"
        and len(p.args) == 15
    )


def test_issue_name_cshuffle_v2_matched():
    p = names.parse(CSHUFFLE_V2, SCHEMAS)
    assert (p.schema, p.op, p.device_op) == (
        "matched",
        "DeviceGemm_Xdl_CShuffleV2",
        "DeviceGemm_Xdl_CShuffleV2",
    )
    assert p.fields == {
        "GemmSpec": "Default",
        "BlockSize": 256,
        "MPerBlock": 256,
        "NPerBlock": 256,
        "KPerBlock": 32,
        "AK1": 8,
        "BK1": 8,
        "MPerXDL": 32,
        "NPerXDL": 32,
        "MXdlPerWave": 4,
        "NXdlPerWave": 4,
        "ABlockTransferSrcScalarPerVector": 8,
        "BBlockTransferSrcScalarPerVector": 8,
        "CShuffleMXdlPerWavePerShuffle": 1,
        "CShuffleNXdlPerWavePerShuffle": 1,
        "LoopSched": "Default",
        "PipelineVer": "v1",
    }
    n = p.normalised
    assert (n["tile_m"], n["tile_n"], n["tile_k"], n["mfma_m"], n["waves_m"], n["waves_n"]) == (
        256,
        256,
        32,
        32,
        2,
        2,
    )
    assert (n["padding"], n["scheduler"], n["pipeline"], n["block_size"]) == (
        "Default",
        "Default",
        "v1",
        256,
    )


def test_issue_name_universal_matched_with_derived_values():
    p = names.parse(UNIVERSAL, SCHEMAS)
    assert (p.schema, p.op, p.device_op) == (
        "matched",
        "DeviceGemmXdlUniversal",
        "DeviceGemm_Xdl_CShuffleV3",
    )
    assert p.fields == {
        "GemmSpec": "MNKPadding",
        "ALayout": "Row",
        "BLayout": "Col",
        "CLayout": "Row",
        "BlockSize": 256,
        "MPerBlock": 256,
        "NPerBlock": 256,
        "KPerBlock": 64,
        "MPerXDL": 32,
        "NPerXDL": 32,
        "MXdlPerWave": 4,
        "NXdlPerWave": 4,
        "ABlockTransferSrcScalarPerVector": 8,
        "BBlockTransferSrcScalarPerVector": 8,
        "BlkGemmPipeSched": "Intrawave",
        "BlkGemmPipelineVer": "v3",
    }
    assert p.derived == {"PrefetchStages": 2, "AMmaKStride": 8}
    assert p.props["BlkTile"] == "256x256x64" and p.args == ["MNKPadding", "RCR"]
    n = p.normalised
    assert (
        n["a_layout"],
        n["b_layout"],
        n["c_layout"],
        n["padding"],
        n["pipeline"],
        n["scheduler"],
    ) == ("Row", "Col", "Row", "MNKPadding", "v3", "Intrawave")
    assert (n["waves_m"], n["waves_n"]) == (2, 2)
    assert p.key == re.sub(r"\s", "", UNIVERSAL).replace(
        "PrefetchStages:2", "PrefetchStages:*"
    ).replace("Kpack:8", "Kpack:*")
    assert p.to_json() == {
        "name": UNIVERSAL,
        "op": "DeviceGemmXdlUniversal",
        "fields": p.fields,
        "args": p.args,
        "props": p.props,
        "schema": "matched",
        "error": None,
    }


def test_issue_name_mx_and_cpp_type_names():
    p = names.parse(MX, SCHEMAS)
    assert (
        p.schema == "matched" and p.fields["ScaleBlockSize"] == 32 and p.fields["KPerBlock"] == 256
    )
    assert p.derived == {"PrefetchStages": 2}
    p = names.parse("DeviceGemmMX<ck::f4x2_pk_t, ck::f8_ocp_t, S<8, 32, 1>> ScaleBlockSize: 32")
    assert p.args == ["ck::f4x2_pk_t", "ck::f8_ocp_t", "S<8, 32, 1>"] and p.props == {
        "ScaleBlockSize": "32"
    }
    kinds = {t.text: t.type for t in p.tokens}
    assert kinds["ck::f4x2_pk_t"] == "TYPENAME" and kinds["8"] == "NUMBER" and kinds["S"] == "WORD"


def test_conditional_op_name_and_flags():
    p = names.parse("DeviceReduceMultiBlock<256,M_C4_S1>", SCHEMAS)
    assert (p.schema, p.op, p.fields) == (
        "matched",
        "DeviceReduceMultiBlock",
        {"BlockSize": 256, "MThreadClusterSize": 4, "MThreadSliceSize": 1},
    )
    p = names.parse("DeviceReduceBlockWise<128,M_C8_S2> Nan: 1", SCHEMAS)
    assert (
        p.schema == "matched"
        and p.op == "DeviceReduceBlockWise"
        and p.fields["PropagateNan"] is True
    )
    assert p.key == "*128,M_C8_S2>*"


def test_tokens_keep_text_and_positions():
    p = names.parse("  DeviceGemmXdl<256, 128>  K: 4x4 ")
    toks = p.tokens
    assert [t.type for t in toks] == [
        "WORD",
        "LESSTHAN",
        "NUMBER",
        "COMMA",
        "NUMBER",
        "MORETHAN",
        "WORD",
        "COLON",
        "TILE",
    ]
    for t in toks:
        assert p.name[t.start : t.end] == t.text
    assert toks[-1].text == "4x4" and toks[-1].start == p.name.index("4x4")


def test_real_forms_the_grammar_holds():
    cases = {
        "DeviceBatchedGemmXdl<256, 128, >": (["256", "128"], {}),
        "DeviceConvNdBwdDataNwcKxcNwk_Dl<1, 2> Filter1x1Stride1Pad0": (
            ["1", "2"],
            {"Filter1x1Stride1Pad0": ""},
        ),
        "DeviceX<1, TransposeTransferSrcScalarPerVector: 4, 2>": (
            ["1", "TransposeTransferSrcScalarPerVector: 4", "2"],
            {},
        ),
        "DeviceGemmMultipleDLayernorm_Wmma_CShuffleV3>"
        "BlkSize: 256, BlkTile: 128, 64, 32, GemmSpec: Default": (
            [],
            {"BlkSize": "256", "BlkTile": "128, 64, 32", "GemmSpec": "Default"},
        ),
        "DeviceGroupedQueryAttentionForward_Wmma, QueryGroupNumber: 8, <256, 128> AEnableLds: 1": (
            ["256", "128"],
            {"QueryGroupNumber": "8", "AEnableLds": "1"},
        ),
        "DeviceConv3dFwdNaive_Input_N_Di_Hi_Wi_C<>": ([], {}),
    }
    for name, (args, props) in cases.items():
        p = names.parse(name)
        assert p.schema == "generic", (name, p.error)
        assert (p.args, p.props) == (args, props), name


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "message", "position"),
    [
        ("", "empty name", 0),
        ("   ", "empty name", 0),
        ("Dev\x00ice<1>", "binary data", 3),
        ("\x89PNG\r\n\x1a\n", "binary data", 0),
        ("Op\ufffd<1>", "binary data", 2),
        ("DeviceGemmXdl<256, 128", "unbalanced '<'", 22),
        ("DeviceGemmXdl<256, S<1, 2>", "unbalanced '<'", 26),
        ("DeviceGemmXdl<256>>", "without a matching '<'", 18),
        ("DeviceGemmXdl<256,,128>", "empty template argument", 18),
        ("<256>", "must start with the device-op name", 0),
        ("Op<1> K: 1: 2", "unexpected ':'", 10),
    ],
)
def test_bad_names_give_message_and_position(name, message, position):
    p = names.parse(name)
    assert p.schema == "error" and p.op is None
    assert message in p.error["message"], p.error
    assert p.error["position"] == position
    assert p.to_json()["error"] == p.error and p.tokens == ()


def test_huge_and_non_string_input_never_raise():
    p = names.parse("DeviceGemmXdl<" + "1, " * 400_000 + "1>")
    assert p.schema == "error" and "too long" in p.error["message"] and len(p.name) < 300
    p = names.parse(None)  # type: ignore[arg-type]
    assert p.schema == "error" and "not a string" in p.error["message"]


def test_memoised_and_schema_sets_hash_by_identity():
    a = names.parse(UNIVERSAL, SCHEMAS)
    assert names.parse(UNIVERSAL, SCHEMAS) is a
    other = names.SchemaSet(SCHEMAS)
    assert other == other and other != SCHEMAS
    assert (
        names.parse(UNIVERSAL, other) is not a and names.parse(UNIVERSAL, other).fields == a.fields
    )
    plain = dict(SCHEMAS)  # a plain mapping works too (not memoised)
    assert names.parse(UNIVERSAL, plain).fields == a.fields


def test_grammar_is_lalr_and_cached():
    p = names.lark_parser()
    assert p.options.parser == "lalr" and p.options.cache and p.options.propagate_positions


# --------------------------------------------------------------------------- properties

FRAGMENTS = [
    "Op",
    "DeviceGemm_Xdl",
    "S",
    "ck::f8_t",
    "::x",
    "a::",
    "1",
    "-2",
    "3.5",
    "8x8",
    "x",
    "_a1",
    "<",
    ">",
    ",",
    ":",
    "::",
    " ",
    "  ",
    "Key",
    "K1",
    "\t",
    "%",
    "a:b",
    " \t",
    "\t ",
]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14).map("".join))
def test_parse_accepts_exactly_the_grammar(text):
    """parse's verdict is the grammar's (lark's own parse), and for accepted strings the op,
    arguments and properties are what the grammar reads."""
    try:
        want = reader.read_with_grammar(text)
    except lark.exceptions.UnexpectedInput:
        want = None
    got = names.parse(text, None)
    if want is None or not text.strip():
        assert got.schema == "error", (text, got)
        return
    assert got.schema != "error", (text, got.error)
    assert (got.op, got.args, got.props) == (
        want.op,
        want.args,
        {k: v for k, _kind, v in want.props},
    ), text


SPEC_WORDS = ["Default", "MNKPadding", "KPadding", "MNPadding"]


def _value(t, draw):
    conv, kind = t.get("conv"), t.get("kind")
    if conv == "spec":
        return draw(st.sampled_from(SPEC_WORDS))
    if conv == "layout_initial":
        return draw(st.sampled_from("RC"))
    if conv == "enum" and t.get("map"):
        return draw(st.sampled_from(sorted(t["map"].values())))
    if kind == "bool":
        return draw(st.sampled_from("01"))
    return str(draw(st.integers(min_value=1, max_value=4096)))


@st.composite
def printed_names(draw):
    s = draw(st.sampled_from(sorted(SCHEMAS.values(), key=lambda s: s.device_op)))
    fields: dict = {}
    derived: dict = {}

    def render(tokens):
        out = []
        for t in tokens:
            if "lit" in t:
                out.append(t["lit"])
            elif "alt" in t:
                out.append(render(t["alt"][draw(st.integers(0, len(t["alt"]) - 1))]))
            elif "ref" in t:
                if t["ref"] in fields:  # one parameter printed twice prints one value
                    out.append(fields[t["ref"]][0])
                    continue
                v = _value(t, draw)
                fields[t["ref"]] = (v, t)
                out.append(v)
            else:
                v = str(draw(st.integers(min_value=0, max_value=64)))
                derived[t["derived"]] = int(v)
                out.append(v)
        return "".join(out)

    return s, render(s.tokens), fields, derived


@settings(max_examples=300, deadline=None)
@given(printed_names())
def test_round_trip_names_from_schemas(case):
    """Names generated from the fixture schemas parse back to the same fields."""
    s, name, fields, derived = case
    p = names.parse(name, SCHEMAS)
    assert p.schema == "matched", (name, p.error)
    assert p.device_op == s.device_op
    want = {}
    for ref, (v, t) in fields.items():
        if t.get("conv") == "layout_initial":
            want[ref] = {"R": "Row", "C": "Col"}[v]
        elif t.get("kind") == "bool":
            want[ref] = v == "1"
        else:
            want[ref] = int(v) if v.isdigit() else v
    assert p.fields == want
    assert p.derived == derived


NAME_TEXTS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14).map("".join),
    printed_names().map(lambda case: case[1]),
    st.sampled_from(sorted({n for _, _, n in sample_names()})),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NAME_TEXTS)
def test_fast_reader_is_the_grammar(text):
    """The fast path (reader.read_fast) answers a name only as the reference (the grammar's own
    parse) reads it: the same op, arguments, and properties with their kinds."""
    fast = reader.read_fast(text)
    if fast is None:
        return
    assert fast == reader.read_with_grammar(text), text


def test_fast_reader_takes_the_common_shapes():
    """The fast path answers the names ckProfiler prints most (else it would save nothing), and
    leaves nested lists and '::' names to the grammar."""
    for name in (UNIVERSAL, CSHUFFLE_V2, MX, "DeviceGemmXdl<256, 128>  K: 4x4, KBatch 2"):
        assert reader.read_fast(name) == reader.read_with_grammar(name), name
    for name in ("DeviceGemmMX<ck::f4x2_pk_t, S<8, 32, 1>> ScaleBlockSize: 32", "1<2>"):
        assert reader.read_fast(name) is None, name
    with pytest.raises(lark.exceptions.UnexpectedInput):
        reader.read("1<2>")  # a NUMBER is not a name: the grammar says so


# --------------------------------------------------------------------------- the CLI


def _run(args, stdin=None):
    return CliRunner().invoke(main, args, input=stdin, catch_exceptions=False)


def test_cli_parse_json_and_exit_codes(tmp_path):
    missing = str(tmp_path / "none.db")
    r = _run(["parse", CSHUFFLE_V2, "--json", "--db", missing])
    assert r.exit_code == 2 and "knowledge base not found" in r.output
    r = _run(["parse", CSHUFFLE_V2, "Op<1, 2", "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert [o["schema"] for o in out] == ["generic", "error"]
    # issue 3's shape, plus (issue 15) the tree whose schemas read it: None without a database
    assert set(out[0]) == {"name", "op", "fields", "args", "props", "schema", "error", "tree"}
    assert out[0]["tree"] is None
    assert out[1]["error"]["position"] == 7


def test_cli_parse_stdin_bad_lines_each_answered():
    junk = b"\xff\xfe\x00binary"
    data = (
        b"\n".join(
            [
                CSHUFFLE_V2.encode(),
                b"",
                junk,
                b"DeviceGemmXdl<1, 2",
                b"Op<" + b"1," * 600_000 + b"1>",
                b"DeviceGemmXdl<256>",
            ]
        )
        + b"\n"
    )
    r = CliRunner().invoke(main, ["parse", "-", "--json"], input=data, catch_exceptions=False)
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert len(out) == 6
    assert [o["schema"] for o in out] == ["generic", "error", "error", "error", "error", "generic"]
    msgs = [o["error"]["message"] if o["error"] else "" for o in out]
    assert (
        "empty name" in msgs[1]
        and "binary data" in msgs[2]
        and "unbalanced" in msgs[3]
        and "too long" in msgs[4]
    )


def test_cli_parse_text_output():
    r = _run(["parse", "DeviceGemmXdl<1, 2", "DeviceGemmXdl<256, 128>"])
    assert r.exit_code == 1
    assert "unbalanced '<'" in r.output and "^" in r.output and "DeviceGemmXdl" in r.output


def test_read_stdin_names_keeps_empty_lines_but_not_the_final_newline():
    import io

    assert __import__("ckkb.cli.names", fromlist=["x"]).read_stdin_names(
        io.BytesIO(b"a\n\nb\n")
    ) == ["a", "", "b"]
    assert __import__("ckkb.cli.names", fromlist=["x"]).read_stdin_names(io.BytesIO(b"a\r\nb")) == [
        "a",
        "b",
    ]


def test_sample_list_is_real():
    assert Path(SAMPLES).is_dir()


def test_parsed_names_pickle_with_their_key():
    import pickle

    p = names.parse(UNIVERSAL, SCHEMAS)
    q = pickle.loads(pickle.dumps(p))
    assert (q.key, q.fields, q.derived, q.normalised, q.to_json()) == (
        p.key,
        p.fields,
        p.derived,
        p.normalised,
        p.to_json(),
    )


def test_cli_parse_degrades_without_a_usable_default_db(tmp_path, monkeypatch):
    bad = tmp_path / "ckkb.db"
    bad.write_bytes(b"not sqlite at all")
    monkeypatch.setenv("CKKB_DB", str(bad))
    r = CliRunner().invoke(main, ["parse", CSHUFFLE_V2, "--json"], catch_exceptions=False)
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["schema"] == "generic"
    assert "grammar only" in r.stderr
    r = CliRunner().invoke(main, ["parse", CSHUFFLE_V2, "--db", str(bad)], catch_exceptions=False)
    assert r.exit_code == 2 and "not a ckkb knowledge base" in r.output

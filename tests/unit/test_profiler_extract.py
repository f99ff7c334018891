"""Stage ck.profiler on hand-written fixture sources (tests/fixtures/ck_mini/profiler/)."""

from __future__ import annotations

import json
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from ckkb import sources
from ckkb.extract import profiler_usage as pe
from ckkb.extract.profiler import STAGE
from ckkb.extract.profiler_usage import parse_codes, parse_legend
from ckkb.kb.build import build


def _build(root, db):
    return build(db, {"ck": sources.ck_tree(root)}, stages=[STAGE], jobs=1)


def _q(db, sql, *args):
    return sqlite3.connect(db).execute(sql, args).fetchall()


def test_ops_registered(copy_tree, tmp_db):
    s = _build(copy_tree("ck_mini"), tmp_db)
    assert s.diagnostics == []
    rows = _q(
        tmp_db,
        "select name, description, file, line, function, gemm_family, "
        "legend_kind, argc_allowed, interfaces from profiler_ops order by name",
    )
    assert rows == [
        (
            "gemm",
            "GEMM",
            "profiler/src/profile_gemm.cpp",
            60,
            "profile_gemm",
            1,
            "positional",
            "[14, 16]",
            '["DeviceGemm"]',
        ),
        (
            "gemm_universal",
            "Universal GEMM",
            "profiler/src/profile_gemm_universal.cpp",
            64,
            "profile_gemm_universal",
            1,
            "positional",
            "[15, 18]",
            '["DeviceGemmV2"]',
        ),
        (
            "softmax",
            "Softmax",
            "profiler/src/profile_softmax.cpp",
            25,
            "profile_softmax",
            0,
            "positional",
            "[]",
            "[]",
        ),
    ]


def test_gemm_legend(copy_tree, tmp_db):
    _build(copy_tree("ck_mini"), tmp_db)
    args = {
        r[0]: r[1:]
        for r in _q(
            tmp_db,
            "select position, name, codes, enum, optional, "
            "[default] from profiler_args where op = 'gemm'",
        )
    }
    assert sorted(args) == list(range(1, 16))
    assert args[1][0] == "tensor operation"
    assert args[2][0] == "data type"
    assert json.loads(args[2][1]) == {"0": "fp32", "1": "fp16", "2": "bf16"}
    assert json.loads(args[2][2]) == {"0": "F32_F32_F32", "1": "F16_F16_F16", "2": "BF16_BF16_BF16"}
    assert json.loads(args[3][1])["1"] == "A[m, k] * B[n, k] = C[m, n]"
    assert json.loads(args[3][2])["3"] == "KM_NK_MN"
    assert json.loads(args[7][1]) == {"0": "no", "1": "yes"}
    assert [args[p][0] for p in range(8, 14)] == ["M", "N", "K", "StrideA", "StrideB", "StrideC"]
    assert [args[p][3] for p in range(2, 14)] == [0] * 12
    assert args[14] == ("number of warm-up cycles", "{}", "{}", 1, "1")
    assert args[15] == ("number of iterations", "{}", "{}", 1, "10")


def test_universal_legend_and_quirk(copy_tree, tmp_db):
    _build(copy_tree("ck_mini"), tmp_db)
    args = {
        r[0]: r[1:]
        for r in _q(
            tmp_db,
            "select position, name, codes, optional, [default] "
            "from profiler_args where op = 'gemm_universal'",
        )
    }
    assert json.loads(args[2][1]) == {
        "0": "fp16",
        "1": "bf16",
        "2": "f8->bf16, comp f8",
    }  # literal split over two lines
    assert json.loads(args[7][1]) == {"0": "no", "1": "yes"}  # '0=no, 1=yes'
    assert args[14][:1] + args[14][2:] == ("split k into multiple batches", 0, None)
    assert args[17] == ("memory for rotating buffer", "{}", 1, "0")
    (q,) = _q(
        tmp_db,
        "select kind, condition, summary, details, line "
        "from profiler_quirks where op = 'gemm_universal'",
    )
    assert q[0] == "swap_args" and q[4] == 47
    assert q[1] == "std::stoi(argv[9]) % 8 != 0 && std::stoi(argv[8]) % 8 == 0"
    assert q[2].startswith("when N % 8 != 0 && M % 8 == 0 the op swaps M<->N, StrideA<->StrideB")
    d = json.loads(q[3])
    assert d["swaps"] == [[8, 9], [11, 12]] and d["names"] == [["M", "N"], ["StrideA", "StrideB"]]
    assert d["tests"] == [
        {"position": 9, "mod": 8, "cmp": "!=", "value": 0},
        {"position": 8, "mod": 8, "cmp": "==", "value": 0},
    ]
    assert _q(tmp_db, "select count(*) from profiler_quirks where op != 'gemm_universal'") == [(0,)]


def test_quirk_is_read_from_the_source(copy_tree, tmp_db):
    root = copy_tree("ck_mini")
    src = root / "profiler/src/profile_gemm_universal.cpp"
    text = src.read_text()
    # make both branches read the same positions: no swap any more, so no quirk
    src.write_text(
        text.replace("M       = std::stoi(argv[9]);", "M       = std::stoi(argv[8]);", 1)
        .replace("N       = std::stoi(argv[8]);", "N       = std::stoi(argv[9]);", 1)
        .replace("StrideA = std::stoi(argv[12]);", "StrideA = std::stoi(argv[11]);", 1)
        .replace("StrideB = std::stoi(argv[11]);", "StrideB = std::stoi(argv[12]);", 1)
    )
    _build(root, tmp_db)
    assert _q(tmp_db, "select count(*) from profiler_quirks") == [(0,)]


def test_options_legend(copy_tree, tmp_db):
    _build(copy_tree("ck_mini"), tmp_db)
    rows = _q(
        tmp_db,
        "select position, name, kind from profiler_args where op "
        "= 'softmax' order by position is null, position, name",
    )
    assert rows == [
        (1, "tensor operation", "positional"),
        (2, "data type", "positional"),
        (3, "verification", "positional"),
        (None, "--length", "option"),
        (None, "--reduce", "option"),
    ]


def test_damaged_sources_are_reported_not_fatal(copy_tree, tmp_db):
    root = copy_tree("ck_mini")
    (root / "profiler/src/profile_junk.cpp").write_bytes(
        b"REGISTER_PROFILER_OPERATION\x00\xff\xfe" * 50
    )
    (root / "profiler/src/profile_cut.cpp").write_text(
        '#define OP_NAME "cut"\nstatic void h() { printf("arg1: tensor operation (cut)\\n");\n'
        "REGISTER_PROFILER_OPERATION(OP_NAME, get_desc(), profile_cut);\n"
    )
    (root / "profiler/src/profile_noname.cpp").write_text(
        'REGISTER_PROFILER_OPERATION(make_name(), "x", f);\n'
    )
    s = _build(root, tmp_db)
    msgs = sorted((d.file, d.message.split(":")[0]) for d in s.diagnostics)
    assert ("profiler/src/profile_junk.cpp", "binary file, not C++") in msgs
    assert any(
        f == "profiler/src/profile_noname.cpp" and "not a string literal" in m
        for f, m in [(d.file, d.message) for d in s.diagnostics]
    )
    names = [r[0] for r in _q(tmp_db, "select name from profiler_ops order by name")]
    assert names == ["cut", "gemm", "gemm_universal", "softmax"]
    assert _q(tmp_db, "select description from profiler_ops where name = 'cut'") == [("",)]


def test_wheel_style_legend_ranges():
    legend = parse_legend(
        "arg1: tensor operation (x)\n"
        "arg12 to 17/29: M0, M1, N0, N1, K0, K1\n"
        "arg18/30 to 33/77: Strides for A, B, D and E (skip for default)\n"
        "arg34: num_sk_blocks (optional)\n"
        "{ck::utils::conv::get_conv_param_parser_helper_msg()}\n"
        "arg35: time kernel (0=n0, 1=yes)\n"
    )
    pos = {e["position"]: e for e in legend}
    assert sorted(pos) == [1, 12, 13, 14, 15, 16, 17, 18, 34, 35]
    assert [pos[p]["name"] for p in range(12, 18)] == ["M0", "M1", "N0", "N1", "K0", "K1"]
    assert pos[18]["name"] == "Strides for A, B, D and E" and pos[18]["codes"] == {}
    assert pos[34]["optional"] is True and pos[12]["optional"] is False
    assert pos[35]["codes"] == {"0": "n0", "1": "yes"}


_label = (
    st.text(
        alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789 ->@_[]*"),
        min_size=1,
        max_size=20,
    )
    .map(str.strip)
    .filter(lambda s: s and not any(s.startswith(f"{d}") for d in "0123456789"))
)


@settings(max_examples=80, deadline=None)
@given(
    labels=st.lists(_label, min_size=1, max_size=9),
    sep=st.sampled_from(["; ", ", ", ";\n                 "]),
    eq=st.sampled_from([": ", "=", " : "]),
)
def test_code_table_roundtrip(labels, sep, eq):
    text = "data type (" + sep.join(f"{i}{eq}{lab}" for i, lab in enumerate(labels)) + ")"
    assert parse_codes(text.replace("\n", " ")) == {
        str(i): " ".join(lab.split()) for i, lab in enumerate(labels)
    }


def _unescape_chars(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(pe._ESC.get(body[i + 1], body[i + 1]))
            i += 2
            continue
        out.append(body[i])
        i += 1
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='ab\\n"t0\n?x', max_size=12))
def test_unescape_reads_escapes_like_a_char_by_char_scan(body):
    assert pe._unescape(body) == _unescape_chars(body)

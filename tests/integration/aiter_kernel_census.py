"""A second method for the kernelId/kernelName figures on aiter 2026-08, written apart from ckkb's
extractor: Python's `ast` reads the dict literals and dataclass fields of the kernel-list files,
the `name` properties are written out by hand below (read from the files), the cktile lists are
expanded by a hand-written copy of what `expand_blockpercu` does, and the per-row list choice is
the tuners' getKernelName as read by hand. The csv module reads the rows. No libcst, no ckkb code.

Row classes: "ok" (kernelName is what kernelId's entry is named), "mismatch" (the name belongs
to another id of the same list), "stale" (no entry of the list has that name), "unknown" (the id
is not in the list)."""

from __future__ import annotations

import ast
import csv
from collections import Counter
from pathlib import Path

CS = "csrc"


def _x(vals: list) -> str:
    return "x".join(str(v) for v in vals)


def _ck(prefix: str, scale: bool, mid: list[str], sched: str, spv_chars: bool = False):
    """CK kernelInstance names: prefix, [scale blocks], BLOCK_SIZE..KPerBLOCK, `mid` pairs, the
    transfer lists, the CShuffle pair, the scheduler lowered, v<pipeline>."""

    def name(f: dict) -> str:
        parts = [prefix]
        if scale:
            parts.append(_x([f["ScaleBlockM"], f["ScaleBlockN"], f["ScaleBlockK"]]))
        parts.append(_x([f["BLOCK_SIZE"], f["MPerBLOCK"], f["NPerBLOCK"], f["KPerBLOCK"]]))
        for a, b in zip(mid[::2], mid[1::2], strict=True):
            parts.append(_x([f[a], f[b]]))
        parts += [_x(f["ABLOCK_TRANSFER"]), _x(f["BBLOCK_TRANSFER"]), _x(f["CBLOCK_TRANSFER"])]
        # a4w4: ("x").join(str(self.CBLOCK_SPV)) joins the characters of the list's text
        parts.append("x".join(str(f["CBLOCK_SPV"])) if spv_chars else _x(f["CBLOCK_SPV"]))
        parts.append(
            _x([f["CSHUFFLE_MX_PER_WAVE_PERSHUFFLE"], f["CSHUFFLE_NX_PER_WAVE_PERSHUFFLE"]])
        )
        parts += [f[sched].lower(), f"v{f['PIPELINE_VERSION']}"]
        return "_".join(parts)

    return name


def _tile_blockscale(f: dict) -> str:
    parts = [
        "a8w8_blockscale_cktile",
        _x([f["M_Tile"], f["N_Tile"], f["K_Tile"]]),
        _x([f["M_Warp"], f["N_Warp"], f["K_Warp"]]),
        _x([f["M_Warp_Tile"], f["N_Warp_Tile"], f["K_Warp_Tile"]]),
        f["Scheduler"].lower(),
        _x([int(f["TiledMMAPermuteN"]), int(f["TransposeC"]), int(f["UsePersistentKernel"])]),
        str(f["BlockPerCu"]),
    ]
    if f["AQRowMajor"]:
        parts.append("aqrm")
    return "_".join(parts)


def _tile_bpreshuffle(f: dict) -> str:
    flags = [
        "sTransposeC",
        "sUseStructuredSparsity",
        "sTileParitionerGroupNum",
        "sTileParitionerM01",
        "sNumWaveGroups",
        "sDoubleSmemBuffer",
        "PadM",
        "PadN",
        "PadK",
        "BlockPerCu",
    ]
    return "_".join(
        [
            "a8w8_bpreshuffle_cktile",
            _x([f[k] for k in flags]),
            _x([f["MTile"], f["NTile"], f["KTile"]]),
            _x([f["MWarp"], f["NWarp"], f["KWarp"]]),
            _x([f["MWTile"], f["NWTile"], f["KWTile"]]),
            f["sScheduler"].lower(),
        ]
    )


_MID_ROWWISE = ["WAVE_TILE_M", "WAVE_TILE_N", "WAVE_MAP_M", "WAVE_MAP_N"]
_MID_XDL = ["AK1", "BK1", "MPerXDL", "NPerXDL"]
FILES = {
    "ck_gemm_a8w8/gemm_a8w8_common.py": _ck("a8w8_rowwise", False, _MID_ROWWISE, "LOOP_SCHED"),
    "ck_batched_gemm_a8w8/batched_gemm_a8w8_common.py": _ck(
        "a8w8_batched_rowwise", False, _MID_ROWWISE, "LOOP_SCHED"
    ),
    "ck_batched_gemm_bf16/batched_gemm_bf16_common.py": _ck(
        "bf16_batched", False, _MID_ROWWISE, "LOOP_SCHED"
    ),
    "ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_common.py": _ck(
        "a4w4_blockscale", False, _MID_XDL, "PIPELINE_Sched", spv_chars=True
    ),
    "ck_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_common.py": _ck(
        "a8w8_bpreshuffle", False, _MID_XDL, "PIPELINE_Sched"
    ),
    "ck_gemm_a8w8_blockscale_bpreshuffle/gemm_a8w8_blockscale_bpreshuffle_common.py": _ck(
        "a8w8_blockscale_bpreshuffle", True, _MID_XDL, "PIPELINE_Sched"
    ),
    "ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_instance.py": _ck(
        "a8w8_blockscale", True, [*_MID_XDL, "WAVE_MAP_M", "WAVE_MAP_N"], "PIPELINE_Sched"
    ),
    "ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_cktile_instance.py": _tile_blockscale,
    "cktile_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_cktile_common.py": _tile_bpreshuffle,
}


def _module(path: Path) -> tuple[dict[str, dict[int, dict]], int]:
    """The file's int-keyed dict literals of dataclass calls, as {id: fields}, and its
    BLOCK_PER_CU_MAX (0 if none)."""
    tree = ast.parse(path.read_text())
    fields: dict[str, list[tuple[str, object]]] = {}
    dicts: dict[str, dict[int, dict]] = {}
    bpc = 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields[node.name] = [
                (s.target.id, ast.literal_eval(s.value) if s.value is not None else None)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            ]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "BLOCK_PER_CU_MAX":
                bpc = ast.literal_eval(node.value)
            if not isinstance(node.value, ast.Dict):
                continue
            d: dict[int, dict] = {}
            for k, v in zip(node.value.keys, node.value.values, strict=True):
                if not (isinstance(v, ast.Call) and getattr(v.func, "id", None) in fields):
                    break
                cls = fields[v.func.id]
                f = {n: dflt for n, dflt in cls}
                f.update({n: ast.literal_eval(a) for (n, _), a in zip(cls, v.args, strict=False)})
                f.update({kw.arg: ast.literal_eval(kw.value) for kw in v.keywords})
                d[ast.literal_eval(k)] = f
            else:
                dicts[name] = d
    return dicts, bpc


def _expand(base: dict[int, dict], bpc_max: int) -> dict[int, dict]:
    """expand_blockpercu as read: every tile (all fields but BlockPerCu) gets the BlockPerCu
    values 1..max it lacks, numbered on from max(id)+1, tiles in first-seen order."""
    out = dict(base)
    tiles: dict[tuple, set[int]] = {}
    first: dict[tuple, dict] = {}
    for f in base.values():
        t = tuple((k, repr(v)) for k, v in f.items() if k != "BlockPerCu")
        tiles.setdefault(t, set()).add(f["BlockPerCu"])
        first.setdefault(t, f)
    nxt = max(base) + 1
    for t, have in tiles.items():
        for b in range(1, bpc_max + 1):
            if b not in have:
                out[nxt] = {**first[t], "BlockPerCu": b}
                nxt += 1
    return out


def _named(root: Path, rel: str, dict_name: str, base: str | None = None) -> dict[int, str]:
    dicts, bpc = _module(root / CS / rel)
    d = _expand(dicts[base], bpc) if base else dicts[dict_name]
    return {k: FILES[rel](f) for k, f in d.items()}


def lists(root: Path) -> dict[str, object]:
    """op config name -> chooser(row) -> {id: name}: the tuners' getKernelName read by hand."""
    a8w8 = _named(root, "ck_gemm_a8w8/gemm_a8w8_common.py", "kernels_list")
    b8 = _named(root, "ck_batched_gemm_a8w8/batched_gemm_a8w8_common.py", "kernels_list")
    b16 = _named(root, "ck_batched_gemm_bf16/batched_gemm_bf16_common.py", "kernels_list")
    a4 = _named(root, "ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_common.py", "kernels_list")
    bp = _named(root, "ck_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_common.py", "kernels_list")
    bsbp = _named(
        root,
        "ck_gemm_a8w8_blockscale_bpreshuffle/gemm_a8w8_blockscale_bpreshuffle_common.py",
        "kernels_list",
    )
    bs = _named(
        root, "ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_instance.py", "candidate_kernels_dict"
    )
    tile_bs = "ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_cktile_instance.py"
    tile_bp = "cktile_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_cktile_common.py"
    # module code: gfx95* -> kernels_list_95x else kernels_list_942 (blockscale);
    # gfx942 -> kernels_list_942 else kernels_list_950 (bpreshuffle)
    tbs = {g: _named(root, tile_bs, "", f"kernels_list_{g}") for g in ("95x", "942")}
    tbp = {g: _named(root, tile_bp, "", f"kernels_list_{g}") for g in ("942", "950")}

    def tile_bs_for(gfx: str) -> dict[int, str]:
        return tbs["95x" if gfx.startswith("gfx95") else "942"]

    def tile_bp_for(gfx: str) -> dict[int, str]:
        return tbp["942" if gfx == "gfx942" else "950"]

    return {
        "a8w8_tuned_gemm": lambda r: a8w8,
        "a8w8_tuned_batched_gemm": lambda r: b8,
        "bf16_tuned_batched_gemm": lambda r: b16,
        "a4w4_blockscale_tuned_gemm": lambda r: a4,
        "a8w8_bpreshuffle_tuned_gemm": lambda r: (
            bp if r["libtype"] == "ck" else tile_bp_for(r["gfx"])
        ),
        "a8w8_blockscale_tuned_gemm": lambda r: (
            bs if r.get("libtype", "ck") == "ck" else tile_bs_for(r["gfx"])
        ),
        # preshuffleB=True: the tuner's --preshuffle writes this config
        "a8w8_blockscale_bpreshuffle_tuned_gemm": lambda r: (
            bsbp if r.get("libtype", "ck") == "ck" else tile_bs_for(r["gfx"])
        ),
    }


def id_name_census(root: Path) -> dict[str, Counter]:
    """Per tuned config name (default file and model_configs merged as core.py globs them):
    ok / mismatch / stale / unknown counts of CK and cktile rows."""
    cfg = root / "aiter" / "configs"
    out: dict[str, Counter] = {}
    for tn, choose in lists(root).items():
        files = [cfg / f"{tn}.csv"] + sorted(
            p for p in (cfg / "model_configs").glob(f"*{tn}*.csv") if "untuned" not in p.name
        )
        c: Counter = Counter()
        for p in files:
            if not p.is_file():
                continue
            with open(p, newline="") as fh:
                for r in csv.DictReader(fh):
                    r = {k.strip(): (v or "").strip() for k, v in r.items() if k}
                    if r.get("libtype", "ck") not in ("ck", "cktile"):
                        continue
                    if r.get("kernelName", "").startswith("_Z") or not r.get("kernelId"):
                        continue
                    d = choose(r)
                    kid, name = int(r["kernelId"]), r["kernelName"]
                    if kid not in d:
                        c["unknown"] += 1
                    elif d[kid] == name:
                        c["ok"] += 1
                    elif name in d.values():
                        c["mismatch"] += 1
                    else:
                        c["stale"] += 1
        out[tn] = c
    return out


# ------------------------------------------------------------------ MoE 2-stage (kernelName1/2)
# Written by hand from aiter 2026-08's gemm_moe_tune.py (gen_2stages_task), the getters of
# csrc/ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py, aiter/ops/moe_op.py's
# dtype2str_dict, aiter/utility/dtypes.py (fp8 per arch) and csrc/include/aiter_enum.h.
MOE = "ck_gemm_moe_2stages_codegen/gemm_moe_ck2stages_common.py"
_QUANT = {"No": 0, "per_Tensor": 1, "per_Token": 2, "per_1x32": 3, "per_1x128": 4}
_ACT = {"gelu": 0, "silu": 1, "swiglu": 3}
_CU_GFX = {"80": "gfx942", "304": "gfx942", "256": "gfx950"}


def _moe_dtype(s: str, gfx: str) -> str | None:
    fp8 = "torch.float8_e4m3fn" if gfx == "gfx950" else "torch.float8_e4m3fnuz"
    return {
        "torch.float16": "f16",
        "torch.bfloat16": "b16",
        fp8: "f8",
        "torch.int8": "i8",
        "torch.float4_e2m1fn_x2": "fp4x2",
        "torch.uint32": "i4",
        "torch.int4": "i4",
    }.get(s)


def _moe_tag(a: str, b: str, quant: int, gfx: str) -> str:
    b8, b16, b4 = (
        ("F8", "I8", "f8", "i8"),
        ("B16", "F16", "b16", "f16"),
        ("I4", "i4", "FP4X2", "fp4x2"),
    )
    if a in b16 and b in b16:
        return "a16w16_gfx950" if gfx == "gfx950" else "a16w16"
    if a in b8 and b in b8 and quant in (3, 4):
        return "a8w8blkscale"
    if a in b8 and b in b8:
        return "a8w8_gfx950" if gfx == "gfx950" else "a8w8"
    if a in b8 and b in b4:
        return "a8w4"
    return "a4w4"  # both fp4x2: the tuner passes preshuffle=True


def _moe_names(root: Path, row: dict) -> set[str]:
    dicts, _ = _module(root / CS / MOE)
    gfx = row.get("gfx") or _CU_GFX[row["cu_num"]]
    a, b, c = (_moe_dtype(row[k], gfx) for k in ("q_dtype_a", "q_dtype_w", "dtype"))
    quant = _QUANT[row["q_type"].split(".")[-1]]
    act = row["act_type"].split(".")[-1].lower()
    mrw1 = int(row["doweight_stage1"])
    tag = _moe_tag(a, b, quant, gfx)
    lst = {"a8w8blkscale": "a8w8_gemm{}_blockscale_kernels_list"}.get(tag)
    if lst is None:
        base, _, arch = tag.partition("_")
        lst = f"{base}_gemm{{}}_kernels_list" + (f"_{arch}" if arch else "")
    ops1 = {
        "a8w4": ["MulABScaleWint4"],
        "a8w8blkscale": [
            "MulABScaleExpertWeightA8W8blkscale",
            "MulABScaleExpertWeightA8W8blkscaleSplitk",
        ],
        "a8w8": ["MulABScale"],
        "a8w8_gfx950": ["TypeCast"],  # `tag == "a8w8"` is false for it: the class default
        "a4w4": ["MulABScaleShuffled"],
        "a16w16": ["TypeCastExpertWeight" if mrw1 else "TypeCast"],
        "a16w16_gfx950": ["TypeCast"],  # tag a16w16_gfx950 keeps the class default
    }[tag]
    mrw2 = int(not mrw1)
    ops2 = {
        "a8w4": "MulABScaleExpertWeightWin4",
        "a8w8blkscale": "MulABScaleExpertWeightA8W8blkscale",
        "a8w8": "MulABScaleExpertWeight",
        "a8w8_gfx950": "TypeCast",
        "a4w4": "MulABScaleExpertWeightShuffled",
        "a16w16": "TypeCastExpertWeight" if mrw2 else "TypeCast",
        "a16w16_gfx950": "TypeCast",
    }[tag]
    dt = "_".join(x.upper() for x in (a, b, c))
    out = set()
    for stage, ops, mrw in ((1, ops1, mrw1), (2, [ops2], mrw2)):
        for f in dicts[lst.format(stage)].values():
            for op in ops:
                parts = [
                    f"moe_ck2stages_gemm{stage}",
                    _x([f["BLOCK_SIZE"], f["MPerBlock"], f["NPerBlock"], f["KPerBlock"]]),
                    _x([f["MWaves"], f["NWaves"]]),
                    op,
                    f"v{f['GemmPipelineVersion']}",
                    "Nswizzle0",
                    f"Quant{quant}",
                    f"MulRoutedWeight{mrw}",
                ]
                out.add("_".join(parts + ([act] if stage == 1 else []) + [dt]))
    return out


def moe_census(root: Path) -> Counter:
    """ok / stale counts of the moe_ck2stages_* cells of the MoE configs the runtime merges
    (tuned_fmoe.csv and model_configs/*tuned_fmoe*, records with the header's field count)."""
    cfg = root / "aiter" / "configs"
    files = [cfg / "tuned_fmoe.csv"] + sorted(
        p for p in (cfg / "model_configs").glob("*tuned_fmoe*.csv") if "untuned" not in p.name
    )
    c: Counter = Counter()
    for p in files:
        with open(p, newline="") as fh:
            rd = csv.reader(fh)
            head = [h.strip() for h in next(rd)]
            for rec in rd:
                if len(rec) != len(head):
                    continue
                r = {k: v.strip() for k, v in zip(head, rec, strict=True)}
                cells = [r.get(k, "") for k in ("kernelName1", "kernelName2")]
                cells = [x for x in cells if x.startswith("moe_ck2stages_")]
                if cells:
                    names = _moe_names(root, r)
                    c.update("ok" if x in names else "stale" for x in cells)
    return c

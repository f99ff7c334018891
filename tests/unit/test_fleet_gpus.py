"""GPU discovery, `--gpus` parsing and pinning (plain Python: no Dask, no GPU).

The kfd figures are worked out by hand from the kernel's topology format (location_id is
bus << 8 | device << 3 | function; gfx_target_version is major*10000 + minor*100 + stepping,
minor and stepping printed in hex; CUs = simd_count / simd_per_cu), not by the reader."""

from __future__ import annotations

import pytest

from ckkb.errors import CkkbError
from ckkb.fleet import gpus


def _node(root, i, text):
    (root / str(i)).mkdir(parents=True)
    (root / str(i) / "properties").write_text(text)


def test_kfd_reader(tmp_path):
    _node(tmp_path, 0, "cpu_cores_count 64\nsimd_count 0\n")
    _node(
        tmp_path,
        1,
        "simd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\nlocation_id 6152\n"
        "domain 1\nunique_id 3735928559\nmax_engine_clk_fcompute 2100\n",
    )
    _node(tmp_path, 2, "simd_count 1024\nsimd_per_cu 4\ngfx_target_version 90500\n")
    _node(tmp_path, 10, "simd_count 440\nsimd_per_cu 4\ngfx_target_version 110000\n")
    found = gpus.kfd_gpus(tmp_path)
    assert [g.index for g in found] == [0, 1, 2]  # CPU node skipped; numeric order (10 last)
    g = found[0]
    # 6152 = 0x1808: bus 0x18, device 1, function 0
    assert (g.pci_bus, g.uuid, g.arch, g.cu_count, g.max_sclk_mhz) == (
        "0001:18:01.0",
        "00000000deadbeef",
        "gfx942",
        304,
        2100,
    )
    assert [x.arch for x in found] == ["gfx942", "gfx950", "gfx1100"]
    assert found[1].cu_count == 256 and found[1].pci_bus is None


def test_parse_spec():
    found = [gpus.Gpu(i) for i in range(4)]
    assert [g.index for g in gpus.parse_spec("all", found)] == [0, 1, 2, 3]
    assert [g.index for g in gpus.parse_spec("2", found)] == [0, 1]
    assert [g.index for g in gpus.parse_spec("3,1", found)] == [3, 1]
    assert [g.index for g in gpus.parse_spec("3,", found)] == [3]
    for bad, msg in (
        ("5", "this host has 4 GPU(s)"),
        ("0", "this host has 4 GPU(s)"),
        ("1,7", "no GPU 7 on this host (found: 0, 1, 2, 3)"),
        ("x", "expected all, a count N or indices"),
        ("1,a", "'a' is not a GPU index"),
    ):
        with pytest.raises(CkkbError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            gpus.parse_spec(bad, found)
    with pytest.raises(CkkbError, match="no GPU found on this host"):
        gpus.parse_spec("all", [])


def test_pin_env_and_pinned_device():
    assert gpus.pin_env(3, "rocm") == {
        "ROCR_VISIBLE_DEVICES": "3",
        "HIP_VISIBLE_DEVICES": "0",
        "CUDA_VISIBLE_DEVICES": "0",
        "CKKB_FLEET_GPU": "3",
    }
    assert gpus.pin_env(1, "cuda") == {"CUDA_VISIBLE_DEVICES": "1", "CKKB_FLEET_GPU": "1"}
    assert gpus.pinned_device(gpus.pin_env(3, "rocm"))[0] == 3
    # a worker started by hand for --scheduler: its own variables
    assert gpus.pinned_device({"HIP_VISIBLE_DEVICES": "3"})[0] == 3
    assert gpus.pinned_device({"CUDA_VISIBLE_DEVICES": "5,6"})[0] == 5
    # HIP indexes into what ROCR left: ROCR 4,6 then HIP 1 is GPU 6
    idx, seen = gpus.pinned_device({"ROCR_VISIBLE_DEVICES": "4,6", "HIP_VISIBLE_DEVICES": "1"})
    assert idx == 6 and seen == {"ROCR_VISIBLE_DEVICES": "4,6", "HIP_VISIBLE_DEVICES": "1"}
    assert gpus.pinned_device({"CUDA_VISIBLE_DEVICES": "GPU-abc"})[0] == "GPU-abc"
    assert gpus.pinned_device({}) == (None, {})


def test_discover_rocm_falls_back_to_kfd(tmp_path, monkeypatch):
    _node(tmp_path, 1, "simd_count 8\nsimd_per_cu 4\ngfx_target_version 90402\n")
    monkeypatch.setenv("CKKB_KFD_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    found = gpus.discover_rocm()
    assert [(g.index, g.source, g.cu_count) for g in found] == [(0, "kfd", 2)]


def _tool(folder, name, out):
    exe = folder / name
    exe.write_text(f"#!/bin/sh\nexec /bin/cat <<'JSON'\n{out}\nJSON\n")
    exe.chmod(0o755)


def test_discover_rocm_through_amd_smi_then_rocm_smi(tmp_path, monkeypatch):
    kfd, bin_ = tmp_path / "kfd", tmp_path / "bin"
    bin_.mkdir()
    _node(kfd, 1, "simd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\nunique_id 255\n")
    monkeypatch.setenv("CKKB_KFD_ROOT", str(kfd))
    monkeypatch.setenv("PATH", str(bin_))
    _tool(bin_, "rocm-smi", '{"card0": {"Unique ID": "0xabc", "PCI Bus": "0000:0C:00.0"}}')
    g = gpus.discover_rocm()
    assert [(x.index, x.source, x.uuid, x.pci_bus, x.arch) for x in g] == [
        (0, "rocm-smi", "0xabc", "0000:0C:00.0", "gfx942")
    ]
    _tool(bin_, "amd-smi", '[{"gpu": 0, "bdf": "0000:0c:00.0", "uuid": "u-0"}]')
    g = gpus.discover_rocm()
    assert [(x.index, x.source, x.uuid, x.pci_bus, x.cu_count) for x in g] == [
        (0, "amd-smi", "u-0", "0000:0c:00.0", 304)
    ]

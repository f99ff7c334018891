"""A fleet harness bundle for tests: the same shapes on several GPUs of one host, one GPU slow."""

from __future__ import annotations

import json
from pathlib import Path

# (M, N, K) -> microseconds on GPUs g0, g1, g2 (g2 is the slow one of the node)
TIMES = {(64, 256, 5120): (10.0, 10.2, 11.5), (4096, 4096, 4096): (200.0, 199.0, 230.0)}


def harness_fleet_bundle(
    path: Path, gpus=("g0", "g1", "g2"), host: str = "node7", arch: str = "gfx942"
) -> Path:
    """Two passes per GPU (pass 1 at -0.1 us, pass 2 at +0.1 us of TIMES), each record with the
    fleet's provenance and key."""
    lines: list[dict] = [{"record": "bundle", "kind": "harness", "created": "2026-01-01T00:00:00Z"}]
    for (m, n, k), us in TIMES.items():
        for i, g in enumerate(gpus):
            prov = {"hostname": host, "uuid": g, "gpu_index": i, "arch": arch}
            for p in (1, 2):
                lines.append(
                    {
                        "record": "harness_results",
                        "run_id": "r1",
                        "device": "MI300X",
                        "arch": arch,
                        "M": m,
                        "N": n,
                        "K": k,
                        "dtype": "bf16",
                        "out_dtype": "bf16",
                        "layout": "tn",
                        "regime": "warm",
                        "candidate": "torch.mm",
                        "status": "ok",
                        "us": us[i] + (0.1 if p == 2 else -0.1),
                        "pass_no": p,
                        "provenance": prov,
                        "key": f"r1|{host}|{g}|{m}x{n}x{k}|torch.mm|warm|{p}",
                    }
                )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path

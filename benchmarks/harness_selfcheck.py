"""On the GPU host: show the harness refusing to time wrong or unsupported candidates.

    python3 benchmarks/harness_selfcheck.py

A deliberately wrong candidate (A @ B with B stored N x K, i.e. the transpose missing) must be
recorded `verify_failed` and never timed; fp8 with N not a multiple of 16 must be `unsupported`;
the correct candidate beside them must be timed. Prints one line per measurement, then PASS/FAIL.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ckkb.harness import candidates as cands  # noqa: E402
from ckkb.harness import torch_backend as tb  # noqa: E402
from ckkb.harness.timing import Candidate, Policy, Shape, time_shape  # noqa: E402

_real_make_call = cands.make_call


def make_call(cand, shape):
    if cand.name == "wrong:missing-transpose":
        import torch

        return lambda o: torch.mm(
            o["a"], o["b"]
        )  # b is N x K here: the result is A @ W, not A @ W^T
    return _real_make_call(cand, shape)


def main() -> int:
    cands.make_call = make_call
    dev = tb.device_info()
    be = tb.TorchBackend(dev)
    ok = True
    policy = Policy(batch=5, min_samples=10)
    ms = time_shape(
        Shape(1024, 1024, 1024, "bf16"),
        [Candidate("torch.linear", "tn"), Candidate("wrong:missing-transpose", "tn")],
        be,
        policy,
    )
    ms += time_shape(
        Shape(64, 100, 5120, "fp8"), [Candidate("torch._scaled_mm:rowwise", "tn")], be, policy
    )
    for m in ms:
        err = f"{m.err:.3g}" if m.err is not None else "-"
        us = f"{m.us:.2f}" if m.us is not None else "-"
        print(
            f"{m.shape.label:22} {m.candidate.name:26} {m.regime:5} {m.status:14} "
            f"err {err:>8} us {us:>8} samples {m.samples} {m.note or ''}"
        )
    want = {
        ("torch.linear", "warm"): "ok",
        ("torch.linear", "cold"): "ok",
        ("wrong:missing-transpose", "warm"): "verify_failed",
        ("wrong:missing-transpose", "cold"): "verify_failed",
        ("torch._scaled_mm:rowwise", "warm"): "unsupported",
        ("torch._scaled_mm:rowwise", "cold"): "unsupported",
    }
    got = {(m.candidate.name, m.regime): m.status for m in ms}
    ok = got == want and all(m.us is None and m.samples == 0 for m in ms if m.status != "ok")
    print("selfcheck", "PASS" if ok else f"FAIL {got}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""What to time for a shape: torch candidates on any GPU, aiter's op on a ROCm host where it
imports.

`candidates_for` is pure (tests call it); `make_operands` / `make_call` build the device side and
import torch inside the functions, so `import ckkb.harness` works without torch.

Layouts: aiter's tuned GEMM configs are `tn` (A is M x K row-major, B is stored N x K row-major:
`F.linear(x, w)`, the layout of a linear layer's weight). `torch.mm` in `nn` (B stored K x N) is
timed beside it as a second, layout-different candidate. fp8 runs through `torch._scaled_mm`, which
needs B column-major (the same `tn` storage) and K, N multiples of 16.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckkb.harness.timing import Candidate, Shape, Unsupported


@dataclass
class AiterStatus:
    available: bool
    message: str


_AITER: AiterStatus | None = None


def aiter_status() -> AiterStatus:
    """Whether aiter's ops import on this host (ROCm only). Never raises."""
    global _AITER
    if _AITER is None:
        try:
            import torch

            if getattr(torch.version, "hip", None) is None:
                _AITER = AiterStatus(
                    False,
                    "aiter candidates skipped: not a ROCm host (aiter needs ROCm); "
                    "timing torch candidates only",
                )
            else:
                import aiter  # noqa: F401

                _AITER = AiterStatus(True, "aiter imported")
        except Exception as e:  # ImportError, or aiter's own start-up failing
            _AITER = AiterStatus(
                False,
                f"aiter candidates skipped: `import aiter` failed ({type(e).__name__}: {e}); "
                "timing torch candidates only",
            )
    return _AITER


def candidates_for(shape: Shape, *, aiter: bool = False) -> list[Candidate]:
    """The candidates for one shape. With `aiter`, an a8w8 config row adds aiter's tuned kernel
    (its kernelId) and the default (kernelId 0) as incumbent."""
    if shape.dtype == "fp8":
        out = [
            Candidate("torch._scaled_mm:rowwise", "tn"),
            Candidate("torch._scaled_mm:tensorwise", "tn"),
        ]
        if (
            aiter
            and shape.config
            and "a8w8" in shape.config
            and "blockscale" not in shape.config
            and "bpreshuffle" not in shape.config
        ):
            out.append(Candidate("aiter:gemm_a8w8_tune:0", "tn", 0))
            if shape.kernel_id not in (None, 0):
                out.append(
                    Candidate(f"aiter:gemm_a8w8_tune:{shape.kernel_id}", "tn", shape.kernel_id)
                )
        return out
    return [Candidate("torch.linear", "tn"), Candidate("torch.mm", "nn")]


def check_shape(shape: Shape) -> None:
    """Reject what no candidate can run (raise ValueError with a one-line message)."""
    for name in ("M", "N", "K"):
        v = getattr(shape, name)
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r} ({shape.label})")
    if shape.dtype not in ("bf16", "fp16", "fp8"):
        raise ValueError(f"unsupported dtype {shape.dtype!r} (bf16, fp16, fp8)")


def out_dtype(shape: Shape) -> str:
    return "bf16" if shape.dtype == "fp8" else shape.dtype


# ----- device side (torch imported inside) -------------------------------------------------------


def torch_dtype(name: str, arch: str = "") -> Any:
    import torch

    if name == "bf16":
        return torch.bfloat16
    if name == "fp16":
        return torch.float16
    if name == "fp8":
        return torch.float8_e4m3fnuz if arch.startswith("gfx942") else torch.float8_e4m3fn
    if name == "fp32":
        return torch.float32
    raise Unsupported(f"dtype {name}")


def fp8_supported(arch: str) -> bool:
    if arch.startswith("sm_"):
        return int(arch[3:]) >= 89
    return arch.split(":")[0] in ("gfx942", "gfx950")


def make_operands(
    shape: Shape, cand: Candidate, arch: str, generator: Any = None
) -> dict[str, Any]:
    """One operand set on the device, with the fp32 tensors the reference needs (`ref_a`, `ref_b`
    in A (MxK) and B^T (NxK) form) when `generator` asks for them."""
    import torch

    M, N, K = shape.M, shape.N, shape.K
    dev = "cuda"
    if shape.dtype in ("bf16", "fp16"):
        dt = torch_dtype(shape.dtype)
        a = torch.randn(M, K, device=dev, dtype=dt)
        w = torch.randn(N, K, device=dev, dtype=dt)
        b = w if cand.layout == "tn" else w.t().contiguous()
        return {"a": a, "b": b, "ref": lambda: (a.float(), w.float())}
    if shape.dtype == "fp8":
        if K % 16 or N % 16:
            raise Unsupported(f"torch._scaled_mm needs K and N multiples of 16 ({shape.label})")
        f8 = torch_dtype("fp8", arch)
        fmax = torch.finfo(f8).max
        x = torch.randn(M, K, device=dev, dtype=torch.float32)
        w = torch.randn(N, K, device=dev, dtype=torch.float32)
        if cand.name.endswith("tensorwise"):
            sa = (x.abs().amax() / fmax).reshape(())
            sb = (w.abs().amax() / fmax).reshape(())
            aq = (x / sa).to(f8)
            wq = (w / sb).to(f8)
            sa_b, sb_b = sa, sb
        else:
            sa = x.abs().amax(dim=1, keepdim=True) / fmax  # M x 1
            sb = w.abs().amax(dim=1, keepdim=True) / fmax  # N x 1
            aq = (x / sa).to(f8)
            wq = (w / sb).to(f8)
            sa_b, sb_b = sa.contiguous(), sb.t().contiguous()  # (M,1), (1,N) as _scaled_mm wants
        del x, w
        ops = {"a": aq, "b": wq, "sa": sa_b, "sb": sb_b, "sa_rows": sa, "sb_rows": sb}
        ops["ref"] = lambda: (aq.float() * sa, wq.float() * sb)
        return ops
    raise Unsupported(f"dtype {shape.dtype}")


def make_call(cand: Candidate, shape: Shape) -> Callable[[dict[str, Any]], Any]:
    """A callable ops -> output tensor for the candidate."""
    import torch
    import torch.nn.functional as F

    if cand.name == "torch.linear":
        return lambda o: F.linear(o["a"], o["b"])
    if cand.name == "torch.mm":
        return lambda o: torch.mm(o["a"], o["b"])
    if cand.name.startswith("torch._scaled_mm"):
        return lambda o: torch._scaled_mm(
            o["a"], o["b"].t(), scale_a=o["sa"], scale_b=o["sb"], out_dtype=torch.bfloat16
        )
    if cand.name.startswith("aiter:gemm_a8w8_tune:"):
        st = aiter_status()
        if not st.available:
            raise Unsupported(st.message)
        import aiter

        kid = cand.kernel_id or 0
        splitk = shape.splitk or 0

        def call(o: dict[str, Any]) -> Any:
            y = torch.empty(shape.M, shape.N, device=o["a"].device, dtype=torch.bfloat16)
            return aiter.gemm_a8w8_tune(o["a"], o["b"], o["sa_rows"], o["sb"], y, kid, splitk)

        return call
    raise Unsupported(f"unknown candidate {cand.name}")

"""ckkb.harness: cold vs warm GEMM timings with a roofline (optional extra `ckkb[gpu]`).

Importable without torch: torch is imported only by `torch_backend` and inside the functions of
`candidates` that build device tensors. `roofline`, `timing`, `shapes` and `bundle` are plain
Python and are what the CPU tests exercise.
"""

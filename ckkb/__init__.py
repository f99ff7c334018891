"""ckkb: a static-analysis knowledge base for AMD Composable Kernel GEMM instances."""

__version__ = "0.1.0"

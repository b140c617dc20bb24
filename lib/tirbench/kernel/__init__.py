"""A kernel for your own layer in one call: ``gemm(m, n, k)``, ``conv2d(n, c, h, w, k, r, s, stride, pad)`` or
``best_kernel(workload)`` (``kernel.run``), and ``python -m tirbench.kernel`` (``kernel.cli``)."""
from tirbench.kernel.result import Candidate, KernelResult
from tirbench.kernel.run import best_kernel, best_kernels, conv2d, gemm, row_variant

__all__ = ["Candidate", "KernelResult", "best_kernel", "best_kernels", "conv2d", "gemm", "row_variant"]

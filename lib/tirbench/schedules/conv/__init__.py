"""Convolution: direct schedules (``direct``), AutoTVM's template as a space (``template``), implicit GEMM on tensor cores (``implicit_gemm``)."""

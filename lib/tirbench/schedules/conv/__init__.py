"""Convolution: direct schedules (``direct``), AutoTVM's template as a space (``template``), implicit GEMM on tensor
cores (``implicit_gemm``) and on the v5 SIMT nest for fp32 NCHW / NHWC (``simt_gemm``)."""

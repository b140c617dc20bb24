"""The GEMM ladder: v0-v5 on CUDA cores (``simt``), v6-v8 and int8 on tensor cores (``tensorcore``)."""

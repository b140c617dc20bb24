"""Schedule helpers: ``fn(sch, *, tile params) -> sch``.

Each helper checks its parameters first and raises a one-line ValueError naming the parameter when a tile
does not divide the loop it splits (no tail handling: pick tiles that divide, e.g. 7 for a 7x7 feature map) or a
thread count or shared-memory size exceeds the device limit. The GEMM rungs v2..v8 are the exception to the
first rule: they pad a GEMM whose sizes their tiles do not divide (``padding``). Families: ``gemm`` /
``gemm_tensorcore`` (the GEMM ladder), ``tiling`` (the shared-memory tiling they share with ``conv2d``), ``padding``
(any M, N, K for the tiled GEMMs), ``conv2d`` and ``conv2d_template`` (convolutions), ``elementwise``, ``window``.
"""
from tirbench.schedules.checks import MAX_THREADS_PER_BLOCK, loop_extent, require_divides, require_threads
from tirbench.schedules.elementwise import bind_threads
from tirbench.schedules.gemm import (LADDER, gemm_pass_config, gemm_v0_naive, gemm_v1_local, gemm_v2_shared,
                                     gemm_v3_vectorized, gemm_v4_pipelined, gemm_v5_warp_tiled)
from tirbench.schedules.gemm_tensorcore import gemm_v6_wmma, gemm_v7_mma
from tirbench.schedules.window import window_naive, window_register, window_shared

__all__ = ["MAX_THREADS_PER_BLOCK", "loop_extent", "require_divides", "require_threads", "bind_threads",
           "LADDER", "gemm_pass_config", "gemm_v0_naive", "gemm_v1_local", "gemm_v2_shared", "gemm_v3_vectorized",
           "gemm_v4_pipelined", "gemm_v5_warp_tiled", "gemm_v6_wmma", "gemm_v7_mma",
           "window_naive", "window_register", "window_shared"]

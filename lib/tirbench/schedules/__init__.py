"""Schedule helpers: ``fn(sch, *, tile params) -> sch``.

Each helper checks its parameters first and raises a one-line ValueError naming the parameter when a tile
does not divide the loop it splits (no tail handling: the shapes in the notebooks are powers of two) or a
thread count exceeds the device limit.
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

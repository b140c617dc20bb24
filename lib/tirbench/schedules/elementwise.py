"""One-dimensional elementwise kernels: split the loop over blocks and threads, optionally vectorise."""
from __future__ import annotations

import numpy as np
from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_divides, require_threads, require_vector_bytes


def bind_threads(sch: s_tir.Schedule, *, block: str = "C", threads: int = 256, vector: int = 1) -> s_tir.Schedule:
    """Each thread computes ``vector`` consecutive elements; ``threads`` threads per block.

    ``vector > 1`` turns the innermost loop into one wide access (float4 for vector=4 in float32).
    """
    require_threads(threads)
    blk = sch.get_sblock(block)
    (loop,) = sch.get_loops(blk)
    itemsize = np.dtype(sch.get(blk).writes[0].source.dtype).itemsize
    require_vector_bytes(vector, itemsize)
    require_divides(loop_extent(sch, loop), threads * vector, param="threads*vector", axis="n")
    if vector == 1:
        bx, tx = sch.split(loop, factors=[None, threads])
    else:
        bx, tx, vec = sch.split(loop, factors=[None, threads, vector])
        sch.vectorize(vec)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch

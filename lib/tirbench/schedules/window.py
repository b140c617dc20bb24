"""Window sum: naive binding, a register accumulator, and a shared-memory tile with cooperative fetching."""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_divides, require_threads


def window_naive(sch: s_tir.Schedule, *, threads: int = 256) -> s_tir.Schedule:
    """One thread per output; the window loop runs inside the thread and accumulates in global memory."""
    require_threads(threads)
    i, _k = sch.get_loops(sch.get_sblock("B"))
    require_divides(loop_extent(sch, i), threads, param="threads", axis="n")
    bx, tx = sch.split(i, factors=[None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def window_register(sch: s_tir.Schedule, *, threads: int = 256) -> s_tir.Schedule:
    """``window_naive`` plus a register accumulator written back once (``cache_write`` to "local")."""
    window_naive(sch, threads=threads)
    blk = sch.get_sblock("B")
    out = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(out, sch.get_loops(blk)[1])
    return sch


def window_shared(sch: s_tir.Schedule, *, threads: int = 256, per_thread: int = 4) -> s_tir.Schedule:
    """A block stages its input tile (``threads * per_thread + w - 1`` values) in shared memory.

    The tile is fetched cooperatively (consecutive threads load consecutive values), then each thread
    computes ``per_thread`` outputs strided by ``threads`` (so stores stay coalesced) from shared memory,
    accumulating in a register.
    """
    require_threads(threads)
    require_divides(per_thread, 1, param="per_thread", axis="per_thread")
    blk = sch.get_sblock("B")
    i, k = sch.get_loops(blk)
    require_divides(loop_extent(sch, i), threads * per_thread, param="threads*per_thread", axis="n")
    bx, vi, tx = sch.split(i, factors=[None, per_thread, threads])
    sch.reorder(bx, tx, vi, k)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    out = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(out, vi)
    tile = sch.cache_read(blk, 0, "shared")
    sch.compute_at(tile, bx)
    fetch_outer, fetch_tx = sch.split(sch.get_loops(tile)[-1], factors=[None, threads])
    sch.bind(fetch_tx, "threadIdx.x")
    sch.unroll(fetch_outer)
    sch.unroll(vi)
    sch.unroll(k)
    return sch

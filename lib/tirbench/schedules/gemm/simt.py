"""GEMM ladder: naive -> register tiles -> shared memory -> float4 -> pipeline -> warp tiles -> tensor cores.

This module holds the SIMT rungs v0..v5 and v5's MetaSchedule design space (``gemm_v5_space``); the ladder as data
(every rung's record, the tile sweeps, pass configs) is ``tirbench.schedules.gemm.records``. The tensor-core
rungs (v6, v7, v8) live in ``tirbench.schedules.gemm.tensorcore``; the tiling machinery the GEMM and convolution
schedules share (parameter checks, block order, software pipeline, the SIMT loop nest) in
``tirbench.schedules.common.tiling``.

Every helper schedules the block "C" of ``tirbench.workloads.gemm`` (row-major A[M, K] @ B[K, N], float32 C)
and checks its parameters first. v2..v8 take any M, N, K: where a tile does not divide its extent they pad the
iteration space to the tiles (``tirbench.schedules.common.padding``; each helper says what that costs); v0 and v1 need
tiles that divide. The tensor-core helpers (v6, v7, v8) need a float16 workload; v6 and v7 import
``tvm.s_tir.tensor_intrin.cuda`` on first use (~35 s), v8 registers its own intrinsics (``intrinsics.wgmma``).
Variants with cp.async must be compiled inside ``tvm.transform.PassContext(config=record.pass_config)``; without
it their copies stay synchronous.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import require_divides, require_positive_int, require_threads
from tirbench.schedules.common.padding import pad_to_tiles, padded_extents
from tirbench.schedules.common.tiling import (
    WARP,
    check_simt_tiles,
    gemm_block,
    require_prefetch,
    simt_nest,
)


def gemm_v0_naive(sch: s_tir.Schedule, *, threads: tuple[int, int] = (16, 16)) -> s_tir.Schedule:
    """One thread per output: a ``threads[0] x threads[1]`` block of threads covers a tile of C."""
    blk, m, n, _ = gemm_block(sch)
    require_threads(threads[0] * threads[1], param="threads")
    require_divides(m, threads[0], param="threads[0]", axis="m")
    require_divides(n, threads[1], param="threads[1]", axis="n")
    i, j, _k = sch.get_loops(blk)
    by, ty = sch.split(i, factors=[None, threads[0]])
    bx, tx = sch.split(j, factors=[None, threads[1]])
    sch.reorder(by, bx, ty, tx)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return sch


def gemm_v1_local(sch: s_tir.Schedule, *, thread_tile: tuple[int, int] = (8, 8), threads: tuple[int, int] = (8, 8),
                  tile_k: int = 4) -> s_tir.Schedule:
    """The MLC course's local blocking: each thread accumulates a ``thread_tile`` of C in registers."""
    blk, m, n, k = gemm_block(sch)
    require_threads(threads[0] * threads[1], param="threads")
    require_divides(m, threads[0] * thread_tile[0], param="threads[0]*thread_tile[0]", axis="m")
    require_divides(n, threads[1] * thread_tile[1], param="threads[1]*thread_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    c_local = sch.cache_write(blk, 0, "local")
    i, j, kk = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, factors=[None, threads[0], thread_tile[0]])
    j0, j1, j2 = sch.split(j, factors=[None, threads[1], thread_tile[1]])
    k0, k1 = sch.split(kk, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(blk, k0)
    return sch


def _simt(sch: s_tir.Schedule, *, block_tile: tuple[int, int], warp_tile: tuple[int, int] | None,
          thread_tile: tuple[int, int], tile_k: int, vector: int = 1, fragments: bool = False,
          stages: int = 1, async_copy: bool = False, raster: int = 1, prefetch: str = "none",
          columns_outer: bool = False, block: str = "C", a_read: int = 0,
          b_fill_vector: int | None = None) -> s_tir.Schedule:
    """Shared-memory tiled SIMT GEMM; v2..v5 switch its features on one by one.

    Each thread accumulates a ``thread_tile`` of C in registers. Threads are laid out row-major over the block
    tile, or (``warp_tile``) row-major over a warp tile, the warps row-major over the block. Each ``tile_k``
    step stages an A and a B tile in shared memory, fetched cooperatively by all threads. ``vector=4``: float4
    global loads and C stores; A stored transposed (k-major, so both operands are read as float4 along m/n)
    with rows padded by 4 floats (for tile_k=8 the transposing stores are conflict-free; a multiple of 4 keeps
    the float4 alignment, notes P10). ``fragments``: the
    A/B values of one k go through registers. ``stages > 1``: multi-buffered shared tiles, the next tiles'
    copies overlapping this tile's math; ``async_copy``: by cp.async (4-byte copies for the transposed A).
    ``raster``: the block order (see ``bind_blocks``). ``prefetch``: see ``PREFETCH`` (needs ``fragments``).
    ``columns_outer``: a thread's multiply-adds run column by column instead of row by row (the same FFMAs in
    another order, which changes nvcc's register allocation: see ``gemm_v5_warp_tiled``). ``block``: the GEMM-shaped
    block to schedule; ``a_read`` / ``b_fill_vector``: which of its reads is A, how wide B's copies are (see
    ``simt_nest``).

    Any m, n, k: a shape the tiles do not divide is padded to them (``tirbench.schedules.common.padding``): the shared-memory
    fills become predicated (zero-filling cp.async where asynchronous) and each store of C from registers predicated.
    Costs the padded work (edge blocks and the last k tile multiply zeros) and the predicates; no extra memory, and
    divisible shapes compile as without padding.
    """
    tiles = (*block_tile, tile_k)
    extents = padded_extents(sch, block, tiles, ("block_tile[0]", "block_tile[1]", "tile_k"))
    threads = check_simt_tiles(extents, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile,
                               tile_k=tile_k, vector=vector, stages=stages, raster=raster, prefetch=prefetch,
                               async_copy=async_copy)
    padding = pad_to_tiles(sch, block, tiles)
    (bm, bn), (tm, tn) = block_tile, thread_tile
    wm, wn = warp_tile or block_tile
    blk = sch.get_sblock(block)
    i, j, kk = sch.get_loops(blk)
    by, wy, ly, ti = sch.split(i, factors=[None, bm // wm, wm // tm, tm])
    bx, wx, lx, tj = sch.split(j, factors=[None, bn // wn, wn // tn, tn])
    ko, ki = sch.split(kk, factors=[None, tile_k])
    simt_nest(sch, blk, rows=(by, wy, ly, ti), cols=(bx, wx, lx, tj), k_loops=(ko, ki), threads=threads,
               vector=vector, fragments=fragments, stages=stages, async_copy=async_copy, raster=raster,
               prefetch=prefetch, columns_outer=columns_outer, a_read=a_read, b_fill_vector=b_fill_vector)
    padding.store_direct(sch)
    return sch


def gemm_v2_shared(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                   thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8) -> s_tir.Schedule:
    """A and B tiles staged in shared memory by a cooperative (scalar) fetch; register accumulators. Any m, n, k:
    shapes the tiles do not divide are padded (predicated fills and stores; see ``_simt``)."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k)


def gemm_v3_vectorized(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                       thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8) -> s_tir.Schedule:
    """v2 + float4 fetches and stores, a transposed A tile padded against bank conflicts, A/B fragments in
    registers (float4 shared loads). Any m, n, k (see ``_simt``); float4 stays where the rows of A, B and C are
    16-byte aligned (k and n multiples of 4), else those copies go element by element."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True)


def gemm_v4_pipelined(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                      thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8, stages: int = 2,
                      async_copy: bool = True) -> s_tir.Schedule:
    """v3 + a ``stages``-deep software pipeline (double buffering by default) with cp.async copies. Any m, n, k
    (see ``_simt``: zero-filling predicated cp.async at the edges)."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True, stages=stages, async_copy=async_copy)


def gemm_v5_warp_tiled(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                       warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                       tile_k: int = 8, stages: int = 3, async_copy: bool = True,
                       raster: int = 1, prefetch: str = "none", columns_outer: bool = False, block: str = "C",
                       a_read: int = 0, b_fill_vector: int | None = None) -> s_tir.Schedule:
    """v4 with a block -> warps -> threads hierarchy: each warp's 32 threads cover a compact ``warp_tile``
    (default 8 x 4 threads of 8x8 outputs = 64x32), so a warp reads fewer distinct A/B values from shared
    memory per k step (96 instead of 144 floats for the v4 layout). ``raster``: blocks ordered in groups of
    that many block rows, for L2 reuse. ``prefetch``: fragment loads ahead of the math (``PREFETCH``).
    ``columns_outer``: each thread's multiply-adds column by column (faster on an H100 at 4096^3 for the same tiles:
    the same FFMAs in another order, so nvcc's register allocation, which Nsight's dispatch stalls point at;
    ``docs/gemm.md``).
    Any m, n, k: shapes the tiles do not divide are padded to them, at the costs ``_simt`` lists. ``block``,
    ``a_read``, ``b_fill_vector``: another GEMM-shaped block, which of its reads is A and how wide B's copies are
    (the implicit-GEMM convolutions; see ``simt_nest``)."""
    return _simt(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True, stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch,
                 columns_outer=columns_outer, block=block, a_read=a_read, b_fill_vector=b_fill_vector)


def gemm_v5_space(sch: s_tir.Schedule, *, lanes: tuple[int, int] = (8, 4), stages: int = 3, prefetch: str = "none",
                  columns_outer: bool = False) -> s_tir.Schedule:
    """v5's template with its tile sizes left to MetaSchedule: a design space for ``ScheduleFn``.

    A warp's 32 threads are ``lanes`` (rows x columns); each thread computes 8 rows and 4 or 8 columns
    (``sample_categorical``: fragments and C stores stay float4); ``sample_perfect_tile`` splits what is left of m
    and of n into blocks x warps, ``tile_k`` is ``sample_categorical`` over 8/16/32 and the block order (``raster``)
    another perfect tile. ``lanes``, ``stages``, ``prefetch`` and the FFMA order (``columns_outer``, see
    ``gemm_v5_warp_tiled``) are fixed per space. The search measures each sample; ``VerifyGPUCode`` drops those with
    too many threads or too much shared memory.
    """
    blk, m, n, k = gemm_block(sch)
    lm, ln = lanes
    if lm * ln != WARP:
        raise ValueError(f"lanes={lanes!r}: a warp's lanes (rows x columns) must multiply to {WARP}")
    require_positive_int(stages, param="stages")
    require_prefetch(prefetch, stages)
    require_divides(m, lm * 8, param="lanes[0]*8", axis="m")
    require_divides(n, ln * 8, param="lanes[1]*8", axis="n")
    require_divides(k, 32, param="tile_k", axis="k")
    i, j, kk = sch.get_loops(blk)
    tn = sch.sample_categorical(candidates=[4, 8], probs=[0.5, 0.5])
    i, ly, ti = sch.split(i, factors=[None, lm, 8])
    j, lx, tj = sch.split(j, factors=[None, ln, tn])
    by, wy = sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    bx, wx = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    tile_k = sch.sample_categorical(candidates=[8, 16, 32], probs=[1 / 3] * 3)
    ko, ki = sch.split(kk, factors=[None, tile_k])
    raster = sch.sample_perfect_tile(by, n=2, max_innermost_factor=8)[1]
    simt_nest(sch, blk, rows=(by, wy, ly, ti), cols=(bx, wx, lx, tj), k_loops=(ko, ki), threads=None, vector=4,
               fragments=True, stages=stages, async_copy=True, raster=raster, prefetch=prefetch,
               columns_outer=columns_outer)
    return sch

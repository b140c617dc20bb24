"""Winograd convolution on the GPU: the module of ``tirbench.workloads.conv2d_winograd`` as three kernels.

1. input transform (``winograd_input_transform``): one thread per (channel, tile); it loads its alpha x alpha tile
   into registers (the padding and the last tiles' overhang as predicates on the loads, zeros outside), applies
   B^T . B fully unrolled (the transform's zeros fold away: 22^2 = 484 terms for F(4x4) instead of 36^2) and
   writes the alpha^2 values of V. Consecutive threads take consecutive tiles, so the V stores coalesce (NCHW reads
   too; NHWC reads, strided by C, do not).
2. the batched GEMM (``winograd_batched_gemm``): alpha^2 GEMMs M[xi, nu] = U[xi, nu]^T V[xi, nu], (K x C) @ (C x P),
   scheduled by the GEMM ladder's v5 nest (``tiling.simt_nest``: warp tiles, float4 fragments, cp.async pipeline);
   the GEMM index (xi, nu) goes to blockIdx.y, U arrives k-major (c outer, k contiguous) so both shared tiles are
   plain float4 copies, as in the HWCN implicit GEMM. Any K and P: the padding helpers pad the iteration space
   to the tiles (predicated fills and stores, no padded copies).
3. output transform (``winograd_output_transform``): one thread per (output channel, tile); the alpha^2 values of M
   to registers (coalesced: consecutive threads, consecutive tiles), A^T . A unrolled, the m x m outputs stored under
   the crop predicate (through shared memory, consecutive threads on consecutive pixels, where a block's tiles share
   one output channel).

Fusion: none across kernels, on purpose. One GEMM block computes one (xi, nu) of many tiles, while a tile's input
transform produces all alpha^2 of them and its output transform needs all alpha^2: fusing the input transform into
the GEMM's B fill would recompute each V value once per block row of K and load up to 16 input pixels per value
(instead of ~1), and fusing the output transform into the GEMM's epilogue would need all alpha^2 GEMMs of a tile in
one block (36 accumulator tiles: a different kernel design, cuDNN's fused Winograd). What is fused: the padding and
the tile gather into the input transform's loads, the crop into the output transform's stores, each transform's
intermediate in registers. The filter transform (``winograd_filter_transform``) runs once per filter, untimed.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_threads
from tirbench.schedules.common.padding import pad_to_tiles, padded_extents
from tirbench.schedules.common.tiling import check_simt_tiles, simt_nest

BLOCKS = ("input_tile", "input_transform", "batched_gemm", "output_transform", "output")
_TILE_PARAMS = ("block_tile[0]", "block_tile[1]", "tile_k")


def require_winograd(sch: s_tir.Schedule) -> None:
    """One-line ValueError unless ``sch`` holds the (unscheduled) module of ``conv2d_winograd``."""
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]
    if names != list(BLOCKS):
        raise ValueError(f"this schedule needs the module of conv2d_winograd(...) (blocks {', '.join(BLOCKS)}), "
                         f"got blocks {', '.join(names)}")


def _thread_per_item(sch: s_tir.Schedule, blk: s_tir.SBlockRV, outer: tuple[s_tir.LoopRV, s_tir.LoopRV],
                     threads: int) -> s_tir.LoopRV:
    """Fuse the two ``outer`` loops of ``blk`` into one item index, give each thread one item; return threadIdx.x."""
    bx, tx = sch.split(sch.fuse(*outer), factors=[None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return tx


def _unroll_under_thread(sch: s_tir.Schedule, *blocks: s_tir.SBlockRV) -> None:
    """Unroll every loop of ``blocks`` below (blockIdx, threadIdx): the transforms' constants then fold."""
    for blk in blocks:
        for loop in sch.get_loops(blk)[2:]:
            sch.unroll(loop)


def winograd_input_transform(sch: s_tir.Schedule, *, threads: int = 256) -> s_tir.Schedule:
    """Kernel 1: V = B^T d B, one thread per (channel, tile), the tile d in registers (its loads predicated). V is
    summed in registers and stored once where ``threads`` divides channels x tiles; elsewhere it is summed in place:
    the store of a register cache (``reverse_compute_at``) would carry no predicate, and the last block's idle
    threads would write past the end of V."""
    require_threads(threads, param="threads")
    blk = sch.get_sblock("input_transform")
    e, u, c, p, a, b = sch.get_loops(blk)
    whole = loop_extent(sch, c) * loop_extent(sch, p) % threads == 0
    sch.reorder(c, p, e, u, a, b)
    tx = _thread_per_item(sch, blk, (c, p), threads)
    stored = []
    if whole:
        v_local = sch.cache_write(blk, 0, "local")
        sch.reverse_compute_at(v_local, tx)
        stored.append(v_local)
    tile = sch.get_sblock("input_tile")
    sch.compute_at(tile, tx)
    sch.set_scope(tile, 0, "local")
    init = sch.decompose_reduction(blk, sch.get_loops(blk)[2])
    _unroll_under_thread(sch, tile, init, blk, *stored)
    return sch


def winograd_output_transform(sch: s_tir.Schedule, *, threads: int = 256) -> s_tir.Schedule:
    """Kernel 3: Y = A^T M A, one thread per (output channel, tile), M's alpha^2 values in registers, the m x m
    outputs stored under the crop predicate. Where a block's tiles all belong to one output channel (``threads``
    divides the tiles), they go out through shared memory in the block's pixel order, consecutive threads on
    consecutive pixels of a row: stored straight from registers, a warp's 32 stores of one tile position hit ~26
    sectors (on the batch-256 layer the kernel ran at 1.3 TB/s). Elsewhere the block's region of Y has no compact
    bound (TVM would stage the whole of it), so the tiles are stored from registers."""
    require_threads(threads, param="threads")
    blk = sch.get_sblock("output_transform")
    k, p, *_ = sch.get_loops(blk)
    staged = loop_extent(sch, p) % threads == 0
    tx = _thread_per_item(sch, blk, (k, p), threads)
    m_local = sch.cache_read(blk, 0, "local")
    sch.compute_at(m_local, tx)
    sch.set_scope(blk, 0, "local")
    out = sch.get_sblock("output")
    if not staged:
        sch.reverse_compute_at(out, tx)
        init = sch.decompose_reduction(blk, sch.get_loops(blk)[2])
        _unroll_under_thread(sch, m_local, init, blk, out)
        return sch
    tiles = sch.cache_read(out, 0, "shared")
    sch.reverse_compute_at(tiles, tx)
    sch.reverse_compute_at(out, sch.get_loops(blk)[0])
    init = sch.decompose_reduction(blk, sch.get_loops(blk)[2])
    _unroll_under_thread(sch, m_local, init, blk, tiles)
    _, lane = sch.split(sch.fuse(*sch.get_loops(out)[1:]), factors=[None, threads])
    sch.bind(lane, "threadIdx.x")
    return sch


def winograd_batched_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                          warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                          tile_k: int = 16, stages: int = 3, raster: int = 1,
                          prefetch: str = "none", columns_outer: bool = False,
                          async_copy: bool = True) -> s_tir.Schedule:
    """Kernel 2: the alpha^2 GEMMs through the v5 nest (``simt_nest``): GEMM rows are output channels, columns
    tiles, the reduction input channels; the GEMM index on blockIdx.y. Tiles, ``stages``, ``raster``, ``prefetch`` and
    ``columns_outer`` mean what they mean for ``gemm_v5_warp_tiled``; K and P need not be multiples of the block tile
    (padded)."""
    tiles = (*block_tile, tile_k)
    extents = padded_extents(sch, "batched_gemm", tiles, _TILE_PARAMS)
    threads = check_simt_tiles(extents, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile,
                               tile_k=tile_k, vector=4, stages=stages, raster=raster, prefetch=prefetch,
                               a_k_major=True, axes=("k (output channels)", "p (tiles)", "c (input channels)"))
    padding = pad_to_tiles(sch, "batched_gemm", tiles)
    (bm, bn), (wm, wn), (tm, tn) = block_tile, warp_tile, thread_tile
    blk = sch.get_sblock("batched_gemm")
    e, u, k, p, c = sch.get_loops(blk)
    sch.bind(sch.fuse(e, u), "blockIdx.y")
    rows = sch.split(k, factors=[None, bm // wm, wm // tm, tm])
    cols = sch.split(p, factors=[None, bn // wn, wn // tn, tn])
    k_loops = sch.split(c, factors=[None, tile_k])
    simt_nest(sch, blk, rows=rows, cols=cols, k_loops=k_loops, threads=threads, vector=4, fragments=True,
              stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch, columns_outer=columns_outer,
              a_k_major=True)
    padding.store_direct(sch)
    return sch


def conv2d_winograd_simt(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                         warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                         tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                         columns_outer: bool = False, threads: int = 256,
                         async_copy: bool = True) -> s_tir.Schedule:
    """The three kernels (module docstring): the GEMM's parameters as ``winograd_batched_gemm``'s, ``threads`` per
    block of the two transforms. Compile with the pass config of ``records.WINOGRAD`` (cp.async)."""
    require_winograd(sch)
    winograd_batched_gemm(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                          stages=stages, raster=raster, prefetch=prefetch, columns_outer=columns_outer,
                          async_copy=async_copy)
    winograd_input_transform(sch, threads=threads)
    return winograd_output_transform(sch, threads=threads)

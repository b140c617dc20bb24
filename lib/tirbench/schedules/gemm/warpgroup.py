"""v8, the GEMM ladder's Hopper rung: warpgroup MMA (``wgmma.mma_async``, its intrinsics registered by
``intrinsics.wgmma``) from 128-byte swizzled (or interleaved) shared tiles filled by a multi-stage ``cp.async``
pipeline, float32 accumulators in registers; fp16 inputs, and int8 for the convolutions' integer kernels.

``gemm_v8_wgmma`` is the rung; ``wgmma_nest`` and ``tensorize_wgmma`` are its two halves (the loop nest and shared
tiles, then the tensor intrinsics and the pipeline), which the ``wgmma`` design space
(``tirbench.schedules.spaces.wgmma_space``) calls apart: it samples the nest and tensorizes once its decisions are
known. The padding and the PassContext config are ``tensorcore``'s (``pad_gemm``, ``MMA_ASYNC_CONFIG``).
"""
from __future__ import annotations

import functools

from tvm import s_tir

from tirbench.schedules.common.checks import require_divides, require_positive_int, require_threads
from tirbench.schedules.common.padding import Padding, padded_extents
from tirbench.schedules.common.tiling import (
    WARP,
    SampledTile,
    Warps,
    bind_blocks,
    gemm_block,
    pipeline,
    require_fetch,
    require_multiple,
    require_shared,
    split_threads,
    tile_loop,
)
from tirbench.schedules.gemm.tensorcore import TILE_PARAMS, pad_gemm
from tirbench.schedules.intrinsics import wgmma


def _wgmma_dtype(sch: s_tir.Schedule, blk: s_tir.SBlockRV) -> str:
    """The GEMM block's input dtype, ValueError unless wgmma takes it (float16 or int8)."""
    dtype = sch.get(blk).reads[0].source.dtype
    if dtype not in wgmma.CHUNK_ELEMS:
        raise ValueError(f"wgmma needs float16 or int8 inputs, got a {dtype} workload")
    return dtype


def require_wgmma_tiles(mnk: tuple[int, int, int], dtype: str, *, block_tile: tuple[int, int], tile_k: int,
                         stages: int, raster: int, layout: str, overlap: bool) -> int:
    """The one-line checks of v8 (tiles divide the problem, whole warpgroups of 64 rows, at most one wgmma's N,
    whole 32-byte k steps, the layout's row, the fetch even over the threads, the pipeline in shared memory);
    returns the warps per block."""
    (m, n, k), (bm, bn) = mnk, block_tile
    elems = wgmma.CHUNK_ELEMS[dtype]  # per 16-byte copy
    require_divides(m, bm, param="block_tile[0]", axis="m")
    require_divides(n, bn, param="block_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    require_multiple(bm, 64, param="block_tile[0]")  # whole warpgroups of 64 rows
    require_multiple(bn, 16, param="block_tile[1]")
    max_n = wgmma.MAX_N_INT8 if dtype == "int8" else wgmma.MAX_N
    if bn > max_n:
        raise ValueError(f"block_tile[1]={bn}: one {dtype} wgmma covers at most N={max_n} columns")
    require_multiple(tile_k, 2 * elems, param="tile_k")  # one wgmma k step: 32 bytes
    if layout not in wgmma.LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected one of {', '.join(map(repr, wgmma.LAYOUTS))}")
    if layout == "swizzle128" and tile_k != 8 * elems:
        raise ValueError(f"tile_k={tile_k}: the swizzle128 layout holds 128-byte rows of {8 * elems} {dtype} values, "
                         f"so tile_k must be {8 * elems}")
    if layout == "swizzle128" and dtype != "int8" and bn % (8 * elems):   # B is N-major: its rows are rows of n
        raise ValueError(f"block_tile[1]={bn}: the swizzle128 layout holds B in 128-byte rows of {8 * elems} columns, "
                         f"so block_tile[1] must be a multiple of {8 * elems} (or take layout='interleaved')")
    require_positive_int(stages, param="stages")
    if overlap and stages < 3:  # with 2, TVM's pipeline keeps one buffer (right for synchronous math, not here)
        raise ValueError(f"overlap=True needs stages >= 3 (a buffer for the running group), got {stages}")
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    warps = bm // 16
    require_threads(warps * WARP, param="block_tile[0]")
    require_fetch(bm, tile_k, warps * WARP, elems, operand="A")
    require_fetch(bn, tile_k, warps * WARP, elems, operand="B")
    require_shared(stages * (bm + bn) * tile_k * 16 // elems, block_tile=block_tile, tile_k=tile_k, stages=stages)
    return warps


def _warpgroup_nest(sch: s_tir.Schedule, blk: s_tir.SBlockRV, bn: int | SampledTile, tile_k: int,
                    warps: int | SampledTile,
                    raster: int | SampledTile) -> tuple[s_tir.SBlockRV, s_tir.LoopRV, s_tir.LoopRV, Warps]:
    """v8's loop nest: each warp's 16 x ``bn`` x ``tile_k`` product blockized (``"<block>_o"``), ``warps`` of them
    per block (threadIdx.y), blocks rasterized; returns (the product block, the k-tile loop, the warp loop, the
    warps as split factors). ``bn``, ``warps`` and ``raster`` may be left to MetaSchedule (``SampledTile``: sampled
    perfect tiles, ``wgmma_space``)."""
    i, j, kk = sch.get_loops(blk)
    i, i16 = sch.split(i, factors=[None, 16])
    bx, jn, _ = tile_loop(sch, j, bn)
    ko, kt = sch.split(kk, factors=[None, tile_k])
    sch.reorder(i, bx, ko, i16, jn, kt)
    tile = sch.blockize(i16)  # block "C_o": one warp's 16 x bn x tile_k product
    by, warp, warps = tile_loop(sch, i, warps)
    sch.reorder(by, bx, warp, ko)
    if isinstance(raster, SampledTile):  # a divisor of the block rows, at most max_units
        raster = sch.sample_perfect_tile(by, n=2, max_innermost_factor=raster.max_units)[1]
    bind_blocks(sch, by, bx, raster)
    sch.bind(warp, "threadIdx.y")
    return tile, ko, warp, warps


def copy_elems(extent: int, dtype: str) -> int:
    """The elements per ``cp.async`` of a fill whose rows are ``extent`` elements apart: a whole 16-byte chunk where
    the rows are 16-byte aligned, else the widest copy of 8 or 4 bytes they are aligned to (K = 1500 halves: 8-byte
    copies, each predicated as one), else the whole chunk (TVM then copies element by element, synchronously)."""
    elems = wgmma.CHUNK_ELEMS[dtype]  # per 16 bytes
    return next((elems // d for d in (1, 2, 4) if extent % (elems // d) == 0), elems)


def _input_vectors(sch: s_tir.Schedule, dtype: str) -> tuple[int, int]:
    """``copy_elems`` of A and B, the module's first two parameters (a GEMM's, split-K's too: their rows are k and n
    elements long whatever blocks the helper's fills read them through)."""
    func = sch.mod["main"]
    return tuple(copy_elems(int(param.shape[-1]), dtype) for param in func.params[:2])


def _stage_wgmma_tiles(sch: s_tir.Schedule, tile: s_tir.SBlockRV, ko: s_tir.LoopRV, dtype: str, layout: str,
                       warps: Warps, vectors: tuple[int, int] | None = None) -> None:
    """A and B tiles of a k tile to shared memory in wgmma's ``layout`` (``intrinsics.wgmma``), 16-byte copies spread
    over the block's threads in the order that layout's banks want; ``vectors``: A's and B's elements per copy where
    narrower (``copy_elems``: each thread's 16-byte chunk in two or four copies)."""
    elems = wgmma.CHUNK_ELEMS[dtype]
    places = (wgmma.int8_layout,) * 2 if dtype == "int8" else (wgmma.a_layout, wgmma.b_layout)
    for idx, place in enumerate(places):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ko)
        sch.transform_layout(sh, ("write", 0), functools.partial(place, layout),
                             assume_injective_transform=True)  # XOR swizzles are bijective; TVM cannot tell
        r, c = sch.get_loops(sh)[-2:]
        r, r8 = sch.split(r, factors=[None, 8])
        c, c8 = sch.split(c, factors=[None, elems])
        if layout == "interleaved":  # consecutive threads fill consecutive 16 B rows of a core matrix
            sch.reorder(r, c, r8, c8)
            threads = sch.fuse(r, c, r8)
        else:  # consecutive threads fill the 8 chunks of a 128 B row, which the swizzle spreads over all banks
            threads = sch.fuse(r, r8, c)
        split_threads(sch, threads, warps)
        vector = vectors[idx] if vectors else elems
        if vector < elems:
            c8 = sch.split(c8, factors=[None, vector])[1]
        sch.vectorize(c8)


def _register_accumulator(sch: s_tir.Schedule, tile: s_tir.SBlockRV, ko: s_tir.LoopRV,
                          warp: s_tir.LoopRV) -> s_tir.SBlockRV:
    """C accumulated in the registers wgmma writes ("local", laid out by ``wgmma.register_of``), stored after the
    k loop, filled before it; returns the store block."""
    acc = sch.cache_write(tile, 0, "local")
    sch.reverse_compute_at(acc, warp)
    sch.decompose_reduction(tile, ko)  # blocks "C_o_init" / "C_init"
    # Each lane keeps the registers wgmma gives it: (16-column tile, register). The map drops the lane, so it is
    # not injective over the warp's 16 rows, which TVM cannot check; it holds per thread, which is what "local"
    # storage is, and every block touching these registers is tensorized with intrinsics written for it.
    sch.transform_layout(acc, ("read", 0), lambda r, c: wgmma.register_of(r, c),
                         assume_injective_transform=True)
    return acc


def gemm_v8_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), tile_k: int = 64,
                  stages: int = 3, raster: int = 1, layout: str = "swizzle128",
                  overlap: bool = False, block: str = "C") -> s_tir.Schedule:
    """fp16 tensor cores through Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a), operands read from shared
    memory by descriptor: every warp owns 16 rows x the whole block width; four warps form a warpgroup that
    multiplies its 64 rows per ``wgmma`` (``tirbench.schedules.intrinsics.wgmma``). cp.async fills a ``stages``-deep
    pipeline of tiles stored in one of wgmma's shared-memory ``layout``s (``"swizzle128"`` needs ``tile_k`` = 64;
    ``"interleaved"`` is the unswizzled one); accumulators go straight from registers to C. ``overlap``: a k
    tile's wgmma group keeps running while the warps copy the next tile (each tile waits for the previous tile's
    group, not its own; the copies move after the math, into the buffer that finished group read).

    float16 with C in global memory takes any m, n, k: a shape the tiles do not divide is padded to them
    (``tirbench.schedules.common.padding``): zero-filling predicated cp.async fills (8- or 4-byte copies where the
    rows of A or B are not 16-byte aligned: ``copy_elems``), and the accumulators stored to a
    shared-memory tile of C that a predicated 16-byte copy writes out. Costs the padded work (edge blocks and the last
    k tile multiply zeros), that pass of C through shared memory after the main loop, and shared memory for the C
    tile (bm x (bn + 8) floats; the pipeline's buffers are reused for it, so a kernel needs the larger of the two).
    Divisible shapes compile as without padding.

    int8 inputs (C[m, n] += A[m, k] * B[n, k], both K-major, int32 accumulators; ``wgmma ... .s32.s8.s8``) take the
    same structure; a 128-byte swizzled row then holds 128 values of k (``tile_k`` = 128); with C in global memory they
    need tiles that divide. A caller's C in shared memory (the convolutions' epilogues), int8 or float16, takes any
    m, n, k: the padded tile stays in shared memory and the crop folds into the caller's epilogue
    (``Padding.fold_into_consumer``)."""
    blk, m, n, k = gemm_block(sch, block)
    dtype = _wgmma_dtype(sch, blk)
    c_scope = sch.get(blk).writes[0].source.scope()  # global, or shared where an epilogue copies C out
    bm, bn = block_tile
    pads = c_scope != "global" or dtype == "float16"  # an int8 C in global memory (no caller) keeps its shape
    mnk = padded_extents(sch, block, (bm, bn, tile_k), TILE_PARAMS) if pads else (m, n, k)  # checked as padded
    warps = require_wgmma_tiles(mnk, dtype, block_tile=block_tile, tile_k=tile_k, stages=stages, raster=raster,
                                 layout=layout, overlap=overlap)
    padding = pad_gemm(sch, block, (bm, bn, tile_k), c_scope, (m, n)) if pads else Padding()
    _, ko, acc, _ = wgmma_nest(sch, block, dtype=dtype, layout=layout, bn=bn, tile_k=tile_k, warps=warps,
                                  raster=raster, vectors=_input_vectors(sch, dtype) if c_scope == "global" else None)
    tensorize_wgmma(sch, block, acc, ko, bn=bn, tile_k=tile_k, layout=layout, stages=stages, overlap=overlap,
                    dtype=dtype)
    padding.finish(sch, warps)
    return sch


def wgmma_nest(sch: s_tir.Schedule, block: str, *, dtype: str, layout: str, bn: int | SampledTile, tile_k: int,
               warps: int | SampledTile, raster: int | SampledTile, vectors: tuple[int, int] | None = None
               ) -> tuple[s_tir.SBlockRV, s_tir.LoopRV, s_tir.SBlockRV, Warps]:
    """v8 up to its tensor intrinsics, on the (padded) GEMM block ``block``: the warpgroup nest, the A and B tiles
    staged in shared memory in ``layout``, the accumulators in registers. Returns (the product block
    ``"<block>_o"``, the k-tile loop, the accumulator store block, the warps as split factors); ``tensorize_wgmma``
    finishes it. ``bn``, ``warps`` and ``raster`` may be ``SampledTile``s (the ``wgmma`` design space); ``vectors``:
    A's and B's elements per copy (``_stage_wgmma_tiles``; default 16 bytes)."""
    blk = sch.get_sblock(block)
    tile, ko, warp, warps = _warpgroup_nest(sch, blk, bn, tile_k, warps, raster)
    _stage_wgmma_tiles(sch, tile, ko, dtype, layout, warps, vectors)
    acc = _register_accumulator(sch, tile, ko, warp)
    return tile, ko, acc, warps


def tensorize_wgmma(sch: s_tir.Schedule, block: str, acc: s_tir.SBlockRV, ko: s_tir.LoopRV, *, bn: int,
                    tile_k: int, layout: str, stages: int, overlap: bool, dtype: str) -> None:
    """v8's last step after ``wgmma_nest``: the fill, the accumulator store (to C's scope) and the product
    tensorized with the wgmma intrinsics of this ``bn``, ``tile_k``, ``layout`` and overlap, and the k-tile loop
    ``ko`` software-pipelined over ``stages`` buffers (``overlap``: the math before the copies)."""
    c_scope = sch.get(acc).writes[0].source.scope()  # global, or shared (padded C, a convolution's epilogue)
    names = wgmma.intrin_names(bn, tile_k, layout, overlap_stages=stages if overlap else 0,
                               store_scope=c_scope, dtype=dtype)
    sch.tensorize(sch.get_loops(sch.get_sblock(f"{block}_init"))[-2], names["init"])
    sch.tensorize(sch.get_loops(acc)[-2], names["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock(block))[-3], names["compute"])
    pipeline(sch, ko, stages, async_copy=True, math_first=overlap)

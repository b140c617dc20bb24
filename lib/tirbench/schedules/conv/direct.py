"""Convolution schedules: the classic HWCN direct schedule, and the same workload as an implicit GEMM.

Both schedule the ``"conv"`` block of ``tirbench.workloads.conv2d(..., layout="HWCN")``: Y[oh, ow, k, n] =
sum over (ry, rx, rc) of W[ry, rx, rc, k] * Xp[oh*stride + ry, ow*stride + rx, rc, n]. For one output pixel that
is a matrix product: (k x rc) filter slice times (rc x n) input slice, accumulated over the 3x3 window. Both
operands are stored with k (or n) contiguous, i.e. "k-major" in GEMM terms, so the GEMM helpers' shared-memory
pipeline applies to them once the conv loops are arranged as GEMM loops (``conv2d_hwcn_implicit_gemm``).
The padding block ``"pad"`` is inlined into the shared-memory fill: the padded input never exists in memory.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_divides, require_positive_int, require_threads
from tirbench.schedules.common.tiling import check_simt_tiles, has_block, simt_nest

#: Per layout: the "conv" block's loops by name, the buffers it reads, in order, and the loop (by name) that indexes
#: the filter W at a telling position (its last index, or the first for NCHW32), which tells NCHW from NHWC/NCHW32.
_CONV_LOOPS = {"HWCN": (("oh", "ow", "k", "n", "r", "s", "c"), ["W", "Xp"], ("k", -1)),
               "NCHW": (("n", "k", "oh", "ow", "c", "r", "s"), ["Xp", "W"], ("s", -1)),
               "NHWC": (("n", "oh", "ow", "k", "r", "s", "c"), ["Xp", "W"], ("k", -1)),
               "NCHW32": (("n", "oh", "ow", "k", "r", "s", "c"), ["Xp", "W"], ("k", 0))}


def _filter_axis_is(block, position: int, axis: int) -> bool:
    """Whether the filter W's index ``axis`` is the block's iterator at ``position``."""
    w = next(region for region in block.reads if region.source.name == "W")
    return w.region[axis].min.same_as(block.iter_vars[position].var)


def conv_block(sch: s_tir.Schedule, layout: str) -> tuple[s_tir.SBlockRV, dict[str, int]]:
    """Block "conv" of a ``layout`` convolution and its loop extents by name; one-line error for another layout."""
    blk = sch.get_sblock("conv")
    names, reads, (w_loop, w_axis) = _CONV_LOOPS[layout]
    block = sch.get(blk)
    if [region.source.name for region in block.reads] != reads or len(sch.get_loops(blk)) != len(names) or \
            not _filter_axis_is(block, names.index(w_loop), w_axis):
        hint = "conv2d_int8(...)" if layout == "NCHW32" else f"conv2d(..., layout='{layout}')"
        raise ValueError(f"this schedule needs an {layout} convolution: {hint}")
    return blk, dict(zip(names, (loop_extent(sch, loop) for loop in sch.get_loops(blk))))


def _round_on_store(sch: s_tir.Schedule) -> None:
    """A float16 workload rounds its float32 accumulators to half in a "cast" block: fold it into the copy that
    writes them out (the block ``cache_write`` made), so the kernel stores half values straight from registers."""
    if has_block(sch, "cast"):
        sch.reverse_compute_inline(sch.get_sblock("cast"))


def conv2d_hwcn_classic(sch: s_tir.Schedule, *, tile: int = 8, threads: int = 8, step: int = 8,
                        vthreads: int = 2, vector: int = 4) -> s_tir.Schedule:
    """TVM's classic "optimize convolution on GPU" schedule, primitive for primitive.

    A block computes a ``tile*threads`` x ``tile*threads`` tile of (output channel x batch) at one output pixel
    (blockIdx.z: the pixel, y: channels, x: batch); its ``threads x threads`` threads each accumulate ``tile x tile``
    outputs in registers, split into ``vthreads x vthreads`` virtual threads, so a thread's outputs are a strided
    grid (consecutive threads touch consecutive addresses: no bank conflicts, coalesced stores). The reduction
    runs over ``step`` input channels at a time, per kernel tap: an ``step x tile*threads`` slice of the padded
    input and of the filter goes to shared memory (cooperative fetch, ``vector``-wide loads), then to registers.
    """
    blk, ext = conv_block(sch, "HWCN")
    for value, param in ((tile, "tile"), (threads, "threads"), (step, "step"), (vthreads, "vthreads")):
        require_positive_int(value, param=param)
    block_factor = tile * threads
    require_threads(threads * threads, param="threads*threads")
    require_divides(ext["k"], block_factor, param="tile*threads", axis="k (output channels)")
    require_divides(ext["n"], block_factor, param="tile*threads", axis="n (batch)")
    require_divides(ext["c"], step, param="step", axis="c (input channels)")
    require_divides(tile, vthreads, param="vthreads", axis="tile")
    require_divides(step, threads, param="threads", axis="step (the shared tile's rows, one per threadIdx.y)")
    require_divides(tile, vector, param="vector", axis="tile (each thread's share of a shared tile row)")

    oh, ow, f, n, ry, rx, rc = sch.get_loops(blk)
    bz = sch.fuse(oh, ow)
    by, tyz, ty, fi = sch.split(f, factors=[None, vthreads, threads, tile // vthreads])
    bx, txz, tx, ni = sch.split(n, factors=[None, vthreads, threads, tile // vthreads])
    rco, rci = sch.split(rc, factors=[None, step])
    sch.reorder(bz, by, bx, tyz, txz, ty, tx, rco, ry, rx, rci, fi, ni)
    for loop, tag in ((bz, "blockIdx.z"), (by, "blockIdx.y"), (bx, "blockIdx.x"), (tyz, "vthread.y"),
                      (txz, "vthread.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, tag)
    y_local = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(y_local, tx)
    _round_on_store(sch)
    w_shared = sch.cache_read(blk, 0, "shared")
    x_shared = sch.cache_read(blk, 1, "shared")
    sch.compute_at(w_shared, rx)
    sch.compute_at(x_shared, rx)
    w_local = sch.cache_read(blk, 0, "local")
    x_local = sch.cache_read(blk, 1, "local")
    sch.compute_at(w_local, rci)
    sch.compute_at(x_local, rci)
    for tile_block in (x_shared, w_shared):  # rows: step input channels; columns: tile*threads values
        rows, cols = sch.get_loops(tile_block)[-2:]
        t_y, _ = sch.split(rows, factors=[threads, None])
        t_x, cols = sch.split(cols, factors=[threads, None])
        _, vec = sch.split(cols, factors=[None, vector])
        sch.reorder(t_y, t_x)
        sch.bind(t_y, "threadIdx.y")
        sch.bind(t_x, "threadIdx.x")
        sch.vectorize(vec)
    sch.compute_inline(sch.get_sblock("pad"))
    sch.decompose_reduction(blk, rco)
    return sch


def conv2d_hwcn_implicit_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                              warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                              tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                              columns_outer: bool = False, async_copy: bool = True) -> s_tir.Schedule:
    """The HWCN convolution as one GEMM per output pixel, scheduled by the GEMM ladder's v5 nest (``simt_nest``).

    GEMM rows are output channels (``block_tile[0]``), columns the batch (``block_tile[1]``), and the reduction
    is (ry, rx, rc) fused into one k-tile loop of ``tile_k`` input channels per step: 9 * c / tile_k tiles for a
    3x3 kernel. The filter arrives k-major (``a_k_major``), so both shared tiles are plain float4 copies; the
    padding is a predicate on the input tile's copy (cp.async with a zero fill where it falls outside). Pixels go
    to blockIdx.y, the (channel, batch) tiles to blockIdx.x. Tiles, warps, pipeline ``stages``, ``raster``,
    ``prefetch`` and ``columns_outer`` mean what they mean for ``gemm_v5_warp_tiled``. Compile with the
    pass config of ``records.HWCN_HOPPER``.
    """
    blk, ext = conv_block(sch, "HWCN")
    threads = check_simt_tiles((ext["k"], ext["n"], ext["c"]), block_tile=block_tile, warp_tile=warp_tile,
                               thread_tile=thread_tile, tile_k=tile_k, vector=4, stages=stages, raster=raster,
                               prefetch=prefetch, a_k_major=True,
                               axes=("k (output channels)", "n (batch)", "c (input channels)"))
    (bm, bn), (wm, wn), (tm, tn) = block_tile, warp_tile, thread_tile
    oh, ow, f, n, ry, rx, rc = sch.get_loops(blk)
    pixel = sch.fuse(oh, ow)
    sch.bind(pixel, "blockIdx.y")
    rows = sch.split(f, factors=[None, bm // wm, wm // tm, tm])
    cols = sch.split(n, factors=[None, bn // wn, wn // tn, tn])
    rco, rci = sch.split(rc, factors=[None, tile_k])
    ko = sch.fuse(ry, rx, rco)
    simt_nest(sch, blk, rows=rows, cols=cols, k_loops=(ko, rci), threads=threads, vector=4, fragments=True,
              stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch, columns_outer=columns_outer,
              a_k_major=True)
    sch.compute_inline(sch.get_sblock("pad"))
    return sch


def conv2d_nchw_splitk(sch: s_tir.Schedule, *, split: int = 16, block_k: int = 16, thread_k: int = 2,
                       block_pixels: tuple[int, int] = (7, 7), step: int = 8) -> s_tir.Schedule:
    """A small-batch convolution with its input channels split ``split`` ways across blocks (split-K).

    At batch 1 a layer has few outputs (25,088 for ResNet-50's last 3x3 layer, for the SMs of a whole GPU), each a long sum
    (4,608 products). ``rfactor`` turns the sum over input channels into ``split`` partial sums written to a buffer
    ``Y_rf`` by independent blocks, and a second kernel adds them up: ``split`` times more blocks, each with a
    ``split``-times shorter reduction. A block computes ``block_k`` output channels x ``block_pixels`` (rows x
    columns) for one slice; each thread ``thread_k`` channels of one pixel in registers. ``step`` input channels at a
    time, the padded input window and the filter slice go to shared memory (a cooperative fetch by all threads, the
    padding inlined as a predicate), and the kernel window's loops are unrolled.
    """
    blk, ext = conv_block(sch, "NCHW")
    for value, param in ((split, "split"), (block_k, "block_k"), (thread_k, "thread_k"), (step, "step")):
        require_positive_int(value, param=param)
    (py, px) = block_pixels
    require_divides(ext["c"], split, param="split", axis="c (input channels)")
    require_divides(ext["c"] // split, step, param="step", axis="c / split")
    require_divides(ext["k"], block_k, param="block_k", axis="k (output channels)")
    require_divides(block_k, thread_k, param="thread_k", axis="block_k")
    require_divides(ext["oh"], py, param="block_pixels[0]", axis="oh (output rows)")
    require_divides(ext["ow"], px, param="block_pixels[1]", axis="ow (output columns)")
    threads = block_k // thread_k * py * px
    require_threads(threads, param="block_k/thread_k*block_pixels")

    _splitk_nest(sch, blk, rc_factors=[split, ext["c"] // split // step, step],
                 k_factors=[None, block_k // thread_k, thread_k], y_factors=[None, py], x_factors=[None, px])
    return sch


def conv2d_nchw_splitk_space(sch: s_tir.Schedule) -> s_tir.Schedule:
    """``conv2d_nchw_splitk`` with its numbers left to MetaSchedule: a design space for ``ScheduleFn``.

    ``sample_perfect_tile`` splits the input channels into (slices, steps, channels per step), the output channels
    into (blocks, threads, per thread), the output rows and columns into (blocks, threads). Samples with more than
    1024 threads or too much shared memory are dropped by ``VerifyGPUCode``.
    """
    blk, _ = conv_block(sch, "NCHW")
    _, f, y, x, rc, _, _ = sch.get_loops(blk)
    _splitk_nest(sch, blk, rc_factors=sch.sample_perfect_tile(rc, n=3, max_innermost_factor=16),
                 k_factors=sch.sample_perfect_tile(f, n=3, max_innermost_factor=8),
                 y_factors=sch.sample_perfect_tile(y, n=2, max_innermost_factor=16),
                 x_factors=sch.sample_perfect_tile(x, n=2, max_innermost_factor=16))
    return sch


def splitk_decisions(sch: s_tir.Schedule, cand: dict) -> list[list[int]]:
    """The sampled tiles of ``conv2d_nchw_splitk_space`` that make it ``conv2d_nchw_splitk(**cand)``, in the order
    the space samples them (input channels, output channels, output rows, output columns); ``sch``: the workload's."""
    _, ext = conv_block(sch, "NCHW")
    (py, px), step = cand["block_pixels"], cand["step"]
    return [[cand["split"], ext["c"] // cand["split"] // step, step],
            [ext["k"] // cand["block_k"], cand["block_k"] // cand["thread_k"], cand["thread_k"]],
            [ext["oh"] // py, py], [ext["ow"] // px, px]]


def _splitk_nest(sch: s_tir.Schedule, blk: s_tir.SBlockRV, *, rc_factors: list, k_factors: list, y_factors: list,
                 x_factors: list) -> None:
    """The split-K nest on an NCHW "conv" block; factors are ints (None for the outermost) or sampled ExprRVs.

    ``rc_factors``: (slices, steps, channels per step) of the input channels; ``k_factors``: (blocks, threads,
    per thread) of the output channels; ``y_factors`` / ``x_factors``: (blocks, threads) of the output rows / columns.
    """
    n, f, y, x, rc, ry, rx = sch.get_loops(blk)
    rs, rco, rci = sch.split(rc, factors=rc_factors)
    partial = sch.rfactor(rs, factor_axis=0)          # block "conv_rf": Y_rf[slice, n, k, oh, ow]
    n, f, y, x, rs, rco, rci, ry, rx = sch.get_loops(partial)
    bf, tf, fi = sch.split(f, factors=k_factors)
    by, ty = sch.split(y, factors=y_factors)
    bx, tx = sch.split(x, factors=x_factors)
    sch.reorder(rs, n, bf, by, bx, tf, ty, tx, rco, ry, rx, rci, fi)
    sch.bind(sch.fuse(rs, n, bf, by, bx), "blockIdx.x")
    thread = sch.fuse(tf, ty, tx)
    sch.bind(thread, "threadIdx.x")
    acc = sch.cache_write(partial, 0, "local")
    sch.reverse_compute_at(acc, thread)
    for index in (0, 1):                              # Xp window, W slice
        cache = sch.cache_read(partial, index, "shared")
        sch.compute_at(cache, rco, preserve_unit_loops=True)   # a fixed loop count, whatever the sampled tiles
        fused = sch.fuse(*sch.get_loops(cache)[3:])   # the loops under (blocks, threads, rco)
        _, *lanes = sch.split(fused, factors=[None, k_factors[1], y_factors[1], x_factors[1]])
        sch.bind(sch.fuse(*lanes), "threadIdx.x")
    sch.compute_inline(sch.get_sblock("pad"))
    for loop in (ry, rx, rci, fi):
        sch.unroll(loop)
    sch.decompose_reduction(partial, rco)
    final = sch.get_sblock("conv")                    # Y = sum of the slices, one thread per output
    outputs = sch.fuse(*sch.get_loops(final)[:4])
    blocks, lanes = sch.split(outputs, factors=[None, 128])
    sch.bind(blocks, "blockIdx.x")
    sch.bind(lanes, "threadIdx.x")

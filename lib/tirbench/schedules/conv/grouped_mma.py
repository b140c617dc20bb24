"""Grouped NHWC fp16 convolutions (1 < groups < C: ResNeXt's grouped 3x3s) on ldmatrix + mma.sync m16n8k16.

The layer is a batched implicit GEMM, one GEMM per group (``simt_gemm.nhwc_grouped_as_gemm``): rows the output
pixels, columns the group's K / G output channels, k = (r, s, c) over the group's C / G input channels. The group runs
on blockIdx.y, a GEMM's block tiles on blockIdx.x (``gemm_v7_mma(..., batch=True)``); fp32 accumulators go to a
shared-memory C tile, and an epilogue rounds them to half and stores Y (the workload's "cast" folded into it), 16
bytes a store where a group's output channels come in 8s.

mma.sync tiles are 16 wide, so a group of 4 or 8 output channels runs in a 16-column tile (the columns past the group
are zero filter columns, never stored), and a group's k (9 x 8 = 72 at 8 channels) is padded up to the k tile.

The fills: where ``tile_k`` divides a group's input channels (16 or 32 channels: ``tile_k`` 16; 32 channels: 32 too),
every k tile is channels of one kernel tap, so the im2col tile is filled by 16-byte ``cp.async`` copies straight from
X (zero-filled at the border). Elsewhere a k tile spans taps: where a group's channels come in 8s, each 16-byte copy
is still one pixel's contiguous channels, and ``split_taps`` marks the fill so that TVM's vectorizer sees it (TVM
0.27 does not reduce floordiv(16 * ko + 8 * t + lane, S * C/G) over the lanes by itself). With fewer channels a
group (ResNeXt's 4) the fill copies elements (synchronous: cp.async has no 2-byte form), made explicit here so that
TVM never gathers 8 halves of different taps into one vector. The filter's fill is 16-byte copies where a group's
output channels come in 8s, else element copies. Compile with ``MMA_ASYNC_CONFIG`` (the conv records'
``CONV_TC_CONFIG``).
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent
from tirbench.schedules.common.tiling import WARP, has_block, split_threads, warps_of
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.conv.implicit_gemm import (VECTOR, element_copies, inline_im2col, input_fill_block,
                                                   spans_taps, split_taps)
from tirbench.schedules.conv.simt_gemm import nhwc_grouped_as_gemm, output_copy
from tirbench.schedules.gemm.tensorcore import gemm_v7_mma


def _require_epilogue(bm: int, columns: int, warps: int, vector: int) -> None:
    """The epilogue gives every thread the same number of ``vector``-half stores of a block's ``bm`` x ``columns``
    outputs."""
    if bm * columns % (warps * WARP * vector):
        raise ValueError(f"block_tile[0]={bm}: the epilogue gives each of {warps * WARP} threads the same number of "
                         f"{vector}-half stores of {bm} x {columns} outputs, so {bm} * {columns} must be a multiple "
                         f"of {warps * WARP * vector}")


def _filter_fill_block(sch: s_tir.Schedule) -> s_tir.SBlockRV:
    """The filter's shared-memory fill ("W_reindex_shared.dyn", or "W_reindex_pad_shared.dyn" where the GEMM helper
    padded the group's columns or k)."""
    return sch.get_sblock(next(name for name in ("W_reindex_shared.dyn", "W_reindex_pad_shared.dyn")
                               if has_block(sch, name)))


def _epilogue(sch: s_tir.Schedule, warps: int, vector: int) -> None:
    """The output copy (the C tile in shared memory, rounded to half, to Y) under the block's loops (group, GEMM
    tile), ``warps`` x 32 threads storing ``vector`` halves at a time."""
    out = sch.get_sblock(output_copy(sch))
    sch.reverse_compute_at(out, sch.get_loops(input_fill_block(sch))[1])
    *_, vec = split_threads(sch, sch.fuse(*sch.get_loops(out)[2:]), warps, vector)
    sch.vectorize(vec)


def conv2d_nhwc_grouped_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 32),
                            warp_tile: tuple[int, int] = (32, 32), tile_k: int = 32, stages: int = 4,
                            raster: int = 1, prefetch: str = "k_step") -> s_tir.Schedule:
    """The grouped NHWC fp16 convolution as a batched implicit GEMM on ldmatrix + mma.sync m16n8k16 (module
    docstring). ``block_tile``: (output pixels, output channels of a group) a block; ``warp_tile``, ``tile_k``,
    ``stages``, ``raster``, ``prefetch``: as for ``gemm_v7_mma``. Any pixels and group widths (tiles past them are
    padded); a group's input channels in 8s fill the im2col tile 16 bytes at a time."""
    cg = conv_block(sch, "NHWC")[1]["c"]   # input channels of a group
    taps = spans_taps(sch, cg, tile_k)
    nhwc_grouped_as_gemm(sch)
    blk = sch.get_sblock("conv")
    sch.set_scope(blk, 0, "shared.dyn")
    kg = loop_extent(sch, sch.get_loops(blk)[2])   # loops: group, pixel, output channel of the group, k
    gemm_v7_mma(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                prefetch=prefetch, block="conv", batch=True)
    warps = warps_of(block_tile, warp_tile)
    vector = next(v for v in (VECTOR, 4, 2, 1) if kg % v == 0)
    _require_epilogue(block_tile[0], min(block_tile[1], kg), warps, vector)
    if cg % VECTOR:
        element_copies(sch)
    if kg % VECTOR:
        element_copies(sch, _filter_fill_block(sch))
    inline_im2col(sch)
    split_taps(sch, taps)
    _epilogue(sch, warps, vector)
    return sch

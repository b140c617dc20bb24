"""fp32 convolution as an implicit GEMM on the GEMM ladder's v5 nest (``gemm_v5_warp_tiled``), NHWC and NCHW.

The ``"conv"`` block of ``conv2d(..., layout="NHWC" | "NCHW", dtype="float32")`` is reindexed into a GEMM block,
C[m, n] += A[m, k] * B[k, n], oriented so that the operand read along the block's columns (B) and C are
contiguous along n in memory: float4 fills of B and float4 stores of C wherever the rows allow, while A goes
through v5's transposed shared tile (4-byte ``cp.async`` copies), as the GEMM's row-major A does.

- NHWC: m = output pixel (n, oh, ow), n = output channel, k = (kernel row, channel block, kernel column, channel):
  A = im2col of X [N*OH*OW, R*S*C], B = the filter (R, S, C, K) = [R*S*C, K] as stored, C = Y = [N*OH*OW, K] as
  stored. The same reindexing as the fp16 kernels (``implicit_gemm.reindex_channels_last``).
- NCHW: m = output channel, n = (image, output pixel), k = (c, r, s): A = the filter (K, C, R, S) = [K, C*R*S] as
  stored, B = im2col of X [C*R*S, N*OH*OW], C[f, (n, p)] = Y[n, f, p]. Pixels are contiguous in X and Y, output
  channels are not, so the pixels take the columns. For a 1x1 stride-1 layer B is X itself, and its fill copies
  16 bytes where OH*OW is a multiple of 4; every other B fill copies element by element: TVM 0.27 would emit 16-byte
  ``cp.async`` copies from misaligned addresses (a 3x3 window without padding) or of the wrong, contiguous elements
  (a strided ramp: stride 2, one pixel per image). C is stored 16 bytes at a time where OH*OW is a multiple of 4.
  The block's body multiplies B by A, so A is its second read (``a_read=1``).

Any shape: where a tile does not divide GEMM M, N or K, the GEMM helper pads the block to the tiles
(``tirbench.schedules.common.padding``). The pad of A and B folds into their shared-memory fills, with im2col and the
convolution's zero padding: one predicate per copy (zero-filling ``cp.async``), which bounds k by R*S*C, so input
channels that no vector width divides (the 3-channel stem, 96-channel layers) are zero-padded in the fill, never
refused, and no copy of X is made. The crop folds into the register write-back, each store of Y predicated.
Compile with the pass config of ``records.NHWC_GEMM`` / ``records.NCHW_GEMM`` (cp.async).
"""
from __future__ import annotations

from tvm import s_tir
from tvm.tirx import IndexMap

from tirbench.schedules.common.tiling import has_block
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.conv.implicit_gemm import (default_channel_block, inline_im2col, pixel_index,
                                                  reindex_channels_last)
from tirbench.schedules.gemm.simt import gemm_v5_warp_tiled


def _require_float32(sch: s_tir.Schedule, layout: str) -> None:
    if has_block(sch, "cast"):
        raise ValueError(f"this schedule takes float32 inputs: use conv2d(..., layout='{layout}', dtype='float32')")


def nchw_as_gemm(sch: s_tir.Schedule) -> s_tir.Schedule:
    """Reindex the NCHW float32 convolution's block "conv" into a GEMM block (loops: output channel, (image, pixel),
    (c, r, s); see the module docstring), the output copy "Y_reindex" into the same (m, n) order."""
    blk, ext = conv_block(sch, "NCHW")
    _require_float32(sch, "NCHW")
    r, s = ext["r"], ext["s"]
    if (ext["oh"] == 1 or ext["ow"] == 1) and r * s > 1:   # TVM's im2col reindex drops the 1-wide output axis
        raise ValueError(f"an output of {ext['oh']}x{ext['ow']} pixels under a {r}x{s} kernel is not taken by the "
                         "NCHW implicit GEMM (split-K takes it)")
    column = pixel_index(ext)

    def k_index(rc, ry, rx):  # a 1-wide kernel axis gets no term (TVM's bijectivity check trips on it)
        return rc * (r * s) + (ry * s if r > 1 else 0) + (rx if s > 1 else 0)

    sch.reindex(blk, ("read", 0))
    sch.reindex(blk, ("read", 1))
    sch.reindex(blk, ("write", 0))
    sch.transform_block_layout(blk, lambda b, f, y, x, rc, ry, rx: (f, column(b, y, x), k_index(rc, ry, rx)))

    def b_index(b, y, x, rc, *taps):  # the im2col buffer: TVM leaves out 1-wide kernel axes
        at = dict(zip([axis for axis, width in (("ry", r), ("rx", s)) if width > 1 or len(taps) == 2], taps))
        return k_index(rc, at.get("ry", 0), at.get("rx", 0)), column(b, y, x)

    ndim = len(sch.get(blk).reads[0].source.shape)
    sch.transform_layout(blk, ("read", 0), IndexMap.from_func(b_index, ndim=ndim, index_dtype="int32"))
    sch.transform_layout(blk, ("read", 1), lambda f, rc, ry, rx: (f, k_index(rc, ry, rx)))
    sch.transform_layout(blk, ("write", 0), lambda b, f, y, x: (f, column(b, y, x)))
    sch.transform_block_layout(sch.get_sblock("Y_reindex"), lambda b, f, y, x: (f, column(b, y, x)))
    return sch


def nhwc_as_gemm(sch: s_tir.Schedule, *, channel_block: int) -> s_tir.Schedule:
    """Reindex the NHWC float32 convolution's block "conv" into a GEMM block (loops: pixel, output channel, k; see
    ``implicit_gemm``), the output copy "Y_reindex" into the same (m, n) order."""
    blk, ext = conv_block(sch, "NHWC")
    _require_float32(sch, "NHWC")
    reindex_channels_last(sch, blk, ext, channel_block=channel_block, filter_nk=False)
    sch.transform_block_layout(sch.get_sblock("Y_reindex"), lambda b, y, x, f: (pixel_index(ext)(b, y, x), f))
    return sch


def _finish(sch: s_tir.Schedule) -> s_tir.Schedule:
    """After the GEMM helper: im2col, the filter reshape and the padding into the shared fills, the output copy
    into the register write-back (Y stored straight from registers)."""
    inline_im2col(sch)
    sch.reverse_compute_inline(sch.get_sblock("Y_reindex"))
    return sch


def conv2d_nhwc_implicit_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                              warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                              tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                              columns_outer: bool = False, channel_block: int | None = None) -> s_tir.Schedule:
    """The NHWC fp32 convolution as a GEMM (rows: output pixels, columns: output channels) through the v5 nest.

    Tiles, warps, ``stages``, ``raster``, ``prefetch`` and ``columns_outer`` mean what they mean for
    ``gemm_v5_warp_tiled``; any shape (see the module docstring). ``channel_block`` (default ``tile_k`` where it
    divides C, else C) orders k as in ``implicit_gemm``; an explicit one must divide C."""
    nhwc_as_gemm(sch, channel_block=default_channel_block(sch, tile_k, channel_block))
    gemm_v5_warp_tiled(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                       stages=stages, raster=raster, prefetch=prefetch, columns_outer=columns_outer, block="conv")
    return _finish(sch)


def conv2d_nchw_implicit_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                              warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                              tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                              columns_outer: bool = False) -> s_tir.Schedule:
    """The NCHW fp32 convolution as a GEMM (rows: output channels, columns: (image, output pixel)) through the v5
    nest. Parameters as for ``gemm_v5_warp_tiled``; any shape (see the module docstring)."""
    b_fill_vector = 4 if _b_is_x(sch) else 1
    nchw_as_gemm(sch)
    gemm_v5_warp_tiled(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                       stages=stages, raster=raster, prefetch=prefetch, columns_outer=columns_outer, block="conv",
                       a_read=1, b_fill_vector=b_fill_vector)
    return _finish(sch)


def _b_is_x(sch: s_tir.Schedule) -> bool:
    """Whether the NCHW layer's im2col B is X itself, in rows of whole 16-byte vectors: a 1x1 stride-1 layer with
    OH * OW a multiple of 4. Only then are four consecutive columns of B four consecutive, 16-byte aligned floats of
    X. (Elsewhere TVM may still prove them a vector, and emit a 16-byte cp.async from a misaligned or strided
    address: a shifted window with no padding predicate, stride 2, one pixel per image.)"""
    blk, ext = conv_block(sch, "NCHW")
    xp = sch.get(blk).reads[0].source.shape
    return ext["r"] == ext["s"] == 1 and (int(xp[2]), int(xp[3])) == (ext["oh"], ext["ow"]) \
        and ext["oh"] * ext["ow"] % 4 == 0

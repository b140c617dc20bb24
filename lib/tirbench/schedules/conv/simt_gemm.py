"""fp32 convolution (and grouped fp16 NHWC) as an implicit GEMM on the GEMM ladder's v5 nest (``gemm_v5_warp_tiled``).

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
- Grouped (1 < groups < C): one GEMM per group, the group on blockIdx.y. NCHW float32 (``nchw_grouped_as_gemm``):
  rows the group's output channels, columns the pixels, as above. NHWC float16 (``nhwc_grouped_as_gemm``,
  ResNeXt's grouped 3x3s in fp16): rows the pixels, columns the group's K / groups output channels, k = (r, s, c) of
  the group; half operands in half shared tiles, fp32 accumulators, the workload's "cast" to half folded into the
  register write-back (4 halves a store where the rows allow). The filter's fill copies 4, 2 or 1 halves (8- or
  4-byte ``cp.async``; one half is a synchronous copy, cp.async has no 2-byte form), the transposed im2col tile's
  fill is element copies, synchronous for the same reason.

Any shape: where a tile does not divide GEMM M, N or K, the GEMM helper pads the block to the tiles
(``tirbench.schedules.common.padding``). The pad of A and B folds into their shared-memory fills, with im2col and the
convolution's zero padding: one predicate per copy (zero-filling ``cp.async``), which bounds k by R*S*C, so input
channels that no vector width divides (the 3-channel stem, 96-channel layers) are zero-padded in the fill, never
refused, and no copy of X is made. The crop folds into the register write-back, each store of Y predicated.
Compile with the pass config of ``records.NHWC_GEMM`` / ``records.NCHW_GEMM`` (cp.async).
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from tvm import s_tir
from tvm.tirx import IndexMap

from tirbench.schedules.common.checks import loop_extent
from tirbench.schedules.common.padding import pad_to_tiles, padded_extents
from tirbench.schedules.common.tiling import check_simt_tiles, has_block, simt_nest
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.conv.implicit_gemm import (default_channel_block, inline_im2col, pixel_index,
                                                  reindex_channels_last)
from tirbench.schedules.gemm.simt import gemm_v5_warp_tiled


def _require_float32(sch: s_tir.Schedule, layout: str) -> None:
    if has_block(sch, "cast"):
        raise ValueError(f"this schedule takes float32 inputs: use conv2d(..., layout='{layout}', dtype='float32')")


def output_copy(sch: s_tir.Schedule) -> str:
    """The output copy the reindexing makes (block and buffer): "Y_reindex", or "Yacc_reindex" where the
    convolution accumulates into ``Yacc`` for an epilogue (``workloads.conv2d(..., bias=True)``)."""
    return "Yacc_reindex" if has_block(sch, "Yacc_reindex") else "Y_reindex"


def nchw_as_gemm(sch: s_tir.Schedule) -> s_tir.Schedule:
    """Reindex the NCHW float32 convolution's block "conv" into a GEMM block (loops: output channel, (image, pixel),
    (c, r, s); see the module docstring), the output copy (``output_copy``) into the same (m, n) order."""
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
    sch.transform_block_layout(sch.get_sblock(output_copy(sch)), lambda b, f, y, x: (f, column(b, y, x)))
    return sch


def groups_of(sch: s_tir.Schedule, layout: str = "NCHW") -> int:
    """The groups of an NCHW (or NHWC) convolution's block "conv": input channels over the channels each output
    reads."""
    blk, ext = conv_block(sch, layout)
    return int(sch.get(blk).reads[0].source.shape[1 if layout == "NCHW" else 3]) // ext["c"]


#: The grouped NCHW "conv" block's variables once the output channel is split into (group, channel in group).
_GROUPED_VARS = ("g", "j", "b", "y", "x", "rc", "ry", "rx")


def _access_axes(sch: s_tir.Schedule, blk: s_tir.SBlockRV, buffer: str,
                 var_names: tuple[str, ...] = _GROUPED_VARS) -> list[str]:
    """The block variables (by ``var_names`` name) that index ``buffer`` in ``blk``, in order: a reindexed
    buffer's axes (TVM leaves out the variables an access does not use, such as 1-wide ones)."""
    block = sch.get(blk)
    names = {v.var.name: name for v, name in zip(block.iter_vars, var_names)}
    region = next(r for r in (*block.reads, *block.writes) if r.source.name == buffer)
    return [names[str(axis.min)] for axis in region.region]


def nchw_grouped_as_gemm(sch: s_tir.Schedule) -> s_tir.Schedule:
    """Reindex the grouped NCHW float32 convolution's block "conv" into a batched GEMM block, one GEMM per group
    (loops: group, output channel in group, (image, pixel), (c, r, s) of the group), A = the group's filter rows, B
    = the im2col of the group's input channels, C = the group's output channels; the output copy (``output_copy``)
    into the same (group, m, n) order. A group of one output channel is refused in one line."""
    blk, ext = conv_block(sch, "NCHW")
    _require_float32(sch, "NCHW")
    groups, (r, s) = groups_of(sch), (ext["r"], ext["s"])
    kg = ext["k"] // groups
    if kg == 1 or ((ext["oh"] == 1 or ext["ow"] == 1) and r * s > 1):
        raise ValueError(f"the grouped NCHW implicit GEMM takes at least 2 output channels per group and an output "
                         f"of at least 2x2 pixels under a window; this layer has {kg} and {ext['oh']}x{ext['ow']}")
    column = pixel_index(ext)
    widths = {"rc": ext["c"], "ry": r, "rx": s}

    def k_index(at):   # (c, r, s) of the group; a 1-wide axis gets no term (TVM's bijectivity check trips on it)
        return sum((at.get(a, 0) * {"rc": r * s, "ry": s, "rx": 1}[a] for a in widths if widths[a] > 1), 0)

    sch.transform_block_layout(blk, lambda b, f, y, x, rc, ry, rx: (f // kg, f % kg, b, y, x, rc, ry, rx))
    for operand in (("read", 0), ("read", 1), ("write", 0)):
        sch.reindex(blk, operand)
    out = output_copy(sch)
    axes = {name: _access_axes(sch, blk, name) for name in ("Xp_reindex", "W_reindex", out)}
    sch.transform_block_layout(blk, lambda g, j, b, y, x, rc, ry, rx: (
        g, j, column(b, y, x), k_index({"rc": rc, "ry": ry, "rx": rx})))

    gemm_index = functools.partial(_group_gemm_index, axes, k_index, column)
    return _lay_out_batched_gemm(sch, blk, out, gemm_index, ("g", "k", "pixel"), ("g", "j", "k"), ("g", "j", "pixel"))


def _lay_out_batched_gemm(sch: s_tir.Schedule, blk, out: str, gemm_index: Callable[..., IndexMap],
                          x_axes: tuple[str, ...], w_axes: tuple[str, ...], y_axes: tuple[str, ...]) -> s_tir.Schedule:
    """The reindexed input, filter and output of ``blk`` (and the output copy ``out``) laid out on the batched GEMM's
    axes (``gemm_index``), each operand in the order given."""
    sch.transform_layout(blk, ("read", 0), gemm_index("Xp_reindex", *x_axes))
    sch.transform_layout(blk, ("read", 1), gemm_index("W_reindex", *w_axes))
    sch.transform_layout(blk, ("write", 0), gemm_index(out, *y_axes))
    sch.transform_block_layout(sch.get_sblock(out), gemm_index(out, *y_axes))
    return sch


def _group_gemm_index(axes: dict[str, list[str]], k_index: Callable[[dict], object], pixel: Callable[..., object],
                      name: str, *rows_cols: str) -> IndexMap:
    """The map from buffer ``name``'s reindexed axes (``axes[name]``: block variable names) to its batched-GEMM
    axes ``rows_cols``: "g" the group, "j" the output channel in it, "k" the reduction (``k_index``), "pixel" the
    output pixel (``pixel(b, y, x)``)."""
    def index(*dims):
        at = dict(zip(axes[name], dims))
        pick = {"g": lambda: at.get("g", 0), "j": lambda: at.get("j", 0), "k": lambda: k_index(at),
                "pixel": lambda: pixel(at.get("b", 0), at.get("y", 0), at.get("x", 0))}
        return tuple(pick[axis]() for axis in rows_cols)
    return IndexMap.from_func(index, ndim=len(axes[name]), index_dtype="int32")


def nhwc_as_gemm(sch: s_tir.Schedule, *, channel_block: int) -> s_tir.Schedule:
    """Reindex the NHWC float32 convolution's block "conv" into a GEMM block (loops: pixel, output channel, k; see
    ``implicit_gemm``), the output copy (``output_copy``) into the same (m, n) order."""
    blk, ext = conv_block(sch, "NHWC")
    _require_float32(sch, "NHWC")
    reindex_channels_last(sch, blk, ext, channel_block=channel_block, filter_nk=False)
    sch.transform_block_layout(sch.get_sblock(output_copy(sch)), lambda b, y, x, f: (pixel_index(ext)(b, y, x), f))
    return sch


#: The grouped NHWC "conv" block's variables once the output channel is split into (group, channel in group).
_NHWC_GROUPED_VARS = ("g", "b", "y", "x", "j", "ry", "rx", "rc")


def nhwc_grouped_as_gemm(sch: s_tir.Schedule) -> s_tir.Schedule:
    """Reindex the grouped NHWC float16 convolution's block "conv" into a batched GEMM block, one GEMM per group
    (loops: group, output pixel, output channel in group, (r, s, c) of the group), A = the im2col of the group's
    input channels, B = the group's filter columns, C = the group's output channels (fp32 accumulators); the "cast"
    to half is folded into the output copy (``output_copy``), put in the same (group, m, n) order. A group of one
    output channel is refused in one line."""
    blk, ext = conv_block(sch, "NHWC")
    if not has_block(sch, "cast"):
        raise ValueError("this schedule takes float16 inputs: use conv2d(..., layout='NHWC', dtype='float16')")
    groups = groups_of(sch, "NHWC")
    r, s, kg = ext["r"], ext["s"], ext["k"] // groups
    if groups == 1 or kg == 1 or ((ext["oh"] == 1 or ext["ow"] == 1) and r * s > 1):
        raise ValueError(f"the grouped NHWC implicit GEMM takes groups > 1, at least 2 output channels per group and "
                         f"an output of at least 2x2 pixels under a window; this layer has groups {groups}, {kg} "
                         f"output channels a group and {ext['oh']}x{ext['ow']} pixels")
    channels_last_groups_as_gemm(sch, blk, ext, per_group=kg, fold="cast", filter_nk=False)
    return sch


def channels_last_groups_as_gemm(sch: s_tir.Schedule, blk: s_tir.SBlockRV, ext: dict[str, int], *, per_group: int,
                                 fold: str, filter_nk: bool) -> str:
    """Reindex a channels-last "conv" block (loops b, y, x, f, r, s, c; ``ext``: their extents, c a group's input
    channels) into a batched GEMM block of ``per_group`` output channels a GEMM (loops: group, output pixel, output
    channel in the group, k = (r, s, c)), A = the im2col of the group's channels [pixel, k], B = its filter [k, j]
    (``filter_nk``: [j, k]), C [pixel, j]; block ``fold`` (the cast or the int8 epilogue) folded into the output copy,
    put in the same (group, pixel, j) order. Returns the output copy's name (``output_copy``). Shared by the grouped
    fp16 NHWC GEMMs (``nhwc_grouped_as_gemm``) and the int8 one per lane group (``conv.int8``)."""
    r, s = ext["r"], ext["s"]
    column = pixel_index(ext)
    widths = {"ry": r, "rx": s, "rc": ext["c"]}
    strides = {"ry": s * ext["c"], "rx": ext["c"], "rc": 1}

    def k_index(at):   # (r, s, c) of the group; a 1-wide axis gets no term (TVM's bijectivity check trips on it)
        return sum((at.get(a, 0) * strides[a] for a in widths if widths[a] > 1), 0)

    sch.transform_block_layout(blk, lambda b, y, x, f, ry, rx, rc: (
        f // per_group, b, y, x, f % per_group, ry, rx, rc))
    for operand in (("read", 0), ("read", 1), ("write", 0)):
        sch.reindex(blk, operand)
    sch.reverse_compute_inline(sch.get_sblock(fold))
    out = output_copy(sch)
    axes = {name: _access_axes(sch, blk, name, _NHWC_GROUPED_VARS) for name in ("Xp_reindex", "W_reindex", out)}
    sch.transform_block_layout(blk, lambda g, b, y, x, j, ry, rx, rc: (
        g, column(b, y, x), j, k_index({"ry": ry, "rx": rx, "rc": rc})))
    gemm_index = functools.partial(_group_gemm_index, axes, k_index, column)
    _lay_out_batched_gemm(sch, blk, out, gemm_index, ("g", "pixel", "k"), ("g", "j", "k") if filter_nk else
                          ("g", "k", "j"), ("g", "pixel", "j"))
    return out


def _finish(sch: s_tir.Schedule) -> s_tir.Schedule:
    """After the GEMM helper: im2col, the filter reshape and the padding into the shared fills, the output copy
    into the register write-back (Y stored straight from registers)."""
    inline_im2col(sch)
    sch.reverse_compute_inline(sch.get_sblock(output_copy(sch)))
    return sch


def conv2d_nhwc_implicit_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                              warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                              tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                              columns_outer: bool = False, channel_block: int | None = None,
                              async_copy: bool = True) -> s_tir.Schedule:
    """The NHWC fp32 convolution as a GEMM (rows: output pixels, columns: output channels) through the v5 nest.

    Tiles, warps, ``stages``, ``raster``, ``prefetch``, ``columns_outer`` and ``async_copy`` mean what they mean for
    ``gemm_v5_warp_tiled``; any shape (see the module docstring). ``channel_block`` (default ``tile_k`` where it
    divides C, else C) orders k as in ``implicit_gemm``; an explicit one must divide C."""
    nhwc_as_gemm(sch, channel_block=default_channel_block(sch, tile_k, channel_block))
    gemm_v5_warp_tiled(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                       stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch,
                       columns_outer=columns_outer, block="conv")
    return _finish(sch)


def conv2d_nchw_implicit_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                              warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                              tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                              columns_outer: bool = False, async_copy: bool = True) -> s_tir.Schedule:
    """The NCHW fp32 convolution as a GEMM (rows: output channels, columns: (image, output pixel)) through the v5
    nest. Parameters as for ``gemm_v5_warp_tiled``; any shape (see the module docstring)."""
    b_fill_vector = 4 if _b_is_x(sch) else 1
    tiles = {"block_tile": block_tile, "warp_tile": warp_tile, "thread_tile": thread_tile, "tile_k": tile_k,
             "stages": stages, "raster": raster, "prefetch": prefetch, "columns_outer": columns_outer,
             "async_copy": async_copy}
    if groups_of(sch) > 1:
        nchw_grouped_as_gemm(sch)
        _batched_v5(sch, b_fill_vector=b_fill_vector, **tiles)
    else:
        nchw_as_gemm(sch)
        gemm_v5_warp_tiled(sch, block="conv", a_read=1, b_fill_vector=b_fill_vector, **tiles)
    return _finish(sch)


def conv2d_nhwc_grouped_gemm(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 16),
                             warp_tile: tuple[int, int] = (64, 16), thread_tile: tuple[int, int] = (8, 4),
                             tile_k: int = 16, stages: int = 3, raster: int = 1, prefetch: str = "none",
                             columns_outer: bool = False, async_copy: bool = True) -> s_tir.Schedule:
    """The grouped NHWC fp16 convolution as a batched GEMM through the v5 nest (``nhwc_grouped_as_gemm``; rows: output
    pixels, columns: a group's output channels, the group on blockIdx.y), fp32 accumulators rounded to half in the
    register write-back. Parameters as for ``gemm_v5_warp_tiled``; any shape and window (see the module docstring).
    The filter's fill copies 4 halves at a time where a group's output channels are a multiple of 4 (8-byte
    ``cp.async``), else 2 or 1."""
    nhwc_grouped_as_gemm(sch)
    kg = loop_extent(sch, sch.get_loops(sch.get_sblock("conv"))[2])   # loops: group, pixel, channel in group, k
    _batched_v5(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                stages=stages, raster=raster, prefetch=prefetch, columns_outer=columns_outer, async_copy=async_copy,
                b_fill_vector=next(v for v in (4, 2, 1) if kg % v == 0), a_read=0, axes=_NHWC_GROUPED_AXES)
    return _finish(sch)


#: The batched GEMM's axes as ``check_simt_tiles`` names them: NCHW's rows are a group's output channels, NHWC's
#: the pixels.
_NCHW_GROUPED_AXES = ("k / groups (output channels of a group)", "n * oh * ow (pixels)", "c / groups * r * s")
_NHWC_GROUPED_AXES = ("n * oh * ow (pixels)", "k / groups (output channels of a group)", "r * s * c / groups")


def _batched_v5(sch: s_tir.Schedule, *, block_tile: tuple[int, int], warp_tile: tuple[int, int],
                thread_tile: tuple[int, int], tile_k: int, stages: int, raster: int, prefetch: str,
                columns_outer: bool, async_copy: bool, b_fill_vector: int, a_read: int = 1,
                axes: tuple[str, str, str] = _NCHW_GROUPED_AXES) -> None:
    """``gemm_v5_warp_tiled`` on the batched GEMM block "conv" (loops: group, m, n, k; ``a_read``: which read is A,
    1 where B is multiplied by A), the group on blockIdx.y (as Winograd's batched GEMM)."""
    tiles = (*block_tile, tile_k)
    extents = padded_extents(sch, "conv", tiles, ("block_tile[0]", "block_tile[1]", "tile_k"))
    threads = check_simt_tiles(extents, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile,
                               tile_k=tile_k, vector=4, stages=stages, raster=raster, prefetch=prefetch, axes=axes)
    padding = pad_to_tiles(sch, "conv", tiles)
    (bm, bn), (wm, wn), (tm, tn) = block_tile, warp_tile, thread_tile
    blk = sch.get_sblock("conv")
    g, i, j, kk = sch.get_loops(blk)
    sch.bind(g, "blockIdx.y")
    rows = sch.split(i, factors=[None, bm // wm, wm // tm, tm])
    cols = sch.split(j, factors=[None, bn // wn, wn // tn, tn])
    simt_nest(sch, blk, rows=rows, cols=cols, k_loops=sch.split(kk, factors=[None, tile_k]), threads=threads,
              vector=4, fragments=True, stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch,
              columns_outer=columns_outer, a_read=a_read, b_fill_vector=b_fill_vector)
    padding.store_direct(sch)


def _b_is_x(sch: s_tir.Schedule) -> bool:
    """Whether the NCHW layer's im2col B is X itself, in rows of whole 16-byte vectors: a 1x1 stride-1 layer with
    OH * OW a multiple of 4. Only then are four consecutive columns of B four consecutive, 16-byte aligned floats of
    X. (Elsewhere TVM may still prove them a vector, and emit a 16-byte cp.async from a misaligned or strided
    address: a shifted window with no padding predicate, stride 2, one pixel per image.)"""
    blk, ext = conv_block(sch, "NCHW")
    xp = sch.get(blk).reads[0].source.shape
    return ext["r"] == ext["s"] == 1 and (int(xp[2]), int(xp[3])) == (ext["oh"], ext["ow"]) \
        and ext["oh"] * ext["ow"] % 4 == 0

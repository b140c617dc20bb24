"""int8 convolution on tensor cores: the NC/32HW32 ``conv2d_int8`` as an implicit GEMM (``conv2d_as_gemm``) on the
GEMM ladder's int8 helpers (ldmatrix + mma.sync m16n8k32, Hopper integer wgmma), with the fused epilogue (bias, scale,
rounding, residual, ReLU, saturation) applied per thread as the int32 tile leaves shared memory.

A grouped layer whose groups lie within 32-lane groups (C = K; ResNeXt's 4 to 32 channels a group), its filter
stored (K, R, S, 32) (``conv2d_int8(..., filter_layout="KRS32")``: each output channel's taps over its whole lane group,
zero outside its group), is a batched implicit GEMM, one per lane group (``int8_grouped_as_gemm``, the lane group on
blockIdx.y): rows the pixels, columns the lane group's 32 output channels, k = (r, s, lane), so a k tile of 32 is one
tap's 32 contiguous bytes of one pixel. It multiplies the zeros of the other groups too (32 / (C / groups) times the
layer's work: 2x at 16 channels a group), where the SIMT stencil multiplies only the group's channels.

A layer of at most 4 input channels with its filter stored (K, R, S8, 4) (``conv2d_int8(..., filter_layout="KRS8C4")``,
the RGB stem) reduces over R * S8 * 4 values: a k tile of 32 is one kernel row, 8 taps of 4 lanes, and the im2col
fill copies 4 bytes (the first 4 lanes of a pixel) per tap with zero-filling ``cp.async`` (``gemm_mma_int8``'s
``a_copy``), instead of a k tile of 32 lanes per tap of which 29 are zero.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.padding import C_ROW_PAD
from tirbench.schedules.common.tiling import WARP, require_multiple, warps_of
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.conv.implicit_gemm import conv2d_as_gemm, fill_through_l1, inline_im2col, input_fill_block
from tirbench.schedules.conv.simt_gemm import channels_last_groups_as_gemm
from tirbench.schedules.gemm.tensorcore import gemm_mma_int8, gemm_wmma_int8
from tirbench.schedules.intrinsics import mma_int8
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma
from tirbench.workloads.conv2d_int8 import LANES, NARROW_LANES, filter_layout_of

#: int8 channels per thread in the epilogue: 16 int32 accumulators (four 16-byte shared-memory loads) -> one
#: 16-byte store of Y (half of a pixel's 32-channel group).
INT8_VECTOR = 16


def _finish_int8(sch: s_tir.Schedule, *, warps: int, bn: int, batch: bool = False) -> s_tir.Schedule:
    """``finish_implicit_gemm`` for the int8 kernels: the epilogue (bias, scale, rounding, residual, ReLU, saturation)
    per thread on ``INT8_VECTOR`` channels of one pixel per pass, its memory traffic in registers. Before its passes a
    thread loads its channels' bias and scale once (16-byte loads); per pass (unrolled, so the residual loads overlap)
    C's int32 values come in four 16-byte shared loads, the residual in one 16-byte load and Y leaves in one 16-byte
    store; only the arithmetic is scalar (TVM's vectoriser leaves a loop that calls ``nearbyint`` scalar, loads and
    stores included). C's shared rows are padded by 8 values so the accumulators' stores do not collide in one bank
    group.

    A pixel takes ``bn`` / 16 threads (``bn``: the block tile's columns). Where the tile pads M or N, Y's 16-byte copy
    stores only real pixels and channels: it is made while its domain is still Y's, and a thread's pixel and channels
    (an idle thread's too) lie past Y exactly where they are not real, so the copy is predicated there. (Made later,
    it took its domain from the epilogue's region without the epilogue's predicate, and with a pixel's threads
    counted from the layer's channels the idle ones mapped onto the next pass's pixels: both wrote past Y or over
    other threads' values.) ``batch``: a batched GEMM's C (``int8_grouped_as_gemm``), the batch on blockIdx.y."""
    inline_im2col(sch)
    _pad_c_rows(sch)
    out = sch.get_sblock("Yacc_reindex")
    store = sch.cache_write(out, 0, "local")  # Y's copy, made while its domain is Y's (see the docstring)
    sch.reverse_compute_at(out, sch.get_loops(input_fill_block(sch))[int(batch)])
    m, n = sch.get_loops(out)[1 + int(batch):]
    per_row = bn // INT8_VECTOR  # a pixel's threads: the block tile's (a layer of fewer channels leaves some idle)
    mo, mt = sch.split(m, factors=[None, warps * WARP // per_row])  # a pass covers warps * 32 / per_row pixels
    nt, vec = sch.split(n, factors=[per_row, INT8_VECTOR])
    sch.reorder(mt, nt, mo, vec)
    ty, tx = sch.split(sch.fuse(mt, nt), factors=[warps, WARP])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    for idx, buf in enumerate([r.source.name for r in sch.get(out).reads]):  # C (shared), bias, scale, residual
        reg = sch.cache_read(out, idx, "local")
        sch.compute_at(reg, tx if buf in ("Bias", "Scale") else mo)  # per channel: once; per pixel: per pass
        _pixel_registers(sch, reg, "write")
        lanes = 128 // sch.get(reg).writes[0].source.dtype.bits  # values per 16-byte load
        sch.vectorize(sch.split(sch.get_loops(reg)[-1], factors=[None, lanes])[1])
    sch.reverse_compute_at(store, mo)
    _pixel_registers(sch, out, "write")  # after the copy out is placed: its region comes from Y's layout
    sch.vectorize(sch.get_loops(store)[-1])
    sch.unroll(vec)
    sch.unroll(mo)  # the passes' residual loads can then all be in flight at once
    return sch


def _pad_c_rows(sch: s_tir.Schedule) -> None:
    """Give the shared int32 C tile rows of bn + ``C_ROW_PAD`` values (as the padded GEMMs' C tile): a warp's
    accumulator stores (8 rows of 32 bytes) then fill all 32 banks twice instead of the same 8 banks eight times."""
    store, = sch.get_producers(sch.get_sblock("Yacc_reindex"))  # the accumulators' store into shared C
    rank = len(sch.get(store).writes[0].source.shape)   # 3 in a batched GEMM
    sch.storage_align(store, 0, axis=rank - 2, factor=32, offset=C_ROW_PAD)


def _pixel_registers(sch: s_tir.Schedule, block: s_tir.SBlockRV, side: str) -> None:
    """Index a thread's register copy of an NC/32HW32 tensor (one pixel, ``INT8_VECTOR`` channels) by channel alone.

    TVM cannot always shrink such a copy to the thread's values by itself (the pixel's (n, y, x) comes from GEMM_M
    through divisions; at 56x56 it kept the whole tensor per thread), so the copy is given the layout
    channel % INT8_VECTOR. That map is not injective over the tensor, which TVM cannot check; it is per thread, where
    one pixel and ``INT8_VECTOR`` aligned channels are live at a time."""
    buf = (sch.get(block).writes if side == "write" else sch.get(block).reads)[0].source
    if len(buf.shape) == 5:
        sch.transform_layout(block, (side, 0), lambda b, g, y, x, lane: (lane % INT8_VECTOR,),
                             assume_injective_transform=True)


def _require_int8_epilogue(block_tile: tuple[int, int], warps: int) -> None:
    bm, bn = block_tile
    per_row = bn // INT8_VECTOR  # threads that share one output pixel
    if bn % INT8_VECTOR or (warps * WARP) % per_row or bm % (warps * WARP // per_row):
        raise ValueError(f"block_tile={block_tile}: the int8 epilogue gives each of {warps * WARP} threads "
                         f"{INT8_VECTOR} channels of one pixel, so bn must be a multiple of {INT8_VECTOR}, "
                         f"bn / {INT8_VECTOR} must divide {warps * WARP} and bm a multiple of the rows one pass covers")


def conv2d_int8_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                    warp_tile: tuple[int, int] = (64, 64), tile_k: int = 64, stages: int = 3,
                    raster: int = 1, l1_fill: bool = False) -> s_tir.Schedule:
    """The int8 NC/32HW32 implicit GEMM on ldmatrix + mma.sync m16n8k32: ``gemm_mma_int8`` (swizzled shared tiles,
    a ``stages``-deep cp.async pipeline) on the reindexed ``conv2d_int8``, its epilogue (bias, residual, ReLU,
    requantisation) applied as the int32 tile leaves shared memory. ``l1_fill``: the im2col fills cache in L1
    (``fill_through_l1``). A ``"KRS8C4"`` filter (module docstring): 4-lane channel blocks and 4-byte im2col copies,
    which cache in L1 whatever ``l1_fill`` says."""
    narrow = filter_layout_of(sch.mod) == "KRS8C4"
    conv2d_as_gemm(sch, channel_block=NARROW_LANES if narrow else tile_k)
    warps = warps_of(block_tile, warp_tile)
    _require_int8_epilogue(block_tile, warps)
    gemm_mma_int8(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                  block="conv", a_copy=NARROW_LANES if narrow else mma_int8.CHUNK)
    fill_through_l1(sch, l1_fill)
    return _finish_int8(sch, warps=warps, bn=block_tile[1])


def conv2d_int8_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), tile_k: int = 128,
                      stages: int = 4, raster: int = 1, overlap: bool = False,
                      layout: str = "swizzle128", l1_fill: bool = False) -> s_tir.Schedule:
    """The int8 NC/32HW32 implicit GEMM on Hopper's warpgroup MMA (``wgmma ... .s32.s8.s8``): ``gemm_v8_wgmma`` on
    the reindexed ``conv2d_int8`` (swizzle128: 128-byte rows of k, ``tile_k`` = 128; ``"interleaved"`` for 64
    channels), its epilogue applied as the int32 tile leaves shared memory. ``l1_fill``: the im2col fills cache in
    L1 (``fill_through_l1``)."""
    if filter_layout_of(sch.mod) == "KRS8C4":
        raise ValueError("the int8 wgmma kernel reads 16-byte channel runs: a 'KRS8C4' filter (4 lanes per tap) "
                         "takes conv2d_int8_mma")
    conv2d_as_gemm(sch, channel_block=tile_k)
    warps = block_tile[0] // 16
    _require_int8_epilogue(block_tile, warps)
    gemm_v8_wgmma(sch, block_tile=block_tile, tile_k=tile_k, stages=stages, raster=raster, layout=layout,
                  overlap=overlap, block="conv")
    fill_through_l1(sch, l1_fill)
    return _finish_int8(sch, warps=warps, bn=block_tile[1])


def conv2d_int8_wmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (64, 64),
                     warp_tile: tuple[int, int] = (32, 32), tile_k: int = 32) -> s_tir.Schedule:
    """The int8 NC/32HW32 implicit GEMM on wmma m16n16k16 s8 fragments: ``gemm_wmma_int8`` (synchronous copies into
    16-byte k panels, the next k tile prefetched into registers) on the reindexed ``conv2d_int8``, its epilogue
    applied as the int32 tile leaves shared memory. Turing's (sm_75) int8 kernel: no cp.async, no mma.sync
    m16n8k32."""
    if filter_layout_of(sch.mod) == "KRS8C4":
        raise ValueError("the int8 wmma kernel reads 16-byte channel runs: a 'KRS8C4' filter (4 lanes per tap) "
                         "takes conv2d_int8_mma")
    conv2d_as_gemm(sch, channel_block=tile_k)
    warps = warps_of(block_tile, warp_tile)
    _require_int8_epilogue(block_tile, warps)
    gemm_wmma_int8(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, block="conv")
    return _finish_int8(sch, warps=warps, bn=block_tile[1])


def int8_grouped_as_gemm(sch: s_tir.Schedule) -> s_tir.Schedule:
    """Reindex the grouped int8 convolution with a ``"KRS32"`` filter into a batched GEMM block, one GEMM per 32-lane
    group (loops: lane group, output pixel, output channel in the lane group, k = (r, s, lane)), A = the im2col of
    the lane group's input lanes, B = its filter rows [32, k] (k-contiguous, as stored), C = int32 accumulators in
    shared memory; the epilogue folded into the output copy ("Yacc_reindex"), in (lane group, pixel, channel)
    order. Any other filter, or an output of one row or column under a window, is refused in one line."""
    if filter_layout_of(sch.mod) != "KRS32":
        raise ValueError("the grouped int8 tensor-core kernel reads a filter packed per lane group: "
                         "conv2d_int8(..., groups=G, filter_layout='KRS32')")
    blk, ext = conv_block(sch, "NCHW32")
    r, s = ext["r"], ext["s"]
    if (ext["oh"] == 1 or ext["ow"] == 1) and r * s > 1:   # TVM's im2col reindex drops the 1-wide output axis
        raise ValueError(f"an output of {ext['oh']}x{ext['ow']} pixels under a {r}x{s} kernel is not taken by the "
                         "grouped int8 implicit GEMM")
    channels_last_groups_as_gemm(sch, blk, ext, per_group=LANES, fold="epilogue", filter_nk=True)
    sch.set_scope(blk, 0, "shared.dyn")
    return sch


def conv2d_int8_grouped_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (64, 32),
                            warp_tile: tuple[int, int] = (32, 32), tile_k: int = 32, stages: int = 4,
                            raster: int = 1) -> s_tir.Schedule:
    """The grouped int8 NC/32HW32 convolution (``"KRS32"`` filter) as a batched implicit GEMM on ldmatrix +
    mma.sync m16n8k32 (module docstring): ``gemm_mma_int8`` on ``int8_grouped_as_gemm``'s block, k tiles of
    ``tile_k`` (a multiple of 32: whole taps of 32 lanes, 16-byte im2col fills), the lane group on blockIdx.y, the
    epilogue as ``conv2d_int8_mma``'s. ``block_tile``: (output pixels, output channels of the lane group: 32 or 16)
    a block."""
    int8_grouped_as_gemm(sch)
    warps = warps_of(block_tile, warp_tile)
    _require_int8_epilogue(block_tile, warps)
    require_multiple(tile_k, LANES, param="tile_k")
    gemm_mma_int8(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                  block="conv", batch=True)
    return _finish_int8(sch, warps=warps, bn=block_tile[1], batch=True)

"""fp16 tensor-core convolution: the NHWC convolution as an implicit GEMM on the GEMM ladder's tensor-core rungs.

``conv2d_as_gemm`` reindexes the ``"conv"`` block of ``conv2d(..., layout="NHWC", dtype="float16")`` into a GEMM
block, C[m, n] += A[m, k] * B[k, n] with

- m = (image, output row, output column): GEMM_M = N * OH * OW, the output pixels (Y is [GEMM_M, K] in memory);
- n = output channel: GEMM_N = K;
- k = (kernel row, input-channel block, kernel column, channel in block): GEMM_K = R * S * C.

A is the im2col matrix of the input and is never stored: once a helper has cached A's tile in shared memory,
``_finish`` inlines the reindexing (and the zero padding) into that copy, so each shared-memory fill reads the input
pixels straight from X, with a zero-fill predicate where the window hangs over the border. B is the filter (R, S, C,
K) read as rows of k. The order of k keeps that fill fast: a ``channel_block`` equal to the helper's k tile makes
every k tile one (kernel row, channel block, kernel column) with its channels contiguous, and puts the kernel row
and column outside every division TVM's vectorizer must see through. (With the plain (row, column, channel) order,
TVM cannot prove that the padding predicate is the same for 8 consecutive channels and falls back to 2-byte loads.)

C lives in shared memory: the helper's accumulators are stored there, and the epilogue rounds them to half and
writes 16-byte rows of Y (the block tile's rows are output pixels, contiguous in NHWC). TVM reuses the pipeline's
shared memory for it.
"""
from __future__ import annotations

from typing import Any, Callable

from tvm import s_tir
from tvm.tirx import IndexMap

from tirbench import lowering

from tirbench.schedules.checks import require_divides
from tirbench.schedules.conv2d import _conv_block
from tirbench.schedules.gemm_tensorcore import MMA_ASYNC_CONFIG, gemm_mma_int8, gemm_v7_mma, gemm_v8_wgmma
from tirbench.schedules.padding import C_ROW_PAD
from tirbench.schedules.tiling import WARP, has_block, pipeline, split_tile

#: Halves per 16-byte copy.
VECTOR = 8


def conv2d_as_gemm(sch: s_tir.Schedule, *, channel_block: int) -> s_tir.Schedule:
    """Reindex the tensor-core convolution's block "conv" into a GEMM block (loops m, n, k; see the module docstring).

    Two workloads: the NHWC float16 ``conv2d`` (B is [K, N]: C[m, n] += A[m, k] * B[k, n]) and the NC/32HW32 int8
    ``conv2d_int8`` (B is [N, K], the filter's own k-contiguous order: C[m, n] += A[m, k] * B[n, k], what
    ``mma.sync``'s int8 operands need). After this, ``gemm_block(sch, "conv")`` finds it, and the GEMM helpers take
    ``block="conv"``. The output copy (block "Yacc_reindex", which takes in the "cast" or "epilogue" block) is put
    in (m, n) order too, and C in shared memory. The GEMM helpers then take any m (pixels) and n (output channels):
    where their tiles do not divide, the block is padded to them (``tirbench.schedules.padding``), the pad folds into
    the im2col fills (predicated, zero-filling ``cp.async``) and the crop into the output copy, which stores only the
    real pixels and channels. k's tile must divide the input channels (``channel_block``).
    """
    int8 = has_block(sch, "epilogue")
    blk, ext = _conv_block(sch, "NCHW32" if int8 else "NHWC")
    if not int8 and not has_block(sch, "cast"):
        raise ValueError("tensor-core convolutions take float16 inputs: use conv2d(..., layout='NHWC', "
                         "dtype='float16')")
    r, s, c, oh, ow = ext["r"], ext["s"], ext["c"], ext["oh"], ext["ow"]
    require_divides(c, channel_block, param="channel_block (the k tile)", axis="c (input channels)")
    cb = channel_block

    def pixel(b, y, x):
        return b * oh * ow + y * ow + x

    def k_index(ry, rx, rc):  # a 1-wide kernel axis gets no term (TVM's bijectivity check trips on it)
        return (ry * (c * s) if r > 1 else 0) + (rc // cb) * (s * cb) + (rx * cb if s > 1 else 0) + rc % cb

    sch.reindex(blk, ("read", 0))
    sch.reindex(blk, ("read", 1))
    sch.reindex(blk, ("write", 0))
    sch.transform_block_layout(blk, lambda b, y, x, f, ry, rx, rc: (pixel(b, y, x), f, k_index(ry, rx, rc)))

    def a_index(b, y, x, *taps_and_channel):  # the im2col buffer: TVM leaves out 1-wide kernel axes
        *taps, rc = taps_and_channel
        at = dict(zip([axis for axis, width in (("ry", r), ("rx", s)) if width > 1 or len(taps) == 2], taps))
        return pixel(b, y, x), k_index(at.get("ry", 0), at.get("rx", 0), rc)

    ndim = len(sch.get(blk).reads[0].source.shape)
    sch.transform_layout(blk, ("read", 0), IndexMap.from_func(a_index, ndim=ndim, index_dtype="int32"))
    if int8:
        sch.transform_layout(blk, ("read", 1), lambda f, ry, rx, rc: (f, k_index(ry, rx, rc)))
    else:
        sch.transform_layout(blk, ("read", 1), lambda f, ry, rx, rc: (k_index(ry, rx, rc), f))
    sch.transform_layout(blk, ("write", 0), lambda b, y, x, f: (pixel(b, y, x), f))
    sch.reverse_compute_inline(sch.get_sblock("epilogue" if int8 else "cast"))
    out = sch.get_sblock("Yacc_reindex")
    sch.transform_block_layout(out, lambda b, y, x, f: (pixel(b, y, x), f))
    sch.set_scope(blk, 0, "shared.dyn")
    return sch


def _inline_im2col(sch: s_tir.Schedule) -> None:
    """Once A and B are cached in shared memory: inline im2col, the filter reshape and the padding into the fills."""
    for name in ("Xp_reindex_reindex", "W_reindex_reindex", "pad"):
        sch.compute_inline(sch.get_sblock(name))


def _input_fill(sch: s_tir.Schedule) -> s_tir.SBlockRV:
    """The block that fills the im2col tile in shared memory ("Xp_reindex_shared.dyn", or "Xp_reindex_pad_shared.dyn"
    where the GEMM helper padded M)."""
    for name in ("Xp_reindex_shared.dyn", "Xp_reindex_pad_shared.dyn"):
        if has_block(sch, name):
            return sch.get_sblock(name)
    raise RuntimeError("no im2col shared-memory fill: run a GEMM helper on conv2d_as_gemm's block first")


def _finish(sch: s_tir.Schedule, *, warps: int, vector: int = VECTOR) -> s_tir.Schedule:
    """After a GEMM helper: ``_inline_im2col``, and write the block tile of C (shared) to Y through the epilogue
    (half: 8 values, 16-byte stores; int8: 4 values, 16-byte loads of C), ``warps`` x 32 threads."""
    _inline_im2col(sch)
    out = sch.get_sblock("Yacc_reindex")
    sch.reverse_compute_at(out, sch.get_loops(_input_fill(sch))[0])
    _, ty, tx, vec = sch.split(sch.fuse(*sch.get_loops(out)[1:]), factors=[None, warps, WARP, vector])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return sch


def _l1_fill(sch: s_tir.Schedule, on: bool) -> None:
    """With ``on``: the input's (im2col) shared-memory fill copies through L1 (``cp.async.ca``, ``lowering.L1_FILL``).
    A 3x3 window reads each input row three times in three consecutive k tiles (the kernel columns), so L1 can serve
    two of them; the filter's fill is read once per block and stays ``.cg``."""
    if on:
        fill = sch.get_loops(_input_fill(sch))[-4]  # (copies, threadIdx.y, threadIdx.x, 16 B)
        sch.annotate(fill, lowering.L1_FILL, 1)


def _finish_int8(sch: s_tir.Schedule, *, warps: int) -> s_tir.Schedule:
    """``_finish`` for the int8 kernels: the epilogue (bias, scale, rounding, residual, ReLU, saturation) per thread on
    ``INT8_VECTOR`` channels of one pixel per pass, its memory traffic in registers. Before its passes a thread loads
    its channels' bias and scale once (16-byte loads); per pass (unrolled, so the residual loads overlap) C's int32
    values come in four 16-byte shared loads, the residual in one 16-byte load and Y leaves in one 16-byte store;
    only the arithmetic is scalar (TVM's vectoriser leaves a loop that calls ``nearbyint`` scalar, loads and stores
    included). C's shared rows are padded by 8 values so the accumulators' stores do not collide in one bank group."""
    _inline_im2col(sch)
    _pad_c_rows(sch)
    out = sch.get_sblock("Yacc_reindex")
    sch.reverse_compute_at(out, sch.get_loops(_input_fill(sch))[0])
    m, n = sch.get_loops(out)[1:]
    per_row = int(sch.get(n).extent) // INT8_VECTOR
    mo, mt = sch.split(m, factors=[None, warps * WARP // per_row])  # a pass covers warps * 32 / per_row pixels
    nt, vec = sch.split(n, factors=[None, INT8_VECTOR])
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
    store = sch.cache_write(out, 0, "local")
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
    sch.storage_align(store, 0, axis=0, factor=32, offset=C_ROW_PAD)


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


def _require_epilogue(block_tile: tuple[int, int], warps: int, vector: int = VECTOR) -> None:
    if block_tile[0] * block_tile[1] % (warps * WARP * vector):
        raise ValueError(f"block_tile={block_tile}: the epilogue gives each of {warps * WARP} threads the same "
                         f"number of {vector}-value rows, so bm * bn must be a multiple of {warps * WARP * vector}")


def _require_int8_epilogue(block_tile: tuple[int, int], warps: int) -> None:
    bm, bn = block_tile
    per_row = bn // INT8_VECTOR  # threads that share one output pixel
    if bn % INT8_VECTOR or (warps * WARP) % per_row or bm % (warps * WARP // per_row):
        raise ValueError(f"block_tile={block_tile}: the int8 epilogue gives each of {warps * WARP} threads "
                         f"{INT8_VECTOR} channels of one pixel, so bn must be a multiple of {INT8_VECTOR}, "
                         f"bn / {INT8_VECTOR} must divide {warps * WARP} and bm a multiple of the rows one pass covers")


def conv2d_nhwc_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), stages: int = 4,
                      raster: int = 1, overlap: bool = False) -> s_tir.Schedule:
    """The implicit GEMM on Hopper's warpgroup MMA: ``gemm_v8_wgmma`` (128-byte swizzled shared tiles of k = 64,
    a ``stages``-deep cp.async pipeline, one wgmma group per k tile) on the reindexed convolution."""
    conv2d_as_gemm(sch, channel_block=64)
    warps = block_tile[0] // 16
    _require_epilogue(block_tile, warps)
    gemm_v8_wgmma(sch, block_tile=block_tile, tile_k=64, stages=stages, raster=raster, overlap=overlap,
                  block="conv")
    return _finish(sch, warps=warps)


def conv2d_nhwc_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                    warp_tile: tuple[int, int] = (64, 64), tile_k: int = 32, stages: int = 3, raster: int = 1,
                    prefetch: str = "k_step") -> s_tir.Schedule:
    """The implicit GEMM on ldmatrix + mma.sync m16n8k16: ``gemm_v7_mma`` on the reindexed convolution."""
    conv2d_as_gemm(sch, channel_block=tile_k)
    warps = (block_tile[0] // warp_tile[0]) * (block_tile[1] // warp_tile[1])
    _require_epilogue(block_tile, warps)
    gemm_v7_mma(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                prefetch=prefetch, block="conv")
    return _finish(sch, warps=warps)


#: int8 channels per thread in the epilogue: 16 int32 accumulators (four 16-byte shared-memory loads) -> one
#: 16-byte store of Y (half of a pixel's 32-channel group).
INT8_VECTOR = 16


def conv2d_int8_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                    warp_tile: tuple[int, int] = (64, 64), tile_k: int = 64, stages: int = 3,
                    raster: int = 1, l1_fill: bool = False) -> s_tir.Schedule:
    """The int8 NC/32HW32 implicit GEMM on ldmatrix + mma.sync m16n8k32: ``gemm_mma_int8`` (swizzled shared tiles,
    a ``stages``-deep cp.async pipeline) on the reindexed ``conv2d_int8``, its epilogue (bias, residual, ReLU,
    requantisation) applied as the int32 tile leaves shared memory. ``l1_fill``: the im2col fills cache in L1
    (``_l1_fill``)."""
    conv2d_as_gemm(sch, channel_block=tile_k)
    warps = (block_tile[0] // warp_tile[0]) * (block_tile[1] // warp_tile[1])
    _require_int8_epilogue(block_tile, warps)
    gemm_mma_int8(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                  block="conv")
    _l1_fill(sch, l1_fill)
    return _finish_int8(sch, warps=warps)


def conv2d_int8_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), tile_k: int = 128,
                      stages: int = 4, raster: int = 1, overlap: bool = False,
                      layout: str = "swizzle128", l1_fill: bool = False) -> s_tir.Schedule:
    """The int8 NC/32HW32 implicit GEMM on Hopper's warpgroup MMA (``wgmma ... .s32.s8.s8``): ``gemm_v8_wgmma`` on
    the reindexed ``conv2d_int8`` (swizzle128: 128-byte rows of k, ``tile_k`` = 128; ``"interleaved"`` for 64
    channels), its epilogue applied as the int32 tile leaves shared memory. ``l1_fill``: the im2col fills cache in
    L1 (``_l1_fill``)."""
    conv2d_as_gemm(sch, channel_block=tile_k)
    warps = block_tile[0] // 16
    _require_int8_epilogue(block_tile, warps)
    gemm_v8_wgmma(sch, block_tile=block_tile, tile_k=tile_k, stages=stages, raster=raster, layout=layout,
                  overlap=overlap, block="conv")
    _l1_fill(sch, l1_fill)
    return _finish_int8(sch, warps=warps)


#: wmma fragment shapes on half inputs: rows (im) -> columns (in); k is 16. TVM registers only 16x16x16.
WMMA_FRAGMENTS = {8: 32, 16: 16, 32: 8}


def fragment_rows(gemm_m: int) -> tuple[int, ...]:
    """The shape-aware rule: the fragment heights GEMM_M admits (32 if it divides, then 16, 8 always)."""
    if gemm_m % 32 == 0:
        return 8, 16, 32
    if gemm_m % 16 == 0:
        return 8, 16
    return (8,)


def wmma_intrins(im: int) -> dict[str, str]:
    """Register (once) the wmma intrinsics of fragment m{im}n{in}k16 (fp16 in, fp32 accumulators, C stored to
    shared memory); return their names by role."""
    from tvm.s_tir import TensorIntrin
    from tvm.s_tir.tensor_intrin import cuda as tc

    n = WMMA_FRAGMENTS[im]
    shape = f"m{im}n{n}k16"
    made = {"load_a": lambda: tc.get_wmma_load_intrin(im, n, 16, "float16", "shared.dyn", False, False),
            "load_b": lambda: tc.get_wmma_load_intrin(im, n, 16, "float16", "shared.dyn", True, False),
            "compute": lambda: tc.get_wmma_sync_intrin(im, n, 16, "float16", "float32", False),
            "init": lambda: tc.get_wmma_fill_intrin(im, n, 16, "float32"),
            "store": lambda: tc.get_wmma_store_intrin(im, n, 16, "float32", "shared.dyn")}
    names = {}
    for role, make in made.items():
        names[role] = f"tirbench_wmma_{role}_{shape}_f16f32"
        if TensorIntrin.get(names[role], allow_missing=True) is None:
            TensorIntrin.register(names[role], *make())
    return names


def register_wmma_intrins() -> None:
    """Register every fragment shape's intrinsics (a tuned wmma trace names them when it is replayed)."""
    for im in WMMA_FRAGMENTS:
        wmma_intrins(im)


def _channel_block(c: int) -> int:
    """The k tile of the wmma space: the largest of 64, 32, 16 channels that divides ``c``."""
    for cb in (64, 32, 16):
        if c % cb == 0:
            return cb
    raise ValueError(f"c={c}: the wmma kernels need input channels in multiples of 16 (one fragment's k)")


def conv2d_wmma_design(sch: s_tir.Schedule, *, im: int) -> s_tir.Schedule:
    """The shape-aware wmma design for one fragment shape (m``im`` n``WMMA_FRAGMENTS[im]`` k16), tiles sampled.

    GEMM_M splits four ways (bm, tm, om, im) and GEMM_N four ways (bn, tn, on, in), GEMM_K two ways (ok, ik):
    ``bm`` -> blockIdx.y, ``bn`` -> blockIdx.x, (``tm``, ``tn``) -> the warps (threadIdx.y; a warp's 32 lanes are
    threadIdx.x inside every wmma call), and a warp computes ``om`` x ``on`` fragments. The sampled splits are
    bm/tm/om and bn/tn/on; ok/ik follow from the channel block (ik = 64, 32 or 16 channels / 16). A and B tiles of
    ik fragments go to shared memory (16-byte cp.async, rows padded by 8 halves, double-buffered), fragments are
    loaded per 16-deep step, C goes through shared memory to Y (rounded to half).
    """
    blk, ext = _conv_block(sch, "NHWC")
    cb = _channel_block(ext["c"])
    gemm_m, gemm_n = ext["n"] * ext["oh"] * ext["ow"], ext["k"]
    if im not in fragment_rows(gemm_m):
        raise ValueError(f"im={im}: GEMM_M={gemm_m} admits fragments of {fragment_rows(gemm_m)} rows")
    fn = WMMA_FRAGMENTS[im]
    require_divides(gemm_n, fn, param=f"the m{im}n{fn}k16 fragment's n", axis="GEMM_N (output channels)")
    names = wmma_intrins(im)
    conv2d_as_gemm(sch, channel_block=cb)
    blk = sch.get_sblock("conv")
    i, j, k = sch.get_loops(blk)
    i, i_f = sch.split(i, factors=[None, im])
    j, j_f = sch.split(j, factors=[None, fn])
    k, k_f = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, i_f, j_f, k_f)
    tile = sch.blockize(i_f)  # block "conv_o": one fragment product
    bm, tm, om = sch.split(i, factors=sch.sample_perfect_tile(i, n=3, max_innermost_factor=4))
    bn, tn, on = sch.split(j, factors=sch.sample_perfect_tile(j, n=3, max_innermost_factor=4))
    ok, ik = sch.split(k, factors=[None, cb // 16])
    sch.reorder(bm, bn, tm, tn, ok, ik, om, on)
    sch.bind(bm, "blockIdx.y")
    sch.bind(bn, "blockIdx.x")
    warp = sch.fuse(tm, tn)
    sch.bind(warp, "threadIdx.y")
    sch.annotate(tile, "warp_execution", 1)  # RewriteCooperativeFetch: threadIdx.x is a warp's 32 lanes
    for idx in (0, 1):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ok)
        sch.fuse(*sch.get_loops(sh)[-2:])
        sch.annotate(sh, "meta_schedule.cooperative_fetch", sch.sample_categorical([VECTOR], [1.0]))
        sch.storage_align(sh, 0, axis=-2, factor=32, offset=8)
    frag_a = sch.cache_read(tile, 0, "wmma.matrix_a")
    frag_b = sch.cache_read(tile, 1, "wmma.matrix_b")
    sch.compute_at(frag_a, ik)
    sch.compute_at(frag_b, ik)
    acc = sch.cache_write(tile, 0, "wmma.accumulator")
    sch.reverse_compute_at(acc, warp)
    init = sch.decompose_reduction(tile, ok)

    sch.tensorize(split_tile(sch, frag_a, im, 16), names["load_a"])
    sch.tensorize(split_tile(sch, frag_b, 16, fn), names["load_b"])
    sch.tensorize(split_tile(sch, acc, im, fn), names["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock("conv_init"))[-2], names["init"])
    sch.tensorize(sch.get_loops(sch.get_sblock("conv"))[-3], names["compute"])
    pipeline(sch, ok, 2, async_copy=True)
    _inline_im2col(sch)
    out = sch.get_sblock("Yacc_reindex")
    sch.reverse_compute_at(out, bn)
    sch.fuse(*sch.get_loops(out)[-2:])  # 4 floats a thread: VerifyGPUCode refuses vectors over 16 bytes
    sch.annotate(out, "meta_schedule.cooperative_fetch", sch.sample_categorical([4], [1.0]))
    return sch


def conv2d_wmma_space(sch: s_tir.Schedule) -> list[s_tir.Schedule]:
    """``ScheduleFn`` body: one design space per fragment shape the workload's GEMM_M and GEMM_N admit."""
    blk, ext = _conv_block(sch, "NHWC")
    gemm_m, gemm_n = ext["n"] * ext["oh"] * ext["ow"], ext["k"]
    rows = [im for im in fragment_rows(gemm_m) if gemm_n % WMMA_FRAGMENTS[im] == 0]
    if not rows:
        raise ValueError(f"GEMM_N={gemm_n} (output channels) is not a multiple of 8: no wmma fragment fits")
    return [conv2d_wmma_design(sch.copy(), im=im) for im in rows]


#: The PassContext config of the wgmma / mma.sync kernels (cp.async; storage rewriting stays on for mma's "warp"
#: buffers).
CONV_TC_CONFIG = MMA_ASYNC_CONFIG
#: ... and of the wmma space's: without storage rewriting, which would merge the fp32 C tile into the fp16 tiles'
#: shared memory and break the wmma store's typed pointer.
WMMA_CONFIG = {**MMA_ASYNC_CONFIG, "tirx.disable_storage_rewrite": True}

#: name -> (helper, its default kwargs spelled out, layout of the workload it schedules).
VARIANTS: dict[str, tuple[Callable[..., s_tir.Schedule], dict[str, Any], str]] = {
    "nhwc_mma": (conv2d_nhwc_mma, {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3},
                 "NHWC"),
    "nhwc_wgmma": (conv2d_nhwc_wgmma, {"block_tile": (128, 128), "stages": 4}, "NHWC"),
}

#: Tile configurations the notebook sweeps per shape (one that does not divide a shape is skipped), chosen from
#: a probe on an H100 (docs/notes-conv.md): wide wgmma tiles with the overlapped pipeline for the large GEMMs, 64-row
#: tiles where K = 64 or the GEMM is small, and mma.sync with 32-row tiles where GEMM_M (1568 at 7x7, batch 32) has
#: no divisor that is a multiple of 64, which wgmma's warpgroups need.
TC_SWEEP: list[tuple[str, dict[str, Any]]] = [
    ("nhwc_wgmma", {"block_tile": (128, 256), "stages": 4, "overlap": True}),
    ("nhwc_wgmma", {"block_tile": (256, 128), "stages": 3, "overlap": True}),
    ("nhwc_wgmma", {"block_tile": (128, 128), "stages": 4, "overlap": True}),
    ("nhwc_wgmma", {"block_tile": (64, 256), "stages": 4, "overlap": True}),
    ("nhwc_wgmma", {"block_tile": (128, 64), "stages": 4}),
    ("nhwc_wgmma", {"block_tile": (64, 64), "stages": 4}),
    ("nhwc_mma", {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3}),
    ("nhwc_mma", {"block_tile": (32, 128), "warp_tile": (32, 32), "tile_k": 64, "stages": 3}),
    ("nhwc_mma", {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 32, "stages": 4}),
]


#: The int8 kernels by variant name (``conv2d_int8`` workloads).
INT8_VARIANTS: dict[str, Callable[..., s_tir.Schedule]] = {"int8_wgmma": conv2d_int8_wgmma, "int8_mma": conv2d_int8_mma}

#: Tile configurations notebook 06 sweeps per shape (one that does not divide a shape is skipped), from probes on an
#: H100 (docs/notes-int8.md): wgmma with 128-byte swizzled k tiles where the channels allow (128x256 tiles: N = 256 per
#: wgmma, which TVM's PTX table lacks for int8; 181-184 us against 197-199 for 256x128 on the batch-256 layer), the
#: interleaved layout for
#: 64 channels (also with L1-caching im2col fills: 70 -> 38 us at 56x56 in a probe), mma.sync down to 32-row tiles for
#: GEMM_M = 1568 (7x7 at batch 32).
INT8_SWEEP: list[tuple[str, dict[str, Any]]] = [
    ("int8_wgmma", {"block_tile": (128, 256), "tile_k": 128, "stages": 4, "overlap": True, "l1_fill": True}),
    ("int8_wgmma", {"block_tile": (128, 256), "tile_k": 128, "stages": 3, "overlap": True}),
    ("int8_wgmma", {"block_tile": (256, 128), "tile_k": 128, "stages": 4, "overlap": True}),
    ("int8_wgmma", {"block_tile": (128, 128), "tile_k": 128, "stages": 3, "overlap": True}),
    ("int8_wgmma", {"block_tile": (128, 64), "tile_k": 64, "stages": 4, "layout": "interleaved"}),
    ("int8_wgmma", {"block_tile": (128, 64), "tile_k": 64, "stages": 4, "layout": "interleaved", "l1_fill": True}),
    ("int8_mma", {"block_tile": (128, 128), "warp_tile": (32, 64), "tile_k": 64, "stages": 4}),
    ("int8_mma", {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 64, "stages": 4}),
    ("int8_mma", {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 64, "stages": 4}),
]

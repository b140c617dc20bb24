"""fp16 tensor-core convolution: the NHWC convolution as an implicit GEMM on the GEMM ladder's tensor-core rungs.

``conv2d_as_gemm`` reindexes the ``"conv"`` block of ``conv2d(..., layout="NHWC", dtype="float16")`` into a GEMM
block, C[m, n] += A[m, k] * B[k, n] with

- m = (image, output row, output column): GEMM_M = N * OH * OW, the output pixels (Y is [GEMM_M, K] in memory);
- n = output channel: GEMM_N = K;
- k = (kernel row, input-channel block, kernel column, channel in block): GEMM_K = R * S * C.

A is the im2col matrix of the input and is never stored: once a helper has cached A's tile in shared memory,
``finish_implicit_gemm`` inlines the reindexing (and the zero padding) into that copy, so each shared-memory fill reads
the input pixels straight from X, with a zero-fill predicate where the window hangs over the border. B is the filter (R,
S, C, K) read as rows of k. The order of k keeps that fill fast: a ``channel_block`` equal to the helper's k tile makes
every k tile one (kernel row, channel block, kernel column) with its channels contiguous, and puts the kernel row and
column outside every division TVM's vectorizer must see through. (With the plain (row, column, channel) order, TVM
cannot prove that the padding predicate is the same for 8 consecutive channels and falls back to 2-byte loads.)

Input channels the k tile does not divide (the 3-channel ResNet stem, 96-channel layers) take ``channel_block`` = C:
k is then the plain (row, column, channel) order, GEMM_K = R * S * C, and the GEMM helper pads it up to the k tile
(``tirbench.schedules.common.padding``): the k bound joins the border predicate of the im2col fill, which zero-fills
past the last real (row, column, channel), so nothing past C (or past R * S * C) is ever read and no copy of X is
made. In the plain order a kernel row's S * C values are contiguous in X, which keeps the copies coalesced. Channels
in 8s still fill 16 bytes at a time: a k tile then spans taps, and ``split_taps`` marks the fill so that TVM's
vectorizer can see that each 8 channels share a tap (``lowering.LANE_DIVISIONS``). Channels that do not come in 8s
give no 16-byte copy: those fills are element copies (``fill_gathers`` says where TVM must be told so).

C lives in shared memory: the helper's accumulators are stored there, and the epilogue rounds them to half and
writes 16-byte rows of Y (the block tile's rows are output pixels, contiguous in NHWC). TVM reuses the pipeline's
shared memory for it.
"""
from __future__ import annotations

from collections.abc import Callable

from tvm import s_tir, tirx
from tvm.tirx import IndexMap

from tirbench.core import lowering
from tirbench.schedules.common.checks import require_divides, require_positive_int
from tirbench.schedules.common.tiling import WARP, Warps, has_block, split_threads, warps_of
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.gemm.tensorcore import gemm_v6_wmma, gemm_v7_mma
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma

#: Halves per 16-byte copy.
VECTOR = 8


def conv2d_as_gemm(sch: s_tir.Schedule, *, channel_block: int) -> s_tir.Schedule:
    """Reindex the tensor-core convolution's block "conv" into a GEMM block (loops m, n, k; see the module docstring).

    Two workloads: the NHWC float16 ``conv2d`` (B is [K, N]: C[m, n] += A[m, k] * B[k, n]) and the NC/32HW32 int8
    ``conv2d_int8`` (B is [N, K], the filter's own k-contiguous order: C[m, n] += A[m, k] * B[n, k], what
    ``mma.sync``'s int8 operands need). After this, ``gemm_block(sch, "conv")`` finds it, and the GEMM helpers take
    ``block="conv"``. The output copy (block "Yacc_reindex", which takes in the "cast" or "epilogue" block) is put
    in (m, n) order too, and C in shared memory. The GEMM helpers then take any m (pixels) and n (output channels):
    where their tiles do not divide, the block is padded to them (``tirbench.schedules.common.padding``), the pad folds into
    the im2col fills (predicated, zero-filling ``cp.async``) and the crop into the output copy, which stores only the
    real pixels and channels, and any k: ``channel_block`` must divide the input channels, and where GEMM_K is no
    multiple of the k tile the pad joins the im2col fill's predicate too (zero past the last real k).
    """
    int8 = has_block(sch, "epilogue")
    blk, ext = conv_block(sch, "NCHW32" if int8 else "NHWC")
    if not int8 and not has_block(sch, "cast"):
        raise ValueError("tensor-core convolutions take float16 inputs: use conv2d(..., layout='NHWC', "
                         "dtype='float16')")
    reindex_channels_last(sch, blk, ext, channel_block=channel_block, filter_nk=int8)
    sch.reverse_compute_inline(sch.get_sblock("epilogue" if int8 else "cast"))
    out = sch.get_sblock("Yacc_reindex")
    sch.transform_block_layout(out, lambda b, y, x, f: (pixel_index(ext)(b, y, x), f))
    sch.set_scope(blk, 0, "shared.dyn")
    return sch


def pixel_index(ext: dict[str, int]) -> Callable[..., tirx.Expr]:
    """(image, output row, output column) -> the output pixel's place in the batch, n * OH * OW + oh * OW + ow."""
    oh, ow = ext["oh"], ext["ow"]
    return lambda b, y, x: b * oh * ow + y * ow + x


def reindex_channels_last(sch: s_tir.Schedule, blk: s_tir.SBlockRV, ext: dict[str, int], *, channel_block: int,
                          filter_nk: bool) -> None:
    """Reindex a channels-last "conv" block (NHWC, NC/32HW32) and its reads and write into GEMM shape: block loops
    (pixel, output channel, k), A = im2col [pixel, k], B = the filter [k, K] (``filter_nk``: [K, k]), C = [pixel,
    K]; k in (kernel row, channel block, kernel column, channel in block) order (the module docstring). The output
    copy (block "<C's name>_reindex") is left in (image, row, column, channel) order."""
    r, s, c = ext["r"], ext["s"], ext["c"]
    if (ext["oh"] == 1 or ext["ow"] == 1) and r * s > 1:   # TVM's im2col reindex drops the 1-wide output axis
        raise ValueError(f"an output of {ext['oh']}x{ext['ow']} pixels under a {r}x{s} kernel is not taken by the "
                         "channels-last implicit GEMM")
    require_divides(c, channel_block, param="channel_block (the k tile)", axis="c (input channels)")
    cb = channel_block
    pixel = pixel_index(ext)

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
    if filter_nk:
        sch.transform_layout(blk, ("read", 1), lambda f, ry, rx, rc: (f, k_index(ry, rx, rc)))
    else:
        sch.transform_layout(blk, ("read", 1), lambda f, ry, rx, rc: (k_index(ry, rx, rc), f))
    sch.transform_layout(blk, ("write", 0), lambda b, y, x, f: (pixel(b, y, x), f))


def inline_im2col(sch: s_tir.Schedule) -> None:
    """Once A and B are cached in shared memory: inline im2col, the filter reshape and the padding into the fills."""
    for name in ("Xp_reindex_reindex", "W_reindex_reindex", "pad"):
        sch.compute_inline(sch.get_sblock(name))


def input_fill_block(sch: s_tir.Schedule) -> s_tir.SBlockRV:
    """The block that fills the im2col tile in shared memory ("Xp_reindex_shared.dyn", or "Xp_reindex_pad_shared.dyn"
    where the GEMM helper padded M)."""
    for name in ("Xp_reindex_shared.dyn", "Xp_reindex_pad_shared.dyn"):
        if has_block(sch, name):
            return sch.get_sblock(name)
    raise RuntimeError("no im2col shared-memory fill: run a GEMM helper on conv2d_as_gemm's block first")


def finish_implicit_gemm(sch: s_tir.Schedule, *, warps: Warps, vector: int = VECTOR,
                         gathers: bool = False, taps: bool = False) -> s_tir.Schedule:
    """After a GEMM helper: ``inline_im2col``, and write the block tile of C (shared) to Y through the epilogue
    (half: 8 values, 16-byte stores; int8: 4 values, 16-byte loads of C), ``warps`` x 32 threads (``warps``: a count,
    or split factors where a design space samples it). ``gathers`` (``fill_gathers``): the im2col fill becomes
    element copies (``element_copies``); ``taps`` (``spans_taps``): its k tiles span kernel taps (``split_taps``)."""
    inline_im2col(sch)
    if gathers:
        element_copies(sch)
    split_taps(sch, taps)
    out = sch.get_sblock("Yacc_reindex")
    sch.reverse_compute_at(out, sch.get_loops(input_fill_block(sch))[0])
    *_, vec = split_threads(sch, sch.fuse(*sch.get_loops(out)[1:]), warps, vector)
    sch.vectorize(vec)
    return sch


def fill_gathers(sch: s_tir.Schedule, channel_block: int) -> bool:
    """Whether the im2col fill of the NHWC convolution in ``sch`` (before ``conv2d_as_gemm``) would gather: its
    channels do not come in 8s (``channel_block`` no multiple of 8) but GEMM_K = R * S * C does (ConvNeXt's 4x4 stem:
    4 * 4 * 3 = 48). TVM then proves the fill's predicate uniform over 8 values and keeps the vector, whose 8 addresses
    are no ramp: it gathers them through an int32x8 index that its CUDA code generator writes as ``make_longlong4`` of
    8 values, which does not compile (NVRTC rejects the kernel when it is loaded). Elsewhere (the ResNet stem's GEMM_K
    = 147) the vectorizer gives up and copies one element at a time by itself."""
    ext = conv_block(sch, "NHWC")[1]
    return channel_block % VECTOR != 0 and ext["r"] * ext["s"] * ext["c"] % VECTOR == 0


def spans_taps(sch: s_tir.Schedule, channel_block: int, tile_k: int) -> bool:
    """Whether the im2col fill of the NHWC convolution in ``sch`` (before ``conv2d_as_gemm``) has k tiles that span
    kernel taps in runs of 8 channels: a window of several taps, and a ``channel_block`` in 8s that ``tile_k`` does
    not divide (Inception's 80 channels in k tiles of 64). ``split_taps`` keeps that fill's 16-byte copies."""
    ext = conv_block(sch, "NHWC")[1]
    return ext["r"] * ext["s"] > 1 and channel_block % tile_k != 0 and channel_block % VECTOR == 0


def split_taps(sch: s_tir.Schedule, on: bool) -> None:
    """With ``on`` (``spans_taps``): mark the im2col fill so its tap and channel divisions are split at its 16-byte
    copies (``lowering.LANE_DIVISIONS``); without it TVM copies that fill one element at a time."""
    if on:
        sch.annotate(input_fill_block(sch), lowering.LANE_DIVISIONS, VECTOR)


def element_copies(sch: s_tir.Schedule, fill: s_tir.SBlockRV | None = None) -> None:
    """Unroll a shared-memory fill's vector (default: the im2col fill's, see ``fill_gathers``) into element copies."""
    loop = sch.get_loops(fill if fill is not None else input_fill_block(sch))[-1]
    if sch.get(loop).kind == tirx.ForKind.VECTORIZED:
        sch.unroll(loop)


def fill_through_l1(sch: s_tir.Schedule, on: bool) -> None:
    """With ``on``: the input's (im2col) shared-memory fill copies through L1 (``cp.async.ca``, ``lowering.L1_FILL``).
    A 3x3 window reads each input row three times in three consecutive k tiles (the kernel columns), so L1 can serve
    two of them; the filter's fill is read once per block and stays ``.cg``."""
    if on:
        loops = sch.get_loops(input_fill_block(sch))   # (..., copies, threadIdx.y, threadIdx.x, 16 B or pieces of it)
        ty = max(i for i, loop in enumerate(loops) if getattr(sch.get(loop).thread_binding, "thread_tag", "")
                 == "threadIdx.y")
        sch.annotate(loops[ty - 1], lowering.L1_FILL, 1)


def default_channel_block(sch: s_tir.Schedule, tile_k: int, channel_block: int | None) -> int:
    """``channel_block``, or by default the k tile where it divides the input channels, else all of them (C)."""
    if channel_block is not None:
        return channel_block
    require_positive_int(tile_k, param="tile_k")
    c = conv_block(sch, "NHWC")[1]["c"]
    return tile_k if c % tile_k == 0 else c


def _require_epilogue(block_tile: tuple[int, int], warps: int, vector: int = VECTOR) -> None:
    if block_tile[0] * block_tile[1] % (warps * WARP * vector):
        raise ValueError(f"block_tile={block_tile}: the epilogue gives each of {warps * WARP} threads the same "
                         f"number of {vector}-value rows, so bm * bn must be a multiple of {warps * WARP * vector}")


def conv2d_nhwc_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), stages: int = 4,
                      raster: int = 1, overlap: bool = False, channel_block: int | None = None,
                      l1_fill: bool = False) -> s_tir.Schedule:
    """The implicit GEMM on Hopper's warpgroup MMA: ``gemm_v8_wgmma`` (128-byte swizzled shared tiles of k = 64,
    a ``stages``-deep cp.async pipeline, one wgmma group per k tile) on the reindexed convolution.

    Any input channels C: ``channel_block`` (default) is 64 where 64 divides C, else C, with GEMM_K = R * S * C
    zero-padded up to the k tile in the im2col fill (see the module docstring); an explicit one must divide C.
    ``l1_fill``: the im2col fills cache in L1 (``fill_through_l1``)."""
    channel_block = default_channel_block(sch, 64, channel_block)
    gathers, taps = fill_gathers(sch, channel_block), spans_taps(sch, channel_block, 64)
    conv2d_as_gemm(sch, channel_block=channel_block)
    warps = block_tile[0] // 16
    _require_epilogue(block_tile, warps)
    gemm_v8_wgmma(sch, block_tile=block_tile, tile_k=64, stages=stages, raster=raster, overlap=overlap,
                  block="conv")
    fill_through_l1(sch, l1_fill)
    return finish_implicit_gemm(sch, warps=warps, gathers=gathers, taps=taps)


def conv2d_nhwc_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                    warp_tile: tuple[int, int] = (64, 64), tile_k: int = 32, stages: int = 3, raster: int = 1,
                    prefetch: str = "k_step", channel_block: int | None = None,
                    l1_fill: bool = False) -> s_tir.Schedule:
    """The implicit GEMM on ldmatrix + mma.sync m16n8k16: ``gemm_v7_mma`` on the reindexed convolution.

    Any input channels C: ``channel_block`` (default) is ``tile_k`` where it divides C, else C, with GEMM_K =
    R * S * C zero-padded up to ``tile_k`` in the im2col fill (see the module docstring); an explicit one must
    divide C. A ``tile_k`` of 16 divides every C that comes in 16s (48, 80, 144), whose k tiles of 32 or 64 would
    fill one element at a time. ``l1_fill``: the im2col fills cache in L1 (``fill_through_l1``)."""
    channel_block = default_channel_block(sch, tile_k, channel_block)
    gathers, taps = fill_gathers(sch, channel_block), spans_taps(sch, channel_block, tile_k)
    conv2d_as_gemm(sch, channel_block=channel_block)
    warps = warps_of(block_tile, warp_tile)
    _require_epilogue(block_tile, warps)
    gemm_v7_mma(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages, raster=raster,
                prefetch=prefetch, block="conv")
    fill_through_l1(sch, l1_fill)
    return finish_implicit_gemm(sch, warps=warps, gathers=gathers, taps=taps)


def conv2d_nhwc_wmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                     warp_tile: tuple[int, int] = (64, 32), tile_k: int = 32,
                     channel_block: int | None = None) -> s_tir.Schedule:
    """The implicit GEMM on wmma 16x16x16 fragments: ``gemm_v6_wmma`` on the reindexed convolution (synchronous
    copies through registers, no cp.async: the Turing (sm_75) family). Any input channels C, as ``conv2d_nhwc_mma``."""
    channel_block = default_channel_block(sch, tile_k, channel_block)
    gathers, taps = fill_gathers(sch, channel_block), spans_taps(sch, channel_block, tile_k)
    conv2d_as_gemm(sch, channel_block=channel_block)
    warps = warps_of(block_tile, warp_tile)
    _require_epilogue(block_tile, warps)
    gemm_v6_wmma(sch, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, block="conv")
    return finish_implicit_gemm(sch, warps=warps, gathers=gathers, taps=taps)

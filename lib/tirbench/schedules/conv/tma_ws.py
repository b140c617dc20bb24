"""The fp16 NHWC convolution on v9's warp-specialized pipeline: an implicit GEMM whose filter tiles come by TMA and
whose im2col tiles come by a producer warpgroup's zero-filling cp.async.

The GEMM view is the tensor-core convolutions' (``implicit_gemm``): m = output pixel (N * OH * OW), n = output
channel (K), k = (kernel row, kernel column, 64-channel block). Per k tile:

- **B** (the filter, stored R, S, C, K: a k tile is W[r, s, c0:c0+64, n0:n0+bn], a row-major [64, bn] tile) comes
  as in v9: one thread of the producer warpgroup issues a TMA copy (``Tx.copy_async(..., dispatch="tma_auto")``,
  TVM plans and encodes the tensor map) completing on the stage's *full* mbarrier.
- **A** (the im2col tile: 64 channels of the pixel under tap (r, s) of each output pixel of the block) is a
  gather. Hopper's TMA has an im2col mode for it, but TVM 0.27 encodes tiled tensor maps only
  (``runtime.cuTensorMapEncodeTiled``; no ``cuTensorMapEncodeIm2col``), so the producer warpgroup's 128 threads
  gather it: each owns a pixel row of the tile (128 bytes, eight 16-byte ``cp.async`` into the 128-byte swizzled
  layout wgmma reads), zero-filled (``src-size`` 0) where the tap falls in the padding or the row lies past the
  last pixel, and signals the same *full* barrier with ``cp.async.mbarrier.arrive.noinc`` when its copies land.
  The barrier expects 128 such arrivals plus the TMA thread's ``arrive.expect_tx``. The pixel's image, row and
  column are computed once per output tile; a k tile adds the tap's offset.

- **A by TMA** (``a_by_tma``, ``NHWC_1X1_TMA``): where the layer is 1x1 with stride 1 and no padding, the im2col
  matrix is the input itself, X viewed as a row-major [N*H*W, C] matrix: the A tile then comes by TMA too, one copy
  beside B's on the same ``arrive.expect_tx`` (rows past the last pixel are zero-filled by the TMA unit), and the
  kernel is v9's GEMM with a half C, whose edges the TMA unit handles as v9's: any C and K in 8s (MobileNetV2's 16
  and 24 channels, Inception's 80 output channels), the k tile past C and the columns past K zero-filled, and the
  columns past K never stored.

The kernel is composed from the pieces it shares with v9 (``gemm.warp_specialized``): the shared-memory ring and
its barriers (``smem_ring``), the consumers' main loop (``consumer_mainloop``, with a proxy fence before their wgmma
where the tile was written by ``cp.async``, the generic proxy: wgmma reads it through the async proxy), the
epilogues from the registers (``register_epilogue``: two channels per store, skipping rows past the last pixel, so
any N, H, W: GEMM_M need not divide the tile) and by TMA (``tma_store_epilogue``), and for ``a_by_tma`` v9's producer
(``tma_producer``); its own pieces, the gather producer and the filter's loader, are in ``conv.tma_producers``. The
int8 NC/32HW32 form (``conv2d_int8_tma_ws``) differs from the fp16 NHWC one in the facts of ``Form`` (element and
accumulator types, channels per k tile), the tensors' shapes (``tensor_shapes``), how the filter's k tiles arrive
(``filter_loader``) and the requantizing epilogue (``output_writer``). Where the producer gathers A, C must be a
multiple of the k tile and K of the block's columns (one-line errors).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import IRModule
from tvm.script import tirx as T
from tvm.sym.pattern import detect_linear_equation

from tirbench.core.lowering import TIRX_KERNEL
from tirbench.schedules.common.checks import require_divides
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.gemm.tma_ws import require_v9
from tirbench.schedules.gemm.warp_specialized import (CONSUMER_REGS, PRODUCER_REGS, TILE_K, consumer_mainloop,
                                                      epilogue_done, register_epilogue, smem_ring, tma_producer,
                                                      tma_store_epilogue)
from tirbench.schedules.conv.tma_producers import (FORMS, LANES, PRODUCERS, Form, filter_loader, gather_producer,
                                                   nchw32_tma_producer, tensor_shapes)
from tirbench.workloads.conv2d_int8 import filter_layout_of


def conv_geometry(sch: s_tir.Schedule, layout: str) -> dict[str, int]:
    """n, h, w, c, k, r, s, oh, ow, stride and pad of the ``layout`` ("NHWC" or "NCHW32") convolution in ``sch``
    (one-line error for another): extents from block "conv", H and W from X, the padding from Xp, the stride from
    the window's row index."""
    blk, ext = conv_block(sch, layout)
    y_axis = 1 if layout == "NHWC" else 2
    x_shape = [int(d) for d in sch.get(sch.get_sblock("pad")).reads[0].source.shape]
    block = sch.get(blk)
    xp = block.reads[0].source
    geom = {"n": ext["n"], "h": x_shape[y_axis], "w": x_shape[y_axis + 1], "c": ext["c"], "k": ext["k"],
            "r": ext["r"], "s": ext["s"], "oh": ext["oh"], "ow": ext["ow"],
            "pad": (int(xp.shape[y_axis]) - x_shape[y_axis]) // 2}
    coeff = detect_linear_equation(block.reads[0].region[y_axis].min, [block.iter_vars[1].var])  # oh * stride + r
    geom["stride"] = int(coeff[0]) if len(coeff) == 2 else 1
    return geom


def epilogue_ops(sch: s_tir.Schedule) -> tuple[bool, bool]:
    """(residual, relu) of a ``conv2d_int8`` module: whether its epilogue block reads Res, and clamps at 0 besides
    the int8 range (a ``max(t, 0)``)."""
    block = sch.get(sch.get_sblock("epilogue"))
    maxima = []
    tvm_ffi.structural_map(block.body, (tirx.Max, lambda node: maxima.append(node) or node))
    relu = any(isinstance(node.b, tirx.IntImm) and node.b.value == 0 for node in maxima)
    return any(region.source.name == "Res" for region in block.reads), relu


def require_conv_ws(geom: dict[str, int], *, block_tile: tuple[int, int], stages: int, consumers: int,
                    persistent_ctas: int, lanes: int, dtype: str, a_by_tma: bool = False,
                    tma_store: bool = False) -> None:
    """v9's checks on the GEMM (N = K output channels, 128-byte k tiles) plus the convolution's: the input
    channels in whole k tiles (64 halves; 128 int8 channels, four groups of the NC/32HW32 layout); ``a_by_tma``: a
    1x1 layer of stride 1 without padding; ``tma_store``: the store staging in shared memory too."""
    if a_by_tma and (geom["r"], geom["s"], geom["stride"], geom["pad"]) != (1, 1, 1, 0):
        raise ValueError(f"a_by_tma: the input is the im2col matrix only for a 1x1 layer of stride 1 without "
                         f"padding, not {geom['r']}x{geom['s']} stride {geom['stride']} pad {geom['pad']}")
    form = FORMS[dtype]
    m = geom["n"] * geom["oh"] * geom["ow"]
    m_padded = -(-m // block_tile[0]) * block_tile[0]  # rows past the last pixel are masked, not required
    if a_by_tma and not form.int8:  # v9's GEMM of [N*H*W, C] @ [C, K], its edges zero-filled by the TMA unit
        require_v9(m_padded, geom["k"], geom["c"], "float16", block_tile=block_tile, stages=stages,
                   consumers=consumers, persistent_ctas=persistent_ctas, n_axis="k (output channels)",
                   tma_store=tma_store, tma_edges=True)
        return
    if a_by_tma:  # int8: a tile holds one image's pixels; the k tile's channel groups past C are zero-filled
        m_padded = geom["n"] * image_rows(geom, block_tile[0])
    else:
        require_divides(geom["c"], form.tile_c, param="the k tile (channels)", axis="c (input channels)")
        if lanes not in (1, 2, 4, 8):
            raise ValueError(f"lanes={lanes}: the producer threads sharing an im2col row must be 1, 2, 4 or 8")
    k_halves = geom["r"] * geom["s"] * -(-geom["c"] // form.tile_c) * TILE_K  # the GEMM's k in 2-byte units
    require_v9(m_padded, geom["k"], k_halves, "float16", block_tile=block_tile, stages=stages, consumers=consumers,
               persistent_ctas=persistent_ctas, n_axis="k (output channels)", tma_store=tma_store)


def image_rows(geom: dict[str, int], bm: int) -> int:
    """The rows of the int8 1x1 form's GEMM per image (``a_by_tma``): its pixels in whole tiles of ``bm``."""
    return -(-geom["oh"] * geom["ow"] // bm) * bm


class Outputs(NamedTuple):
    """What the register epilogue writes to: Y, Y flat, and the int8 epilogue's bias, scale and residual."""

    y: Any
    y_flat: Any
    bias: Any
    scale: Any
    res: Any


def output_writer(geom: dict[str, int], form: Form, *, residual: bool, relu: bool, per_image: int | None = None):
    """The register epilogue's ``put(out, acc, pixel, col, reg)`` (``register_epilogue``; ``out``: ``Outputs``):
    fp16 rounds two fp32 accumulators to half and stores them as one 4-byte store into Y; int8 applies
    ``conv2d_int8``'s epilogue to each (bias, scale, rounding, the residual and ReLU where the module has them,
    saturation) and stores it at its place in NC/32HW32. ``per_image``: the GEMM's rows are each image's pixels in
    ``per_image`` rows (``image_rows``), those past its last pixel not stored."""
    k, oh, ow = geom["k"], geom["oh"], geom["ow"]

    def requantize(acc_value: tirx.PrimExpr, at: tuple, col: tirx.PrimExpr, Bias, Scale, Res) -> tirx.PrimExpr:
        """``conv2d_int8``'s epilogue on one int32 accumulator (bits in a uint32 register) of channel ``col``."""
        t = T.Cast("int32", T.nearbyint(T.Cast("float32", T.reinterpret("int32", acc_value) + Bias[col])
                                        * Scale[col]))
        if residual:
            t = t + T.Cast("int32", Res[at])
        if relu:
            t = T.max(t, 0)
        return T.Cast("int8", T.min(T.max(t, -128), 127))

    @T.inline
    def put_requantized(out, acc, pixel, col, reg):
        for v in T.unroll(2):
            at = T.meta_var((pixel // (oh * ow), (col + v) // LANES, pixel % (oh * ow) // ow, pixel % ow,
                             (col + v) % LANES))
            out.y[at] = requantize(acc[reg + v], at, col + v, out.bias, out.scale, out.res)

    @T.inline
    def put_per_image(out, acc, row, col, reg):
        p: T.let = row % per_image
        if p < oh * ow:
            put_requantized(out, acc, row // per_image * (oh * ow) + p, col, reg)

    @T.inline
    def put_half(out, acc, pixel, col, reg):
        for v in T.vectorized(2):
            out.y_flat[pixel * k + col + v] = T.Cast("float16", acc[reg + v])

    if not form.int8:
        return put_half
    return put_per_image if per_image else put_requantized


def conv_ws_kernel(geom: dict[str, int], dtype: str, *, block_tile: tuple[int, int], stages: int, consumers: int,
                   persistent_ctas: int, lanes: int, l1_gather: bool, residual: bool = False, relu: bool = False,
                   a_by_tma: bool = False, tma_store: bool = False, krsc: bool = False) -> tirx.PrimFunc:
    """The TIRx kernel (module docstring): fp16 NHWC, Y = conv(X, W) rounded to half (``a_by_tma``: both tiles by
    TMA, a 1x1 layer; ``tma_store``: Y, as the [N*OH*OW, K] matrix, stored by v9's TMA-store epilogue); or int8
    NC/32HW32 with the requantizing epilogue of ``conv2d_int8`` (``residual``, ``relu``; ``krsc``: the filter
    stored (K, R, S, C), its k tiles by TMA)."""
    form = FORMS[dtype]
    n, h, w, c, k, r, s, oh, ow = (geom[a] for a in ("n", "h", "w", "c", "k", "r", "s", "oh", "ow"))
    bm, bn = block_tile
    m = n * oh * ow
    k_tiles, m_tiles = r * s * -(-c // form.tile_c), -(-m // bm)  # a_by_tma: C's last k tile zero-filled past C
    nchw32_by_tma = a_by_tma and form.int8
    per_image = image_rows(geom, bm) if nchw32_by_tma else None  # int8 a_by_tma: a tile's pixels in one image
    if per_image:
        m_tiles = n * per_image // bm
    tiles = m_tiles * -(-k // bn)  # a_by_tma: the TMA store writes nothing past K
    grid = persistent_ctas or tiles
    rounds = -(-tiles // grid)
    tensors = tensor_shapes(geom, form, krsc)
    elem = form.elem
    consume = consumer_mainloop(bn=bn, stages=stages, k_tiles=k_tiles, a_bytes=bm * 128, b_bytes=bn * 128,
                                proxy_fence=not a_by_tma, dtype=dtype)
    if per_image:
        produce = nchw32_tma_producer(geom, block_tile=block_tile, stages=stages, tiles=tiles, grid=grid,
                                      k_tiles=k_tiles, m_tiles=m_tiles)
    else:  # a_by_tma
        produce = tma_producer(block_tile=block_tile, m_tiles=m_tiles, tiles=tiles, grid=grid, stages=stages,
                               k_tiles=k_tiles, b_panels=k % TILE_K != 0)
    load_b, b_by_tma = filter_loader(geom, form, krsc=krsc, bn=bn, lanes=lanes, l1_gather=l1_gather)
    gather = gather_producer(geom, form, tensors, load_b, block_tile=block_tile, stages=stages, tiles=tiles,
                             grid=grid, lanes=lanes, l1_gather=l1_gather)
    store_tma = tma_store_epilogue(bn=bn, out_dtype="float16")  # tma_store (fp16 only)
    put = output_writer(geom, form, residual=residual, relu=relu, per_image=per_image)
    store_registers = register_epilogue(bn=bn, put=put, rows=None if per_image else m)
    # full-barrier arrivals per stage: one TMA thread (a_by_tma); else 128 gathering threads (+ B's TMA thread)
    arrivals = 1 if a_by_tma else PRODUCERS + (1 if b_by_tma else 0)
    b_shape = (stages, bn, 128) if form.int8 else (stages, form.tile_c, bn)  # int8 B K-major, fp16 N-major

    @T.inline
    def body(X, Wt, Bias, Scale, Res, Y):
        T.device_entry()
        cta = T.cta_id([grid])
        wg = T.warpgroup_id([consumers + 1])
        tid = T.thread_id_in_wg([128])
        Xf = T.decl_buffer((n * tensors.image_size,), elem, data=X.data)
        Wf = T.decl_buffer((k * r * s * c,), elem, data=Wt.data)
        Yf = T.decl_buffer((m * k,), elem, data=Y.data)
        Ym = T.decl_buffer((m, k), elem, data=Y.data)  # fp16: Y as the [N*OH*OW, K] matrix the TMA store writes
        A_s, B_s, staged, ring = T.meta_var(smem_ring(a_shape=(stages, bm, form.tile_c), b_shape=b_shape, dtype=elem,
                                                      stages=stages, consumers=consumers, arrivals=arrivals,
                                                      staging=elem if tma_store else None))
        if wg == consumers:  # the producer warpgroup
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if nchw32_by_tma:  # one thread: the int8 1x1 form's loads (``nchw32_tma_producer``)
                if tid == 0:
                    produce(A_s, B_s, X, Wt, ring, cta)
            elif a_by_tma:  # one thread: v9's loads, from X and W viewed as the [N*H*W, C] and [C, K] matrices
                Xm = T.decl_buffer((n * h * w, c), elem, data=X.data)
                Wm = T.decl_buffer((c, k), elem, data=Wt.data)
                if tid == 0:
                    produce(A_s, B_s, Xm, Wm, ring, cta)
            else:  # A gathered by the 128 threads, B by TMA or gathered too
                gather(A_s, B_s, Xf, Wt, Wf, ring, cta, tid)
        else:  # consumer warpgroups: rows 64 * wg of the tile
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            acc = T.alloc_local((bn // 2,), form.acc)
            a_base: T.let = T.cuda.cvta_generic_to_shared(A_s.ptr_to([0, 0, 0]))
            b_base: T.let = T.cuda.cvta_generic_to_shared(B_s.ptr_to([0, 0, 0]))
            for rnd in T.serial(rounds):  # as v9's, but its loop variable's name is in the CUDA, kept byte for byte
                tile: T.let = cta + rnd * grid
                if tile < tiles:
                    consume(acc, ring, a_base, b_base, rnd, wg, tid)
                    if tma_store:  # TMA writes no row past the last pixel
                        store_tma(Ym, staged[0], staged[1], acc, tile % m_tiles * bm + wg * 64, tile // m_tiles * bn,
                                  rnd, wg, tid)
                    else:
                        store_registers(Outputs(Y, Yf, Bias, Scale, Res), acc, tile % m_tiles * bm,
                                        tile // m_tiles * bn, wg, tid)
            if tma_store:
                epilogue_done(tid)

    if form.int8:
        @T.prim_func
        def conv_int8_tma_ws(x: T.handle, wt: T.handle, bias: T.handle, scale: T.handle, res: T.handle,
                             y: T.handle):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True, TIRX_KERNEL: True})
            X = T.match_buffer(x, tensors.x, elem)
            Wt = T.match_buffer(wt, tensors.w, elem)
            Bias = T.match_buffer(bias, (k,), "int32")
            Scale = T.match_buffer(scale, (k,), "float32")
            Res = T.match_buffer(res, tensors.y, elem)
            Y = T.match_buffer(y, tensors.y, elem)
            body(X, Wt, Bias, Scale, Res, Y)

        return conv_int8_tma_ws

    @T.prim_func
    def conv_tma_ws(x: T.handle, wt: T.handle, y: T.handle):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True, TIRX_KERNEL: True})
        X = T.match_buffer(x, tensors.x, elem)
        Wt = T.match_buffer(wt, tensors.w, elem)
        Y = T.match_buffer(y, tensors.y, elem)
        body(X, Wt, None, None, None, Y)

    return conv_tma_ws


def conv2d_nhwc_tma_ws(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 256), stages: int = 4,
                       consumers: int = 2, persistent_ctas: int = 0, lanes: int = 4,
                       l1_gather: bool = True, a_by_tma: bool = False, tma_store: bool = True) -> s_tir.Schedule:
    """The kernel of the module docstring for the fp16 NHWC convolution of ``sch``'s module: v9's parameters
    (``block_tile`` 64 x ``consumers`` rows by up to 256 output channels, ``stages`` in the ring,
    ``persistent_ctas`` blocks looping over the tiles, 0 for one block per tile) and the gather's: ``lanes``
    producer threads per im2col row (4: each copies 32 contiguous bytes, whole sectors), ``l1_gather`` through L1
    (``cp.async.ca``: the next tap reads the same pixels again); ``a_by_tma``: a 1x1 layer of stride 1 without
    padding, whose input is its im2col matrix, loads A by TMA too (the gather's parameters are then unused);
    ``tma_store``: Y goes out through shared memory by TMA (v9's ``tma_store_epilogue``)."""
    geom = conv_geometry(sch, "NHWC")
    dtype = str(sch.get(sch.get_sblock("pad")).reads[0].source.dtype)
    if dtype != "float16":
        raise ValueError(f"the TMA conv kernel takes float16 NHWC inputs, got a {dtype} workload")
    params = {"block_tile": block_tile, "stages": stages, "consumers": consumers, "persistent_ctas": persistent_ctas,
              "lanes": lanes}
    require_conv_ws(geom, dtype="float16", a_by_tma=a_by_tma, tma_store=tma_store, **params)
    return s_tir.Schedule(IRModule({"main": conv_ws_kernel(geom, "float16", l1_gather=l1_gather, a_by_tma=a_by_tma,
                                                           tma_store=tma_store, **params)}))


def conv2d_int8_tma_ws(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 256), stages: int = 4,
                       consumers: int = 2, persistent_ctas: int = 0, lanes: int = 4,
                       l1_gather: bool = True, a_by_tma: bool = False) -> s_tir.Schedule:
    """The kernel of the module docstring for the int8 NC/32HW32 convolution of ``sch``'s module (``conv2d_int8``),
    with its requantizing epilogue (bias, scale, rounding, the residual and ReLU where the module has them,
    saturation) on the int32 accumulators; the parameters of ``conv2d_nhwc_tma_ws``. C must be a multiple of 128
    (a k tile is four channel groups). A filter stored (K, R, S, C) (``filter_layout="KRSC"``) comes by TMA, as
    fp16's; the (K, C/32, R, S, 32) one, whose k tile has no 128 contiguous bytes, is gathered like the input.
    ``a_by_tma``: a 1x1 layer of stride 1 without padding, its filter stored (K, R, S, C), loads the input by TMA
    too (``nchw32_tma_producer``: any C in 32s, a tile's pixels within one image); not yet verified on a GPU, so
    no record offers it."""
    geom = conv_geometry(sch, "NCHW32")
    residual, relu = epilogue_ops(sch)
    krsc = filter_layout_of(sch.mod) == "KRSC"
    if a_by_tma and not krsc:
        raise ValueError("a_by_tma: the int8 1x1 form loads the filter's k tiles by TMA from a filter stored "
                         "(K, R, S, C): conv2d_int8(..., filter_layout='KRSC')")
    params = {"block_tile": block_tile, "stages": stages, "consumers": consumers, "persistent_ctas": persistent_ctas,
              "lanes": lanes}
    require_conv_ws(geom, dtype="int8", a_by_tma=a_by_tma, **params)
    return s_tir.Schedule(IRModule({"main": conv_ws_kernel(geom, "int8", l1_gather=l1_gather, residual=residual,
                                                           relu=relu, krsc=krsc, a_by_tma=a_by_tma, **params)}))

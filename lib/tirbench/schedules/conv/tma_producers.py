"""The producer side of the warp-specialized convolutions (``conv.tma_ws``): the facts that tell their fp16 NHWC and
int8 NC/32HW32 forms apart (``Form``, ``tensor_shapes``), how the filter's k tiles reach the shared-memory ring
(``filter_loader``: by TMA, or gathered), the producer warpgroup's loop that gathers the im2col tiles with
zero-filling ``cp.async`` (``gather_producer``), and the int8 1x1 form's producer thread, both tiles by TMA
(``nchw32_tma_producer``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tvm import tirx
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tirbench.schedules.gemm.warp_specialized import TILE_K

PRODUCERS = 128  # threads of the producer warpgroup
CHUNKS = 8  # 16-byte copies per 128-byte row (64 halves or 128 int8 channels: one k tile)
LANES = 32  # channels per group of the int8 layout NC/32HW32


@dataclass(frozen=True)
class Form:
    """What tells the kernel's two forms apart, fp16 NHWC and int8 NC/32HW32 (``FORMS``): the rest is one code."""

    elem: str  # X's, W's and Y's elements
    acc: str  # the accumulator registers (int8: the int32 sums' bits in uint32 registers, as wgmma writes them)
    tile_c: int  # input channels per k tile: one 128-byte row
    chunk: int  # elements per 16-byte copy

    @property
    def int8(self) -> bool:
        """The int8 form: X and Y in NC/32HW32, B's shared tile K-major (wgmma's 8-bit operands are), Y requantized."""
        return self.elem == "int8"


FORMS = {"float16": Form("float16", "float32", TILE_K, 8), "int8": Form("int8", "uint32", 128, 16)}


class Tensors(NamedTuple):
    """The kernel's tensors' shapes, and where X's pixels lie in it (elements of one image; between two pixels)."""

    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    image_size: int
    pixel_size: int


def tensor_shapes(geom: dict[str, int], form: Form, krsc: bool) -> Tensors:
    """X, W and Y as the workload stores them: NHWC, (R, S, C, K), NHWC for fp16; NC/32HW32, (K, C/32, R, S, 32) or
    (``krsc``) (K, R, S, C), NC/32HW32 for int8."""
    n, h, w, c, k, r, s, oh, ow = (geom[a] for a in ("n", "h", "w", "c", "k", "r", "s", "oh", "ow"))
    if form.int8:
        cg, kg = c // LANES, k // LANES
        return Tensors((n, cg, h, w, LANES), (k, r, s, c) if krsc else (k, cg, r, s, LANES), (n, kg, oh, ow, LANES),
                       cg * h * w * LANES, LANES)
    return Tensors((n, h, w, c), (r, s, c, k), (n, oh, ow, k), h * w * c, c)


def _copy(l1_gather: bool):
    """The 16-byte ``cp.async`` of the gathers: through L1 (``.ca``) or L2 only (``.cg``)."""
    return T.ptx.cp.async_.ca.shared.global_ if l1_gather else T.ptx.cp.async_.cg.shared.global_


def filter_loader(geom: dict[str, int], form: Form, *, krsc: bool, bn: int, lanes: int, l1_gather: bool):
    """How the filter's k tile reaches the ring, as a TIRx inline function
    ``load_b(B_s, Wt, Wf, ring, st, ry, rx, c0, n0, tid)`` run by the producer warpgroup's threads for stage ``st``,
    tap (``ry``, ``rx``), channels from ``c0``, output channels from ``n0``: one TMA copy by thread 0 (fp16's
    row-major [64, bn] tile; int8's K-major [bn, 128] tile of a (K, R, S, C) filter), or for the int8 (K, C/32, R,
    S, 32) filter a gather like A's (its k tile has no 128 contiguous bytes). Returns (``load_b``, whether it is by
    TMA: its thread 0 then arrives on the stage's *full* barrier besides the gathering threads)."""
    k, r, s, c = (geom[a] for a in ("k", "r", "s", "c"))
    tile_c, elem, b_bytes = form.tile_c, form.elem, bn * 128
    rows_per_pass, per_lane = PRODUCERS // lanes, CHUNKS // lanes
    b_passes = bn // rows_per_pass  # filter rows per producer thread
    w_row = c // LANES * r * s * LANES  # one filter (output channel)
    copy = _copy(l1_gather)

    @T.inline
    def krsc_by_tma(B_s, Wt, Wf, ring, st, ry, rx, c0, n0, tid):
        if tid == 0:  # one TMA copy of the K-major [bn, 128] tile: 128 channels of tap (r, s) of bn filters
            Wv = T.decl_buffer((k, r * s * c), elem, data=Wt.data)
            col: T.let = (ry * s + rx) * c + c0
            ring.full.arrive(st, b_bytes)
            Tx.copy_async(B_s[st, :, :], Wv[n0:n0 + bn, col:col + tile_c], dispatch="tma_auto",
                          mbar=ring.full.ptr_to([st]))

    @T.inline
    def gathered(B_s, Wt, Wf, ring, st, ry, rx, c0, n0, tid):
        for p in T.unroll(b_passes):  # K-major rows of four 32-byte channel groups, R * S * 32 bytes apart
            for q in T.unroll(per_lane):
                copy(B_s.ptr_to([st, tid // lanes + p * rows_per_pass, (tid % lanes * per_lane + q) * 16]),
                     Wf.ptr_to([(n0 + tid // lanes + p * rows_per_pass) * w_row + (ry * s + rx) * LANES
                                + (c0 // LANES + (tid % lanes * per_lane + q) // 2) * (r * s * LANES)
                                + (tid % lanes * per_lane + q) % 2 * 16]), 16)

    @T.inline
    def rsck_by_tma(B_s, Wt, Wf, ring, st, ry, rx, c0, n0, tid):
        if tid == 0:  # one TMA copy of the row-major [64, bn] tile
            ring.full.arrive(st, b_bytes)
            Tx.copy_async(B_s[st, :, :], Wt[ry, rx, c0:c0 + tile_c, n0:n0 + bn], dispatch="tma_auto",
                          mbar=ring.full.ptr_to([st]))

    if not form.int8:
        return rsck_by_tma, True
    return (krsc_by_tma, True) if krsc else (gathered, False)


def gather_producer(geom: dict[str, int], form: Form, tensors: Tensors, load_b, *, block_tile: tuple[int, int],
                    stages: int, tiles: int, grid: int, lanes: int, l1_gather: bool):
    """The producer warpgroup's loop when A is gathered (module docstring), as a TIRx inline function
    ``gather(A_s, B_s, Xf, Wt, Wf, ring, cta, tid)``: per output tile of block ``cta``, each thread's pixels (image,
    top-left tap: ``lanes`` threads a row) once; per k tile, wait for the stage to be empty, ``load_b`` the filter's
    tile, copy the thread's chunks of its rows' 128 bytes (zero-filled in the padding and past the last pixel) and
    arrive on the stage's *full* barrier when they land."""
    n, h, w, c, r, s, oh, ow, stride, pad = (geom[a] for a in
                                             ("n", "h", "w", "c", "r", "s", "oh", "ow", "stride", "pad"))
    bm, bn = block_tile
    m, tile_c, chunk = n * oh * ow, form.tile_c, form.chunk
    c_blocks = c // tile_c
    k_tiles, m_tiles = r * s * c_blocks, -(-m // bm)
    rounds = -(-tiles // grid)
    rows_per_pass = PRODUCERS // lanes
    passes = -(-bm // rows_per_pass)  # im2col rows per producer thread
    per_lane = CHUNKS // lanes  # 16-byte chunks of a row per thread
    copy = _copy(l1_gather)
    image_size, pixel_size = tensors.image_size, tensors.pixel_size
    plane = h * w * LANES  # int8: one channel group of one image

    def chunk_offset(chunk: tirx.PrimExpr, c0: tirx.PrimExpr) -> tirx.PrimExpr:
        """Where 16-byte chunk ``chunk`` of a pixel's k tile starting at channel ``c0`` is, from the pixel's first
        element: fp16 8 channels further each; int8 16 lanes of group c0 / 32 + chunk // 2."""
        if form.int8:
            return (c0 // LANES + chunk // 2) * plane + chunk % 2 * 16
        return c0 + chunk * 8

    @T.inline
    def gather(A_s, B_s, Xf, Wt, Wf, ring, cta, tid):
        image = T.alloc_local((passes,), "int32")  # per row: the pixel's image (-1: past the last pixel)
        top = T.alloc_local((passes,), "int32")  # ... and the input row and column of its top-left tap
        left = T.alloc_local((passes,), "int32")
        for rnd in T.serial(rounds):
            tile: T.let = cta + rnd * grid
            if tile < tiles:
                for p in T.unroll(passes):
                    pixel: T.let = tile % m_tiles * bm + tid // lanes + p * rows_per_pass
                    image[p] = T.Select(pixel < m, pixel // (oh * ow), -1)
                    top[p] = pixel % (oh * ow) // ow * stride - pad
                    left[p] = pixel % ow * stride - pad
                for kt in T.serial(k_tiles):
                    g: T.let = rnd * k_tiles + kt
                    st: T.let = g % stages
                    ry: T.let = kt // (s * c_blocks)
                    rx: T.let = kt // c_blocks % s
                    c0: T.let = kt % c_blocks * tile_c
                    if g >= stages:
                        ring.empty.wait(st, (g // stages - 1) % 2)
                    load_b(B_s, Wt, Wf, ring, st, ry, rx, c0, tile // m_tiles * bn, tid)
                    for p in T.unroll(passes):
                        row: T.let = tid // lanes + p * rows_per_pass
                        iy: T.let = top[p] + ry
                        ix: T.let = left[p] + rx
                        inside: T.let = image[p] >= 0 and iy >= 0 and iy < h and ix >= 0 and ix < w
                        src: T.let = T.Select(inside, image[p] * image_size + (iy * w + ix) * pixel_size, 0)
                        if row < bm:
                            for q in T.unroll(per_lane):
                                copy(A_s.ptr_to([st, row, (tid % lanes * per_lane + q) * chunk]),
                                     Xf.ptr_to([src + chunk_offset(tid % lanes * per_lane + q, c0)]), 16,
                                     T.Select(inside, T.uint32(16), T.uint32(0)))
                    T.ptx.cp.async_.mbarrier.arrive.noinc.shared.b64(ring.full.ptr_to([st]))

    return gather


def nchw32_tma_producer(geom: dict[str, int], *, block_tile: tuple[int, int], stages: int, tiles: int, grid: int,
                        k_tiles: int, m_tiles: int):
    """The producer thread's loop of the int8 1x1 form (``a_by_tma``, stride 1, no padding), as a TIRx inline
    function ``produce(A_s, B_s, X, Wt, ring, cta)``: per output tile of block ``cta`` (``m_tiles`` down the pixels,
    ``m_tiles / N`` an image: a tile never spans two images) and k tile, wait until the stage is empty and issue two
    TMA copies on its *full* barrier. A: 128 channels of bm pixels of one image, from X viewed as (N, H*W, C/32, 32)
    with NC/32HW32's strides (a pixel's groups H*W*32 bytes apart): one 4-D box whose rows are a pixel's 128
    channels, landing in the 128-byte swizzled [bm, 128] tile as a 2-D load would (the view needs its ``layout``:
    TVM plans the copy from it and ignores ``strides``). B: the K-major [bn, 128] tile of the (K, C) filter. Pixels
    past the image's H*W and channels past C are zero-filled by the TMA unit."""
    n, hw, c, k = geom["n"], geom["h"] * geom["w"], geom["c"], geom["k"]
    bm, bn = block_tile
    cg, groups = c // LANES, 128 // LANES  # channel groups: the layer's, a k tile's
    image_tiles, rounds = m_tiles // n, -(-tiles // grid)  # m tiles an image
    view = ((n, hw, cg, LANES), (cg * hw * LANES, LANES, hw * LANES, 1))

    @T.inline
    def produce(A_s, B_s, X, Wt, ring, cta):
        Xv = T.decl_buffer(view[0], "int8", data=X.data, strides=view[1], layout=TileLayout(S[view[0]:view[1]]))
        Wv = T.decl_buffer((k, c), "int8", data=Wt.data)
        for rnd in T.serial(rounds):
            tile: T.let = cta + rnd * grid
            if tile < tiles:
                img: T.let = tile % m_tiles // image_tiles
                p0: T.let = tile % m_tiles % image_tiles * bm
                n0: T.let = tile // m_tiles * bn
                for kt in T.serial(k_tiles):
                    g: T.let = rnd * k_tiles + kt
                    st: T.let = g % stages
                    if g >= stages:
                        ring.empty.wait(st, (g // stages - 1) % 2)
                    ring.full.arrive(st, (bm + bn) * 128)
                    Tx.copy_async(A_s[st, :, :], Xv[img, p0:p0 + bm, kt * groups:kt * groups + groups, 0:LANES],
                                  dispatch="tma_auto", mbar=ring.full.ptr_to([st]))
                    Tx.copy_async(B_s[st, :, :], Wv[n0:n0 + bn, kt * 128:kt * 128 + 128], dispatch="tma_auto",
                                  mbar=ring.full.ptr_to([st]))

    return produce

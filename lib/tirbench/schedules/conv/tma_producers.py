"""The producer side of the warp-specialized convolutions (``conv.tma_ws``): the facts that tell their fp16 NHWC and
int8 NC/32HW32 forms apart (``Form``, ``tensor_shapes``), how the filter's k tiles reach the shared-memory ring
(``filter_loader``: by TMA, or gathered) and the producer warpgroup's loop that gathers the im2col tiles with
zero-filling ``cp.async`` (``gather_producer``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tvm import tirx
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

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

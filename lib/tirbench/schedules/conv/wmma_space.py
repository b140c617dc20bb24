"""The shape-aware wmma design space for fp16 NHWC convolution (MetaSchedule ``--space wmma``): the implicit GEMM
(``conv2d_as_gemm``) tiled to wmma fragments whose shape (m8n32k16, m16n16k16, m32n8k16) GEMM_M admits, the block and
warp tiles sampled.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import require_divides
from tirbench.schedules.common.tiling import pipeline, split_tile
from tirbench.schedules.conv.direct import conv_block
from tirbench.schedules.conv.implicit_gemm import VECTOR, conv2d_as_gemm, inline_im2col
from tirbench.schedules.gemm.tensorcore import MMA_ASYNC_CONFIG, wmma_fragments
from tirbench.schedules.intrinsics.wmma import WMMA_FRAGMENTS, wmma_intrins


def fragment_rows(gemm_m: int) -> tuple[int, ...]:
    """The shape-aware rule: the fragment heights GEMM_M admits (32 if it divides, then 16, 8 always)."""
    if gemm_m % 32 == 0:
        return 8, 16, 32
    if gemm_m % 16 == 0:
        return 8, 16
    return (8,)


def _channel_block(c: int) -> int:
    """The k tile of the wmma space: the largest of 64, 32, 16 channels that divides ``c``."""
    for cb in (64, 32, 16):
        if c % cb == 0:
            return cb
    raise ValueError(f"c={c}: the wmma kernels need input channels in multiples of 16 (one fragment's k)")


def _fragment_nest(sch: s_tir.Schedule, im: int, fn: int,
                   cb: int) -> tuple[s_tir.SBlockRV, s_tir.LoopRV, s_tir.LoopRV, s_tir.LoopRV, s_tir.LoopRV]:
    """The GEMM block "conv" in ``im`` x ``fn`` x 16 fragment products (``"conv_o"``), its m and n fragment loops
    split by sampled tiles, k in channel blocks of ``cb``; returns (the product block, the channel-block loop, the
    fragment-step loop, the warp loop, the block-column loop)."""
    i, j, k = sch.get_loops(sch.get_sblock("conv"))
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
    return tile, ok, ik, warp, bn


def _stage_cooperative_tiles(sch: s_tir.Schedule, tile: s_tir.SBlockRV, ok: s_tir.LoopRV) -> None:
    """A and B tiles of a channel block to shared memory, fetched cooperatively (``VECTOR``-wide copies spread by
    RewriteCooperativeFetch), rows padded by 8 halves."""
    sch.annotate(tile, "warp_execution", 1)  # RewriteCooperativeFetch: threadIdx.x is a warp's 32 lanes
    for idx in (0, 1):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ok)
        sch.fuse(*sch.get_loops(sh)[-2:])
        sch.annotate(sh, "meta_schedule.cooperative_fetch", sch.sample_categorical([VECTOR], [1.0]))
        sch.storage_align(sh, 0, axis=-2, factor=32, offset=8)


def _tensorize_fragments(sch: s_tir.Schedule, tile: s_tir.SBlockRV, loops: tuple[s_tir.LoopRV, ...],
                         names: dict[str, str], im: int, fn: int) -> None:
    """wmma fragments of A and B per 16-deep step, the accumulator per warp (``loops``: the channel-block, fragment
    step and warp loops); every copy, the fill and the product tensorized with the m``im`` n``fn`` k16 intrinsics
    ``names``."""
    ok, ik, warp = loops
    frag_a, frag_b, acc = wmma_fragments(sch, tile, ik, warp)
    sch.decompose_reduction(tile, ok)
    sch.tensorize(split_tile(sch, frag_a, im, 16), names["load_a"])
    sch.tensorize(split_tile(sch, frag_b, 16, fn), names["load_b"])
    sch.tensorize(split_tile(sch, acc, im, fn), names["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock("conv_init"))[-2], names["init"])
    sch.tensorize(sch.get_loops(sch.get_sblock("conv"))[-3], names["compute"])


def conv2d_wmma_design(sch: s_tir.Schedule, *, im: int) -> s_tir.Schedule:
    """The shape-aware wmma design for one fragment shape (m``im`` n``WMMA_FRAGMENTS[im]`` k16), tiles sampled.

    GEMM_M splits four ways (bm, tm, om, im) and GEMM_N four ways (bn, tn, on, in), GEMM_K two ways (ok, ik):
    ``bm`` -> blockIdx.y, ``bn`` -> blockIdx.x, (``tm``, ``tn``) -> the warps (threadIdx.y; a warp's 32 lanes are
    threadIdx.x inside every wmma call), and a warp computes ``om`` x ``on`` fragments. The sampled splits are
    bm/tm/om and bn/tn/on; ok/ik follow from the channel block (ik = 64, 32 or 16 channels / 16). A and B tiles of
    ik fragments go to shared memory (16-byte cp.async, rows padded by 8 halves, double-buffered), fragments are
    loaded per 16-deep step, C goes through shared memory to Y (rounded to half).
    """
    _, ext = conv_block(sch, "NHWC")
    cb = _channel_block(ext["c"])
    gemm_m, gemm_n = ext["n"] * ext["oh"] * ext["ow"], ext["k"]
    if im not in fragment_rows(gemm_m):
        raise ValueError(f"im={im}: GEMM_M={gemm_m} admits fragments of {fragment_rows(gemm_m)} rows")
    fn = WMMA_FRAGMENTS[im]
    require_divides(gemm_n, fn, param=f"the m{im}n{fn}k16 fragment's n", axis="GEMM_N (output channels)")
    names = wmma_intrins(im)
    conv2d_as_gemm(sch, channel_block=cb)
    tile, ok, ik, warp, bn = _fragment_nest(sch, im, fn, cb)
    _stage_cooperative_tiles(sch, tile, ok)
    _tensorize_fragments(sch, tile, (ok, ik, warp), names, im, fn)
    pipeline(sch, ok, 2, async_copy=True)
    inline_im2col(sch)
    out = sch.get_sblock("Yacc_reindex")
    sch.reverse_compute_at(out, bn)
    sch.fuse(*sch.get_loops(out)[-2:])  # 4 floats a thread: VerifyGPUCode refuses vectors over 16 bytes
    sch.annotate(out, "meta_schedule.cooperative_fetch", sch.sample_categorical([4], [1.0]))
    return sch


def conv2d_wmma_space(sch: s_tir.Schedule) -> list[s_tir.Schedule]:
    """``ScheduleFn`` body: one design space per fragment shape the workload's GEMM_M and GEMM_N admit."""
    _, ext = conv_block(sch, "NHWC")
    gemm_m, gemm_n = ext["n"] * ext["oh"] * ext["ow"], ext["k"]
    rows = [im for im in fragment_rows(gemm_m) if gemm_n % WMMA_FRAGMENTS[im] == 0]
    if not rows:
        raise ValueError(f"GEMM_N={gemm_n} (output channels) is not a multiple of 8: no wmma fragment fits")
    return [conv2d_wmma_design(sch.copy(), im=im) for im in rows]


#: ... and of the wmma space's: without storage rewriting, which would merge the fp32 C tile into the fp16 tiles'
#: shared memory and break the wmma store's typed pointer.
WMMA_CONFIG = {**MMA_ASYNC_CONFIG, "tirx.disable_storage_rewrite": True}

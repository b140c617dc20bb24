"""The GEMM ladder as data: one ``KernelRecord`` per rung (helper, parameters, pass config, sweep candidates), the
candidates for shapes no tile divides, and the nearest divisible shape they are compared with.

The candidates were chosen from explorations on an H100/H200; why the tiles are what they are, and what the kernels
measure, is in ``docs/gemm.md``. Big block tiles win at 4096^3, where there are blocks enough for every SM; small
ones win at 1024^3, where 128x128 blocks would leave half the SMs idle.
"""
from __future__ import annotations

import math
from typing import Any

from tirbench.schedules.common.record import KernelRecord, takes, turing
from tirbench.schedules.common.tiling import SIMT_ASYNC_CONFIG
from tirbench.schedules.gemm.simt import (
    gemm_v0_naive,
    gemm_v1_local,
    gemm_v2_shared,
    gemm_v3_vectorized,
    gemm_v4_pipelined,
    gemm_v5_warp_tiled,
)
from tirbench.schedules.gemm.splitk import gemm_splitk_mma, gemm_splitk_simt, gemm_splitk_wgmma
from tirbench.schedules.gemm.tensorcore import MMA_ASYNC_CONFIG, gemm_v6_wmma, gemm_v7_mma
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma
from tirbench.schedules.gemm.tma_ws import gemm_v9_tma_ws

FP32_GEMM = takes("C", ("float32",), out_dtypes=("float32",))
FP16_GEMM = takes("C", ("float16",), out_dtypes=("float32",))
#: v9 also writes C in half precision (``gemm(..., out_dtype="float16")``), as cuBLAS's fp16 GEMM does.
FP16_GEMM_ANY_C = takes("C", ("float16",), out_dtypes=("float32", "float16"))

V0_NAIVE = KernelRecord("v0_naive", gemm_v0_naive, {"threads": (16, 16)}, FP32_GEMM, needs=())
V1_LOCAL = KernelRecord("v1_local", gemm_v1_local, {"thread_tile": (8, 8), "threads": (8, 8), "tile_k": 4},
                        FP32_GEMM, needs=())
V2_SHARED = KernelRecord("v2_shared", gemm_v2_shared, {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8},
                         FP32_GEMM, needs=())
V3_VECTORIZED = KernelRecord("v3_vectorized", gemm_v3_vectorized,
                             {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8}, FP32_GEMM, needs=())
V4_PIPELINED = KernelRecord("v4_pipelined", gemm_v4_pipelined,
                            {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8, "stages": 2,
                             "async_copy": True}, FP32_GEMM, SIMT_ASYNC_CONFIG, needs=("cp_async",))
#: v5's sweep: the 128x256 / 32x64 / k_step one has the tile sizes the v5-space search found at 4096^3, with v5's
#: lane order.
V5_WARP_TILED = KernelRecord(
    "v5_warp_tiled", gemm_v5_warp_tiled,
    {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 8, "stages": 3,
     "async_copy": True}, FP32_GEMM, SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3,
         "raster": 4},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3,
         "raster": 4, "columns_outer": True},
        {"block_tile": (128, 256), "warp_tile": (32, 64), "thread_tile": (8, 8), "tile_k": 16, "stages": 2,
         "raster": 4, "prefetch": "k_step"},
        {"block_tile": (64, 64), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 4},
        {"block_tile": (128, 64), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 3},
    ), needs=("cp_async",))
V6_WMMA = KernelRecord("v6_wmma", gemm_v6_wmma, {"block_tile": (128, 128), "warp_tile": (64, 32), "tile_k": 32},
                       FP16_GEMM, needs=("wmma",))
#: v7's rung tiling is timed as the rung itself; the sweep adds deeper k tiles and smaller blocks.
V7_MMA_LDMATRIX = KernelRecord(
    "v7_mma_ldmatrix", gemm_v7_mma,
    {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3, "async_copy": True,
     "prefetch": "k_step"}, FP16_GEMM, MMA_ASYNC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 64, "stages": 2, "raster": 8},
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 64, "stages": 3, "raster": 8,
         "prefetch": "next_tile"},
        {"block_tile": (128, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 3},
        {"block_tile": (64, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 4},
        {"block_tile": (64, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 4},
    ), needs=("ldmatrix", "mma_m16n8k16", "cp_async"))
#: v8's sweep keeps the non-overlapped tiles as the overlap's baseline, and one unswizzled tile (the lesson: the
#: interleaved layout is several times slower); 128x128 with 3 stages fits two blocks per SM.
V8_WGMMA = KernelRecord(
    "v8_wgmma", gemm_v8_wgmma,
    {"block_tile": (128, 128), "tile_k": 64, "stages": 3, "raster": 1, "layout": "swizzle128"}, FP16_GEMM,
    MMA_ASYNC_CONFIG, candidates=(
        {"block_tile": (128, 128), "stages": 3, "raster": 8},
        {"block_tile": (128, 256), "stages": 4, "raster": 8},
        {"block_tile": (64, 128), "stages": 4},
        {"block_tile": (128, 64), "stages": 4},
        {"block_tile": (128, 256), "stages": 4, "layout": "interleaved"},
        {"block_tile": (128, 128), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (128, 256), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (128, 256), "stages": 4, "raster": 8, "overlap": True},
        {"block_tile": (256, 128), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (64, 128), "stages": 4, "overlap": True},
        {"block_tile": (128, 64), "stages": 4, "overlap": True},
    ), needs=("cp_async", "wgmma"))
#: v9's sweep: the defaults (128x256 with two consumer warpgroups, persistent, the TMA store) and variations of them
#: for large GEMMs; at 1024^3 smaller tiles, whose 64-128 blocks fill more of an H100's SMs (an exploration on the
#: H100: 128x64 with 6 stages 0.93x cuBLAS). Where its tiles do not divide the GEMM, the same sweep less the register
#: epilogue: the TMA unit zero-fills the loads and clips the TMA store past the edges (``gemm.tma_ws``).
V9_TMA_WS = KernelRecord(
    "v9_tma_ws", gemm_v9_tma_ws,
    {"block_tile": (128, 256), "stages": 4, "consumers": 2, "persistent_ctas": 132, "tma_store": True}, FP16_GEMM_ANY_C,
    candidates=(
        {},
        {"tma_store": False},
        {"persistent_ctas": 0},
        {"stages": 3},
        {"block_tile": (128, 128), "stages": 6},
        {"block_tile": (128, 64), "stages": 6, "persistent_ctas": 0},
        {"block_tile": (64, 128), "stages": 4, "consumers": 1, "persistent_ctas": 0},
    ), needs=("mbarrier", "tma", "setmaxnreg", "wgmma"))

#: v5 on Turing (sm_75: no cp.async): its tiles with synchronous copies (``record.turing``), what the GEMM rules offer
#: for float32 there (``rules.FALLBACK``); not a rung of the ladder.
SM75_V5 = turing(V5_WARP_TILED)

#: The ladder, slowest first.
LADDER: tuple[KernelRecord, ...] = (V0_NAIVE, V1_LOCAL, V2_SHARED, V3_VECTORIZED, V4_PIPELINED, V5_WARP_TILED,
                                    V6_WMMA, V7_MMA_LDMATRIX, V8_WGMMA, V9_TMA_WS)

#: Candidates for shapes the tiles do not divide (the fastest is recorded as ``v5_padded`` / ``v8_padded``; v9 needs
#: none, its own sweep takes them): v5's rung tiling and smaller tiles like those that won at 1024^3; v8 also 256x192
#: tiles, which spread the cost of an unaligned row pitch (K = 1000, N = 3000) over more columns (``docs/gemm.md``).
PADDED: dict[str, tuple[dict[str, Any], ...]] = {
    V5_WARP_TILED.name: (
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 8, "stages": 3},
        {"block_tile": (128, 64), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 4},
    ),
    V8_WGMMA.name: (
        {"block_tile": (256, 192), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (256, 192), "stages": 3, "overlap": True},
        {"block_tile": (128, 128), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (128, 64), "stages": 4, "overlap": True},
        {"block_tile": (64, 128), "stages": 4, "overlap": True},
    ),
}


#: Tiles the GEMM rules add for v5 (``gemm.rules``; notebook 03's padded sweep keeps ``PADDED``'s): 96 and 192 rows or
#: columns (k tiles of 24, so that 384 or 192 threads copy whole 4-float vectors), whose block counts fill the last
#: wave of the SMs where powers of two leave it a tenth full (2500 x 3500: 560 tiles of 128 x 128 are 4.2 waves of an
#: H100's SMs, 392 of 192 x 128 are 2.97); and 96 x 256 (twelve warps, one block per SM: 145 registers a thread) in
#: k tiles of 48 with 2 stages or of 24 with 3 and 4096^3's FFMA order (``columns_outer``), whose 260 blocks at
#: 1200 x 5000 are 1.97 waves where 128 x 256's 200 are 1.52 (96 x 128's 520 blocks are as many waves of two blocks
#: an SM, with less reuse).
WAVE_TILES: dict[str, tuple[dict[str, Any], ...]] = {
    V5_WARP_TILED.name: (
        {"block_tile": (192, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 24, "stages": 3},
        {"block_tile": (128, 192), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 24, "stages": 3},
        {"block_tile": (96, 128), "warp_tile": (32, 64), "thread_tile": (8, 8), "tile_k": 24, "stages": 3},
        {"block_tile": (128, 96), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 24, "stages": 3},
        {"block_tile": (96, 256), "warp_tile": (32, 64), "thread_tile": (8, 8), "tile_k": 48, "stages": 2},
        {"block_tile": (96, 256), "warp_tile": (32, 64), "thread_tile": (8, 8), "tile_k": 24, "stages": 3,
         "columns_outer": True},
    ),
}

#: Tiles the GEMM rules add for v9 (``gemm.rules``; not in its sweep, notebook 03's): 192 columns, whose block counts
#: fill the last wave where 256 leave it half empty (2000 x 3000: 256 tiles of 128 x 192 are 1.94 waves of an H100's
#: SMs, 192 of 128 x 256 are 1.45), in 128 rows (two consumers, persistent or one block per tile) and in 64 (one
#: consumer: 512 tiles, 3.9 waves); and 64 x 64 tiles with one consumer and a deep ring, 256 blocks at 1000^3 where
#: 128 x 64 tiles give 128 and leave four of an H100's SMs idle; and tiles whose clusters of two blocks share the A tile
#: (``multicast``: a block reads half of A from L2, 2000 x 3000's 128 x 192 tiles 32 KB a k tile instead of 40), one
#: block per tile or persistent (one block an SM, in clusters of two: a tile's epilogue overlaps the next tile's first
#: loads); and persistent clusters of two that share the B tile instead (``shares="B"``, as cuBLAS's kernel at
#: 2000 x 3000 x 1000 does: 128 x 192's B tile is the larger, 24 KB a k tile against A's 16; on the H200 26.0 us
#: against 27.7 sharing A, one block per tile 29.5, ``tools/gpu-checks/probe/multicast_probe.py``).
#: Measured in ``tools/gpu-checks/gemm_rules.py``.
FP16_WAVE_TILES: dict[str, tuple[dict[str, Any], ...]] = {
    V9_TMA_WS.name: (
        {"block_tile": (128, 192), "stages": 4},
        {"block_tile": (128, 192), "stages": 4, "persistent_ctas": 0},
        {"block_tile": (64, 192), "stages": 6, "consumers": 1},
        {"block_tile": (64, 64), "stages": 8, "consumers": 1, "persistent_ctas": 0},
        *({**tile, "persistent_ctas": 0, "multicast": 2} for tile in (
            {"block_tile": (128, 192), "stages": 4},
            {"block_tile": (128, 128), "stages": 6},
            {"block_tile": (128, 64), "stages": 6},
        )),
        *({**tile, "multicast": 2} for tile in (   # persistent clusters
            {"block_tile": (128, 192), "stages": 4},
            {"block_tile": (128, 256), "stages": 4},
            {"block_tile": (128, 128), "stages": 6},
        )),
        *({**tile, "multicast": 2, "shares": "B"} for tile in (   # persistent clusters sharing B
            {"block_tile": (128, 192), "stages": 4},
            {"block_tile": (128, 128), "stages": 6},
        )),
    ),
}

#: v9's tiles for split-K in a thread-block cluster (``gemm.tma_ws``'s ``split``: one block per tile and slice of K, the
#: slices summed through distributed shared memory, the register epilogue), with a ring that leaves room for the
#: block's float32 partial tile. The GEMM rules offer each in the slices that keep its blocks within one wave of the
#: SMs, where the GEMM has fewer such tiles than SMs (100 x 3000: 24 tiles of 128 x 128 for an H100's SMs, 4 slices
#: of 1250 make 96 blocks, the H200's choice; 1000^3: 64 tiles, 2 slices). Measured in
#: ``tools/gpu-checks/gemm_rules.py``.
CLUSTER_SPLIT_TILES: dict[str, tuple[dict[str, Any], ...]] = {
    V9_TMA_WS.name: tuple({**tile, "persistent_ctas": 0, "tma_store": False} for tile in (
        {"block_tile": (128, 128), "stages": 4},
        {"block_tile": (128, 192), "stages": 3},
        {"block_tile": (128, 64), "stages": 6},
        {"block_tile": (64, 128), "stages": 6, "consumers": 1},
    )),
}

#: Candidates for GEMMs of few rows (the GEMM rules offer them beside the others; ``gemm.rules``): 64-row tiles
#: narrow enough that a GEMM of 64 rows still has a block for every SM (at M = 37, N = 4096: 128 blocks of 64 x 32
#: where 64 x 64 tiles give 64 and leave half of an H100's SMs idle; v8's B tile stays 64 halves wide, the 128-byte
#: row its swizzled layout needs). Measured in ``tools/gpu-checks/gemm_rules.py``.
NARROW: dict[str, tuple[dict[str, Any], ...]] = {
    V5_WARP_TILED.name: (
        {"block_tile": (64, 32), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 4},
    ),
    V8_WGMMA.name: (
        {"block_tile": (64, 64), "stages": 4, "overlap": True},
    ),
}

#: The slices the split-K sweeps try for each of their tiles.
SPLITS = (2, 4, 8, 16)


def with_splits(*tiles: dict[str, Any], splits: tuple[int, ...] = SPLITS) -> tuple[dict[str, Any], ...]:
    """Each of ``tiles`` with each of ``splits``: a split-K family's sweep."""
    return tuple({"split": split, **tile} for tile in tiles for split in splits)


#: Split-K for GEMMs of few rows (``gemm.splitk``; the GEMM rules offer it at up to ``rules.SPLITK_ROWS`` rows): K in
#: 2-16 slices, each computed by its own blocks, so a 37 x 4096 C of 64 block tiles makes 128-1024 blocks for an H100's
#: SMs. A tile takes every row: 64-row tiles for up to 64 rows, 112- and 128-row ones for 65-112 and 65-128. float32
#: through v5's nest (64 x 32 as ``NARROW``'s, 64 x 64, 128 x 32, 128 x 64, 128 x 128; 128 x 128 also in 11 slices: 264
#: blocks at 100 x 3000, one round of two 256-thread blocks on each of an H100's SMs, where 16 slices make 384; and 112
#: x 128 in seven warps of 16 x 128 with k tiles of 28 (the multiple of 4 and 7 that 224 threads copy whole), in 8, 10
#: or 11 slices: 100 rows padded to 112 rather than 128, an eighth less work and fewer partial sums; also in 11 slices
#: with 8 x 4 thread tiles, fourteen warps of 16 x 64; and v5's 128 x 256 tiles of 4096^3 in 11 slices, also in its FFMA
#: order there (``columns_outer``; so too 128 x 128 in 11): 12 tiles of a 3000-column C in 11 slices are a block for
#: each of an H100's SMs, each with the most reuse of a loaded value (cuBLAS's own choice at 100 x 3000 x 5000 is a SIMT
#: 256 x 128 kernel on the transposed product and a split-K reduction; measured slower: 10 slices, k tiles of 8 in 4
#: stages as cuBLAS's, 112 x 256 tiles, and 8 x 16 thread tiles in eight warps of 64 x 64 as cuBLAS's, and 104-row
#: tiles, a fifth less work, but in 13 warps of one row of lanes (8 x 256, k tiles of 52 that 416 threads copy whole),
#: which read 2.6 times the shared memory a multiply-add), float16 through v8's wgmma (with the overlap of ``NARROW``'s
#: and ``PADDED``'s tiles; also 128 x 192, whose 16 tiles of a 3000-column C in 8 slices are 128 blocks, one wave, where
#: 128 x 128 needs 16 slices and twice the partial sums) and v7's mma.sync (64 x 64, 64 x 128, 128 x 64, 128 x 128
#: each); measured in ``tools/gpu-checks/gemm_rules.py`` (results/kernel/gemm_rules.csv).
SPLITK_SIMT = KernelRecord(
    "splitk_simt", gemm_splitk_simt,
    {"split": 4, "block_tile": (64, 32), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 4,
     "async_copy": True}, FP32_GEMM, SIMT_ASYNC_CONFIG, candidates=with_splits(
        {"block_tile": (64, 32), "warp_tile": (32, 32), "thread_tile": (8, 4)},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (8, 4)},
        {"block_tile": (128, 32), "warp_tile": (32, 32), "thread_tile": (8, 4)},
        {"block_tile": (128, 64), "warp_tile": (32, 32), "thread_tile": (8, 4)},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8)},
    ) + with_splits(
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8)},
        {"block_tile": (112, 128), "warp_tile": (16, 64), "thread_tile": (8, 4), "tile_k": 28, "stages": 3},
        splits=(11,),
    ) + with_splits(
        {"block_tile": (112, 128), "warp_tile": (16, 128), "thread_tile": (8, 8), "tile_k": 28, "stages": 3},
        splits=(8, 10, 11),
    ) + with_splits(
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "stages": 3, "columns_outer": True},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "columns_outer": True},
        splits=(11,),
    ), needs=("cp_async",))
SPLITK_WGMMA = KernelRecord(
    "splitk_wgmma", gemm_splitk_wgmma,
    {"split": 4, "block_tile": (64, 64), "tile_k": 64, "stages": 4, "overlap": True}, FP16_GEMM, MMA_ASYNC_CONFIG,
    candidates=with_splits(
        {"block_tile": (64, 64)},
        {"block_tile": (64, 128)},
        {"block_tile": (128, 64)},
        {"block_tile": (128, 128), "stages": 3},
        {"block_tile": (128, 192), "stages": 3},
    ), needs=("cp_async", "wgmma"))
SPLITK_MMA = KernelRecord(
    "splitk_mma", gemm_splitk_mma,
    {"split": 4, "block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32, "stages": 4, "prefetch": "k_step"},
    FP16_GEMM, MMA_ASYNC_CONFIG, candidates=with_splits(
        {"block_tile": (64, 64), "warp_tile": (32, 32)},
        {"block_tile": (64, 128), "warp_tile": (32, 64)},
        {"block_tile": (128, 64), "warp_tile": (64, 32)},
        {"block_tile": (128, 128), "warp_tile": (64, 64)},
    ), needs=("ldmatrix", "mma_m16n8k16", "cp_async"))


def fits_rows(record: KernelRecord, cand: dict[str, Any], m: int) -> bool:
    """Whether ``cand``'s block tile (``record``'s default where it names none) is no taller than ``m`` rows rounded
    up to 64 (the extra rows of a taller one would be all padding: at M = 37 a 128-row tile multiplies 91 rows of
    zeros where a 64-row one multiplies 27) and its ``raster`` divides the padded block rows."""
    rows = record.params(cand)["block_tile"][0]
    return rows <= -(-m // 64) * 64 and -(-m // rows) % cand.get("raster", 1) == 0


def padded(record: KernelRecord, m: int) -> KernelRecord:
    """``record`` with its ``PADDED`` candidates for a GEMM of ``m`` rows, less those that do not fit its rows
    (``fits_rows``)."""
    return record.with_candidates(cand for cand in PADDED[record.name] if fits_rows(record, cand, m))


def divisible_shape(size: tuple[int, int, int]) -> tuple[int, int, int]:
    """The nearest shape at or above ``size`` that every tile ``padded`` gives there (both rungs) divides, with M and
    N rounded up to at least 128 and K to 64 (what a padded kernel's rate is compared with)."""
    units = [128, 128, 64]
    for record in (V5_WARP_TILED, V8_WGMMA):
        for cand in padded(record, size[0]).candidates:
            params = record.params(cand)
            units = [math.lcm(u, t) for u, t in zip(units, (*params["block_tile"], params["tile_k"]))]
    return tuple(-(-x // unit) * unit for x, unit in zip(size, units))

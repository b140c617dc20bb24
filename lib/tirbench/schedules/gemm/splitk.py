"""Split-K GEMM for few rows: K cut into ``split`` slices, each slice's partial C computed by its own blocks, then
summed by a second kernel (deterministic: no atomics).

A GEMM of 37 or 100 rows has N / 64 = 47-64 block tiles for an H100's SMs, each looping over all of K. ``rfactor`` turns
the sum over K into ``split`` partial sums (as ``conv.direct.conv2d_nchw_splitk`` does for batch-1 convolutions):
block "C_rf" writes them to a float32 buffer and block "C" adds the slices up. The partial GEMM is laid out as a
GEMM of ``split`` x M rows (``transform_block_layout``: row ``slice * M + i`` of its C is slice ``slice`` of row i;
its A is A's row i from column ``slice * K / split``, through a ``reindex`` block that the shared-memory fill
inlines), so the GEMM ladder's helpers schedule it unchanged: v5's warp-tiled SIMT kernel for float32
(``gemm_splitk_simt``); for float16 inputs with a float32 C, v8's wgmma (``gemm_splitk_wgmma``) and v7's ldmatrix +
mma.sync (``gemm_splitk_mma``). A block
tile takes every row of C (M padded to its rows), so block row = slice: ``split`` times as many blocks as tiles,
each looping over a ``split``-th of K. (With several block rows to a slice, TVM cannot tell that a tile's B rows lie
in one slice: v5's fragments go to local memory and llvm refuses its unrolled loops.)

Any m, n, k: M, N and K are padded to (``block_tile``, ``split`` x ``tile_k``) first (``common.padding``: predicated
fills; the sum stores only the real outputs). Costs: the partial buffer (``split`` x padded M x padded N floats,
written once and read once, padding rows included) and a second launch.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_positive_int
from tirbench.schedules.common.padding import Padding, pad_to_tiles, padded_extents
from tirbench.schedules.gemm.simt import gemm_v5_warp_tiled
from tirbench.schedules.gemm.tensorcore import TILE_PARAMS, gemm_v7_mma
from tirbench.schedules.gemm.warpgroup import gemm_v8_wgmma

#: The largest split the family takes (more slices than this make the partial buffer outweigh the GEMM's own
#: traffic at few rows).
MAX_SPLIT = 32
#: Most threads per block of the kernel that sums the slices.
SUM_THREADS = 128
#: Outputs per thread of that kernel (the padded N is a multiple of the block tile's columns, so of 4).
SUM_VECTOR = 4


def require_split(split: int, k: int, tile_k: int) -> None:
    """ValueError unless ``split`` is 2..``MAX_SPLIT`` and every slice of the padded K has some of the real K (the
    last slice would otherwise multiply only padding)."""
    require_positive_int(split, param="split")
    require_positive_int(tile_k, param="tile_k")
    if not 2 <= split <= MAX_SPLIT:
        raise ValueError(f"split={split}: a split-K GEMM cuts K into 2 to {MAX_SPLIT} slices")
    per_slice = -(-k // (split * tile_k)) * tile_k
    if (split - 1) * per_slice >= k:
        raise ValueError(f"split={split} with tile_k={tile_k}: k={k} fills only {-(-k // per_slice)} slices of "
                         f"{per_slice}; pick a smaller split or tile_k")


def split_k(sch: s_tir.Schedule, *, split: int, block_tile: tuple[int, int], tile_k: int,
            block: str = "C") -> Padding:
    """Pad the GEMM block ``block`` to (``block_tile``, ``split`` x ``tile_k``) and rfactor its k loop into ``split``
    slices: block ``<block>_rf``, a GEMM of ``split`` x padded-M rows into a 2-D partial buffer, ready for a GEMM
    helper (module docstring). Returns the blocks ``finish`` folds away once the helper has made its shared tiles:
    A's slice-major rows (the ``reindex`` block) and the padding's."""
    rows, _, k = (loop_extent(sch, loop) for loop in sch.get_loops(sch.get_sblock(block)))
    require_split(split, k, tile_k)
    m, _, _ = padded_extents(sch, block, (*block_tile, split * tile_k), TILE_PARAMS)
    if m != block_tile[0]:
        raise ValueError(f"block_tile[0]={block_tile[0]} is shorter than the m={rows} rows: a split-K block tile "
                         f"takes every row (so that a tile's rows lie in one slice), pick {m} or more")
    padding = pad_to_tiles(sch, block, (*block_tile, split * tile_k))
    blk = sch.get_sblock(block)
    _, _, kk = sch.get_loops(blk)
    slices, _ = sch.split(kk, factors=[split, None])
    partial = sch.rfactor(slices, factor_axis=0)
    i, j, slices, kk = sch.get_loops(partial)
    sch.reorder(slices, i, j, kk)
    sch.transform_layout(partial, ("write", 0), lambda s, r, c: (s * m + r, c))
    sch.transform_block_layout(partial, lambda s, r, c, d: (s * m + r, c, d))
    a_rows = sch.get(sch.reindex(partial, ("read", 0))).name_hint
    return Padding((a_rows, *padding.inputs), padding.output)


def finish(sch: s_tir.Schedule, padding: Padding, block: str = "C") -> s_tir.Schedule:
    """After a GEMM helper scheduled the partial block: ``padding``'s input blocks (A's slice-major rows, the pad
    blocks) inlined into the helper's shared-memory fills, and the sum of the slices scheduled (``_sum_slices``)."""
    padding.inline_inputs(sch)
    _sum_slices(sch, block, padding.output)
    return sch


def _sum_slices(sch: s_tir.Schedule, block: str, crop: str | None) -> None:
    """Block ``block`` (C = the sum of the slices): ``SUM_VECTOR`` outputs per thread (16-byte loads of the partial
    rows, the sums in registers), a block per row and per run of columns that the largest divisor of the padded
    columns / ``SUM_VECTOR`` up to ``SUM_THREADS`` threads covers (a divisor: no lanes past the row, so the stores
    need no predicate but the padding crop's, ``crop``, inlined into them)."""
    blk = sch.get_sblock(block)
    i, j, slices = sch.get_loops(blk)
    quads = loop_extent(sch, j) // SUM_VECTOR
    threads = max(d for d in range(1, SUM_THREADS + 1) if quads % d == 0)
    acc = sch.cache_write(blk, 0, "local")
    j, lanes, vec = sch.split(j, factors=[None, threads, SUM_VECTOR])
    sch.bind(sch.fuse(i, j), "blockIdx.x")
    sch.bind(lanes, "threadIdx.x")
    sch.reorder(slices, vec)
    sch.unroll(slices)
    sch.vectorize(vec)
    sch.reverse_compute_at(acc, lanes)
    if crop:
        sch.reverse_compute_inline(sch.get_sblock(crop))
    sch.vectorize(sch.get_loops(acc)[-1])


def gemm_splitk_simt(sch: s_tir.Schedule, *, split: int = 4, block_tile: tuple[int, int] = (64, 32),
                     warp_tile: tuple[int, int] = (32, 32), thread_tile: tuple[int, int] = (8, 4),
                     tile_k: int = 16, stages: int = 4, async_copy: bool = True,
                     columns_outer: bool = False, prefetch: str = "none") -> s_tir.Schedule:
    """float32 split-K: the partial GEMM is v5's warp-tiled SIMT kernel (``gemm_v5_warp_tiled``: float4 copies,
    cp.async, a ``stages``-deep pipeline, the FFMA order ``columns_outer``, fragment loads ahead of the math
    ``prefetch``) with these tiles; ``split`` slices of K."""
    padding = split_k(sch, split=split, block_tile=block_tile, tile_k=tile_k)
    gemm_v5_warp_tiled(sch, block="C_rf", block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile,
                       tile_k=tile_k, stages=stages, async_copy=async_copy, columns_outer=columns_outer,
                       prefetch=prefetch)
    return finish(sch, padding)


def gemm_splitk_mma(sch: s_tir.Schedule, *, split: int = 4, block_tile: tuple[int, int] = (64, 64),
                    warp_tile: tuple[int, int] = (32, 32), tile_k: int = 32, stages: int = 4,
                    prefetch: str = "k_step") -> s_tir.Schedule:
    """float16 split-K (float32 partial sums and C): the partial GEMM is v7's ldmatrix + mma.sync kernel
    (``gemm_v7_mma``) with these tiles; ``split`` slices of K."""
    padding = split_k(sch, split=split, block_tile=block_tile, tile_k=tile_k)
    gemm_v7_mma(sch, block="C_rf", block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages,
                async_copy=True, prefetch=prefetch)
    return finish(sch, padding)


def gemm_splitk_wgmma(sch: s_tir.Schedule, *, split: int = 4, block_tile: tuple[int, int] = (64, 64),
                      tile_k: int = 64, stages: int = 4, overlap: bool = True) -> s_tir.Schedule:
    """float16 split-K (float32 partial sums and C) on Hopper: the partial GEMM is v8's wgmma kernel
    (``gemm_v8_wgmma``, swizzled shared tiles; ``overlap``: the next tile's copies issued before this tile's
    math) with these tiles; ``split`` slices of K."""
    padding = split_k(sch, split=split, block_tile=block_tile, tile_k=tile_k)
    gemm_v8_wgmma(sch, block="C_rf", block_tile=block_tile, tile_k=tile_k, stages=stages, overlap=overlap)
    return finish(sch, padding)

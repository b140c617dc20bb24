"""Tiling machinery shared by the GEMM schedules (``gemm``, ``gemm_tensorcore``) and the implicit-GEMM
convolutions (``conv2d``, ``conv2d_tensorcore``): the device limits (``WARP``, ``MAX_SHARED_BYTES``), block lookups
(``gemm_block``, ``has_block``), the parameter checks of tiled kernels (``require_*``, ``check_simt_tiles``), block
rasterization (``bind_blocks``), shared-memory row padding (``padded``), fragment tiles for tensor-core intrinsics
(``split_tile``), the software pipeline (``pipeline``, ``PREFETCH``), the SIMT loop nest of v2..v5 (``simt_nest``)
and the PassContext config its cp.async copies need (``SIMT_ASYNC_CONFIG``); for tiles a MetaSchedule design space
samples, ``SampledTile`` / ``tile_loop`` and ``split_threads`` (warps given as split factors).
"""
from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir
from tvm.s_tir.schedule import ExprRV

from tirbench.core.gpu import current_gpu
from tirbench.schedules.common.checks import loop_extent, require_divides, require_positive_int, require_threads

WARP = 32
#: Shared memory one block may use on the GPU the suite builds for (``current_gpu()``: 227 KB on Hopper, 99 KB on
#: an sm_86/89/120 GPU). The tiles live in dynamic shared memory ("shared.dyn"), since static shared memory stops
#: at 48 KB; TVM's CUDA runtime raises the kernel's limit (cuFuncSetAttribute) when a launch asks for more than that.
MAX_SHARED_BYTES = current_gpu().shared_memory_per_block
#: 32-bit registers of an SM of that GPU, shared by the threads of the blocks it runs.
REGISTERS_PER_SM = current_gpu().registers_per_sm


def gemm_block(sch: s_tir.Schedule, name: str = "C", *, batch: bool = False) -> tuple[s_tir.SBlockRV, int, int, int]:
    """The GEMM-shaped block ``name`` (loops m, n, k; "C" in a GEMM, "conv" once ``conv2d_as_gemm`` reindexed a
    convolution) and the extents (m, n, k) of its loops. ``batch``: a batch loop comes first (a batched GEMM, one
    per group of a grouped convolution: ``conv.simt_gemm.nhwc_grouped_as_gemm``)."""
    blk = sch.get_sblock(name)
    m, n, k = (loop_extent(sch, loop) for loop in sch.get_loops(blk)[int(batch):])
    return blk, m, n, k


def split_tile(sch: s_tir.Schedule, copy: s_tir.SBlockRV, rows: int, cols: int) -> s_tir.LoopRV:
    """Split a fragment copy's last two loops into ``rows`` x ``cols`` tiles; return the outer loop of one tile
    (what a tensor-core load/store intrinsic is tensorized at)."""
    r, c = sch.get_loops(copy)[-2:]
    r0, r1 = sch.split(r, factors=[None, rows])
    c0, c1 = sch.split(c, factors=[None, cols])
    sch.reorder(r0, c0, r1, c1)
    return r1


def has_block(sch: s_tir.Schedule, name: str) -> bool:
    """Whether the function has a top-level block called ``name``."""
    return any(sch.get(b).name_hint == name for b in sch.get_child_blocks(sch.get_sblock("root")))


def warps_of(block_tile: tuple[int, int], warp_tile: tuple[int, int]) -> int:
    """The warps of a ``block_tile`` cut into ``warp_tile``s; a one-line ValueError unless the warp tile divides the
    block tile on both axes (before a kernel sizes anything by the warp count)."""
    require_divides(block_tile[0], warp_tile[0], param="warp_tile[0]", axis="block_tile[0]")
    require_divides(block_tile[1], warp_tile[1], param="warp_tile[1]", axis="block_tile[1]")
    return (block_tile[0] // warp_tile[0]) * (block_tile[1] // warp_tile[1])


def require_multiple(value: int, unit: int, *, param: str) -> None:
    if value % unit:
        raise ValueError(f"{param}={value} must be a multiple of {unit}")


def require_shared(nbytes: int, *, block_tile: tuple[int, int], tile_k: int, stages: int) -> None:
    if nbytes > MAX_SHARED_BYTES:
        raise ValueError(f"block_tile={block_tile}, tile_k={tile_k}, stages={stages} need {nbytes} bytes of shared "
                         f"memory per block, more than {MAX_SHARED_BYTES}")


def require_fetch(rows: int, tile_k: int, threads: int, vector: int, *, operand: str) -> None:
    """The cooperative fetch gives every thread the same number of ``vector``-wide copies."""
    if rows * tile_k % (threads * vector):
        raise ValueError(f"tile_k={tile_k}: the {operand} tile ({rows * tile_k} elements) is not a multiple of "
                         f"{threads} threads x {vector}-element copies")


@dataclass(frozen=True)
class SampledTile:
    """A tile size left to MetaSchedule: ``unit`` times a factor of (the loop's extent / ``unit``), at most
    ``max_units``, drawn by ``sample_perfect_tile`` (so it always divides the loop, and ``MutateTileSize`` moves it)."""

    unit: int
    max_units: int


#: The warps of a block as ``split`` factors: a count, or the factors whose product it is (a sampled count: the
#: sampled factor and its unit, from ``tile_loop``).
Warps = int | tuple[int | ExprRV, ...]


def tile_loop(sch: s_tir.Schedule, loop: s_tir.LoopRV,
              size: int | SampledTile) -> tuple[s_tir.LoopRV, s_tir.LoopRV, Warps]:
    """Split ``loop`` into (tiles, one tile of ``size``); returns them and the tile size as split factors (``Warps``).
    An int is one split; a ``SampledTile`` splits off its unit, samples a perfect tile of what is left and fuses the
    sampled factor with the unit into the one inner loop."""
    if isinstance(size, int):
        outer, inner = sch.split(loop, factors=[None, size])
        return outer, inner, size
    rest, unit = sch.split(loop, factors=[None, size.unit])
    units = sch.sample_perfect_tile(rest, n=2, max_innermost_factor=size.max_units)
    outer, sampled = sch.split(rest, factors=units)
    return outer, sch.fuse(sampled, unit), (units[1], size.unit)


def split_threads(sch: s_tir.Schedule, loop: s_tir.LoopRV, warps: Warps,
                  *inner: int) -> tuple[s_tir.LoopRV, ...]:
    """Split ``loop`` into (rest, warps -> threadIdx.y, 32 lanes -> threadIdx.x, *``inner``) and bind the threads;
    returns the loops in that order. Warps given as several factors (``Warps``) are fused into the threadIdx.y loop."""
    factors = (warps,) if isinstance(warps, int) else tuple(warps)
    rest, *loops = sch.split(loop, factors=[None, *factors, WARP, *inner])
    parts, (tx, *tail) = loops[:len(factors)], loops[len(factors):]
    ty = parts[0] if len(parts) == 1 else sch.fuse(*parts)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return (rest, ty, tx, *tail)


def bind_blocks(sch: s_tir.Schedule, by: s_tir.LoopRV, bx: s_tir.LoopRV, raster: int | s_tir.ExprRV) -> None:
    """Bind the block-row and block-column loops to blockIdx.x. ``raster > 1``: blocks launched together cover
    ``raster`` block rows at a time (column by column) instead of whole block rows, so the A and B panels they
    read overlap more and stay in L2. A sampled ``raster`` (an ExprRV) always gets the split."""
    if not isinstance(raster, int) or raster > 1:
        by, by_in = sch.split(by, factors=[None, raster])
        sch.reorder(by, bx, by_in)
        sch.bind(sch.fuse(by, bx, by_in), "blockIdx.x")
    else:
        sch.bind(sch.fuse(by, bx), "blockIdx.x")


def padded(stride: int, factor: int, offset: int) -> int:
    """The row stride ``storage_align(factor, offset)`` gives a row of ``stride`` elements."""
    return stride + (offset - stride) % factor


#: Fragment prefetching in the pipelined kernels: "none" loads the A/B fragments of a k step in that step;
#: "k_step" loads them one k step ahead within a k tile (register double buffering); "next_tile" also loads the
#: first k step of the next tile during this tile's last k step (needs stages >= 3, as in CUTLASS).
PREFETCH = ("none", "k_step", "next_tile")


def require_prefetch(prefetch: str, stages: int) -> None:
    if prefetch not in PREFETCH:
        raise ValueError(f"prefetch={prefetch!r}: expected one of {', '.join(map(repr, PREFETCH))}")
    if prefetch == "next_tile" and stages < 3:
        raise ValueError(f"prefetch='next_tile' needs stages >= 3 (the next tile must have landed), got {stages}")


def pipeline(sch: s_tir.Schedule, ko: s_tir.LoopRV, stages: int, async_copy: bool,
             ki: s_tir.LoopRV | None = None, next_tile: bool = False, math_first: bool = False) -> None:
    """Software-pipeline the k-tile loop ``ko`` (body: A copy, B copy, math) over ``stages`` shared buffers.

    ``ki``: also pipeline the fragment loads inside a tile (body: A load, B load, math), one k step ahead;
    ``ko``'s body then is [A copy, B copy, ki prologue, ki loop, ki epilogue]. ``next_tile``: the ki prologue
    (first fragments) runs one stage early, between this tile's ki loop and its epilogue (last k step).
    ``math_first``: the body runs the math before the copies (v8's overlap; TVM's cp.async wait count still
    assumes the copies come first, so the math must wait for its own tile).
    """
    if ki is not None:
        sch.annotate(ki, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(ki, "software_pipeline_order", [0, 1, 2])
    if stages == 1:
        return
    last = stages - 1
    if ki is None:
        stage, order = [0, 0, last], [1, 2, 0] if math_first else [0, 1, 2]
    elif next_tile:
        stage, order = [0, 0, last - 1, last, last], [0, 1, 3, 2, 4]
    else:
        stage, order = [0, 0, last, last, last], [0, 1, 2, 3, 4]
    sch.annotate(ko, "software_pipeline_stage", stage)
    sch.annotate(ko, "software_pipeline_order", order)
    if async_copy:
        sch.annotate(ko, "software_pipeline_async_stages", [0])


def check_simt_tiles(extents: tuple[int, int, int], *, block_tile: tuple[int, int],
                     warp_tile: tuple[int, int] | None, thread_tile: tuple[int, int], tile_k: int, vector: int,
                     stages: int, raster: int, prefetch: str, a_k_major: bool = False, async_copy: bool = False,
                     axes: tuple[str, str, str] = ("m", "n", "k")) -> int:
    """The checks of a shared-memory tiled SIMT kernel over GEMM extents (m, n, k); returns threads per block.

    ``axes`` names the three extents in the messages (a convolution calls them by its own names). ``a_k_major``:
    A arrives k-major, so its shared tile needs no padding for transposing stores (see ``simt_nest``).
    ``async_copy``: the transposed A tile is filled by 4-byte cp.async copies (``simt_nest``), so A's fetch needs only
    a whole number of elements per thread (112 x 28 by 224 threads: 14 each), not of ``vector``-wide copies.
    """
    (m, n, k), (am, an, ak) = extents, axes
    (bm, bn), (tm, tn) = block_tile, thread_tile
    wm, wn = warp_tile or block_tile
    require_divides(m, bm, param="block_tile[0]", axis=am)
    require_divides(n, bn, param="block_tile[1]", axis=an)
    require_divides(k, tile_k, param="tile_k", axis=ak)
    if warp_tile is not None:
        require_divides(bm, wm, param="warp_tile[0]", axis="block_tile[0]")
        require_divides(bn, wn, param="warp_tile[1]", axis="block_tile[1]")
    within = "block_tile" if warp_tile is None else "warp_tile"
    require_divides(wm, tm, param="thread_tile[0]", axis=f"{within}[0]")
    require_divides(wn, tn, param="thread_tile[1]", axis=f"{within}[1]")
    if warp_tile is not None and (lanes := (wm // tm) * (wn // tn)) != WARP:
        raise ValueError(f"warp_tile={warp_tile} / thread_tile={thread_tile} gives {lanes} lanes, not {WARP}")
    threads = bm * bn // (tm * tn)
    require_threads(threads, param="block_tile/thread_tile")
    require_positive_int(stages, param="stages")
    require_prefetch(prefetch, stages)
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    if vector > 1:
        require_multiple(tm, vector, param="thread_tile[0]")
        require_multiple(tn, vector, param="thread_tile[1]")
    a_vector = 1 if async_copy and vector > 1 and not a_k_major else vector
    require_fetch(bm, tile_k, threads, a_vector, operand="A")
    require_fetch(bn, tile_k, threads, vector, operand="B")
    a_rows = padded(bm, 32, vector) if vector > 1 and not a_k_major else bm
    require_shared(stages * tile_k * (a_rows + bn) * 4, block_tile=block_tile, tile_k=tile_k, stages=stages)
    return threads


def simt_nest(sch: s_tir.Schedule, blk: s_tir.SBlockRV, *, rows: tuple[s_tir.LoopRV, ...],
               cols: tuple[s_tir.LoopRV, ...], k_loops: tuple[s_tir.LoopRV, s_tir.LoopRV], threads: int | None,
               vector: int, fragments: bool, stages: int, async_copy: bool, raster: int | s_tir.ExprRV,
               prefetch: str = "none", columns_outer: bool = False, a_k_major: bool = False, a_read: int = 0,
               b_fill_vector: int | None = None) -> None:
    """The loop nest of ``gemm.simt._simt`` once the loops are split, shared with the MetaSchedule space (``gemm_v5_space``)
    and the implicit-GEMM convolution (``tirbench.schedules.conv.direct``).

    ``rows`` / ``cols``: (block, warp, lane, *thread-tile loops) of m / n; ``k_loops``: (k tile, k in tile); the
    block's buffers may have batch axes before their two GEMM axes (a batched GEMM, its batch bound by the caller).
    ``threads=None``: the threads per block are not known while scheduling (sampled tile sizes), so the
    cooperative fetches are left to MetaSchedule's ``RewriteCooperativeFetch`` postprocessor. ``a_k_major``: the
    block's first read (A) is already stored k-major in global memory (a convolution's filter), so its shared tile
    is a plain copy of float4 rows, with no transposed, padded layout. ``a_read``: which of the block's two reads
    is A (1 where the block multiplies B by A, as the NCHW convolution's does); the A tile is fetched first.
    ``b_fill_vector``: the width of the B tile's copies (default ``vector``); 1 where B's rows are not known to be
    16-byte aligned and contiguous in memory (an im2col whose kernel window shifts or strides them: TVM would still
    emit 16-byte copies there).
    """
    (by, wy, ly, *ti), (bx, wx, lx, *tj), (ko, ki) = rows, cols, k_loops
    sch.reorder(by, bx, wy, wx, ly, lx, ko, ki, *ti, *tj)
    bind_blocks(sch, by, bx, raster)
    tx = sch.fuse(wy, wx, ly, lx)
    sch.bind(tx, "threadIdx.x")
    c_local = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(c_local, tx)
    operands = (a_read, 1 - a_read)
    for idx in operands:
        tile = sch.cache_read(blk, idx, "shared.dyn")
        sch.compute_at(tile, ko)
        vec = vector if idx == a_read or b_fill_vector is None else b_fill_vector
        if vector > 1 and idx == a_read and not a_k_major:
            sch.transform_layout(tile, ("write", 0), lambda *ix: (*ix[:-2], ix[-1], ix[-2]))  # after batch axes
            rank = len(sch.get(tile).writes[0].source.shape)
            sch.storage_align(tile, 0, axis=rank - 2, factor=32, offset=vector)
            vec = 1 if async_copy else vector  # cp.async needs a contiguous destination
        fused = sch.fuse(*sch.get_loops(tile)[-2:])
        if threads is None:  # the postprocessor reads the vector width from a (one-candidate) sampled value
            sch.annotate(tile, "meta_schedule.cooperative_fetch", sch.sample_categorical([vec], [1.0]))
            continue
        fetch, t, v = sch.split(fused, factors=[None, threads, vec])
        sch.bind(t, "threadIdx.x")
        sch.vectorize(v)
        sch.unroll(fetch)
    if fragments:
        for idx in operands:
            frag = sch.cache_read(blk, idx, "local")
            sch.compute_at(frag, ki)
            sch.vectorize(sch.split(sch.get_loops(frag)[-1], factors=[None, vector])[1])
    sch.decompose_reduction(blk, ko)
    if columns_outer:
        sch.reorder(*tj, *ti)
    for loop in (ki, *ti, *tj):
        sch.unroll(loop)
    sch.vectorize(sch.split(sch.get_loops(c_local)[-1], factors=[None, vector])[1])
    pipeline(sch, ko, stages, async_copy, ki=ki if fragments and prefetch != "none" else None,
             next_tile=prefetch == "next_tile")


#: cp.async in the SIMT kernels: the pipeline's copies become cp.async only with ``use_async_copy``, and the
#: float4-typed shared B tile that storage rewriting makes trips the async-copy pass.
SIMT_ASYNC_CONFIG = {"tirx.use_async_copy": True, "tirx.disable_storage_rewrite": True}
#: The same kernels with synchronous copies (``async_copy=False``, Turing): no ``use_async_copy``, the same shared
#: layout.
SIMT_SYNC_CONFIG = {"tirx.disable_storage_rewrite": True}

"""GEMM ladder: naive -> register tiles -> shared memory -> float4 -> pipeline -> warp tiles -> tensor cores.

Every helper schedules the block "C" of ``tirbench.workloads.gemm`` (row-major A[M, K] @ B[K, N], float32 C)
and checks its parameters first. The tensor-core helpers (v6, v7, v8) need a float16 workload; v6 and v7 import
``tvm.s_tir.tensor_intrin.cuda`` on first use (~35 s), v8 registers its own intrinsics (``wgmma_intrin``).
Variants with cp.async must be compiled inside ``tvm.transform.PassContext(config=gemm_pass_config(name))``;
without it their copies stay synchronous.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from tvm import s_tir

from tirbench.schedules import wgmma_intrin
from tirbench.schedules.checks import loop_extent, require_divides, require_positive_int, require_threads

WARP = 32
#: Shared memory one block may use on Hopper (227 KB). The tiles live in dynamic shared memory ("shared.dyn"),
#: since static shared memory stops at 48 KB; TVM's CUDA runtime raises the kernel's limit (cuFuncSetAttribute)
#: when a launch asks for more than that.
MAX_SHARED_BYTES = 227 * 1024


def _gemm_block(sch: s_tir.Schedule) -> tuple[s_tir.SBlockRV, int, int, int]:
    """Block "C" and the extents (m, n, k) of its loops."""
    blk = sch.get_sblock("C")
    m, n, k = (loop_extent(sch, loop) for loop in sch.get_loops(blk))
    return blk, m, n, k


def _require_float16(sch: s_tir.Schedule, blk: s_tir.SBlockRV, *, kernel: str) -> None:
    """ValueError unless the GEMM block reads float16 inputs (``kernel``: what needs them, for the message)."""
    dtype = sch.get(blk).reads[0].source.dtype
    if dtype != "float16":
        raise ValueError(f"{kernel} float16 inputs, got a {dtype} workload: use gemm(m, n, k, 'float16')")


def _require_multiple(value: int, unit: int, *, param: str) -> None:
    if value % unit:
        raise ValueError(f"{param}={value} must be a multiple of {unit}")


def _require_shared(nbytes: int, *, block_tile: tuple[int, int], tile_k: int, stages: int) -> None:
    if nbytes > MAX_SHARED_BYTES:
        raise ValueError(f"block_tile={block_tile}, tile_k={tile_k}, stages={stages} need {nbytes} bytes of shared "
                         f"memory per block, more than {MAX_SHARED_BYTES}")


def _require_fetch(rows: int, tile_k: int, threads: int, vector: int, *, operand: str) -> None:
    """The cooperative fetch gives every thread the same number of ``vector``-wide copies."""
    if rows * tile_k % (threads * vector):
        raise ValueError(f"tile_k={tile_k}: the {operand} tile ({rows * tile_k} elements) is not a multiple of "
                         f"{threads} threads x {vector}-element copies")


def _bind_blocks(sch: s_tir.Schedule, by: s_tir.LoopRV, bx: s_tir.LoopRV, raster: int | s_tir.ExprRV) -> None:
    """Bind the block-row and block-column loops to blockIdx.x. ``raster > 1``: blocks launched together cover
    ``raster`` block rows at a time (column by column) instead of whole block rows, so the A and B panels they
    read overlap more and stay in L2. A sampled ``raster`` (an ExprRV) always gets the split."""
    if not isinstance(raster, int) or raster > 1:
        by, by_in = sch.split(by, factors=[None, raster])
        sch.reorder(by, bx, by_in)
        sch.bind(sch.fuse(by, bx, by_in), "blockIdx.x")
    else:
        sch.bind(sch.fuse(by, bx), "blockIdx.x")


def _padded(stride: int, factor: int, offset: int) -> int:
    """The row stride ``storage_align(factor, offset)`` gives a row of ``stride`` elements."""
    return stride + (offset - stride) % factor


def gemm_v0_naive(sch: s_tir.Schedule, *, threads: tuple[int, int] = (16, 16)) -> s_tir.Schedule:
    """One thread per output: a ``threads[0] x threads[1]`` block of threads covers a tile of C."""
    blk, m, n, _ = _gemm_block(sch)
    require_threads(threads[0] * threads[1], param="threads")
    require_divides(m, threads[0], param="threads[0]", axis="m")
    require_divides(n, threads[1], param="threads[1]", axis="n")
    i, j, _k = sch.get_loops(blk)
    by, ty = sch.split(i, factors=[None, threads[0]])
    bx, tx = sch.split(j, factors=[None, threads[1]])
    sch.reorder(by, bx, ty, tx)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return sch


def gemm_v1_local(sch: s_tir.Schedule, *, thread_tile: tuple[int, int] = (8, 8), threads: tuple[int, int] = (8, 8),
                  tile_k: int = 4) -> s_tir.Schedule:
    """The MLC course's local blocking: each thread accumulates a ``thread_tile`` of C in registers."""
    blk, m, n, k = _gemm_block(sch)
    require_threads(threads[0] * threads[1], param="threads")
    require_divides(m, threads[0] * thread_tile[0], param="threads[0]*thread_tile[0]", axis="m")
    require_divides(n, threads[1] * thread_tile[1], param="threads[1]*thread_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    c_local = sch.cache_write(blk, 0, "local")
    i, j, kk = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, factors=[None, threads[0], thread_tile[0]])
    j0, j1, j2 = sch.split(j, factors=[None, threads[1], thread_tile[1]])
    k0, k1 = sch.split(kk, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(blk, k0)
    return sch


#: Fragment prefetching in the pipelined kernels: "none" loads the A/B fragments of a k step in that step;
#: "k_step" loads them one k step ahead within a k tile (register double buffering); "next_tile" also loads the
#: first k step of the next tile during this tile's last k step (needs stages >= 3, as in CUTLASS).
PREFETCH = ("none", "k_step", "next_tile")


def _require_prefetch(prefetch: str, stages: int) -> None:
    if prefetch not in PREFETCH:
        raise ValueError(f"prefetch={prefetch!r}: expected one of {', '.join(map(repr, PREFETCH))}")
    if prefetch == "next_tile" and stages < 3:
        raise ValueError(f"prefetch='next_tile' needs stages >= 3 (the next tile must have landed), got {stages}")


def _pipeline(sch: s_tir.Schedule, ko: s_tir.LoopRV, stages: int, async_copy: bool,
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
                     stages: int, raster: int, prefetch: str, a_k_major: bool = False,
                     axes: tuple[str, str, str] = ("m", "n", "k")) -> int:
    """The checks of a shared-memory tiled SIMT kernel over GEMM extents (m, n, k); returns threads per block.

    ``axes`` names the three extents in the messages (a convolution calls them by its own names). ``a_k_major``:
    A arrives k-major, so its shared tile needs no padding for transposing stores (see ``simt_nest``).
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
    _require_prefetch(prefetch, stages)
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    if vector > 1:
        _require_multiple(tm, vector, param="thread_tile[0]")
        _require_multiple(tn, vector, param="thread_tile[1]")
    _require_fetch(bm, tile_k, threads, vector, operand="A")
    _require_fetch(bn, tile_k, threads, vector, operand="B")
    a_rows = _padded(bm, 32, vector) if vector > 1 and not a_k_major else bm
    _require_shared(stages * tile_k * (a_rows + bn) * 4, block_tile=block_tile, tile_k=tile_k, stages=stages)
    return threads


def _simt(sch: s_tir.Schedule, *, block_tile: tuple[int, int], warp_tile: tuple[int, int] | None,
          thread_tile: tuple[int, int], tile_k: int, vector: int = 1, fragments: bool = False,
          stages: int = 1, async_copy: bool = False, raster: int = 1, prefetch: str = "none",
          columns_outer: bool = False) -> s_tir.Schedule:
    """Shared-memory tiled SIMT GEMM; v2..v5 switch its features on one by one.

    Each thread accumulates a ``thread_tile`` of C in registers. Threads are laid out row-major over the block
    tile, or (``warp_tile``) row-major over a warp tile, the warps row-major over the block. Each ``tile_k``
    step stages an A and a B tile in shared memory, fetched cooperatively by all threads. ``vector=4``: float4
    global loads and C stores; A stored transposed (k-major, so both operands are read as float4 along m/n)
    with rows padded by 4 floats (for tile_k=8 the transposing stores are conflict-free; a multiple of 4 keeps
    the float4 alignment, notes P10). ``fragments``: the
    A/B values of one k go through registers. ``stages > 1``: multi-buffered shared tiles, the next tiles'
    copies overlapping this tile's math; ``async_copy``: by cp.async (4-byte copies for the transposed A).
    ``raster``: the block order (see ``_bind_blocks``). ``prefetch``: see ``PREFETCH`` (needs ``fragments``).
    ``columns_outer``: a thread's multiply-adds run column by column instead of row by row (the same FFMAs in
    another order, which changes nvcc's register allocation: see ``gemm_v5_warp_tiled``).
    """
    _, m, n, k = _gemm_block(sch)
    threads = check_simt_tiles((m, n, k), block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile,
                               tile_k=tile_k, vector=vector, stages=stages, raster=raster, prefetch=prefetch)
    (bm, bn), (tm, tn) = block_tile, thread_tile
    wm, wn = warp_tile or block_tile
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    by, wy, ly, ti = sch.split(i, factors=[None, bm // wm, wm // tm, tm])
    bx, wx, lx, tj = sch.split(j, factors=[None, bn // wn, wn // tn, tn])
    ko, ki = sch.split(kk, factors=[None, tile_k])
    simt_nest(sch, blk, rows=(by, wy, ly, ti), cols=(bx, wx, lx, tj), k_loops=(ko, ki), threads=threads,
               vector=vector, fragments=fragments, stages=stages, async_copy=async_copy, raster=raster,
               prefetch=prefetch, columns_outer=columns_outer)
    return sch


def simt_nest(sch: s_tir.Schedule, blk: s_tir.SBlockRV, *, rows: tuple[s_tir.LoopRV, ...],
               cols: tuple[s_tir.LoopRV, ...], k_loops: tuple[s_tir.LoopRV, s_tir.LoopRV], threads: int | None,
               vector: int, fragments: bool, stages: int, async_copy: bool, raster: int | s_tir.ExprRV,
               prefetch: str = "none", columns_outer: bool = False, a_k_major: bool = False) -> None:
    """The loop nest of ``_simt`` once the loops are split, shared with the MetaSchedule space (``gemm_v5_space``)
    and the implicit-GEMM convolution (``tirbench.schedules.conv2d``).

    ``rows`` / ``cols``: (block, warp, lane, *thread-tile loops) of m / n; ``k_loops``: (k tile, k in tile).
    ``threads=None``: the threads per block are not known while scheduling (sampled tile sizes), so the
    cooperative fetches are left to MetaSchedule's ``RewriteCooperativeFetch`` postprocessor. ``a_k_major``: the
    block's first read (A) is already stored k-major in global memory (a convolution's filter), so its shared tile
    is a plain copy of float4 rows, with no transposed, padded layout.
    """
    (by, wy, ly, *ti), (bx, wx, lx, *tj), (ko, ki) = rows, cols, k_loops
    sch.reorder(by, bx, wy, wx, ly, lx, ko, ki, *ti, *tj)
    _bind_blocks(sch, by, bx, raster)
    tx = sch.fuse(wy, wx, ly, lx)
    sch.bind(tx, "threadIdx.x")
    c_local = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(c_local, tx)
    for idx in (0, 1):
        tile = sch.cache_read(blk, idx, "shared.dyn")
        sch.compute_at(tile, ko)
        vec = vector
        if vector > 1 and idx == 0 and not a_k_major:
            sch.transform_layout(tile, ("write", 0), lambda r, c: (c, r))
            sch.storage_align(tile, 0, axis=0, factor=32, offset=vector)
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
        for idx in (0, 1):
            frag = sch.cache_read(blk, idx, "local")
            sch.compute_at(frag, ki)
            sch.vectorize(sch.split(sch.get_loops(frag)[-1], factors=[None, vector])[1])
    sch.decompose_reduction(blk, ko)
    if columns_outer:
        sch.reorder(*tj, *ti)
    for loop in (ki, *ti, *tj):
        sch.unroll(loop)
    sch.vectorize(sch.split(sch.get_loops(c_local)[-1], factors=[None, vector])[1])
    _pipeline(sch, ko, stages, async_copy, ki=ki if fragments and prefetch != "none" else None,
              next_tile=prefetch == "next_tile")


def gemm_v2_shared(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                   thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8) -> s_tir.Schedule:
    """A and B tiles staged in shared memory by a cooperative (scalar) fetch; register accumulators."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k)


def gemm_v3_vectorized(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                       thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8) -> s_tir.Schedule:
    """v2 + float4 fetches and stores, a transposed A tile padded against bank conflicts, A/B fragments in
    registers (float4 shared loads)."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True)


def gemm_v4_pipelined(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                      thread_tile: tuple[int, int] = (8, 8), tile_k: int = 8, stages: int = 2,
                      async_copy: bool = True) -> s_tir.Schedule:
    """v3 + a ``stages``-deep software pipeline (double buffering by default) with cp.async copies."""
    return _simt(sch, block_tile=block_tile, warp_tile=None, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True, stages=stages, async_copy=async_copy)


def gemm_v5_warp_tiled(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                       warp_tile: tuple[int, int] = (64, 32), thread_tile: tuple[int, int] = (8, 8),
                       tile_k: int = 8, stages: int = 3, async_copy: bool = True,
                       raster: int = 1, prefetch: str = "none", columns_outer: bool = False) -> s_tir.Schedule:
    """v4 with a block -> warps -> threads hierarchy: each warp's 32 threads cover a compact ``warp_tile``
    (default 8 x 4 threads of 8x8 outputs = 64x32), so a warp reads fewer distinct A/B values from shared
    memory per k step (96 instead of 144 floats for the v4 layout). ``raster``: blocks ordered in groups of
    that many block rows, for L2 reuse. ``prefetch``: fragment loads ahead of the math (``PREFETCH``).
    ``columns_outer``: each thread's multiply-adds column by column (an H100 exploration measured 47.9 against
    46.2 TFLOPS at 4096^3 for the same tiles; Nsight blamed dispatch stalls, i.e. nvcc's register allocation)."""
    return _simt(sch, block_tile=block_tile, warp_tile=warp_tile, thread_tile=thread_tile, tile_k=tile_k,
                 vector=4, fragments=True, stages=stages, async_copy=async_copy, raster=raster, prefetch=prefetch,
                 columns_outer=columns_outer)


def _tensor_core(sch: s_tir.Schedule, *, mma: bool, block_tile: tuple[int, int], warp_tile: tuple[int, int],
                 tile_k: int, stages: int, async_copy: bool, raster: int = 1,
                 prefetch: str = "none") -> s_tir.Schedule:
    """Tensor-core GEMM on 16x16x16 tiles: wmma fragments, or (``mma``) ldmatrix + mma.sync m16n8k16.

    Block tile -> warps, each accumulating a ``warp_tile`` of C in 16x16 fragments. A/B tiles of ``tile_k``
    go to shared memory (16-byte copies; rows padded by 8 halves so fragment loads are conflict-free),
    fragments are loaded per 16-deep k step, accumulators are stored straight to C. ``prefetch`` (``mma`` only,
    see ``PREFETCH``): how far ahead of the math the fragment loads run.
    """
    blk, m, n, k = _gemm_block(sch)
    _require_float16(sch, blk, kernel="tensor cores need")
    (bm, bn), (wm, wn) = block_tile, warp_tile
    require_divides(m, bm, param="block_tile[0]", axis="m")
    require_divides(n, bn, param="block_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    require_divides(bm, wm, param="warp_tile[0]", axis="block_tile[0]")
    require_divides(bn, wn, param="warp_tile[1]", axis="block_tile[1]")
    for value, param in ((wm, "warp_tile[0]"), (wn, "warp_tile[1]"), (tile_k, "tile_k")):
        _require_multiple(value, 16, param=param)
    require_positive_int(stages, param="stages")
    _require_prefetch(prefetch, stages)
    if not mma and prefetch != "none":
        raise ValueError(f"prefetch={prefetch!r}: the wmma kernel loads its fragments in the step that uses them")
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    warps = (bm // wm) * (bn // wn)
    require_threads(warps * WARP, param="block_tile/warp_tile")
    _require_fetch(bm, tile_k, warps * WARP, 8, operand="A")
    _require_fetch(bn, tile_k, warps * WARP, 8, operand="B")
    _require_shared(stages * (bm * _padded(tile_k, 32, 8) + tile_k * _padded(bn, 32, 8)) * 2,
                    block_tile=block_tile, tile_k=tile_k, stages=stages)
    from tvm.s_tir.tensor_intrin import cuda as tc  # registers the intrinsics (slow on first import)

    if mma:
        intrins = dict(load_a=tc.LDMATRIX_f16_A_DYN_INTRIN, load_b=tc.LDMATRIX_f16_B_DYN_INTRIN,
                       compute=tc.MMA_f16f16f32_INTRIN, init=tc.MMA_fill_16x16_f32_INTRIN,
                       store=tc.MMA_store_16x16_f32_global_INTRIN)
        scopes = ("warp", "warp", "warp")
    else:
        intrins = tc.get_wmma_intrin_group(load_scope="shared.dyn", store_scope="global", in_dtype="float16",
                                           out_dtype="float32", trans_b=False)
        scopes = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")

    i, j, kk = sch.get_loops(blk)
    i, i16 = sch.split(i, factors=[None, 16])
    j, j16 = sch.split(j, factors=[None, 16])
    kk, k16 = sch.split(kk, factors=[None, 16])
    sch.reorder(i, j, kk, i16, j16, k16)
    tile = sch.blockize(i16)  # block "C_o": one 16x16x16 product
    by, wy, wi = sch.split(i, factors=[None, bm // wm, wm // 16])
    bx, wx, wj = sch.split(j, factors=[None, bn // wn, wn // 16])
    ko, ki = sch.split(kk, factors=[None, tile_k // 16])
    sch.reorder(by, bx, wy, wx, ko, ki, wi, wj)
    _bind_blocks(sch, by, bx, raster)
    warp = sch.fuse(wy, wx)
    sch.bind(warp, "threadIdx.y")
    for idx in (0, 1):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ko)
        _, ty, tx, vec = sch.split(sch.fuse(*sch.get_loops(sh)[-2:]), factors=[None, warps, WARP, 8])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
        sch.storage_align(sh, 0, axis=-2, factor=32, offset=8)
    frag_a, frag_b = (sch.cache_read(tile, idx, scopes[idx]) for idx in (0, 1))
    sch.compute_at(frag_a, ki)
    sch.compute_at(frag_b, ki)
    acc = sch.cache_write(tile, 0, scopes[2])
    sch.reverse_compute_at(acc, warp)
    sch.decompose_reduction(tile, ko)  # blocks "C_o_init" / "C_init"

    def tile16(block: s_tir.SBlockRV) -> s_tir.LoopRV:
        """Split the block's last two loops into 16x16 tiles; return the outer loop of one tile."""
        r, c = sch.get_loops(block)[-2:]
        r0, r1 = sch.split(r, factors=[None, 16])
        c0, c1 = sch.split(c, factors=[None, 16])
        sch.reorder(r0, c0, r1, c1)
        return r1

    load_a, load_b, store = tile16(frag_a), tile16(frag_b), tile16(acc)
    if mma:  # "warp" buffers laid out as [tile, tile, 32 lanes, 8 registers], the order ldmatrix/mma.sync use
        def lanes(r, c):
            return (r // 16, c // 16, *tc.shared_16x16_to_ldmatrix_32x8_layout(r % 16, c % 16))

        sch.transform_layout(frag_a, ("write", 0), lanes)
        sch.transform_layout(frag_b, ("write", 0), lanes)
        sch.transform_layout(acc, ("read", 0), lanes)
    sch.tensorize(load_a, intrins["load_a"])
    sch.tensorize(load_b, intrins["load_b"])
    sch.tensorize(sch.get_loops(sch.get_sblock("C_init"))[-2], intrins["init"])
    sch.tensorize(store, intrins["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock("C"))[-3], intrins["compute"])
    _pipeline(sch, ko, stages, async_copy, ki=ki if prefetch != "none" else None, next_tile=prefetch == "next_tile")
    return sch


def gemm_v6_wmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                 warp_tile: tuple[int, int] = (64, 32), tile_k: int = 32) -> s_tir.Schedule:
    """fp16 tensor cores through wmma 16x16x16 fragments (float32 accumulators); synchronous copies."""
    return _tensor_core(sch, mma=False, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=1,
                        async_copy=False)


def gemm_v7_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                warp_tile: tuple[int, int] = (64, 64), tile_k: int = 32, stages: int = 3,
                async_copy: bool = True, raster: int = 1, prefetch: str = "k_step") -> s_tir.Schedule:
    """fp16 tensor cores through ldmatrix + mma.sync m16n8k16: cp.async copies into a ``stages``-deep
    shared-memory pipeline, fragment loads ahead of the math (``prefetch``, default one k step: see
    ``PREFETCH``). ``raster``: blocks ordered in groups of that many block rows, for L2 reuse."""
    return _tensor_core(sch, mma=True, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages,
                        async_copy=async_copy, raster=raster, prefetch=prefetch)


def gemm_v8_wgmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128), tile_k: int = 64,
                  stages: int = 3, raster: int = 1, layout: str = "swizzle128",
                  overlap: bool = False) -> s_tir.Schedule:
    """fp16 tensor cores through Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a), operands read from shared
    memory by descriptor: every warp owns 16 rows x the whole block width; four warps form a warpgroup that
    multiplies its 64 rows per ``wgmma`` (``tirbench.schedules.wgmma_intrin``). cp.async fills a ``stages``-deep
    pipeline of tiles stored in one of wgmma's shared-memory ``layout``s (``"swizzle128"`` needs ``tile_k`` = 64;
    ``"interleaved"`` is the unswizzled one); accumulators go straight from registers to C. ``overlap``: a k
    tile's wgmma group keeps running while the warps copy the next tile (each tile waits for the previous tile's
    group, not its own; the copies move after the math, into the buffer that finished group read)."""
    blk, m, n, k = _gemm_block(sch)
    _require_float16(sch, blk, kernel="wgmma needs")
    bm, bn = block_tile
    require_divides(m, bm, param="block_tile[0]", axis="m")
    require_divides(n, bn, param="block_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    _require_multiple(bm, 64, param="block_tile[0]")  # whole warpgroups of 64 rows
    _require_multiple(bn, 16, param="block_tile[1]")
    if bn > wgmma_intrin.MAX_N:
        raise ValueError(f"block_tile[1]={bn}: one wgmma covers at most N={wgmma_intrin.MAX_N} columns")
    _require_multiple(tile_k, 16, param="tile_k")
    if layout not in wgmma_intrin.LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected one of {', '.join(map(repr, wgmma_intrin.LAYOUTS))}")
    if layout == "swizzle128" and tile_k != 64:
        raise ValueError(f"tile_k={tile_k}: the swizzle128 layout holds rows of 64 halves, so tile_k must be 64")
    require_positive_int(stages, param="stages")
    if overlap and stages < 3:  # with 2, TVM's pipeline keeps one buffer (right for synchronous math, not here)
        raise ValueError(f"overlap=True needs stages >= 3 (a buffer for the running group), got {stages}")
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    warps = bm // 16
    require_threads(warps * WARP, param="block_tile[0]")
    _require_fetch(bm, tile_k, warps * WARP, 8, operand="A")
    _require_fetch(bn, tile_k, warps * WARP, 8, operand="B")
    _require_shared(stages * (bm + bn) * tile_k * 2, block_tile=block_tile, tile_k=tile_k, stages=stages)

    i, j, kk = sch.get_loops(blk)
    i, i16 = sch.split(i, factors=[None, 16])
    bx, jn = sch.split(j, factors=[None, bn])
    ko, kt = sch.split(kk, factors=[None, tile_k])
    sch.reorder(i, bx, ko, i16, jn, kt)
    tile = sch.blockize(i16)  # block "C_o": one warp's 16 x bn x tile_k product
    by, warp = sch.split(i, factors=[None, warps])
    sch.reorder(by, bx, warp, ko)
    _bind_blocks(sch, by, bx, raster)
    sch.bind(warp, "threadIdx.y")
    for idx, place in enumerate((wgmma_intrin.a_layout, wgmma_intrin.b_layout)):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ko)
        sch.transform_layout(sh, ("write", 0), functools.partial(place, layout),
                             assume_injective_transform=True)  # XOR swizzles are bijective; TVM cannot tell
        r, c = sch.get_loops(sh)[-2:]
        r, r8 = sch.split(r, factors=[None, 8])
        c, c8 = sch.split(c, factors=[None, 8])
        if layout == "interleaved":  # consecutive threads fill consecutive 16 B rows of a core matrix
            sch.reorder(r, c, r8, c8)
            threads = sch.fuse(r, c, r8)
        else:  # consecutive threads fill the 8 chunks of a 128 B row, which the swizzle spreads over all banks
            threads = sch.fuse(r, r8, c)
        _, ty, tx = sch.split(threads, factors=[None, warps, WARP])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(c8)
    acc = sch.cache_write(tile, 0, "local")
    sch.reverse_compute_at(acc, warp)
    sch.decompose_reduction(tile, ko)  # blocks "C_o_init" / "C_init"
    # Each lane keeps the registers wgmma gives it: (16-column tile, register). The map drops the lane, so it is
    # not injective over the warp's 16 rows, which TVM cannot check; it holds per thread, which is what "local"
    # storage is, and every block touching these registers is tensorized with intrinsics written for it.
    sch.transform_layout(acc, ("read", 0), lambda r, c: wgmma_intrin.register_of(r, c),
                         assume_injective_transform=True)
    names = wgmma_intrin.intrin_names(bn, tile_k, layout, overlap_stages=stages if overlap else 0)
    sch.tensorize(sch.get_loops(sch.get_sblock("C_init"))[-2], names["init"])
    sch.tensorize(sch.get_loops(acc)[-2], names["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock("C"))[-3], names["compute"])
    _pipeline(sch, ko, stages, async_copy=True, math_first=overlap)
    return sch


def gemm_v5_space(sch: s_tir.Schedule, *, lanes: tuple[int, int] = (8, 4), stages: int = 3, prefetch: str = "none",
                  columns_outer: bool = False) -> s_tir.Schedule:
    """v5's template with its tile sizes left to MetaSchedule: a design space for ``ScheduleFn``.

    A warp's 32 threads are ``lanes`` (rows x columns); each thread computes 8 rows and 4 or 8 columns
    (``sample_categorical``: fragments and C stores stay float4); ``sample_perfect_tile`` splits what is left of m
    and of n into blocks x warps, ``tile_k`` is ``sample_categorical`` over 8/16/32 and the block order (``raster``)
    another perfect tile. ``lanes``, ``stages``, ``prefetch`` and the FFMA order (``columns_outer``, see
    ``gemm_v5_warp_tiled``) are fixed per space. The search measures each sample; ``VerifyGPUCode`` drops those with
    too many threads or too much shared memory.
    """
    blk, m, n, k = _gemm_block(sch)
    lm, ln = lanes
    if lm * ln != WARP:
        raise ValueError(f"lanes={lanes!r}: a warp's lanes (rows x columns) must multiply to {WARP}")
    require_positive_int(stages, param="stages")
    _require_prefetch(prefetch, stages)
    require_divides(m, lm * 8, param="lanes[0]*8", axis="m")
    require_divides(n, ln * 8, param="lanes[1]*8", axis="n")
    require_divides(k, 32, param="tile_k", axis="k")
    i, j, kk = sch.get_loops(blk)
    tn = sch.sample_categorical(candidates=[4, 8], probs=[0.5, 0.5])
    i, ly, ti = sch.split(i, factors=[None, lm, 8])
    j, lx, tj = sch.split(j, factors=[None, ln, tn])
    by, wy = sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    bx, wx = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    tile_k = sch.sample_categorical(candidates=[8, 16, 32], probs=[1 / 3] * 3)
    ko, ki = sch.split(kk, factors=[None, tile_k])
    raster = sch.sample_perfect_tile(by, n=2, max_innermost_factor=8)[1]
    simt_nest(sch, blk, rows=(by, wy, ly, ti), cols=(bx, wx, lx, tj), k_loops=(ko, ki), threads=None, vector=4,
               fragments=True, stages=stages, async_copy=True, raster=raster, prefetch=prefetch,
               columns_outer=columns_outer)
    return sch


#: The ladder, slowest first: name -> (helper, its default kwargs spelled out, input dtype of the workload).
LADDER: dict[str, tuple[Callable[..., s_tir.Schedule], dict[str, Any], str]] = {
    "v0_naive": (gemm_v0_naive, {"threads": (16, 16)}, "float32"),
    "v1_local": (gemm_v1_local, {"thread_tile": (8, 8), "threads": (8, 8), "tile_k": 4}, "float32"),
    "v2_shared": (gemm_v2_shared, {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8}, "float32"),
    "v3_vectorized": (gemm_v3_vectorized, {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8},
                      "float32"),
    "v4_pipelined": (gemm_v4_pipelined, {"block_tile": (128, 128), "thread_tile": (8, 8), "tile_k": 8,
                                         "stages": 2, "async_copy": True}, "float32"),
    "v5_warp_tiled": (gemm_v5_warp_tiled, {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8),
                                           "tile_k": 8, "stages": 3, "async_copy": True}, "float32"),
    "v6_wmma": (gemm_v6_wmma, {"block_tile": (128, 128), "warp_tile": (64, 32), "tile_k": 32}, "float16"),
    "v7_mma_ldmatrix": (gemm_v7_mma, {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3,
                                      "async_copy": True, "prefetch": "k_step"}, "float16"),
    "v8_wgmma": (gemm_v8_wgmma, {"block_tile": (128, 128), "tile_k": 64, "stages": 3, "raster": 1,
                                 "layout": "swizzle128"}, "float16"),
}

#: Tile configurations the notebook sweeps per size for the top rungs (each overrides LADDER's defaults).
#: Chosen from explorations on an H100/H200 (docs/notes-gemm.md; the 128x256 / 32x64 / k_step v5 one has the tile
#: sizes the v5-space search found at 4096^3, but v5's lane order, and is slower than the search's kernel): big block
#: tiles win at 4096^3, where there are blocks enough for every SM; small ones win at 1024^3, where 128x128 blocks
#: would leave half the SMs idle. v8's 128x128, 3-stage tile fits two blocks per SM (96 KB of shared memory each).
#: Candidates slower than another one at both sweep sizes in the recorded H100 runs were dropped (each build costs
#: 2-10 s); v7's LADDER tiling is timed as its rung, and v8's non-overlapped tiles stay as the overlap's baseline.
SWEEP: dict[str, list[dict[str, Any]]] = {
    "v5_warp_tiled": [
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
    ],
    "v7_mma_ldmatrix": [
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 64, "stages": 2, "raster": 8},
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 64, "stages": 3, "raster": 8,
         "prefetch": "next_tile"},
        {"block_tile": (128, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 3},
        {"block_tile": (64, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 4},
        {"block_tile": (64, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 4},
    ],
    "v8_wgmma": [
        {"block_tile": (128, 128), "stages": 3, "raster": 8},
        {"block_tile": (128, 256), "stages": 4, "raster": 8},
        {"block_tile": (64, 128), "stages": 4},
        {"block_tile": (128, 64), "stages": 4},
        {"block_tile": (128, 256), "stages": 4, "layout": "interleaved"},  # the lesson: unswizzled is ~3x slower
        {"block_tile": (128, 128), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (128, 256), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (128, 256), "stages": 4, "raster": 8, "overlap": True},
        {"block_tile": (256, 128), "stages": 3, "raster": 8, "overlap": True},
        {"block_tile": (64, 128), "stages": 4, "overlap": True},
        {"block_tile": (128, 64), "stages": 4, "overlap": True},
    ],
}

#: cp.async in the SIMT kernels: the pipeline's copies become cp.async only with ``use_async_copy``, and the
#: float4-typed shared B tile that storage rewriting makes trips the async-copy pass.
SIMT_ASYNC_CONFIG = {"tirx.use_async_copy": True, "tirx.disable_storage_rewrite": True}
#: cp.async in the mma kernel (storage rewriting must stay on there: the "warp" buffers need it).
MMA_ASYNC_CONFIG = {"tirx.use_async_copy": True}


def gemm_pass_config(variant: str) -> dict[str, bool]:
    """The PassContext config to compile LADDER[variant] with: ``{}`` unless it uses cp.async."""
    if variant not in LADDER:
        raise ValueError(f"variant={variant!r}: expected one of {', '.join(LADDER)}")
    return {"v4_pipelined": SIMT_ASYNC_CONFIG, "v5_warp_tiled": SIMT_ASYNC_CONFIG,
            "v7_mma_ldmatrix": MMA_ASYNC_CONFIG, "v8_wgmma": MMA_ASYNC_CONFIG}.get(variant, {})

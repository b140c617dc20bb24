"""The pieces Hopper's warp-specialized kernels are composed from, shared by v9 (``gemm.tma_ws``) and the
warp-specialized convolution (``conv.tma_ws``), as CUTLASS composes its kernels from a collective main loop and an
epilogue:

- ``smem_ring``: the shared-memory ring (A and B tiles of ``stages`` stages in the 128-byte-swizzled layout wgmma
  reads, the TMA-store staging) and its *full* / *empty* mbarriers (``lang.Pipeline``), committed and fenced;
- ``tma_producer``: the producer thread's loop when both tiles come by TMA;
- ``consumer_mainloop``: a consumer warpgroup's wgmma over the ring for one output tile;
- ``register_epilogue``: the accumulators stored straight from the registers, two adjacent columns a store;
- ``tma_store_epilogue`` (with ``staging_buffers``, ``epilogue_done``): the accumulators stored through shared memory
  by TMA;
- ``cluster_split_k``: split-K inside a thread-block cluster, each block of the cluster one slice of K, the slices'
  accumulators summed through distributed shared memory (no partial buffer in global memory, no second kernel).

Each is a TIRx inline function (or, for ``smem_ring``, a Python function called while the kernel is parsed) built for
the kernel's tile sizes; the kernels keep their own loops over the output tiles and their own producers' loads.
"""
from __future__ import annotations

from collections.abc import Callable

import tvm
from tvm import tirx
from tvm.backend.cuda.lang import Pipeline, SMEMPool
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from tirbench.schedules.intrinsics import wgmma

#: k per stage: one 128-byte swizzle row of halves.
TILE_K = 64
ROWS_PER_CONSUMER = 64  # one wgmma's M
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg budgets (multiples of 8; 128 x 40 + 256 x 232 <= 64 K)
K_STEP = 16  # halves per wgmma instruction
STAGING_BYTES = 2 * ROWS_PER_CONSUMER * 128  # per consumer, the TMA-store epilogue's two 64 x 128-byte buffers
#: Floats past each row of a split-K partial tile: rows 16 bytes out of step with the banks, so that the 8 rows a warp
#: writes at once are not one bank's (``cluster_split_k``).
PARTIAL_PAD = 4
#: The most blocks of a thread-block cluster that every Hopper GPU launches (the portable cluster size).
MAX_CLUSTER = 8


def smem_ring(*, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str, stages: int, consumers: int,
              arrivals: int = 1, staging: str | None = None, partial: tuple[int, int] | None = None,
              multicast: int = 1) -> tuple:
    """The shared memory of a warp-specialized kernel, called while its kernel is parsed (``T.meta_var``): the A and
    B tiles of the ring (``a_shape``, ``b_shape``: stages first; 128B swizzle, 1024-aligned), the TMA-store staging
    in ``staging`` (C's dtype; None: no TMA store) or the block's float32 partial tile of ``partial`` = (rows,
    columns) (``cluster_split_k``: each row ``PARTIAL_PAD`` floats longer), the *full* barriers (``arrivals``
    arrivals a stage, the TMA bytes besides) and the *empty* ones (one arrival per consumer, of each of the
    ``multicast`` blocks whose A tiles one TMA copy fills: ``tma_producer``), then the pool committed, fenced for the
    async proxy and the block synchronised (with ``multicast``: the cluster, whose blocks then signal each other's
    barriers). Returns (A_s, B_s, (C_s, C_flat) or (partial tile, None) or (None, None), ring)."""
    pool = SMEMPool()
    a_s = pool.alloc_tcgen05_mma_AB(a_shape, dtype)
    b_s = pool.alloc_tcgen05_mma_AB(b_shape, dtype)
    staged = staging_buffers(pool, consumers, staging) if staging else (None, None)
    if partial:
        staged = (pool.alloc((partial[0], partial[1] + PARTIAL_PAD), "float32"), None)
    ring = Pipeline(pool, stages, full="tma", empty="mbar", init_full=arrivals, init_empty=consumers * multicast)
    pool.commit()
    T.evaluate(T.ptx.fence.proxy.async_.shared__cta())
    if multicast > 1:
        T.evaluate(T.ptx.fence.mbarrier_init.release.cluster())
        T.evaluate(T.cuda.cluster_sync())
    else:
        T.evaluate(T.cuda.cta_sync())
    return a_s, b_s, staged, ring


def consumer_mainloop(*, bn: int, stages: int, k_tiles: int, a_bytes: int, b_bytes: int, proxy_fence: bool = False,
             dtype: str = "float16", multicast: int = 1):
    """A consumer warpgroup's main loop over one output tile, as a TIRx inline function
    ``consume(acc, ring, a_base, b_base, rnd, wg, tid)``: per k tile, wait for the stage's *full* barrier, issue four
    wgmma (m64n{bn}k16 f16, or for ``dtype="int8"`` m64n{bn}k32 s8 into int32 accumulators ``acc`` typed uint32:
    32 bytes of k each; its 64 rows of A: ``wg``), commit, wait until the previous k tile's group has retired and
    give that stage back (*empty*); at the end wait for all and give back the last stage.
    The tiles are 128-byte swizzled rows: A K-major; B N-major in panels of 64 columns (fp16) or K-major (int8).
    ``rnd``: the round of a persistent block (its k tiles continue the ring's running count); ``proxy_fence``: a
    ``fence.proxy.async`` before the wgmma, for tiles written by ``cp.async`` (the generic proxy); ``multicast``: a
    stage goes back to the producer of every block of the cluster (each writes its share of A into all of them)."""
    int8 = dtype == "int8"
    if int8 and bn > 224:
        wgmma.allow_integer_n256()
    chain = getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{bn}k{32 if int8 else K_STEP}")
    mma = chain.s32.s8.s8 if int8 else chain.f32.f16.f16
    nregs = bn // 2
    a_lbo, a_sbo = 16, 8 * wgmma.CORE_BYTES  # K-major A, 128-byte rows
    if int8:  # K-major B, like A; a k step moves 32 bytes along the rows
        b_lbo, b_sbo, b_step = a_lbo, a_sbo, 32
    else:  # N-major B in panels of 64 columns; a k step is 16 rows down
        b_lbo, b_sbo, b_step = TILE_K * wgmma.CORE_BYTES, 8 * wgmma.CORE_BYTES, K_STEP * 128
    steps = 128 // 32  # k steps per 128-byte k tile: 16 halves or 32 int8 each

    def issue(acc: tirx.Buffer, a_addr: tirx.PrimExpr, b_addr: tirx.PrimExpr, accumulate: tirx.PrimExpr):
        """One wgmma from the shared addresses of its A rows and B k rows."""
        regs = [acc[i] for i in range(nregs)]
        a_desc = wgmma.descriptor(a_addr, a_lbo, a_sbo, "swizzle128")
        b_desc = wgmma.descriptor(b_addr, b_lbo, b_sbo, "swizzle128")
        if int8:  # integer wgmma: no scale or transpose immediates
            return mma(*regs, a_desc, b_desc, accumulate)
        return mma(*regs, a_desc, b_desc, accumulate, 1, 1, 0, 1)

    @T.inline
    def release(ring, stage):
        if multicast > 1:
            for p in T.unroll(multicast):
                ring.empty.arrive(stage, remote=p)
        else:
            ring.empty.arrive(stage)

    @T.inline
    def consume(acc, ring, a_base, b_base, rnd, wg, tid):
        for kt in T.serial(k_tiles):
            g: T.let = rnd * k_tiles + kt
            s: T.let = g % stages
            ring.full.wait(s, g // stages % 2)
            if proxy_fence:
                T.ptx.fence.proxy.async_.shared__cta()
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(steps):
                T.evaluate(issue(acc, a_base + T.uint32(s * a_bytes) + T.uint32(wg * 64 * 128 + kk * 32),
                                 b_base + T.uint32(s * b_bytes) + T.uint32(kk * b_step),
                                 tirx.Or(kt > 0, kk > 0)))
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous k tile's group has retired ...
            if kt > 0:
                if tid == 0:  # ... so its stage goes back to the producer
                    release(ring, (g + stages - 1) % stages)
        T.ptx.wgmma.wait_group.sync.aligned(0)
        if tid == 0:
            release(ring, (rnd * k_tiles + k_tiles - 1) % stages)

    return consume


def store_chunk_columns(out_dtype: str) -> int:
    """Columns of C per chunk of the TMA-store epilogue: one 128-byte (swizzle) row of ``out_dtype``."""
    return 128 // (tvm.DataType(out_dtype).bits // 8)


def staged_index(buf, row, col, out_dtype: str):
    """Where element (``row``, ``col``) of staging buffer ``buf`` lies in ``C_flat``: the 128-byte swizzle that TMA
    reads (16-byte chunk XOR row % 8), spelled out; ints or TIR expressions."""
    ec = store_chunk_columns(out_dtype)
    return (buf * ROWS_PER_CONSUMER + row) * ec + (col ^ (row % 8 * (ec // 8)))  # a 16-byte chunk: ec / 8 elements


def tma_store_epilogue(*, bn: int, out_dtype: str):
    """The consumers' epilogue through shared memory, as a TIRx inline function
    ``epilogue(C, C_s, C_flat, acc, row0, col0, rnd, wg, tid)``: the warpgroup's 64 x ``bn`` accumulators go out in
    chunks of one 128-byte row (``store_chunk_columns``), each written to one of the warpgroup's two staging buffers
    (``C_s[2 * wg + b]``, 64 x chunk, 128-byte swizzled as TMA reads it), then one thread stores the chunk to
    ``C[row0:, col0:]`` with one TMA copy (whole 128-byte lines; rows past C's end are not written) and goes on:
    before a buffer is written again, ``cp.async.bulk.wait_group.read 1`` waits until the copy two chunks back has
    read it, so a tile's last stores overlap the next tile's main loop. After the last tile the consumer waits for
    all its copies (``epilogue_done``). The buffers are written through ``C_flat``, the same bytes unswizzled, the
    swizzle spelled out (16-byte chunk XOR row % 8) so that each thread's two adjacent columns are one 4- or 8-byte
    store (through ``C_s`` TVM cannot prove them adjacent and stores element by element); 8 rows x 16 bytes per warp
    store, no bank conflicts."""
    ec = store_chunk_columns(out_dtype)
    chunks, groups = bn // ec, ec // 16

    @T.inline
    def epilogue(C, C_s, C_flat, acc, row0, col0, rnd, wg, tid):
        for j in T.unroll(chunks):
            b: T.let = (rnd * chunks + j) % 2
            if tid == 0:
                T.ptx.cp.async_.bulk.wait_group.read(1)
            T.cuda.warpgroup_sync(1 + wg)
            for t in T.unroll(groups):
                for pair in T.unroll(4):
                    row, col = T.meta_var(wgmma.element_of(tid % 32, 2 * pair))
                    r: T.let = tid // 32 * 16 + row
                    at: T.let = staged_index(2 * wg + b, r, 16 * t + col, out_dtype)
                    for v in T.vectorized(2):
                        C_flat[at + v] = T.Cast(out_dtype, acc[(j * groups + t) * 8 + pair * 2 + v])
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.warpgroup_sync(1 + wg)
            if tid == 0:
                Tx.copy_async(C[row0:row0 + ROWS_PER_CONSUMER, col0 + j * ec:col0 + j * ec + ec], C_s[2 * wg + b, :, :],
                              dispatch="tma_auto")
                T.ptx.cp.async_.bulk.commit_group()

    return epilogue


def staging_buffers(pool: SMEMPool, consumers: int, out_dtype: str) -> tuple[tirx.Buffer, tirx.Buffer]:
    """The TMA-store epilogue's buffers in ``pool``: ``C_s``, two per consumer of 64 rows x one 128-byte row,
    swizzled as TMA reads them, and ``C_flat``, the same bytes as one flat buffer (``tma_store_epilogue``)."""
    shape = (2 * consumers, ROWS_PER_CONSUMER, store_chunk_columns(out_dtype))
    staged = pool.alloc_tcgen05_mma_AB(shape, out_dtype)
    end = pool.offset
    pool.move_base_to(end - consumers * STAGING_BYTES)  # the same bytes again, without the layout
    flat = pool.alloc((shape[0] * shape[1] * shape[2],), out_dtype)
    pool.move_base_to(end)
    return staged, flat


@T.inline
def epilogue_done(tid):
    """After a consumer's last tile: its thread 0 waits until every TMA store it issued has completed."""
    if tid == 0:
        T.ptx.cp.async_.bulk.wait_group(0)


def tma_producer(*, block_tile: tuple[int, int], m_tiles: int, tiles: int, grid: int, stages: int, k_tiles: int,
                 b_panels: bool = False, split: int = 1, multicast: int = 1, shares: str = "A"):
    """The producer thread's loop when both tiles come by TMA, as a TIRx inline function
    ``produce(A_s, B_s, A, B, ring, cta)``: for each output tile of block ``cta`` (``grid`` blocks over ``tiles``
    tiles, ``m_tiles`` of them down M) and each of its k tiles, wait until the next stage of the ring is empty, expect
    the bytes of both tiles on its *full* barrier and issue one TMA copy of A's [bm, 64] tile and one of B's [64, bn]
    tile (A: m x k, B: k x n, row-major global buffers). A box reaching past a buffer's edge is zero-filled by the TMA
    unit and still brings its full bytes. ``b_panels``: B's tile in one copy per 64-column panel, for an n that is
    not a multiple of 64 (TVM plans the one copy of a wider tile as a view of B in 64-column panels, which needs
    that). ``split``: blocks ``split * t`` to ``split * t + split - 1`` share output tile ``t``, block ``cta`` taking
    the ``k_tiles`` k tiles of slice ``cta % split`` (``cluster_split_k``). ``multicast``: clusters of that many
    blocks on neighbouring tiles of one block row (``tile_origin``) share the A tile, each block loading
    ``bm / multicast`` of its rows into every block of the cluster with one multicast TMA copy: a ``multicast``-th of
    A's reads from L2; ``shares="B"``: the cluster's blocks take neighbouring tiles of one block column and share the
    B tile instead, each loading ``64 / multicast`` of its k rows into every block."""
    bm, bn = block_tile
    rounds = -(-tiles // (grid // multicast))  # a cluster of ``multicast`` blocks takes one tile of ``tiles`` a round
    a_bytes, b_bytes = bm * TILE_K * 2, TILE_K * bn * 2
    share, k_share, mask = bm // multicast, TILE_K // multicast, (1 << multicast) - 1
    a_shared, b_shared = multicast > 1 and shares == "A", multicast > 1 and shares == "B"

    @T.inline
    def produce(A_s, B_s, A, B, ring, cta):
        for r in T.serial(rounds):
            tile: T.let = (cta // multicast + r * (grid // multicast)) // split
            if tile < tiles:
                row0, col0 = T.meta_var(tile_origin(tile, cta, block_tile=block_tile, m_tiles=m_tiles,
                                                    multicast=multicast, shares=shares))
                for kt in T.serial(k_tiles):
                    g: T.let = r * k_tiles + kt  # the ring's running count
                    s: T.let = g % stages
                    k0: T.let = ((cta % split) * k_tiles + kt) * TILE_K
                    if g >= stages:
                        ring.empty.wait(s, (g // stages - 1) % 2)
                    ring.full.arrive(s, a_bytes + b_bytes)
                    if a_shared:
                        own: T.let = cta % multicast * share
                        Tx.copy_async(A_s[s, own:own + share, :], A[row0 + own:row0 + own + share, k0:k0 + TILE_K],
                                      dispatch="tma_auto", mbar=ring.full.ptr_to([s]), cta_mask=mask)
                    else:
                        Tx.copy_async(A_s[s, :, :], A[row0:row0 + bm, k0:k0 + TILE_K],
                                      dispatch="tma_auto", mbar=ring.full.ptr_to([s]))
                    if b_shared:
                        kb: T.let = cta % multicast * k_share
                        for p in T.unroll(bn // TILE_K):  # its k rows of each 64-column panel
                            Tx.copy_async(B_s[s, kb:kb + k_share, p * TILE_K:p * TILE_K + TILE_K],
                                          B[k0 + kb:k0 + kb + k_share, col0 + p * TILE_K:col0 + p * TILE_K + TILE_K],
                                          dispatch="tma_auto", mbar=ring.full.ptr_to([s]), cta_mask=mask)
                    elif b_panels:
                        for p in T.unroll(bn // TILE_K):
                            col: T.let = col0 + p * TILE_K
                            Tx.copy_async(B_s[s, :, p * TILE_K:p * TILE_K + TILE_K],
                                          B[k0:k0 + TILE_K, col:col + TILE_K],
                                          dispatch="tma_auto", mbar=ring.full.ptr_to([s]))
                    else:
                        Tx.copy_async(B_s[s, :, :], B[k0:k0 + TILE_K, col0:col0 + bn],
                                      dispatch="tma_auto", mbar=ring.full.ptr_to([s]))

    return produce


def tile_origin(tile, cta, *, block_tile: tuple[int, int], m_tiles: int, multicast: int = 1, shares: str = "A"):
    """(first row, first column) of the output tile a block works on, as TIR expressions, called while a kernel is
    parsed (``T.meta_var``): ``tile`` counts down M first (``m_tiles`` block rows); with ``multicast``, ``tile``
    counts clusters, whose blocks (``cta % multicast``) take neighbouring tiles of one block row (``shares="A"``)
    or of one block column (``shares="B"``)."""
    bm, bn = block_tile
    if shares == "B":
        m_clusters = -(-m_tiles // multicast)
        return (tile % m_clusters * multicast + cta % multicast) * bm, tile // m_clusters * bn
    return tile % m_tiles * bm, (tile // m_tiles * multicast + cta % multicast) * bn


def register_epilogue(*, bn: int, put: Callable, rows: int | None = None):
    """The consumers' epilogue from the registers, as a TIRx inline function
    ``epilogue(out, acc, row0, col0, wg, tid)``: for each 16-column tile of the warpgroup's 64 x ``bn`` accumulators
    and each pair of adjacent columns a thread holds (``wgmma.element_of``), ``put(out, acc, row, col, reg)`` stores
    ``acc[reg]`` and ``acc[reg + 1]`` at row ``row``, columns ``col`` and ``col + 1`` of the output ``out`` (``row0``,
    ``col0``: the tile's first row and column); with ``rows``, only rows below it (the rows past the last pixel of a
    convolution are not stored)."""

    @T.inline
    def epilogue(out, acc, row0, col0, wg, tid):
        for t in T.unroll(bn // 16):  # two adjacent columns per thread and step
            for pair in T.unroll(4):
                row, col = T.meta_var(wgmma.element_of(tid % 32, 2 * pair))
                if rows is None:
                    put(out, acc, row0 + wg * 64 + tid // 32 * 16 + row, col0 + 16 * t + col, t * 8 + pair * 2)
                else:
                    pixel: T.let = row0 + wg * 64 + tid // 32 * 16 + row
                    if pixel < rows:
                        put(out, acc, pixel, col0 + 16 * t + col, t * 8 + pair * 2)

    return epilogue


def cluster_split_k(*, block_tile: tuple[int, int], split: int, consumers: int, put4: Callable):
    """Split-K inside a thread-block cluster of ``split`` blocks that share one output tile, each block having
    computed one slice of K into its consumers' accumulators, as two TIRx inline functions:

    - ``stash(partial, acc, wg, tid)``: the warpgroup's 64 x bn accumulators into the block's float32 partial tile
      in shared memory (``smem_ring(partial=...)``, rows ``PARTIAL_PAD`` floats longer);
    - ``reduce(C, partial, rank, row0, col0, wg, tid)``, between two cluster barriers (the first: every block's
      partial tile written; the second: nobody reads a block's shared memory after it has exited): block ``rank``
      of the cluster sums its share of the tile's rows (``ceil(bm / split)`` of them) over the cluster's partial
      tiles, read four floats at a time from the other blocks' shared memory (``mapa`` +
      ``ld.shared::cluster``), slice 0 first (deterministic), and ``put4(C, total, row, col)`` stores the four sums at
      row ``row0 + r``, columns ``col .. col + 3`` of C.

    No partial buffer in global memory and no second launch: the cost is the partial tile's shared memory and its
    reads across the cluster."""
    bm, bn = block_tile
    rows, quads, threads = -(-bm // split), bn // 4, consumers * 128
    chunks = rows * quads

    @T.inline
    def stash(partial, acc, wg, tid):
        for t in T.unroll(bn // 16):
            for pair in T.unroll(4):
                row, col = T.meta_var(wgmma.element_of(tid % 32, 2 * pair))
                for v in T.vectorized(2):
                    partial[wg * 64 + tid // 32 * 16 + row, 16 * t + col + v] = acc[t * 8 + pair * 2 + v]

    @T.inline
    def reduce(C, partial, rank, row0, col0, wg, tid):
        peer = T.alloc_local((1,), "uint32")
        part = T.alloc_local((4,), "float32")
        total = T.alloc_local((4,), "float32")
        for i in T.serial(-(-chunks // threads)):
            c: T.let = i * threads + wg * 128 + tid
            r: T.let = rank * rows + c // quads
            if c < chunks and r < bm:
                q: T.let = c % quads
                for v in T.vectorized(4):
                    total[v] = T.float32(0)
                for p in T.unroll(split):
                    T.ptx.mapa.shared__cluster.u32(peer[0], T.cuda.cvta_generic_to_shared(partial.ptr_to([r, q * 4])),
                                                   T.uint32(p))
                    T.ptx.ld.shared__cluster.v4.f32(part[0], part[1], part[2], part[3], peer[0])
                    for v in T.vectorized(4):
                        total[v] = total[v] + part[v]
                put4(C, total, row0 + r, col0 + q * 4)

    return stash, reduce

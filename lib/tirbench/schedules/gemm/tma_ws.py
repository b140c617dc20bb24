"""v9: the Hopper GEMM with TMA loads and warp specialization, written as a TIRx kernel.

v8 (``warpgroup.gemm_v8_wgmma``) is a schedule: every thread computes addresses and issues ``cp.async`` for its
share of each tile, and the same warps that load also multiply. v9 splits the block into roles, as CUTLASS's
Hopper kernels do:

- **one producer warpgroup**, of which one thread issues the loads: per k tile, one TMA copy of the A tile and
  one of the B tile (``Tx.copy_async(..., dispatch="tma_auto")``: TVM plans the TensorMap from the shared layout,
  encodes it on the host and passes it as a ``__grid_constant__`` kernel argument), into a ring of ``stages``
  buffers in the 128-byte-swizzled layout wgmma reads. It gives back its registers (``setmaxnreg.dec`` to 40);
- **``consumers`` math warpgroups**, 64 rows of the tile each, that only issue ``wgmma.mma_async`` from those
  buffers (``setmaxnreg.inc`` to 232: the 64 x N accumulators live in registers);
- **mbarriers** between them (``lang.Pipeline``): a stage's *full* barrier completes when its TMA bytes have
  landed (``arrive.expect_tx``), its *empty* barrier when every consumer's wgmma group that read it has retired
  (``wgmma.wait_group 1``: the previous k tile's group), and the producer refills it;
- optionally **persistent**: ``persistent_ctas`` blocks (one per SM) loop over the output tiles, so the producer
  already loads the next tile while the consumers store this one.

The wgmma descriptors and the accumulator layout are v8's (``intrinsics.wgmma``). The module is not scheduled
from the workload's: the helper reads the shape from it and writes the kernel in TIRx (``T.device_entry``,
``T.warpgroup_id``), tagged so that ``core.build`` compiles it with TVM's ``tirx`` pipeline.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.backend.cuda.lang import Pipeline, SMEMPool
from tvm.ir import IRModule
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from tirbench.core.lowering import TIRX_KERNEL
from tirbench.schedules.common.checks import require_divides, require_positive_int
from tirbench.schedules.common.tiling import MAX_SHARED_BYTES, REGISTERS_PER_SM, gemm_block, require_multiple
from tirbench.schedules.intrinsics import wgmma

#: k per stage: one 128-byte swizzle row of halves.
TILE_K = 64
ROWS_PER_CONSUMER = 64  # one wgmma's M
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg budgets (multiples of 8; 128 x 40 + 256 x 232 <= 64 K)
_K_STEP = 16  # halves per wgmma instruction
STAGING_BYTES = 2 * ROWS_PER_CONSUMER * 128  # per consumer, the TMA-store epilogue's two 64 x 128-byte buffers


def require_v9(m: int, n: int, k: int, dtype: str, *, block_tile: tuple[int, int], stages: int, consumers: int,
               persistent_ctas: int, n_axis: str = "n", tma_store: bool = False) -> None:
    """One-line checks: fp16, tiles that divide the problem, one warpgroup of 64 rows per consumer, the warpgroups'
    register budgets within an SM's (``setmaxnreg.inc`` waits forever for registers that are not there: 4 consumers
    hung an H100), one wgmma's N, and the ring of stages in shared memory (``n_axis``: what the caller calls the
    GEMM's n)."""
    if dtype != "float16":
        raise ValueError(f"v9 (TMA + wgmma) takes float16 inputs, got a {dtype} workload")
    bm, bn = block_tile
    require_positive_int(consumers, param="consumers")
    require_positive_int(stages, param="stages")
    if bm != ROWS_PER_CONSUMER * consumers:
        raise ValueError(f"block_tile[0]={bm}: each of the {consumers} consumer warpgroups owns 64 rows, so it "
                         f"must be {ROWS_PER_CONSUMER * consumers}")
    regs = 128 * (PRODUCER_REGS + consumers * CONSUMER_REGS)
    if regs > REGISTERS_PER_SM:
        raise ValueError(f"consumers={consumers}: {consumers} consumer warpgroups of {CONSUMER_REGS} registers a "
                         f"thread and the producer's {PRODUCER_REGS} need {regs} registers, more than an SM's "
                         f"{REGISTERS_PER_SM} (the kernel would hang in setmaxnreg): at most "
                         f"{(REGISTERS_PER_SM // 128 - PRODUCER_REGS) // CONSUMER_REGS}")
    require_divides(m, bm, param="block_tile[0]", axis="m")
    require_divides(n, bn, param="block_tile[1]", axis=n_axis)
    require_divides(k, TILE_K, param="the k tile (64)", axis="k")
    require_multiple(bn, 16, param="block_tile[1]")
    if bn > wgmma.MAX_N:
        raise ValueError(f"block_tile[1]={bn}: one wgmma covers at most N={wgmma.MAX_N} columns")
    if persistent_ctas < 0:
        raise ValueError(f"persistent_ctas={persistent_ctas}: 0 (one block per tile) or the number of blocks")
    need = stages * (bm + bn) * TILE_K * 2 + 2 * stages * 8 + (consumers * STAGING_BYTES if tma_store else 0)
    if need > MAX_SHARED_BYTES:
        raise ValueError(f"block_tile={block_tile}, stages={stages} need {need} bytes of shared memory per block "
                         f"(TMA ring{', store staging' if tma_store else ''}), more than {MAX_SHARED_BYTES}")


def consumer(*, bn: int, stages: int, k_tiles: int, a_bytes: int, b_bytes: int, proxy_fence: bool = False,
             dtype: str = "float16"):
    """A consumer warpgroup's main loop over one output tile, as a TIRx inline function
    ``consume(acc, ring, a_base, b_base, rnd, wg, tid)``: per k tile, wait for the stage's *full* barrier, issue four
    wgmma (m64n{bn}k16 f16, or for ``dtype="int8"`` m64n{bn}k32 s8 into int32 accumulators ``acc`` typed uint32:
    32 bytes of k each; its 64 rows of A: ``wg``), commit, wait until the previous k tile's group has retired and
    give that stage back (*empty*); at the end wait for all and give back the last stage.
    The tiles are 128-byte swizzled rows: A K-major; B N-major in panels of 64 columns (fp16) or K-major (int8).
    ``rnd``: the round of a persistent block (its k tiles continue the ring's running count); ``proxy_fence``: a
    ``fence.proxy.async`` before the wgmma, for tiles written by ``cp.async`` (the generic proxy)."""
    int8 = dtype == "int8"
    if int8 and bn > 224:
        wgmma.allow_integer_n256()
    chain = getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{bn}k{32 if int8 else _K_STEP}")
    mma = chain.s32.s8.s8 if int8 else chain.f32.f16.f16
    nregs = bn // 2
    a_lbo, a_sbo = 16, 8 * wgmma.CORE_BYTES  # K-major A, 128-byte rows
    if int8:  # K-major B, like A; a k step moves 32 bytes along the rows
        b_lbo, b_sbo, b_step = a_lbo, a_sbo, 32
    else:  # N-major B in panels of 64 columns; a k step is 16 rows down
        b_lbo, b_sbo, b_step = TILE_K * wgmma.CORE_BYTES, 8 * wgmma.CORE_BYTES, _K_STEP * 128
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
                    ring.empty.arrive((g + stages - 1) % stages)
        T.ptx.wgmma.wait_group.sync.aligned(0)
        if tid == 0:
            ring.empty.arrive((rnd * k_tiles + k_tiles - 1) % stages)

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


def producer(*, block_tile: tuple[int, int], m_tiles: int, tiles: int, grid: int, stages: int, k_tiles: int):
    """The producer thread's loop when both tiles come by TMA, as a TIRx inline function
    ``produce(A_s, B_s, A, B, ring, cta)``: for each output tile of block ``cta`` (``grid`` blocks over ``tiles``
    tiles, ``m_tiles`` of them down M) and each of its k tiles, wait until the next stage of the ring is empty, expect
    the bytes of both tiles on its *full* barrier and issue one TMA copy of A's [bm, 64] tile and one of B's [64, bn]
    tile (A: m x k, B: k x n, row-major global buffers)."""
    bm, bn = block_tile
    rounds = -(-tiles // grid)
    a_bytes, b_bytes = bm * TILE_K * 2, TILE_K * bn * 2

    @T.inline
    def produce(A_s, B_s, A, B, ring, cta):
        for r in T.serial(rounds):
            tile: T.let = cta + r * grid
            if tile < tiles:
                for kt in T.serial(k_tiles):
                    g: T.let = r * k_tiles + kt  # the ring's running count
                    s: T.let = g % stages
                    if g >= stages:
                        ring.empty.wait(s, (g // stages - 1) % 2)
                    ring.full.arrive(s, a_bytes + b_bytes)
                    Tx.copy_async(A_s[s, :, :], A[tile % m_tiles * bm:tile % m_tiles * bm + bm,
                                                  kt * TILE_K:kt * TILE_K + TILE_K],
                                  dispatch="tma_auto", mbar=ring.full.ptr_to([s]))
                    Tx.copy_async(B_s[s, :, :], B[kt * TILE_K:kt * TILE_K + TILE_K,
                                                  tile // m_tiles * bn:tile // m_tiles * bn + bn],
                                  dispatch="tma_auto", mbar=ring.full.ptr_to([s]))

    return produce


def _kernel(m: int, n: int, k: int, *, block_tile: tuple[int, int], stages: int, consumers: int,
            persistent_ctas: int, out_dtype: str = "float32", tma_store: bool = False) -> tirx.PrimFunc:
    """The TIRx kernel (module docstring) for C[m, n] (``out_dtype``: fp32, or fp16 rounded from the fp32
    accumulators in the epilogue) = A[m, k] @ B[k, n] (fp16, row-major); ``tma_store``: the epilogue stores C
    through shared memory by TMA (``tma_store_epilogue``), else straight from the registers."""
    bm, bn = block_tile
    nregs, a_bytes, b_bytes = bn // 2, bm * TILE_K * 2, TILE_K * bn * 2
    k_tiles, m_tiles = k // TILE_K, m // bm
    tiles = m_tiles * (n // bn)
    grid = persistent_ctas or tiles
    rounds = -(-tiles // grid)
    consume = consumer(bn=bn, stages=stages, k_tiles=k_tiles, a_bytes=a_bytes, b_bytes=b_bytes)
    produce = producer(block_tile=block_tile, m_tiles=m_tiles, tiles=tiles, grid=grid, stages=stages,
                       k_tiles=k_tiles)
    epilogue = tma_store_epilogue(bn=bn, out_dtype=out_dtype)

    def out(value: tirx.PrimExpr) -> tirx.PrimExpr:
        """An accumulator as C stores it."""
        return value if out_dtype == "float32" else T.Cast(out_dtype, value)

    @T.prim_func
    def gemm_v9(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True, TIRX_KERNEL: True})
        A = T.match_buffer(a, (m, k), "float16")
        B = T.match_buffer(b, (k, n), "float16")
        C = T.match_buffer(c, (m, n), out_dtype)
        T.device_entry()
        cta = T.cta_id([grid])
        wg = T.warpgroup_id([consumers + 1])
        tid = T.thread_id_in_wg([128])
        pool = T.meta_var(SMEMPool())
        A_s = T.meta_var(pool.alloc_tcgen05_mma_AB((stages, bm, TILE_K), "float16"))  # 128B swizzle, 1024-aligned
        B_s = T.meta_var(pool.alloc_tcgen05_mma_AB((stages, TILE_K, bn), "float16"))
        staged = T.meta_var(staging_buffers(pool, consumers, out_dtype) if tma_store else (None, None))
        ring = T.meta_var(Pipeline(pool, stages, full="tma", empty="mbar", init_empty=consumers))
        pool.commit()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if wg == consumers:  # the producer
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if tid == 0:
                produce(A_s, B_s, A, B, ring, cta)
        else:  # consumer wg: rows 64 * wg of the tile
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            acc = T.alloc_local((nregs,), "float32")
            a_base: T.let = T.cuda.cvta_generic_to_shared(A_s.ptr_to([0, 0, 0]))
            b_base: T.let = T.cuda.cvta_generic_to_shared(B_s.ptr_to([0, 0, 0]))
            for r in T.serial(rounds):
                tile: T.let = cta + r * grid
                if tile < tiles:
                    consume(acc, ring, a_base, b_base, r, wg, tid)
                    if tma_store:
                        epilogue(C, staged[0], staged[1], acc, tile % m_tiles * bm + wg * 64, tile // m_tiles * bn,
                                 r, wg, tid)
                    else:
                        for t in T.unroll(bn // 16):  # the epilogue: two adjacent columns per store
                            for pair in T.unroll(4):
                                for v in T.vectorized(2):
                                    row, col = T.meta_var(wgmma.element_of(tid % 32, 2 * pair + v))
                                    C[tile % m_tiles * bm + wg * 64 + tid // 32 * 16 + row,
                                      tile // m_tiles * bn + 16 * t + col] = out(acc[t * 8 + pair * 2 + v])
            if tma_store:
                epilogue_done(tid)

    return gemm_v9


def gemm_v9_tma_ws(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 256), stages: int = 4,
                   consumers: int = 2, persistent_ctas: int = 132, tma_store: bool = True) -> s_tir.Schedule:
    """v9 (module docstring) for the GEMM of ``sch``'s module: a schedule of the TIRx kernel that replaces it.
    ``block_tile`` (64 x ``consumers`` rows, up to 256 columns), ``stages`` buffers in the TMA ring,
    ``persistent_ctas`` blocks looping over the tiles (132: one per SM of an H100/H200; 0: one block per tile).
    C is written in the dtype of the module's output: fp32, or fp16 (``gemm(..., out_dtype="float16")``: the
    epilogue rounds the accumulators, half the bytes to store). ``tma_store``: C goes out through shared memory,
    one TMA copy per 128-byte-wide chunk (whole lines, overlapping the next tile), instead of 4- or 8-byte stores
    from the registers."""
    blk, m, n, k = gemm_block(sch)
    dtype = sch.get(blk).reads[0].source.dtype
    func = sch.mod["main"]
    out_dtype = str(func.params[-1].dtype)  # C, the last parameter
    require_v9(m, n, k, dtype, block_tile=block_tile, stages=stages, consumers=consumers,
               persistent_ctas=persistent_ctas, tma_store=tma_store)
    kernel = _kernel(m, n, k, block_tile=block_tile, stages=stages, consumers=consumers,
                     persistent_ctas=persistent_ctas, out_dtype=out_dtype, tma_store=tma_store)
    return s_tir.Schedule(IRModule({"main": kernel}))

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
  already loads the next tile while the consumers store this one;
- optionally **A multicast in a cluster** (``multicast``, one block per tile or persistent): 2 or 4 blocks on
  neighbouring tiles of a block row load their common A tile once, each a share of its rows into all of them (one
  multicast TMA copy), and give each stage back to every block's producer: less of L2's bandwidth for a GEMM whose
  tiles are bound by it (1000^3, 128 x 64 tiles: 12.5 us without, 11.3 with, on an H200; 2000 x 3000 x 1000, 128 x
  192 tiles, persistent: 31.3 us without, 27.5 with); or, with ``shares="B"``, blocks on neighbouring tiles of a
  block column share the B tile, each loading a share of its k rows (2000 x 3000 x 1000, persistent: 26.0 us against
  27.7 sharing A);
- or **split-K in a cluster** (``split``): for GEMMs with too few output tiles to fill the SMs (100 x 3000: 24 tiles of
  128 x 128 for 132 SMs), ``split`` blocks of one thread-block cluster share each output tile, each taking one slice
  of K, and sum their accumulators through distributed shared memory (``warp_specialized.cluster_split_k``): no
  partial buffer in global memory, no second kernel, as deterministic as one block.

The tiles need not divide the GEMM: the TMA unit zero-fills the part of a box past a tensor's edge (the tensor maps
carry the true m, n, k; the box and the bytes a stage expects stay the whole tile), so K takes any multiple of 8 and,
with the TMA store, which writes nothing past C's edge, so do M and N (``require_tma_edges``); the register
epilogue stores whole tiles. A tensor map's row stride is a multiple of 16 bytes: A's and B's rows, k and n halves,
must be multiples of 8.

The wgmma descriptors and the accumulator layout are v8's (``intrinsics.wgmma``). The module is not scheduled
from the workload's: the helper reads the shape from it and writes the kernel in TIRx (``T.device_entry``,
``T.warpgroup_id``), tagged so that ``core.build`` compiles it with TVM's ``tirx`` pipeline.
"""
from __future__ import annotations

from tvm import s_tir, tirx
from tvm.ir import IRModule
from tvm.script import tirx as T

from tirbench.core.lowering import TIRX_KERNEL
from tirbench.schedules.common.checks import require_divides, require_positive_int
from tirbench.schedules.common.tiling import MAX_SHARED_BYTES, REGISTERS_PER_SM, gemm_block, require_multiple
from tirbench.schedules.gemm.warp_specialized import (CONSUMER_REGS, MAX_CLUSTER, PARTIAL_PAD, PRODUCER_REGS,
                                                      ROWS_PER_CONSUMER, STAGING_BYTES, TILE_K, cluster_split_k,
                                                      consumer_mainloop, epilogue_done, register_epilogue, smem_ring,
                                                      tile_origin, tma_producer, tma_store_epilogue)
from tirbench.schedules.intrinsics import wgmma


def require_v9(m: int, n: int, k: int, dtype: str, *, block_tile: tuple[int, int], stages: int, consumers: int,
               persistent_ctas: int, n_axis: str = "n", tma_store: bool = False, tma_edges: bool = False,
               split: int = 1, multicast: int = 1, shares: str = "A") -> None:
    """One-line checks: fp16, tiles that divide the problem (``tma_edges``: v9's GEMM, whose edges the TMA unit
    handles, ``require_tma_edges`` instead), one warpgroup of 64 rows per consumer, the warpgroups' register budgets
    within an SM's (``setmaxnreg.inc`` waits forever for registers that are not there: 4 consumers hung an H100), one
    wgmma's N, the ring of stages in shared memory (``n_axis``: what the caller calls the GEMM's n), a ``split``
    (``require_cluster_split``) and a ``multicast`` of A or B (``shares``; ``require_multicast``)."""
    if dtype != "float16":
        raise ValueError(f"v9 (TMA + wgmma) takes float16 inputs, got a {dtype} workload")
    bm, bn = block_tile
    require_positive_int(consumers, param="consumers")
    require_positive_int(stages, param="stages")
    if split != 1:
        require_cluster_split(split, k, persistent_ctas=persistent_ctas, tma_store=tma_store)
    if bm != ROWS_PER_CONSUMER * consumers:
        raise ValueError(f"block_tile[0]={bm}: each of the {consumers} consumer warpgroups owns 64 rows, so it "
                         f"must be {ROWS_PER_CONSUMER * consumers}")
    regs = 128 * (PRODUCER_REGS + consumers * CONSUMER_REGS)
    if regs > REGISTERS_PER_SM:
        raise ValueError(f"consumers={consumers}: {consumers} consumer warpgroups of {CONSUMER_REGS} registers a "
                         f"thread and the producer's {PRODUCER_REGS} need {regs} registers, more than an SM's "
                         f"{REGISTERS_PER_SM} (the kernel would hang in setmaxnreg): at most "
                         f"{(REGISTERS_PER_SM // 128 - PRODUCER_REGS) // CONSUMER_REGS}")
    if tma_edges:  # the cluster's sums are stored row by row, clipped at C's edges like the TMA store
        require_tma_edges(m, n, k, block_tile=block_tile, tma_store=tma_store or split > 1)
    else:
        require_divides(m, bm, param="block_tile[0]", axis="m")
        require_divides(n, bn, param="block_tile[1]", axis=n_axis)
        require_divides(k, TILE_K, param="the k tile (64)", axis="k")
    require_multiple(bn, 16, param="block_tile[1]")
    if bn > wgmma.MAX_N:
        raise ValueError(f"block_tile[1]={bn}: one wgmma covers at most N={wgmma.MAX_N} columns")
    if persistent_ctas < 0:
        raise ValueError(f"persistent_ctas={persistent_ctas}: 0 (one block per tile) or the number of blocks")
    extra = consumers * STAGING_BYTES if tma_store else bm * (bn + PARTIAL_PAD) * 4 if split > 1 else 0
    need = stages * (bm + bn) * TILE_K * 2 + 2 * stages * 8 + extra
    if multicast != 1:
        require_multicast(multicast, persistent_ctas=persistent_ctas, split=split, smem=need, shares=shares)
    if need > MAX_SHARED_BYTES:
        what = ", store staging" if tma_store else ", partial tile" if split > 1 else ""
        raise ValueError(f"block_tile={block_tile}, stages={stages} need {need} bytes of shared memory per block "
                         f"(TMA ring{what}), more than {MAX_SHARED_BYTES}")


def require_multicast(multicast: int, *, persistent_ctas: int, split: int, smem: int, shares: str = "A") -> None:
    """One-line checks of a multicast (``tma_producer``): the A or the B tile shared (``shares``), 2 or 4 blocks a
    cluster (each then loads a whole number of 8-row swizzle atoms of the A tile's 64-row multiples, or of B's 64 k
    rows); persistent blocks whole clusters (``persistent_ctas`` a
    multiple of ``multicast``); a block whose shared memory leaves no room for a second on its SM (a block of a
    cluster that waits in ``setmaxnreg`` for registers another cluster's block holds could wait for ever; only such
    tiles were measured); and no split-K (its clusters share K)."""
    if shares not in ("A", "B"):
        raise ValueError(f"shares={shares!r}: a cluster shares the A tile (its blocks along a block row) or the B tile "
                         f"(along a block column), 'A' or 'B'")
    if multicast not in (2, 4):
        raise ValueError(f"multicast={multicast}: clusters of 2 or 4 blocks share the {shares} tile (1: none)")
    if persistent_ctas % multicast:
        raise ValueError(f"persistent_ctas={persistent_ctas}, multicast={multicast}: persistent blocks come in whole "
                         f"clusters, a multiple of {multicast}")
    if 2 * smem <= MAX_SHARED_BYTES:
        raise ValueError(f"multicast={multicast}: a block of {smem} bytes of shared memory would share its SM with "
                         f"another; a multicast takes blocks of more than {MAX_SHARED_BYTES // 2} (more stages)")
    if split > 1:
        raise ValueError(f"split={split}, multicast={multicast}: a cluster either splits K or shares a tile, not both")


def require_cluster_split(split: int, k: int, *, persistent_ctas: int, tma_store: bool) -> None:
    """One-line checks of v9's split-K in a cluster: 2 to ``MAX_CLUSTER`` slices (the portable cluster size), each
    with some of the real K (a slice of only zero-filled k tiles would be a block multiplying nothing), one block
    per tile (not persistent) and the register epilogue (the cluster's sums are stored from the registers)."""
    require_positive_int(split, param="split")
    if split > MAX_CLUSTER:
        raise ValueError(f"split={split}: a cluster holds at most {MAX_CLUSTER} blocks on every Hopper GPU")
    k_tiles = -(-k // TILE_K)
    per_slice = -(-k_tiles // split)
    if (split - 1) * per_slice >= k_tiles:
        raise ValueError(f"split={split}: k={k} is {k_tiles} k tiles of {TILE_K}, too few for {split} slices of "
                         f"{per_slice}")
    if persistent_ctas or tma_store:
        raise ValueError(f"split={split}: split-K in a cluster takes one block per tile and the register epilogue "
                         f"(persistent_ctas=0, tma_store=False)")


def require_tma_edges(m: int, n: int, k: int, *, block_tile: tuple[int, int], tma_store: bool) -> None:
    """One-line checks of v9's GEMM where its tiles need not divide it (module docstring): B's tile in whole 64-column
    panels (128-byte swizzled rows), M and N multiples of the block tile for the register epilogue (it stores whole
    tiles), and rows of A (k halves) and B (n halves) that a tensor map can stride, multiples of 16 bytes (C's, n
    floats or halves, then are too)."""
    bm, bn = block_tile
    require_multiple(bn, TILE_K, param="block_tile[1]")
    if not tma_store:
        require_divides(m, bm, param="block_tile[0]", axis="m")
        require_divides(n, bn, param="block_tile[1]", axis="n")
    for axis, extent, operand in (("k", k, "A (m x k)"), ("n", n, "B (k x n)")):
        if extent % 8:
            raise ValueError(f"{axis}={extent}: TMA reads {operand} by rows {2 * extent} bytes apart, and a tensor "
                             f"map's row stride must be a multiple of 16 bytes: {axis} must be a multiple of 8")


def v9_kernel(m: int, n: int, k: int, *, block_tile: tuple[int, int], stages: int, consumers: int,
              persistent_ctas: int, out_dtype: str = "float32", tma_store: bool = False,
              split: int = 1, multicast: int = 1, shares: str = "A") -> tirx.PrimFunc:
    """The TIRx kernel (module docstring) for C[m, n] (``out_dtype``: fp32, or fp16 rounded from the fp32
    accumulators in the epilogue) = A[m, k] @ B[k, n] (fp16, row-major), composed from ``warp_specialized``'s
    pieces; ``tma_store``: the epilogue stores C through shared memory by TMA (``tma_store_epilogue``), else
    straight from the registers (``register_epilogue``). Tiles past an edge of the GEMM are whole tiles, their
    loads zero-filled and their TMA stores clipped by the TMA unit. ``split`` > 1: clusters of ``split`` blocks,
    one slice of K each, summed in the cluster (``cluster_split_k``; ``v9_split_kernel``). ``multicast`` > 1:
    clusters of that many blocks on neighbouring tiles of a block row, each loading its share of their common A tile
    into all of them (one multicast TMA copy; ``tma_producer``); a tile past C's last column (an odd number of block
    columns) is computed, not stored. ``shares="B"``: the cluster's blocks are on neighbouring tiles of a block
    column and share the B tile (a tile past C's last row is computed, not stored)."""
    if split > 1:
        return v9_split_kernel(m, n, k, block_tile=block_tile, stages=stages, consumers=consumers,
                               out_dtype=out_dtype, split=split)
    bm, bn = block_tile
    nregs, a_bytes, b_bytes = bn // 2, bm * TILE_K * 2, TILE_K * bn * 2
    k_tiles, m_tiles = -(-k // TILE_K), -(-m // bm)
    n_tiles = -(-n // bn)
    if shares == "B":  # clusters' tiles: a cluster's blocks share a block column
        tiles = -(-m_tiles // multicast) * n_tiles
    else:  # ... or a block row
        tiles = m_tiles * -(-n_tiles // multicast)
    grid = persistent_ctas or tiles * multicast
    rounds = -(-tiles // (grid // multicast))
    consume = consumer_mainloop(bn=bn, stages=stages, k_tiles=k_tiles, a_bytes=a_bytes, b_bytes=b_bytes,
                                multicast=multicast)
    produce = tma_producer(block_tile=block_tile, m_tiles=m_tiles, tiles=tiles, grid=grid, stages=stages,
                           k_tiles=k_tiles, b_panels=n % TILE_K != 0, multicast=multicast, shares=shares)
    store_tma = tma_store_epilogue(bn=bn, out_dtype=out_dtype)

    def out(value: tirx.PrimExpr) -> tirx.PrimExpr:
        """An accumulator as C stores it."""
        return value if out_dtype == "float32" else T.Cast(out_dtype, value)

    @T.inline
    def put(C, acc, row, col, reg):
        for v in T.vectorized(2):
            C[row, col + v] = out(acc[reg + v])

    store_registers = register_epilogue(bn=bn, put=put)

    def stored(row0: tirx.PrimExpr, col0: tirx.PrimExpr) -> tirx.PrimExpr:
        """Whether a cluster's tile lies in C (the last block column, or row, of an odd number may not)."""
        return row0 < m if shares == "B" else col0 < n

    @T.prim_func
    def gemm_v9(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True, TIRX_KERNEL: True})
        A = T.match_buffer(a, (m, k), "float16")
        B = T.match_buffer(b, (k, n), "float16")
        C = T.match_buffer(c, (m, n), out_dtype)
        T.device_entry()
        cta = T.cta_id([grid])
        if multicast > 1:  # clusters of ``multicast`` blocks (the launch's cluster shape)
            T.cta_id_in_cluster([multicast])
        wg = T.warpgroup_id([consumers + 1])
        tid = T.thread_id_in_wg([128])
        A_s, B_s, staged, ring = T.meta_var(smem_ring(a_shape=(stages, bm, TILE_K), b_shape=(stages, TILE_K, bn),
                                                      dtype="float16", stages=stages, consumers=consumers,
                                                      staging=out_dtype if tma_store else None, multicast=multicast))
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
                tile: T.let = cta // multicast + r * (grid // multicast)
                if tile < tiles:
                    row0, col0 = T.meta_var(tile_origin(tile, cta, block_tile=block_tile, m_tiles=m_tiles,
                                                        multicast=multicast, shares=shares))
                    consume(acc, ring, a_base, b_base, r, wg, tid)
                    if stored(row0, col0):
                        if tma_store:
                            store_tma(C, staged[0], staged[1], acc, row0 + wg * 64, col0, r, wg, tid)
                        else:
                            store_registers(C, acc, row0, col0, wg, tid)
            if tma_store:
                epilogue_done(tid)
        if multicast > 1:
            T.cuda.cluster_sync()  # a block's barriers live until its cluster's blocks have stopped signalling them

    return gemm_v9


def v9_split_kernel(m: int, n: int, k: int, *, block_tile: tuple[int, int], stages: int, consumers: int,
                    out_dtype: str, split: int) -> tirx.PrimFunc:
    """v9 with split-K in a cluster (``v9_kernel``'s ``split``): one block per (output tile, slice of K), the
    ``split`` blocks of a tile one thread-block cluster; each block's producer loads its slice's k tiles (the last
    slice's past K zero-filled by the TMA unit), its consumers multiply them and stash their accumulators in shared
    memory, and after a cluster barrier each block sums its share of the tile's rows over the cluster and stores
    them (rows and columns past C's edge are not stored)."""
    bm, bn = block_tile
    nregs, a_bytes, b_bytes = bn // 2, bm * TILE_K * 2, TILE_K * bn * 2
    k_tiles, m_tiles = -(-k // (TILE_K * split)), -(-m // bm)  # k tiles a slice
    tiles = m_tiles * -(-n // bn)
    grid = tiles * split
    consume = consumer_mainloop(bn=bn, stages=stages, k_tiles=k_tiles, a_bytes=a_bytes, b_bytes=b_bytes)
    produce = tma_producer(block_tile=block_tile, m_tiles=m_tiles, tiles=tiles, grid=grid, stages=stages,
                           k_tiles=k_tiles, b_panels=n % TILE_K != 0, split=split)

    @T.inline
    def put4(C, total, row, col):
        if row < m and col < n:
            for v in T.vectorized(4):
                C[row, col + v] = T.Cast(out_dtype, total[v])

    stash, reduce = cluster_split_k(block_tile=block_tile, split=split, consumers=consumers, put4=put4)

    @T.prim_func
    def gemm_v9_split(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True, TIRX_KERNEL: True})
        A = T.match_buffer(a, (m, k), "float16")
        B = T.match_buffer(b, (k, n), "float16")
        C = T.match_buffer(c, (m, n), out_dtype)
        T.device_entry()
        cta = T.cta_id([grid])
        rank = T.cta_id_in_cluster([split])
        wg = T.warpgroup_id([consumers + 1])
        tid = T.thread_id_in_wg([128])
        A_s, B_s, staged, ring = T.meta_var(smem_ring(a_shape=(stages, bm, TILE_K), b_shape=(stages, TILE_K, bn),
                                                      dtype="float16", stages=stages, consumers=consumers,
                                                      partial=block_tile))
        tile: T.let = cta // split
        if wg == consumers:  # the producer
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if tid == 0:
                produce(A_s, B_s, A, B, ring, cta)
        else:  # consumer wg: rows 64 * wg of the tile, this block's slice of K
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            acc = T.alloc_local((nregs,), "float32")
            a_base: T.let = T.cuda.cvta_generic_to_shared(A_s.ptr_to([0, 0, 0]))
            b_base: T.let = T.cuda.cvta_generic_to_shared(B_s.ptr_to([0, 0, 0]))
            consume(acc, ring, a_base, b_base, 0, wg, tid)
            stash(staged[0], acc, wg, tid)
        T.cuda.cluster_sync()  # every block's partial tile is written
        if wg < consumers:
            row0, col0 = T.meta_var(tile_origin(tile, cta, block_tile=block_tile, m_tiles=m_tiles))
            reduce(C, staged[0], rank, row0, col0, wg, tid)
        T.cuda.cluster_sync()  # and read: a block's shared memory lives until the cluster is done with it

    return gemm_v9_split


def gemm_v9_tma_ws(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 256), stages: int = 4,
                   consumers: int = 2, persistent_ctas: int = 132, tma_store: bool = True,
                   split: int = 1, multicast: int = 1, shares: str = "A") -> s_tir.Schedule:
    """v9 (module docstring) for the GEMM of ``sch``'s module: a schedule of the TIRx kernel that replaces it.
    ``block_tile`` (64 x ``consumers`` rows, up to 256 columns), ``stages`` buffers in the TMA ring,
    ``persistent_ctas`` blocks looping over the tiles (132: one per SM of an H100/H200; 0: one block per tile).
    C is written in the dtype of the module's output: fp32, or fp16 (``gemm(..., out_dtype="float16")``: the
    epilogue rounds the accumulators, half the bytes to store). ``tma_store``: C goes out through shared memory,
    one TMA copy per 128-byte-wide chunk (whole lines, overlapping the next tile), instead of 4- or 8-byte stores
    from the registers; then M and N need not be multiples of the block tile, nor K ever of 64 (module docstring).
    ``split``: 2 to 8 blocks of a cluster share each tile, one slice of K each (module docstring; with
    ``persistent_ctas=0`` and ``tma_store=False``, any M and N). ``multicast``: 2 or 4 blocks of a
    cluster share the A tile of their block row, each loading its share into all (module docstring); ``shares="B"``:
    the B tile of their block column."""
    blk, m, n, k = gemm_block(sch)
    dtype = sch.get(blk).reads[0].source.dtype
    func = sch.mod["main"]
    out_dtype = str(func.params[-1].dtype)  # C, the last parameter
    require_v9(m, n, k, dtype, block_tile=block_tile, stages=stages, consumers=consumers,
               persistent_ctas=persistent_ctas, tma_store=tma_store, tma_edges=True, split=split,
               multicast=multicast, shares=shares)
    kernel = v9_kernel(m, n, k, block_tile=block_tile, stages=stages, consumers=consumers,
                       persistent_ctas=persistent_ctas, out_dtype=out_dtype, tma_store=tma_store, split=split,
                       multicast=multicast, shares=shares)
    return s_tir.Schedule(IRModule({"main": kernel}))

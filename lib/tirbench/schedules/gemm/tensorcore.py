"""The GEMM ladder's tensor-core rungs before Hopper (float16 inputs, float32 accumulators): v6 wmma 16x16x16 fragments
and v7 ldmatrix + mma.sync m16n8k16 (both built by ``_tensor_core``; they import ``tvm.s_tir.tensor_intrin.cuda`` on
first use, ~35 s), the int8 kernels of the convolutions (mma.sync m16n8k32, and Turing's wmma m16n16k16 s8 with
synchronous copies), the padding of a GEMM block to its tiles
(``pad_gemm``), and ``MMA_ASYNC_CONFIG``, the PassContext config for the cp.async copies of v7 and v8. v8 (Hopper's
warpgroup MMA) is ``warpgroup``'s.

``tirbench.schedules.gemm.records`` lists these rungs in ``LADDER`` with the SIMT ones, each ``KernelRecord`` with the
pass config to compile it with; the checks, block order and software pipeline they use are in
``tirbench.schedules.common.tiling``.
"""
from __future__ import annotations

from collections.abc import Callable

from tvm import s_tir, tirx

from tirbench.schedules.common.checks import require_divides, require_positive_int, require_threads
from tirbench.schedules.common.padding import C_ROW_PAD, Padding, pad_to_tiles, padded_extents, require_shared_c
from tirbench.schedules.common.tiling import (
    WARP,
    bind_blocks,
    gemm_block,
    padded,
    pipeline,
    require_fetch,
    require_multiple,
    require_prefetch,
    require_shared,
    split_tile,
    warps_of,
)
from tirbench.schedules.intrinsics import mma_int8

#: The parameters that tile m, n, k, as the padding checks name them.
TILE_PARAMS = ("block_tile[0]", "block_tile[1]", "tile_k")


def pad_gemm(sch: s_tir.Schedule, block: str, tiles: tuple[int, int, int], c_scope: str,
         mn: tuple[int, int]) -> Padding:
    """``pad_to_tiles`` for a tensor-core helper: where C is in global memory its padded tile goes to shared memory
    (``store_through_shared``; checked to fit), where it already is in shared memory (a caller's epilogue) the padded
    tile stays there (``fold_into_consumer``)."""
    if c_scope == "global":
        require_shared_c(tiles[:2], mn)
    return pad_to_tiles(sch, block, tiles, shared_output=c_scope == "global")


def _require_float16(sch: s_tir.Schedule, blk: s_tir.SBlockRV, *, kernel: str) -> None:
    """ValueError unless the GEMM block reads float16 inputs (``kernel``: what needs them, for the message)."""
    dtype = sch.get(blk).reads[0].source.dtype
    if dtype != "float16":
        raise ValueError(f"{kernel} float16 inputs, got a {dtype} workload: use gemm(m, n, k, 'float16')")


def _require_warp_tiles(mnk: tuple[int, int, int], block_tile: tuple[int, int], warp_tile: tuple[int, int],
                        tile_k: int, stages: int, raster: int, *, k_step: int, vector: int) -> int:
    """The one-line checks of a warp-tiled tensor-core GEMM (tiles divide the problem and each other, fragments of
    16 rows/columns, ``tile_k`` whole k steps, the fetch even over the threads); returns the warps per block."""
    (m, n, k), (bm, bn), (wm, wn) = mnk, block_tile, warp_tile
    require_divides(m, bm, param="block_tile[0]", axis="m")
    require_divides(n, bn, param="block_tile[1]", axis="n")
    require_divides(k, tile_k, param="tile_k", axis="k")
    warps = warps_of(block_tile, warp_tile)
    for value, param, unit in ((wm, "warp_tile[0]", 16), (wn, "warp_tile[1]", 16), (tile_k, "tile_k", k_step)):
        require_multiple(value, unit, param=param)
    require_positive_int(stages, param="stages")
    require_divides(m // bm, raster, param="raster", axis="the block rows")
    require_threads(warps * WARP, param="block_tile/warp_tile")
    require_fetch(bm, tile_k, warps * WARP, vector, operand="A")
    require_fetch(bn, tile_k, warps * WARP, vector, operand="B")
    return warps


def _warp_tiled_nest(sch: s_tir.Schedule, blk: s_tir.SBlockRV, block_tile: tuple[int, int],
                     warp_tile: tuple[int, int], tile_k: int, k_step: int,
                     raster: int) -> tuple[s_tir.SBlockRV, s_tir.LoopRV, s_tir.LoopRV, s_tir.LoopRV]:
    """The loop nest of the warp-tiled kernels (v6, v7, int8 mma): 16 x 16 x ``k_step`` products blockized
    (``"<block>_o"``), block tile -> blockIdx.x (rasterized), warp tile -> threadIdx.y, k in ``tile_k`` tiles of
    ``k_step`` steps, a batch loop before m, n, k (a batched GEMM) -> blockIdx.y; returns (the product block, the
    k-tile loop, the k-step loop, the warp loop)."""
    (bm, bn), (wm, wn) = block_tile, warp_tile
    *batch, i, j, kk = sch.get_loops(blk)
    for loop in batch:
        sch.bind(loop, "blockIdx.y")
    i, i16 = sch.split(i, factors=[None, 16])
    j, j16 = sch.split(j, factors=[None, 16])
    kk, k_in = sch.split(kk, factors=[None, k_step])
    sch.reorder(i, j, kk, i16, j16, k_in)
    tile = sch.blockize(i16)  # one 16 x 16 x k_step product
    by, wy, wi = sch.split(i, factors=[None, bm // wm, wm // 16])
    bx, wx, wj = sch.split(j, factors=[None, bn // wn, wn // 16])
    ko, ki = sch.split(kk, factors=[None, tile_k // k_step])
    sch.reorder(by, bx, wy, wx, ko, ki, wi, wj)
    bind_blocks(sch, by, bx, raster)
    warp = sch.fuse(wy, wx)
    sch.bind(warp, "threadIdx.y")
    return tile, ko, ki, warp


def _lanes_16x16(r, c):
    """[row tile, column tile, 32 lanes, 8 registers]: a 16 x 16 tile (fp16 operand, or accumulator) laid out as
    ldmatrix / mma.sync hold it in a "warp" buffer."""
    from tvm.s_tir.tensor_intrin import cuda as tc

    return (r // 16, c // 16, *tc.shared_16x16_to_ldmatrix_32x8_layout(r % 16, c % 16))


def _lanes_16x32(r, c):
    """[row tile, k step, 32 lanes, 16 bytes]: a 16 x 32 int8 operand tile as ldmatrix / mma.sync m16n8k32 hold it."""
    from tvm.s_tir.tensor_intrin import cuda as tc

    return (r // 16, c // 32, *tc.shared_16x32_to_ldmatrix_32x16_layout(r % 16, c % 32))


def _after_batch(layout: Callable) -> Callable:
    """``layout`` of a tile's (row, column) applied to the last two axes of a buffer, its batch axes (a batched
    GEMM's) kept in front."""
    return lambda *ix: (*ix[:-2], *layout(*ix[-2:]))


def _tensorize_warp_tile(sch: s_tir.Schedule, block: str, frags: tuple[s_tir.SBlockRV, ...], k_step: int,
                         intrins: dict[str, str], lanes: tuple[Callable, Callable] | None) -> None:
    """Tensorize a warp-tiled kernel: the A/B fragment loads (``frags[:2]``, in 16 x ``k_step`` tiles), the fill,
    the accumulator store (``frags[2]``, 16 x 16 tiles) and the product, ``intrins`` naming each; ``lanes``: the
    (operand, accumulator) layouts of "warp" buffers, laid out first (None: wmma fragments need none)."""
    frag_a, frag_b, acc = frags
    load_a, load_b = (split_tile(sch, frag, 16, k_step) for frag in (frag_a, frag_b))
    store = split_tile(sch, acc, 16, 16)
    if lanes is not None:
        operand, accumulator = lanes
        sch.transform_layout(frag_a, ("write", 0), _after_batch(operand))
        sch.transform_layout(frag_b, ("write", 0), _after_batch(operand))
        sch.transform_layout(acc, ("read", 0), _after_batch(accumulator))
    sch.tensorize(load_a, intrins["load_a"])
    sch.tensorize(load_b, intrins["load_b"])
    sch.tensorize(sch.get_loops(sch.get_sblock(f"{block}_init"))[-2], intrins["init"])
    sch.tensorize(store, intrins["store"])
    sch.tensorize(sch.get_loops(sch.get_sblock(block))[-3], intrins["compute"])


def _require_fp16_tiles(sch: s_tir.Schedule, block: str, *, mma: bool, block_tile: tuple[int, int],
                        warp_tile: tuple[int, int], tile_k: int, stages: int, raster: int, prefetch: str) -> int:
    """The one-line checks of v6/v7 on the tiles padded to (any m, n, k), the prefetch and the shared memory of
    the pipeline (rows padded by 8 halves); returns the warps per block."""
    bm, bn = block_tile
    mnk = padded_extents(sch, block, (bm, bn, tile_k), TILE_PARAMS)  # any m, n, k, checked as padded
    warps = _require_warp_tiles(mnk, block_tile, warp_tile, tile_k, stages, raster, k_step=16, vector=8)
    require_prefetch(prefetch, stages)
    if not mma and prefetch != "none":
        raise ValueError(f"prefetch={prefetch!r}: the wmma kernel loads its fragments in the step that uses them")
    require_shared(stages * (bm * padded(tile_k, 32, 8) + tile_k * padded(bn, 32, 8)) * 2,
                   block_tile=block_tile, tile_k=tile_k, stages=stages)
    return warps


def _fp16_intrins(mma: bool, c_scope: str) -> tuple[dict[str, str], tuple[str, str, str]]:
    """The tensor intrinsics of v7 (``mma``: ldmatrix + mma.sync) or v6 (wmma) storing C to ``c_scope``, and the
    scopes of the A, B fragments and the accumulator."""
    from tvm.s_tir.tensor_intrin import cuda as tc  # registers the intrinsics (slow on first import)

    if mma:
        store = {"global": tc.MMA_store_16x16_f32_global_INTRIN,
                 "shared.dyn": tc.MMA_store_16x16_f32_shared_dyn_INTRIN_SIMPLE}[c_scope]
        return {"load_a": tc.LDMATRIX_f16_A_DYN_INTRIN, "load_b": tc.LDMATRIX_f16_B_DYN_INTRIN,
                "compute": tc.MMA_f16f16f32_INTRIN, "init": tc.MMA_fill_16x16_f32_INTRIN, "store": store}, ("warp",) * 3
    intrins = tc.get_wmma_intrin_group(load_scope="shared.dyn", store_scope=c_scope, in_dtype="float16",
                                       out_dtype="float32", trans_b=False)
    return intrins, ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


def _stage_padded_tiles(sch: s_tir.Schedule, tile: s_tir.SBlockRV, ko: s_tir.LoopRV, warps: int) -> None:
    """A and B tiles of a k tile to shared memory, 16-byte copies spread over the block's threads, rows padded by
    8 halves so the fragment loads are conflict-free."""
    for idx in (0, 1):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ko)
        _, ty, tx, vec = sch.split(sch.fuse(*sch.get_loops(sh)[-2:]), factors=[None, warps, WARP, 8])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
        sch.storage_align(sh, 0, axis=-2, factor=32, offset=8)


def _tensor_core(sch: s_tir.Schedule, *, mma: bool, block_tile: tuple[int, int], warp_tile: tuple[int, int],
                 tile_k: int, stages: int, async_copy: bool, raster: int = 1,
                 prefetch: str = "none", block: str = "C", batch: bool = False) -> s_tir.Schedule:
    """Tensor-core GEMM on 16x16x16 tiles: wmma fragments, or (``mma``) ldmatrix + mma.sync m16n8k16.

    Block tile -> warps, each accumulating a ``warp_tile`` of C in 16x16 fragments. A/B tiles of ``tile_k``
    go to shared memory (16-byte copies; rows padded by 8 halves so fragment loads are conflict-free),
    fragments are loaded per 16-deep k step, accumulators are stored straight to C. ``prefetch`` (``mma`` only,
    see ``PREFETCH``): how far ahead of the math the fragment loads run. Any m, n, k (C in global memory): a tile
    that does not divide its extent pads the iteration space to the tiles (``tirbench.schedules.common.padding``).
    ``batch``: the block is a batched GEMM (loops batch, m, n, k), the batch on blockIdx.y.
    """
    blk, m, n, _ = gemm_block(sch, block, batch=batch)
    _require_float16(sch, blk, kernel="tensor cores need")
    c_scope = sch.get(blk).writes[0].source.scope()  # global, or shared where an epilogue copies C out
    warps = _require_fp16_tiles(sch, block, mma=mma, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k,
                                stages=stages, raster=raster, prefetch=prefetch)
    padding = pad_gemm(sch, block, (*block_tile, tile_k), c_scope, (m, n))
    blk = sch.get_sblock(block)
    intrins, scopes = _fp16_intrins(mma, sch.get(blk).writes[0].source.scope())
    tile, ko, ki, warp = _warp_tiled_nest(sch, blk, block_tile, warp_tile, tile_k, 16, raster)
    _stage_padded_tiles(sch, tile, ko, warps)
    frag_a, frag_b = (sch.cache_read(tile, idx, scopes[idx]) for idx in (0, 1))
    sch.compute_at(frag_a, ki)
    sch.compute_at(frag_b, ki)
    acc = sch.cache_write(tile, 0, scopes[2])
    sch.reverse_compute_at(acc, warp)
    sch.decompose_reduction(tile, ko)  # blocks "C_o_init" / "C_init"
    _tensorize_warp_tile(sch, block, (frag_a, frag_b, acc), 16, intrins,
                         (_lanes_16x16, _lanes_16x16) if mma else None)
    pipeline(sch, ko, stages, async_copy, ki=ki if prefetch != "none" else None, next_tile=prefetch == "next_tile")
    padding.finish(sch, warps)
    return sch


def gemm_v6_wmma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                 warp_tile: tuple[int, int] = (64, 32), tile_k: int = 32, block: str = "C") -> s_tir.Schedule:
    """fp16 tensor cores through wmma 16x16x16 fragments (float32 accumulators); synchronous copies.

    Any m, n, k: a shape the tiles do not divide is padded to them (``tirbench.schedules.common.padding``): predicated
    fills, and C stored through a shared-memory tile and a predicated copy. Costs the padded work (edge blocks and
    the last k tile multiply zeros), that pass of C through shared memory, and shared memory for the C tile
    (bm x (bn + 8) floats; the pipeline's buffers are reused for it). Divisible shapes compile as without padding."""
    return _tensor_core(sch, mma=False, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=1,
                        async_copy=False, block=block)


def gemm_v7_mma(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                warp_tile: tuple[int, int] = (64, 64), tile_k: int = 32, stages: int = 3,
                async_copy: bool = True, raster: int = 1, prefetch: str = "k_step", block: str = "C",
                batch: bool = False) -> s_tir.Schedule:
    """fp16 tensor cores through ldmatrix + mma.sync m16n8k16: cp.async copies into a ``stages``-deep
    shared-memory pipeline, fragment loads ahead of the math (``prefetch``, default one k step: see
    ``PREFETCH``). ``raster``: blocks ordered in groups of that many block rows, for L2 reuse. Any m, n, k, at the
    costs ``gemm_v6_wmma`` lists. ``batch``: a batched GEMM block (loops batch, m, n, k; the batch on blockIdx.y),
    as the grouped convolution's (``conv.grouped_mma``)."""
    return _tensor_core(sch, mma=True, block_tile=block_tile, warp_tile=warp_tile, tile_k=tile_k, stages=stages,
                        async_copy=async_copy, raster=raster, prefetch=prefetch, block=block, batch=batch)


def _stage_swizzled_int8_tiles(sch: s_tir.Schedule, shared: list[s_tir.SBlockRV], ko: s_tir.LoopRV,
                               warps: int, a_copy: int = mma_int8.CHUNK, batch: bool = False) -> None:
    """The int8 A and B shared tiles (``shared``, already read) copied per k tile in the swizzled layout of
    ``intrinsics.mma_int8``, 16-byte chunks spread over the block's threads panel by panel; A's chunks as
    ``a_copy``-byte copies (``gemm_mma_int8``)."""
    for sh, copy in zip(shared, (a_copy, mma_int8.CHUNK)):
        sch.compute_at(sh, ko)
        sch.transform_layout(sh, ("write", 0), _after_batch(mma_int8.swizzle) if batch else mma_int8.swizzle,
                             assume_injective_transform=True)  # XOR swizzles are bijective; TVM cannot tell
        r, c = sch.get_loops(sh)[-2:]
        panel, c = sch.split(c, factors=[None, mma_int8.PANEL])
        c, vec = sch.split(c, factors=[None, mma_int8.CHUNK])
        sch.reorder(r, panel, c, vec)  # a phase of 8 threads fills 4 rows of one panel: 128 contiguous bytes
        _, ty, tx = sch.split(sch.fuse(r, panel, c), factors=[None, warps, WARP])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        if copy < mma_int8.CHUNK:  # a chunk in pieces, each its own copy
            sch.unroll(sch.split(vec, factors=[None, copy])[0])
            vec = sch.get_loops(sh)[-1]
        sch.vectorize(vec)


def _int8_extents(sch: s_tir.Schedule, block: str, block_tile: tuple[int, int], tile_k: int,
                  kernel: str, batch: bool = False) -> tuple[str, bool, tuple[object, object],
                                                         tuple[object, object, object]]:
    """An int8 GEMM kernel's start: a one-line ValueError unless ``block`` reads int8; C's scope, whether the tiles
    pad (a caller's shared C, the convolution's epilogue, takes any m, n; C in global memory needs tiles that divide),
    (m, n) and the extents the tiles must divide (padded where they pad). ``batch``: a batched GEMM block."""
    blk, m, n, k = gemm_block(sch, block, batch=batch)
    dtype = sch.get(blk).reads[0].source.dtype
    if dtype != "int8":
        raise ValueError(f"the int8 {kernel} kernel needs int8 inputs, got a {dtype} workload")
    c_scope = sch.get(blk).writes[0].source.scope()
    pads = c_scope != "global"
    mnk = padded_extents(sch, block, (*block_tile, tile_k), TILE_PARAMS) if pads else (m, n, k)
    return c_scope, pads, (m, n), mnk


def wmma_fragments(sch: s_tir.Schedule, tile: s_tir.SBlockRV, k_inner: s_tir.LoopRV,
                   warp: s_tir.LoopRV) -> tuple[s_tir.SBlockRV, s_tir.SBlockRV, s_tir.SBlockRV]:
    """A's and B's wmma fragments loaded at each ``k_inner`` step of ``tile`` and its accumulator written back per
    ``warp``: (A's, B's, the accumulator's) blocks, to tensorize."""
    frag_a = sch.cache_read(tile, 0, "wmma.matrix_a")
    frag_b = sch.cache_read(tile, 1, "wmma.matrix_b")
    sch.compute_at(frag_a, k_inner)
    sch.compute_at(frag_b, k_inner)
    acc = sch.cache_write(tile, 0, "wmma.accumulator")
    sch.reverse_compute_at(acc, warp)
    return frag_a, frag_b, acc


def gemm_mma_int8(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (128, 128),
                  warp_tile: tuple[int, int] = (64, 64), tile_k: int = 64, stages: int = 3, raster: int = 1,
                  block: str = "C", a_copy: int = mma_int8.CHUNK, batch: bool = False) -> s_tir.Schedule:
    """int8 tensor cores: ldmatrix + mma.sync m16n8k32 (int32 accumulators) on C[m, n] += A[m, k] * B[n, k].

    v7's structure (block tile -> warps of ``warp_tile``, a ``stages``-deep cp.async pipeline of ``tile_k`` tiles,
    fragments per 32-deep k step) with int8 operands that are both k-contiguous, and shared tiles stored in the
    swizzled layout of ``intrinsics.mma_int8`` (XOR on 16-byte chunks; conflict-free without padding), filled with
    16-byte copies, read by ldmatrix intrinsics that address the swizzled rows. A caller's C in shared memory (the
    convolution's epilogue) takes any m, n, k, as in ``gemm_v8_wgmma``; C in global memory needs tiles that divide.
    ``a_copy``: bytes per copy of A's fill (16; 4 or 8 where A's rows are contiguous only in such runs, as the im2col
    rows of a convolution that reads 4 lanes per pixel). ``batch``: a batched GEMM block (loops batch, m, n, k; the
    batch on blockIdx.y), as the grouped int8 convolution's (``conv.int8.conv2d_int8_grouped_mma``).
    """
    if a_copy not in (4, 8, mma_int8.CHUNK):
        raise ValueError(f"a_copy={a_copy!r}: A's fill copies 4, 8 or {mma_int8.CHUNK} bytes at a time (cp.async)")
    c_scope, pads, (m, n), mnk = _int8_extents(sch, block, block_tile, tile_k, "mma", batch)
    bm, bn = block_tile
    warps = _require_warp_tiles(mnk, block_tile, warp_tile, tile_k, stages, raster,
                                k_step=mma_int8.PANEL, vector=mma_int8.CHUNK)
    require_shared(stages * (bm + bn) * tile_k, block_tile=block_tile, tile_k=tile_k, stages=stages)
    padding = pad_gemm(sch, block, (bm, bn, tile_k), c_scope, (m, n)) if pads else Padding()
    blk = sch.get_sblock(block)
    names = mma_int8.register()
    tile, ko, ki, warp = _warp_tiled_nest(sch, blk, block_tile, warp_tile, tile_k, mma_int8.PANEL, raster)
    shared = [sch.cache_read(tile, idx, "shared.dyn") for idx in (0, 1)]
    frag_a, frag_b = (sch.cache_read(tile, idx, "warp") for idx in (0, 1))  # 2-D, before the shared tiles' layout
    sch.compute_at(frag_a, ki)
    sch.compute_at(frag_b, ki)
    _stage_swizzled_int8_tiles(sch, shared, ko, warps, a_copy, batch)
    acc = sch.cache_write(tile, 0, "warp")
    sch.reverse_compute_at(acc, warp)
    sch.decompose_reduction(tile, ko)  # blocks "<block>_o_init" / "<block>_init"
    _tensorize_warp_tile(sch, block, (frag_a, frag_b, acc), mma_int8.PANEL,
                         {**names, "store": names["store"][c_scope]}, (_lanes_16x32, _lanes_16x16))
    pipeline(sch, ko, stages, async_copy=True)
    padding.finish(sch, warps)
    return sch


#: Bytes of k per row of a wmma int8 panel: one fragment's k (16 values), a 16-byte copy.
WMMA_INT8_K = 16


def wmma_int8_panel(row: tirx.PrimExpr, k: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row, k) of an int8 operand tile lives in shared memory for ``gemm_wmma_int8``: [k // 16, row,
    k % 16], k panels of 16-byte rows. A 16 x 16 fragment is then 256 contiguous bytes, so each wmma load starts
    32-byte aligned as it must (in a plain [row, k] tile every odd k step starts 16 bytes off), and a phase of 8
    rows reads or writes 128 contiguous bytes: no bank conflicts, no padding."""
    return k // WMMA_INT8_K, row, k % WMMA_INT8_K


def _copy_registers(rows: int, tile_k: int, threads: int) -> Callable:
    """The register copy of a ``rows`` x ``tile_k`` int8 tile that ``threads`` threads fill 16 bytes at a time,
    panel by panel (copy f = panel * rows + row, thread f % threads), indexed by the thread's own copies:
    [f // threads, byte]. TVM does not shrink a register buffer filled under its own thread loops to one thread's
    values, so the layout leaves the thread out; it is not injective over the tile, which TVM cannot check, but it
    is per thread, where the thread's copies f // threads are all different."""
    return lambda r, k: (((k % tile_k) // WMMA_INT8_K * rows + r % rows) // threads, k % WMMA_INT8_K)


def _stage_int8_panels(sch: s_tir.Schedule, tile: s_tir.SBlockRV, ko: s_tir.LoopRV, warps: int) -> None:
    """The int8 A and B tiles of a k tile copied to shared memory in ``wmma_int8_panel`` layout through registers
    (a 16-byte global load into a register copy, then a 16-byte shared store), spread over the block's threads
    panel by panel, consecutive threads on consecutive rows."""
    for idx in (0, 1):
        sh = sch.cache_read(tile, idx, "shared.dyn")
        sch.compute_at(sh, ko)
        sch.transform_layout(sh, ("write", 0), wmma_int8_panel)
        reg = sch.cache_read(sh, 0, "local")
        sch.compute_at(reg, ko)
        rows, tile_k = (int(sch.get(loop).extent) for loop in sch.get_loops(reg)[-2:])
        for copy in (reg, sh):
            r, c = sch.get_loops(copy)[-2:]
            panel, vec = sch.split(c, factors=[None, WMMA_INT8_K])
            sch.reorder(panel, r, vec)
            _, ty, tx = sch.split(sch.fuse(panel, r), factors=[None, warps, WARP])
            sch.bind(ty, "threadIdx.y")
            sch.bind(tx, "threadIdx.x")
            sch.vectorize(vec)
        sch.transform_layout(reg, ("write", 0), _copy_registers(rows, tile_k, warps * WARP),
                             assume_injective_transform=True)


def gemm_wmma_int8(sch: s_tir.Schedule, *, block_tile: tuple[int, int] = (64, 64),
                   warp_tile: tuple[int, int] = (32, 32), tile_k: int = 32, block: str = "C") -> s_tir.Schedule:
    """int8 tensor cores on wmma m16n16k16 s8 fragments (int32 accumulators) on C[m, n] += A[m, k] * B[n, k]: the
    Turing (sm_75) int8 kernel, no cp.async, no mma.sync m16n8k32.

    v6's structure (block tile -> warps of ``warp_tile``, fragments per 16-deep k step, TVM's s8 wmma intrinsics
    with B column-major, i.e. stored [n, k]), the shared tiles in 16-byte k panels (``wmma_int8_panel``) and the
    next k tile prefetched into registers, as CUTLASS's Turing kernels do without cp.async: each k tile issues the
    next tile's global loads, then its own math, then stores the loaded tile to shared memory (a barrier before
    the math and one before the stores), so the loads are in flight during the math. As ``gemm_mma_int8``: a
    caller's C in shared memory (the convolution's epilogue) takes any m, n, k; C in global memory needs tiles that
    divide.
    """
    from tvm.s_tir.tensor_intrin import cuda as tc  # registers the intrinsics (slow on first import)

    c_scope, pads, (m, n), mnk = _int8_extents(sch, block, block_tile, tile_k, "wmma")
    bm, bn = block_tile
    warps = _require_warp_tiles(mnk, block_tile, warp_tile, tile_k, 1, 1, k_step=WMMA_INT8_K, vector=WMMA_INT8_K)
    c_tile = bm * (bn + C_ROW_PAD) * 4 if pads else 0  # a caller's int32 C tile (rows padded by C_ROW_PAD)
    require_shared((bm + bn) * tile_k + c_tile, block_tile=block_tile, tile_k=tile_k, stages=1)
    padding = pad_gemm(sch, block, (bm, bn, tile_k), c_scope, (m, n)) if pads else Padding()
    blk = sch.get_sblock(block)
    intrins = tc.get_wmma_intrin_group(load_scope="shared.dyn", store_scope=c_scope, in_dtype="int8",
                                       out_dtype="int32", trans_b=True)
    tile, ko, ki, warp = _warp_tiled_nest(sch, blk, block_tile, warp_tile, tile_k, WMMA_INT8_K, 1)
    _stage_int8_panels(sch, tile, ko, warps)
    frag_a, frag_b, acc = wmma_fragments(sch, tile, ki, warp)
    sch.decompose_reduction(tile, ko)  # blocks "<block>_o_init" / "<block>_init"
    _tensorize_warp_tile(sch, block, (frag_a, frag_b, acc), WMMA_INT8_K, intrins, None)
    # ko's body: A's and B's loads into registers and stores to shared memory, then the math; the copies run one
    # k tile ahead (stage 0), in the order loads, math, stores
    sch.annotate(ko, "software_pipeline_stage", [0, 0, 0, 0, 1])
    sch.annotate(ko, "software_pipeline_order", [0, 3, 1, 4, 2])
    padding.finish(sch, warps)
    return sch


#: cp.async in the mma kernel (storage rewriting must stay on there: the "warp" buffers need it).
MMA_ASYNC_CONFIG = {"tirx.use_async_copy": True}

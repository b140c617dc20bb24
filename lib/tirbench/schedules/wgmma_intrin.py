"""A Hopper ``wgmma`` tensor intrinsic for ``tensorize``: one warp's 16 x N x K share of a warpgroup product.

``wgmma.mma_async`` (sm_90a) is a warpgroup instruction: four warps (128 threads) issue it together and it
multiplies a 64 x K tile of A by a K x N tile of B, both read straight from shared memory through 64-bit
matrix descriptors, into registers spread over the 128 threads. TVM 0.27 ships the PTX (``T.ptx.wgmma``) but
no tensor intrinsic, so this module writes one in the shape the schedule can match: the block one *warp* owns,
C[16 rows, N] += A[16 rows, K] @ B[K, N]. Each warp issues the warpgroup instruction with the descriptor of its
warpgroup's 64 rows (its own rows minus 16 x its place in the group), so the four warps of a group, issuing
the same instruction together, compute their four blocks at once.

Shared-memory layouts (``LAYOUTS``; the PTX ISA's canonical layouts, in 8 x 8 "core matrices" of 16-byte rows):

- ``"interleaved"`` (no swizzle): A (K-major) as ``[row // 8, k // 8, row % 8, k % 8]``, B (N-major, ``trans-b``)
  as ``[k // 8, n // 8, k % 8, n % 8]``: each core matrix is 128 contiguous bytes.
- ``"swizzle128"``: 128-byte rows (64 halves: ``tile_k`` = 64) whose eight 16-byte chunks are permuted by XOR
  with the row index mod 8, which is how the hardware reads them: A as ``[k // 64, row, chunk ^ row % 8, k % 8]``,
  B as ``[n // 64, k, chunk ^ k % 8, n % 8]`` (a chunk is 8 consecutive k or n).
- The accumulators stay in registers, ``(n // 16, register)`` per lane: the layout of TVM's mma.sync
  intrinsics (``shared_16x16_to_ldmatrix_32x8_layout``) without the lane, which is register for register the
  wgmma layout of a warp's 16 rows; this module also registers the fill and store intrinsics for it.
"""
from __future__ import annotations

from tvm import tirx
from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T

#: wgmma N: a multiple of 8 up to 256; this layout stores C in 16-column tiles, so a multiple of 16 here.
MAX_N = 256
CORE_BYTES = 128  # one core matrix: 8 rows of 16 bytes
LAYOUTS = ("interleaved", "swizzle128")
_DESCRIPTOR_LAYOUT_TYPE = {"interleaved": 0, "swizzle128": 1}  # bits 62-63 of a matrix descriptor


def a_layout(layout: str, r: tirx.PrimExpr, k: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row r, k) of A lives in shared memory."""
    if layout == "interleaved":
        return r // 8, k // 8, r % 8, k % 8
    return k // 64, r, (((k % 64) // 8) ^ (r % 8)) % 8, k % 8  # "% 8": a bound TVM can see (XOR has none)


def b_layout(layout: str, k: tirx.PrimExpr, n: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (k, column n) of B lives in shared memory."""
    if layout == "interleaved":
        return k // 8, n // 8, k % 8, n % 8
    return n // 64, k, (((n % 64) // 8) ^ (k % 8)) % 8, n % 8


def _matrix_descriptor(ptr: tirx.PrimExpr, lbo: int, sbo: int, layout: str) -> tirx.PrimExpr:
    """The 64-bit wgmma descriptor of a shared-memory tile: address, LBO and SBO in 16-byte units, layout type."""
    addr = T.cuda.cvta_generic_to_shared(ptr)
    start = tirx.Cast("uint64", tirx.bitwise_and(tirx.shift_right(addr, tirx.const(4, "uint32")),
                                                 tirx.const(0x3FFF, "uint32")))
    fixed = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (_DESCRIPTOR_LAYOUT_TYPE[layout] << 62)
    return tirx.bitwise_or(start, tirx.const(fixed, "uint64"))


def lane_layout(i: tirx.PrimExpr, j: tirx.PrimExpr) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
    """(lane, register) holding element (i, j) of a 16 x 16 accumulator tile, as mma.sync and wgmma place it."""
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + 2 * (i // 8) + j % 2


def register_of(i: tirx.PrimExpr, j: tirx.PrimExpr) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
    """The accumulator layout of a warp's 16 x N rows: (16-column tile, register); the lane is implicit."""
    return j // 16, lane_layout(i % 16, j % 16)[1]


def element_of(lane: tirx.PrimExpr, reg: int) -> tuple[tirx.PrimExpr, int | tirx.PrimExpr]:
    """(row, column within the 16 x 16 tile) that register ``reg`` of ``lane`` holds (inverse of lane_layout)."""
    return lane // 4 + 8 * ((reg // 2) % 2), 8 * (reg // 4) + 2 * (lane % 4) + reg % 2


def _accumulator(c: T.handle, nt: int) -> tirx.Buffer:
    return T.match_buffer(c, (nt, 8), "float32", scope="local", offset_factor=1)


def _operand(handle: T.handle, shape: tuple[int, ...]) -> tirx.Buffer:
    return T.match_buffer(handle, shape, "float16", scope="shared.dyn", offset_factor=1)


def _whole(buf: tirx.Buffer) -> tirx.BufferRegion:
    return buf[tuple(slice(0, int(extent)) for extent in buf.shape)]


def wgmma_intrin(n: int, tile_k: int, layout: str, overlap_stages: int = 0) -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of C[16, n] += A[16, tile_k] @ B[tile_k, n] for one warp, fp16 inputs, fp32 accumulators.

    ``overlap_stages`` (> 1: the pipeline depth): leave this tile's wgmma group running (``wait_group 1``: the
    previous tile's group is done) and, first, wait for this tile's copies in a pipeline whose copies follow
    the math in the loop body (TVM's own wait assumes they precede it and allows one group too many).
    """
    nt = n // 16
    if layout == "interleaved":
        a_shape, b_shape = (2, tile_k // 8, 8, 8), (tile_k // 8, n // 8, 8, 8)
        a_lbo, a_sbo, a_step = CORE_BYTES, tile_k // 8 * CORE_BYTES, 128  # step: elements per 16 k
        b_lbo, b_sbo, b_step = n // 8 * CORE_BYTES, CORE_BYTES, 16 * n
    else:  # swizzle128, tile_k == 64: a k step moves 32 bytes along A's rows and 16 rows down B's panels
        a_shape, b_shape = (1, 16, 8, 8), (n // 64, tile_k, 8, 8)
        a_lbo, a_sbo, a_step = 16, 8 * CORE_BYTES, 16
        b_lbo, b_sbo, b_step = tile_k * CORE_BYTES, 8 * CORE_BYTES, 16 * 64
    warp_rows = 16 * tile_k  # elements of A one warp owns
    mma = getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{n}k16").f32.f16.f16

    def issue(A: tirx.Buffer, B: tirx.Buffer, C: tirx.Buffer, kk: tirx.Var) -> tirx.PrimExpr:
        """One m64n{n}k16 step kk, from the warpgroup's first row (this warp's rows - 16 x its place)."""
        place = tirx.floormod(tirx.floordiv(A.elem_offset, warp_rows), 4)
        a_desc = _matrix_descriptor(A.access_ptr("r", offset=kk * a_step - place * warp_rows), a_lbo, a_sbo, layout)
        b_desc = _matrix_descriptor(B.access_ptr("r", offset=kk * b_step), b_lbo, b_sbo, layout)
        regs = [C[t, r] for t in range(nt) for r in range(8)]
        return mma(*regs, a_desc, b_desc, True, 1, 1, 0, 1)

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A, B, C = _operand(a, a_shape), _operand(b, b_shape), _accumulator(c, nt)
        with T.sblock("root"):
            T.reads(_whole(C), _whole(A), _whole(B))
            T.writes(_whole(C))
            for i, j, k in T.grid(16, n, tile_k):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    tile, reg = T.meta_var(register_of(vi, vj))
                    C[tile, reg] = C[tile, reg] + T.Cast("float32", A[a_layout(layout, vi, vk)]) * T.Cast(
                        "float32", B[b_layout(layout, vk, vj)])

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A, B, C = _operand(a, a_shape), _operand(b, b_shape), _accumulator(c, nt)
        with T.sblock("root"):
            T.reads(_whole(C), _whole(A), _whole(B))
            T.writes(_whole(C))
            for _tx in T.thread_binding(0, 32, "threadIdx.x"):
                if overlap_stages > 1:
                    T.ptx.cp.async_.wait_group(overlap_stages - 2)
                    T.cuda.cta_sync()
                T.ptx.fence.proxy.async_.shared__cta()  # cp.async wrote the tiles; wgmma reads them (async proxy)
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(tile_k // 16):
                    T.evaluate(issue(A, B, C, kk))
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1 if overlap_stages > 1 else 0)

    return desc, impl


def fill_intrin(n: int) -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of zeroing a warp's 16 x n accumulators (each lane its n / 2 registers)."""
    nt = n // 16

    @T.prim_func(s_tir=True)
    def desc(c: T.handle) -> None:
        C = _accumulator(c, nt)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:nt, 0:8])
            for i, j in T.grid(16, n):
                with T.sblock("C_init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    tile, reg = T.meta_var(register_of(vi, vj))
                    C[tile, reg] = T.float32(0)

    @T.prim_func(s_tir=True)
    def impl(c: T.handle) -> None:
        C = _accumulator(c, nt)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:nt, 0:8])
            for _tx in T.thread_binding(0, 32, "threadIdx.x"):
                for t, r in T.grid(nt, 8):
                    C[t, r] = T.float32(0)

    return desc, impl


def store_intrin(n: int, scope: str = "global") -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of writing a warp's 16 x n accumulators to C in ``scope`` (global memory, or a shared tile
    that an epilogue copies out), two adjacent columns per store."""
    nt = n // 16

    @T.prim_func(s_tir=True)
    def desc(c: T.handle, d: T.handle) -> None:
        C = _accumulator(c, nt)
        D = T.match_buffer(d, (16, n), "float32", scope=scope, offset_factor=1)
        with T.sblock("root"):
            T.reads(C[0:nt, 0:8])
            T.writes(D[0:16, 0:n])
            for i, j in T.grid(16, n):
                with T.sblock("C_local"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    tile, reg = T.meta_var(register_of(vi, vj))
                    D[vi, vj] = C[tile, reg]

    @T.prim_func(s_tir=True)
    def impl(c: T.handle, d: T.handle) -> None:
        ld = T.int32()
        C = _accumulator(c, nt)
        D = T.match_buffer(d, (16, n), "float32", scope=scope, offset_factor=1, strides=[ld, 1])
        with T.sblock("root"):
            T.reads(C[0:nt, 0:8])
            T.writes(D[0:16, 0:n])
            for tx in T.thread_binding(0, 32, "threadIdx.x"):
                T.ptx.wgmma.wait_group.sync.aligned(0)  # an overlapped kernel's last group may still be running
                for t, pair in T.grid(nt, 4):
                    for v in T.vectorized(2):
                        row, col = T.meta_var(element_of(tx, 2 * pair + v))
                        D[row, 16 * t + col] = C[t, 2 * pair + v]

    return desc, impl


def intrin_names(n: int, tile_k: int, layout: str, overlap_stages: int = 0,
                 store_scope: str = "global") -> dict[str, str]:
    """Register (once) the wgmma, fill and store intrinsics for this N, K tile, layout, overlap and scope of C;
    return their names."""
    made = {"compute": (f"tirbench_wgmma_m64n{n}k{tile_k}_f16f16f32_{layout}_overlap{overlap_stages}",
                        lambda: wgmma_intrin(n, tile_k, layout, overlap_stages)),
            "init": (f"tirbench_wgmma_fill_n{n}_f32", lambda: fill_intrin(n)),
            "store": (f"tirbench_wgmma_store_n{n}_f32_{store_scope}", lambda: store_intrin(n, store_scope))}
    for name, make in made.values():
        if TensorIntrin.get(name, allow_missing=True) is None:
            TensorIntrin.register(name, *make())
    return {role: name for role, (name, _) in made.items()}

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

from collections.abc import Callable
from typing import NamedTuple

from tvm import tirx
from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T

#: wgmma N: a multiple of 8 up to 256; this layout stores C in 16-column tiles, so a multiple of 16 here.
MAX_N = 256
#: Integer wgmma (.s32.s8.s8) N: the ISA's shape table goes to 256 (CUTLASS uses m64n256k32 s8); TVM 0.27's PTX table
#: follows the instruction's syntax line, which stops at 224, and ``allow_integer_n256`` adds 240 and 256 to it.
MAX_N_INT8 = 256
CORE_BYTES = 128  # one core matrix: 8 rows of 16 bytes
LAYOUTS = ("interleaved", "swizzle128")
_DESCRIPTOR_LAYOUT_TYPE = {"interleaved": 0, "swizzle128": 1}  # bits 62-63 of a matrix descriptor


#: Elements per 16-byte row of a core matrix, by input dtype; and the accumulator dtype.
CHUNK_ELEMS = {"float16": 8, "int8": 16}
ACCUMULATOR = {"float16": "float32", "int8": "int32"}


def _k_major(layout: str, r: tirx.PrimExpr, k: tirx.PrimExpr, e: int) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row r, k) of a K-major operand with ``e`` elements per 16 bytes lives in shared memory."""
    if layout == "interleaved":
        return r // 8, k // e, r % 8, k % e
    return k // (8 * e), r, (((k % (8 * e)) // e) ^ (r % 8)) % 8, k % e  # "% 8": a bound TVM can see (XOR: none)


def a_layout(layout: str, r: tirx.PrimExpr, k: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row r, k) of a half A lives in shared memory."""
    return _k_major(layout, r, k, CHUNK_ELEMS["float16"])


def int8_layout(layout: str, r: tirx.PrimExpr, k: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row r, k) of an int8 A, or of an int8 B stored [n, k] (row n), lives in shared memory."""
    return _k_major(layout, r, k, CHUNK_ELEMS["int8"])


def b_layout(layout: str, k: tirx.PrimExpr, n: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (k, column n) of B lives in shared memory."""
    if layout == "interleaved":
        return k // 8, n // 8, k % 8, n % 8
    return n // 64, k, (((n % 64) // 8) ^ (k % 8)) % 8, n % 8


def descriptor(addr: tirx.PrimExpr, lbo: int, sbo: int, layout: str) -> tirx.PrimExpr:
    """The 64-bit wgmma descriptor of the shared-memory tile at ``addr`` (a 32-bit shared-window address): start
    address, LBO and SBO in 16-byte units, layout type."""
    start = tirx.Cast("uint64", tirx.bitwise_and(tirx.shift_right(addr, tirx.const(4, "uint32")),
                                                 tirx.const(0x3FFF, "uint32")))
    fixed = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (_DESCRIPTOR_LAYOUT_TYPE[layout] << 62)
    return tirx.bitwise_or(start, tirx.const(fixed, "uint64"))


def _matrix_descriptor(ptr: tirx.PrimExpr, lbo: int, sbo: int, layout: str) -> tirx.PrimExpr:
    """``descriptor`` of the tile a generic pointer into shared memory points at."""
    return descriptor(T.cuda.cvta_generic_to_shared(ptr), lbo, sbo, layout)


def lane_layout(i: tirx.PrimExpr, j: tirx.PrimExpr) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
    """(lane, register) holding element (i, j) of a 16 x 16 accumulator tile, as mma.sync and wgmma place it."""
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + 2 * (i // 8) + j % 2


def register_of(i: tirx.PrimExpr, j: tirx.PrimExpr) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
    """The accumulator layout of a warp's 16 x N rows: (16-column tile, register); the lane is implicit."""
    return j // 16, lane_layout(i % 16, j % 16)[1]


def element_of(lane: tirx.PrimExpr, reg: int) -> tuple[tirx.PrimExpr, int | tirx.PrimExpr]:
    """(row, column within the 16 x 16 tile) that register ``reg`` of ``lane`` holds (inverse of lane_layout)."""
    return lane // 4 + 8 * ((reg // 2) % 2), 8 * (reg // 4) + 2 * (lane % 4) + reg % 2


def _accumulator(c: T.handle, nt: int, dtype: str = "float32") -> tirx.Buffer:
    return T.match_buffer(c, (nt, 8), dtype, scope="local", offset_factor=1)


def _operand(handle: T.handle, shape: tuple[int, ...], dtype: str = "float16") -> tirx.Buffer:
    return T.match_buffer(handle, shape, dtype, scope="shared.dyn", offset_factor=1)


def _whole(buf: tirx.Buffer) -> tirx.BufferRegion:
    return buf[tuple(slice(0, int(extent)) for extent in buf.shape)]


def allow_integer_n256() -> None:
    """Add m64n240k32 and m64n256k32 to TVM 0.27's integer wgmma shapes (once; ptxas takes them: PTX ISA 9.7.15.2,
    Matrix Shape). TVM's table lists the shapes of the instruction's syntax line, which stops at 224; its entries are
    frozen, so the shape slot's choices are replaced in place, where the ``T.ptx`` namespace and the code generator
    both read them."""
    from tvm.backend.cuda.ptx.table import TABLE

    for form in ("ss", "rs"):
        slot = next(s for s in TABLE[f"wgmma_int_{form}"].slots if s.name == "shape")
        extra = tuple(shape for shape in ("m64n240k32", "m64n256k32") if shape not in slot.choices)
        if extra:
            object.__setattr__(slot, "choices", slot.choices + extra)


class _Operand(NamedTuple):
    """How one operand tile of a warp's share sits in shared memory for a wgmma descriptor: its buffer shape, the
    leading and stride byte offsets (LBO, SBO), and the elements between consecutive k steps."""

    shape: tuple[int, ...]
    lbo: int
    sbo: int
    step: int


def _operands(n: int, tile_k: int, layout: str, dtype: str) -> tuple[_Operand, _Operand]:
    """(A, B) of C[16, n] += A[16, tile_k] @ B in ``layout``: A K-major; B N-major for float16, K-major for int8."""
    e, int8 = CHUNK_ELEMS[dtype], dtype == "int8"
    if layout == "interleaved":
        a = _Operand((2, tile_k // e, 8, e), CORE_BYTES, tile_k // e * CORE_BYTES, 2 * 8 * e)  # two core matrices
        if int8:
            return a, a._replace(shape=(n // 8, tile_k // e, 8, e))
        return a, _Operand((tile_k // 8, n // 8, 8, 8), n // 8 * CORE_BYTES, CORE_BYTES, 16 * n)
    # swizzle128, tile_k = one 128-byte row: a k step moves 32 bytes along the rows
    a = _Operand((1, 16, 8, e), 16, 8 * CORE_BYTES, 32 if int8 else 16)
    if int8:
        return a, a._replace(shape=(1, n, 8, e))
    # fp16 B: a k step is 16 rows of k down B's 64-column panels
    return a, _Operand((n // 64, tile_k, 8, 8), tile_k * CORE_BYTES, 8 * CORE_BYTES, 16 * 64)


def _issuer(n: int, tile_k: int, layout: str, dtype: str, a: _Operand,
            b: _Operand) -> Callable[[tirx.Buffer, tirx.Buffer, tirx.Buffer, tirx.Var], tirx.PrimExpr]:
    """``issue(A, B, C, kk)``: the ``wgmma.mma_async`` of k step kk (m64n``n``, 32 bytes of k) from the warpgroup's
    first row (this warp's rows - 16 x its place), as the intrinsic's implementation calls it."""
    nt, int8 = n // 16, dtype == "int8"
    warp_rows = 16 * tile_k  # elements of A one warp owns
    if int8 and n > 224:
        allow_integer_n256()
    chain = getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{n}k{32 if int8 else 16}")
    mma = chain.s32.s8.s8 if int8 else chain.f32.f16.f16

    def issue(A: tirx.Buffer, B: tirx.Buffer, C: tirx.Buffer, kk: tirx.Var) -> tirx.PrimExpr:
        place = tirx.floormod(tirx.floordiv(A.elem_offset, warp_rows), 4)
        a_desc = _matrix_descriptor(A.access_ptr("r", offset=kk * a.step - place * warp_rows), a.lbo, a.sbo, layout)
        b_desc = _matrix_descriptor(B.access_ptr("r", offset=kk * b.step), b.lbo, b.sbo, layout)
        if int8:  # integer wgmma: registers typed .u32 (the same bits), no scale or transpose immediates
            bits = T.decl_buffer((nt, 8), "uint32", data=C.data, scope="local")
            return mma(*[bits[t, r] for t in range(nt) for r in range(8)], a_desc, b_desc, True)
        regs = [C[t, r] for t in range(nt) for r in range(8)]
        return mma(*regs, a_desc, b_desc, True, 1, 1, 0, 1)

    return issue


def _wgmma_desc(n: int, tile_k: int, layout: str, dtype: str, a_shape: tuple[int, ...],
                b_shape: tuple[int, ...]) -> tirx.PrimFunc:
    """The computation ``tensorize`` matches: C[16, n] += A[16, tile_k] @ B, elements where ``layout`` puts them."""
    nt, acc, int8 = n // 16, ACCUMULATOR[dtype], dtype == "int8"
    a_at = int8_layout if int8 else a_layout

    def b_at(vk, vj):
        return int8_layout(layout, vj, vk) if int8 else b_layout(layout, vk, vj)

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A, B, C = _operand(a, a_shape, dtype), _operand(b, b_shape, dtype), _accumulator(c, nt, acc)
        with T.sblock("root"):
            T.reads(_whole(C), _whole(A), _whole(B))
            T.writes(_whole(C))
            for i, j, k in T.grid(16, n, tile_k):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    tile, reg = T.meta_var(register_of(vi, vj))
                    C[tile, reg] = C[tile, reg] + T.Cast(acc, A[a_at(layout, vi, vk)]) * T.Cast(
                        acc, B[b_at(vk, vj)])

    return desc


def _wgmma_impl(n: int, tile_k: int, overlap_stages: int, dtype: str, a_shape: tuple[int, ...],
                b_shape: tuple[int, ...], issue: Callable) -> tirx.PrimFunc:
    """What ``tensorize`` puts in its place: fences, one ``issue`` per k step, commit, and the wait (see
    ``wgmma_intrin`` for ``overlap_stages``)."""
    nt, acc = n // 16, ACCUMULATOR[dtype]
    k_step = 32 if dtype == "int8" else 16  # elements of k per instruction: 32 bytes

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A, B, C = _operand(a, a_shape, dtype), _operand(b, b_shape, dtype), _accumulator(c, nt, acc)
        with T.sblock("root"):
            T.reads(_whole(C), _whole(A), _whole(B))
            T.writes(_whole(C))
            for _tx in T.thread_binding(0, 32, "threadIdx.x"):
                if overlap_stages > 1:
                    T.ptx.cp.async_.wait_group(overlap_stages - 2)
                    T.cuda.cta_sync()
                T.ptx.fence.proxy.async_.shared__cta()  # cp.async wrote the tiles; wgmma reads them (async proxy)
                T.ptx.wgmma.fence.sync.aligned()
                for kk in T.unroll(tile_k // k_step):
                    T.evaluate(issue(A, B, C, kk))
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1 if overlap_stages > 1 else 0)

    return impl


def wgmma_intrin(n: int, tile_k: int, layout: str, overlap_stages: int = 0,
                 dtype: str = "float16") -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of C[16, n] += A[16, tile_k] @ B for one warp: fp16 inputs with B[tile_k, n] (N-major) and fp32
    accumulators, or (``dtype="int8"``) int8 inputs with B[n, tile_k] (K-major: wgmma takes 8-bit operands only
    K-major) and int32 accumulators. A k step is 32 bytes of k either way (k16 halves, k32 bytes).

    ``overlap_stages`` (> 1: the pipeline depth): leave this tile's wgmma group running (``wait_group 1``: the
    previous tile's group is done) and, first, wait for this tile's copies in a pipeline whose copies follow
    the math in the loop body (TVM's own wait assumes they precede it and allows one group too many).
    """
    a, b = _operands(n, tile_k, layout, dtype)
    issue = _issuer(n, tile_k, layout, dtype, a, b)
    return (_wgmma_desc(n, tile_k, layout, dtype, a.shape, b.shape),
            _wgmma_impl(n, tile_k, overlap_stages, dtype, a.shape, b.shape, issue))


def fill_intrin(n: int, acc: str = "float32") -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of zeroing a warp's 16 x n ``acc`` accumulators (each lane its n / 2 registers)."""
    nt = n // 16
    zero = tirx.const(0, acc)

    @T.prim_func(s_tir=True)
    def desc(c: T.handle) -> None:
        C = _accumulator(c, nt, acc)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:nt, 0:8])
            for i, j in T.grid(16, n):
                with T.sblock("C_init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    tile, reg = T.meta_var(register_of(vi, vj))
                    C[tile, reg] = zero

    @T.prim_func(s_tir=True)
    def impl(c: T.handle) -> None:
        C = _accumulator(c, nt, acc)
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:nt, 0:8])
            for _tx in T.thread_binding(0, 32, "threadIdx.x"):
                for t, r in T.grid(nt, 8):
                    C[t, r] = zero

    return desc, impl


def store_intrin(n: int, scope: str = "global", acc: str = "float32") -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of writing a warp's 16 x n ``acc`` accumulators to C in ``scope`` (global memory, or a shared
    tile that an epilogue copies out), two adjacent columns per store."""
    nt = n // 16

    @T.prim_func(s_tir=True)
    def desc(c: T.handle, d: T.handle) -> None:
        C = _accumulator(c, nt, acc)
        D = T.match_buffer(d, (16, n), acc, scope=scope, offset_factor=1)
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
        C = _accumulator(c, nt, acc)
        D = T.match_buffer(d, (16, n), acc, scope=scope, offset_factor=1, strides=[ld, 1])
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
                 store_scope: str = "global", dtype: str = "float16") -> dict[str, str]:
    """Register (once) the wgmma, fill and store intrinsics for this N, K tile, layout, overlap, scope of C and input
    dtype; return their names."""
    acc = ACCUMULATOR[dtype]
    types, a = ("s8s8s32", "s32") if dtype == "int8" else ("f16f16f32", "f32")
    made = {"compute": (f"tirbench_wgmma_m64n{n}k{tile_k}_{types}_{layout}_overlap{overlap_stages}",
                        lambda: wgmma_intrin(n, tile_k, layout, overlap_stages, dtype)),
            "init": (f"tirbench_wgmma_fill_n{n}_{a}", lambda: fill_intrin(n, acc)),
            "store": (f"tirbench_wgmma_store_n{n}_{a}_{store_scope}", lambda: store_intrin(n, store_scope, acc))}
    for name, make in made.values():
        if TensorIntrin.get(name, allow_missing=True) is None:
            TensorIntrin.register(name, *make())
    return {role: name for role, (name, _) in made.items()}


#: What the ``wgmma`` design space (``tirbench.schedules.spaces.wgmma_space``) samples, so that its intrinsics can be
#: registered here, below it: its k tile (one 128-byte swizzled row of halves), the wgmma N of its block columns,
#: its pipeline depths (overlap needs 3 stages or more) and its shared-memory layouts.
SPACE_TILE_K = 64
SPACE_N = (64, 128, 192, 256)
SPACE_STAGES = (2, 3, 4, 5, 6)
SPACE_LAYOUTS = ("swizzle128",)


def register_space_intrins() -> None:
    """Register every intrinsic a candidate of the ``wgmma`` space can name (each N, layout and overlap depth, C
    stored to global or shared memory): before the search's threads postprocess candidates, and before a tuned
    trace is replayed in a new process."""
    for bn in SPACE_N:
        for layout in SPACE_LAYOUTS:
            for depth in (0, *(s for s in SPACE_STAGES if s >= 3)):
                for scope in ("global", "shared.dyn"):
                    intrin_names(bn, SPACE_TILE_K, layout, overlap_stages=depth, store_scope=scope)

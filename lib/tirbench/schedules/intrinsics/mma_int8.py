"""int8 ``ldmatrix`` intrinsics for a swizzled shared-memory layout, and the int32 fragment store to shared memory.

``mma.sync.m16n8k32`` multiplies int8 A (16 x 32, k contiguous) by int8 B stored as [n, k] (k contiguous). A warp
loads a 16 x 32 operand tile from shared memory with one ``ldmatrix.x4``: four 8 x 8 matrices of 16-bit lanes,
i.e. four (8 rows x 16 bytes) pieces, each read in one shared-memory phase of 8 row addresses x 16 bytes.

The shared tile is stored in k panels of 32 bytes a row, ``[k // 32, row, chunk', k % 16]`` with the 16-byte
chunk ``chunk' = chunk ^ (row // 4) % 2`` (``swizzle``). Without the XOR, rows r and r + 4 of a panel are 128 bytes
apart, so an 8-row phase hits every bank twice (a 2-way conflict). With it, rows 0-3 put chunk c at bytes
32 r + 16 c and rows 4-7 at 128 + 32 (r - 4) + 16 (1 - c): modulo 128 bytes the eight 16-byte pieces of a phase
are all different, so each phase covers the 32 banks exactly once. No padding byte is needed. The cooperative
fill writes a panel's rows in order (thread t: row t // 2, chunk t % 2), so a phase of 8 threads writes 128
contiguous bytes: conflict-free too.

TVM's own int8 ldmatrix intrinsics address an unswizzled [16, 32] tile; these compute each lane's row address
in the swizzled panel (the lanes of A and of B supply their rows in the orders TVM's mma intrinsics expect:
A's matrices are (rows 0-7, chunk 0), (rows 8-15, chunk 0), (rows 0-7, chunk 1), (rows 8-15, chunk 1); B's
(rows 0-7, chunk 0), (rows 0-7, chunk 1), (rows 8-15, chunk 0), (rows 8-15, chunk 1)).
"""
from __future__ import annotations

from tvm import tirx
from tvm.s_tir import TensorIntrin
from tvm.script import tirx as T

PANEL = 32   #: bytes of k per panel row (one mma k step)
CHUNK = 16   #: bytes per cp.async / ldmatrix row piece


def swizzle(row: tirx.PrimExpr, k: tirx.PrimExpr) -> tuple[tirx.PrimExpr, ...]:
    """Where element (row, k) of an int8 operand tile lives in shared memory: [k panel, row, chunk', byte]."""
    return k // PANEL, row, (((k % PANEL) // CHUNK) ^ ((row // 4) % 2)) % 2, k % CHUNK


def lane_piece(operand: str, tx: tirx.PrimExpr) -> tuple[tirx.PrimExpr, tirx.PrimExpr]:
    """(row, chunk) of the 16-byte piece lane ``tx`` addresses in ldmatrix.x4, as TVM's mma intrinsics expect."""
    if operand == "A":
        return tx % 16, tx // 16
    return 8 * (tx // 16) + tx % 8, (tx % 16) // 8


def ldmatrix_intrin(operand: str) -> tuple[tirx.PrimFunc, tirx.PrimFunc]:
    """(desc, impl) of one warp's 16 x 32 int8 ``operand`` tile ("A", or "B" stored [n, k]) from a swizzled panel
    into the "warp" fragment layout of TVM's m16n8k32 intrinsics (``shared_16x32_to_ldmatrix_32x16_layout``)."""
    from tvm.s_tir.tensor_intrin.cuda import shared_16x32_to_ldmatrix_32x16_layout as lanes

    @T.prim_func(s_tir=True)
    def desc(warp_handle: T.handle, shared_handle: T.handle) -> None:
        shared = T.match_buffer(shared_handle, (1, 16, 2, CHUNK), "int8", scope="shared.dyn", offset_factor=1)
        warp = T.match_buffer(warp_handle, (32, 16), "int8", scope="warp", offset_factor=1)
        with T.sblock("root"):
            T.reads(shared[0:1, 0:16, 0:2, 0:CHUNK])
            T.writes(warp[0:32, 0:16])
            for i, j in T.grid(16, PANEL):
                with T.sblock("shared_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    lane, reg = T.meta_var(lanes(vi, vj))
                    warp[lane, reg] = shared[0, vi, (((vj // CHUNK) ^ ((vi // 4) % 2)) % 2), vj % CHUNK]

    @T.prim_func(s_tir=True)
    def impl(warp_handle: T.handle, shared_handle: T.handle) -> None:
        s0, s1, s2 = T.int32(), T.int32(), T.int32()
        shared = T.match_buffer(shared_handle, (1, 16, 2, CHUNK), "int8", scope="shared.dyn", offset_factor=1,
                                strides=[s0, s1, s2, 1])
        warp = T.match_buffer(warp_handle, (32, 16), "int8", scope="warp", offset_factor=1)
        with T.sblock("root"):
            T.reads(shared[0:1, 0:16, 0:2, 0:CHUNK])
            T.writes(warp[0:32, 0:16])
            for tx in T.thread_binding(0, 32, "threadIdx.x"):
                row, chunk = T.meta_var(lane_piece(operand, tx))
                T.evaluate(T.ptx_legacy.ldmatrix(
                    False, 4, ".b16", warp.data, warp.elem_offset + 16 * tx, shared.access_ptr("r"),
                    row * s1 + ((chunk ^ ((row // 4) % 2)) % 2) * s2, dtype="int8"))

    return desc, impl


LDMATRIX_A = "tirbench_ldmatrix_i8_a_swizzled"
LDMATRIX_B = "tirbench_ldmatrix_i8_b_swizzled"
STORE_I32_SHARED = "tirbench_mma_store_16x16_i32_shared_dyn"


def register() -> dict[str, str]:
    """Register (once) the swizzled ldmatrix intrinsics and the int32 store to shared.dyn; names by role."""
    from tvm.s_tir.tensor_intrin import cuda as tc

    for name, make in ((LDMATRIX_A, lambda: ldmatrix_intrin("A")), (LDMATRIX_B, lambda: ldmatrix_intrin("B")),
                       (STORE_I32_SHARED, lambda: tc.get_mma_store_intrin("int32", 8, "shared.dyn", False))):
        if TensorIntrin.get(name, allow_missing=True) is None:
            TensorIntrin.register(name, *make())
    return {"load_a": LDMATRIX_A, "load_b": LDMATRIX_B, "compute": tc.MMA_i8i8i32_TRANS_B_INTRIN,
            "init": tc.MMA_fill_16x16_i32_INTRIN,
            "store": {"global": tc.MMA_store_16x16_i32_global_INTRIN, "shared.dyn": STORE_I32_SHARED}}

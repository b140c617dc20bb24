"""GEMM: C[M, N] = A[M, K] @ B[K, N], fp32 or fp16 inputs, always accumulated in float32 and stored in float32 (or,
for fp16 inputs, rounded to float16 on the way out, as cuBLAS's fp16 GEMM stores it)."""
from __future__ import annotations

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array


def gemm(m: int, n: int, k: int, dtype: str = "float32", out_dtype: str = "float32") -> Workload:
    """Row-major A (m x k) times B (k x n) into C (m x n, float32); one block named "C" with an init.

    ``dtype="float16"`` makes A and B half precision (the tensor-core case); the products are cast to
    float32 inside the block, so the accumulation stays in float32 either way. ``out_dtype="float16"`` (fp16 inputs
    only) accumulates into a float32 buffer that a second block, "C_out", rounds into C: the same work as cuBLAS's
    fp16 GEMM (half in, float accumulation, half out), which writes half the bytes of a float32 C.
    """
    check_positive(m=m, n=n, k=k)
    check_dtype(dtype, ("float32", "float16"))
    check_dtype(out_dtype, ("float32", "float16"))
    if out_dtype == "float16" and dtype != "float16":
        raise ValueError(f"out_dtype='float16' takes float16 inputs, not {dtype}")

    def acc(x):  # the float32 value of an input element (no cast when it already is one)
        return x if dtype == "float32" else T.Cast("float32", x)

    @I.ir_module
    class Gemm:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((m, k), dtype), B: T.Buffer((k, n), dtype), C: T.Buffer((m, n), "float32")):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i, j, r in T.grid(m, n, k):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + acc(A[vi, vk]) * acc(B[vk, vj])

    @I.ir_module
    class GemmHalfOut:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((m, k), dtype), B: T.Buffer((k, n), dtype), C: T.Buffer((m, n), "float16")):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            C_acc = T.alloc_buffer((m, n), "float32")
            for i, j, r in T.grid(m, n, k):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, r])
                    with T.init():
                        C_acc[vi, vj] = T.float32(0)
                    C_acc[vi, vj] = C_acc[vi, vj] + acc(A[vi, vk]) * acc(B[vk, vj])
            for i, j in T.grid(m, n):
                with T.sblock("C_out"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.Cast("float16", C_acc[vi, vj])

    itemsize, out_size = np.dtype(dtype).itemsize, np.dtype(out_dtype).itemsize
    return Workload(
        name="gemm", sizes={"m": m, "n": n, "k": k}, dtype=dtype, mod=Gemm if out_dtype == "float32" else GemmHalfOut,
        make_inputs=lambda rng: [random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)],
        reference=lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(out_dtype),
        out_shape=(m, n), out_dtype=out_dtype, flops=2 * m * n * k,
        bytes=(m * k + k * n) * itemsize + m * n * out_size,
        # fp16 products are exact in fp32, so both cases differ from the fp64 reference only by the fp32
        # accumulation: about 1e-7 * k at most for standard-normal data summed in order; 100x margin for
        # other summation orders and tensor-core rounding. A half C adds its rounding (2^-11 relative) on both sides.
        tolerance={"rtol": 1e-3 if out_dtype == "float32" else 2e-3, "atol": 1e-5 * k},
    )

"""GEMM: C[M, N] = A[M, K] @ B[K, N], fp32 or fp16 inputs, always accumulated and stored in float32."""
from __future__ import annotations

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array


def gemm(m: int, n: int, k: int, dtype: str = "float32") -> Workload:
    """Row-major A (m x k) times B (k x n) into C (m x n, float32); one block named "C" with an init.

    ``dtype="float16"`` makes A and B half precision (the tensor-core case); the products are cast to
    float32 inside the block, so the accumulation stays in float32 either way.
    """
    check_positive(m=m, n=n, k=k)
    check_dtype(dtype, ("float32", "float16"))

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

    itemsize = np.dtype(dtype).itemsize
    return Workload(
        name="gemm", sizes={"m": m, "n": n, "k": k}, dtype=dtype, mod=Gemm,
        make_inputs=lambda rng: [random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)],
        reference=lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32),
        out_shape=(m, n), out_dtype="float32", flops=2 * m * n * k,
        bytes=(m * k + k * n) * itemsize + m * n * 4,
        # fp16 products are exact in fp32, so both cases differ from the fp64 reference only by the fp32
        # accumulation: about 1e-7 * k at most for standard-normal data summed in order; 100x margin for
        # other summation orders and tensor-core rounding.
        tolerance={"rtol": 1e-3, "atol": 1e-5 * k},
    )

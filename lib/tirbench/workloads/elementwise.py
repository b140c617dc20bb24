"""Vector add: C = A + B, the memory-bound 'hello world'."""
from __future__ import annotations

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array


def vector_add(n: int, dtype: str = "float32") -> Workload:
    """C[i] = A[i] + B[i] for i < n; one block named "C"."""
    check_positive(n=n)
    check_dtype(dtype, ("float32", "float16"))

    @I.ir_module
    class VectorAdd:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), dtype), B: T.Buffer((n,), dtype), C: T.Buffer((n,), dtype)):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i in range(n):
                with T.sblock("C"):
                    vi = T.axis.spatial(n, i)
                    C[vi] = A[vi] + B[vi]

    itemsize = np.dtype(dtype).itemsize
    return Workload(
        name="vector_add", sizes={"n": n}, dtype=dtype, mod=VectorAdd,
        make_inputs=lambda rng: [random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)],
        reference=lambda a, b: a + b,
        out_shape=(n,), out_dtype=dtype, flops=n, bytes=3 * n * itemsize,
        tolerance={"rtol": 1e-3, "atol": 1e-3} if dtype == "float16" else {"rtol": 1e-6, "atol": 1e-6},
    )


def copy(n: int, dtype: str = "float32") -> Workload:
    """B[i] = A[i]: the device-memory copy whose bandwidth is the ceiling for streaming kernels."""
    check_positive(n=n)
    check_dtype(dtype, ("float32", "float16"))

    @I.ir_module
    class Copy:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), dtype), B: T.Buffer((n,), dtype)):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi]

    return Workload(
        name="copy", sizes={"n": n}, dtype=dtype, mod=Copy,
        make_inputs=lambda rng: [random_array(rng, (n,), dtype)], reference=lambda a: a.copy(),
        out_shape=(n,), out_dtype=dtype, flops=0, bytes=2 * n * np.dtype(dtype).itemsize,
        tolerance={"rtol": 0.0, "atol": 0.0},
    )

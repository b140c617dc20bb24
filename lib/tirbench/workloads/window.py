"""Window sum: B[i] = A[i] + A[i+1] + ... + A[i+w-1] (the MLC chapter's example, width w)."""
from __future__ import annotations

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array


def window_sum(n: int, w: int = 3, dtype: str = "float32") -> Workload:
    """n outputs from n + w - 1 inputs; block "B" reduces over the window axis k."""
    check_positive(n=n, w=w)
    check_dtype(dtype, ("float32",))
    m = n + w - 1

    @I.ir_module
    class WindowSum:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((m,), dtype), B: T.Buffer((n,), dtype)):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            for i, k in T.grid(n, w):
                with T.sblock("B"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi + vk]

    def reference(a: np.ndarray) -> np.ndarray:
        out = a[:n].copy()
        for k in range(1, w):
            out += a[k:k + n]
        return out

    return Workload(
        name="window_sum", sizes={"n": n, "w": w}, dtype=dtype, mod=WindowSum,
        make_inputs=lambda rng: [random_array(rng, (m,), dtype)],
        reference=reference, out_shape=(n,), out_dtype=dtype,
        flops=n * (w - 1), bytes=(m + n) * np.dtype(dtype).itemsize,
        tolerance={"rtol": 1e-4, "atol": 1e-4 * w},
    )

"""#40 diagnosis: which kernel cuBLAS launches for a GEMM (its name carries the tile, the cluster shape and the
schedule: ``sm90_xmma_gemm_..._tilesize128x256x64_cluster2x1x1_...``), by torch's profiler, per shape and dtype.
Run from the repository root:
    . /opt/gpukit/env.sh && python3 tools/gpu-checks/probe/cublas_kernels.py 2000x3000x1000 100x3000x5000
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def kernels(m: int, n: int, k: int, dtype: torch.dtype) -> list[str]:
    """The CUDA kernels one ``torch.matmul`` of A[m, k] @ B[k, n] launches (after a warm-up call)."""
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    for text in sys.argv[1:]:
        m, n, k = (int(x) for x in text.split("x"))
        for dtype in (torch.float16, torch.float32):
            print(f"{text} {str(dtype)[6:]}: {' | '.join(kernels(m, n, k, dtype))}", flush=True)

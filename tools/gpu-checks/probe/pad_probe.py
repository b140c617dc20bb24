"""#16 diagnosis: where the padded v8's time goes at 2000x3000x1000 (which padded axis costs, and other tiles)."""
import time

import torch

from tirbench.bench.harness import verify_then_time, verify_then_time_torch
from tirbench.core.machine import cuda_target
from tirbench.schedules.gemm.records import V8_WGMMA
from tirbench.workloads import gemm

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
dtype = "float16"
base = {"block_tile": (128, 128), "stages": 3, "raster": 8, "overlap": True}
big, even = (2000, 3000, 1000), (2048, 3072, 1024)
w192 = {**base, "block_tile": (128, 192)}
runs = [(big, w192), (big, {**w192, "stages": 4}), (big, {**w192, "raster": 1}), (big, {**w192, "raster": 4}),
        (big, {**base, "block_tile": (256, 192)}), (big, {**base, "block_tile": (192, 192), "raster": 1}),
        (big, {**base, "block_tile": (192, 128), "raster": 1}), (even, w192), (even, base), (big, base)]
t0 = time.time()
for size, params in runs:
    wl = gemm(*size, dtype=dtype)
    try:
        m = verify_then_time(wl, V8_WGMMA.apply(wl, params), variant="v8", repeats=30,
                             target=cuda_target(), pass_config=V8_WGMMA.pass_config)
        print(f"{size} {params}: {m.gflops / 1e3:7.1f} TFLOP/s {m.timing.median_ms * 1e3:.1f} us [{time.time() - t0:.0f}s]", flush=True)
    except Exception as e:
        print(f"{size} {params}: FAIL {str(e).splitlines()[-1][:200]}", flush=True)
for size in [(2000, 3000, 1000), (2048, 3072, 1024)]:
    wl = gemm(*size, dtype=dtype)
    c = verify_then_time_torch(wl, torch.matmul, variant="cublas", provider="cublas", repeats=30)
    print(f"{size} cuBLAS: {c.gflops / 1e3:7.1f} TFLOP/s {c.timing.median_ms * 1e3:.1f} us", flush=True)

"""#40 diagnosis: the device time of each CUDA kernel a rules candidate launches (a split-K GEMM's partial GEMM and
its sum of the slices), by torch's profiler, beside cuBLAS's kernels for the same GEMM, median of ``REPEATS`` calls
after one verified call. Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/kernel_times.py
"""
import statistics

import torch
import tvm
from torch.profiler import ProfilerActivity, profile

from tirbench.bench.harness import inputs_and_reference, run_checked
from tirbench.core.build import build
from tirbench.core.machine import cuda_target
from tirbench.schedules.gemm.records import SPLITK_SIMT
from tirbench.workloads import gemm

REPEATS = 20
CASES = [  # (size, record, params): fp32 at 100 rows, cuBLAS's 0.85x shape
    ((100, 3000, 5000), SPLITK_SIMT, {"split": 11, "block_tile": (128, 256), "warp_tile": (64, 32),
                                      "thread_tile": (8, 8), "stages": 3}),
    ((100, 3000, 5000), SPLITK_SIMT, {"split": 11, "block_tile": (128, 256), "warp_tile": (64, 32),
                                      "thread_tile": (8, 8), "stages": 3, "columns_outer": True}),
]


def kernel_medians(launch) -> dict[str, float]:
    """Median device microseconds per kernel name over ``REPEATS`` calls of ``launch``."""
    launch()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            launch()
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name[:60], []).append(e.device_time)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    target, dev = cuda_target(), tvm.cuda(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    for size, record, params in CASES:
        wl = gemm(*size, dtype="float32", out_dtype="float32")
        ex = build(record.apply(wl, params), target, dict(record.pass_config))
        args = run_checked(wl, ex, dev, what=record.name)
        print(f"{size} {params}:", kernel_medians(lambda: ex["main"](*args)), flush=True)
        a, b = (torch.from_numpy(x).cuda() for x in inputs_and_reference(wl, seed=0)[0])
        print(f"{size} cuBLAS:", kernel_medians(lambda: torch.mm(a, b)), flush=True)


if __name__ == "__main__":
    main()

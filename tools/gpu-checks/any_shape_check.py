"""Issue #16 GPU pre-check (< 2 min): padded v5 (fp32) and v8 (fp16) at 2000x3000x1000 against cuBLAS, same run.

Every candidate ``padded(record, M)`` gives (the records' ``PADDED``) is verified against numpy, then timed (L2
flushed, median), through ``sweep``; the best of each rung is compared with cuBLAS and the targets (v5 >= 0.8x cuBLAS
fp32, v8 >= 0.6x cuBLAS fp16). Also times the same tiles at the nearest divisible shape (2048x3072x1024). ``--all``
also tries every candidate of the rung's own sweep (``record.candidates``, about a minute more), to see whether
``PADDED`` misses a better tile. Run from the repository root:
    . /opt/gpukit/env.sh && python3 tools/gpu-checks/any_shape_check.py [M N K] [--repeats 30] [--all]
"""
from __future__ import annotations

import argparse
import time

import torch

from tirbench.bench.harness import verify_then_time, verify_then_time_torch
from tirbench.bench.sweep import sweep
from tirbench.core.machine import cuda_target, require_cuda_gpu
from tirbench.schedules.gemm.records import V5_WARP_TILED, V8_WGMMA, divisible_shape, padded
from tirbench.workloads import gemm

TARGETS = ((V5_WARP_TILED, "float32", 0.8), (V8_WGMMA, "float16", 0.6))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("size", nargs="*", type=int, default=[2000, 3000, 1000])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--all", action="store_true", help="also every candidate of the rung's own sweep")
    args = ap.parse_args()
    require_cuda_gpu()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    size, target, t0 = tuple(args.size), cuda_target(), time.time()
    for record, dtype, ratio in TARGETS:
        wl = gemm(*size, dtype=dtype)
        candidates = list(padded(record, size[0]).candidates)
        if args.all:
            candidates += [c for c in record.candidates if c not in candidates]
        best = sweep(wl, record.with_candidates(candidates), target=target, repeats=args.repeats).best_trial()
        if best is None:
            print(f"{record.name} at {wl.shape}: no candidate fits  [{time.time() - t0:.0f} s]")
            continue
        m, params = best.measurement, record.params(best.overrides)
        cublas = verify_then_time_torch(wl, torch.matmul, variant=f"cublas_{dtype}", provider="cublas",
                                        repeats=args.repeats)
        even = gemm(*divisible_shape(size), dtype=dtype)
        unpadded = verify_then_time(even, record.apply(even, best.overrides), variant=record.name,
                                    repeats=args.repeats, target=target, pass_config=record.pass_config)
        cublas_even = verify_then_time_torch(even, torch.matmul, variant=f"cublas_{dtype}", provider="cublas",
                                             repeats=args.repeats)
        got = m.gflops / cublas.gflops
        print(f"{record.name} padded at {wl.shape}: {m.gflops / 1e3:.1f} TFLOP/s, cuBLAS {cublas.gflops / 1e3:.1f} -> "
              f"{got:.3f}x (target >= {ratio}x: {'PASS' if got >= ratio else 'FAIL'}); best {params}")
        print(f"  same tiles at {even.shape}: {unpadded.gflops / 1e3:.1f} TFLOP/s, cuBLAS there "
              f"{cublas_even.gflops / 1e3:.1f}  [{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()

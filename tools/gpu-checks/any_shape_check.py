"""Issue #16 GPU pre-check (< 2 min): padded v5 (fp32) and v8 (fp16) at 2000x3000x1000 against cuBLAS, same run.

Every PADDED_SWEEP candidate is verified against numpy, then timed (L2 flushed, median); the best of each rung is
compared with cuBLAS and the targets (v5 >= 0.8x cuBLAS fp32, v8 >= 0.6x cuBLAS fp16). Also times the same tiles at
the nearest divisible shape (2048x3072x1024). ``--all`` also tries every SWEEP candidate (about a minute more), to
see whether PADDED_SWEEP misses a better tile. Run from the repository root:
    . /opt/gpukit/env.sh && python3 tools/gpu-checks/any_shape_check.py [M N K] [--repeats 30] [--all]
"""
from __future__ import annotations

import argparse
import time

import torch
from tvm import s_tir

from tirbench.bench.harness import verify_then_time, verify_then_time_torch
from tirbench.core.machine import cuda_target, require_cuda_gpu
from tirbench.schedules.gemm.simt import LADDER, SWEEP, divisible_shape, gemm_pass_config, padded_candidates
from tirbench.workloads import gemm

TARGETS = {"v5_warp_tiled": 0.8, "v8_wgmma": 0.6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("size", nargs="*", type=int, default=[2000, 3000, 1000])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--all", action="store_true", help="also every SWEEP candidate")
    args = ap.parse_args()
    require_cuda_gpu()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    size, target, t0 = tuple(args.size), cuda_target(), time.time()
    for rung, ratio in TARGETS.items():
        helper, defaults, dtype = LADDER[rung]
        wl = gemm(*size, dtype=dtype)
        best = None
        candidates = padded_candidates(rung, size[0])
        if args.all:
            candidates += [c for c in SWEEP[rung] if c not in candidates]
        for cand in candidates:
            params = {**defaults, **cand}
            try:
                m = verify_then_time(wl, helper(s_tir.Schedule(wl.mod), **params), variant=rung,
                                     repeats=args.repeats, target=target, pass_config=gemm_pass_config(rung))
            except ValueError as err:
                print(f"  {rung} {cand}: skipped ({err})")
                continue
            print(f"  {rung} {cand}: {m.gflops / 1e3:7.1f} TFLOP/s ({m.timing.median_ms:.4f} ms)  [{time.time() - t0:.0f} s]")
            if best is None or m.gflops > best[0].gflops:
                best = (m, params)
        cublas = verify_then_time_torch(wl, torch.matmul, variant=f"cublas_{dtype}", provider="cublas",
                                        repeats=args.repeats)
        m, params = best
        even = gemm(*divisible_shape(size), dtype=dtype)
        unpadded = verify_then_time(even, helper(s_tir.Schedule(even.mod), **params), variant=rung,
                                    repeats=args.repeats, target=target, pass_config=gemm_pass_config(rung))
        cublas_even = verify_then_time_torch(even, torch.matmul, variant=f"cublas_{dtype}", provider="cublas",
                                             repeats=args.repeats)
        got = m.gflops / cublas.gflops
        print(f"{rung} padded at {wl.shape}: {m.gflops / 1e3:.1f} TFLOP/s, cuBLAS {cublas.gflops / 1e3:.1f} -> "
              f"{got:.3f}x (target >= {ratio}x: {'PASS' if got >= ratio else 'FAIL'}); best {params}")
        print(f"  same tiles at {even.shape}: {unpadded.gflops / 1e3:.1f} TFLOP/s, cuBLAS there "
              f"{cublas_even.gflops / 1e3:.1f}  [{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()

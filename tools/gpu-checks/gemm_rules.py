"""The GEMM rules against cuBLAS (< 9 min on an H100/H200): for notebook 03's sizes (1024^3, 2048^3, 4096^3,
4096x1024x8192), notebook 03_gemm_shapes' padded shapes (2000x3000x1000, 1000x1000x1000, 37x4096x4096) and three
shapes no tile divides (2500x3500x1500, 1200x5000x700, and 100x3000x5000 with fewer than 128 rows), in fp32 and fp16
(float32 C, as notebook 03's rows; ``--half-c``: a half C, as cuBLAS's fp16 GEMM writes): every candidate the rules
offer (``schedules.gemm.rules``) built in one parallel batch, verified against numpy and timed, the fastest kept,
beside cuBLAS in the same process (``tirbench.kernel.best_kernels``; for fp16 with a float32 C, cuBLAS writing a
float32 C where torch has it: ``cublas_float16_fp32_c``). Appends each choice's row (variant
``rules_<family>``) and cuBLAS's to ``results/kernel/gemm_rules.csv`` and prints a table with the ratio (cuBLAS time /
the rules' time) against the goal (>= 0.9x); a shape the rules refuse (a half C where K or N is not a multiple of 8)
is skipped in one line. ``--dtypes`` and ``--sizes`` narrow the run (with a larger ``--keep``: a wider look at a few
shapes). Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/gemm_rules.py [--repeats 30] [--keep 5] \
        [--dtypes float16] [--sizes 2000x3000x1000 100x3000x5000]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tirbench.bench.choose import rule_forms
from tirbench.core.errors import refusal
from tirbench.core.machine import require_cuda_gpu
from tirbench.kernel import best_kernels
from tirbench.workloads import gemm

SIZES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (4096, 1024, 8192), (2000, 3000, 1000),
         (1000, 1000, 1000), (37, 4096, 4096), (2500, 3500, 1500), (1200, 5000, 700), (100, 3000, 5000))
DTYPES = ("float32", "float16")
GOAL = 0.9


def size_arg(text: str) -> tuple[int, int, int]:
    """``2000x3000x1000`` as (m, n, k); argparse's one-line error for anything else."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: a GEMM shape is MxNxK, three positive integers")
    return tuple(int(p) for p in parts)


CSV = Path("results/kernel/gemm_rules.csv")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--keep", type=int, default=None, help="candidates per family (default: the rules')")
    ap.add_argument("--dtypes", nargs="+", choices=DTYPES, default=DTYPES, help="input dtypes (default: both)")
    ap.add_argument("--half-c", action="store_true",
                    help="float16 inputs write a half C, as cuBLAS's fp16 GEMM does (default: a float32 C; rows "
                         "rules_<family>_fp16_c)")
    ap.add_argument("--sizes", nargs="+", type=size_arg, default=SIZES, metavar="MxNxK",
                    help="GEMM shapes (default: the ten above)")
    args = ap.parse_args()
    require_cuda_gpu()
    start = time.time()
    wls = []
    for wl in (gemm(*size, dtype=dtype, out_dtype="float16" if args.half_c and dtype == "float16" else "float32")
               for dtype in args.dtypes for size in args.sizes):
        why = refusal(lambda: rule_forms(wl, args.keep))  # cached: the sweep below reads the same forms
        if why:  # a half C at a K or N that is not a multiple of 8: v9, the only family that writes one, cannot
            print(f"{wl.shape:>16} {wl.dtype:>8}  skipped: {why}")
        else:
            wls.append(wl)
    CSV.parent.mkdir(parents=True, exist_ok=True)
    found = best_kernels(wls, keep=args.keep, repeats=args.repeats, out=Path("build/kernel"), csv=CSV)
    print(f"\n{'shape':>16} {'dtype':>8} {'rules us':>9} {'cuBLAS us':>10} {'ratio':>6}  goal  kernel")
    for r in found:
        wl, c, v = r.workload, r.chosen, r.vendor
        if c is None or v is None:
            print(f"{wl.shape:>16} {wl.dtype:>8}  no verified {'kernel' if c is None else 'cuBLAS run'}")
            continue
        ratio = v.timing.median_ms * 1e3 / c.median_us
        print(f"{wl.shape:>16} {wl.dtype:>8} {c.median_us:9.1f} {v.timing.median_ms * 1e3:10.1f} {ratio:6.2f}  "
              f"{'PASS' if ratio >= GOAL else 'FAIL'}  {c.family}({c.label})")
    print(f"[{time.time() - start:.0f} s] rows appended to {CSV}")


if __name__ == "__main__":
    main()

"""Split-K GEMM for few rows (``schedules.gemm.splitk``): the float32 family computes the product on llvm at shapes
no tile divides and K no split divides, storing nothing outside C; the float16 families' CUDA (mma.sync, wgmma)
compiles for sm_90a with nvcc; every family's accesses of A, B, C and the partial buffer are proven in bounds; bad
parameters are one line."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from test_any_shape import GUARD, gemm_in_pitch, guards_touched, pitch_for, run_guarded, unproven_accesses
from tvm import s_tir

from tirbench.bench.harness import check_output
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.serial import without_threads
from tirbench.schedules.gemm.records import SPLITK_MMA, SPLITK_SIMT, SPLITK_WGMMA
from tirbench.schedules.gemm.splitk import gemm_splitk_simt
from tirbench.workloads.gemm import gemm

#: (m, n, k), and the parameters: 37 rows in a 64-row tile, N a multiple of 32 (the sum's lanes end at the row's
#: end: no column predicate) or not, K no multiple of split x tile_k; 100 rows in a 128-row tile, and in a 112-row
#: one of seven warps with k tiles of 28 (224 threads: 14 of A's 4-byte copies each, not a whole number of float4s);
#: and v5's FFMA order of 4096^3 (``columns_outer``).
FP32_CASES = [
    ((37, 64, 128), {"split": 2}),
    ((37, 70, 1000), {"split": 4}),
    ((100, 96, 300), {"split": 2, "block_tile": (128, 64)}),
    ((128, 32, 200), {"split": 4, "block_tile": (128, 32)}),
    ((100, 130, 300), {"split": 2, "block_tile": (112, 128), "warp_tile": (16, 128), "thread_tile": (8, 8),
                       "tile_k": 28, "stages": 3}),
    ((100, 70, 300), {"split": 2, "block_tile": (128, 64), "warp_tile": (64, 32), "thread_tile": (8, 8),
                      "columns_outer": True}),
]
#: The partial buffer's names: padded or not.
PARTIAL = ("C_rf", "C_pad_rf")


def _id(case) -> str:
    (m, n, k), params = case
    return f"{m}x{n}x{k}-" + "-".join(f"{key}{value}" for key, value in params.items())


@pytest.mark.parametrize("case", FP32_CASES, ids=_id)
def test_fp32_split_k_matches_numpy_on_llvm_and_stores_only_inside_c(case):
    """C inside guard cells is numpy's product and the guards keep their sentinel (llvm, threads in turn)."""
    (m, n, k), params = case
    mod = gemm_in_pitch(m, n, k, pitch=pitch_for(n))
    big = run_guarded(without_threads(mod, gemm_splitk_simt(s_tir.Schedule(mod), **params)), (m, n, k))
    wl = gemm(m, n, k)
    check_output(wl, big[GUARD:GUARD + m, GUARD:GUARD + n], wl.reference(*wl.make_inputs(np.random.default_rng(0))),
                 what=f"split-K {_id(case)}")
    assert guards_touched(big, m, n) == 0


@pytest.mark.parametrize("record, size, params", [
    (SPLITK_SIMT, (37, 4096, 4096), {"split": 8, "block_tile": (64, 64)}),
    (SPLITK_MMA, (37, 4096, 4096), {"split": 8, "block_tile": (64, 128), "warp_tile": (32, 64)}),
    (SPLITK_MMA, (100, 3000, 5000), {"split": 4, "block_tile": (128, 64), "warp_tile": (64, 32)}),
    (SPLITK_WGMMA, (37, 4096, 4096), {"split": 8, "block_tile": (64, 128)}),
    (SPLITK_WGMMA, (100, 3000, 5000), {"split": 4, "block_tile": (128, 128), "stages": 3}),
], ids=["fp32-37", "mma-37", "mma-100", "wgmma-37", "wgmma-100"])
def test_split_k_compiles_for_sm90a_with_every_access_in_bounds(record, size, params):
    """Two kernels (the partial GEMM, the sum); fp16's partial GEMM is mma.sync or wgmma; nvcc takes the CUDA
    without a stack frame (local arrays that stayed in registers); A, B, C and the partial buffer are accessed only
    inside them."""
    sch = record.apply(gemm(*size, dtype="float32" if record is SPLITK_SIMT else "float16"), params)
    src = device_source(sch, pass_config=record.pass_config)
    assert len(set(re.findall(r"__global__ void __launch_bounds__\(\d+\) (\w+)\(", src))) == 2
    assert ("mma.sync" in src, "wgmma.mma_async" in src) == (record is SPLITK_MMA, record is SPLITK_WGMMA)
    if shutil.which("nvcc"):
        report = nvcc_report(src)
        assert sum("registers" in line for line in report) == 2, report
        assert all(line.startswith("0 bytes stack frame") for line in report if "stack frame" in line), report
    unproven, checked = unproven_accesses(sch.mod, ("A", "B", "C", *PARTIAL))
    assert checked >= 5 and not unproven, unproven[:3]


@pytest.mark.parametrize("record, size, params, message", [
    (SPLITK_SIMT, (37, 64, 256), {"split": 1}, r"split=1: a split-K GEMM cuts K into 2 to 32 slices"),
    (SPLITK_SIMT, (37, 64, 256), {"split": 64}, r"split=64: a split-K GEMM cuts K into 2 to 32 slices"),
    (SPLITK_SIMT, (37, 64, 256), {"split": "4"}, r"split must be a positive integer, got '4'"),
    (SPLITK_SIMT, (37, 64, 100), {"split": 16}, r"split=16 with tile_k=16: k=100 fills only 7 slices of 16"),
    (SPLITK_SIMT, (37, 64, 256), {"block_tile": (0, 32)}, r"block_tile\[0\] must be a positive integer"),
    (SPLITK_SIMT, (100, 64, 256), {"block_tile": (64, 32)},
     r"block_tile\[0\]=64 is shorter than the m=100 rows: a split-K block tile takes every row .* pick 128 or more"),
    (SPLITK_SIMT, (37, 64, 256), {"warp_tile": (32, 64)}, r"warp_tile\[1\]=64 does not divide block_tile\[1\]=32"),
    (SPLITK_MMA, (37, 64, 256), {"warp_tile": (24, 32)}, r"warp_tile\[0\]=24 does not divide block_tile\[0\]=64"),
    (SPLITK_WGMMA, (16, 64, 1024), {"block_tile": (32, 64)}, r"block_tile\[0\]=32 must be a multiple of 64"),
])
def test_bad_parameters_are_one_line(record, size, params, message):
    wl = gemm(*size, dtype="float32" if record is SPLITK_SIMT else "float16")
    with pytest.raises(ValueError, match=message) as err:
        record.apply(wl, params)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("record, dtype", [(SPLITK_SIMT, "float16"), (SPLITK_MMA, "float32"),
                                           (SPLITK_WGMMA, "float32")])
def test_each_family_takes_its_own_dtype(record, dtype):
    with pytest.raises(ValueError, match=f"{record.name} does not take gemm .* takes float") as err:
        record.apply(gemm(37, 64, 256, dtype=dtype))
    assert "\n" not in str(err.value)

"""Turing's (sm_75: no cp.async) fp32 convolution families and GEMM fallbacks (issue 41): ``sm75_``-prefixed
siblings of the cp.async families (``record.turing``: the same helpers with ``async_copy=False``, 2 stages, no
``use_async_copy``). On llvm they match numpy; built for sm_75 their CUDA has no cp.async and nvcc compiles it
without spills; the conv rules offer them only where the cp.async family does not build, and the GEMM rules fall
back to v5 with synchronous copies (fp32) and v6's wmma (fp16) there."""
from __future__ import annotations

import shutil

import pytest
import tvm

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import ARCH_ENV
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.core.serial import without_threads
from tirbench.schedules.conv import rules as conv_rules
from tirbench.schedules.conv.records import (SM75_HWCN, SM75_NCHW_GEMM, SM75_NCHW_GROUPED_GEMM, SM75_NHWC_GEMM,
                                             SM75_NHWC_GROUPED_GEMM, SM75_WINOGRAD)
from tirbench.schedules.gemm import rules as gemm_rules
from tirbench.schedules.gemm.records import SM75_V5
from tirbench.workloads import conv2d, gemm
from tirbench.workloads.winograd import conv2d_winograd

SMALL_TILES = {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16}
#: (record, a small layer it takes, tiles): the stem-like 7x7 stride 2, 3x3 at batch 3, grouped (fp32 NCHW, fp16
#: NHWC), HWCN, Winograd.
CASES = {
    "nchw_stem": (SM75_NCHW_GEMM, conv2d(1, 3, 17, 17, 8, 7, 7, 2, 3), SMALL_TILES),
    "nchw_3x3": (SM75_NCHW_GEMM, conv2d(3, 12, 7, 7, 20, 3, 3, 1, 1), {}),
    "nhwc_3x3": (SM75_NHWC_GEMM, conv2d(3, 12, 7, 7, 20, 3, 3, 1, 1, layout="NHWC"), SMALL_TILES),
    "nhwc_1x1": (SM75_NHWC_GEMM, conv2d(2, 16, 8, 8, 24, 1, 1, 1, 0, layout="NHWC"), {}),
    "grouped": (SM75_NCHW_GROUPED_GEMM, conv2d(1, 16, 8, 8, 16, 3, 3, 1, 1, groups=4), SMALL_TILES),
    "grouped_fp16": (SM75_NHWC_GROUPED_GEMM, conv2d(2, 64, 8, 8, 64, 3, 3, 1, 1, groups=16, layout="NHWC",
                                                    dtype="float16"), SM75_NHWC_GROUPED_GEMM.candidates[0]),
    "hwcn": (SM75_HWCN, conv2d(32, 16, 6, 6, 32, 3, 3, 1, 1, layout="HWCN"),
             {"block_tile": (32, 32), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 8}),
    "winograd": (SM75_WINOGRAD, conv2d_winograd(1, 16, 8, 8, 16, m=2), SMALL_TILES),
    "gemm_v5": (SM75_V5, gemm(40, 72, 48), SMALL_TILES),
}


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setenv("TIRBENCH_FORCE_CPU", "1")


def test_siblings_are_the_cp_async_families_without_it():
    for record in (SM75_HWCN, SM75_NCHW_GEMM, SM75_NHWC_GEMM, SM75_NCHW_GROUPED_GEMM, SM75_NHWC_GROUPED_GEMM,
                   SM75_WINOGRAD, SM75_V5):
        assert record.name.startswith("sm75_") and record.needs == ()
        assert "tirx.use_async_copy" not in record.pass_config
        assert record.params()["async_copy"] is False
        assert all(record.params(c)["stages"] == 2 for c in record.candidates)


@pytest.mark.parametrize("case", CASES)
def test_scheduled_arithmetic_matches_numpy_on_llvm(case):
    record, wl, tiles = CASES[case]
    sch = record.apply(wl, tiles)
    run_checked(wl, build(without_threads(wl.mod, sch), cpu_target()), tvm.cpu(0), what=f"{record.name} {wl.shape}")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("case", ["nchw_stem", "nhwc_3x3", "grouped", "grouped_fp16", "hwcn", "winograd", "gemm_v5"])
def test_built_for_sm_75_without_cp_async_and_nvcc_compiles_it_without_spills(case, monkeypatch):
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    record, wl, tiles = CASES[case]
    with tvm.transform.PassContext(config=record.pass_config):
        src = device_source(record.apply(wl, tiles), cuda_target("sm_75"))
    assert "cp.async" not in src and "cp_async" not in src and "__syncthreads" in src
    report = " | ".join(nvcc_report(src, "sm_75"))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


#: ResNet-50's 3x3 layer at 14x14 (batch 1, NCHW) and at batch 32 (NHWC, HWCN).
LAYER = (1, 256, 14, 14, 256, 3, 3, 1, 1)


@pytest.mark.parametrize("arch, nchw, nhwc, hwcn", [
    ("sm_75", ["nchw_splitk", "sm75_nchw_gemm"], ["sm75_nhwc_gemm"], ["sm75_hwcn_hopper"]),
    ("sm_80", ["nchw_splitk", "nchw_gemm"], ["nhwc_gemm"], ["hwcn_hopper"]),
    ("sm_90a", ["nchw_splitk", "nchw_gemm"], ["nhwc_gemm"], ["hwcn_hopper"]),
])
def test_the_rules_offer_the_turing_siblings_only_where_cp_async_is_missing(arch, nchw, nhwc, hwcn, monkeypatch):
    monkeypatch.setenv(ARCH_ENV, arch)
    names = lambda wl: [r.name for r in conv_rules.rule_records(wl, keep=1)]   # noqa: E731
    assert names(conv2d(*LAYER)) == nchw
    assert names(conv2d(32, *LAYER[1:], layout="NHWC")) == nhwc
    assert names(conv2d(32, *LAYER[1:], layout="HWCN")) == hwcn
    assert conv_rules.winograd_family().name == ("sm75_winograd_simt" if arch == "sm_75" else "winograd_simt")
    assert len(conv_rules.winograd_forms(conv2d(*LAYER))) == 2


@pytest.mark.parametrize("arch, fp32, fp16", [
    ("sm_75", ["sm75_v5_warp_tiled"], ["v6_wmma"]),
    ("sm_80", ["v5_warp_tiled"], ["v7_mma_ldmatrix"]),
    ("sm_90a", ["v5_warp_tiled"], ["v9_tma_ws", "v8_wgmma"]),
])
def test_the_gemm_rules_fall_back_to_what_the_arch_builds(arch, fp32, fp16, monkeypatch):
    """Turing: v5 with synchronous copies and v6's wmma (with tiles whose C fits sm_75's shared memory at a shape
    they do not divide); sm_80: v7; Hopper: v9 and v8."""
    monkeypatch.setenv(ARCH_ENV, arch)
    names = lambda wl: [r.name for r in gemm_rules.rule_records(wl, keep=1)]   # noqa: E731
    assert names(gemm(1000, 1000, 1000)) == fp32
    assert names(gemm(1000, 1000, 1000, dtype="float16")) == fp16

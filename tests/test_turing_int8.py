"""Turing's (sm_75) int8 convolution family ``sm75_int8_wmma`` (issue 41): wmma m16n16k16 s8 fragments, k tiles in
16-byte panels, synchronous copies through registers, the int8 kernels' epilogue. On llvm (its tensor intrinsics left
as the loops they were matched against: ``core.serial.without_tensor_cores``) it matches the integer reference bit for
bit, padded pixels and channels included; built for sm_75 its CUDA is s8 wmma without cp.async and nvcc compiles it
without spills; the rules and notebook 07 offer it only where no int8 family of sm_80+ builds."""
from __future__ import annotations

import re
import shutil

import pytest
import tvm

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import ARCH_ENV
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.core.serial import without_tensor_cores
from tirbench.schedules.common.record import first_offered
from tirbench.schedules.conv import rules as conv_rules
from tirbench.schedules.conv.records import INT8, INT8_TURING, SM75_INT8_WMMA
from tirbench.workloads import conv2d_int8

#: (a small layer, tiles): the stem's 3 channels (one 32-lane group, k tiles of 32, the border zero-filled); 49
#: pixels and 96 channels in a 64 x 128 tile (a pixel's last two threads idle); a 1x1 of stride 2 on 128-row tiles;
#: the KRSC filter of the warp-specialized form.
CASES = {
    "stem": (conv2d_int8(1, 3, 17, 17, 64, 7, 7, 2, 3), {"tile_k": 32}),
    "3x3_pads_m_and_n": (conv2d_int8(1, 64, 7, 7, 96, 3, 3, 1, 1, residual=True),
                         {"block_tile": (64, 128), "warp_tile": (32, 64), "tile_k": 64}),
    "1x1_stride_2": (conv2d_int8(2, 128, 7, 5, 64, 1, 1, 2, 0, relu=False),
                     {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 64}),
    "krsc_filter": (conv2d_int8(2, 128, 6, 6, 64, 3, 3, 1, 1, residual=True, filter_layout="KRSC"),
                    {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 64}),
}


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setenv("TIRBENCH_FORCE_CPU", "1")


def test_the_family_needs_wmma_alone_and_is_refused_in_one_line_without_it():
    assert SM75_INT8_WMMA.name.startswith("sm75_") and SM75_INT8_WMMA.needs == ("wmma",)
    assert SM75_INT8_WMMA.pass_config == {}   # synchronous copies: no cp.async
    assert SM75_INT8_WMMA.arch_refusal("sm_75") is None and SM75_INT8_WMMA.arch_refusal("sm_90a") is None
    assert SM75_INT8_WMMA.arch_refusal("sm_70") == "sm75_int8_wmma: needs wmma (sm_75+); this build is sm_70"


@pytest.mark.parametrize("case", CASES)
def test_scheduled_arithmetic_matches_the_integer_reference_on_llvm(case):
    wl, tiles = CASES[case]
    sch = SM75_INT8_WMMA.apply(wl, tiles)
    run_checked(wl, build(without_tensor_cores(wl.mod, sch), cpu_target()), tvm.cpu(0), seed=0,
                what=f"{SM75_INT8_WMMA.name} {wl.shape}")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
def test_built_for_sm_75_it_is_s8_wmma_without_cp_async_and_nvcc_compiles_it_without_spills(monkeypatch):
    """The stem's border zero-filled by synchronous 16-byte copies (TVM prints their int8x16 zero as a `make_int4` of
    16 bytes, which nvcc rejects: ``core.lowering`` writes it as four ints), the next k tile in a thread's own
    registers (no stack frame: a register copy indexed by thread would be the whole tile, in local memory)."""
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    wl, tiles = CASES["stem"]
    src = device_source(SM75_INT8_WMMA.apply(wl, tiles), cuda_target("sm_75"), SM75_INT8_WMMA.pass_config)
    assert "wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, signed char" in src and "wmma::mma_sync" in src
    assert "cp.async" not in src and "cp_async" not in src and "mma.sync" not in src
    assert "make_int4((signed char)" not in src and "make_int4(0, 0, 0, 0)" in src
    report = " | ".join(nvcc_report(src, "sm_75"))
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report


def test_every_candidate_fills_its_im2col_tile_16_bytes_at_a_time(monkeypatch):
    """A 3x3 layer's im2col tile goes through registers as 16-byte vectors (``int4``), not byte by byte (which TVM
    falls back to where it cannot prove 16 bytes one channel group: k tiles of 64 on 64-row blocks)."""
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    wl = conv2d_int8(8, 128, 14, 14, 128, 3, 3, 1, 1, relu=True, residual=True)
    for cand in SM75_INT8_WMMA.candidates:
        src = device_source(SM75_INT8_WMMA.apply(wl, cand), cuda_target("sm_75"), SM75_INT8_WMMA.pass_config)
        assert re.search(r"int4 Xp_reindex(_pad)?_local_ptr\[", src) and "signed char condval" not in src, cand


@pytest.mark.parametrize("arch, names", [("sm_75", ["sm75_int8_wmma"]), ("sm_80", ["int8_mma"]),
                                         ("sm_90a", ["int8_wgmma", "int8_mma"])])
def test_offered_only_where_no_int8_family_of_sm_80_builds(arch, names, monkeypatch):
    """The conv rules and notebook 07's sweep (``first_offered(INT8, INT8_TURING)``)."""
    monkeypatch.setenv(ARCH_ENV, arch)
    wl = conv2d_int8(32, 256, 14, 14, 256, 3, 3, 1, 1, relu=True, residual=True)
    assert [r.name for r in conv_rules.rule_records(wl, keep=1)] == names
    assert [r.name for r in first_offered(INT8, INT8_TURING, arch=arch)] == names

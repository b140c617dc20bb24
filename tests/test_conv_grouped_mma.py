"""The grouped NHWC fp16 convolution on mma.sync (``conv.grouped_mma``): one-line refusals, and nvcc builds
ResNeXt-50's grouped layers for sm_90a without spills, the im2col tile filled by 16-byte cp.async copies where a
group's channels come in 8s. (No GPU here: the numerics rest on ``nhwc_grouped_as_gemm``, which the SIMT grouped
kernel checks on llvm in test_conv_depthwise_grouped, and on the GEMM helper's non-batched CUDA being unchanged,
test_cuda_identity.)"""
from __future__ import annotations

import functools
import re
import shutil

import pytest
from tvm import s_tir

from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.errors import refusal
from tirbench.schedules.conv.grouped_mma import conv2d_nhwc_grouped_mma
from tirbench.schedules.conv.records import NHWC_GROUPED_MMA
from tirbench.schedules.conv.rules import rule_records
from tirbench.workloads import conv2d

def resnext(c: int, hw: int, stride: int = 1, dtype: str = "float16"):
    """ResNeXt-50 32x4d's grouped 3x3 at batch 32."""
    return conv2d(32, c, hw, hw, c, 3, 3, stride, 1, groups=32, layout="NHWC", dtype=dtype)


@pytest.mark.parametrize("wl, params, said", [
    (resnext(512, 14), {"tile_k": 24}, "tile_k=24 must be a multiple of 16"),
    (resnext(512, 14), {"warp_tile": (48, 32)}, "warp_tile[0]=48 does not divide block_tile[0]=128"),
    (resnext(512, 14), {"block_tile": (128, 16), "warp_tile": (64, 16), "tile_k": 16},
     "tile_k=16: the B tile (256 elements) is not a multiple of 64 threads x 8-element copies"),
    (resnext(128, 56), {"block_tile": (32, 16), "warp_tile": (16, 16), "tile_k": 32},
     "the epilogue gives each of 64 threads the same number of 4-half stores of 32 x 4 outputs"),
    (resnext(512, 14, dtype="float32"), {}, "this schedule takes float16 inputs"),
    (conv2d(2, 64, 8, 8, 64, layout="NHWC", dtype="float16"), {}, "takes groups > 1"),
])
def test_a_parameter_that_does_not_fit_is_refused_in_one_line(wl, params, said):
    said_here = refusal(lambda: conv2d_nhwc_grouped_mma(s_tir.Schedule(wl.mod), **params))
    assert said_here is not None and said in said_here and "\n" not in said_here, said_here


def test_the_record_takes_grouped_fp16_nhwc_layers_only():
    assert NHWC_GROUPED_MMA.accepts(resnext(256, 28)) is None
    assert "takes 1 < groups < C" in NHWC_GROUPED_MMA.accepts(conv2d(2, 64, 8, 8, 64, layout="NHWC",
                                                                     dtype="float16"))


@functools.cache
def cuda_of(c: int, hw: int, stride: int, index: int) -> str:
    sch = NHWC_GROUPED_MMA.apply(resnext(c, hw, stride), NHWC_GROUPED_MMA.candidates[index])
    return device_source(sch, pass_config=NHWC_GROUPED_MMA.pass_config)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("c, hw, stride, index", [
    (1024, 7, 1, 0),    # 32 channels a group, k tiles of 32
    (512, 28, 2, 3),    # 16 channels a group, k tiles of 16
])
def test_nvcc_builds_resnext_grouped_layers_with_16_byte_im2col_fills_and_no_spills(c, hw, stride, index):
    src = cuda_of(c, hw, stride, index)
    assert re.search(r"ptx_cp_async\w*_16\w*\([^;]*?X_ptr", src) and "X_ptr[" not in src   # no element copies of X
    assert "blockIdx.y" in src and "mma.sync" in src and "ldmatrix" in src
    report = " | ".join(nvcc_report(src, "sm_90a"))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


def test_the_rules_offer_it_before_the_simt_batched_gemm_and_the_stencil():
    assert [r.name for r in rule_records(resnext(1024, 14, 2))] == ["nhwc_grouped_mma", "nhwc_grouped_gemm",
                                                                    "grouped_nhwc_stencil"]


@pytest.mark.parametrize("c, tile_k, vector", [(512, 16, True), (256, 16, True), (1024, 32, True), (128, 32, False)])
def test_a_groups_channels_in_8s_fill_16_bytes_at_a_time(c, tile_k, vector):
    """16 channels a group in k tiles of 16 (one tap a tile), 8 in k tiles spanning two taps: 16-byte cp.async
    copies of X; 4 channels a group (not in 8s) copy elements with any tile."""
    params = {"block_tile": (128, 32), "warp_tile": (64, 32), "tile_k": tile_k, "stages": 4}
    src = device_source(NHWC_GROUPED_MMA.apply(resnext(c, 14), params), pass_config=NHWC_GROUPED_MMA.pass_config)
    copies = re.findall(r"ptx_cp_async\w*_16\w*\(buf_dyn_shmem_ptr, [^;]*?X_ptr", src)
    assert (bool(copies) and "X_ptr[" not in src) if vector else (not copies and "X_ptr[" in src)
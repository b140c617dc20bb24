"""Kernels for layers beyond plain ones (issue 42): the depthwise stencil (``conv.depthwise``, records DEPTHWISE_NCHW,
DEPTHWISE_NHWC and INT8_DEPTHWISE), the grouped implicit GEMMs (NCHW_GROUPED_GEMM, fp16 NHWC_GROUPED_GEMM), the SIMT
implicit GEMMs with a dilation or a stride or padding per axis (NCHW_GEMM, NHWC_GEMM) and the fp16 and int8
tensor-core ones (NHWC_WGMMA, NHWC_MMA, NHWC_WMMA, INT8_WGMMA, INT8_MMA, SM75_INT8_WMMA). Without a GPU: each kernel's
arithmetic (its schedule replayed without thread bindings) matches ``conv2d_reference`` on llvm; every candidate's
CUDA goes through nvcc for sm_90a and sm_80 without spills; the rules offer the families and refuse a layer none
takes in one line; shape strings with suffixes read back into their workloads."""
from __future__ import annotations

import functools
import re
import shutil

import numpy as np
import pytest
import tvm

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.errors import refusal
from tirbench.core.machine import cpu_target, target_for
from tirbench.core.serial import without_threads
from tirbench.report import overview
from tirbench.schedules.conv.implicit_gemm import conv2d_as_gemm, default_channel_block
from tirbench.schedules.conv.records import (DEPTHWISE_NCHW, DEPTHWISE_NHWC, GROUPED_NCHW_STENCIL,
                                             GROUPED_NHWC_STENCIL, INT8_DEPTHWISE, INT8_GROUPED, INT8_GROUPED_MMA,
                                             INT8_MMA, INT8_TMA_WS,
                                             INT8_WGMMA, NCHW_GEMM, NCHW_GROUPED_GEMM, NHWC_GEMM, NHWC_GROUPED_GEMM,
                                             NHWC_MMA, NHWC_TMA_WS, NHWC_WGMMA, NHWC_WMMA, SM75_INT8_WMMA)
from tirbench.schedules.conv.rules import int8_forms, rule_records
from tirbench.tuning.labels import database_for
from tirbench.tuning.spaces import SPACES
from tirbench.tuning.tune import work_dir_for
from tirbench.workloads import conv2d
from tirbench.workloads.conv2d_int8 import conv2d_int8, filter_layout_of, kcrs_to_krs32, krs32_to_kcrs
from tirbench.workloads.conv_geometry import parse_conv_shape

DEPTHWISE = {"NCHW": DEPTHWISE_NCHW, "NHWC": DEPTHWISE_NHWC}
#: (N, C, H, W, K, R, S, stride, pad, dilation), groups = C: 3x3 stride 1 and 2, 5x5 stride 2, ConvNeXt's 7x7, a
#: channel multiplier of 2, dilation 2, an asymmetric ("same" at stride 2) padding.
DEPTHWISE_CASES = {"3x3": (2, 8, 10, 12, 8, 3, 3, 1, 1, 1), "3x3s2": (1, 8, 11, 9, 8, 3, 3, 2, 1, 1),
                   "5x5s2": (1, 6, 13, 13, 6, 5, 5, 2, 2, 1), "7x7": (1, 4, 14, 14, 4, 7, 7, 1, 3, 1),
                   "m2": (1, 4, 9, 9, 8, 3, 3, 1, 1, 1), "d2": (1, 4, 12, 12, 4, 3, 3, 1, 2, 2),
                   "pad0x1x0x1": (1, 4, 10, 10, 4, 3, 3, 2, (0, 1, 0, 1), 1)}
SMALL_TILES = {"NCHW": {"tile": (4, 8), "channels": 2, "thread_rows": 2},
               "NHWC": {"tile": (2, 4), "channels": 4, "thread_rows": 1}}


def depthwise(case: str, layout: str, dtype: str = "float32"):
    n, c, h, w, k, r, s, stride, pad, dilation = DEPTHWISE_CASES[case]
    return conv2d(n, c, h, w, k, r, s, stride, pad, groups=c, dilation=dilation, layout=layout, dtype=dtype)


def check_on_llvm(wl, sch) -> None:
    run_checked(wl, build(without_threads(wl.mod, sch), cpu_target()), tvm.cpu(0), what=f"{wl.shape} {wl.layout}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES)
@pytest.mark.parametrize("layout", DEPTHWISE)
def test_depthwise_matches_the_reference_on_llvm(layout, case, dtype):
    """Tiles that divide no output (edge blocks predicated), several channels a block, every geometry."""
    wl = depthwise(case, layout, dtype)
    check_on_llvm(wl, DEPTHWISE[layout].apply(wl, SMALL_TILES[layout]))


@pytest.mark.parametrize("case", [name for name, case in DEPTHWISE_CASES.items() if case[4] == case[1]])
def test_the_int8_depthwise_stencil_matches_the_reference_exactly_on_llvm(case):
    """NC/32HW32 (``conv2d_int8(..., groups=C)``, K = C: one output channel per input channel): every geometry, 40
    channels (the last group's lanes past C and K zero), the residual epilogue."""
    n, c, h, w, k, r, s, stride, pad, dilation = DEPTHWISE_CASES[case]
    wl = conv2d_int8(n, 40, h, w, 40, r, s, stride, pad, groups=40, dilation=dilation, residual=True)
    check_on_llvm(wl, INT8_DEPTHWISE.apply(wl, {"tile": SMALL_TILES["NHWC"]["tile"], "channels": 32,
                                                "thread_rows": 1}))


#: int8 grouped layers (N, C, H, W, K, R, S, stride, pad, dilation, groups), C and K multiples of 32: ResNeXt's 4
#: channels a group (its stride-2 form with the residual epilogue), 8 with a padding per side and a dilation, 16
#: groups of 2 output channels and 4 input ones.
INT8_GROUPED_CASES = {"g32": (2, 128, 9, 9, 128, 3, 3, 1, 1, 1, 32), "g32s2": (1, 128, 11, 11, 128, 3, 3, 2, 1, 1, 32),
                      "g8_geometry": (1, 64, 10, 10, 64, 3, 3, (2, 1), (1, 2, 0, 1), (1, 2), 8),
                      "g16_k32": (1, 64, 8, 8, 32, 3, 3, 1, 1, 1, 16)}


@pytest.mark.parametrize("case", INT8_GROUPED_CASES)
def test_the_int8_grouped_stencil_matches_the_reference_exactly_on_llvm(case):
    """``conv2d_int8(..., groups=G)`` (filter (K, C/G, R, S)): each output channel sums its group's channels; 32 and
    64 channels a block, the residual epilogue; the rules' first candidate too."""
    n, c, h, w, k, r, s, stride, pad, dilation, groups = INT8_GROUPED_CASES[case]
    wl = conv2d_int8(n, c, h, w, k, r, s, stride, pad, groups=groups, dilation=dilation, residual=case == "g32s2")
    assert filter_layout_of(wl.mod) == "KCRS"
    check_on_llvm(wl, INT8_GROUPED.apply(wl, {"tile": (2, 4), "channels": 32, "thread_rows": 1}))
    (record,) = rule_records(wl, keep=1)
    assert record.name == INT8_GROUPED.name
    check_on_llvm(wl, record.apply(wl, record.candidates[0]))


@pytest.mark.parametrize("channels", [4, 8, 16, 32])
def test_the_lane_group_filter_holds_each_channel_on_its_groups_lanes(channels):
    """``kcrs_to_krs32``: output channel f's taps on the lanes of its group within its lane group, zeros elsewhere;
    ``krs32_to_kcrs`` gives the grouped filter back."""
    wt = np.random.default_rng(channels).integers(-128, 128, (64, channels, 3, 3), dtype=np.int8)
    packed = kcrs_to_krs32(wt)
    assert packed.shape == (64, 3, 3, 32) and (krs32_to_kcrs(packed, channels) == wt).all()
    first = 5 % 32 // channels * channels
    assert (packed[5, :, :, first:first + channels] == wt[5].transpose(1, 2, 0)).all()
    assert np.count_nonzero(packed) == np.count_nonzero(wt)   # the other lanes hold zeros only


@pytest.mark.parametrize("c, h, stride, groups, residual", [(128, 6, 1, 32, False), (64, 7, 2, 4, True),
                                                             (64, 5, 1, 2, False)])
def test_the_lane_group_filter_workload_matches_the_reference_exactly_on_llvm(c, h, stride, groups, residual):
    """``conv2d_int8(..., filter_layout="KRS32")``: the block "conv" sums each output channel over its whole lane
    group (the packed zeros included), and its output is the grouped layer's, bit for bit (4, 16 and 32 channels a
    group, stride 2, the residual epilogue)."""
    wl = conv2d_int8(2, c, h, h, c, 3, 3, stride, 1, groups=groups, residual=residual, filter_layout="KRS32")
    assert filter_layout_of(wl.mod) == "KRS32"
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), what=wl.shape)


def test_int8_forms_pack_the_lane_group_filter_where_groups_lie_in_lane_groups():
    """ResNeXt's grouped layers (C = K, 4 to 32 channels a group) get the "KRS32" form and on it the grouped
    tensor-core family alone; a layer whose groups span lane groups, or whose C and K differ, gets no form."""
    for c, groups in ((128, 32), (1024, 32)):
        (form,) = int8_forms(conv2d_int8(32, c, 14, 14, c, 3, 3, 1, 1, groups=groups))
        assert filter_layout_of(form.mod) == "KRS32" and form.shape.endswith("_g32")
        assert [r.name for r in rule_records(form)] == [INT8_GROUPED_MMA.name]
    assert int8_forms(conv2d_int8(32, 128, 14, 14, 128, 3, 3, 1, 1, groups=2)) == []
    assert int8_forms(conv2d_int8(32, 64, 14, 14, 128, 3, 3, 1, 1, groups=2)) == []


@pytest.mark.parametrize("make, said", [
    (lambda: conv2d_int8(1, 48, 8, 8, 48, groups=3), "conv2d_int8 takes a grouped layer whose input and output "
                                                       "channels are multiples of 32"),
    (lambda: conv2d_int8(1, 64, 8, 8, 64, groups=32, filter_layout="KRSC"), "'KCRS' and 'KRS32' are the filters"),
    (lambda: conv2d_int8(1, 64, 8, 8, 64, filter_layout="KCRS"), "'KCRS' and 'KRS32' are the filters of a grouped"),
    (lambda: conv2d_int8(1, 64, 8, 8, 64, filter_layout="KRS32"), "'KCRS' and 'KRS32' are the filters of a grouped"),
    (lambda: conv2d_int8(1, 64, 8, 8, 128, groups=2, filter_layout="KRS32"),
     "filter_layout='KRS32' packs a grouped layer whose input and output channels are as many"),
    (lambda: conv2d_int8(1, 128, 8, 8, 128, groups=2, filter_layout="KRS32"), "whose groups' channels divide 32"),
    (lambda: INT8_GROUPED.apply(conv2d_int8(1, 64, 8, 8, 64, groups=4, filter_layout="KRS32")),
     "the stencil reads a grouped layer's own filter"),
    (lambda: INT8_GROUPED_MMA.apply(conv2d_int8(1, 64, 8, 8, 64, groups=4)),
     "the grouped int8 tensor-core kernel reads a filter packed per lane group"),
    (lambda: INT8_GROUPED_MMA.apply(conv2d_int8(1, 64, 8, 8, 64, groups=4, filter_layout="KRS32"),
                                    {"tile_k": 48}), "tile_k=48"),
    (lambda: NHWC_WGMMA.apply(conv2d(32, 32, 35, 35, 32, 3, 3, 1, 1, layout="NHWC", dtype="float16"),
                              {"block_tile": (128, 32), "stages": 4}), "block_tile[1]=32: the swizzle128 layout"),
    (lambda: conv2d_int8(1, 64, 8, 8, 64, filter_layout="KRS"), "'KRS' is the filter of a depthwise layer"),
    (lambda: INT8_DEPTHWISE.apply(conv2d_int8(1, 64, 8, 8, 64, groups=64), {"channels": 16}),
     "channels=16: an int8 NC/32HW32 block takes whole groups of 32 channels"),
])
def test_int8_depthwise_refusals_are_one_line(make, said):
    assert said in refusal(make) and "\n" not in refusal(make)


@pytest.mark.parametrize("layout", DEPTHWISE)
def test_the_rules_depthwise_candidates_match_the_reference_on_llvm(layout):
    wl = depthwise("7x7", layout)
    (record,) = rule_records(wl, keep=2)
    assert record.name == DEPTHWISE[layout].name and len(record.candidates) == 2
    for cand in record.candidates:
        check_on_llvm(wl, record.apply(wl, cand))


#: (N, C, H, W, K, R, S, stride, pad, dilation, groups): ResNeXt-like 32 groups of 2 channels, 4 groups with a 1x3
#: window and a padding per axis, 2 groups of a 1x1 layer, and groups with a dilation, a stride per axis and a padding
#: per side.
GROUPED_CASES = {"g32": (1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 32), "g4_1x3": (2, 8, 9, 9, 12, 1, 3, 1, (0, 1), 1, 4),
                 "g2_1x1": (1, 64, 8, 8, 64, 1, 1, 1, 0, 1, 2),
                 "g8_geometry": (1, 16, 10, 10, 16, 3, 3, (2, 1), (1, 2, 0, 1), (1, 2), 8)}
GEMM_SMALL = {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16}


GROUPED_STENCILS = {"NCHW": GROUPED_NCHW_STENCIL, "NHWC": GROUPED_NHWC_STENCIL}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", GROUPED_CASES)
@pytest.mark.parametrize("layout", GROUPED_STENCILS)
def test_the_grouped_stencil_matches_the_reference_on_llvm(layout, case, dtype):
    """Each output channel sums its group's channels from the window: a group a block (NCHW), two (NHWC), every
    geometry, tiles that divide no output; a block of part of a group is refused in one line (TVM bounds its window
    loosely)."""
    n, c, h, w, k, r, s, stride, pad, dilation, groups = GROUPED_CASES[case]
    wl = conv2d(n, c, h, w, k, r, s, stride, pad, dilation=dilation, groups=groups, layout=layout, dtype=dtype)
    per_group = k // groups
    check_on_llvm(wl, GROUPED_STENCILS[layout].apply(wl, {**SMALL_TILES[layout],
                                                          "channels": per_group * (2 if layout == "NHWC" else 1)}))
    if per_group == 3:
        assert "channels=2: a block of a grouped layer takes one output channel or whole groups (a multiple of " \
            "its 3 output channels a group)" in refusal(
            lambda: GROUPED_STENCILS[layout].apply(wl, {**SMALL_TILES[layout], "channels": 2}))


@pytest.mark.parametrize("case", GROUPED_CASES)
def test_grouped_gemm_matches_the_reference_on_llvm(case):
    n, c, h, w, k, r, s, stride, pad, dilation, groups = GROUPED_CASES[case]
    wl = conv2d(n, c, h, w, k, r, s, stride, pad, dilation=dilation, groups=groups)
    check_on_llvm(wl, NCHW_GROUPED_GEMM.apply(wl, GEMM_SMALL))


#: fp16 NHWC grouped layers (N, C, H, W, K, R, S, stride, pad, dilation, groups), ResNeXt-like: 32 groups of 2
#: channels (the filter's fill 4 bytes a copy), of 4 at stride 2 (8 bytes), 4 groups of 3 output channels with a 1x3
#: window and a padding per axis (element copies), and groups with a dilation, a stride per axis and a padding per side.
FP16_GROUPED_CASES = {"g32_c2": (1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 32),
                      "g32_c4_s2": (2, 128, 9, 9, 128, 3, 3, 2, 1, 1, 32),
                      "g4_1x3": (2, 8, 9, 9, 12, 1, 3, 1, (0, 1), 1, 4),
                      "g8_geometry": (1, 16, 10, 10, 16, 3, 3, (2, 1), (1, 2, 0, 1), (1, 2), 8)}


@pytest.mark.parametrize("case", FP16_GROUPED_CASES)
def test_fp16_nhwc_grouped_gemm_matches_the_reference_on_llvm(case):
    """Tiles wider than a group (its columns padded), pixels no tile divides, every geometry."""
    n, c, h, w, k, r, s, stride, pad, dilation, groups = FP16_GROUPED_CASES[case]
    wl = conv2d(n, c, h, w, k, r, s, stride, pad, dilation=dilation, groups=groups, layout="NHWC", dtype="float16")
    check_on_llvm(wl, NHWC_GROUPED_GEMM.apply(wl, NHWC_GROUPED_GEMM.candidates[0]))


def test_the_rules_fp16_grouped_candidates_match_the_reference_on_llvm():
    wl = conv2d(2, 128, 7, 7, 128, groups=8, layout="NHWC", dtype="float16")   # 16 channels a group
    records = rule_records(wl, keep=2)
    assert [(r.name, len(r.candidates)) for r in records] == [("nhwc_grouped_mma", 2), (NHWC_GROUPED_GEMM.name, 2),
                                                               (GROUPED_NHWC_STENCIL.name, 2)]
    for record in records[1:]:   # the SIMT ones (llvm has no tensor cores: nhwc_grouped_mma's own tests)
        for cand in record.candidates:
            check_on_llvm(wl, record.apply(wl, cand))


@pytest.mark.parametrize("layout, record", [("NCHW", NCHW_GEMM), ("NHWC", NHWC_GEMM)])
@pytest.mark.parametrize("geometry", [{"dilation": 2, "pad": 2}, {"stride": (2, 1), "dilation": (1, 3)},
                                      {"r": 1, "s": 7, "pad": (0, 3)}, {"stride": 2, "pad": (0, 1, 0, 1)}])
def test_simt_gemms_take_dilation_and_a_stride_or_padding_per_axis_on_llvm(layout, record, geometry):
    sizes, geometry = {"n": 1, "c": 6, "h": 12, "w": 11, "k": 8, "r": 3, "s": 3}, dict(geometry)
    sizes.update({key: geometry.pop(key) for key in ("r", "s") if key in geometry})
    wl = conv2d(*sizes.values(), layout=layout, **geometry)
    check_on_llvm(wl, record.apply(wl, GEMM_SMALL))


#: fp16 NHWC geometries beyond plain: Inception's 1x7 and 7x1 with padding per axis, a stride per axis, a dilation, a
#: padding per side (TensorFlow's "same" at stride 2).
FP16_WINDOWS = {"p0x3": {"r": 1, "s": 7, "pad": (0, 3)}, "p3x0": {"r": 7, "s": 1, "pad": (3, 0)},
                "s2x1": {"stride": (2, 1)}, "d2": {"pad": 2, "dilation": 2}, "p0x1x0x1": {"stride": 2, "pad": (0, 1, 0, 1)}}


def fp16_window(name: str, n: int = 2, c: int = 64, hw: int = 17, k: int = 64):
    geometry = dict(FP16_WINDOWS[name])
    r, s = geometry.pop("r", 3), geometry.pop("s", 3)
    return conv2d(n, c, hw, hw, k, r, s, layout="NHWC", dtype="float16", **geometry)


@pytest.mark.parametrize("name", FP16_WINDOWS)
def test_the_fp16_implicit_gemms_view_of_any_window_matches_the_reference_on_llvm(name):
    """What NHWC_WGMMA, NHWC_MMA and NHWC_WMMA do to the layer before their GEMM helper (``conv2d_as_gemm``: the
    window's geometry stays in the reads and the pad block): the tensor-core nest itself cannot run on llvm."""
    wl = fp16_window(name)
    sch = tvm.s_tir.Schedule(wl.mod)
    conv2d_as_gemm(sch, channel_block=default_channel_block(sch, 64, None))
    run_checked(wl, build(sch.mod, cpu_target()), tvm.cpu(0), what=wl.shape)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("record, arch", [(NHWC_WGMMA, "sm_90a"), (NHWC_MMA, "sm_80"), (NHWC_WMMA, "sm_75")])
def test_nvcc_takes_the_fp16_implicit_gemms_of_a_window_with_padding_per_axis(record, arch):
    wl = fp16_window("p0x3", n=32, c=128, k=128)
    sch = record.apply(wl, record.candidates[0] if record.candidates else None)
    with tvm.transform.PassContext(config=record.pass_config):
        report = " | ".join(nvcc_report(device_source(sch, target_for(arch)), arch))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


def int8_window(name: str, n: int = 2, c: int = 64, hw: int = 11, k: int = 64):
    geometry = dict(FP16_WINDOWS[name])
    r, s = geometry.pop("r", 3), geometry.pop("s", 3)
    return conv2d_int8(n, c, hw, hw, k, r, s, **geometry)


@pytest.mark.parametrize("name", FP16_WINDOWS)
def test_an_int8_layer_of_any_window_and_the_int8_gemms_view_of_it_match_the_reference_exactly_on_llvm(name):
    """``conv2d_int8``'s module (its pad block and reads carry the window) and what INT8_WGMMA, INT8_MMA and
    SM75_INT8_WMMA do to it before their GEMM helper (``conv2d_as_gemm``), bit for bit."""
    wl = int8_window(name)
    assert wl.extra == fp16_window(name).extra
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), what=wl.shape)
    sch = tvm.s_tir.Schedule(wl.mod)
    conv2d_as_gemm(sch, channel_block=64)
    run_checked(wl, build(sch.mod, cpu_target()), tvm.cpu(0), what=wl.shape)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("record, arch", [(INT8_WGMMA, "sm_90a"), (INT8_MMA, "sm_80"), (SM75_INT8_WMMA, "sm_75")])
def test_nvcc_takes_the_int8_implicit_gemms_of_a_window_with_padding_per_axis(record, arch):
    wl = int8_window("p0x3", n=32, c=128, hw=17, k=128)
    sch = record.apply(wl, record.candidates[0])
    with tvm.transform.PassContext(config=record.pass_config):
        report = " | ".join(nvcc_report(device_source(sch, target_for(arch)), arch))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


def test_an_int8_layer_beyond_plain_gets_the_implicit_gemms_and_no_packed_filter_form():
    wl = int8_window("p3x0", n=32, c=128, hw=17, k=128)
    assert [r.name for r in rule_records(wl)] == ["int8_wgmma", "int8_mma"] and int8_forms(wl) == []
    assert "not padding 3x0 per axis" in refusal(lambda: INT8_TMA_WS.apply(wl))


#: Layers of the networks' kinds, for nvcc: MobileNetV2's stride-2 3x3 at 112x112 (batch 1, fp32 NCHW; batch 32, fp16
#: NHWC), ResNeXt-50's grouped 3x3 at 28x28.
NVCC = {DEPTHWISE_NCHW.name: conv2d(1, 96, 112, 112, 96, 3, 3, 2, 1, groups=96),
        DEPTHWISE_NHWC.name: conv2d(32, 96, 112, 112, 96, 3, 3, 2, 1, groups=96, layout="NHWC", dtype="float16"),
        NCHW_GROUPED_GEMM.name: conv2d(1, 256, 28, 28, 256, groups=32),
        NHWC_GROUPED_GEMM.name: conv2d(32, 256, 28, 28, 256, groups=32, layout="NHWC", dtype="float16"),
        INT8_DEPTHWISE.name: conv2d_int8(32, 144, 56, 56, 144, 3, 3, 2, 1, groups=144),
        INT8_GROUPED.name: conv2d_int8(32, 128, 56, 56, 128, groups=32),
        INT8_GROUPED_MMA.name: conv2d_int8(32, 512, 14, 14, 512, groups=32, filter_layout="KRS32"),
        GROUPED_NCHW_STENCIL.name: conv2d(1, 256, 28, 28, 256, groups=32),
        GROUPED_NHWC_STENCIL.name: conv2d(32, 1024, 7, 7, 1024, groups=32, layout="NHWC", dtype="float16")}
RECORDS = {r.name: r for r in (DEPTHWISE_NCHW, DEPTHWISE_NHWC, NCHW_GROUPED_GEMM, NHWC_GROUPED_GEMM, INT8_DEPTHWISE,
                               INT8_GROUPED, INT8_GROUPED_MMA, GROUPED_NCHW_STENCIL, GROUPED_NHWC_STENCIL)}
#: The grouped GEMMs' candidates nvcc builds here: NCHW's first two (its nest is test_conv_simt_gemm's), NHWC's first
#: and last (8 columns of 64 rows, 32 of 128); the grouped stencils' that take the layer (one channel or whole groups
#: a block).
NVCC_CANDIDATES = {NCHW_GROUPED_GEMM.name: (0, 1), NHWC_GROUPED_GEMM.name: (0, len(NHWC_GROUPED_GEMM.candidates) - 1),
                   GROUPED_NCHW_STENCIL.name: (0, 1, 2, 5), GROUPED_NHWC_STENCIL.name: (0, 1, 2, 3)}   # whole groups


@functools.cache
def cuda_of(name: str, index: int) -> str:
    record = RECORDS[name]
    sch = record.apply(NVCC[name], record.candidates[index])
    with tvm.transform.PassContext(config=record.pass_config):
        return device_source(sch)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name, index", [
    (r.name, i) for r in RECORDS.values() for i in NVCC_CANDIDATES.get(r.name, range(len(r.candidates)))])
def test_nvcc_takes_every_candidate_without_spills(name, index, arch):
    report = " | ".join(nvcc_report(cuda_of(name, index), arch))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
def test_an_int8_grouped_layer_of_32_channels_a_group_holds_one_channels_taps_at_a_time_without_spills():
    """ResNeXt-50's last grouped layer: 32 channels x 9 taps a group, which do not all fit a thread's registers."""
    wl = conv2d_int8(32, 1024, 7, 7, 1024, groups=32)
    (record,) = rule_records(wl, keep=2)
    for cand in record.candidates:
        with tvm.transform.PassContext(config=record.pass_config):
            report = " | ".join(nvcc_report(device_source(record.apply(wl, cand)), "sm_90a"))
        assert "0 bytes spill stores, 0 bytes spill loads" in report, report


#: Channels-last stencils whose window copies move 16 bytes (``copy_bytes``): fp16 and fp32 depthwise (8 and 4
#: channels a copy) at stride 1 and at stride 2 with a padding per side, a grouped layer (32 groups of 2), int8
#: depthwise (NC/32HW32, 40 channels: the last group's lanes past C zero).
VECTOR_COPY_CASES = {
    "fp16": (conv2d(2, 16, 10, 12, 16, 3, 3, 1, 1, groups=16, layout="NHWC", dtype="float16"), DEPTHWISE_NHWC, 8),
    "fp32_s2": (conv2d(1, 8, 11, 9, 8, 3, 3, 2, (0, 1, 0, 1), groups=8, layout="NHWC"), DEPTHWISE_NHWC, 8),
    "grouped": (conv2d(1, 64, 8, 8, 64, 3, 3, 1, 1, groups=32, layout="NHWC", dtype="float16"), GROUPED_NHWC_STENCIL,
                16),
    "int8": (conv2d_int8(1, 40, 9, 9, 40, 3, 3, 1, 1, groups=40, residual=True), INT8_DEPTHWISE, 32),
}


@pytest.mark.parametrize("case", VECTOR_COPY_CASES)
def test_a_window_copied_in_16_byte_vectors_matches_the_reference_on_llvm_and_loads_16_bytes_in_cuda(case):
    wl, record, channels = VECTOR_COPY_CASES[case]
    params = {"tile": (2, 4), "channels": channels, "thread_rows": 1, "copy_bytes": 16}
    check_on_llvm(wl, record.apply(wl, params))
    vector_load = re.compile(r"= \*\((uint4|float4|int4)\*\)\(X_ptr")   # 16 bytes: 8 halves, 4 floats, 16 int8
    assert vector_load.search(device_source(record.apply(wl, params), target_for("sm_90a")))
    assert not vector_load.search(device_source(record.apply(wl, {**params, "copy_bytes": 0}), target_for("sm_90a")))


@pytest.mark.parametrize("case", ["fp16", "grouped"])
def test_eight_channels_a_thread_match_the_reference_on_llvm_and_store_16_bytes_in_cuda(case):
    wl, record, channels = VECTOR_COPY_CASES[case]
    params = {"tile": (2, 4), "channels": channels, "thread_rows": 2, "copy_bytes": 16, "thread_channels": 8}
    check_on_llvm(wl, record.apply(wl, params))
    assert "*(uint4*)(Y_ptr" in device_source(record.apply(wl, params), target_for("sm_90a"))


@pytest.mark.parametrize("wl, record, params, said", [
    (conv2d(1, 8, 8, 8, 8, groups=8), DEPTHWISE_NCHW, {"copy_bytes": 16}, "copy_bytes=16: an NCHW window's rows"),
    (conv2d(1, 8, 8, 8, 8, groups=8), DEPTHWISE_NCHW, {"thread_channels": 2}, "thread_channels=2: NCHW threads run"),
    (conv2d(1, 8, 8, 8, 8, groups=8, layout="NHWC"), DEPTHWISE_NHWC, {"channels": 8, "thread_channels": 3},
     "thread_channels"),
    (conv2d(1, 8, 8, 8, 8, groups=8, layout="NHWC", dtype="float16"), DEPTHWISE_NHWC, {"channels": 4, "copy_bytes": 16},
     "copy_bytes=16 (8 values)"),
])
def test_a_vector_copy_the_window_does_not_take_is_one_line(wl, record, params, said):
    assert said in refusal(lambda: record.apply(wl, params)) and "\n" not in refusal(lambda: record.apply(wl, params))


def test_the_depthwise_kernel_copies_its_window_to_shared_memory_once():
    src = cuda_of(DEPTHWISE_NCHW.name, 0)
    assert "__shared__" in src and src.count("__syncthreads()") == 1 and "cp_async" not in src


@pytest.mark.parametrize("wl, families", [
    (conv2d(1, 32, 112, 112, 32, groups=32), ["depthwise_nchw"]),
    (conv2d(32, 192, 28, 28, 192, 3, 3, 2, 1, groups=192, layout="NHWC", dtype="float16"), ["depthwise_nhwc"]),
    (conv2d(1, 96, 56, 56, 96, 7, 7, 1, 3, groups=96, dtype="float16"), ["depthwise_nchw"]),
    (conv2d(1, 128, 56, 56, 128, groups=32), ["nchw_grouped_gemm", "grouped_nchw_stencil"]),
    (conv2d(32, 256, 28, 28, 256, groups=32, layout="NHWC", dtype="float16"),
     ["nhwc_grouped_mma", "nhwc_grouped_gemm", "grouped_nhwc_stencil"]),
    (conv2d(32, 256, 56, 56, 256, 3, 3, 2, 1, groups=32, layout="NHWC", dtype="float16"),
     ["nhwc_grouped_mma", "nhwc_grouped_gemm", "grouped_nhwc_stencil"]),
    (conv2d(1, 256, 28, 28, 256, groups=32, layout="NHWC"), ["grouped_nhwc_stencil"]),   # no fp32 NHWC grouped GEMM
    (conv2d(1, 256, 28, 28, 256, groups=32, dtype="float16"), ["grouped_nchw_stencil"]),
    (conv2d(1, 512, 28, 28, 512, pad=2, dilation=2), ["nchw_gemm"]),
    (conv2d(1, 768, 17, 17, 192, 1, 7, 1, (0, 3), layout="NHWC"), ["nhwc_gemm"]),
    (conv2d(32, 768, 17, 17, 192, 7, 1, 1, (3, 0), layout="NHWC", dtype="float16"), ["nhwc_wgmma", "nhwc_mma"]),
    (conv2d_int8(32, 960, 7, 7, 960, 3, 3, 1, 1, groups=960), ["int8_depthwise"]),
    (conv2d_int8(32, 512, 28, 28, 512, 3, 3, 2, 1, groups=32), ["int8_grouped"]),
    (conv2d(1, 64, 14, 14, 64), ["nchw_splitk", "nchw_gemm"]),
])
def test_the_rules_offer_the_families_that_take_a_layer(wl, families):
    records = rule_records(wl)
    assert [r.name for r in records] == families and all(r.candidates for r in records)


@pytest.mark.parametrize("wl, has", [
    (conv2d(1, 64, 14, 14, 32, groups=32, layout="NHWC", dtype="float16"), "groups 32"),   # 1 output channel a group
    (conv2d(1, 64, 14, 14, 64, groups=32, layout="HWCN"), "groups 32"),
    (conv2d(1, 64, 14, 14, 64, pad=2, dilation=2, layout="HWCN"), "dilation 2"),
    (conv2d(1, 64, 14, 14, 64, stride=(2, 1), layout="HWCN"), "stride 2x1 per axis"),
])
def test_a_layer_no_family_takes_is_refused_in_one_line(wl, has):
    said = refusal(lambda: rule_records(wl))
    assert said.startswith(f"conv rules: no family takes conv2d {wl.shape}") and f"it has {has};" in said
    assert "\n" not in said


@pytest.mark.parametrize("record, wl, reason", [
    (DEPTHWISE_NCHW, conv2d(1, 64, 8, 8, 64, groups=32), "takes depthwise layers (groups = C), not groups 32 of 64"),
    (NCHW_GROUPED_GEMM, conv2d(1, 64, 8, 8, 64, groups=64), "not groups 64 of 64 input and 64 output channels"),
    (NCHW_GROUPED_GEMM, conv2d(1, 64, 8, 8, 32, groups=32), "2 or more output channels a group"),
    (NHWC_GROUPED_GEMM, conv2d(1, 64, 8, 8, 32, groups=32, layout="NHWC", dtype="float16"),
     "2 or more output channels a group"),
    (NHWC_GROUPED_GEMM, conv2d(1, 64, 8, 8, 64, groups=2, layout="NHWC"), "takes float16 inputs, not float32"),
    (NCHW_GEMM, conv2d(1, 64, 8, 8, 64, groups=2), "takes groups 1, not groups 2"),
    (NHWC_TMA_WS, conv2d(1, 64, 8, 8, 64, 1, 7, 1, (0, 3), layout="NHWC", dtype="float16"),
     "takes groups 1, dilation 1, one stride and one padding, not padding 0x3 per axis"),
])
def test_the_families_refuse_the_groups_they_do_not_take_in_one_line(record, wl, reason):
    said = refusal(lambda: record.apply(wl))
    assert reason in said and "\n" not in said


@pytest.mark.parametrize("kwargs", [{}, {"groups": 32}, {"groups": 64, "stride": 2}, {"dilation": (2, 1)},
                                    {"groups": 2, "dilation": 2, "stride": (1, 2), "pad": (2, 1)},
                                    {"pad": (0, 1, 0, 1), "stride": 2}])
def test_shape_strings_read_back_into_their_workloads(kwargs, tmp_path):
    wl = conv2d(1, 64, 16, 16, 64, layout="NHWC", **kwargs)
    assert conv2d(**parse_conv_shape(wl.shape), layout="NHWC").mod.script() == wl.mod.script()
    plain_dir = work_dir_for(tmp_path, wl)
    for space in ("default", "rules"):   # a space's suffix after the shape's own
        work_dir = plain_dir.with_name(plain_dir.name + SPACES[space].db_suffix)
        work_dir.mkdir(parents=True)
        read, read_space = overview.workload_of(work_dir)
        assert (read.shape, read.layout, read_space) == (wl.shape, "NHWC", space)
        found, found_dir = database_for(tmp_path, "conv2d", wl.shape, "float32", SPACES[space])
        assert found.shape == wl.shape and found_dir == work_dir


@pytest.mark.parametrize("shape", ["1x2x3", "1x8x8x8x8x3x3x1x1_q3", "1x8x8x8x8x3x3x1x1_d2_g2",
                                   "1x8x8x8x8x3x3x1x1_s2", "1x8x8x8x8x3x3x1x1_p1x1x1"])
def test_a_string_that_is_not_a_conv_shape_is_one_line(shape):
    assert refusal(lambda: parse_conv_shape(shape)).startswith(f"not a conv2d shape: {shape!r}")

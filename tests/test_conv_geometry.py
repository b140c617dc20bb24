"""Convolutions with groups, dilation and a stride or padding per axis (or per side): the float64 reference against a
direct loop, the TIR module on llvm in every layout, shape names and counts, the cuDNN argument mapping, and one-line
refusals (bad parameters; every kernel family, the conv rules, int8 and Winograd for layers they do not take; the
kernel CLI). A plain layer written with the new forms is the same workload as before."""
from __future__ import annotations

import numpy as np
import pytest
import tvm

import tirbench.kernel as kernel
from tirbench.bench.baselines import torch_conv_args
from tirbench.bench.harness import run_checked
from tirbench.core.errors import refusal
from tirbench.core.machine import cpu_target
from tirbench.kernel.cli import main
from tirbench.schedules.conv import records
from tirbench.schedules.conv.rules import rule_records, winograd_forms
from tirbench.schedules.conv.template import require_nchw_fp32_conv
from tirbench.schedules.spaces.wgmma_space import require_wgmma_workload
from tirbench.workloads import conv2d, conv2d_int8, conv2d_winograd
from tirbench.workloads.conv2d import conv2d_reference
from tirbench.workloads.conv_geometry import conv_geometry, geometry_of


def direct(x: np.ndarray, wt: np.ndarray, stride: tuple[int, int], pad: tuple[int, int, int, int],
           dilation: tuple[int, int], groups: int) -> np.ndarray:
    """The definition, one output element at a time: torch.nn.functional.conv2d(F.pad(x, (left, right, top,
    bottom)), wt, stride=stride, dilation=dilation, groups=groups), wt (K, C/groups, R, S)."""
    n, c, h, w = x.shape
    k, cg, r, s = wt.shape
    (sh, sw), (top, bottom, left, right), (dh, dw) = stride, pad, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - dh * (r - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (s - 1) - 1) // sw + 1
    out = np.zeros((n, k, oh, ow))
    for b in range(n):
        for o in range(k):
            first = o // (k // groups) * cg    # the group's first input channel
            for yy in range(oh):
                for xx in range(ow):
                    for ry in range(r):
                        for rx in range(s):
                            out[b, o, yy, xx] += xp[b, first:first + cg, yy * sh + ry * dh, xx * sw + rx * dw] @ \
                                wt[o, :, ry, rx]
    return out


#: (N, C, H, W, K, R, S, stride, pad, dilation, groups): grouped, depthwise (and a channel multiplier), dilated,
#: Inception's 1x7 with pad (0, 3), a stride and a dilation per axis, an asymmetric "same" padding, all together.
CASES = [
    (2, 8, 7, 6, 6, 3, 3, 1, 1, 1, 2),
    (1, 6, 8, 8, 6, 3, 3, 2, 1, 1, 6),
    (1, 4, 7, 7, 8, 3, 3, 1, 1, 1, 4),
    (1, 3, 9, 8, 4, 3, 3, 1, 2, 2, 1),
    (1, 3, 6, 9, 4, 1, 7, 1, (0, 3), 1, 1),
    (1, 3, 9, 10, 4, 3, 2, (2, 1), 1, (1, 3), 1),
    (1, 2, 8, 8, 3, 3, 3, 2, (0, 1, 0, 1), 1, 1),
    (2, 6, 11, 9, 9, 3, 2, (2, 3), (1, 2, 0, 1), (2, 1), 3),
]


@pytest.mark.parametrize("case", CASES)
def test_reference_is_the_direct_loop(case, rng):
    n, c, h, w, k, r, s, stride, pad, dilation, groups = case
    g = conv_geometry(stride, pad, dilation, groups)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c // groups, r, s))
    ref = conv2d_reference(x, wt, stride=stride, pad=pad, dilation=dilation, groups=groups)
    np.testing.assert_allclose(ref, direct(x, wt, g.stride, g.pad, g.dilation, groups), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWCN"])
@pytest.mark.parametrize("case", [CASES[1], CASES[4], CASES[-1]])
def test_module_matches_the_reference_on_llvm(case, layout):
    n, c, h, w, k, r, s, stride, pad, dilation, groups = case
    for dtype in ("float32", "float16"):
        wl = conv2d(n, c, h, w, k, r, s, stride, pad, layout=layout, dtype=dtype, dilation=dilation, groups=groups)
        run_checked(wl, tvm.compile(wl.mod, target=cpu_target()), tvm.cpu(0))


@pytest.mark.parametrize("kwargs, shape, out_hw", [
    ({"groups": 32}, "1x64x56x56x64x3x3x1x1_g32", (56, 56)),
    ({"groups": 64, "stride": 2}, "1x64x56x56x64x3x3x2x1_g64", (28, 28)),
    ({"dilation": 2, "pad": 2}, "1x64x56x56x64x3x3x1x2_d2", (56, 56)),
    ({"dilation": (2, 1)}, "1x64x56x56x64x3x3x1x1_d2x1", (54, 56)),
    ({"stride": (2, 1)}, "1x64x56x56x64x3x3x2x1_s2x1", (28, 56)),
    ({"pad": (0, 1)}, "1x64x56x56x64x3x3x1x0_p0x1", (54, 56)),
    ({"pad": (0, 1, 0, 1), "stride": 2}, "1x64x56x56x64x3x3x2x0_p0x1x0x1", (28, 28)),
    ({"groups": 2, "dilation": 2, "stride": (1, 2), "pad": (2, 1)}, "1x64x56x56x64x3x3x1x2_g2_d2_s1x2_p2x1",
     (56, 27)),
])
def test_shape_names_what_a_layer_has_beyond_a_plain_one(kwargs, shape, out_hw):
    wl = conv2d(1, 64, 56, 56, 64, **kwargs)
    assert wl.shape == shape and wl.out_shape == (1, 64, *out_hw)
    assert conv2d(1, 64, 56, 56, 64, **geometry_of(wl).kwargs()).shape == shape   # the geometry round-trips


def test_inception_1x7_and_depthwise_counts():
    wl = conv2d(1, 768, 17, 17, 192, 1, 7, 1, (0, 3))
    assert wl.shape == "1x768x17x17x192x1x7x1x0_p0x3" and wl.out_shape == (1, 192, 17, 17)
    dw = conv2d(1, 32, 112, 112, 32, groups=32, layout="NHWC")
    assert dw.flops == 2 * 32 * 112 * 112 * 9 and dw.tolerance["atol"] == 1e-5 * 9
    assert dw.bytes == (32 * 112 * 112 + 32 * 9) * 4 + 32 * 112 * 112 * 4
    assert [tuple(int(d) for d in b.shape) for b in dw.mod["main"].params] == \
        [(1, 112, 112, 32), (3, 3, 1, 32), (1, 112, 112, 32)]
    assert conv2d(2, 64, 14, 14, 128, groups=32).flops == 2 * 2 * 128 * 14 * 14 * 2 * 9   # C/groups = 2 per output


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWCN"])
def test_a_plain_layer_in_the_new_forms_is_the_plain_workload(layout):
    plain = conv2d(1, 8, 9, 7, 4, 3, 3, 2, 1, layout=layout)
    spelled = conv2d(1, 8, 9, 7, 4, 3, 3, (2, 2), (1, 1, 1, 1), layout=layout, groups=1, dilation=(1, 1))
    assert spelled.mod.script() == plain.mod.script() and spelled.shape == plain.shape == "1x8x9x7x4x3x3x2x1"
    assert spelled.sizes == plain.sizes and not plain.extra and geometry_of(plain).plain
    assert (spelled.flops, spelled.bytes, spelled.out_shape) == (plain.flops, plain.bytes, plain.out_shape)


@pytest.mark.parametrize("kwargs, message", [
    ({"groups": 3}, "groups=3 must divide c=8"),
    ({"groups": 8, "k": 12}, "groups=8 must divide k=12"),
    ({"groups": 0}, "groups must be a positive integer, got 0"),
    ({"dilation": 0}, "dilation must be a positive integer, got 0"),
    ({"dilation": (1, 2, 3)}, r"dilation must be a positive integer or two \(dh, dw\) of them"),
    ({"stride": (2, 0)}, r"stride must be a positive integer or two \(sh, sw\) of them, got \(2, 0\)"),
    ({"pad": (1, -1)}, "pad must be a non-negative integer or two"),
    ({"pad": (1, 1, 1)}, "pad must be a non-negative integer or two"),
    ({"dilation": 4, "pad": 0}, r"kernel r=3 \(dilation 4: 9 wide\) is larger than the padded input \(8 \+ 0 \+ 0\)"),
    ({"pad": (3, 0, 1, 1)}, "padding 3 must be smaller than the kernel r=3"),
])
def test_bad_parameters_are_one_line(kwargs, message):
    sizes = {"n": 1, "c": 8, "h": 8, "w": 8, "k": 8}
    sizes.update({key: kwargs.pop(key) for key in list(kwargs) if key in sizes})
    with pytest.raises(ValueError, match=message) as err:
        conv2d(*sizes.values(), **kwargs)
    assert "\n" not in str(err.value)


def test_torch_arguments():
    assert torch_conv_args(conv2d(1, 8, 8, 8, 8, 3, 3, 2, 1)) == \
        (None, {"stride": 2, "padding": 1, "dilation": 1, "groups": 1})
    assert torch_conv_args(conv2d(1, 8, 8, 8, 8, 1, 7, (2, 1), (0, 3), groups=8, dilation=(1, 2))) == \
        (None, {"stride": (2, 1), "padding": (0, 3), "dilation": (1, 2), "groups": 8})
    # F.pad's order is (left, right, top, bottom); the conv then pads nothing
    assert torch_conv_args(conv2d(1, 8, 8, 8, 8, 3, 3, 2, (0, 1, 2, 0))) == \
        ((2, 0, 0, 1), {"stride": 2, "padding": 0, "dilation": 1, "groups": 1})


GROUPED = conv2d(1, 64, 14, 14, 64, groups=32)
FP16 = conv2d(1, 64, 14, 14, 64, stride=(2, 1), layout="NHWC", dtype="float16")
FP16_GROUPED = conv2d(1, 64, 14, 14, 64, groups=2, layout="NHWC", dtype="float16")
#: A layer no family takes: fp16 grouped with one output channel a group (nhwc_grouped_gemm takes 2 or more).
FP16_ONE_A_GROUP = conv2d(1, 64, 14, 14, 32, groups=32, layout="NHWC", dtype="float16")
PLAIN_ONLY = "groups 1, dilation 1, one stride and one padding, not "
#: Each family and a layer beyond what it takes (the depthwise and grouped families and the SIMT implicit GEMMs'
#: geometry: test_conv_depthwise_grouped).
FAMILIES = [(records.NCHW_SPLITK, GROUPED, PLAIN_ONLY + "groups 32"),
            (records.NCHW_GEMM, GROUPED, "groups 1, not groups 32 of 64 input and 64 output channels"),
            (records.NHWC_GEMM, conv2d(1, 64, 14, 14, 64, groups=2, layout="NHWC"),
             "groups 1, not groups 2 of 64 input and 64 output channels"),
            *[(r, conv2d(2, 64, 14, 14, 64, pad=2, dilation=2, layout="HWCN"), PLAIN_ONLY + "dilation 2")
              for r in (records.HWCN_SEED, records.HWCN_HOPPER)],
            *[(r, FP16, PLAIN_ONLY + "stride 2x1 per axis") for r in (records.NHWC_TMA_WS, records.NHWC_1X1_TMA)],
            *[(r, FP16_GROUPED, "groups 1, not groups 2 of 64 input and 64 output channels")
              for r in (records.NHWC_WGMMA, records.NHWC_MMA, records.NHWC_WMMA)],
            (records.NHWC_GROUPED_GEMM, FP16_ONE_A_GROUP, "1 < groups < C and 2 or more output channels a group, "
             "not groups 32 of 64 input and 32 output channels")]


@pytest.mark.parametrize("record, wl, lacks", FAMILIES, ids=[f[0].name for f in FAMILIES])
def test_every_conv_family_refuses_what_it_lacks_in_one_line(record, wl, lacks):
    said = refusal(lambda: record.apply(wl))
    assert said == f"{record.name} does not take conv2d {wl.shape} ({wl.dtype}): takes {lacks}"


def test_rules_spaces_int8_and_winograd_refuse_in_one_line():
    wl = GROUPED
    assert refusal(lambda: rule_records(FP16_ONE_A_GROUP)).startswith(
        "conv rules: no family takes conv2d 1x64x14x14x32x3x3x1x1_g32 (float16 NHWC): it has groups 32; ")
    assert winograd_forms(wl) == [] and winograd_forms(conv2d(1, 64, 14, 14, 64, dilation=(1, 1))) != []
    assert "space='template'" in refusal(lambda: require_nchw_fp32_conv(wl, param="space='template'"))
    assert "has stride 2x1 per axis" in refusal(lambda: require_wgmma_workload(FP16))
    assert refusal(lambda: conv2d_int8(1, 48, 8, 8, 48, groups=2)) == \
        "conv2d_int8 takes a grouped layer whose input and output channels are multiples of 32, or a depthwise one " \
        "(groups = C = K); this layer has groups 2 of 48 input and 48 output channels"
    assert refusal(lambda: conv2d_int8(1, 3, 8, 8, 32, 3, 3, (2, 1), 1, filter_layout="KRS8C4")) == \
        "conv2d_int8 with filter_layout='KRS8C4' takes groups 1, dilation 1, one stride and one padding; this layer " \
        "has stride 2x1 per axis"
    assert refusal(lambda: conv2d_winograd(1, 8, 8, 8, 8, 3, 3, 1, (1, 1, 1, 0))).endswith("padding 1x1x1x0 per side")
    assert conv2d_winograd(1, 8, 8, 8, 8, 3, 3, (1, 1), (1, 1)).shape == conv2d_winograd(1, 8, 8, 8, 8).shape


@pytest.mark.parametrize("argv, message", [
    (["3", "3", "1", "1", "--groups", "3"], "groups=3 must divide c=8"),
    (["3", "3", "1", "1", "--dilation", "2y"], "argument --dilation: '2y' is not an integer or integers joined by 'x'"),
    (["3", "3", "1", "1", "--groups", "2", "--layout", "HWCN"],
     "no family takes conv2d 1x8x8x8x8x3x3x1x1_g2 (float32 HWCN): it has groups 2"),
    (["1", "7", "2x1", "0x3", "--dilation", "2", "--layout", "HWCN"],
     "has dilation 2, stride 2x1 per axis, padding 0x3 per axis"),
    (["3", "3", "1", "1", "--dtype", "int8", "--groups", "2"], "conv2d_int8 takes a grouped layer whose input and "
                                                                  "output channels are multiples of 32"),
])
def test_kernel_cli_takes_groups_dilation_and_per_axis_stride_and_pad(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(kernel.run, "has_cuda_gpu", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        main(["conv2d", "1", "8", "8", "8", "8", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and err.count("\n") == 1, err

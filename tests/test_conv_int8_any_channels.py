"""int8 convolution with input channels that are not a multiple of 32 (the ResNet-50 stem: C = 3): the NC/32HW32
tensors hold ceil(C/32) channel groups whose lanes past C are zero; the shape string and the flops use the real C;
the module matches the numpy reference exactly on llvm; the stem at batch 32 gets an int8 tensor-core kernel that
nvcc compiles, and, with its filter stored (K, R, S8, 4), one that reduces over 8 taps of 4 lanes per k tile; output
channels that are not a multiple of 32 (zero lanes past K); bad channel counts fail in one line."""
import shutil

import numpy as np
import pytest
import tvm

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import nvcc_report
from tirbench.core.errors import refusal
from tirbench.core.machine import cpu_target
from tirbench.bench.choose import Choice, rule_forms, offered
from tirbench.schedules.conv.records import INT8, INT8_WGMMA
from tirbench.schedules.conv.rules import int8_forms, rule_records
from tirbench.workloads.conv2d_int8 import (
    conv2d_int8,
    filter_layout_of,
    kc32rs32_to_kcrs,
    kcrs_to_kc32rs32,
    kcrs_to_krs8c4,
    krs8c4_to_kcrs,
    nchw32_to_nchw,
    nchw_to_nchw32,
)

STEM = (32, 3, 224, 224, 64, 7, 7, 2, 3)
SMALL = [(2, 3, 8, 8, 32, 3, 3, 1, 1), (1, 3, 16, 16, 32, 7, 7, 2, 3)]


def test_padded_layout_conversions_zero_the_lanes_past_c_and_round_trip():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 35, 3, 5), dtype=np.int8)
    x32 = nchw_to_nchw32(x)
    assert x32.shape == (2, 2, 3, 5, 32) and x32[1, 1, 2, 4, 2] == x[1, 34, 2, 4]
    assert not x32[:, 1, ..., 3:].any()
    np.testing.assert_array_equal(nchw32_to_nchw(x32, 35), x)
    wt = rng.integers(-128, 128, (32, 3, 7, 7), dtype=np.int8)
    w32 = kcrs_to_kc32rs32(wt)
    assert w32.shape == (32, 1, 7, 7, 32) and not w32[..., 3:].any()
    np.testing.assert_array_equal(kc32rs32_to_kcrs(w32, 3), wt)


@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
def test_three_channels_use_the_real_c_and_match_the_reference_on_llvm(shape):
    wl = conv2d_int8(*shape, relu=True, residual=False)
    n, c, h, w, k, r, s, stride, pad = shape
    oh = (h + 2 * pad - r) // stride + 1
    assert wl.shape == "x".join(map(str, shape)) and wl.flops == 2 * n * k * oh * oh * c * r * s
    assert [tuple(int(d) for d in p.shape) for p in wl.mod["main"].params][:2] == [(n, 1, h, w, 32), (k, 1, r, s, 32)]
    x, wt, *_ = wl.make_inputs(np.random.default_rng(0))
    assert x[..., :c].any() and not x[..., c:].any() and not wt[..., c:].any()
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)   # exact: tolerance 0


def test_residual_and_channels_past_one_group_match_the_reference_on_llvm():
    wl = conv2d_int8(1, 40, 5, 5, 32, 3, 3, 1, 1, relu=False, residual=True)   # two groups, 24 zero lanes
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)


def test_the_stem_gets_an_int8_kernel_from_the_records_that_nvcc_compiles():
    """The stem's padded reduction is one 32-channel group: of the records' candidates only mma.sync with k tiles of
    32 takes it (the k tiles 64 and 128 do not divide 32), and its kernel compiles without spills."""
    wl = conv2d_int8(*STEM, relu=True, residual=False)
    takers = [(r, c) for r in INT8 for c in r.candidates if refusal(lambda r=r, c=c: r.apply(wl, c)) is None]
    assert [(r.name, c["tile_k"]) for r, c in takers] == [("int8_mma", 32)] * 2
    record, params = takers[0]
    src = build(record.apply(wl, params), tvm.target.Target("nvidia/nvidia-h100", host="llvm"),
                dict(record.pass_config)).mod.imports[0].inspect_source()
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src
    assert "cp.async.ca.shared.global" in src and "nearbyintf" in src   # L1-caching im2col fills, the epilogue
    if shutil.which("nvcc"):
        assert "0 bytes spill stores" in " ".join(nvcc_report(src))


@pytest.mark.parametrize("c", [0, -3])
def test_no_input_channels_fail_in_one_line(c):
    with pytest.raises(ValueError, match="c must be a positive integer") as err:
        conv2d_int8(1, c, 8, 8, 32)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("k, residual", [(48, True), (16, False), (80, True)])
def test_output_channels_past_the_last_group_are_zero_lanes_and_the_module_is_bit_exact_on_llvm(k, residual):
    """Inception's 48 and 80, MobileNetV2's 16: Kg = ceil(K/32) output groups; the lanes past K have zero filters,
    bias and residual and a scale of 1, so the kernel writes zeros there, as the reference and the next layer's
    input expect."""
    wl = conv2d_int8(2, 40, 7, 7, k, 3, 3, 1, 1, residual=residual)
    x, wt, bias, scale, res = wl.make_inputs(np.random.default_rng(0))
    kp = -(-k // 32) * 32
    assert wl.shape == f"2x40x7x7x{k}x3x3x1x1" and wl.out_shape == (2, kp // 32, 7, 7, 32)
    assert wt.shape[0] == bias.shape[0] == scale.shape[0] == kp and wl.flops == 2 * 2 * k * 49 * 40 * 9
    assert not wt[k:].any() and not bias[k:].any() and (scale[k:] == 1).all() and not nchw32_to_nchw(res)[:, k:].any()
    out = wl.reference(x, wt, bias, scale, res)
    assert not nchw32_to_nchw(out)[:, k:].any() and nchw32_to_nchw(out)[:, :k].any()
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), what=wl.shape)


def test_a_krs8c4_filter_packs_taps_in_eights_and_lanes_in_fours_and_its_module_is_bit_exact_on_llvm():
    wt = np.random.default_rng(0).integers(-128, 128, (32, 3, 7, 7), dtype=np.int8)
    packed = kcrs_to_krs8c4(wt)
    assert packed.shape == (32, 7, 8, 4) and packed[5, 2, 6, 1] == wt[5, 1, 2, 6]
    assert not packed[:, :, 7:].any() and not packed[..., 3:].any()   # the 8th tap and the 4th lane are zero
    np.testing.assert_array_equal(krs8c4_to_kcrs(packed, 3, 7), wt)
    for shape in SMALL + [(2, 4, 9, 7, 32, 3, 3, 1, 1)]:
        wl = conv2d_int8(*shape, residual=True, filter_layout="KRS8C4")
        assert filter_layout_of(wl.mod) == "KRS8C4" and wl.flops == conv2d_int8(*shape).flops
        run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)   # exact: tolerance 0


def test_the_stems_krs8c4_form_reduces_a_kernel_row_per_k_tile_with_4_byte_zero_filling_copies():
    """GEMM_K = 7 rows x 8 taps x 4 lanes = 224 (the NC/32HW32 filter: 49 taps x 32 lanes = 1568): the im2col fill
    copies the 4 first lanes of each tap's pixel with a predicated cp.async (4 bytes always cache in L1)."""
    wl = conv2d_int8(*STEM, relu=True, residual=False)
    (form,) = int8_forms(wl)
    assert filter_layout_of(form.mod) == "KRS8C4" and form.shape == wl.shape
    (record,) = rule_records(form)
    assert record.name == "int8_mma" and record.candidates
    params = record.candidates[0]
    src = build(record.apply(form, params), tvm.target.Target("nvidia/nvidia-h100", host="llvm"),
                dict(record.pass_config)).mod.imports[0].inspect_source()
    x_copies = [line for line in src.splitlines() if "X_ptr," in line and "cp_async" in line]
    assert x_copies and all("pred_ca_4" in line for line in x_copies)
    assert "cp.async.cg.shared.global" in src and "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src
    if shutil.which("nvcc"):
        assert "0 bytes spill stores" in " ".join(nvcc_report(src))
    extra = rule_forms(wl)[-1][2]
    assert extra == {"filter_layout": "KRS8C4"}
    found, narrowed, got = offered(wl, Choice("int8_mma", {**extra, **params}, 1.0))
    assert found is rule_forms(wl)[-1][0] and got == dict(params) and narrowed.candidates == (dict(params),)


def test_krs8c4_needs_at_most_four_channels_and_the_mma_kernel_in_one_line():
    with pytest.raises(ValueError, match="filter_layout='KRS8C4' holds at most 4 input channels, got c=8") as err:
        conv2d_int8(1, 8, 8, 8, 32, filter_layout="KRS8C4")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="takes conv2d_int8_mma") as err:
        INT8_WGMMA.apply(conv2d_int8(*SMALL[0], filter_layout="KRS8C4"))
    assert "\n" not in str(err.value)
    assert int8_forms(conv2d_int8(2, 8, 8, 8, 32)) == []   # 5 to 127 channels: no packed form
    assert int8_forms(conv2d_int8(2, 3, 8, 8, 32, filter_layout="KRS8C4")) == []   # packed already

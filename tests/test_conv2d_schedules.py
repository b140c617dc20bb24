"""Convolution: the workload is right on llvm in every layout; the hand schedules compile for sm_90a and show their
constructs; the split-K space samples valid kernels; bad input is a one-line ValueError.

CUDA kernels cannot run here: the workload's numerics are checked on llvm, the scheduled kernels only compile (the
notebook verifies each against the reference on the GPU before timing it)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.bench.harness import run_checked
from tirbench.core.cuda_source import device_source, kernel_only, nvcc_report
from tirbench.core.errors import refusal
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.schedules.conv.direct import (
    conv2d_hwcn_classic,
    conv2d_hwcn_implicit_gemm,
    conv2d_nchw_splitk,
    conv2d_nchw_splitk_space,
)
from tirbench.schedules.conv.records import HWCN_HOPPER, HWCN_SEED, NCHW_SPLITK
from tirbench.workloads import conv2d
from tirbench.workloads.conv2d import conv2d_reference, filter_from_kcrs, from_nchw, to_nchw

BIG = conv2d(256, 256, 14, 14, 512, layout="HWCN")   # the classic layer: 118.4 GFLOP
LAST = conv2d(1, 512, 7, 7, 512)                      # ResNet-50's last 3x3 layer, batch 1


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWCN"])
@pytest.mark.parametrize("shape", [(2, 3, 9, 7, 4, 3, 3, 1, 1), (1, 4, 11, 11, 5, 3, 3, 2, 1),
                                   (2, 5, 8, 8, 6, 1, 1, 1, 0), (1, 3, 15, 15, 4, 7, 7, 2, 3)])
def test_workload_matches_reference_on_llvm(layout, shape):
    wl = conv2d(*shape, layout=layout)
    run_checked(wl, tvm.compile(wl.mod, target=cpu_target()), tvm.cpu(0))


def test_counts_and_shape_string():
    assert BIG.shape == "256x256x14x14x512x3x3x1x1" and BIG.flops == 118_380_036_096
    assert BIG.out_shape == (14, 14, 512, 256) and BIG.layout == "HWCN"
    stem = conv2d(1, 3, 224, 224, 64, 7, 7, 2, 3)
    assert stem.out_shape == (1, 64, 112, 112) and stem.flops == 2 * 64 * 112 * 112 * 3 * 49
    assert stem.bytes == (3 * 224 * 224 + 64 * 3 * 49) * 4 + 64 * 112 * 112 * 4


def test_reference_is_a_direct_convolution(rng):
    x, w = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    direct = np.zeros((2, 4, 3, 3))
    for yy in range(3):
        for xx in range(3):
            direct[:, :, yy, xx] = np.einsum("ncrs,kcrs->nk", xp[:, :, 2 * yy:2 * yy + 3, 2 * xx:2 * xx + 3], w)
    np.testing.assert_allclose(conv2d_reference(x, w, stride=2, pad=1), direct, rtol=1e-12)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWCN"])
def test_layout_conversions_round_trip(layout, rng):
    x = rng.standard_normal((2, 3, 4, 5))
    np.testing.assert_array_equal(to_nchw(from_nchw(x, layout), layout), x)
    assert filter_from_kcrs(rng.standard_normal((4, 3, 2, 1)), layout).flags.c_contiguous


@pytest.mark.parametrize("args, kwargs, message", [
    ((1, 64, 56, 56, 0), {}, "k must be a positive integer, got 0"),
    ((1, -3, 56, 56, 64), {}, "c must be a positive integer, got -3"),
    ((1, 64, 56, 56, 64, 3, 3, 0, 1), {}, "stride must be a positive integer"),
    ((1, 64, 56, 56, 64, 3, 3, 1, -1), {}, "pad must be a non-negative integer"),
    ((1, 64, 56, 56, 64, 3, 3, 1, 3), {}, "pad=3 must be smaller than the kernel r=3"),
    ((1, 3, 4, 4, 8, 7, 7, 1, 1), {}, "kernel r=7 is larger than the padded input"),
    ((1, 8, 8, 8, 8), {"layout": "CHWN"}, "unknown layout 'CHWN'"),
    ((1, 8, 8, 8, 8), {"dtype": "int8"}, "unsupported dtype 'int8'"),
    ((1, 8, "8", 8, 8), {}, "h must be a positive integer, got '8'"),
])
def test_workload_rejects_bad_input_in_one_line(args, kwargs, message):
    with pytest.raises(ValueError, match=message) as err:
        conv2d(*args, **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("record", [HWCN_SEED, HWCN_HOPPER], ids=lambda r: r.name)
def test_hwcn_records_compile_for_sm90a_without_spills(record):
    """The two rungs notebook 04 times (``sweep(..., defaults_only=True)``): each record's defaults, built with its
    pass config."""
    with tvm.transform.PassContext(config=record.pass_config):
        src = device_source(record.apply(BIG))
    kernel = kernel_only(src)
    if record is HWCN_SEED:   # 8x8 threads, 2x2 virtual threads of 4x4: 64 accumulators; float4 fetches
        assert "__launch_bounds__(64)" in kernel and "float Y_local_ptr[64]" in kernel and "float4" in kernel
    else:                     # the GEMM v5 nest: cp.async pipeline, the padding as a zero-filling predicate
        assert "__launch_bounds__(256)" in kernel and "cp_async_legacy_pred" in kernel
    if shutil.which("nvcc"):
        assert all("0 bytes spill stores" in line for line in nvcc_report(src) if "spill" in line)


def test_classic_schedule_is_the_tutorials_loop_nest():
    """Block z = pixel, y/x = 64-channel/64-image tiles; 8 input channels per shared-memory step, per tap."""
    kernel = kernel_only(device_source(conv2d_hwcn_classic(s_tir.Schedule(BIG.mod))))
    for loop in ("u2_0 < 32", "u0 < 3", "u1 < 3", "u2_1 < 8"):
        assert loop in kernel
    assert "blockIdx.z" in kernel and "W_shared_ptr[512]" in kernel and "Xp_shared_ptr[512]" in kernel


def test_implicit_gemm_reaches_the_gemm_nest():
    """9 taps x 256 channels / 16 per tile = 144 k tiles, 3-stage pipeline: 142 in the main loop."""
    sch = conv2d_hwcn_implicit_gemm(s_tir.Schedule(BIG.mod))
    assert "simt_nest" not in str(sch.trace)   # a trace of primitives, not of helper names
    with tvm.transform.PassContext(config=HWCN_HOPPER.pass_config):
        assert "u0_u1_u2_0_fused < 142" in kernel_only(device_source(sch))


@pytest.mark.parametrize("helper, params, message", [
    (conv2d_hwcn_implicit_gemm, {"block_tile": (96, 128)}, "block_tile\\[0\\]=96 does not divide k \\(output channels\\)=512"),
    (conv2d_hwcn_implicit_gemm, {"tile_k": 48}, "tile_k=48 does not divide c \\(input channels\\)=256"),
    (conv2d_hwcn_classic, {"threads": 64}, "threads\\*threads=4096 threads per block"),
    (conv2d_hwcn_classic, {"step": 12}, "step=12 does not divide c"),
])
def test_hwcn_helpers_reject_bad_tiles_in_one_line(helper, params, message):
    with pytest.raises(ValueError, match=message):
        helper(s_tir.Schedule(BIG.mod), **params)


def test_helpers_reject_the_wrong_layout():
    with pytest.raises(ValueError, match="needs an HWCN convolution"):
        conv2d_hwcn_classic(s_tir.Schedule(LAST.mod))
    with pytest.raises(ValueError, match="needs an NCHW convolution"):
        conv2d_nchw_splitk(s_tir.Schedule(BIG.mod))


def test_records_take_only_their_layout_in_one_line():
    """A record says why it does not take a workload before scheduling anything (``sweep`` shows it as skipped);
    ``apply`` refuses it in one line naming the record and the workload."""
    assert HWCN_SEED.accepts(BIG) is None and HWCN_HOPPER.accepts(BIG) is None and NCHW_SPLITK.accepts(LAST) is None
    assert "HWCN" in HWCN_SEED.accepts(LAST) and "NCHW" in NCHW_SPLITK.accepts(BIG)
    assert "float32" in HWCN_HOPPER.accepts(conv2d(8, 8, 8, 8, 8, layout="HWCN", dtype="float16"))
    message = refusal(lambda: HWCN_SEED.apply(LAST))
    assert message.startswith("hwcn_seed does not take conv2d 1x512x7x7x512x3x3x1x1") and "\n" not in message
    assert refusal(lambda: HWCN_SEED.apply(BIG)) is None


def test_splitk_writes_partial_sums_then_adds_them():
    sch = conv2d_nchw_splitk(s_tir.Schedule(LAST.mod), split=16, block_k=16, thread_k=2, block_pixels=(7, 7), step=8)
    src = kernel_only(device_source(sch))
    assert src.count("__global__") == 2 and "Y_rf" in src   # the partial sums kernel and the sum of 16 slices
    with pytest.raises(ValueError, match="block_pixels\\[0\\]=4 does not divide oh \\(output rows\\)=7"):
        conv2d_nchw_splitk(s_tir.Schedule(LAST.mod), block_pixels=(4, 7))
    with pytest.raises(ValueError, match="split=3 does not divide c \\(input channels\\)=512"):
        conv2d_nchw_splitk(s_tir.Schedule(LAST.mod), split=3)


def test_every_batch1_layer_has_a_splitk_candidate():
    layers = [(1, 64, 56, 56, 64, 3, 3, 1, 1), (1, 128, 28, 28, 128, 3, 3, 1, 1), (1, 256, 14, 14, 256, 3, 3, 1, 1),
              (1, 512, 7, 7, 512, 3, 3, 1, 1), (1, 256, 56, 56, 64, 1, 1, 1, 0), (1, 3, 224, 224, 64, 7, 7, 2, 3)]
    for shape in layers:
        wl = conv2d(*shape)
        fits = sum(refusal(lambda: NCHW_SPLITK.apply(wl, cand)) is None for cand in NCHW_SPLITK.candidates)
        assert fits >= 2, shape
    assert NCHW_SPLITK.candidates[0] == NCHW_SPLITK.defaults   # the schedule notebook 05 shows is the first tried


def test_sweep_candidates_are_helper_parameters():
    """Every candidate overrides only parameters its helper has, and every hopper tile fits the big layer."""
    assert all(cand.keys() <= {"block_tile", "warp_tile", "thread_tile", "tile_k", "stages", "raster", "prefetch",
                               "columns_outer"} for cand in HWCN_HOPPER.candidates)
    assert all(cand.keys() <= NCHW_SPLITK.defaults.keys() for cand in NCHW_SPLITK.candidates)
    assert all(refusal(lambda: HWCN_HOPPER.apply(BIG, cand)) is None for cand in HWCN_HOPPER.candidates)


def test_splitk_space_samples_valid_kernels():
    """Sampled split-K kernels: most pass MetaSchedule's CUDA postprocessors (VerifyGPUCode among them), and those
    compile with two kernels; different seeds give different tilings."""
    decisions, passed = set(), 0
    for seed in range(1, 13):
        sch = conv2d_nchw_splitk_space(s_tir.Schedule(LAST.mod, seed=seed))
        decisions.add(str(list(sch.trace.decisions.values())))
        posts = ms.postproc.Postproc.create("cuda")
        for post in posts:
            post._initialize_with_tune_context(ms.TuneContext(mod=LAST.mod, target=cuda_target()))
        if all(post.apply(sch) for post in posts):
            passed += 1
            if passed <= 2:
                assert kernel_only(device_source(sch)).count("__global__") == 2
    assert len(decisions) >= 10 and passed >= 6


def test_splitk_space_traces_replay_with_other_decisions():
    """The evolutionary search replays a trace with mutated decisions: the loop counts the trace fetches must not
    depend on the sampled tiles (a unit tile once dropped a loop and broke every replay: "6 vs. 5" outputs)."""
    for seed in range(1, 9):
        trace = conv2d_nchw_splitk_space(s_tir.Schedule(LAST.mod, seed=seed)).trace
        other = conv2d_nchw_splitk_space(s_tir.Schedule(LAST.mod, seed=seed + 100)).trace
        for (inst, _), decision in zip(trace.decisions.items(), other.decisions.values()):
            trace = trace.with_decision(inst, decision, remove_postproc=True)
        trace.apply_to_schedule(s_tir.Schedule(LAST.mod), remove_postproc=True)

"""int8 convolution (NC/32HW32): layout conversions, the requantising epilogue on edge values, the fused module on
llvm, the swizzled shared layout's bank behaviour, the implicit GEMM's CUDA (ldmatrix, mma s8, zero-fill cp.async),
bad inputs."""
import shutil

import numpy as np
import pytest
import tvm
from tvm import s_tir

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.machine import cpu_target
from tirbench.schedules.conv.int8 import conv2d_int8_mma, conv2d_int8_wgmma
from tirbench.schedules.conv.records import CONV_TC_CONFIG
from tirbench.schedules.intrinsics import mma_int8
from tirbench.workloads.conv2d_int8 import (
    conv2d_int8,
    kc32rs32_to_kcrs,
    filter_layout_of,
    kcrs_to_kc32rs32,
    kcrs_to_krsc,
    krsc_to_kcrs,
    nchw32_to_nchw,
    nchw_to_nchw32,
    requantize,
)

H100 = tvm.target.Target("nvidia/nvidia-h100", host="llvm")


def test_layout_conversions_round_trip():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 64, 3, 5), dtype=np.int8)
    x32 = nchw_to_nchw32(x)
    assert x32.shape == (2, 2, 3, 5, 32) and x32[1, 1, 2, 4, 7] == x[1, 32 + 7, 2, 4]
    np.testing.assert_array_equal(nchw32_to_nchw(x32), x)
    wt = rng.integers(-128, 128, (32, 64, 3, 3), dtype=np.int8)
    w32 = kcrs_to_kc32rs32(wt)
    assert w32.shape == (32, 2, 3, 3, 32) and w32[5, 1, 2, 0, 3] == wt[5, 35, 2, 0]
    np.testing.assert_array_equal(kc32rs32_to_kcrs(w32), wt)


def test_requantize_rounds_half_to_even_and_saturates():
    acc = np.array([1, 3, 5, -1, -3, 300, -300, 0], dtype=np.int64).reshape(8, 1)   # 8 values of one channel
    out = requantize(acc, np.zeros(1, np.int32), np.array([0.5], np.float32), relu=False)
    # 0.5, 1.5, 2.5, -0.5, -1.5 -> 0, 2, 2, -0, -2 (ties to even); 150 -> 127, -150 -> -128 (saturation)
    assert out.ravel().tolist() == [0, 2, 2, 0, -2, 127, -128, 0]
    relu = requantize(acc, np.zeros(1, np.int32), np.array([0.5], np.float32), relu=True)
    assert relu.ravel().tolist() == [0, 2, 2, 0, 0, 127, 0, 0]
    res = requantize(acc, np.full(1, 2, np.int32), np.array([0.5], np.float32), np.full((8, 1), 120, np.int8),
                     relu=False)   # (acc + 2) / 2 rounded, + 120, saturated
    assert res.ravel().tolist() == [122, 122, 124, 120, 120, 127, -29, 121]


def _one_hot_case(values: np.ndarray, scale: float, *, relu: bool, residual: bool) -> tuple:
    """A 1x1 conv whose filter is the identity: acc = the input, so the epilogue sees chosen accumulators."""
    n, c = 1, 32
    wl = conv2d_int8(n, c, 1, values.size // c, c, 1, 1, 1, 0, relu=relu, residual=residual)
    x = values.reshape(1, c, 1, -1).astype(np.int8)
    wt = np.eye(c, dtype=np.int8).reshape(c, c, 1, 1)
    inputs = [nchw_to_nchw32(x), kcrs_to_kc32rs32(wt), np.zeros(c, np.int32), np.full(c, scale, np.float32),
              np.full(wl.out_shape, 100, np.int8)]
    return wl, inputs


@pytest.mark.parametrize("relu, residual", [(False, False), (True, True)])
def test_fused_epilogue_on_llvm_matches_the_reference_on_edge_values(relu, residual):
    # acc = x in [-128, 127], scale 0.5: every odd x is a tie; with the residual 100, large values saturate at 127
    values = np.arange(-128, 128).astype(np.int64)
    wl, inputs = _one_hot_case(values, 0.5, relu=relu, residual=residual)
    ex = build(wl.mod, cpu_target())
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(a, dev) for a in inputs] + [tvm.runtime.tensor(np.zeros(wl.out_shape, np.int8), dev)]
    ex["main"](*args)
    out = args[-1].numpy()
    np.testing.assert_array_equal(out, wl.reference(*inputs))
    got = nchw32_to_nchw(out).ravel()
    expect = np.clip(np.maximum(np.rint(values * 0.5) + (100 if residual else 0), 0 if relu else -128), -128, 127)
    np.testing.assert_array_equal(got, expect.astype(np.int8))


def test_random_int8_conv_is_bit_exact_on_llvm():
    for shape, kw in (((2, 32, 6, 6, 64, 3, 3, 1, 1), {}), ((1, 64, 7, 5, 32, 3, 3, 2, 1), {"residual": True})):
        wl = conv2d_int8(*shape, **kw)
        run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)


def test_a_krsc_filter_round_trips_and_its_module_is_bit_exact_on_llvm():
    wt = np.random.default_rng(0).integers(-128, 128, (32, 40, 3, 3), dtype=np.int8)
    packed = kcrs_to_krsc(wt)   # 40 channels -> 2 groups of 32, the last 24 lanes zero
    assert packed.shape == (32, 3, 3, 64) and packed[5, 2, 0, 35] == wt[5, 35, 2, 0] and not packed[..., 40:].any()
    np.testing.assert_array_equal(krsc_to_kcrs(packed, 40), wt)
    wl = conv2d_int8(2, 40, 6, 5, 32, 3, 3, 2, 1, residual=True, filter_layout="KRSC")
    assert filter_layout_of(wl.mod) == "KRSC" and filter_layout_of(conv2d_int8(2, 40, 6, 5, 32).mod) == "KCRS32"
    assert wl.make_inputs(np.random.default_rng(0))[1].shape == (32, 3, 3, 64)
    assert wl.flops == conv2d_int8(2, 40, 6, 5, 32, 3, 3, 2, 1).flops
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)


def _banks(byte_offsets):
    """The 4-byte banks a phase of 16-byte accesses touches, with repeats (32 banks of 4 bytes)."""
    return sorted((off // 4 + b) % 32 for off in byte_offsets for b in range(4))


@pytest.mark.parametrize("operand", ["A", "B"])
def test_swizzled_ldmatrix_phases_are_conflict_free(operand):
    # ldmatrix.x4: each 8 x 16-byte matrix (8 lanes' row addresses) is one shared-memory phase of 128 bytes
    def offset(row, chunk, swizzled):  # byte offset in a 32-byte-row panel
        return 32 * row + 16 * ((chunk ^ (row // 4) % 2) if swizzled else chunk)

    for swizzled in (True, False):
        conflict_free = True
        for phase in range(4):
            lanes = range(8 * phase, 8 * phase + 8)
            pieces = [mma_int8.lane_piece(operand, tx) for tx in lanes]
            banks = _banks(offset(int(r), int(c), swizzled) for r, c in pieces)
            conflict_free &= banks == list(range(32))
        assert conflict_free == swizzled   # unswizzled: rows r and r + 4 share banks (2-way conflicts)


def test_swizzle_is_a_permutation_of_each_panel():
    rows, tile_k = 16, 64
    places = {tuple(int(v) for v in mma_int8.swizzle(tvm.tirx.const(r), tvm.tirx.const(k)))
              for r in range(rows) for k in range(tile_k)}
    assert len(places) == rows * tile_k


def test_int8_mma_conv_uses_ldmatrix_mma_s8_and_zero_filling_copies():
    wl = conv2d_int8(4, 64, 8, 8, 128, residual=True)   # GEMM 256 x 128 x 576, padded border
    sch = conv2d_int8_mma(s_tir.Schedule(wl.mod), block_tile=(128, 128), warp_tile=(64, 64), tile_k=64)
    src = build(sch, H100, CONV_TC_CONFIG).mod.imports[0].inspect_source()
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in src
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in src
    assert "cp_async_legacy_pred_cg_16" in src     # the padded im2col fill: 16-byte zero-filling cp.async
    assert "make_int4((signed char)" not in src      # no int8x16 vector select (TVM prints it invalid)
    assert "nearbyintf" in src                       # the epilogue's rounding, in the kernel


@pytest.mark.parametrize("kw", [dict(block_tile=(128, 128), tile_k=128, stages=3, overlap=True),
                                dict(block_tile=(128, 64), tile_k=64, layout="interleaved")])
def test_int8_wgmma_conv_uses_integer_wgmma(kw):
    wl = conv2d_int8(4, 128, 8, 8, 128, residual=True)
    src = build(conv2d_int8_wgmma(s_tir.Schedule(wl.mod), **kw), H100, CONV_TC_CONFIG).mod.imports[0].inspect_source()
    assert "wgmma.mma_async.sync.aligned.m64n" in src and ".s32.s8.s8" in src
    assert "cp_async_legacy_pred_cg_16" in src and "nearbyintf" in src


def test_int8_wgmma_n256_beyond_tvms_table_compiles():
    """m64n256k32 s8: in the ISA's shape table, not in TVM 0.27's PTX table (``allow_integer_n256`` adds it)."""
    wl = conv2d_int8(2, 128, 8, 8, 256, residual=True)
    sch = conv2d_int8_wgmma(s_tir.Schedule(wl.mod), block_tile=(128, 256), tile_k=128, stages=3, overlap=True)
    src = build(sch, H100, CONV_TC_CONFIG).mod.imports[0].inspect_source()
    assert "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8" in src
    if shutil.which("nvcc"):
        assert "0 bytes spill stores" in " ".join(nvcc_report(src))  # ptxas takes the shape


@pytest.mark.parametrize("make, message", [
    (lambda: conv2d_int8_wgmma(s_tir.Schedule(conv2d_int8(2, 128, 8, 8, 512).mod), block_tile=(128, 512)),
     "at most N=256"),
    (lambda: conv2d_int8_wgmma(s_tir.Schedule(conv2d_int8(2, 128, 8, 8, 128).mod), tile_k=64),
     "tile_k must be 128"),
    (lambda: conv2d_int8(1, 32, 4, 4, -32), "positive integer"),
    (lambda: conv2d_int8(1, 32, 4, 4, 32, filter_layout="CKRS"), "filter_layout='CKRS': expected one of"),
    (lambda: conv2d_int8_mma(s_tir.Schedule(conv2d_int8(1, 32, 4, 4, 32).mod), block_tile=(16, 32),
                             warp_tile=(16, 32), tile_k=64), "channel_block"),
    (lambda: conv2d_int8(1, 32, 4, 4, 32).reference(*_one_hot_inputs_with_scale(-1.0)), "scale must be positive"),
    (lambda: conv2d_int8_mma(s_tir.Schedule(conv2d_int8(2, 64, 8, 8, 64).mod), block_tile=(32, 32)),   # warps: 0
     r"warp_tile\[0\]=64 does not divide block_tile\[0\]=32"),
    (lambda: conv2d_int8_mma(s_tir.Schedule(conv2d_int8(2, 64, 8, 8, 64).mod), block_tile=(96, 64)),
     r"warp_tile\[0\]=64 does not divide block_tile\[0\]=96"),
])
def test_bad_inputs_fail_in_one_line(make, message):
    with pytest.raises(ValueError, match=message) as err:
        make()
    assert "\n" not in str(err.value)


def _one_hot_inputs_with_scale(scale: float) -> list:
    wl = conv2d_int8(1, 32, 4, 4, 32)
    inputs = wl.make_inputs(np.random.default_rng(0))
    inputs[3] = np.full(32, scale, np.float32)
    return inputs


def test_int8_epilogue_moves_16_bytes_per_thread_and_keeps_registers():
    """The epilogue loads the residual and stores Y 16 bytes at a time, and its register copies stay a thread's 16
    values (at 56x56 TVM once kept the whole tensor per thread: a 1.6 MB stack frame)."""
    from tirbench.core.cuda_source import nvcc_report

    wl = conv2d_int8(2, 64, 56, 56, 64, relu=True, residual=True)
    sch = conv2d_int8_mma(s_tir.Schedule(wl.mod), block_tile=(32, 64), warp_tile=(16, 32), tile_k=64, stages=4)
    with tvm.transform.PassContext(config=CONV_TC_CONFIG):
        src = device_source(sch, H100)
    assert "*(int4*)(Y_ptr" in src and "*(int4*)(Res_ptr" in src
    report = " ".join(nvcc_report(src))
    assert "0 bytes stack frame" in report, report


def test_int8_epilogue_stores_only_the_real_pixels_and_channels_of_a_padded_tile():
    """12 pixels and 96 channels in a 32 x 128 tile: every 16-byte store of Y is predicated (it once wrote past Y for
    the padded pixels, and the idle threads of a pixel over the next pass's pixels)."""
    wl = conv2d_int8(1, 128, 7, 5, 96, 3, 3, 2, 1, relu=True, residual=True)
    sch = conv2d_int8_mma(s_tir.Schedule(wl.mod), block_tile=(32, 128), warp_tile=(16, 64), tile_k=64, stages=3)
    with tvm.transform.PassContext(config=CONV_TC_CONFIG):
        lines = device_source(sch, H100).splitlines()
    stores = [i for i, line in enumerate(lines) if line.lstrip().startswith("*(int4*)(Y_ptr")]
    assert stores and all(lines[i - 1].lstrip().startswith("if (") for i in stores), [lines[i - 1] for i in stores]


def test_int8_epilogue_tile_that_does_not_fit_fails_in_one_line():
    wl = conv2d_int8(2, 128, 8, 8, 160)   # bn = 80: 5 threads per pixel do not divide 128 threads
    with pytest.raises(ValueError, match="int8 epilogue") as err:
        conv2d_int8_wgmma(s_tir.Schedule(wl.mod), block_tile=(64, 80))
    assert "\n" not in str(err.value)


def test_overlapped_wgmma_loop_keeps_one_wait_and_barrier_before_each_tile():
    """The software pipeline's own wait + barrier before a k tile is dropped where the overlapped tile waits
    (more strictly) and synchronises right after it: two barriers per k tile, not three."""
    import re

    wl = conv2d_int8(2, 128, 8, 8, 128, relu=True, residual=True)
    sch = conv2d_int8_wgmma(s_tir.Schedule(wl.mod), block_tile=(64, 128), tile_k=128, stages=3, overlap=True)
    with tvm.transform.PassContext(config=CONV_TC_CONFIG):
        src = device_source(sch, H100)
    loop = src[src.index("for (int ax2_0"):]
    loop = loop[:loop.index("\n  }\n")]
    assert len(re.findall(r"__syncthreads\(\);|tvm_builtin_cuda_cta_sync\(\);", loop)) == 2, loop[:2000]
    assert "wait_group_1();\n    tvm_builtin_cuda_cta_sync();" in loop


def test_l1_fill_changes_only_the_im2col_copies_to_cp_async_ca():
    """``l1_fill=True``: the input's fills become the suite's ``.ca`` copy with the very same operands (the kernel is
    otherwise identical), the filter's stay TVM's ``.cg``, and nvcc accepts it."""
    from tirbench.core.cuda_source import nvcc_report

    wl = conv2d_int8(2, 64, 16, 16, 64, relu=True, residual=True)
    kernels = {}
    for on in (False, True):
        sch = conv2d_int8_wgmma(s_tir.Schedule(wl.mod), block_tile=(128, 64), tile_k=64, stages=4,
                                layout="interleaved", l1_fill=on)
        with tvm.transform.PassContext(config=CONV_TC_CONFIG):
            kernels[on] = device_source(sch, H100)
    plain, cached = kernels[False], kernels[True]
    assert "cp.async.ca.shared.global [%0], [%1], 16" in cached and "cp.async.ca" not in plain
    calls = cached.count("tirbench_cp_async_ca_16(") - 1   # minus the definition
    assert calls > 0 and calls == plain.count("ptx_cp_async_legacy_pred_cg_16_1_1(") - 1
    body = cached[cached.index('extern "C" __global__'):].replace("tirbench_cp_async_ca_16(",
                                                                   "ptx_cp_async_legacy_pred_cg_16_1_1(")
    assert body.split('extern "C" __global__')[-1] == plain.split('extern "C" __global__')[-1]
    assert "0 bytes stack frame" in " ".join(nvcc_report(cached))


def test_int8_records_refuse_a_layer_no_k_tile_divides_in_one_line():
    """Notebook 07 sweeps INT8 on each layer and refuses, in its first cell, a layer no candidate takes: 64 channels
    take only the interleaved wgmma tiles (k tile 64) and mma.sync; 32 channels (the stem's 3, padded) only the
    mma.sync candidate with k tiles of 32, the others in one line."""
    from tirbench.core.errors import refusal
    from tirbench.schedules.conv.records import INT8, INT8_WGMMA

    def takers(wl):
        return [(r.name, c) for r in INT8 for c in r.candidates if refusal(lambda: r.apply(wl, c)) is None]

    c64 = takers(conv2d_int8(2, 64, 8, 8, 64))
    assert {name for name, _ in c64} == {"int8_wgmma", "int8_mma"}
    assert all(c.get("layout") == "interleaved" for name, c in c64 if name == "int8_wgmma")
    c32 = takers(conv2d_int8(2, 32, 8, 8, 64))
    assert c32 and all(name == "int8_mma" and c["tile_k"] == 32 for name, c in c32)
    reason = refusal(lambda: INT8_WGMMA.apply(conv2d_int8(2, 32, 8, 8, 64)))
    assert "does not divide c (input channels)=32" in reason and "\n" not in reason


def test_int8_n256_tiles_build_in_the_sweeps_worker_processes():
    """``build_all``'s workers generate the int8 128x256 wgmma kernel (N = 256 is added to TVM's PTX table per process:
    the GPU run of 2026-11-24 rejected these candidates with 'invalid codegen modifier m64n256k32')."""
    from tirbench.bench.harness import build_all
    from tirbench.schedules.conv.records import INT8_WGMMA

    wl = conv2d_int8(256, 256, 14, 14, 512, relu=True, residual=True)
    built = build_all([INT8_WGMMA.apply(wl, INT8_WGMMA.candidates[0])],
                      tvm.target.Target("nvidia/nvidia-h100", host="llvm"), dict(INT8_WGMMA.pass_config))
    # without a CUDA runtime (CI) the module is built and then cannot be loaded: only codegen must not fail
    assert "invalid codegen modifier" not in str(built[0]), built[0]

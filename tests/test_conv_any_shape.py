"""The implicit-GEMM convolution helpers at shapes their tiles do not divide (GEMM M = N*OH*OW, N = output
channels): the conv block is padded to the tiles after its reindex to GEMM shape, the pad folds into the im2col
fills (zero-filling predicated cp.async) and the crop into the epilogue, which stores only real pixels and channels.
Checked here: they build for sm_90a (and nvcc takes the CUDA), every access of X, W, Y (and the int8 epilogue's
bias, scale and residual) is proven in bounds under the kernel's predicates, and divisible shapes are not padded."""
import shutil

import pytest
import tvm
from test_any_shape import unproven_accesses, unproven_without_guards
from tvm import s_tir

from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.schedules.conv.records import INT8_MMA, INT8_WGMMA, NHWC_MMA, NHWC_WGMMA
from tirbench.workloads import conv2d, conv2d_int8


def fp16(n, c, h, w, k):
    return conv2d(n, c, h, w, k, 3, 3, 1, 1, layout="NHWC", dtype="float16")


def int8(n, c, h, w, k):
    return conv2d_int8(n, c, h, w, k, residual=True)


#: (record, the tiles overriding its defaults, the workload factory): 128-row tiles against GEMM M = 1568 (batch 32 at
#: 7x7) and 147 (batch 3), 128-column tiles against 96 output channels.
HELPERS = {
    "nhwc_wgmma": (NHWC_WGMMA, dict(block_tile=(128, 128), stages=4), fp16),
    "nhwc_mma": (NHWC_MMA, dict(block_tile=(128, 128), warp_tile=(64, 64)), fp16),
    "int8_wgmma": (INT8_WGMMA, dict(block_tile=(128, 128), stages=3, overlap=True), int8),
    "int8_mma": (INT8_MMA, dict(block_tile=(128, 128), warp_tile=(32, 64), tile_k=64, stages=4), int8),
}
ODD = [(32, 128, 7, 7, 128), (3, 128, 7, 7, 96)]
BUFFERS = ("X", "W", "Y", "Bias", "Scale", "Residual")


def scheduled(name: str, shape: tuple[int, ...]) -> s_tir.Schedule:
    record, params, make = HELPERS[name]
    return record.apply(make(*shape), params)


@pytest.mark.parametrize("shape", ODD, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", HELPERS)
def test_conv_helper_pads_builds_and_stays_in_bounds(name, shape):
    sch = scheduled(name, shape)
    assert "pad_einsum" in str(sch.trace)
    with tvm.transform.PassContext(config=HELPERS[name][0].pass_config):
        src = device_source(sch)
    assert "cp_async_legacy_pred" in src   # the fills stay asynchronous, their padding predicated
    if shutil.which("nvcc"):
        assert any("registers" in line for line in nvcc_report(src))
    missed, checked = unproven_accesses(sch.mod, BUFFERS)
    assert checked >= 3 and not missed, missed[:3]


def test_the_proof_rests_on_the_epilogue_guard():
    """With the ifs dropped, the store of Y past the last pixel is no longer proven in bounds."""
    assert unproven_without_guards(scheduled("nhwc_wgmma", ODD[0]).mod, ("Y",))


@pytest.mark.parametrize("name", HELPERS)
def test_divisible_conv_shapes_are_not_padded(name):
    assert "pad_einsum" not in str(scheduled(name, (2, 128, 8, 8, 128)).trace)   # GEMM M = 128


@pytest.mark.parametrize("shape", [(1, 8, 8, 8, 8, 3, 3, 9, 1), (1, 8, 3, 8, 8, 3, 3, 1, 0), (1, 8, 8, 3, 8, 3, 3, 1, 0)],
                         ids=["1x1 out", "1-row out", "1-column out"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_an_output_of_one_row_or_column_is_refused_in_one_line_by_the_implicit_gemm(shape, layout):
    """TVM's im2col reindex drops a 1-wide output axis and the GEMM view's layout transform then fails inside TVM:
    the implicit GEMM refuses such a layer in one line (NCHW: split-K still takes it)."""
    from tirbench.core.errors import refusal
    from tirbench.schedules.conv.records import NCHW_GEMM, NHWC_GEMM

    record = NCHW_GEMM if layout == "NCHW" else NHWC_GEMM
    wl = conv2d(*shape, layout=layout)
    line = refusal(lambda: record.apply(wl, record.candidates[-1]))
    assert line is not None and "\n" not in line and "pixels under a 3x3 kernel is not taken" in line

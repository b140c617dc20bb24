"""Workloads compute their numpy reference on llvm, and reject bad sizes and dtypes in one line."""
import numpy as np
import pytest
import tvm

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.machine import cpu_target
from tirbench.workloads import conv2d, conv2d_int8, copy, gemm, vector_add, window_sum
from tirbench.workloads.conv2d import from_nchw


@pytest.mark.parametrize("make", [lambda: vector_add(1000), lambda: vector_add(4096, "float16"),
                                  lambda: window_sum(1000, 3), lambda: window_sum(512, 7), lambda: copy(777),
                                  lambda: gemm(33, 40, 70, "float16", out_dtype="float16")])
def test_workload_matches_reference_on_llvm(make):
    wl = make()
    run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=3)


def test_reference_is_the_definition(rng):
    a = rng.standard_normal(20, dtype=np.float32)
    np.testing.assert_allclose(window_sum(16, 5).reference(a), [a[i:i + 5].sum() for i in range(16)], rtol=1e-6)


def test_counts_and_shape():
    wl = window_sum(1024, 3)
    assert (wl.shape, wl.bytes, wl.flops) == ("1024x3", (1026 + 1024) * 4, 2048)
    assert vector_add(2**26).shape == "67108864" and vector_add(8).bytes == 96


@pytest.mark.parametrize("call, message", [
    (lambda: vector_add(0), "n must be a positive integer"),
    (lambda: vector_add(16, "int8"), "unsupported dtype 'int8'"),
    (lambda: window_sum(16, 0), "w must be a positive integer"),
    (lambda: window_sum(16, 3, "float64"), "unsupported dtype 'float64'"),
    (lambda: gemm(16, 16, 16, out_dtype="float16"), "out_dtype='float16' takes float16 inputs, not float32"),
    (lambda: gemm(16, 16, 16, "float16", out_dtype="int8"), "unsupported dtype 'int8'"),
])
def test_bad_input_is_one_clear_line(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("layout, out_shape", [("NCHW", (100000, 512, 14000, 14000)),
                                               ("NHWC", (100000, 14000, 14000, 512)),
                                               ("HWCN", (14000, 14000, 512, 100000))])
def test_a_huge_conv2d_gets_its_shapes_without_allocating(layout, out_shape):
    """Issue #27: the factory allocated an array of the output's size (here 10^20 elements) to learn its shape."""
    wl = conv2d(100000, 256, 14000, 14000, 512, 3, 3, 1, 1, layout=layout)
    assert wl.out_shape == out_shape
    assert wl.buffer_bytes == (100000 * 256 * 14000**2 + 512 * 256 * 9 + 100000 * 512 * 14000**2) * 4


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWCN"])
def test_conv2d_out_shape_is_the_stored_output_shape(layout):
    wl = conv2d(2, 3, 9, 7, 5, 3, 3, 2, 1, layout=layout)
    assert wl.out_shape == from_nchw(np.empty((2, 5, 5, 4)), layout).shape


def test_buffer_bytes_count_every_argument_buffer():
    assert gemm(64, 32, 16, "float16").buffer_bytes == (64 * 16 + 16 * 32) * 2 + 64 * 32 * 4
    # the residual buffer is an argument even when the epilogue ignores it
    assert conv2d_int8(1, 32, 8, 8, 32, residual=False).buffer_bytes == 2 * 8 * 8 * 32 + 32 * 32 * 9 + 32 * 8 + 8 * 8 * 32

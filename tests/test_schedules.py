"""Schedule helpers compile for sm_90a, show what they claim in the CUDA, and reject bad tiles clearly."""
import shutil

import pytest
import tvm
from tvm import s_tir

from tirbench.core.cuda_source import device_source, kernel_only, nvcc_report
from tirbench.schedules.elementwise import bind_threads
from tirbench.schedules.window import window_naive, window_register, window_shared
from tirbench.workloads import copy, vector_add, window_sum

N = 1 << 20


def test_vector_add_split_bind_cuda():
    src = kernel_only(device_source(bind_threads(s_tir.Schedule(vector_add(N).mod), threads=256)))
    assert "__launch_bounds__(256)" in src and "blockIdx.x" in src and "float4" not in src


def test_vectorised_variant_uses_float4():
    src = device_source(bind_threads(s_tir.Schedule(vector_add(N).mod), threads=128, vector=4))
    assert "float4" in src and "__launch_bounds__(128)" in src


def test_copy_block_name_is_B():
    assert "float4" in device_source(bind_threads(s_tir.Schedule(copy(N).mod), block="B", vector=4))


def test_window_shared_stage_appears_in_source():
    src = kernel_only(device_source(window_shared(s_tir.Schedule(window_sum(N, 3).mod), threads=256, per_thread=4)))
    assert "__shared__ alignas(64) float A_shared_ptr[1026];" in src  # 256 * 4 + w - 1
    assert "__syncthreads();" in src


def test_window_naive_and_register_have_no_shared_memory():
    for helper in (window_naive, window_register):
        assert "__shared__" not in device_source(helper(s_tir.Schedule(window_sum(N, 3).mod), threads=128))
    assert "B_local" in device_source(window_register(s_tir.Schedule(window_sum(N, 3).mod)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_accepts_window_shared_without_spills():
    report = nvcc_report(device_source(window_shared(s_tir.Schedule(window_sum(N, 3).mod))))
    assert any("0 bytes spill stores" in line for line in report)
    assert any("4104 bytes smem" in line for line in report)


@pytest.mark.parametrize("helper, params, message", [
    (bind_threads, dict(threads=2048), "threads=2048 threads per block"),
    (bind_threads, dict(threads=0), "threads=0 threads per block"),
    (bind_threads, dict(threads=256, vector=3), "vector=3"),
    (bind_threads, dict(threads=256, vector=8), "vector=8"),  # 32 bytes
    (bind_threads, dict(threads=384), "threads\\*vector=384 does not divide n=1048576"),
])
def test_bind_threads_rejects_bad_parameters(helper, params, message):
    with pytest.raises(ValueError, match=message):
        helper(s_tir.Schedule(vector_add(N).mod), **params)


@pytest.mark.parametrize("helper, params, message", [
    (window_naive, dict(threads=1025), "threads=1025"),
    (window_register, dict(threads=3), "threads=3 does not divide n=1048576"),
    (window_shared, dict(threads=256, per_thread=3), "threads\\*per_thread=768 does not divide"),
    (window_shared, dict(threads=256, per_thread=0), "per_thread must be a positive integer"),
])
def test_window_helpers_reject_bad_parameters(helper, params, message):
    with pytest.raises(ValueError, match=message):
        helper(s_tir.Schedule(window_sum(N, 3).mod), **params)


def test_gpu_schedule_is_still_the_same_computation():
    """The schedule changes loops, never the math: lowered for llvm without thread bindings it still verifies."""
    from tirbench.bench.harness import run_checked
    from tirbench.core.build import build
    from tirbench.core.machine import cpu_target

    wl = window_sum(4096, 3)
    sch = s_tir.Schedule(wl.mod)
    i, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[None, 4, 256])
    tile = sch.cache_read(sch.get_sblock("B"), 0, "shared")
    sch.compute_at(tile, sch.get_loops(sch.get_sblock("B"))[0])
    run_checked(wl, build(sch, cpu_target()), tvm.cpu(0))

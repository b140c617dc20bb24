"""Notebook parameter checks: one ParameterError line naming the parameter, shown by IPython without a traceback."""
import pytest

import time

from tirbench.bench import params
from tirbench.bench.params import (
    GpuMemory,
    ParameterError,
    decimal_bytes,
    gpu_memory,
    narrowing,
    require_fits,
    require_flags,
    require_ints,
    require_strings,
    require_target,
    require_valid,
)
from tirbench.workloads import conv2d, gemm


@pytest.mark.parametrize("check, message", [
    (lambda: require_flags(quick="False"), "quick must be True or False, got 'False'"),
    (lambda: require_ints(repeats="100"), "repeats must be a positive integer, got '100'"),
    (lambda: require_ints(threads=True), "threads must be a positive integer, got True"),
    (lambda: require_ints(sizes_log2=[20, -1]), r"sizes_log2 must be a positive integer \(or a list of them\)"),
    (lambda: require_ints(sizes_log2=[]), r"sizes_log2 must be a positive integer \(or a list of them\), got \[\]"),
    (lambda: require_ints(minimum=0, seed=-1), "seed must be an integer >= 0, got -1"),
    (lambda: require_strings(gpus="H100"), "gpus must be a list of non-empty strings, got 'H100'"),
    (lambda: require_target("cuda -arch=sm_90a"), "target='cuda -arch=sm_90a': Cannot parse target string"),
    (lambda: require_valid("sizes", [[64, 64, 0]], lambda ss: [gemm(*s) for s in ss]),
     r"sizes=\[\[64, 64, 0\]\]: k must be a positive integer, got 0"),
    (lambda: require_valid("ladder_size", [64, 64], lambda s: gemm(*s)), "ladder_size=\\[64, 64\\]: gemm\\(\\) missing"),
    (lambda: require_fits("big_layer", [0, 256, 14, 14, 512], lambda s: conv2d(*s)),
     r"big_layer=\[0, 256, 14, 14, 512\]: n must be a positive integer, got 0"),
    (lambda: require_fits("sizes", [[1024] * 3, [100000] * 3], lambda ss: [gemm(*s) for s in ss],
                          GpuMemory(80 * 10**9, "H100")),
     r"sizes=.*: gemm 100000x100000x100000 needs 120 GB of buffers, more than the 80 GB of the H100$"),
    (lambda: gpu_memory("V100"), "target_gpu='V100': expected one of 'H100', 'H200', 'B200', 'A100'"),
])
def test_bad_parameter_is_one_line_naming_it(check, message):
    with pytest.raises(ParameterError, match=message) as err:
        check()
    assert "\n" not in str(err.value) and err.value._render_traceback_() == [f"ParameterError: {err.value}"]


def test_good_parameters_pass():
    require_flags(quick=False, save=True)
    require_ints(sizes=[[1024, 1024, 1024]], repeats=5)
    require_ints(minimum=0, seed=0)
    require_strings(gpus=[])
    require_target("nvidia/nvidia-h100")
    require_valid("ladder_size", [64, 64, 64], lambda s: gemm(*s))


#: Issue #27: a layer whose output alone has 10^16 elements (the conv2d factory allocated it to learn its shape).
BIG_LAYER = [100000, 256, 14000, 14000, 512, 3, 3, 1, 1]


def test_a_size_beyond_the_gpu_memory_is_refused_quickly_without_allocating():
    start = time.perf_counter()
    with pytest.raises(ParameterError, match=r"^big_layer=\[100000, .*\]: conv2d 100000x256x14000x14000x512x3x3x1x1 "
                       r"needs 60.2 PB of buffers, more than the 80 GB of the H100$"):
        require_fits("big_layer", BIG_LAYER, lambda s: conv2d(*s), GpuMemory(80 * 10**9, "H100"))
    assert time.perf_counter() - start < 10


def test_a_size_that_fits_passes():
    require_fits("sizes", [[4096] * 3, [8192] * 3], lambda ss: [gemm(*s) for s in ss], GpuMemory(80 * 10**9, "H100"))
    require_fits("layer", [256, 256, 14, 14, 512], lambda s: conv2d(*s, dtype="float16"))


def test_gpu_memory_without_a_gpu_is_the_target_gpus_from_the_peak_table(monkeypatch):
    monkeypatch.setattr(params, "has_cuda_gpu", lambda: False)
    assert gpu_memory() == GpuMemory(80 * 10**9, "H100")
    assert gpu_memory("H200") == GpuMemory(141 * 10**9, "H200")


@pytest.mark.parametrize("count, text", [(0, "0 B"), (999, "999 B"), (1000, "1 kB"), (80 * 10**9, "80 GB"),
                                         (1_234_000_000_000, "1.23 TB"), (10**20, "100 EB")])
def test_decimal_bytes(count, text):
    assert decimal_bytes(count) == text


#: Notebook 08's defaults as papermill's inspect_notebook gives them (source text).
DEFAULTS_08 = {"quick": "False", "configs": '["fp32", "fp16", "int8"]', "layers": "[]", "repeats": "50", "seed": "0",
               "target": '"nvidia/nvidia-h100"', "rules_budget_s": "120", "trials_rules": "36", "tune_now": "False",
               "big": "2 ** 10"}


@pytest.mark.parametrize("values, narrowed", [
    ({"configs": ["int8"], "rules_budget_s": 300}, {"configs": (["int8"], ["fp32", "fp16", "int8"])}),
    ({"quick": True}, {"quick": (True, False)}),
    ({"layers": ["s4"], "repeats": 5}, {"layers": (["s4"], [])}),
    ({"big": 1024}, {"big": (1024, "2 ** 10")}),   # a default that is no literal is compared as its text
    ({"configs": ["fp32", "fp16", "int8"], "quick": False}, {}),   # the defaults, given
    ({"repeats": 5, "seed": 1, "target": "nvidia/nvidia-h200", "trials_rules": 8, "tune_now": True}, {}),
    ({"undeclared": 1}, {}),
])
def test_narrowing_names_the_parameters_that_change_what_a_run_measures(values, narrowed):
    assert narrowing(DEFAULTS_08, values) == narrowed

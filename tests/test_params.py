"""Notebook parameter checks: one ParameterError line naming the parameter, shown by IPython without a traceback."""
import pytest

from tirbench.bench.params import (
    ParameterError,
    require_flags,
    require_ints,
    require_strings,
    require_target,
    require_valid,
)
from tirbench.workloads import gemm


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

"""verify_then_time checks before it times: a wrong or incomplete kernel raises and gets no number."""
import numpy as np
import pytest
import tvm
from tvm.script import tirx as T

from tirbench.harness import Timing, verify_then_time
from tirbench.machine import cpu_target
from tirbench.workloads import vector_add


@T.prim_func(s_tir=True)
def subtracts(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    for i in range(1024):
        with T.sblock("C"):
            vi = T.axis.spatial(1024, i)
            C[vi] = A[vi] - B[vi]


@T.prim_func(s_tir=True)
def first_half(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    for i in range(512):
        with T.sblock("C"):
            vi = T.axis.spatial(512, i)
            C[vi] = A[vi] + B[vi]


def test_correct_kernel_is_verified_then_timed():
    wl = vector_add(1 << 16)
    m = verify_then_time(wl, wl.mod, variant="llvm", repeats=5, target=cpu_target())
    assert m.timing.repeats == 5 and 0 < m.timing.p20_ms <= m.timing.median_ms <= m.timing.p80_ms
    assert m.gbps == pytest.approx(wl.bytes / (m.timing.median_ms * 1e-3) / 1e9)


@pytest.mark.parametrize("func", [subtracts, first_half], ids=["wrong-math", "unwritten-half-stays-NaN"])
def test_wrong_kernel_raises_before_timing(func):
    with pytest.raises(AssertionError, match="output differs from the reference"):
        verify_then_time(vector_add(1024), tvm.IRModule({"main": func}), variant="bad", repeats=3,
                         target=cpu_target())


def test_timing_percentiles():
    t = Timing.from_seconds(np.arange(1, 101) * 1e-3)
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.repeats) == (50.5, pytest.approx(20.8), pytest.approx(80.2), 100)

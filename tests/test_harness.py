"""verify_then_time checks before it times: a wrong or incomplete kernel raises and gets no number; build_all builds
several kernels in worker processes for it, and names a failed build in one line."""
import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.script import tirx as T

from tirbench.bench.harness import Measurement, Timing, build_all, verify_then_time
from tirbench.bench.results import read_results
from tirbench.bench.session import Session
from tirbench.core.machine import cpu_target, cuda_target, has_cuda_gpu
from tirbench.schedules.gemm.records import V7_MMA_LDMATRIX
from tirbench.workloads import gemm, vector_add


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


def test_a_rows_verified_is_what_the_check_said(tmp_path, monkeypatch):
    """``verify_then_time`` marks what it checked; a measurement made without the check is not verified: a session
    refuses it, and a row of it says so (and is not written)."""
    import types

    wl = vector_add(1024)
    checked = verify_then_time(wl, wl.mod, variant="checked", repeats=3, target=cpu_target())
    unchecked = Measurement(wl, "unchecked", "tvm", checked.timing)
    assert checked.verified and not unchecked.verified
    (tmp_path / "pyproject.toml").write_text("")
    session = Session("01_vector_add", root=tmp_path)
    session.gpu = True   # a GPU run, faked
    session.device = types.SimpleNamespace(gpu="NVIDIA H100", driver="580", tvm_version="0.27",
                                           compute_capability="9.0")
    session.record(checked)
    with pytest.raises(ValueError, match="unchecked \\(tvm\\): not verified"):
        session.record(unchecked)
    session.measurements.append(unchecked)   # past record's check: the row still says what the check said
    assert [r["verified"] for r in session.rows()] == [True, False]
    with pytest.raises(ValueError, match="only verified kernels"):
        session.commit()
    session.measurements.pop()
    assert session.commit() == 1 and list(read_results(session.results_csv)["verified"]) == [True]


def test_timing_percentiles():
    t = Timing.from_seconds(np.arange(1, 101) * 1e-3)
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.repeats) == (50.5, pytest.approx(20.8), pytest.approx(80.2), 100)


def test_build_all_builds_in_workers_and_the_kernels_verify_as_built():
    wl = vector_add(1 << 12)
    wrong = tvm.IRModule({"main": subtracts})
    built = build_all([wl.mod, wrong], cpu_target())
    assert [type(b) for b in built] == [tvm.runtime.Module, tvm.runtime.Module]
    m = verify_then_time(wl, built[0], variant="prebuilt", repeats=3, target=cpu_target())
    assert m.timing.repeats == 3
    with pytest.raises(AssertionError, match="output differs from the reference"):
        verify_then_time(vector_add(1024), built[1], variant="bad", repeats=3, target=cpu_target())


def test_build_all_names_a_failed_build_in_one_line_and_builds_the_rest():
    wl = vector_add(1 << 12)
    on_threads = s_tir.Schedule(wl.mod)
    on_threads.bind(on_threads.get_loops(on_threads.get_sblock("C"))[0], "threadIdx.x")   # no GPU threads on llvm
    failed, good = build_all([on_threads, wl.mod], cpu_target())
    assert isinstance(failed, RuntimeError) and str(failed) and "\n" not in str(failed)
    assert verify_then_time(wl, good, variant="after a failed one", repeats=3, target=cpu_target()).timing.repeats == 3


def test_build_all_lowers_tensor_core_kernels_in_its_workers():
    """Lowering mma.sync / ldmatrix looks up index maps that TVM registers with its tensor intrinsics: the CUDA
    workers register them first (without, every v7 candidate failed to build on the H100)."""
    sch = V7_MMA_LDMATRIX.apply(gemm(256, 256, 256, dtype="float16"))
    (kernel,) = build_all([sch], cuda_target(), V7_MMA_LDMATRIX.pass_config)
    if has_cuda_gpu():
        assert isinstance(kernel, tvm.runtime.Module)
    else:  # built; this TVM has no CUDA runtime to load it
        assert isinstance(kernel, RuntimeError) and "loader" in str(kernel) and "index_map" not in str(kernel)

"""The same workload built for an older architecture and the GPU's own (``bench.archs``): which architecture each
is compared with, the table's ratios, and a machine without a GPU showing the recorded rows untouched."""
import pandas as pd
import pytest

from tirbench.bench import archs
from tirbench.bench.results import append_csv


@pytest.mark.parametrize("arch, older", [("sm_90a", "sm_80"), ("sm_100a", "sm_80"), ("sm_120a", "sm_80"),
                                         ("sm_89", "sm_80"), ("sm_86", "sm_80"), ("sm_80", "sm_75"), ("sm_75", None)])
def test_each_arch_is_compared_with_the_newest_older_baseline(arch, older):
    assert archs.older_arch(arch) == older


def _row(variant, arch, ptx, ms, shape="4096x4096x4096"):
    return {"run_id": "r1", "timestamp": "2026-11-27T00:00:00+00:00", "gpu": "NVIDIA H200", "driver": "580",
            "tvm_version": "0.27.0.post1", "workload": "gemm", "shape": shape, "dtype": "float16",
            "variant": variant, "arch": arch, "ptx": ptx, "median_ms": ms, "gflops": 1e6 * 0.1 / ms,
            "verified": True, "repeats": 50, "compute_capability": "9.0"}


def test_the_table_divides_by_the_older_arch_s_fastest_kernel_per_workload():
    rows = pd.DataFrame([_row("v7_mma_ldmatrix", "sm_80", True, 0.4), _row("v7_mma_ldmatrix", "sm_90a", False, 0.4),
                         _row("v9_tma_ws", "sm_90a", False, 0.2), _row("v7_mma_ldmatrix", "sm_80", True, 0.1, "1x1x1"),
                         _row("v9_tma_ws", "sm_90a", False, 0.05, "1x1x1")])
    table = archs.arch_table(rows)
    assert list(table["x sm_80"]) == [1.0, 1.0, 2.0, 1.0, 2.0]
    assert list(table["runs as"][:2]) == ["PTX (the driver compiles it)", "native"]


def test_without_a_gpu_the_recorded_run_is_shown_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(archs.Session, "banner", lambda self: "")
    session = archs.Session("03_gemm", root=tmp_path)
    session.gpu = False
    path = tmp_path / "results" / "03_gemm" / archs.ARCH_CSV
    assert archs.same_gpu(session, None, older=[], native=[]).empty
    path.parent.mkdir(parents=True)
    append_csv(path, [_row("v9_tma_ws", "sm_90a", False, 0.2)], archs.ARCH_COLUMNS, lambda row: None)
    before = path.read_bytes()
    shown = archs.same_gpu(session, None, older=[], native=[])
    assert list(shown["variant"]) == ["v9_tma_ws"] and path.read_bytes() == before


def test_show_says_where_the_rows_were_measured_or_that_none_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(archs.Session, "banner", lambda self: "")
    session = archs.Session("03_gemm", root=tmp_path)
    session.gpu = False
    assert archs.show_archs(pd.DataFrame(), session) is None
    table = archs.show_archs(pd.DataFrame([_row("v9_tma_ws", "sm_90a", False, 0.2)]), session)
    out = capsys.readouterr().out
    assert "No run built" in out and "recorded on NVIDIA H200, 2026-11-27, run r1" in out and len(table) == 1

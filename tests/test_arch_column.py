"""Rows say what they ran: the ``arch`` column (old files read sm_90a on an H100/H200 and get the column at the next
append), PTX rows labelled "sm_80 code on <GPU> (PTX)" and never put in a ratio with native rows (headline, overview,
sweeps), and pruning keeps a native run that a later PTX run measured again."""
import math
from types import SimpleNamespace

import pandas as pd
import pytest
from test_results import row

from tirbench.bench import session as session_module
from tirbench.bench.harness import Measurement, Timing
from tirbench.bench.plots import ptx_arch, series_name
from tirbench.bench.results import (COLUMNS, append_rows, build_arch, gpu_label, is_ptx, needed_runs, read_results,
                                    run_label)
from tirbench.report import overview
from tirbench.report import readme as report
from tirbench.report.headline import HEADLINES, headline_rows
from tirbench.report.index import headline_lines
from tirbench.workloads import gemm

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
PTX_LABEL = f"sm_80 code on {H100} (PTX)"
GEMM = dict(notebook="03_gemm", workload="gemm", shape="4096x4096x4096", dtype="float32", gpu=H100)


def gemm_rows(run_id, timestamp, arch):
    """A run of notebook 03 on an H100: v5 built for ``arch`` ("" as recorded before the column) beside cuBLAS
    (native: sm_90a, or "" for an old run)."""
    return [row(run_id=run_id, timestamp=timestamp, variant="v5", provider="tvm", gflops=45000.0, arch=arch, **GEMM),
            row(run_id=run_id, timestamp=timestamp, variant="cublas_float32", provider="cublas", gflops=50000.0,
                arch="sm_90a" if arch else "", **GEMM)]


def test_an_empty_arch_is_sm_90a_on_an_h100_or_h200_only():
    assert build_arch(H100, "", "9.0") == build_arch("NVIDIA H200", "", 9.0) == "sm_90a"
    assert build_arch(A100, "", "8.0") == "" and build_arch(H100, "sm_80", "9.0") == "sm_80"


def test_ptx_is_code_for_an_older_arch_than_the_gpu_and_is_labelled_so():
    assert is_ptx("sm_80", "9.0") and is_ptx("sm_75", 8.9)
    assert not is_ptx("sm_90a", "9.0") and not is_ptx("sm_89", "8.9") and not is_ptx("", "9.0")
    assert not is_ptx("sm_80", math.nan)   # a row without its compute capability: not known, not PTX
    assert gpu_label(H100, "sm_80", "9.0") == PTX_LABEL and gpu_label(H100, "sm_90a", "9.0") == H100


def test_an_old_file_reads_arch_from_its_gpu_and_gets_the_column_at_the_next_append(tmp_path):
    path = tmp_path / "results.csv"
    old = [c for c in COLUMNS if c != "arch"]
    lines = [",".join(old), ",".join(str(row(tuned_best="")[c]) for c in old)]   # an H200 row before the column
    path.write_text("\n".join(lines) + "\n")
    assert list(read_results(path)["arch"]) == ["sm_90a"]
    append_rows(path, [row("r2", "2026-11-22T00:00:00+00:00", gpu=A100, compute_capability="8.0", arch="sm_80")])
    text = path.read_text().splitlines()
    assert text[0] == ",".join(COLUMNS) and text[1] == lines[1] + ","   # every other byte of the old row kept
    assert list(read_results(path)["arch"]) == ["sm_90a", "sm_80"]
    with pytest.raises(ValueError, match=r"arch='sm80': expected an architecture"):
        append_rows(path, [row(arch="sm80")])


def test_session_rows_record_the_build_arch_and_the_vendors_own(monkeypatch, tmp_path):
    monkeypatch.setattr(session_module, "has_cuda_gpu", lambda: True)
    monkeypatch.setattr(session_module.DeviceInfo, "detect", classmethod(
        lambda cls: cls(gpu=H100, compute_capability="9.0", driver="580", tvm_version="0.27")))
    s = session_module.Session("03_gemm", root=tmp_path, arch="sm_80", save=False)
    assert "TVM kernels built for sm_80, run as PTX" in s.banner()
    wl, t = gemm(64, 64, 64), Timing(1.0, 0.9, 1.1, 10)
    s.record(Measurement(wl, "v5", "tvm", t, verified=True))
    s.record(Measurement(wl, "cublas_float32", "cublas", t, verified=True))
    assert [r["arch"] for r in s.rows()] == ["sm_80", "sm_90a"]
    assert s.label().startswith(f"measured: {PTX_LABEL} beside native rows, ")
    assert run_label(pd.DataFrame(s.rows()[1:])) == H100


def test_headline_shows_the_ptx_run_beside_the_native_one_with_no_ratio_across(tmp_path):
    rows = gemm_rows("native", "2026-11-26T00:00:00+00:00", "sm_90a") + gemm_rows("ptx", "2026-11-27T00:00:00+00:00",
                                                                                   "sm_80")
    append_rows(tmp_path / "results" / "03_gemm" / "results.csv", rows)
    df = read_results(tmp_path / "results" / "03_gemm" / "results.csv")
    head = dict(HEADLINES)["03_gemm"]
    got = headline_rows(df, head).set_index(["run_id", "variant"])
    assert got.loc[("native", "v5"), "ratio"] == pytest.approx(0.9)          # native v5 / native cuBLAS
    assert math.isnan(got.loc[("ptx", "v5"), "ratio"])                       # never divided by a native row
    assert got.loc[("ptx", "v5"), "gpu_shown"] == PTX_LABEL and got.loc[("ptx", "cublas_float32"), "gpu_shown"] == H100
    table = report.headline_table(tmp_path)
    ptx_line = next(line for line in table.splitlines() if "| v5 |" in line and PTX_LABEL in line)
    assert "x cublas" not in ptx_line
    assert any("| v5 |" in line and "0.900x cublas_float32" in line for line in table.splitlines())
    assert f"run ptx: {PTX_LABEL} beside native rows" in table
    lines = headline_lines(df, "03_gemm")   # the report index: a line per build, the PTX one without a ratio
    assert any("= 0.90x cublas_float32" in line and f"({H100}, " in line for line in lines)
    assert any(f"({PTX_LABEL}, " in line and "x cublas" not in line for line in lines) and len(lines) == 2


def test_a_ptx_baseline_of_the_same_arch_gives_a_ratio():
    """Notebook 01 divides by its own a+b kernel: within a run built for sm_80, both are sm_80 code."""
    vec = dict(run_id="p", timestamp="2026-11-27T00:00:00+00:00", gpu=H100, arch="sm_80", shape="67108864")
    df = pd.DataFrame([row(variant="v2_float4", gbps=3000.0, **vec), row(variant="a+b", gbps=2000.0, **vec)])
    got = headline_rows(df, dict(HEADLINES)["01_vector_add"]).set_index("variant")
    assert got.loc["v2_float4", "ratio"] == pytest.approx(1.5)


def test_overview_keeps_ptx_rows_apart_without_a_vendor_ratio_or_a_roofline_point(tmp_path):
    append_rows(tmp_path / "results" / "03_gemm" / "results.csv",
                gemm_rows("native", "2026-11-26T00:00:00+00:00", "sm_90a")
                + gemm_rows("ptx", "2026-11-27T00:00:00+00:00", "sm_80"))
    s = overview.summary(overview.load_results(tmp_path)).set_index("arch")
    assert s.loc["sm_90a", "hand / vendor"] == pytest.approx(0.9) and s.loc["sm_90a", "gpu_shown"] == H100
    assert math.isnan(s.loc["sm_80", "hand / vendor"]) and pd.isna(s.loc["sm_80", "vendor"])
    assert s.loc["sm_80", "gpu_shown"] == PTX_LABEL and "GPU" in overview.summary_table(s.reset_index())
    fig = overview.roofline(s.reset_index(), H100, caption="c")
    assert "not drawn: 1 rows of code built for sm_80 (PTX)" in fig.texts[0].get_text()


def test_a_later_ptx_run_does_not_supersede_the_native_run():
    runs = [r for i, arch in enumerate(["", "sm_80", "sm_80", "sm_80"])
            for r in gemm_rows(f"r{i}", f"2026-11-2{i}T00:00:00+00:00", arch)]
    df = pd.DataFrame(runs).assign(arch=lambda d: [build_arch(g, a, c) for g, a, c in
                                                   zip(d["gpu"], d["arch"], d["compute_capability"])])
    assert "r0" in needed_runs(df)   # its v5 is the newest sm_90a row of its key


def test_sweeps_read_native_runs_only(tmp_path):
    sweep = report.SWEEPS[0]
    layer = dict(notebook=sweep.notebook, workload="conv2d", shape=sweep.shapes[0], gpu=H100)
    rows = [row(run_id=run, timestamp=ts, variant=v, provider=p, median_ms=ms, arch=a, **layer)
            for run, ts, arch in (("native", "2026-11-26T00:00:00+00:00", "sm_90a"),
                                  ("ptx", "2026-11-27T00:00:00+00:00", "sm_80"))
            for v, p, ms, a in (("v3", "tvm", 0.05, arch), ("cudnn_nhwc", "cudnn", 0.04, "sm_90a"))]
    append_rows(tmp_path / "results" / sweep.notebook / "results.csv", rows)
    assert "run native:" in report.sweep_table(tmp_path, sweep)


def test_plot_legends_name_ptx_series():
    df = pd.DataFrame([row(arch="sm_80"), row(arch="sm_90a", provider="torch")])
    assert ptx_arch(df.iloc[:1]) == "sm_80" and ptx_arch(df.iloc[1:]) == ""
    assert series_name("tvm", "v5", "sm_80") == "v5 (tvm, sm_80 code as PTX)" and series_name("tvm", "v5") == "v5 (tvm)"


def test_kernel_csv_rows_carry_the_targets_arch(monkeypatch, tmp_path):
    """``tirbench.kernel``'s --csv rows: the session is told the arch of the target the candidates are built for."""
    from tirbench.kernel import run as kernel_run

    seen = {}

    class Stop(Exception):
        pass

    def fake_session(notebook, *, save, arch):
        seen["arch"] = arch
        raise Stop

    monkeypatch.setattr(kernel_run, "Session", fake_session)
    monkeypatch.setattr(kernel_run, "cuda_target", lambda: SimpleNamespace(attrs={"arch": "sm_80"}))
    with pytest.raises(Stop):
        kernel_run._measured([gemm(64, 64, 64)], keep=None, repeats=1, seed=0, out=tmp_path, csv=tmp_path / "r.csv",
                             say=print)
    assert seen == {"arch": "sm_80"}

"""Notebook 04's Winograd rows, from a faked GPU run: a second ``commit`` appends only the rows recorded since the
first; the error table is appended beside the results (in place, or staged as the recorded file plus the new rows,
which run-all moves in); a form's measurement is reported on its layer; the cuDNN comparison and the README's error
table are built from the CSVs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tirbench.bench.harness import Measurement, Timing
from tirbench.bench.results import read_results
from tirbench.bench.session import STAGE_ENV, Session
from tirbench.bench.sweep import Trial
from tirbench.bench.winograd import ERROR_COLUMNS, ERROR_CSV, WinogradRun, geomean, read_errors, variant, \
    versus_cudnn
from tirbench.core.machine import DeviceInfo
from tirbench.report import readme as report
from tirbench.report.run_all import move_staged
from tirbench.schedules.conv.records import WINOGRAD
from tirbench.workloads import conv2d, conv2d_winograd

LAYER = conv2d(1, 8, 8, 8, 8)
FORM = conv2d_winograd(1, 8, 8, 8, 8, m=4)
H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", "0.27.0.post1")
ERROR = {"max_abs": 1.25e-5, "rms": 2e-6, "max_rel": 3e-7, "atol": 4e-4, "margin": 32.0}


@pytest.fixture
def gpu_session(tmp_path, monkeypatch):
    """A Session of notebook 04 in a scratch root, faked into a GPU run (no staging unless a test sets it)."""
    monkeypatch.delenv(STAGE_ENV, raising=False)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    s = Session("04_conv2d", root=tmp_path)
    s.gpu, s.device = True, H100
    monkeypatch.setattr("tirbench.bench.session.output_dir", lambda root: root / "results")   # a GPU run's
    return s


def measured(wl, name: str, ms: float, provider: str = "tvm") -> Measurement:
    return Measurement(wl, name, provider, Timing(ms, ms * 0.99, ms * 1.01, 10), verified=True)


def test_a_second_commit_appends_only_the_new_rows(gpu_session, capsys):
    s = gpu_session
    s.measurements.append(measured(LAYER, "hwcn_seed", 1.0))
    assert s.commit() == 1 and s.commit() == 0
    s.measurements += [measured(LAYER, "winograd_f2", 0.5), measured(LAYER, "cudnn_nchw", 0.4, "cudnn")]
    assert s.commit() == 2
    assert list(read_results(s.results_csv)["variant"]) == ["hwcn_seed", "winograd_f2", "cudnn_nchw"]


def run(m: int = 4, error: dict | None = None) -> WinogradRun:
    form = conv2d_winograd(1, 8, 8, 8, 8, m=m)
    trial = Trial(WINOGRAD, {"block_tile": (64, 32)}, "ok", measurement=measured(form, WINOGRAD.name, 0.02))
    return WinogradRun(LAYER, form, trial, error or ERROR)


def test_a_winograd_run_is_reported_on_its_layer():
    r = run()
    m = r.measurement
    assert (m.workload, m.variant, m.timing.median_ms) == (LAYER, "winograd_f4", 0.02) and m.gflops == \
        LAYER.flops / 0.02e-3 / 1e9
    row = r.error_row()
    assert row["shape"] == LAYER.shape == "1x8x8x8x8x3x3x1x1" and (row["layout"], row["m"]) == ("NCHW", 4)
    assert row["kernel"] == "winograd_simt(block_tile=(64, 32))" and row["max_abs"] == 1.25e-5
    assert variant(2) == "winograd_f2" and variant(4, "metaschedule") == "winograd_f4_metaschedule"


def test_error_rows_are_appended_in_place_beside_the_results(gpu_session):
    s = gpu_session
    path = s.root / "results" / "04_conv2d" / ERROR_CSV
    assert s.append_table(ERROR_CSV, [run().error_row()], ERROR_COLUMNS) == 1
    assert s.append_table(ERROR_CSV, [run(2).error_row()], ERROR_COLUMNS) == 1
    df = read_errors(path)
    assert list(df.columns) == ERROR_COLUMNS and list(df["m"]) == [4, 2] and set(df["run_id"]) == {s.run_id}
    assert df["gpu"].iloc[0] == H100.gpu


def test_staged_error_rows_move_in_whole_with_the_recorded_ones(gpu_session, tmp_path, monkeypatch):
    """Under run-all the staged file is the recorded table plus this run's rows; moving it in keeps both."""
    s = gpu_session
    s.append_table(ERROR_CSV, [run().error_row()], ERROR_COLUMNS)   # an earlier run, in place
    staged = tmp_path / "staged"
    monkeypatch.setenv(STAGE_ENV, str(staged))
    later = Session("04_conv2d", root=s.root)
    later.gpu, later.device = True, H100
    assert later.append_table(ERROR_CSV, [run(2).error_row()], ERROR_COLUMNS) == 1
    recorded = s.root / "results" / "04_conv2d" / ERROR_CSV
    assert len(read_results(recorded, ERROR_COLUMNS)) == 1   # nothing under results/ before the move
    move_staged(staged, s.root / "results", s.root)
    df = read_results(recorded, ERROR_COLUMNS)
    assert list(df["run_id"]) == [s.run_id, later.run_id] and list(read_errors(recorded)["m"]) == [2]


def test_cpu_session_appends_no_error_rows(tmp_path, monkeypatch):
    monkeypatch.delenv(STAGE_ENV, raising=False)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    s = Session("04_conv2d", root=tmp_path)
    s.gpu = False
    assert s.append_table(ERROR_CSV, [run().error_row()], ERROR_COLUMNS) == 0
    assert not (tmp_path / "results").exists()


def frame(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"shape": shape, "variant": v, "provider": p, "median_ms": ms} for shape, v, p, ms in rows])


def test_versus_cudnn_takes_the_faster_layout_per_layer():
    big, small, direct_only = "256x256x14x14x512x3x3x1x1", "1x512x7x7x512x3x3x1x1", "1x64x56x56x64x1x1x1x0"
    df = frame([(big, "cudnn_nchw", "cudnn", 1.0), (big, "cudnn_nhwc", "cudnn", 1.2), (big, "winograd_f2", "tvm", 2.0),
                (big, "winograd_f4", "tvm", 0.8), (big, "hwcn_seed", "tvm", 3.0), (small, "cudnn_nhwc", "cudnn", 0.14),
                (small, "winograd_f2", "tvm", 0.035), (direct_only, "cudnn_nchw", "cudnn", 0.02)])
    t = versus_cudnn(df, [small, big, direct_only]).set_index("layer")
    assert list(t.index) == [small, big] and t.loc[big, "cuDNN"] == "cudnn_nchw"
    assert t.loc[big, "cuDNN / winograd_f4"] == pytest.approx(1.25) and t.loc[small, "cuDNN / winograd_f2"] == 4.0
    assert np.isnan(t.loc[small, "cuDNN / winograd_f4"]) and "hwcn_seed ms" not in t
    assert geomean(t["cuDNN / winograd_f2"]) == pytest.approx(np.sqrt(0.5 * 4.0))


def write_errors(root, run_id: str, rows: list[tuple[str, int, float, float]]) -> None:
    from tirbench.bench.results import append_csv

    fields = {"run_id": run_id, "timestamp": f"2026-11-2{run_id[-1]}T00:00:00+00:00", "gpu": H100.gpu,
              "driver": H100.driver, "tvm_version": H100.tvm_version}
    append_csv(root / "results" / "04_conv2d" / ERROR_CSV, [
        {**fields, "shape": shape, "layout": "NCHW", "m": m, "kernel": "winograd_simt", "max_abs": err, "rms": err / 5,
         "max_rel": err / 300, "atol": atol, "margin": atol / err} for shape, m, err, atol in rows],
        ERROR_COLUMNS, lambda row: None)


def test_readme_error_table_puts_f2_beside_f4_from_the_latest_run(tmp_path):
    big, small = "256x256x14x14x512x3x3x1x1", "1x512x7x7x512x3x3x1x1"
    assert report.winograd_error_table(tmp_path) == "not run on a GPU yet"
    write_errors(tmp_path, "r1", [(big, 2, 9.0, 1.0)])
    write_errors(tmp_path, "r2", [(big, 2, 3.0e-5, 4.4e-4), (big, 4, 3.0e-4, 8.1e-3), (small, 2, 4.0e-5, 6.2e-4)])
    table = report.winograd_error_table(tmp_path)
    assert f"| {big} | NCHW | 3.00e-05 (1.0e-07) | 4.40e-04 | 3.00e-04 (1.0e-06) | 8.10e-03 | 10.0x |" in table
    assert f"| {small} | NCHW | 4.00e-05 (1.3e-07) | 6.20e-04 |  |  |  |" in table
    assert "9.00e+00" not in table and table.splitlines()[-1].startswith(f"From `results/04_conv2d/winograd_error.csv`, run r2: {H100.gpu}, driver {H100.driver}, ")
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\n<!-- winograd-error:start -->\nold\n<!-- winograd-error:end -->\n"
                      "<!-- conv-winograd:start -->\n<!-- conv-winograd:end -->\n")
    assert report.update_readme(readme, tmp_path)
    text = readme.read_text()
    assert "old" not in text and "10.0x" in text and "<!-- conv-winograd:start -->\nnot run on a GPU yet" in text


def test_readme_winograd_table_compares_each_variant_with_cudnn(tmp_path):
    from test_results import row

    from tirbench.bench.results import append_rows

    big, small = "256x256x14x14x512x3x3x1x1", "1x512x7x7x512x3x3x1x1"
    rows = [(big, "cudnn_nchw", "cudnn", 1.0), (big, "cudnn_nhwc", "cudnn", 1.2), (big, "winograd_f2", "tvm", 1.25),
            (big, "winograd_f4", "tvm", 0.8), (big, "hwcn_hopper_best", "tvm", 2.4),
            (big, "winograd_f4_metaschedule", "metaschedule", 2.0), (small, "cudnn_nhwc", "cudnn", 0.14),
            (small, "winograd_f2", "tvm", 0.035), ("1x64x56x56x64x1x1x1x0", "winograd_f2", "tvm", 1.0)]
    append_rows(tmp_path / "results" / "04_conv2d" / "results.csv", [
        row(notebook="04_conv2d", workload="conv2d", shape=shape, variant=v, provider=p, median_ms=ms)
        for shape, v, p, ms in rows])
    table = report.winograd_table(tmp_path).splitlines()
    assert table[0] == ("| layer (NxCxHxWxKxRxSxstridexpad) | fastest cuDNN | ms | winograd_f2 ms | cuDNN / winograd_f2 | "
                        "winograd_f4 ms | cuDNN / winograd_f4 | winograd_f4_metaschedule ms | "
                        "cuDNN / winograd_f4_metaschedule |")
    assert table[2] == (f"| {big} | cudnn_nchw | 1.0000 | 1.2500 | 0.800x | 0.8000 | 1.250x | 2.0000 | 0.500x |")
    assert table[3] == f"| {small} | cudnn_nhwc | 0.1400 | 0.0350 | 4.000x |  |  |  |  |"
    assert table[4] == "| geometric mean over 2 layers | | |  | **1.789x** |  | **1.250x** |  | **0.500x** |"
    assert report.winograd_table(tmp_path / "none") == "not run on a GPU yet"

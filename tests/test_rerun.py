"""``report.rerun``: a notebook's headline ratios, latest native run against the one before it on the same GPU."""
from __future__ import annotations

import pandas as pd
import pytest
from test_results import row

from tirbench.report import rerun

BIG = "4096x4096x4096"


def gemm_run(run_id: str, day: int, ours: float, cublas: float, gpu: str = "NVIDIA H200", arch: str = "sm_90a"):
    stamp = f"2026-11-2{day}T00:00:00+00:00"
    common = dict(notebook="03_gemm", workload="gemm", shape=BIG, dtype="float16", gpu=gpu)
    return [row(run_id, stamp, variant="v9_tma_ws", gflops=ours, arch=arch, **common),
            row(run_id, stamp, variant="cublas_float16", provider="cublas", gflops=cublas, arch="sm_90a", **common)]


def frame(*runs) -> pd.DataFrame:
    return pd.DataFrame([r for run in runs for r in run])


def test_the_latest_run_is_compared_with_the_one_before_on_the_same_gpu():
    older = gemm_run("h100", 0, 100.0, 1000.0, gpu="NVIDIA H100 80GB HBM3")
    df = frame(older, gemm_run("a", 1, 500.0, 1000.0), gemm_run("b", 2, 900.0, 1000.0),
               gemm_run("c", 3, 920.0, 1000.0))
    table = rerun.compare(rerun.run_ratios(df, "03_gemm"))
    assert len(table) == 1   # the latest run's GPU only
    r = table.iloc[0]
    assert (r["variant"], r["runs"], r["before"], r["after"]) == ("v9_tma_ws", "b -> c", 0.9, 0.92)
    assert r["change"] == pytest.approx(0.92 / 0.9 - 1)


def test_a_run_built_for_an_older_arch_is_not_compared():
    df = frame(gemm_run("a", 1, 900.0, 1000.0), gemm_run("b", 2, 900.0, 1000.0),
               gemm_run("ptx", 3, 300.0, 1000.0, arch="sm_80"))
    assert rerun.compare(rerun.run_ratios(df, "03_gemm"))["runs"].tolist() == ["a -> b"]


def test_an_unknown_notebook_is_one_line(capsys):
    assert rerun.main(["09_nothing"]) == 2
    assert capsys.readouterr().out.startswith("notebook '09_nothing': no headline ratios (one of ")


def test_a_run_pruned_from_the_csv_is_read_back_from_git(tmp_path, monkeypatch):
    """A re-run drops the run it measured again from the CSV; the committed CSV still has it, so the two compare."""
    import subprocess

    from tirbench.bench.results import append_rows

    csv = tmp_path / "results" / "03_gemm" / "results.csv"
    csv.parent.mkdir(parents=True)
    append_rows(csv, gemm_run("a", 1, 900.0, 1000.0))
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "results"], ["commit", "-qm", "a"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True)
    csv.write_text("")
    append_rows(csv, gemm_run("b", 2, 930.0, 1000.0))   # the re-run, with run a pruned
    monkeypatch.setattr(rerun, "project_root", lambda: tmp_path)
    table = rerun.compare(rerun.run_ratios(rerun.with_history(csv), "03_gemm"))   # the re-run not committed yet
    assert table["runs"].tolist() == ["a -> b"] and table["after"].tolist() == [0.93]
    subprocess.run([*git, "commit", "-qam", "b"], cwd=tmp_path, check=True)
    table = rerun.compare(rerun.run_ratios(rerun.with_history(csv), "03_gemm"))   # committed
    assert table["runs"].tolist() == ["a -> b"]


def test_runs_timed_differently_are_not_compared():
    df = frame(gemm_run("evaluator", 1, 500.0, 1000.0), gemm_run("events", 5, 900.0, 1000.0))   # 11-21 and 11-25
    assert rerun.compare(rerun.run_ratios(df, "03_gemm")).empty

"""The results CSV: exact schema, atomic appends, verified rows only, latest run selection."""
import os

import pytest

from tirbench import results
from tirbench.results import COLUMNS, append_rows, latest_run, read_results

REQUIRED = ["run_id", "timestamp", "gpu", "driver", "tvm_version", "notebook", "workload", "shape", "dtype",
            "variant", "provider", "trials", "median_ms", "p20_ms", "p80_ms", "gflops", "gbps", "verified"]


def row(run_id="r1", timestamp="2026-11-21T00:00:00+00:00", **kw):
    base = dict(run_id=run_id, timestamp=timestamp, gpu="NVIDIA H200", driver="580", tvm_version="0.27.0.post1",
                notebook="01_vector_add", workload="vector_add", shape="67108864", dtype="float32", variant="v1",
                provider="tvm", trials=0, median_ms=0.19, p20_ms=0.18, p80_ms=0.2, gflops=350.0, gbps=4200.0,
                verified=True, repeats=100, compute_capability="9.0")
    return {**base, **kw}


def test_schema_starts_with_the_published_columns():
    assert COLUMNS[:len(REQUIRED)] == REQUIRED


def test_append_writes_header_once_and_keeps_old_rows(tmp_path):
    path = tmp_path / "nb" / "results.csv"
    assert append_rows(path, [row()]) == 1
    assert append_rows(path, [row("r2", "2026-11-22T00:00:00+00:00"), row("r2", "2026-11-22T00:00:00+00:00")]) == 2
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 4
    df = read_results(path)
    assert list(df["run_id"]) == ["r1", "r2", "r2"] and df["shape"].iloc[0] == "67108864"
    assert list(latest_run(df)["run_id"]) == ["r2", "r2"]


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "results.csv"
    append_rows(path, [row()])
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        append_rows(path, [row("r2")])
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["results.csv"]


@pytest.mark.parametrize("bad, message", [
    (dict(verified=False), "only verified kernels"),
    (dict(provider="cutlass"), "provider 'cutlass'"),
])
def test_invalid_rows_are_refused_and_nothing_is_written(tmp_path, bad, message):
    path = tmp_path / "results.csv"
    with pytest.raises(ValueError, match=message):
        append_rows(path, [row(), row(**bad)])
    assert not path.exists()


def test_foreign_csv_is_not_rewritten(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="other columns"):
        append_rows(path, [row()])
    assert path.read_text() == "a,b\n1,2\n"

"""The results CSV: exact schema, atomic appends, verified rows only, latest run selection, and a file that is not
whole (cut-off last line, other columns) refused with one line naming it."""
import os

import pytest

from tirbench.bench.results import (COLUMNS, ResultsFileError, append_rows, latest_run, latest_run_where,
                                    prune_superseded, read_results)
from tirbench.core import atomic
from tirbench.report import readme as report

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


def test_latest_run_where_takes_the_newest_run_that_measured_it_whole(tmp_path):
    """A run that measured one config (``-p configs '[fp16]'``) does not hide another config's latest run, and the
    run it picks comes with all its rows (the vendor's beside TVM's)."""
    path = tmp_path / "results.csv"
    old, new = "2026-11-21T00:00:00+00:00", "2026-11-22T00:00:00+00:00"
    append_rows(path, [row("r1", old, dtype="int8", variant="rules"), row("r1", old, dtype="float16", provider="cudnn"),
                       row("r2", new, dtype="float16", variant="rules"),
                       row("r2", new, dtype="float16", provider="cudnn")])
    df = read_results(path)
    int8 = latest_run_where(df, (df["dtype"] == "int8") & (df["variant"] == "rules"))
    assert set(int8["run_id"]) == {"r1"} and len(int8) == 2
    assert set(latest_run_where(df, df["dtype"] == "float16")["run_id"]) == {"r2"}
    assert latest_run_where(df, df["dtype"] == "float32").empty
    none = read_results(tmp_path / "none.csv")
    assert latest_run_where(none, none["dtype"] == "int8").empty


def test_prune_drops_only_runs_whose_every_row_was_measured_again(tmp_path):
    """Four runs: r1 measured v1 and v2, r2 only v1, r3 on another GPU, r4 v1 again. r1 still holds the newest v2 and
    r3 the other GPU's v1 (the overview's); r2's only row is superseded by r4's and it is not the most recent
    (r4): dropped, every other line kept byte for byte."""
    path = tmp_path / "results.csv"
    day = "2026-11-2{}T00:00:00+00:00".format
    append_rows(path, [row("r1", day(1)), row("r1", day(1), variant="v2"), row("r2", day(2)),
                       row("r3", day(3), gpu="NVIDIA H100 80GB HBM3"), row("r4", day(4))])
    before = path.read_text().splitlines(keepends=True)
    assert prune_superseded(path) == 1
    assert path.read_text() == "".join(line for line in before if not line.startswith("r2,"))
    assert list(read_results(path)["run_id"]) == ["r1", "r1", "r3", "r4"]
    assert prune_superseded(path) == 0 and prune_superseded(tmp_path / "none.csv") == 0


def test_prune_by_shape_drops_a_kept_runs_layers_measured_again_whole(tmp_path):
    """Notebook 10's pruning: r1 measured layers A, B and C (int8 rules, cuDNN fp16), r2 (the latest) A again whole
    and B's cuDNN only. r1 stays (it holds B's and C's newest rows) less its layer A; B keeps both rows (its int8 row
    compares with r1's own cuDNN); run-level pruning keeps all."""
    path = tmp_path / "results.csv"
    old, new = "2026-11-21T00:00:00+00:00", "2026-11-22T00:00:00+00:00"
    layer = lambda run, day, shape: [row(run, day, shape=shape, dtype="int8", variant="rules"),   # noqa: E731
                                     row(run, day, shape=shape, dtype="float16", variant="cudnn", provider="cudnn")]
    append_rows(path, [*layer("r1", old, "A"), *layer("r1", old, "B"), *layer("r1", old, "C"), *layer("r2", new, "A"),
                       layer("r2", new, "B")[1]])
    before = path.read_text().splitlines(keepends=True)
    assert prune_superseded(path) == 0
    assert prune_superseded(path, by_shape=True) == 2
    assert path.read_text() == "".join(line for line in before if not line.startswith("r1,") or ",A," not in line)
    df = read_results(path)
    assert list(zip(df["run_id"], df["shape"])) == [("r1", "B")] * 2 + [("r1", "C")] * 2 + [("r2", "A")] * 2 + \
        [("r2", "B")]
    assert prune_superseded(path, by_shape=True) == 0


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "results.csv"
    append_rows(path, [row()])
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", boom)
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
    with pytest.raises(ValueError, match="columns differ"):
        append_rows(path, [row()])
    assert path.read_text() == "a,b\n1,2\n"


def whole_csv(tmp_path):
    path = tmp_path / "03_gemm" / "results.csv"
    append_rows(path, [row(), row(variant="v2"), row(variant="v3")])
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[:-20], "the last line has no newline"),                     # a write cut short
    (lambda text: text[:-20] + "\n", r"line 4 has \d+ fields, expected 22"),         # cut, then a newline
    (lambda text: text.replace("compute_capability", "compute_capability,extra", 1).replace("9.0\n", "9.0,x\n"),
     "unknown: extra"),                                                             # a column we do not know
    (lambda text: text.replace(",compute_capability", "", 1), "missing: compute_capability"),
])
def test_csv_that_is_not_whole_is_refused_in_one_line_naming_it(tmp_path, damage, message):
    path = whole_csv(tmp_path)
    path.write_text(damage(path.read_text()))
    before = path.read_bytes()
    for action in (lambda: read_results(path), lambda: append_rows(path, [row("r2")])):
        with pytest.raises(ResultsFileError, match=message) as err:
            action()
        assert str(path) in str(err.value) and "\n" not in str(err.value)
        assert err.value._render_traceback_() == [f"ResultsFileError: {err.value}"]   # one line in a notebook
    assert path.read_bytes() == before


def test_readme_command_refuses_a_broken_csv_with_one_line(tmp_path, capsys):
    path = whole_csv(tmp_path / "results")
    path.write_text(path.read_text()[:-5])
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\n")
    assert report.main(["report", str(readme)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and readme.read_text() == f"{report.START}\n{report.END}\n"


def test_a_file_written_before_tuned_best_reads_it_empty_and_gets_it_at_the_next_append(tmp_path):
    """The column added since (``ADDED_COLUMNS``): an old file is accepted, read with the column empty, and the next
    append writes the new header, an empty field on each old row (every other byte kept) and the new rows' labels."""
    path = tmp_path / "results.csv"
    old = [c for c in COLUMNS if c not in ("tuned_best", "arch")]
    lines = [",".join(old), ",".join(str(row(provider="metaschedule")[c]) for c in old)]
    path.write_text("\n".join(lines) + "\n")
    assert list(read_results(path)["tuned_best"]) == [""]
    append_rows(path, [row("r2", "2026-11-22T00:00:00+00:00", provider="metaschedule", tuned_best="seed")])
    text = path.read_text().splitlines()
    assert text[0] == ",".join(COLUMNS) and text[1] == lines[1] + ",,"
    assert list(read_results(path)["tuned_best"]) == ["", "seed"]
    with pytest.raises(ValueError, match="tuned_best 'hand'"):
        append_rows(path, [row(tuned_best="hand")])

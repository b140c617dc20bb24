"""The overview (notebook 00) and the report index, from recorded rows: latest run per GPU, GPUs never mixed in a
ratio, rates and % of peak on the roofline, every tuning database read, relative links that resolve."""
import re
from pathlib import Path

import pytest
import tvm
from test_results import row

from tirbench.bench.results import append_rows
from tirbench.core.machine import PEAKS
from tirbench.report.index import index_html, main_plot, write_index
from tirbench.report import overview
from tirbench.tuning import spread, throughput
from tirbench.tuning.database import is_model_database
from tirbench.tuning.history import trials_done
from tirbench.tuning.tune import work_dir_for
from tirbench.workloads import conv2d_winograd

ROOT = Path(__file__).resolve().parents[1]
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def gemm_row(run_id, day, gpu, variant, provider, gflops, dtype="float32"):
    return row(run_id=run_id, timestamp=f"2026-11-{day}T00:00:00+00:00", gpu=gpu, notebook="03_gemm", workload="gemm",
               shape="4096x4096x4096", dtype=dtype, variant=variant, provider=provider, gflops=gflops,
               gbps=gflops / 680.0)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    append_rows(tmp_path / "results" / "03_gemm" / "results.csv", [
        gemm_row("old", 20, H100, "v5", "tvm", 40000.0), gemm_row("old", 20, H100, "cublas_float32", "cublas", 40000.0),
        gemm_row("new", 22, H100, "v5", "tvm", 45000.0), gemm_row("new", 22, H100, "v4", "tvm", 30000.0),
        gemm_row("new", 22, H100, "metaschedule_float32", "metaschedule", 30000.0),
        gemm_row("new", 22, H100, "cublas_float32", "cublas", 50000.0),
        gemm_row("h200", 21, H200, "v5", "tvm", 48000.0), gemm_row("h200", 21, H200, "cublas_float32", "cublas", 60000.0)])
    append_rows(tmp_path / "results" / "01_vector_add" / "results.csv", [
        row(variant="v2_float4", gbps=4200.0, gflops=350.0), row(variant="a+b", provider="torch", gbps=4000.0,
                                                                 gflops=333.3)])
    return tmp_path


def test_summary_takes_the_latest_run_per_gpu_and_never_mixes_gpus(root):
    s = overview.summary(overview.load_results(root)).set_index(["gpu", "workload"])
    h100, h200 = s.loc[(H100, "gemm")], s.loc[(H200, "gemm")]
    assert (h100["hand"], h100["hand_rate"], h100["vendor_rate"]) == ("v5", 45000.0, 50000.0)   # run "new" only
    assert h100["hand / vendor"] == pytest.approx(0.9) and h100["MS / vendor"] == pytest.approx(0.6)
    assert h200["hand / vendor"] == pytest.approx(0.8) and h200["date"] == "2026-11-21"
    assert h100["unit"] == "GFLOP/s" and h100["intensity"] == pytest.approx(680.0)
    assert h100["best TVM % of peak"] == pytest.approx(100 * 45000 / (PEAKS["H100"].fp32_tflops * 1e3))
    va = s.loc[(H200, "vector_add")]
    assert va["unit"] == "GB/s" and va["hand / vendor"] == pytest.approx(1.05)
    assert va["best TVM % of peak"] == pytest.approx(100 * 4200 / (PEAKS["H200"].hbm_tbps * 1e3))
    assert list(overview.summary_table(s.reset_index()).columns)[:5] == ["notebook", "workload", "shape", "dtype",
                                                                         "unit"]


def test_a_run_of_part_of_a_notebook_leaves_the_latest_rows_of_the_rest(root):
    """A later run that measured only the fp16 GEMM: the fp32 GEMM is still read from run "new", the fp16 one from
    the later run, each with its vendor from the same run."""
    append_rows(root / "results" / "03_gemm" / "results.csv", [
        gemm_row("fp16 only", 23, H100, "v9", "tvm", 700000.0, dtype="float16"),
        gemm_row("fp16 only", 23, H100, "cublas_float16", "cublas", 740000.0, dtype="float16")])
    rows = overview.latest_per_gpu(overview.load_results(root))
    h100 = rows[rows["gpu"] == H100]
    assert set(zip(h100["run_id"], h100["dtype"])) == {("new", "float32"), ("fp16 only", "float16")}
    s = overview.summary(rows).set_index(["gpu", "dtype"])
    assert s.loc[(H100, "float32"), "hand_rate"] == 45000.0
    assert s.loc[(H100, "float16"), "hand / vendor"] == pytest.approx(700 / 740)


def test_roofline_has_the_roofs_and_a_marker_per_kernel(root):
    s = overview.summary(overview.load_results(root))
    fig = overview.roofline(s, H100, caption="test")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "HBM 3.35 TB/s" and [lbl.split()[0] for lbl in labels[1:]] == ["FP32", "FP16", "INT8"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 3   # hand, MetaSchedule, cuBLAS
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_every_recorded_database_is_read_with_the_workload_it_was_tuned_for():
    dbs, unread = overview.tuning_databases(ROOT)
    one_workload = [p for p in (ROOT / "results" / "tuning").glob("*/*/database_tuning_record.json")
                    if not is_model_database(p.parent)]   # a whole model's: every task a workload, no one curve
    assert not unread and len(dbs) == len(one_workload)
    for db in dbs:
        assert work_dir_for(ROOT, db.workload, db.space) == db.work_dir   # the name read back
    table = overview.tuning_table(dbs)
    assert list(table["trials"]) == [trials_done(db.work_dir) for db in dbs] and (table["best TFLOP/s"] > 0).all()
    gemm = [db for db in dbs if db.workload.name == "gemm"]
    fig = overview.tuning_figure(gemm, "gemm")   # a panel per space, a line per database
    spaces = sorted({db.space for db in gemm})
    assert [len(ax.get_lines()) for ax in fig.axes[:len(spaces)]] == [sum(db.space == s for db in gemm)
                                                                      for s in spaces]


def test_a_winograd_database_name_reads_back_its_workload(tmp_path):
    """``conv2d_winograd`` databases (the tuning CLI's Winograd workload): sizes N C H W K, then m."""
    wl = conv2d_winograd(256, 256, 14, 14, 512, m=4)
    work_dir = work_dir_for(tmp_path, wl)
    assert work_dir == tmp_path / "results" / "tuning" / "conv2d_winograd" / "float32_NCHW_256x256x14x14x512x4"
    read, space = overview.workload_of(work_dir)
    assert space == "default" and work_dir_for(tmp_path, read) == work_dir
    tvm.ir.assert_structural_equal(read.mod, wl.mod)


def test_database_names_that_are_not_ours_are_listed_not_guessed(tmp_path):
    for name in ("gemm/float32_64x64", "conv2d/float32_1x8x8x8x8x3x3x1x1", "fft/float32_1024"):
        (tmp_path / "results" / "tuning" / name).mkdir(parents=True)
        (tmp_path / "results" / "tuning" / name / "database_tuning_record.json").write_text("")
    dbs, unread = overview.tuning_databases(tmp_path)
    assert not dbs and len(unread) == 3


def test_index_links_only_what_exists(root, tmp_path):
    (root / "notebooks" / "00_overview.ipynb").write_text("{}")
    (root / "notebooks" / "01_vector_add.ipynb").write_text("{}")
    (root / "notebooks" / "03_gemm.ipynb").write_text("{}")
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    (out / "reports" / "01_vector_add.html").write_text("<html></html>")
    (out / "01_vector_add").mkdir()
    for name in ("a_first.png", "vector_add_bandwidth.png"):
        (out / "01_vector_add" / name).write_bytes(b"png")
    assert main_plot(out, "01_vector_add").name == "vector_add_bandwidth.png"   # the main plot, not the first
    page = write_index(out, root).read_text()
    targets = re.findall(r'(?:href|src)="([^"]+)"', page)
    assert sorted(set(targets)) == ["../01_vector_add/vector_add_bandwidth.png", "01_vector_add.html"]
    assert all((out / "reports" / t).resolve().exists() for t in targets)
    assert page.count("no report (not run, or it failed)") == 2 and page.count("<tr><td>") == 3
    assert "v2_float4 4,200 GB/s = 1.05x a+b, 88% of peak (NVIDIA H200, 2026-11-21, run r1)" in page
    assert "gemm 4096x4096x4096 float32: v5 45,000 GFLOP/s = 0.90x cublas_float32" in page
    assert "2 notebooks, 3 workload shapes" in index_html(out, root)


def test_nothing_recorded_yet_is_said_not_an_error(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "01_vector_add.ipynb").write_text("{}")
    assert overview.summary(overview.load_results(tmp_path)).empty
    assert "no GPU results recorded yet" in index_html(tmp_path / "out", tmp_path)


def test_throughput_plot_by_setup_and_gpus_and_without_a_file(root):
    empty = overview.throughput_figure(overview.tuning_throughput(root))   # no throughput.csv yet
    assert "no tuning run recorded yet" in empty.axes[0].texts[0].get_text()
    base = dict(timestamp="2026-11-24T00:00:00+00:00", workload="conv2d", shape="1x256x14x14x256x3x3x1x1",
                dtype="float32", space="default", best_gflops=900.0)
    rows = [dict(base, run_id=f"r{i}", gpu=gpu, gpus=n, runner=runner, setup=setup, trials=trials, seconds=seconds,
                 trials_per_min=60 * trials / seconds)
            for i, (gpu, n, runner, setup, trials, seconds) in enumerate([
                (H100, 1, "local", "stock", 32, 96.0), (H100, 1, "local", "tuned", 32, 64.0),
                (H100, 1, "local", "tuned", 96, 96.0), (H100, 1, "rpc", "tuned", 16, 96.0),
                (H200, 2, "rpc", "tuned", 64, 48.0), ("cpu", 2, "rpc", "tuned", 8, 96.0)])]
    throughput.append_rows(throughput.path_for(root), rows)
    runs = overview.tuning_throughput(root)
    assert "cpu" not in set(runs["gpu"])   # the tests' CPU runs are not GPU throughput
    table = overview.throughput_table(runs).set_index(["gpu", "gpus", "runner", "setup"])
    local = table.loc[(H100, 1, "local", "tuned")]   # 128 trials in 160 s: 48/min, not the median of 30 and 60
    assert (local["runs"], local["trials_per_min"], local["fastest_run"]) == (2, 48.0, 60.0)
    fig = overview.throughput_figure(runs)   # a panel per GPU and space, a bar per workload, runner, GPUs, setup
    widths = sorted(p.get_width() for ax in fig.axes for p in ax.patches)
    assert widths == [10.0, 20.0, 48.0, 80.0] and len([ax for ax in fig.axes if ax.patches]) == 2
    h100 = next(ax for ax in fig.axes if "H100" in ax.get_title())
    assert [t.get_text().split(" · ")[1] for t in h100.get_yticklabels()] == ["local, 1 GPU", "local, 1 GPU",
                                                                               "rpc, 1 GPU"]
    assert [t.get_text() for t in h100.get_legend().get_texts()] == ["tuned", "stock"]
    h200 = next(ax for ax in fig.axes if "H200" in ax.get_title())
    assert [t.get_text() for t in h200.get_legend().get_texts()] == ["tuned"]   # no empty "stock" entry


def test_spread_scaling_against_one_gpu_and_without_a_file(root):
    empty = overview.scaling_figure(overview.network_tuning(root))   # no network_tuning.csv yet
    assert "no spread tuning run recorded yet" in empty.axes[0].texts[0].get_text()
    base = dict(timestamp="2026-11-27T00:00:00+00:00", hosts=1, host_cores=64, cores_per_task=16, engine="dask",
                space="rules", tasks=23, trials_per_task=32, population=512, start_s=None)
    rows = [dict(base, run_id=f"r{i}", gpu=gpu, gpus=n, new_trials=736, wall_s=wall, trials_per_min=60 * 736 / wall)
            for i, (gpu, n, wall) in enumerate([(H200, 1, 800.0), (H200, 2, 440.0), (H200, 2, 500.0),
                                                (H200, 4, 250.0), ("cpu", 2, 100.0)])]
    path = spread.path_for(root)
    for row in rows:
        spread.append_row(path, row)
    runs = overview.network_tuning(root)
    assert "cpu" not in set(runs["gpu"])
    table = overview.scaling_table(runs).set_index("gpus")
    assert list(table.index) == [1, 2, 4] and table.loc[2, "run_id"] == "r1"   # the faster of the two 2-GPU runs
    assert table.loc[2, "speedup"] == pytest.approx(800 / 440) and table.loc[4, "speedup"] == pytest.approx(3.2)
    fig = overview.scaling_figure(runs)
    measured, ideal = fig.axes[0].lines
    assert list(measured.get_xdata()) == [1, 2, 4] and list(ideal.get_ydata()) == pytest.approx(
        [60 * 736 / 800 * n for n in (1, 2, 4)])

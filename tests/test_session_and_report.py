"""Without a GPU a run records nothing and plots recorded rows; the README table comes from the CSVs."""
import pytest
from test_results import row

from tirbench.bench.results import append_rows
from tirbench.bench.session import Session
from tirbench.core.machine import has_cuda_gpu, peak_for
from tirbench.report import gemm_rules
from tirbench.report import readme as report
from tirbench.tuning import throughput

pytestmark = pytest.mark.skipif(has_cuda_gpu(), reason="checks the no-GPU behaviour")


def make_root(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path


def test_cpu_session_writes_nothing_and_shows_recorded_rows(tmp_path, capsys):
    root = make_root(tmp_path)
    csv = root / "results" / "01_vector_add" / "results.csv"
    append_rows(csv, [row(), row(variant="a+b", provider="torch", gbps=4000.0)])
    before = csv.read_bytes()
    s = Session("01_vector_add", quick=True, root=root)
    assert "No CUDA GPU found" in capsys.readouterr().out
    assert s.commit() == 0 and csv.read_bytes() == before
    assert len(s.frame()) == 2 and s.label().startswith("recorded on NVIDIA H200, 2026-11-21")
    assert s.peak == peak_for("NVIDIA H200") and s.peak.hbm_tbps == 4.8
    assert s.figure_path("x.png") == root / "build" / "cpu-run" / "01_vector_add" / "x.png"
    assert Session("01_vector_add", save=False, root=root).figure_path("x.png") is None
    with pytest.raises(RuntimeError, match="only on a CUDA GPU"):
        s.record(None)


def test_gemm_rows_are_compared_with_cublas_of_their_dtype(tmp_path):
    root = make_root(tmp_path)
    shape = "4096x4096x4096"
    append_rows(root / "results" / "03_gemm" / "results.csv", [
        row(notebook="03_gemm", workload="gemm", shape=shape, variant="v5", gflops=40000.0),
        row(notebook="03_gemm", workload="gemm", shape=shape, variant="cublas_float32", provider="cublas",
            gflops=50000.0),
        row(notebook="03_gemm", workload="gemm", shape=shape, dtype="float16", variant="v7", gflops=300000.0),
        row(notebook="03_gemm", workload="gemm", shape=shape, dtype="float16", variant="cublas_float16",
            provider="cublas", gflops=750000.0)])
    table = report.headline_table(root)
    assert "| v5 | tvm |" in table and "0.800x cublas_float32" in table and "0.400x cublas_float16" in table


def test_readme_table_is_generated_from_csv(tmp_path):
    root = make_root(tmp_path)
    append_rows(root / "results" / "01_vector_add" / "results.csv",
                [row(variant="v2_float4", gbps=4200.0), row(variant="a+b", provider="torch", gbps=4000.0),
                 row(variant="v2_float4", shape="1048576", gbps=900.0)])
    readme = root / "README.md"
    readme.write_text(f"intro\n{report.START}\nold\n{report.END}\noutro\n")
    assert report.update_readme(readme, root)
    text = readme.read_text()
    assert "| 01_vector_add | vector_add | 67108864 | v2_float4 | tvm |" in text and "1.050x a+b" in text
    assert "1048576 |" not in text and "old" not in text and text.endswith("outro\n")
    assert "Not run on a GPU yet: `02_window_sum`, `03_gemm`," in text
    assert not report.update_readme(readme, root)


def test_conv_rows_are_compared_with_the_fastest_cudnn_and_the_sweep_has_a_geomean(tmp_path):
    root = make_root(tmp_path)
    last, stem = "1x512x7x7x512x3x3x1x1", "1x3x224x224x64x7x7x2x3"

    def conv(shape, variant, provider, ms):
        return row(notebook="05_conv2d_batch1", workload="conv2d", shape=shape, variant=variant, provider=provider,
                   median_ms=ms, gflops=1000.0 / ms)

    append_rows(root / "results" / "05_conv2d_batch1" / "results.csv", [
        conv(last, "nchw_splitk_ms", "metaschedule", 0.04), conv(last, "nchw_metaschedule", "metaschedule", 0.12),
        conv(last, "cudnn_nchw", "cudnn", 0.16), conv(last, "cudnn_nhwc", "cudnn", 0.14),
        conv(stem, "nchw_splitk_best", "tvm", 0.035), conv(stem, "cudnn_nchw", "cudnn", 0.021)])
    table = report.headline_table(root)
    assert "| nchw_splitk_ms | metaschedule | 0.0400 |" in table and "3.500x cudnn_nhwc" in table
    sweep = report.sweep_table(root)
    assert "| 1x512x7x7x512x3x3x1x1 | nchw_splitk_ms | 0.0400 | cudnn_nhwc | 0.1400 | 3.500x |" in sweep
    assert "| 1x3x224x224x64x7x7x2x3 | nchw_splitk_best | 0.0350 | cudnn_nchw | 0.0210 | 0.600x |" in sweep
    assert f"**{(3.5 * 0.6) ** 0.5:.3f}x**" in sweep   # geometric mean of the two ratios
    readme = root / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\n{report.SWEEPS[0].start}\nold\n{report.SWEEPS[0].end}\n")
    assert report.update_readme(readme, root) and "old" not in readme.read_text() and "1.449x" in readme.read_text()


def test_fp16_sweep_reads_notebook_06(tmp_path):
    root = make_root(tmp_path)
    layer = "32x512x7x7x512x3x3x1x1"
    append_rows(root / "results" / "06_conv2d_tensorcore" / "results.csv", [
        row(notebook="06_conv2d_tensorcore", workload="conv2d", shape=layer, variant=v, provider=p, median_ms=ms,
            gflops=1000.0 / ms, dtype="float16")
        for v, p, ms in (("nhwc_mma_best", "tvm", 0.07), ("nhwc_wmma_ms", "metaschedule", 0.06),
                         ("cudnn_nhwc", "cudnn", 0.02), ("cudnn_nchw", "cudnn", 0.05))])
    fp16 = next(s for s in report.SWEEPS if s.notebook == "06_conv2d_tensorcore")
    table = report.sweep_table(root, fp16)
    assert f"| {layer} | nhwc_wmma_ms | 0.0600 | cudnn_nhwc | 0.0200 | 0.333x |" in table
    assert "over 1 layers" in table
    assert report.sweep_table(root) == "not run on a GPU yet"   # the fp32 sweep reads only notebook 05


def test_int8_rows_are_compared_with_cudnns_fastest_fp16_run(tmp_path):
    """cuDNN has no int8 convolution in torch: the int8 rows fall back to its fastest run of the shape in any dtype,
    and the int8 sweep reads notebook 07."""
    root = make_root(tmp_path)
    big = "256x256x14x14x512x3x3x1x1"
    append_rows(root / "results" / "07_conv2d_int8" / "results.csv", [
        row(notebook="07_conv2d_int8", workload="conv2d", shape=big, variant=v, provider=p, median_ms=ms,
            gflops=1000.0 / ms, dtype=dt)
        for v, p, ms, dt in (("int8_wgmma_best", "tvm", 0.2, "int8"), ("int_mm_b_colmajor", "cublaslt", 0.175, "int8"),
                             ("cudnn_fp16_nhwc", "cudnn", 0.16, "float16"))])
    table = report.headline_table(root)
    assert "| int8_wgmma_best | tvm | 0.2000 |" in table and "0.800x cudnn_fp16_nhwc" in table
    int8 = next(s for s in report.SWEEPS if s.notebook == "07_conv2d_int8")
    assert f"| {big} | int8_wgmma_best | 0.2000 | cudnn_fp16_nhwc | 0.1600 | 0.800x |" in report.sweep_table(root, int8)


def test_padded_table_compares_each_padded_kernel_with_cublas_at_its_shape(tmp_path):
    root = make_root(tmp_path)
    odd, even = "2000x3000x1000", "2048x3072x1024"
    append_rows(root / "results" / "03_gemm_shapes" / "results.csv", [
        row(notebook="03_gemm_shapes", workload="gemm", shape=odd, dtype="float16", variant="v8_padded", gflops=300000.0),
        row(notebook="03_gemm_shapes", workload="gemm", shape=odd, dtype="float16", variant="cublas_float16",
            provider="cublas", gflops=400000.0),
        row(notebook="03_gemm_shapes", workload="gemm", shape=even, dtype="float16", variant="cublas_float16",
            provider="cublas", gflops=500000.0),
        row(notebook="03_gemm_shapes", workload="gemm", shape=odd, variant="v5_padded", gflops=30000.0)])  # no fp32 cuBLAS
    table = report.padded_table(root)
    assert f"| {odd} | v8_padded | float16 | 0.1900 | 300.0 | 400.0 | 0.750x |" in table
    assert "v5_padded" not in table   # nothing to compare it with in that run
    (tmp_path / "empty").mkdir()
    assert report.padded_table(make_root(tmp_path / "empty")) == "not run on a GPU yet"


def test_throughput_section_lists_every_tuning_run(tmp_path):
    root = make_root(tmp_path)
    readme = root / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\n<!-- tuning-throughput:start -->\n<!-- tuning-throughput:end -->\n")
    report.update_readme(readme, root)
    assert "no tuning run recorded yet" in readme.read_text()
    cells = ["r9", "t", "NVIDIA H100 80GB HBM3", 1, "local", "tuned", "conv2d", "1x256x14x14x256x3x3x1x1", "float32",
             "default", 32, 119.3, 16.09, 2410.2]
    throughput.append_rows(throughput.path_for(root), [dict(zip(throughput.COLUMNS, cells))])
    assert report.update_readme(readme, root)
    assert ("| r9 | NVIDIA H100 80GB HBM3 | 1 | local | tuned | conv2d float32 | 1x256x14x14x256x3x3x1x1 | default | "
            "32 | 119.3 | 16.09 |") in readme.read_text()


def test_gemm_rules_table_takes_each_latest_choice_and_the_cublas_of_its_run_that_writes_its_c(tmp_path):
    """``report.gemm_rules``: per shape, dtype and C the latest rules row, divided into the cuBLAS row of its own run
    that writes the same C (a float32 C: ``cublas_float16_fp32_c`` where the run has it, else ``cublas_float16``);
    a ratio under the goal says so; an older run's rows stay out."""
    root = make_root(tmp_path)
    shape = "2000x3000x1000"

    def gemm_row(run, time, variant, ms, dtype="float16", provider="tvm"):
        return row(run, f"2026-11-2{time}T00:00:00+00:00", notebook="kernel", workload="gemm", shape=shape,
                   dtype=dtype, variant=variant, provider=provider, median_ms=ms)
    append_rows(root / gemm_rules.CSV, [
        gemm_row("old", 7, "rules_v9_tma_ws", 0.040), gemm_row("old", 7, "cublas_float16", 0.025, provider="cublas"),
        gemm_row("new", 8, "rules_v9_tma_ws", 0.030), gemm_row("new", 8, "cublas_float16", 0.025, provider="cublas"),
        gemm_row("new", 8, "cublas_float16_fp32_c", 0.033, provider="cublas"),
        gemm_row("half", 9, "rules_v9_tma_ws_fp16_c", 0.0275), gemm_row("half", 9, "cublas_float16", 0.025,
                                                                          provider="cublas"),
        gemm_row("fp32", 9, "rules_v5_warp_tiled", 0.3, dtype="float32"),   # no cuBLAS in its run: left out
    ])
    table = report.gemm_rules_table(root)
    assert (f"| {shape} | float16 | float32 | rules_v9_tma_ws | 30.0 | cublas_float16_fp32_c | 33.0 | 1.10x | new |"
            in table)
    assert (f"| {shape} | float16 | half | rules_v9_tma_ws_fp16_c | 27.5 | cublas_float16 | 25.0 | 0.91x | half |"
            in table)
    assert "| old |" not in table and "rules_v5" not in table
    append_rows(root / gemm_rules.CSV, [
        gemm_row("newer", 9, "rules_v9_tma_ws", 0.030), gemm_row("newer", 9, "cublas_float16", 0.025,
                                                                 provider="cublas")])
    assert "| 30.0 | cublas_float16 | 25.0 | 0.83x (under the goal) | newer |" in report.gemm_rules_table(root)
    (tmp_path / "empty").mkdir()
    assert report.gemm_rules_table(make_root(tmp_path / "empty")) == "not run on a GPU yet"

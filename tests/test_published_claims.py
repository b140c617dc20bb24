"""What the README, the report index and the overview publish: seed-best tuned rows labelled, captions naming the
notebook whose file they read, no table mixing timing methods, each table from the latest run that has its rows,
the tuning runs behind today's databases, the index's headlines as the README's, plots with few enough series."""
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_results import row

from tirbench.bench.results import COLUMNS, append_rows, read_results
from tirbench.bench.winograd import ERROR_COLUMNS, ERROR_CSV
from tirbench.core.gpu import REFERENCE_GPU, arch_for
from tirbench.report import overview
from tirbench.report import readme as report
from tirbench.report.index import MAIN_PLOTS, headlines, index_html
from tirbench.report.published import CUDA_EVENTS_SINCE, seed_rows_first
from tirbench.report.tuning_runs import REPLACED, TODAY, runs_behind_databases, unrecorded_databases
from tirbench.schedules.common.record import for_arch
from tirbench.tuning import throughput
from tirbench.tuning.logs import log_chunk
from tirbench.tuning.spread import append_row

ROOT = Path(__file__).resolve().parents[1]
BIG = "256x256x14x14x512x3x3x1x1"
AFTER, BEFORE = "2026-11-26T00:00:00+00:00", "2026-11-21T00:00:00+00:00"
#: One pytest-xdist worker for the file: the regenerated README and the labelled rows (module fixtures, 25-30 s each)
#: are made once, not once per worker.
pytestmark = pytest.mark.xdist_group("published_claims")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """The README regenerated from the recorded files (``make readme``), in a copy."""
    copy = tmp_path_factory.mktemp("readme") / "README.md"
    shutil.copy(ROOT / "README.md", copy)
    report.update_readme(copy, ROOT)
    return copy.read_text()


def sections(text: str) -> dict[str, tuple[str, str]]:
    """Each generated section of ``text``: marker name -> (the paragraph above it, its body)."""
    found = {}
    for m in re.finditer(r"<!-- ([\w-]+):start -->\n(.*?)<!-- \1:end -->", text, re.S):
        above = text[:m.start()].rstrip().rsplit("\n\n", 1)[-1]
        found[m[1]] = (above, m[2])
    return found


def tables(body: str) -> list[tuple[str, str]]:
    """Each markdown table of a section's body and the text after it up to the next table (its caption)."""
    blocks = re.split(r"((?:^\|.*\n)+)", body, flags=re.M)
    return [(blocks[i], blocks[i + 1] if i + 1 < len(blocks) else "") for i in range(1, len(blocks), 2)]


def result_tables(text: str):
    """(section name, the paragraph above it, its body, a table, the text after the table) for each table of every
    generated section but the tuning-throughput, network-tuning and which-gpus ones (whose rows are runs and
    architectures) and gemm-rules (whose rows name their runs: ``test_gemm_rules_rows_name_recorded_runs``)."""
    for name, (above, body) in sections(text).items():
        if name not in ("tuning-throughput", "network-tuning", "which-gpus", "gemm-rules"):
            for table, after in tables(body):
                yield name, above, body, table, after


@pytest.fixture(scope="module")
def recorded():
    """Every recorded row, labelled (``overview.load_results``: the databases read once)."""
    return overview.load_results(ROOT)


def test_readme_is_what_make_readme_writes(regenerated):
    assert sections(regenerated) == sections((ROOT / "README.md").read_text())


def test_every_caption_names_the_notebook_whose_file_holds_its_run(regenerated):
    captions = re.findall(r"From `results/(\w+)/([\w.]+)`, run (\S+):", regenerated)
    assert len(captions) >= 12
    for nb, csv, run in captions:
        columns = ERROR_COLUMNS if csv == ERROR_CSV else COLUMNS
        assert run in set(read_results(ROOT / "results" / nb / csv, columns)["run_id"]), (nb, csv, run)
    for name, above, _, _, after in result_tables(regenerated):
        read = set(re.findall(r"From `results/(\w+)/", after))
        assert read, f"{name}: a table without a caption"
        named = set(re.findall(r"\b(0[0-8])(?:_\w+)?\b", above))   # notebooks the prose above names
        assert named <= {nb[:2] for nb in read}, f"{name}: the text above names {named}, it reads {read}"


def test_captions_name_the_notebook_read_on_a_small_root(tmp_path):
    """The batch-1 sweep reads notebook 05's file and says so (the README used to say 04)."""
    (tmp_path / "notebooks").mkdir()
    shapes = report.SWEEPS[0].shapes
    append_rows(tmp_path / "results" / "05_conv2d_batch1" / "results.csv", [
        row(notebook="05_conv2d_batch1", workload="conv2d", shape=shapes[0], variant=v, provider=p, median_ms=ms)
        for v, p, ms in (("nchw_splitk_best", "tvm", 0.05), ("cudnn_nchw", "cudnn", 0.04))])
    table = report.sweep_table(tmp_path, report.SWEEPS[0])
    assert "From `results/05_conv2d_batch1/results.csv`, run r1:" in table


def test_no_readme_table_mixes_runs_timed_before_and_after_cuda_events(regenerated):
    stamps = pd.concat([read_results(p) for p in (ROOT / "results").glob("*/results.csv")])
    when = dict(zip(stamps["run_id"], pd.to_datetime(stamps["timestamp"], utc=True)))
    for name, _, body, _, after in result_tables(regenerated):
        runs = set(re.findall(r"run (\d{8}T\d{6}Z-\w+)", after))
        assert runs, f"{name}: a table whose caption names no run"
        assert len({when[r] >= CUDA_EVENTS_SINCE for r in runs}) == 1, (name, runs)
        if any(when[r] < CUDA_EVENTS_SINCE for r in runs):
            assert "time_evaluator" in body, f"{name}: rows timed before CUDA events, not said"


def test_gemm_rules_rows_name_recorded_runs_timed_with_cuda_events(regenerated):
    """The GEMM rules table (``report.gemm_rules``): each row's run is in ``results/kernel/gemm_rules.csv``, timed
    with CUDA events (as every run of ``tools/gpu-checks/gemm_rules.py``), and its caption names that file."""
    _, body = sections(regenerated)["gemm-rules"]
    recorded = read_results(ROOT / "results" / "kernel" / "gemm_rules.csv")
    when = dict(zip(recorded["run_id"], pd.to_datetime(recorded["timestamp"], utc=True)))
    runs = re.findall(r"\| (\d{8}T\d{6}Z-\w+) \|$", body, re.M)
    assert runs and all(when[r] >= CUDA_EVENTS_SINCE for r in runs)
    assert "From `results/kernel/gemm_rules.csv`" in body


def test_seed_best_rows_are_labelled_and_the_search_best_sits_beside_them(tmp_path):
    (tmp_path / "notebooks").mkdir()
    rows = [row(run_id="n", timestamp=AFTER, notebook="06_conv2d_tensorcore", workload="conv2d", shape=BIG,
                dtype="float16", variant=v, provider=p, median_ms=ms, gflops=1000 / ms, tuned_best=t)
            for v, p, ms, t in (("nhwc_wgmma_ms", "metaschedule", 0.17, "seed"), ("cudnn_nhwc", "cudnn", 0.155, ""),
                                ("nhwc_tma_ws_best", "tvm", 0.18, ""),
                                ("nhwc_wgmma_ms_search_best", "metaschedule", 0.19, "search"))]
    append_rows(tmp_path / "results" / "06_conv2d_tensorcore" / "results.csv", rows)
    table = report.headline_table(tmp_path)
    lines = [line for line in table.splitlines() if line.startswith("| 06_")]
    assert "| nhwc_wgmma_ms (best record: the hand seed) | metaschedule |" in lines[0]
    assert "| nhwc_wgmma_ms_search_best | metaschedule |" in lines[1]   # beside the seed row
    s = overview.summary(overview.load_results(tmp_path))
    assert s["ms"].iloc[0] == "nhwc_wgmma_ms (best record: the hand seed)"
    (tmp_path / "notebooks" / "06_conv2d_tensorcore.ipynb").write_text("{}")
    assert "nhwc_wgmma_ms (best record: the hand seed) 5,882 GFLOP/s" in index_html(tmp_path / "out", tmp_path)


def test_search_best_rows_move_beside_their_seed_row():
    df = pd.DataFrame({"variant": ["a", "b", "c", "a_search_best"], "shape": ["s"] * 4, "dtype": ["d"] * 4})
    assert list(seed_rows_first(df)["variant"]) == ["a", "a_search_best", "b", "c"]


def test_a_partial_run_does_not_blank_a_sweep(tmp_path):
    """A later run that measured one other layer: the sweep still shows the run that has its layers."""
    (tmp_path / "notebooks").mkdir()
    sweep = report.SWEEPS[2]
    full = [row(run_id="full", timestamp=BEFORE, notebook=sweep.notebook, workload="conv2d", shape=sweep.shapes[1],
                dtype=dt, variant=v, provider=p, median_ms=ms)
            for v, p, ms, dt in (("int8_mma_best", "tvm", 0.03, "int8"), ("cudnn_fp16_nhwc", "cudnn", 0.03, "float16"))]
    part = [row(run_id="part", timestamp=AFTER, notebook=sweep.notebook, workload="conv2d", shape="8x8x8x8x8x1x1x1x0",
                dtype="int8", variant="int8_mma_best", median_ms=0.01)]
    append_rows(tmp_path / "results" / sweep.notebook / "results.csv", full + part)
    table = report.sweep_table(tmp_path, sweep)
    assert f"| {sweep.shapes[1]} | int8_mma_best | 0.0300 |" in table and "run full:" in table


def test_overview_reads_each_variant_from_its_latest_run(recorded):
    """08's int8-only run measured cuDNN fp16 again: the fp16 rules rows of the run before are still shown."""
    s = overview.summary(recorded)
    fp16 = s[(s["notebook"] == "08_resnet50") & (s["dtype"] == "float16")]
    assert set(fp16[~fp16["ptx"]].groupby("gpu").size()) == {23}   # each GPU's latest run of every layer
    assert fp16["hand"].notna().all()   # no row of the vendor alone (a PTX run measures it natively beside its code)
    assert fp16.loc[~fp16["ptx"], "hand / vendor"].notna().all() and fp16.loc[fp16["ptx"], "hand / vendor"].isna().all()
    wgmma = s[(s["notebook"] == "06_conv2d_tensorcore") & (s["shape"] == BIG)]
    assert wgmma["ms"].iloc[0].endswith("(best record: the hand seed)")


def test_tuning_runs_are_marked_by_whether_todays_database_comes_from_them(tmp_path):
    work_dir = tmp_path / "results" / "tuning" / "gemm" / "float16_64x64x64"
    work_dir.mkdir(parents=True)
    (work_dir / "database_tuning_record.json").write_text("")
    log_chunk(work_dir, 32, 32, 10.0)   # finished now
    now = pd.Timestamp.now(tz="UTC")
    base = dict(gpu="NVIDIA H100 80GB HBM3", gpus=1, runner="local", setup="tuned", workload="gemm",
                shape="64x64x64", dtype="float16", space="default", trials=32, seconds=20.0, trials_per_min=96.0,
                best_gflops=1.0)
    throughput.append_rows(throughput.path_for(tmp_path), [
        dict(base, run_id="old", timestamp=(now - pd.Timedelta(days=2)).isoformat()),
        dict(base, run_id="new", timestamp=now.isoformat())])
    runs = runs_behind_databases(tmp_path).set_index("run_id")["database"]
    assert (runs["old"], runs["new"]) == (REPLACED, TODAY)
    assert unrecorded_databases(tmp_path) == []
    assert "| old |" in report.throughput_table(tmp_path) and f"| {TODAY} |" in report.throughput_table(tmp_path)


def test_the_readmes_spread_runs_compare_a_gpu_count_only_with_an_earlier_1_gpu_run_of_the_same_tasks(tmp_path):
    assert report.network_tuning_table(tmp_path) == "no run of `tirbench.tuning.spread` recorded yet"
    path = tmp_path / "results" / "tuning" / "network_tuning.csv"
    base = dict(timestamp="2026-11-28T00:00:00+00:00", gpu="NVIDIA H200", hosts=1, host_cores=64, cores_per_task=16,
                engine="dask", space="rules", tasks=23, trials_per_task=32, population=512, new_trials=736, start_s=None)
    runs = [("two", 2, 200.0, {}), ("one", 1, 360.0, {}), ("fewer", 1, 100.0, {"trials_per_task": 8}),
            ("small", 1, 150.0, {"population": 128}), ("small2", 2, 100.0, {"population": 128}),
            ("smaller host", 2, 100.0, {"host_cores": 32}), ("ready4", 4, 60.0, {"start_s": 30.0}),
            ("ready1", 1, 240.0, {"start_s": 30.0}),
            ("later1", 1, 120.0, {"start_s": 30.0, "timestamp": "2026-11-29T00:00:00+00:00", "cores_per_task": 64}),
            ("later4", 4, 40.0, {"start_s": 30.0, "timestamp": "2026-11-29T01:00:00+00:00"})]
    for run_id, gpus, wall, other in runs:
        append_row(path, {**base, "run_id": run_id, "gpus": gpus, "wall_s": wall, "trials_per_min": 60 * 736 / wall,
                          **other})
    lines = report.network_tuning_table(tmp_path).splitlines()
    assert lines[2].startswith("| two | NVIDIA H200 | 2 |") and lines[2].endswith("| 1.80x (one) |  |")
    assert lines[3].endswith("| 512 | in the first tasks | 360.0 | 122.7 |  |  |")   # the reference, not compared
    assert lines[6].endswith("| 128 | in the first tasks | 100.0 | 441.6 | 1.50x (small) |  |")   # its population
    assert lines[7].endswith("| no 1-GPU run recorded |  |")   # a 1-GPU run on a 64-core host is not its reference
    # a run whose tuning processes were ready first: against such a 1-GPU run only, its tuning and the whole command
    assert lines[8].endswith("| 16 | rules | 23 x 32 | 512 | 30.0 | 60.0 | 736.0 | 4.00x (ready1) | 3.00x |")
    # the 1-GPU run of its own session: a later one is not ready4's reference
    assert lines[10].endswith("| 64 | rules | 23 x 32 | 512 | 30.0 | 120.0 | 368.0 |  |  |")
    assert lines[11].endswith("| 512 | 30.0 | 40.0 | 1104.0 | 3.00x (later1) | 2.14x |")


def test_index_covers_every_notebook_and_shares_the_readmes_headline(regenerated, recorded):
    assert {nb.stem for nb in (ROOT / "notebooks").glob("[0-9]*.ipynb")} <= set(MAIN_PLOTS)
    s = overview.summary(recorded)
    int8 = headlines(s, "07_conv2d_int8", recorded[recorded["notebook"] == "07_conv2d_int8"])
    readme_row = next(line for line in regenerated.splitlines() if line.startswith("| 07_") and "int8_tma_ws_best" in line)
    ratio = re.search(r"\| (\d\.\d+)x (\w+) \|", readme_row)
    # one line per GPU; the README's (its latest run) among them, against its baseline, not cuBLASLt's int8
    shown = [float(m[1]) for line in int8 if (m := re.search(rf"= (\d\.\d+)x {ratio[2]},", line))]
    assert any(abs(x - float(ratio[1])) < 0.0051 for x in shown)   # the index rounds to two decimals, README three
    conv = headlines(s, "04_conv2d", recorded[recorded["notebook"] == "04_conv2d"])
    winograd = [line for line in conv if line.split(": ")[1].startswith("winograd_f")]
    assert winograd and all("direct convolution's FLOPs" in line and not re.search(r"\d% of peak", line)
                            for line in winograd)   # 04's best: no "170% of peak" unexplained


def test_plots_have_few_panels_and_few_colours_per_panel():
    fig = overview.throughput_figure(overview.tuning_throughput(ROOT))
    runs = overview.tuning_throughput(ROOT)
    assert len([ax for ax in fig.axes if ax.patches]) == runs.groupby(["gpu", "space"]).ngroups <= 6
    assert fig.get_size_inches()[1] * 110 > 30 * len(overview.throughput_table(runs))   # 30 px a bar at least
    dbs, _ = overview.tuning_databases(ROOT)
    conv = overview.tuning_figure([db for db in dbs if db.workload.name == "conv2d"], "conv2d")
    for ax in conv.axes:
        colours = {line.get_color() for line in ax.get_lines()}
        assert len(colours) <= overview.LEGEND_MAX


def test_rows_timed_before_cuda_events_get_their_own_labelled_table(tmp_path):
    (tmp_path / "notebooks").mkdir()
    append_rows(tmp_path / "results" / "01_vector_add" / "results.csv",
                [row(variant="v2_float4"), row(variant="a+b", provider="torch")])   # 2026-11-21: time_evaluator
    append_rows(tmp_path / "results" / "02_window_sum" / "results.csv", [
        row(run_id="w", timestamp=AFTER, notebook="02_window_sum", workload="copy", variant=v, provider=p)
        for v, p in (("copy", "torch"), ("copy_float4", "tvm"))])
    text = report.headline_table(tmp_path)
    found = tables(text)
    assert len(found) == 2 and "| 02_window_sum |" in found[0][0] and "| 01_vector_add |" in found[1][0]
    assert "| 01_" not in found[0][0] and "time_evaluator" in text.split(found[1][0])[0].rsplit("\n\n", 2)[-2]


def test_each_headline_row_is_compared_with_its_own_shapes_baseline(regenerated):
    """A headline of several shapes divides each row by the baseline of the row's own shape and dtype: the baseline
    row itself reads 1.000x (a 1024^3 cuBLAS row once divided the 4096^3 rows)."""
    body = sections(regenerated)["results"][1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()
             if line.startswith("| 0")]
    baselines = [c for c in cells if c[7].endswith(f"x {c[3]}")]
    assert baselines, "no baseline row in the headline table"
    assert all(c[7] == f"1.000x {c[3]}" for c in baselines), [c[:8] for c in baselines if not c[7].startswith("1.000")]


def test_the_which_gpus_table_has_each_architecture_with_the_families_its_features_build(regenerated):
    """A row per architecture the suite plans for, its families exactly those whose ``needs`` it has (Turing's none
    with cp.async), and the Hopper build's row says its runs were measured natively."""
    _, body = sections(regenerated)["which-gpus"]
    rows = [line.strip("|").split(" | ") for line in body.splitlines() if line.startswith("| sm_")]
    assert [row[0].strip() for row in rows] == list(REFERENCE_GPU)
    families = report.all_families()
    for arch, _, built, runs in rows:
        arch = arch.strip()
        assert re.findall(r"`(\w+)`", built) == [r.name for r in for_arch(families, arch)[0]], arch
        if arch == "sm_75":
            assert all("cp_async" not in r.needs for r in for_arch(families, arch)[0])
        if arch == arch_for("9.0"):
            assert runs.startswith("measured natively on ")

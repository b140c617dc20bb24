"""MetaSchedule wrappers on the committed tuning database: count, history, replay, and no tuning without a GPU;
the registry of design spaces (which workloads each takes, its database, target and build config) and the CLI."""
import functools
import pickle
import shutil
from pathlib import Path

import pandas as pd
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.core.cuda_source import device_source
from tirbench.core.machine import has_cuda_gpu
from tirbench.schedules.common.tiling import SIMT_ASYNC_CONFIG
from tirbench.schedules.gemm.simt import gemm_v5_warp_tiled
from tirbench.tuning.builders import build_candidate
from tirbench.tuning.cli import cli_workloads, main
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import HISTORY_FILE, trials_done, tuner_vs_harness, tuning_history, where_it_flattens
from tirbench.tuning.spaces import SPACES, V5_SPACE_VARIANTS, get_space, v5_space
from tirbench.tuning.tune import space_target, tune, tuned_pass_config, work_dir_for
from tirbench.workloads import conv2d, conv2d_winograd, gemm

ROOT = Path(__file__).resolve().parents[1]
WL = gemm(1024, 1024, 1024)
CONV = conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)
RECORDED = work_dir_for(ROOT, WL)
pytestmark = pytest.mark.skipif(trials_done(RECORDED) == 0, reason="no recorded fp32 1024^3 tuning database")


@pytest.fixture
def work_dir(tmp_path):
    shutil.copytree(RECORDED, tmp_path / "db")
    return tmp_path / "db"


def test_work_dir_layout():
    assert RECORDED == ROOT / "results" / "tuning" / "gemm" / "float32_1024x1024x1024"


def test_history_is_a_running_best(work_dir):
    h = tuning_history(work_dir, WL.flops)
    assert len(h) == trials_done(work_dir) > 0
    assert (h["best_gflops"].diff().dropna() >= 0).all() and h["best_gflops"].iloc[-1] == h["gflops"].max() > 0


def test_history_keeps_the_tuning_order(work_dir):
    """Without a history file, the first trial of the record file comes first, whatever its speed (the database API
    sorts by speed)."""
    (work_dir / HISTORY_FILE).unlink()
    path = work_dir / "database_tuning_record.json"
    lines = path.read_text().splitlines()
    slow = int(tuning_history(work_dir, WL.flops)["gflops"].to_numpy().argmin())
    path.write_text("\n".join([lines[slow], *lines[:slow], *lines[slow + 1:]]) + "\n")
    h = tuning_history(work_dir, WL.flops)
    assert h["gflops"].iloc[0] == h["gflops"].min() < h["gflops"].max()


def test_best_schedule_replays_and_compiles_for_sm90a(work_dir):
    sch = best_schedule(open_database(work_dir), WL)
    assert any("sample_perfect_tile" in line for line in str(sch.trace).splitlines())
    src = device_source(sch)
    assert "__global__" in src and "threadIdx" in src


def test_enough_trials_means_no_tuning(work_dir):
    before = sorted(p.stat().st_mtime_ns for p in work_dir.iterdir())
    tune(WL, work_dir, trials=trials_done(work_dir))
    assert sorted(p.stat().st_mtime_ns for p in work_dir.iterdir()) == before


@pytest.mark.skipif(has_cuda_gpu(), reason="checks the no-GPU error")
def test_more_trials_without_gpu_is_one_clear_error(work_dir):
    with pytest.raises(RuntimeError, match="no CUDA GPU found"):
        tune(WL, work_dir, trials=trials_done(work_dir) + 1)


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="no tuned schedule for gemm float32 512x512x512"):
        best_schedule(open_database(tmp_path / "empty"), gemm(512, 512, 512))


def test_v5_space_has_its_own_database_and_fp32_only():
    assert work_dir_for(ROOT, WL, "v5").name == "float32_1024x1024x1024_v5space"
    with pytest.raises(ValueError, match="fp32 GEMM template"):
        work_dir_for(ROOT, gemm(1024, 1024, 1024, "float16"), "v5")
    with pytest.raises(ValueError, match="space='v7'"):
        work_dir_for(ROOT, WL, "v7")


def test_v5_space_target_allows_dynamic_shared_memory():
    assert space_target("v5").attrs["max_shared_memory_per_block"] == 227 * 1024
    assert space_target("default").attrs["max_shared_memory_per_block"] == 48 * 1024


def test_v5_space_best_replays_with_cp_async(tmp_path):
    recorded = work_dir_for(ROOT, WL, "v5")
    if trials_done(recorded) == 0:
        pytest.skip("no recorded v5-space database")
    shutil.copytree(recorded, tmp_path / "db")
    sch = best_schedule(open_database(tmp_path / "db"), WL, space_target("v5"))
    with tvm.transform.PassContext(config=SIMT_ASYNC_CONFIG):
        assert "cp.async" in device_source(sch)


CONV_ARGS = ["conv2d", "1", "512", "7", "7", "512", "3", "3", "1", "1"]
WINOGRAD_ARGS = ["conv2d_winograd", "256", "256", "14", "14", "512", "3", "3", "1", "1"]


@pytest.mark.parametrize("argv, message", [
    (["gemm", "1024", "1024", "1024", "--dtype", "float16", "--space", "v5", "--trials", "1"], "fp32 GEMM template"),
    (["gemm", "1024", "1024", "0", "--trials", "1"], "k must be a positive integer"),
    (["gemm", "1024", "1024", "--trials", "1"], "gemm takes groups of 3 sizes (M N K), got 2"),
    (["gemm", "1024", "1024", "1024", "--layout", "NCHW", "--trials", "1"], "--layout=NCHW: only conv2d has a layout"),
    (["gemm", "1024", "1024", "1024", "--space", "template", "--trials", "1"],
     "space='template': the conv2d template needs a float32 NCHW conv2d, not gemm float32"),
    (CONV_ARGS[:-1] + ["--trials", "1"], "conv2d takes groups of 9 sizes (N C H W K R S STRIDE PAD), got 8"),
    (CONV_ARGS + CONV_ARGS[1:2] + ["--trials", "1"], "conv2d takes groups of 9 sizes (N C H W K R S STRIDE PAD), got 10"),
    (CONV_ARGS + CONV_ARGS[1:5] + ["0"] + CONV_ARGS[6:] + ["--trials", "1"], "k must be a positive integer, got 0"),
    (CONV_ARGS[:5] + ["0"] + CONV_ARGS[6:] + ["--trials", "1"], "k must be a positive integer, got 0"),
    (CONV_ARGS[:-1] + ["3", "--trials", "1"], "pad=3 must be smaller than the kernel r=3"),
    (CONV_ARGS + ["--layout", "NCWH", "--trials", "1"], "unknown layout 'NCWH'"),
    (CONV_ARGS + ["--dtype", "int8", "--trials", "1"], "unsupported dtype 'int8'"),
    (CONV_ARGS + ["--space", "v7", "--trials", "1"], "invalid choice: 'v7'"),
    (CONV_ARGS + ["--space", "v5", "--trials", "1"], "space='v5' is the fp32 GEMM template, not conv2d float32"),
    (CONV_ARGS + ["--layout", "NHWC", "--space", "template", "--trials", "1"],
     "the conv2d template needs a float32 NCHW conv2d, not conv2d float32 NHWC"),
    (CONV_ARGS + ["--m", "4", "--trials", "1"], "--m=4: only conv2d_winograd has an output tile"),
    (WINOGRAD_ARGS[:-2] + ["2", "1", "--trials", "1"], "stride=2: Winograd computes every output of a tile"),
    (WINOGRAD_ARGS + ["--m", "3", "--trials", "1"], "m=3: Winograd transforms exist here for m = 2"),
    (WINOGRAD_ARGS + ["--layout", "HWCN", "--trials", "1"], "unknown layout 'HWCN'"),
    (WINOGRAD_ARGS + ["--space", "splitk", "--trials", "1"],
     "the conv2d template needs a float32 NCHW conv2d, not conv2d_winograd float32 NCHW"),
])
def test_cli_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and message in err[-1] and "Traceback" not in "\n".join(err)


def test_cli_groups_of_sizes_are_several_workloads():
    wls = cli_workloads("conv2d", [1, 64, 56, 56, 64, 3, 3, 1, 1, 32, 512, 7, 7, 512, 3, 3, 1, 1], "float16", "NHWC")
    assert [wl.shape for wl in wls] == ["1x64x56x56x64x3x3x1x1", "32x512x7x7x512x3x3x1x1"]
    assert {(wl.dtype, wl.layout) for wl in wls} == {("float16", "NHWC")}


def test_cli_winograd_workload_is_the_notebooks_module_with_its_own_database():
    """``conv2d_winograd`` sizes name the same module as ``conv2d_winograd(...)`` (F(4x4) unless ``--m``), so the
    database it tunes is the one notebook 04 replays; the module carries ``tirx.noalias``, without which
    MetaSchedule's normalised workload never matches it."""
    (f4,), (f2,) = (cli_workloads("conv2d_winograd", [int(v) for v in WINOGRAD_ARGS[1:]], "float32", None, m)
                    for m in (None, 2))
    tvm.ir.assert_structural_equal(f4.mod, conv2d_winograd(256, 256, 14, 14, 512, m=4).mod)
    assert f2.shape == "256x256x14x14x512x2" and bool(f4.mod["main"].attrs["tirx.noalias"])
    assert work_dir_for(ROOT, f4).relative_to(ROOT / "results" / "tuning").as_posix() == \
        "conv2d_winograd/float32_NCHW_256x256x14x14x512x4"


@pytest.mark.skipif(has_cuda_gpu(), reason="checks the no-GPU error")
def test_cli_template_space_without_gpu_is_one_line_and_writes_nothing(capsys):
    work_dir = work_dir_for(ROOT, CONV, "template")
    before = (work_dir.exists(), trials_done(work_dir))
    with pytest.raises(SystemExit) as exit_info:
        main(CONV_ARGS + ["--layout", "NCHW", "--space", "template", "--trials", "1000000"])
    assert exit_info.value.code == 2 and "no CUDA GPU found" in capsys.readouterr().err.strip().splitlines()[-1]
    assert (work_dir.exists(), trials_done(work_dir)) == before


#: Which of these workloads each registered space takes (a new space needs a row).
REGISTRY_WORKLOADS = {"gemm fp32": WL, "gemm fp16": gemm(256, 256, 256, "float16"), "conv NCHW": CONV,
                      "conv NHWC": conv2d(1, 512, 7, 7, 512, layout="NHWC"),
                      "conv NHWC fp16": conv2d(32, 64, 7, 7, 64, layout="NHWC", dtype="float16"),
                      "winograd": conv2d_winograd(1, 8, 8, 8, 8, m=2)}
ACCEPTS = {"default": set(REGISTRY_WORKLOADS), "v5": {"gemm fp32"}, "template": {"conv NCHW"},
           "splitk": {"conv NCHW"}, "rules": {"conv NCHW"}, "wmma": {"conv NHWC fp16"},
           "wgmma": {"gemm fp16", "conv NHWC fp16"}}


@pytest.mark.parametrize("space", list(SPACES))
def test_each_space_takes_only_its_workloads(space):
    assert set(ACCEPTS) == set(SPACES)
    for name, wl in REGISTRY_WORKLOADS.items():
        if name in ACCEPTS[space]:
            get_space(space).require(wl)
            assert work_dir_for(ROOT, wl, space).name.endswith(get_space(space).db_suffix)
        else:
            with pytest.raises(ValueError, match=f"^space='{space}'[^\n]*$"):
                work_dir_for(ROOT, wl, space)


def test_unknown_space_is_one_line():
    with pytest.raises(ValueError, match=r"^space='v7': expected one of 'default', 'v5', 'template'(, '\w+')*$"):
        get_space("v7")


def test_conv_work_dirs_carry_the_layout():
    assert work_dir_for(ROOT, CONV, "template") == (ROOT / "results" / "tuning" / "conv2d"
                                                    / "float32_NCHW_1x512x7x7x512x3x3x1x1_templatespace")
    assert work_dir_for(ROOT, CONV).name == "float32_NCHW_1x512x7x7x512x3x3x1x1"
    assert get_space("v5").db_suffix == "_v5space" and get_space("default").db_suffix == ""


def test_template_space_is_a_schedule_fn_with_static_shared_memory():
    """The template searches with the "cuda" postprocessors (VerifyGPUCode last) and mutates only tile sizes;
    it uses static shared memory, so it tunes against the tag's 48 KB, and builds with no extra config."""
    gen = get_space("template").generator(CONV)
    assert isinstance(gen, ms.space_generator.ScheduleFn) and not gen.sch_rules
    assert type(gen.postprocs[-1]).__name__ == "VerifyGPUCode"
    assert [type(m).__name__ for m in gen.mutator_probs] == ["MutateTileSize"]
    assert space_target("template").attrs["max_shared_memory_per_block"] == 48 * 1024
    assert tuned_pass_config(CONV, "template") == {}
    assert get_space("default").generator(CONV) == "post-order-apply"


def test_v5_space_has_both_ffma_orders():
    """One design space per variant; the column-by-column ones carry one more loop reorder than their twins."""
    spaces = v5_space(s_tir.Schedule(WL.mod, seed=1))
    assert len(spaces) == len(V5_SPACE_VARIANTS) == 24
    reorders = {variant: str(sch.trace).count("sch.reorder(") for variant, sch in zip(V5_SPACE_VARIANTS, spaces)}
    for (lanes, stages, prefetch, columns_outer), n in reorders.items():
        if columns_outer:
            assert n == reorders[(lanes, stages, prefetch, False)] + 1


def test_candidate_build_uses_the_tuned_pass_config():
    """The builders' ``f_build`` (``build_candidate``) survives pickling (it runs in worker processes) and builds the v5 space's
    candidates as the notebook builds them: with cp.async copies."""
    config = tuned_pass_config(WL, "v5")
    f_build = pickle.loads(pickle.dumps(functools.partial(build_candidate, None, config)))
    sch = gemm_v5_warp_tiled(s_tir.Schedule(WL.mod))
    src = f_build(sch.mod, space_target("v5"), None).imports[0].inspect_source()
    assert config == SIMT_ASYNC_CONFIG and "cp.async" in src
    assert tuned_pass_config(WL) == {}


def test_where_it_flattens_names_the_trial_the_curve_reaches_its_final_best():
    h = pd.DataFrame({"trial": range(1, 9), "gflops": [0.0, 10, 50, 40, 99.5, 20, 100, 30]})
    h["best_gflops"] = h["gflops"].cummax()
    assert where_it_flattens(h) == {"trials": 8, "best_gflops": 100.0, "flat_from": 5, "half_budget": 0.5}
    assert where_it_flattens(h, fraction=1.0)["flat_from"] == 7
    failed = pd.DataFrame({"trial": [1, 2], "gflops": [0.0, 0.0], "best_gflops": [0.0, 0.0]})
    assert where_it_flattens(failed) == {"trials": 2, "best_gflops": 0.0, "flat_from": 0, "half_budget": 0.0}


def test_tuner_vs_harness_puts_the_recorded_best_beside_the_replayed_time(tmp_path):
    """The recorded database of the v5 space at 1024^3: its best trial as MetaSchedule's runner measured it, beside a
    harness measurement of the replayed kernel, with their ratio."""
    from tirbench.bench.harness import Measurement, Timing
    from tirbench.workloads import gemm

    src = Path(__file__).resolve().parents[1] / "results" / "tuning" / "gemm" / "float32_1024x1024x1024_v5space"
    wd = tmp_path / "db"
    shutil.copytree(src, wd)
    wl = gemm(1024, 1024, 1024)
    best = float(tuning_history(wd, wl.flops)["gflops"].max())
    half = Measurement(wl, "metaschedule_v5_space_float32", "metaschedule",
                       Timing(median_ms=2 * wl.flops / best / 1e6, p20_ms=0.0, p80_ms=0.0, repeats=1))
    line = tuner_vs_harness(wd, half)
    assert line.startswith("metaschedule_v5_space_float32: tuner recorded ") and line.endswith("(0.50x)")
    assert f"{best / 1e3:.2f} TFLOP/s for its best trial" in line


def test_cli_budget_already_reached_says_so_and_touches_nothing(tmp_path, capsys):
    db = tmp_path / "db"
    shutil.copytree(RECORDED, db / RECORDED.relative_to(ROOT / "results" / "tuning"))
    done = trials_done(RECORDED)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in db.rglob("*"))
    assert main(["gemm", "1024", "1024", "1024", "--trials", str(done), "--db", str(db)]) == 0   # no GPU needed
    assert capsys.readouterr().out.strip() == (f"[tuning] gemm 1024x1024x1024 float32: {done} trials recorded, "
                                               f"budget {done}: nothing to tune")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in db.rglob("*")) == before


@pytest.mark.parametrize("option, value", [("--trials", "0"), ("--trials", "-5"), ("--chunk", "0"), ("--chunk", "-3"),
                                           ("--seconds", "-1"), ("--seconds", "0"), ("--trials", "many")])
def test_cli_budget_that_is_not_positive_is_one_line_and_status_2(option, value, capsys):
    argv = ["gemm", "64", "64", "64", "--target", "llvm", "--trials", "4", option, value]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and len(err) == 1
    assert err[0].endswith(f"error: argument {option}: expected a positive "
                           f"{'float' if option == '--seconds' else 'int'}, got '{value}'")


def test_cli_help_explains_dtype_trials_and_chunk(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exit_info.value.code == 0
    assert "--dtype DTYPE float32 (default) or float16" in out
    assert "--trials TRIALS tune until the database has this many trials" in out
    assert "--chunk CHUNK trials per call of MetaSchedule" in out


def test_only_a_gpu_run_into_results_appends_to_the_recorded_throughput(tmp_path):
    from tirbench.tuning import throughput

    recorded, scratch = throughput.path_for(tmp_path), tmp_path / "build" / "tuning" / "throughput.csv"
    in_results = tmp_path / "results" / "tuning" / "gemm" / "float32_64x64x64"
    assert throughput.path_for_run(tmp_path, in_results, gpu=True) == recorded
    assert throughput.path_for_run(tmp_path, in_results, gpu=False) == scratch
    assert throughput.path_for_run(tmp_path, tmp_path / "x" / "gemm" / "float32_64x64x64", gpu=True) == scratch

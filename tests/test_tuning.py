"""MetaSchedule wrappers on the committed tuning database: count, history, replay, and no tuning without a GPU."""
import functools
import pickle
import shutil
from pathlib import Path

import pytest
import tvm
from tvm import s_tir

from tirbench.cuda_source import device_source
from tirbench.machine import has_cuda_gpu
from tirbench.schedules.gemm import SIMT_ASYNC_CONFIG, gemm_v5_warp_tiled
from tirbench.tuning import (V5_SPACE_VARIANTS, best_schedule, build_with_config, open_database, space_target,
                             trials_done, tune, tuned_pass_config, tuning_history, v5_space, work_dir_for)
from tirbench.workloads import gemm

ROOT = Path(__file__).resolve().parents[1]
WL = gemm(1024, 1024, 1024)
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
    """The first trial of the record file comes first, whatever its speed (the database API sorts by speed)."""
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


@pytest.mark.parametrize("argv, message", [
    (["gemm", "1024", "1024", "1024", "--dtype", "float16", "--space", "v5", "--trials", "1"], "fp32 GEMM template"),
    (["gemm", "1024", "1024", "0", "--trials", "1"], "k must be a positive integer"),
])
def test_cli_bad_input_is_one_line(argv, message, capsys):
    from tirbench.tuning import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and message in err[-1] and "Traceback" not in "\n".join(err)


def test_v5_space_has_both_ffma_orders():
    """One design space per variant; the column-by-column ones carry one more loop reorder than their twins."""
    spaces = v5_space(s_tir.Schedule(WL.mod, seed=1))
    assert len(spaces) == len(V5_SPACE_VARIANTS) == 24
    reorders = {variant: str(sch.trace).count("sch.reorder(") for variant, sch in zip(V5_SPACE_VARIANTS, spaces)}
    for (lanes, stages, prefetch, columns_outer), n in reorders.items():
        if columns_outer:
            assert n == reorders[(lanes, stages, prefetch, False)] + 1


def test_candidate_build_uses_the_tuned_pass_config():
    """The builders' ``f_build`` survives pickling (it runs in worker processes) and builds the v5 space's
    candidates as the notebook builds them: with cp.async copies."""
    config = tuned_pass_config(WL, "v5")
    f_build = pickle.loads(pickle.dumps(functools.partial(build_with_config, config)))
    sch = gemm_v5_warp_tiled(s_tir.Schedule(WL.mod))
    src = f_build(sch.mod, space_target("v5"), None).imports[0].inspect_source()
    assert config == SIMT_ASYNC_CONFIG and "cp.async" in src
    assert tuned_pass_config(WL) == {}

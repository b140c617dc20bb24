"""Tuning spread over a Dask cluster (``tirbench.tuning.spread``) on a CPU: a network becomes one task per layer;
two llvm workers tune two workloads into their databases and a row is appended; a second run resumes (nothing to
tune, no row); the local scheduler and workers leave no process behind; bad input is one line."""
import os

import pandas as pd
import pytest

from tirbench.tuning import spread
from tirbench.tuning.history import trials_done
from tirbench.workloads.resnet50 import RESNET50

#: Tuning processes and a Dask cluster: one xdist worker for the file.
pytestmark = pytest.mark.xdist_group("spread")


def test_a_network_is_one_task_per_layer_with_the_options_on_each(tmp_path):
    tasks, a = spread.split_tasks(["resnet50", "--trials", "32", "--db", str(tmp_path)])
    assert len(tasks) == len(RESNET50) == 23 and a.space == "rules" and a.trials == 32
    assert len({t.work_dir for t in tasks}) == 23 and all(t.work_dir.is_relative_to(tmp_path) for t in tasks)
    first = tasks[0].argv
    assert first[0] == "conv2d" and first[1:10] == ("1", "3", "224", "224", "64", "7", "7", "2", "3")
    assert first[10:] == ("--space", "rules", "--trials", "32", "--db", str(tmp_path))


@pytest.mark.parametrize("argv, message", [
    (["gemm", "32", "32", "--trials", "2"], "gemm takes groups of 3 sizes"),
    (["gemm", "--trials", "2", "32", "32", "32"], "put the options after the sizes"),
    (["gemm", "32", "32", "32", "--trials", "2", "--seconds", "60"], "--seconds: a spread run is resumable"),
    (["resnet5O", "--trials", "2"], "invalid choice"),
])
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        spread.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and len(err.splitlines()) == 1


def test_two_cpu_workers_tune_two_workloads_then_a_rerun_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(spread, "project_root", lambda: tmp_path)
    argv = ["--gpus", "2", "gemm", "32", "32", "32", "48", "48", "48", "--trials", "2", "--target", "llvm",
            "--db", str(tmp_path / "db")]
    assert spread.main(argv) == 0
    tasks, _ = spread.split_tasks(argv[2:])
    assert [trials_done(t.work_dir) >= 2 for t in tasks] == [True, True]
    rows = pd.read_csv(tmp_path / "build" / "tuning" / "network_tuning.csv")
    assert list(rows.columns) == spread.ROW_COLUMNS and len(rows) == 1
    row = rows.iloc[0]
    assert (row["gpus"], row["hosts"], row["engine"], row["tasks"], row["gpu"]) == (2, 1, "dask", 2, "cpu")
    assert row["new_trials"] >= 4 and row["trials_per_min"] > 0
    assert spread.main(argv) == 0   # the databases hold the trials: nothing tuned, no second row
    assert len(pd.read_csv(tmp_path / "build" / "tuning" / "network_tuning.csv")) == 1


def test_the_local_cluster_leaves_no_process_behind(tmp_path):
    with spread.LocalCluster(devices=["", ""], build_workers=1, log_dir=tmp_path) as cluster:
        cluster.wait_for("scheduler file", cluster.scheduler_file.exists, timeout=spread.START_TIMEOUT_S)
        groups = [p.pid for p in cluster.procs.values()]
        assert len(groups) == 3
    for pgid in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)

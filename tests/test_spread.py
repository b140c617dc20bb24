"""Tuning spread over a Dask cluster (``tirbench.tuning.spread``) on a CPU: a network becomes one task per layer;
two llvm workers tune three workloads into their databases, one worker killed mid-task (Dask re-runs its task on
the other, which resumes from the database: nothing tuned is lost) and a row is appended; a second run resumes (nothing
to tune, no row); the local scheduler and workers leave no process behind; bad input is one line. A worker's tuning
process (``tirbench.tuning.warm``) runs one task after the other, and one killed mid-task is replaced and the task
completes."""
import os
import re
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tirbench.tuning import spread, warm
from tirbench.tuning.history import history_trials, trials_done
from tirbench.tuning.processes import TASK_CORES_ENV, task_cores
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


def test_the_longest_tasks_go_first():
    """The 7x7 stem first, then the 3x3 layers by flops, the 1x1 layers last; equal weights in their order."""
    tasks, _ = spread.split_tasks(["resnet50", "--trials", "32"])
    order = [t for _, t in sorted(zip(spread.priorities(tasks), tasks), key=lambda pt: -pt[0])]
    taps = [t.weight[0] for t in order]
    assert order[0] is tasks[0] and taps == sorted(taps, reverse=True) and taps[1] == 9 and taps[-1] == 1
    threes = [t.weight[1] for t in order if t.weight[0] == 9]
    assert threes == sorted(threes, reverse=True) and len(set(spread.priorities(tasks))) == len(tasks)
    same = [spread.Task(str(i), (), Path("."), (1, 5)) for i in range(3)]
    assert spread.priorities(same) == [3, 2, 1]


@pytest.mark.parametrize("argv, message", [
    (["gemm", "32", "32", "--trials", "2"], "gemm takes groups of 3 sizes"),
    (["gemm", "--trials", "2", "32", "32", "32"], "put the options after the sizes"),
    (["gemm", "32", "32", "32", "--trials", "2", "--seconds", "60"], "--seconds: a spread run is resumable"),
    (["resnet5O", "--trials", "2"], "invalid choice"),
    (["--scheduler", "foo://host:8786", "gemm", "32", "32", "32", "--trials", "2"], "unknown address scheme 'foo'"),
    (["--scheduler", "tcp://host", "gemm", "32", "32", "32", "--trials", "2"], "missing port number"),
    (["--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1", "gemm", "32", "32", "32", "--trials", "2"],
     "Timed out trying to connect to tcp://127.0.0.1:9 after 1 s"),   # a scheduler that does not answer
])
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        spread.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and len(err.splitlines()) == 1


def _task_in_hand(proc: psutil.Process, tasks: list[spread.Task], trials: int) -> spread.Task | None:
    """The task a worker's tuning process has open (its log, ``task-NN.log``) with some but not all of its
    ``trials`` measured; None if none."""
    try:
        if "tirbench.tuning.warm" not in proc.cmdline():
            return None
        logs = [m for f in proc.open_files() if (m := re.fullmatch(r"task-(\d+)\.log", Path(f.path).name))]
    except psutil.Error:
        return None
    return next((tasks[int(m[1])] for m in logs if 0 < trials_done(tasks[int(m[1])].work_dir) < trials), None)


def _kill_worker_mid_task(name: str, tasks: list[spread.Task], trials: int, killed: dict) -> None:
    """Wait for Dask worker ``name``'s tuning process to have measured part of a task, then SIGKILL the worker's
    whole process group (nanny, worker, tuning process, its builders); ``killed`` gets the task and its records then."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not killed:
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "distributed.cli.dask_worker" not in cmd or cmd[cmd.index("--name") + 1] != name:
                continue
            group = proc.pid   # the worker was started in a session of its own
            for child in proc.children(recursive=True):
                task = _task_in_hand(child, tasks, trials)
                if task is not None:
                    killed.update(task=task, run_s=[t.run_s for t in history_trials(task.work_dir)])
                    os.killpg(group, signal.SIGKILL)
                    return
        time.sleep(0.2)


def test_a_worker_killed_mid_task_loses_nothing_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(spread, "project_root", lambda: tmp_path)
    argv = ["--gpus", "2", "gemm", "32", "32", "32", "48", "48", "48", "40", "40", "40", "--trials", "2", "--chunk",
            "1", "--target", "llvm", "--population", "64", "--db", str(tmp_path / "db")]
    tasks, _ = spread.split_tasks(argv[2:])
    killed: dict = {}
    killer = threading.Thread(target=_kill_worker_mid_task, args=("gpu-1", tasks, 2, killed), daemon=True)
    killer.start()
    assert spread.main(argv) == 0   # Dask re-ran the dead worker's task on the other one
    killer.join()
    assert re.search(r"3 of 3 tasks done on 2 GPU\(s\), 1 host\(s\), in [12] tuning process", capsys.readouterr().out)
    assert killed, "worker gpu-1 never ran a task that measured a chunk"
    assert [trials_done(t.work_dir) >= 2 for t in tasks] == [True, True, True]
    after = [t.run_s for t in history_trials(killed["task"].work_dir)]
    assert after[:len(killed["run_s"])] == killed["run_s"]   # what was tuned before the kill is all there
    rows = pd.read_csv(tmp_path / "build" / "tuning" / "network_tuning.csv")
    assert list(rows.columns) == spread.ROW_COLUMNS and len(rows) == 1
    row = rows.iloc[0]
    assert (row["gpus"], row["hosts"], row["engine"], row["tasks"], row["gpu"], row["population"]) == (
        2, 1, "dask", 3, "cpu", 64)
    assert row["host_cores"] == os.cpu_count() and row["start_s"] > 0
    assert row["cores_per_task"] == max(1, os.cpu_count() // 2)   # each of the 2 workers' share
    log_dir = next((tmp_path / "build" / "spread").iterdir())
    assert sorted(p.name for p in log_dir.glob("prepare-*.log")) == ["prepare-gpu-0.log", "prepare-gpu-1.log"]
    assert all("ready in" in p.read_text() and "the builder's workers started" in p.read_text()
               for p in log_dir.glob("prepare-*.log"))
    first = (log_dir / "task-00.log").read_text()   # the worker's tuning process was ready before its first task
    assert "of this process's last run" in first and "ready in" not in first
    assert row["new_trials"] >= 6 and row["trials_per_min"] > 0
    assert spread.main(argv) == 0   # the databases hold the trials: nothing tuned, no second row
    assert len(pd.read_csv(tmp_path / "build" / "tuning" / "network_tuning.csv")) == 1


@pytest.mark.parametrize("value, cores", [("3", 3), ("", None), ("0", None), ("many", None)])
def test_a_task_uses_its_share_of_the_cores_where_spread_sets_one(value, cores, monkeypatch):
    monkeypatch.setenv(TASK_CORES_ENV, value)
    assert task_cores() == cores


def test_the_local_cluster_leaves_no_process_behind(tmp_path):
    with spread.LocalCluster(devices=["", ""], task_cores=1, log_dir=tmp_path) as cluster:
        cluster.wait_for("scheduler file", cluster.scheduler_file.exists, timeout=spread.START_TIMEOUT_S)
        groups = [p.pid for p in cluster.procs.values()]
        assert len(groups) == 3
    for pgid in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


@pytest.fixture(scope="module")
def tuner():
    process = warm.TuningProcess()
    yield process
    process.close()


def _gemm_task(size: int, trials: int, db: Path) -> list[str]:
    return ["gemm", str(size), str(size), str(size), "--trials", str(trials), "--chunk", "1", "--target", "llvm",
            "--db", str(db)]


@pytest.mark.full   # 52 s with its warm tuning process on CI's 2 cores; the multi-GPU tuning (#43) is blocked
def test_a_workers_tasks_run_one_after_the_other_in_one_tuning_process(tuner, tmp_path, monkeypatch):
    pids = []
    for size in (16, 24):
        assert tuner.run(_gemm_task(size, 1, tmp_path), str(tmp_path / f"task-{size}.log")) == 0
        pids.append(tuner.pid)
    assert pids[0] == pids[1] and pids[0] is not None
    first, second = ((tmp_path / f"task-{size}.log").read_text() for size in (16, 24))
    assert "ready in" in first and "16x16x16" in first and "24x24x24" not in first
    assert "of this process's last run" in second and "24x24x24" in second and "16x16x16" not in second
    monkeypatch.setattr(warm, "TUNER", tuner)
    with pytest.raises(RuntimeError, match=r"exit status 2: .*error: gemm takes groups of 3 sizes"):   # one line
        warm.run_task(["gemm", "16", "--trials", "1", "--target", "llvm"], str(tmp_path / "bad.log"))
    assert tuner.pid == pids[0]   # and the process goes on


@pytest.mark.full
def test_a_tuning_process_killed_mid_task_is_replaced_and_the_task_completes(tuner, tmp_path):
    argv, log = _gemm_task(20, 3, tmp_path), tmp_path / "task.log"
    tasks, _ = spread.split_tasks(argv)
    work_dir = tasks[0].work_dir
    done: list[int] = []
    task = threading.Thread(target=lambda: done.append(tuner.run(argv, str(log))))
    task.start()
    deadline = time.monotonic() + 120
    while trials_done(work_dir) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    run_s, before = [t.run_s for t in history_trials(work_dir)], tuner.pid
    os.kill(before, signal.SIGKILL)
    task.join()
    assert done == [0] and tuner.pid != before and trials_done(work_dir) == 3
    assert [t.run_s for t in history_trials(work_dir)][:len(run_s)] == run_s and run_s
    assert "running the task again in a new one" in log.read_text()

"""Tuning through TVM's RPC tracker on a CPU (llvm target, tiny GEMM): ``--rpc`` input checked before any database
is touched (one line, exit status 2); a run through two servers, one of them killed in the middle, finishes on the
other with every record kept; every tuning run appends its row to ``throughput.csv``; the tuned measurement flushes
before every repeat and stops repeating a candidate far slower than the best."""
import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tvm
from test_rpc_cluster import free_port
from tvm.rpc.tracker import Tracker
from tvm.s_tir import meta_schedule as ms

from tirbench.bench.results import ResultsFileError
from tirbench.core.machine import cpu_target
from tirbench.tuning.builders import make_builder
from tirbench.tuning.rpc.cluster import Cluster
from tirbench.tuning.runners import make_rpc_runner
from tirbench.tuning import phases, throughput
from tirbench.tuning import runners as measure
from tirbench.tuning.cli import main
from tirbench.tuning.history import trials_done
from tirbench.tuning.logs import tuning_chunks
from tirbench.tuning.tune import tune
from tirbench.workloads import gemm

WL = gemm(32, 32, 32)
pytestmark = pytest.mark.xdist_group("rpc")   # RPC servers: on one pytest-xdist worker (see tests/test_rpc_cluster.py)
ARGS = ["gemm", "32", "32", "32", "--target", "llvm", "--chunk", "4"]


@pytest.fixture
def root(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setenv("TIRBENCH_ROOT", str(tmp_path))
    return tmp_path


def db_dir(root: Path) -> Path:
    return root / "build" / "tuning" / "gemm" / "float32_32x32x32_llvm"


def records(work_dir: Path) -> list[list]:
    return [json.loads(line) for line in (work_dir / "database_tuning_record.json").read_text().splitlines()]


def measured(record: list) -> bool:
    return max(float(s) for s in record[1][1]) < 1e9   # MetaSchedule records a failed run as 1e10 s


def scratch_throughput(root: Path) -> Path:
    """Where a CPU run's throughput row goes: never the tracked ``results/tuning/throughput.csv``."""
    return root / "build" / "tuning" / "throughput.csv"


def run_cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("spec", ["127.0.0.1:9190", "127.0.0.1:port:key", ":9190:key", "127.0.0.1:70000:key",
                                  "127.0.0.1:9190:", "a:1:b:c"])
def test_rpc_not_host_port_key_is_one_line(root, spec, capsys):
    code, err = run_cli(ARGS + ["--trials", "4", "--rpc", spec], capsys)
    assert code == 2 and len(err) == 1 and f"--rpc {spec!r}: expected HOST:PORT:KEY" in err[0]
    assert not (root / "results").exists()


def test_unreachable_tracker_is_one_line_and_no_database(root, capsys):
    port = free_port()
    code, err = run_cli(ARGS + ["--trials", "4", "--rpc", f"127.0.0.1:{port}:k"], capsys)
    assert code == 2 and len(err) == 1 and f"no RPC tracker answers at 127.0.0.1:{port}" in err[0]
    assert not (root / "results").exists()


def test_key_without_servers_is_one_line_and_no_database(root, capsys):
    port = free_port()
    tracker_proc = Tracker("127.0.0.1", port=port, port_end=port + 1, silent=True)
    try:
        code, err = run_cli(ARGS + ["--trials", "4", "--rpc", f"127.0.0.1:{port}:nobody"], capsys)
    finally:
        tracker_proc.terminate()
    assert code == 2 and len(err) == 1 and "has no server with key 'nobody'" in err[0]
    assert not (root / "results").exists()


def test_llvm_target_takes_only_the_default_space(root, capsys):
    code, err = run_cli(["conv2d", "1", "8", "8", "8", "8", "3", "3", "1", "1", "--target", "llvm", "--space",
                         "splitk", "--trials", "4"], capsys)
    assert code == 2 and "--target llvm tunes MetaSchedule's own rules only, not --space splitk" in err[-1]


def test_local_tuning_run_appends_a_throughput_row_and_its_phases(root, capsys):
    assert main(ARGS + ["--trials", "4"]) == 0
    out = capsys.readouterr().out
    assert "seconds per trial: search" in out and "measure" in out
    rows = throughput.read(scratch_throughput(root))
    assert not (root / "results").exists()   # a CPU run writes nothing under results/
    assert list(rows.columns) == throughput.COLUMNS and len(rows) == 1
    row = rows.iloc[0]
    assert (row["gpu"], row["gpus"], row["runner"], row["setup"], row["shape"], row["trials"]) == \
        ("cpu", 1, "local", "tuned", "32x32x32", 4)
    assert row["trials_per_min"] == pytest.approx(60 * 4 / row["seconds"], rel=0.02) and row["best_gflops"] > 0
    phases = pd.read_csv(db_dir(root) / "tuning_phases.csv").set_index("phase")
    assert {"builder_wall", "runner_wall", "build", "export", "alloc", "measure", "search"} <= set(phases.index)
    assert phases.loc["chunk_wall", "count"] == phases.loc["measure", "count"] == 4
    assert phases.loc["chunk_wall", "seconds"] >= phases.loc["builder_wall", "seconds"] + phases.loc["runner_wall",
                                                                                                      "seconds"]
    assert main(ARGS + ["--trials", "4"]) == 0   # nothing left to tune: no row
    assert len(throughput.read(scratch_throughput(root))) == 1


def test_throughput_csv_refuses_bad_rows_and_broken_files(tmp_path):
    path = tmp_path / "throughput.csv"
    row = dict(zip(throughput.COLUMNS, ["r", "t", "cpu", 1, "local", "tuned", "gemm", "8x8x8", "float32", "default",
                                        4, 2.0, 120.0, 1.0]))
    assert throughput.append_rows(path, [row]) == 1 and throughput.append_rows(path, [row]) == 1
    assert len(throughput.read(path)) == 2 and path.read_text().count("run_id") == 1
    with pytest.raises(ValueError, match="runner 'ssh'"):
        throughput.append_rows(path, [{**row, "runner": "ssh"}])
    path.write_text(path.read_text()[:-5])   # a line cut short
    with pytest.raises(ResultsFileError, match="the last line has no newline"):
        throughput.append_rows(path, [row])
    assert throughput.read(tmp_path / "none.csv").empty


def test_tuned_evaluator_flushes_before_every_repeat_and_stops_slow_candidates():
    measure.register()
    ex = tvm.compile(WL.mod, target=cpu_target())
    args = [tvm.runtime.tensor(x, tvm.cpu(0)) for x in WL.make_inputs(np.random.default_rng(0))]
    args.append(tvm.runtime.empty(WL.out_shape, WL.out_dtype, tvm.cpu(0)))
    count = tvm.get_global_func(measure.COUNT_FUNC)
    config = ms.runner.EvaluatorConfig(number=1, repeat=5, min_repeat_ms=0)
    measure._best.clear()
    before = count()
    secs = measure.run_evaluator_local(ex.mod, tvm.cpu(0), config, [args])
    assert count() - before == len(secs) == 5 and all(0 < s < 0.1 for s in secs)
    key = next(iter(measure._best))
    measure._best[key] = min(secs) / 10   # a best far faster than this kernel: one repeat only
    assert len(measure.run_evaluator_local(ex.mod, tvm.cpu(0), config, [args])) == 1 and count() - before == 6


def test_tuned_local_runner_allocates_a_workloads_arguments_once():
    info = [["TENSOR", "float32", [8, 8]], ["TENSOR", "float32", [8, 4]]]
    first = measure.alloc_cached(tvm.cpu(0), info, 2)
    assert [[tuple(a.shape) for a in args] for args in first] == [[(8, 8), (8, 4)]] * 2
    assert measure.alloc_cached(tvm.cpu(0), info, 2) is first            # the next candidate: the same tensors
    other = measure.alloc_cached(tvm.cpu(0), [["TENSOR", "float32", [4, 4]]], 1)
    assert other is not first and list(measure._args_cache.values()) == [other]   # one workload's kept at a time


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(port=free_port(), key="cpu", devices=None, servers=2, host="127.0.0.1",
                 log_dir=tmp_path_factory.mktemp("rpc")) as c:
        yield c


def test_rpc_tuning_run_through_two_servers(root, cluster, capsys):
    assert main(ARGS + ["--trials", "4", "--rpc", str(cluster.address)]) == 0
    assert "upload+load" in capsys.readouterr().out
    row = throughput.read(scratch_throughput(root)).iloc[0]
    assert not throughput.path_for(root).exists()
    assert (row["runner"], row["gpus"], row["trials"]) == ("rpc", 2, 4)
    assert all(measured(r) and len(r[1][1]) in (1, measure.TUNED_EVALUATOR.repeat) for r in records(db_dir(root)))


@pytest.mark.full
def test_server_killed_mid_run_the_run_finishes_on_the_other_and_keeps_every_record(tmp_path):
    """Two llvm servers; once the first chunk's records are in the database and the second chunk has opened its first
    session, one server's process group is killed (in a session half the time); the run goes on through the other:
    at most that session's candidate fails, the last chunk is measured whole, the database holds every trial."""
    work_dir = tmp_path / "db"
    with Cluster(port=free_port(), key="kill", devices=None, servers=2, host="127.0.0.1",
                 log_dir=tmp_path / "logs") as cluster:
        victim = cluster.procs["server-1"]
        killed: list[list] = []

        def kill_in_second_chunk() -> None:
            while trials_done(work_dir) < 4:
                time.sleep(0.01)
            killed.extend(records(work_dir))
            log, offset = phases.start_log(), phases.log_size()
            while b"session," not in log.read_bytes()[offset:]:
                time.sleep(0.01)
            os.killpg(victim.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_in_second_chunk, daemon=True)
        killer.start()
        tune(WL, work_dir, trials=12, chunk=4, target=cpu_target(), builder=make_builder(WL),
             runner=make_rpc_runner("tuned", cluster.address, servers=2))
        killer.join(timeout=1)
        assert victim.poll() is not None   # it was killed during the run
    recs = records(work_dir)
    assert len(recs) == 12 and recs[:len(killed)] == killed and len(killed) >= 4
    assert all(measured(r) for r in recs[8:])   # the last chunk ran entirely on the server left
    assert sum(map(measured, recs)) >= 11 and list(tuning_chunks(work_dir)["trials"]) == [4, 8, 12]
    assert all(json.loads(line) for line in (work_dir / "database_tuning_record.json").read_text().splitlines())

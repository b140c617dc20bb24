"""A tuning run killed half-way resumes from its database: a record cut short by the kill is dropped, every complete
one is kept and the database stays readable; each chunk prints its progress and logs its wall time.

Without a GPU no real tuning runs, so the kill lands on MetaSchedule's own database writer (SIGKILL while it
commits records) and on a record file cut mid-line as such a kill leaves it; with a GPU, a real tuning run is killed
during a chunk and resumed."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tirbench.core.machine import has_cuda_gpu
from tirbench.tuning.archive import archived_database
from tirbench.tuning.database import open_database, repair_database
from tirbench.tuning.history import HISTORY_FILE, trials_done, tuning_history
import tirbench.tuning.tune as tune_module
from tirbench.tuning.logs import CHUNK_LOG, tuning_chunks
from tirbench.tuning.tune import tune, work_dir_for
from tirbench.workloads import gemm

ROOT = Path(__file__).resolve().parents[1]
WL = gemm(1024, 1024, 1024)
RECORDED = work_dir_for(ROOT, WL)
pytestmark = pytest.mark.skipif(trials_done(RECORDED) == 0, reason="no recorded fp32 1024^3 tuning database")


@pytest.fixture
def work_dir(tmp_path):
    """The recorded database, whole (git keeps it trimmed; ``tuning.archive`` keeps every record), as one tuned before
    ``tuning_history.csv`` existed: its trials are its records."""
    whole = archived_database(ROOT, RECORDED, tmp_path / "archive")
    shutil.copytree(whole, tmp_path / "db", ignore=shutil.ignore_patterns("logs", HISTORY_FILE))
    return tmp_path / "db"


def records(work_dir: Path) -> list[str]:
    return (work_dir / "database_tuning_record.json").read_text().splitlines()


def cut_mid_line(path: Path) -> None:
    """What a SIGKILL in the middle of MetaSchedule writing its last line leaves: half of that line, no newline."""
    data = path.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    path.write_bytes(data[:len(data) - len(last) // 2 - 1])


def test_record_cut_by_a_kill_is_dropped_and_every_complete_one_kept(work_dir, capsys):
    whole = records(work_dir)
    cut_mid_line(work_dir / "database_tuning_record.json")
    assert trials_done(work_dir) == len(whole) - 1 == len(tuning_history(work_dir, WL.flops))
    db = open_database(work_dir)   # TVM's JSONDatabase alone fails on this file ("Unexpected end of string")
    assert len(db.get_all_tuning_records()) == len(whole) - 1
    assert records(work_dir) == whole[:-1]   # whole lines again: the next record will not be glued to a broken one
    assert (work_dir / "database_tuning_record.json").read_text().endswith("\n")
    assert "dropped a cut-off last line" in capsys.readouterr().out
    before = (work_dir / "database_tuning_record.json").read_bytes()
    tune(WL, work_dir, trials=len(whole) - 1)   # the resumed run finds its trials there: nothing to do, no GPU asked
    assert (work_dir / "database_tuning_record.json").read_bytes() == before
    assert repair_database(work_dir) == 0


def test_cut_workload_file_is_repaired_too(work_dir):
    path = work_dir / "database_workload.json"
    path.write_text(path.read_text() + '["main", {"half a workload')
    assert repair_database(work_dir) == 1 and len(open_database(work_dir).get_all_tuning_records()) > 0


def test_a_damaged_line_before_the_last_is_an_error_not_a_silent_drop(work_dir):
    lines = records(work_dir)
    lines[1] = lines[1][:40]
    (work_dir / "database_tuning_record.json").write_text("\n".join(lines) + "\n")
    with pytest.raises(RuntimeError, match=r"line 2 of \d+ is not JSON: the database is damaged"):
        trials_done(work_dir)


WRITER = """
import sys, time
from tvm.s_tir import meta_schedule as ms
db = ms.database.JSONDatabase(work_dir=sys.argv[1])
recs = db.get_all_tuning_records()
print("writing", flush=True)
while True:
    for r in recs:
        db.commit_tuning_record(r)
        time.sleep(0.001)
"""


def test_sigkill_while_metaschedule_writes_records_leaves_a_readable_database(work_dir):
    """MetaSchedule's JSONDatabase appending records in a loop, killed with SIGKILL: every record written before the
    kill is kept in order, and the database opens."""
    whole = records(work_dir)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(work_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n = trials_done(work_dir)
    assert n > len(whole) and records(work_dir)[:len(whole)] == whole
    assert len(open_database(work_dir).get_all_tuning_records()) == n


def test_each_chunk_prints_progress_and_logs_its_wall_time(work_dir, monkeypatch, capsys):
    """``tune`` with MetaSchedule replaced by a stand-in that appends recorded trials: per chunk, one line with the
    trials done, trials per minute and the best so far, and a row in the chunk log."""
    spare = records(work_dir)

    def fake_tune_tir(*, work_dir, max_trials_global, **_):
        path = Path(work_dir) / "database_tuning_record.json"
        with path.open("a") as f:
            f.writelines(f"{line}\n" for line in spare[:max_trials_global])
        time.sleep(0.05)

    monkeypatch.setattr(tune_module, "require_cuda_gpu", lambda: None)
    monkeypatch.setattr(tune_module.ms, "tune_tir", fake_tune_tir)
    start = trials_done(work_dir)
    tune(WL, work_dir, trials=start + 10, chunk=4, builder=object(), runner=object())
    out = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[tuning]")]
    assert [line.split(": ", 1)[1].split(" trials")[0] for line in out] == [
        f"{start + 4}/{start + 10}", f"{start + 8}/{start + 10}", f"{start + 10}/{start + 10}"]
    assert all("trials/min, best so far" in line and "TFLOP/s" in line for line in out)
    chunks = tuning_chunks(work_dir)
    assert list(chunks["trials"]) == [start + 4, start + 8, start + 10] and list(chunks["new_trials"]) == [4, 4, 2]
    assert (chunks["wall_s"] > 0).all() and (chunks["s_per_trial"] > 0).all()
    history = (work_dir / HISTORY_FILE).read_text().splitlines()   # written as the chunks went
    assert len(history) == 1 + start + 10 and [int(row.split(",")[3]) for row in history[1:]] == \
        [0] * start + [1] * 4 + [2] * 4 + [3] * 2
    log = work_dir / CHUNK_LOG
    log.write_text(log.read_text() + "2026-01-01T00:00:00+00:00,9")   # a row cut short by a kill
    assert len(tuning_chunks(work_dir)) == 3


@pytest.mark.skipif(not has_cuda_gpu(), reason="a real tuning run needs a CUDA GPU; without one the kill is made on "
                                               "MetaSchedule's database writer and on a cut record (tests above)")
def test_tuning_killed_during_a_chunk_resumes_from_its_database(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    env = {**os.environ, "TIRBENCH_ROOT": str(tmp_path)}
    cmd = [sys.executable, "-m", "tirbench.tuning", "gemm", "256", "256", "256", "--chunk", "8", "--trials"]
    wd = work_dir_for(tmp_path, gemm(256, 256, 256))
    proc = subprocess.Popen(cmd + ["32"], env=env)
    deadline = time.monotonic() + 480
    while trials_done(wd) < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(5)   # into the second chunk
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = records(wd)[:trials_done(wd)]
    assert len(kept) >= 8 and len(open_database(wd).get_all_tuning_records()) == len(kept)
    subprocess.run(cmd + [str(len(kept) + 8)], env=env, check=True, timeout=540)
    assert records(wd)[:len(kept)] == kept and trials_done(wd) >= len(kept) + 8
    assert all(json.loads(line) for line in records(wd))

"""Trimmed tuning databases: the fastest records and the whole history stay in git, the full databases in an
archive. Trimming keeps the history, the trial count and the best schedule; tuning resumes on a trimmed database;
every committed database keeps its best record; the archive gives back the full ones; the clone stays small."""
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import tirbench.tuning.tune as tune_module
from tirbench.tuning import archive
from tirbench.tuning.archive import ARCHIVE, KEEP, database_dirs, pack, trim_database, unpack
from tirbench.tuning.database import best_schedule, open_database, record_lines, run_seconds
from tirbench.tuning.history import HISTORY_FILE, history_trials, trials_done, tuning_history
from tirbench.tuning.tune import tune, work_dir_for
from tirbench.workloads import gemm

ROOT = Path(__file__).resolve().parents[1]
TUNING = ROOT / "results" / "tuning"
WL = gemm(1024, 1024, 1024)
RECORDED = work_dir_for(ROOT, WL)
#: The tracked tree's limits: in all, and per file.
MAX_TREE_BYTES, MAX_FILE_BYTES = 12 * 2**20, 2**20


@pytest.fixture
def untrimmed(tmp_path) -> Path:
    """A database whose records are all its trials: the recorded one without its history file."""
    shutil.copytree(RECORDED, tmp_path / "db", ignore=shutil.ignore_patterns("logs", HISTORY_FILE, "tuning_*.csv"))
    return tmp_path / "db"


def test_trimming_keeps_the_history_the_trial_count_and_the_best_schedule(untrimmed):
    lines, history = record_lines(untrimmed), tuning_history(untrimmed, WL.flops)
    script = best_schedule(open_database(untrimmed), WL).mod.script()
    keep = len(lines) // 2   # fewer than the recorded database keeps
    assert keep >= 1 and trim_database(untrimmed, keep=keep) == len(lines) - keep
    kept = record_lines(untrimmed)
    fastest = sorted(range(len(lines)), key=lambda i: run_seconds(lines[i]) or float("inf"))[:keep]
    assert kept == [lines[i] for i in sorted(fastest)]   # the fastest, in the order tuned
    assert tuning_history(untrimmed, WL.flops).equals(history) and trials_done(untrimmed) == len(lines)
    assert best_schedule(open_database(untrimmed), WL).mod.script() == script
    assert trim_database(untrimmed, keep=keep) == 0


def test_tuning_resumes_on_a_trimmed_database(untrimmed, monkeypatch):
    """A chunk's records appended after the kept ones count as new trials, numbered on from the history."""
    spare = (record_lines(untrimmed) * 5)[:5]
    trim_database(untrimmed, keep=KEEP)
    done, before, kept = trials_done(untrimmed), tuning_history(untrimmed, WL.flops), len(record_lines(untrimmed))

    def fake_tune_tir(*, work_dir, max_trials_global, **_):
        with (Path(work_dir) / "database_tuning_record.json").open("a") as f:
            f.writelines(f"{line}\n" for line in spare[:max_trials_global])
        time.sleep(0.01)

    monkeypatch.setattr(tune_module, "require_cuda_gpu", lambda: None)
    monkeypatch.setattr(tune_module.ms, "tune_tir", fake_tune_tir)
    tune(WL, untrimmed, trials=done + 5, chunk=3, builder=object(), runner=object())
    trials = history_trials(untrimmed)
    assert trials_done(untrimmed) == done + 5 and len(record_lines(untrimmed)) == kept + 5
    assert [(t.trial, t.chunk, t.record) for t in trials[done:]] == [(done + i, 1 + (i > 3), kept + i)
                                                                     for i in range(1, 6)]
    assert tuning_history(untrimmed, WL.flops).iloc[:done].equals(before)
    assert (untrimmed / HISTORY_FILE).read_text().count("\n") == 1 + done + 5


@pytest.mark.parametrize("work_dir", database_dirs(TUNING), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_committed_database_keeps_its_history_and_its_best_record(work_dir):
    lines, trials = record_lines(work_dir), history_trials(work_dir)
    assert (work_dir / HISTORY_FILE).exists() and len(lines) <= KEEP and trials_done(work_dir) == len(trials)
    assert [t.trial for t in trials] == list(range(1, len(trials) + 1))
    assert all(t.run_s == run_seconds(lines[t.record - 1]) for t in trials if t.record)
    assert sorted(t.record for t in trials if t.record) == list(range(1, len(lines) + 1))
    best = min(t.run_s for t in trials if t.run_s is not None)
    assert best == min(s for line in lines if (s := run_seconds(line)) is not None)   # the final best is kept


def test_the_archive_gives_back_every_full_database(tmp_path):
    dirs = unpack(ROOT, tmp_path)
    assert sorted(d.relative_to(tmp_path) for d in dirs) == [d.relative_to(TUNING) for d in database_dirs(TUNING)]
    for full in dirs:
        trimmed = TUNING / full.relative_to(tmp_path)
        lines, kept = record_lines(full), record_lines(trimmed)
        assert trials_done(full) == len(lines) == trials_done(trimmed)
        assert tuning_history(full, 10**12).equals(tuning_history(trimmed, 10**12))
        assert [line for line in lines if line in set(kept)] == kept


def test_unpack_refuses_to_overwrite_trials_the_archive_lacks(tmp_path):
    (tmp_path / ARCHIVE).parent.mkdir(parents=True)
    shutil.copy(ROOT / ARCHIVE, tmp_path / ARCHIVE)
    dest = tmp_path / "dest" / RECORDED.relative_to(TUNING)
    shutil.copytree(RECORDED, dest)
    with (dest / "database_tuning_record.json").open("a") as f:
        f.write(record_lines(dest)[0] + "\n")   # one more trial than the archive holds
    with pytest.raises(RuntimeError, match=r"^\S+ has \d+ trials, the archive \d+: it would lose trials$"):
        unpack(tmp_path, tmp_path / "dest")
    assert len(list((tmp_path / "dest").rglob("*.json"))) == 2   # nothing written


def test_pack_refuses_a_trimmed_database(tmp_path):
    shutil.copytree(RECORDED, tmp_path / RECORDED.relative_to(ROOT))
    with pytest.raises(RuntimeError, match="is trimmed: unpack the archive into results/tuning first"):
        pack(tmp_path)
    assert not (tmp_path / ARCHIVE).exists()


def test_archive_cli_is_one_line_on_error(tmp_path, monkeypatch, capsys):
    shutil.copytree(RECORDED, tmp_path / RECORDED.relative_to(ROOT))
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setenv("TIRBENCH_ROOT", str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        archive.main(["pack"])
    assert exit_info.value.code == 2 and len(capsys.readouterr().err.splitlines()) == 1


def test_the_tracked_tree_is_small():
    """A clone stays small: every tracked file under 1 MiB, all of them under 12 MiB."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    sizes = {f.decode(): (ROOT / f.decode()).stat().st_size for f in files if f and (ROOT / f.decode()).is_file()}
    big = sorted(f"{name} ({size / 2**20:.2f} MiB)" for name, size in sizes.items() if size > MAX_FILE_BYTES)
    assert not big, "tracked files over 1 MiB: " + ", ".join(big)
    assert sum(sizes.values()) <= MAX_TREE_BYTES, f"the tracked tree is {sum(sizes.values()) / 2**20:.1f} MiB"

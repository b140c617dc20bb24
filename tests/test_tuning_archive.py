"""Trimmed tuning databases: the fastest records and the whole history stay in git, the full databases in an
archive. Trimming keeps the history, the trial count and the best schedule; tuning resumes on a trimmed database;
every committed database keeps its best record; the archive gives back the full ones; the clone stays small. The
same for a whole model's database (``tuning.relax_model``; a tiny synthetic one on llvm): each task's fastest
records, its tasks' hashes, the same replayed module, resumed without re-tuning, packed whole."""
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir
from tvm.s_tir import meta_schedule as ms

import tirbench.tuning.tune as tune_module
from tirbench.tuning import archive, relax_model
from tirbench.tuning.archive import (ARCHIVE, KEEP, MODEL_KEEP, archived_database, database_dirs, is_trimmed, pack,
                                     trim_database, unpack)
from tirbench.tuning.database import (RECORD_FILE, WORKLOAD_FILE, best_schedule, has_stubs, is_model_database,
                                      open_database, record_lines, record_workload, run_seconds, tasks_tuned)
from tirbench.tuning.history import HISTORY_FILE, history_trials, trials_done, tuning_history
from tirbench.tuning.relax_model import replay_summary
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
    per_workload, keep = [record_workload(line) for line in lines], MODEL_KEEP if is_model_database(work_dir) else KEEP
    assert (work_dir / HISTORY_FILE).exists() and trials_done(work_dir) == len(trials)
    assert max(map(per_workload.count, per_workload), default=0) <= keep
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


LLVM = tvm.target.Target({"kind": "llvm", "num-cores": 1})
#: Per task of the tiny model: the split factor of the matmul's last loop and the run time of each trial (one failed).
TRIALS = ((4, 3e-5), (2, 1e-5), (16, 1e10), (1, 2e-5), (8, 0.5e-5))


def tiny_model() -> tvm.IRModule:
    """Two dense layers: two tasks (a matmul with its bias and relu, one with its bias)."""
    rng = np.random.default_rng(0)
    bb, x = relax.BlockBuilder(), relax.Var("x", relax.TensorType((1, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            w = [relax.const(rng.standard_normal(s).astype("float32")) for s in ((16, 32), (32,), (32, 8), (8,))]
            h = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, w[0]), w[1])))
            out = bb.emit_output(relax.op.add(relax.op.matmul(h, w[2]), w[3]))
        bb.emit_func_output(out)
    return bb.get()


def split_matmul(mod: tvm.IRModule, factor: int) -> s_tir.Schedule:
    sch = s_tir.Schedule(mod)
    sch.split(sch.get_loops(sch.get_sblock("matmul"))[-1], factors=[None, factor])
    return sch


@pytest.fixture(scope="module")
def tuned_model(tmp_path_factory) -> Path:
    """A whole model's database as ``relax_model.tune_model`` leaves it, its trials made up: ``TRIALS`` per task, the
    tasks in turn (``database_tuning_record.json`` in tuning order, then ``tuning_history.csv``)."""
    work_dir = tmp_path_factory.mktemp("model")
    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    tasks = relax_model.task_modules(relax_model.prepared(tiny_model(), LLVM), LLVM)
    workloads = [db.commit_workload(mod) for mod in tasks]
    for factor, secs in TRIALS:
        for mod, wl in zip(tasks, workloads):
            db.commit_tuning_record(ms.database.TuningRecord(split_matmul(mod, factor).trace, wl, [secs], LLVM,
                                                             ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    archive.sync_history(work_dir)
    return work_dir


@pytest.fixture
def model_db(tuned_model, tmp_path) -> Path:
    """A copy of the tiny model's database where ``relax_model.work_dir_for`` puts it under ``tmp_path``."""
    return Path(shutil.copytree(tuned_model, tmp_path / "results" / "tuning" / "relax" / "tiny_float32_b1"))


def tvm_replay(work_dir: Path) -> tvm.IRModule:
    """The tiny model with MetaSchedule's own JSON database in ``work_dir`` applied."""
    with LLVM:
        return relax.transform.MetaScheduleApplyDatabase(str(work_dir))(relax_model.prepared(tiny_model(), LLVM))


def test_trimming_a_whole_model_database_keeps_each_tasks_fastest_and_the_replayed_module(model_db):
    lines, history, replayed = record_lines(model_db), tuning_history(model_db, 1), tvm_replay(model_db)
    assert replayed.script() != relax_model.prepared(tiny_model(), LLVM).script()   # the records apply
    assert trim_database(model_db) == len(lines) - 2 * MODEL_KEEP
    fastest = [i for i, line in enumerate(lines) if run_seconds(line) in sorted(s for _, s in TRIALS)[:MODEL_KEEP]]
    assert record_lines(model_db) == [lines[i] for i in fastest]   # each task's fastest, in the order tuned
    assert has_stubs(model_db) and is_trimmed(model_db) and (model_db / WORKLOAD_FILE).stat().st_size < 100
    assert trials_done(model_db) == len(lines) and tuning_history(model_db, 1).equals(history)
    tvm.ir.assert_structural_equal(relax_model.apply_database(str(model_db), False, tiny_model(), LLVM), replayed)
    assert trim_database(model_db) == 0


def fake_tune_tasks(calls: list) -> Callable:
    """A stand-in for ``ms.tune_tasks``: notes what it was asked (the tasks' names, trials in all and per task, the
    task scheduler) and records ``max_trials_global`` made-up trials of its tasks in turn (each its
    ``max_trials_per_task`` before the next where there is one), in MetaSchedule's JSON
    database (opening it, as MetaSchedule does, needs the tasks' modules back in a trimmed database)."""
    def tune_tasks(*, tasks, work_dir, max_trials_global, max_trials_per_task, task_scheduler, **_):
        calls.append(([ctx.task_name for ctx in tasks], max_trials_global, max_trials_per_task, task_scheduler))
        db = ms.database.JSONDatabase(work_dir=work_dir)
        for i in range(max_trials_global):
            mod = tasks[i // max_trials_per_task if max_trials_per_task else i % len(tasks)].mod
            db.commit_tuning_record(ms.database.TuningRecord(split_matmul(mod, 2).trace, db.commit_workload(mod),
                                                             [1e-5], LLVM,
                                                             ms.arg_info.ArgInfo.from_prim_func(mod["main"])))
    return tune_tasks


def test_tuning_resumes_on_a_trimmed_whole_model_database_without_tuning_its_trials_again(model_db, monkeypatch):
    trim_database(model_db)
    done, kept, calls = trials_done(model_db), record_lines(model_db), []
    monkeypatch.setattr(relax_model.ms, "tune_tasks", fake_tune_tasks(calls))
    tune = dict(target=LLVM, work_dir=model_db, fp16=False, builder=object(), runner=object())
    assert relax_model.tune_model(tiny_model(), trials=done, **tune) == done and calls == []
    assert relax_model.tune_model(tiny_model(), trials=done + 3, **tune) == done + 3
    assert [call[1:] for call in calls] == [(3, None, "gradient")]   # every task has records: MetaSchedule shares
    assert [(t.trial, t.record) for t in history_trials(model_db)[done:]] == [(done + i, len(kept) + i)
                                                                            for i in (1, 2, 3)]


def test_a_whole_models_tasks_without_records_are_tuned_first_one_turn_each_the_most_flops_first(tmp_path,
                                                                                                monkeypatch):
    calls, work_dir = [], tmp_path / "db"
    monkeypatch.setattr(relax_model.ms, "tune_tasks", fake_tune_tasks(calls))
    tune = dict(target=LLVM, work_dir=work_dir, fp16=False, builder=object(), runner=object())
    turn = relax_model.TRIALS_PER_ITER
    assert relax_model.tune_model(tiny_model(), trials=turn + 5, **tune) == turn + 5
    tasks = ms.relax_integration.extract_tasks(relax_model.prepared(tiny_model(), LLVM), LLVM)
    flops = {t.task_name: s_tir.analysis.estimate_tir_flops(t.dispatched[0]) for t in tasks}
    (first, trials, per_task, scheduler), = calls
    assert flops[first[0]] > flops[first[1]] and (trials, per_task, scheduler) == (turn + 5, turn, "round-robin")
    calls.clear()   # the second task had 5 trials of its turn: it has records, so what is left is shared
    assert relax_model.tune_model(tiny_model(), trials=3 * turn, **tune) == 3 * turn
    assert [call[1:] for call in calls] == [(2 * turn - 5, None, "gradient")]


def test_pack_and_unpack_carry_whole_model_databases_whole(model_db, untrimmed, tmp_path):
    root = tmp_path
    one = Path(shutil.copytree(untrimmed, root / RECORDED.relative_to(ROOT)))
    pack(root)
    full = {wd: {name: (wd / name).read_bytes() for name in (WORKLOAD_FILE, RECORD_FILE, HISTORY_FILE)}
            for wd in (one, model_db)}
    for wd in database_dirs(root / "results" / "tuning"):
        trim_database(wd)
    assert archived_database(root, model_db) == root / "build" / "tuning-databases" / "relax" / model_db.name
    dirs = unpack(root, root / "full")
    assert sorted(dirs) == sorted(root / "full" / wd.relative_to(root / "results" / "tuning") for wd in full)
    for wd, files in full.items():
        for name, data in files.items():
            assert (root / "full" / wd.relative_to(root / "results" / "tuning") / name).read_bytes() == data


def test_pack_refuses_a_trimmed_whole_model_database(model_db, tmp_path):
    trim_database(model_db)
    with pytest.raises(RuntimeError, match=r"^results/tuning/relax/tiny_float32_b1 is trimmed: unpack the archive"):
        pack(tmp_path)


def test_a_whole_model_database_says_which_tasks_it_tuned(tmp_path):
    (tmp_path / "database_workload.json").write_text("".join(f'["h{i}", {{}}]\n' for i in range(4)))
    records = '[2, [{}, [0.001]]]\n[0, [{}, null]]\n[2, [{}, [0.002]]]\n[1, '   # the last cut short
    (tmp_path / "database_tuning_record.json").write_text(records)
    assert tasks_tuned(tmp_path) == (2, 4)
    assert tasks_tuned(tmp_path / "none") == (0, 0)
    assert replay_summary(tmp_path) == "3 trials, 2 of 4 tasks tuned (the rest DLight's)"

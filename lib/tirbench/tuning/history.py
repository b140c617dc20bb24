"""A database's tuning history: per trial, in the order tuned, its measured run time and the best so far (of a whole
model's database, ``tuning.relax_model``: of any of its tasks).

``tuning_history.csv`` beside the database keeps it (``trial,run_s,best_s,chunk,record``: ``run_s`` empty for a
failed trial, ``chunk`` the chunk of ``tuning_chunks.csv`` that ran it or 0, ``record`` the trial's line in the
record file or 0 where ``archive.trim_database`` dropped it). The history is that file followed by every record
past the last one it names (all of them for a database tuned before the file existed), so a trimmed database
still counts every trial it was tuned for, and records a run added without writing the file still count.
``tune`` rewrites the file after each chunk (``sync_history``).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tirbench.core.atomic import write_atomic
from tirbench.tuning.database import record_lines, run_seconds
from tirbench.tuning.logs import tuning_chunks

if TYPE_CHECKING:
    from tirbench.bench.harness import Measurement

#: The history file beside the database.
HISTORY_FILE = "tuning_history.csv"
COLUMNS = ["trial", "run_s", "best_s", "chunk", "record"]


@dataclass(frozen=True)
class Trial:
    trial: int  #: 1-based, in the order tuned
    run_s: float | None  #: mean measured run time; None: failed to build or run
    chunk: int  #: the chunk (row of ``tuning_chunks.csv``, 1-based) that ran it; 0: not known
    record: int  #: its line in the record file (1-based); 0: not kept there


def _read_file(work_dir: Path) -> list[Trial]:
    """The rows of ``HISTORY_FILE`` (none without it); a last line cut short by a kill is left out."""
    path = work_dir / HISTORY_FILE
    if not path.exists():
        return []
    text = path.read_text()
    whole = text[:text.rfind("\n") + 1]
    rows = list(csv.DictReader(io.StringIO(whole)))
    if rows and list(rows[0]) != COLUMNS:
        raise RuntimeError(f"{path}: expected the columns {','.join(COLUMNS)}")
    return [Trial(int(r["trial"]), float(r["run_s"]) if r["run_s"] else None, int(r["chunk"]), int(r["record"]))
            for r in rows]


def _chunks_of(work_dir: Path, trials: range) -> list[int]:
    """The chunk that ran each of ``trials``: chunk i of the chunk log ran trials ``(trials - new_trials, trials]``."""
    log = tuning_chunks(work_dir)
    spans = list(zip(log["trials"] - log["new_trials"], log["trials"]))
    return [next((i + 1 for i, (lo, hi) in enumerate(spans) if lo < t <= hi), 0) for t in trials]


def history_trials(work_dir: Path) -> list[Trial]:
    """Every trial the database was tuned for, in order: ``HISTORY_FILE``, then the records past the last it names."""
    kept = _read_file(work_dir)
    lines = record_lines(work_dir)
    named = max((t.record for t in kept), default=0)
    if named > len(lines):
        raise RuntimeError(f"{work_dir / HISTORY_FILE} names record {named}, the database holds {len(lines)}: the "
                           "history belongs to another database")
    new = lines[named:]
    trials = range(len(kept) + 1, len(kept) + len(new) + 1)
    return kept + [Trial(t, run_seconds(line), chunk, named + i + 1)
                   for i, (t, line, chunk) in enumerate(zip(trials, new, _chunks_of(work_dir, trials)))]


def write_history(work_dir: Path, trials: list[Trial]) -> None:
    """Write ``trials`` to ``HISTORY_FILE`` atomically, with the best run time so far beside each."""
    rows, best = [",".join(COLUMNS)], None
    for t in trials:
        best = t.run_s if best is None or (t.run_s is not None and t.run_s < best) else best
        rows.append(f"{t.trial},{'' if t.run_s is None else repr(t.run_s)},{'' if best is None else repr(best)},"
                    f"{t.chunk},{t.record}")
    write_atomic(work_dir / HISTORY_FILE, ("\n".join(rows) + "\n").encode())


def sync_history(work_dir: Path) -> int:
    """Add the records past the history file's last to it (write it for a database without one). Returns the
    trials added."""
    trials = history_trials(work_dir)
    added = len(trials) - len(_read_file(work_dir))
    if added or not (work_dir / HISTORY_FILE).exists():
        write_history(work_dir, trials)
    return added


def trials_done(work_dir: Path) -> int:
    """Trials the database was tuned for (0 when there is none), trimmed records included."""
    return len(history_trials(work_dir))


def tuning_history(work_dir: Path, flops: int) -> pd.DataFrame:
    """Per trial, in the order tuned: its GFLOP/s as MetaSchedule measured it, and the best so far.

    Read in the order tuned (``history_trials``): ``get_all_tuning_records`` returns the records sorted fastest
    first, which would make every curve look flat from the first trial.
    """
    rows = [{"trial": t.trial, "gflops": flops / t.run_s / 1e9 if t.run_s else 0.0} for t in history_trials(work_dir)]
    df = pd.DataFrame(rows, columns=["trial", "gflops"])
    df["best_gflops"] = df["gflops"].cummax()
    return df


def where_it_flattens(history: pd.DataFrame, fraction: float = 0.99) -> dict[str, float]:
    """Where a tuning curve (``tuning_history``) flattens: ``trials``; ``best_gflops`` at the end; ``flat_from``, the
    first trial whose best so far is within ``fraction`` of the final best (0 without a successful trial); and
    ``half_budget``, the best after half the trials as a fraction of the final best (near 1: the second half
    found little; well below: the curve is still rising and a larger budget would likely pay)."""
    best = history["best_gflops"].to_numpy()
    final = float(best[-1]) if len(best) else 0.0
    if final <= 0:
        return {"trials": len(best), "best_gflops": 0.0, "flat_from": 0, "half_budget": 0.0}
    return {"trials": len(best), "best_gflops": final, "flat_from": int(np.argmax(best >= fraction * final)) + 1,
            "half_budget": float(best[(len(best) - 1) // 2]) / final}


def tuner_vs_harness(work_dir: Path, m: Measurement) -> str:
    """One line: the best trial's rate as MetaSchedule's runner recorded it in ``work_dir`` beside the rate the
    harness measured for the replayed kernel ``m`` (verified, L2 flushed, median): where they differ, the tuner
    ranked its candidates by a number the notebook's measurement does not reproduce."""
    recorded = float(tuning_history(work_dir, m.workload.flops)["gflops"].max())
    if not recorded > 0:
        return f"{m.variant}: the database holds no successful measurement"
    return (f"{m.variant}: tuner recorded {recorded / 1e3:.2f} TFLOP/s for its best trial, the harness measures "
            f"{m.gflops / 1e3:.2f} TFLOP/s ({m.gflops / recorded:.2f}x)")

"""Which recorded tuning runs (``results/tuning/throughput.csv``) produced the databases the notebooks replay today.

A run is behind a database of its workload, dtype, shape and space when a chunk of that database's chunk log
(``tuning_chunks.csv``) finished while the run ran (its row's timestamp is its end, ``seconds`` its length); a
database tuned again from scratch has no chunk of the older runs, which are then ``REPLACED`` (so is a run from
before the log began). A database tuned
before the chunk log existed cannot say (``UNKNOWN``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tirbench.report.overview import TunedDatabase, tuning_databases
from tirbench.tuning import throughput
from tirbench.tuning.logs import tuning_chunks

TODAY, REPLACED, UNKNOWN, NONE = "yes", "no (no chunk of it in the log)", "unknown (no chunk log)", "no database"
#: Seconds of slack around a run's window (its row is written after its last chunk).
SLACK_S = 60.0


def _finished(chunks: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(chunks["finished"], utc=True)


def _window(run: pd.Series) -> tuple[pd.Timestamp, pd.Timestamp]:
    end = pd.Timestamp(run["timestamp"]).tz_convert("UTC")
    return end - pd.Timedelta(seconds=float(run["seconds"]) + SLACK_S), end + pd.Timedelta(seconds=SLACK_S)


def _matching(run: pd.Series, dbs: list[TunedDatabase]) -> list[TunedDatabase]:
    """The databases of ``run``'s workload, dtype, shape and space."""
    return [db for db in dbs if (db.workload.name, db.workload.dtype, db.workload.shape, db.space)
            == (run["workload"], run["dtype"], str(run["shape"]), run["space"])]


def behind(run: pd.Series, dbs: list[TunedDatabase]) -> str:
    """Whether ``run`` (a throughput row) produced records of a database present today (``TODAY`` ... ``NONE``)."""
    matching = _matching(run, dbs)
    if not matching:
        return NONE
    lo, hi = _window(run)
    logs = [tuning_chunks(db.work_dir) for db in matching]
    if any(_finished(c).between(lo, hi).any() for c in logs):
        return TODAY
    return REPLACED if all(len(c) for c in logs) else UNKNOWN


def runs_behind_databases(root: Path) -> pd.DataFrame:
    """Every recorded tuning run (``throughput.csv``) with a ``database`` column: ``behind`` each one."""
    path = throughput.path_for(root)
    df = throughput.read(path) if path.exists() else pd.DataFrame(columns=throughput.COLUMNS)
    dbs, _ = tuning_databases(root)
    return df.assign(database=[behind(r, dbs) for _, r in df.iterrows()])


def unrecorded_databases(root: Path) -> list[str]:
    """One line per database present whose chunk log shows tuning that no throughput row covers (a tuning run that
    wrote no row): its label, trials and when its chunks finished."""
    runs = runs_behind_databases(root)
    dbs, _ = tuning_databases(root)
    lines = []
    for db in dbs:
        chunks = tuning_chunks(db.work_dir)
        if chunks.empty:
            continue
        finished = _finished(chunks)
        covered = pd.Series(False, index=chunks.index)
        for _, run in runs.iterrows():
            if db in _matching(run, dbs):
                lo, hi = _window(run)
                covered |= finished.between(lo, hi)
        if not covered.all():
            new = chunks.loc[~covered, "new_trials"].sum()
            lines.append(f"{db.workload.name} {db.label}: {new} new trials ({chunks['trials'].iloc[-1]} in all) "
                         f"in chunks finished {finished[~covered].min():%Y-%m-%d %H:%M} to "
                         f"{finished[~covered].max():%H:%M} UTC "
                         f"({chunks.loc[~covered, 'wall_s'].sum():.0f} s of chunks)")
    return lines

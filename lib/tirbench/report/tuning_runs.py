"""Which recorded tuning runs (``results/tuning/throughput.csv``) produced the databases the notebooks replay today;
and the README's table of the runs spread over GPUs (``network_tuning_table``).

A run is behind a database of its workload, dtype, shape and space when a chunk of that database's chunk log
(``tuning_chunks.csv``) finished while the run ran (its row's timestamp is its end, ``seconds`` its length); a
database tuned again from scratch has no chunk of the older runs, which are then ``REPLACED`` (so is a run from
before the log began). A database tuned
before the chunk log existed cannot say (``UNKNOWN``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tirbench.report.overview import SCALING_KEYS, TunedDatabase, tuning_databases
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


def network_tuning_table(root: Path) -> str:
    """Every recorded ``tuning.spread`` run (``results/tuning/network_tuning.csv``), with its speed against the latest
    1-GPU run recorded no later than it (the one of its session, on that host) of the same GPU model and host size (CPU
    cores), tasks, trials per task and search population where one is: of the tuning (``wall_s``) and of the whole
    command (``start_s`` + ``wall_s``). A run before ``start_s`` was recorded started each tuning process in its first
    task (inside ``wall_s``): it is compared only with another such run."""
    path = root / "results" / "tuning" / "network_tuning.csv"
    df = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if df.empty:
        return "no run of `tirbench.tuning.spread` recorded yet"
    df = df.assign(prepared=df["start_s"].notna(), at=pd.to_datetime(df["timestamp"]))
    lines = ["| run | GPU | GPUs | hosts | host cores | cores a task | space | tasks x trials | population | start-up s | "
             "tuning s | trials/min | speed against 1 GPU: tuning | whole command |",
             "|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|---:|"]
    for r in df.itertuples():
        ones = df[(df["gpus"] == 1) & (df[SCALING_KEYS] == [getattr(r, k) for k in SCALING_KEYS]).all(axis=1)
                  & (df["at"] <= r.at)]
        speed, whole = "", ""
        if r.gpus != 1 and not len(ones):
            speed = "no 1-GPU run recorded"
        elif r.gpus != 1:
            one = ones.iloc[-1]
            speed = f"{one['wall_s'] / r.wall_s:.2f}x ({one['run_id']})"
            whole = f"{(one['start_s'] + one['wall_s']) / (r.start_s + r.wall_s):.2f}x" if r.prepared else ""
        start = f"{r.start_s:.1f}" if r.prepared else "in the first tasks"
        cores = "" if pd.isna(r.cores_per_task) else f"{r.cores_per_task:.0f}"
        lines.append(f"| {r.run_id} | {r.gpu} | {r.gpus} | {r.hosts} | {r.host_cores} | {cores} | {r.space} | "
                     f"{r.tasks} x {r.trials_per_task} | {r.population} | {start} | {r.wall_s:.1f} | "
                     f"{r.trials_per_min:.1f} | {speed} | {whole} |")
    return "\n".join(lines) + ("\n\nFrom `results/tuning/network_tuning.csv`, each run from empty databases. Start-up: "
                               "from the command's start until every GPU's tuning process has its builder and runner "
                               "ready; tuning: from then until the last task is done.")

"""``results/tuning/throughput.csv``: one row per workload per tuning run, how fast it tuned (trials per minute) on
how many GPUs, with which runner and setup. Appended atomically, read strictly (``results.check_csv``). Only a GPU
run whose database lives under ``results/`` appends there; any other run (a CPU run, a database elsewhere) appends
to ``build/tuning/throughput.csv`` (``path_for_run``), so that tests and trial runs leave tracked files alone."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from tirbench.bench.results import append_csv, check_csv

#: Column order of the file.
COLUMNS = ["run_id", "timestamp", "gpu", "gpus", "runner", "setup", "workload", "shape", "dtype", "space", "trials",
           "seconds", "trials_per_min", "best_gflops"]
#: ``runner`` values: MetaSchedule's LocalRunner on this machine's GPU, or its RPCRunner through a tracker.
RUNNERS = ("local", "rpc")
#: ``setup`` values: MetaSchedule's own builder and measurement (``stock``), or the harness's measurement and the
#: trial-rate cuts (``tuned``: ``tirbench.tuning.builders``, ``tirbench.tuning.runners``).
SETUPS = ("tuned", "stock")


def path_for(root: Path) -> Path:
    """The recorded GPU runs' file."""
    return root / "results" / "tuning" / "throughput.csv"


def path_for_run(root: Path, work_dir: Path, *, gpu: bool) -> Path:
    """Where a run tuning into ``work_dir`` appends its row: ``path_for(root)`` for a GPU run into a database under
    ``results/``, ``build/tuning/throughput.csv`` for any other."""
    if gpu and work_dir.resolve().is_relative_to((root / "results").resolve()):
        return path_for(root)
    return root / "build" / "tuning" / "throughput.csv"


def validate_row(row: Mapping[str, object]) -> None:
    """ValueError for a row lacking a column, with an unknown runner or setup, or without trials."""
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"throughput row lacks columns: {', '.join(missing)}")
    if row["runner"] not in RUNNERS or row["setup"] not in SETUPS:
        raise ValueError(f"runner {row['runner']!r} / setup {row['setup']!r}: expected one of {RUNNERS} / {SETUPS}")
    if int(row["trials"]) <= 0 or float(row["seconds"]) <= 0:
        raise ValueError("a throughput row needs trials and seconds")


def append_rows(path: Path, rows: Iterable[Mapping[str, object]]) -> int:
    """Append rows to ``path`` atomically (a crash at any point leaves the old file); refuses a file that is not
    whole. Returns the number appended."""
    return append_csv(path, rows, COLUMNS, validate_row)


def read(path: Path) -> pd.DataFrame:
    """Every row (an empty frame with the columns where there is no file); ResultsFileError for a file not whole."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    check_csv(path, text, COLUMNS)
    if not text:
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(io.StringIO(text), dtype={"shape": str, "run_id": str})

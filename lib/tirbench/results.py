"""The results CSV: its columns, an atomic appender, and readers for the latest run."""
from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

#: Column order of every results/<notebook>/results.csv (the first 18 are the published schema).
COLUMNS = ["run_id", "timestamp", "gpu", "driver", "tvm_version", "notebook", "workload", "shape", "dtype",
           "variant", "provider", "trials", "median_ms", "p20_ms", "p80_ms", "gflops", "gbps", "verified",
           "repeats", "compute_capability"]

#: ``provider`` values a row may carry.
PROVIDERS = ("tvm", "metaschedule", "cublas", "cudnn", "torch")


def validate_row(row: Mapping[str, object]) -> None:
    """ValueError for a row that lacks a column, names an unknown provider, or is not verified."""
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"result row lacks columns: {', '.join(missing)}")
    if row["provider"] not in PROVIDERS:
        raise ValueError(f"provider {row['provider']!r} is not one of {', '.join(PROVIDERS)}")
    if row["verified"] is not True:
        raise ValueError("only verified kernels get a result row")


def append_rows(path: Path, rows: Iterable[Mapping[str, object]]) -> int:
    """Append rows to ``path`` atomically: write old + new content to a temp file beside it, then rename.

    A crash or error at any point leaves the previous file untouched. Returns the number of rows appended.
    """
    rows = list(rows)
    for row in rows:
        validate_row(row)
    if not rows:
        return 0
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    if old and old.splitlines()[0].split(",") != COLUMNS:
        raise ValueError(f"{path} has other columns than {COLUMNS}: move it aside, it is not ours to rewrite")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    if not old:
        writer.writeheader()
    writer.writerows({c: row[c] for c in COLUMNS} for row in rows)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; results are meant to be read by everyone
        with os.fdopen(fd, "w", newline="") as f:
            f.write(old + buf.getvalue())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(rows)


def read_results(path: Path) -> pd.DataFrame:
    """All rows of a results CSV (empty frame with the schema if there is none)."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(path, dtype={"shape": str, "run_id": str})


def latest_run(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the most recent run (by timestamp) in ``df``."""
    if df.empty:
        return df
    last = df.sort_values("timestamp")["run_id"].iloc[-1]
    return df[df["run_id"] == last].reset_index(drop=True)

"""What every published table says about its rows: how they were timed, whether a tuned row's best record is a hand
seed, and a caption naming the notebook, file, run, GPU and date they come from.

Timing: runs before ``CUDA_EVENTS_SINCE`` timed TVM kernels with TVM's ``time_evaluator`` (it waits for the GPU before
starting its timer, so a TVM time also counts the host's launch cost; the vendor libraries never did); later runs
time every kernel alike (``bench.harness.time_launches``: CUDA events around one launch). A table never holds rows of
both: ``timing`` says which a run used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from tirbench.bench.results import COLUMNS, read_results, run_label
from tirbench.tuning.labels import with_tuned_best
from tirbench.tuning.replay import SEARCH_BEST_SUFFIX

#: The first run timed by ``harness.time_launches``: notebook 03's run 20261124T213156Z-89b2d7, recorded by commit
#: 103ea19 ("GPU kernels timed like the vendor libraries"); every earlier run used ``time_evaluator``.
CUDA_EVENTS_SINCE = pd.Timestamp("2026-11-24T21:31:56+00:00")
EVENTS, EVALUATOR = "CUDA events", "time_evaluator"
#: What a table of each timing says about its rows.
TIMING_NOTES = {
    EVENTS: "TVM and the vendor timed alike, with CUDA events",
    EVALUATOR: (f"timed before {CUDA_EVENTS_SINCE:%Y-%m-%d %H:%M} UTC, TVM with `time_evaluator` (its times include "
                "the host's launch cost, the vendor's do not): not comparable with rows timed with CUDA events, "
                "awaiting a re-run"),
}
#: The ``tuned_best`` of a tuned row whose replayed record's kernel is a hand candidate the space was seeded with.
SEED = "seed"


def timing(timestamps: pd.Series) -> pd.Series:
    """Per row, how its run timed TVM kernels: ``EVENTS`` or ``EVALUATOR`` (from the run's timestamp)."""
    return pd.to_datetime(timestamps, utc=True).ge(CUDA_EVENTS_SINCE).map({True: EVENTS, False: EVALUATOR})


def labelled_results(root: Path) -> dict[str, pd.DataFrame]:
    """Every notebook's recorded rows (``results/<notebook>/results.csv``, keyed by that folder), each row with its
    ``tuned_best`` (``tuning.labels.with_tuned_best``: from the column where the row recorded it, else from the
    databases; the databases are read once for all the files)."""
    frames = {p.parent.name: read_results(p) for p in sorted((root / "results").glob("*/results.csv"))}
    found = [f.assign(results_file=name) for name, f in frames.items() if len(f)]
    if not found:
        return {name: f.assign(tuned_best="") for name, f in frames.items()}
    labelled = with_tuned_best(pd.concat(found, ignore_index=True), root)
    return {name: labelled[labelled["results_file"] == name].drop(columns="results_file").reset_index(drop=True)
            for name in frames}


def recorded_rows(recorded: Mapping[str, pd.DataFrame], notebook: str) -> pd.DataFrame:
    """``notebook``'s labelled rows of ``recorded`` (``labelled_results``); an empty frame if it has none."""
    return recorded.get(notebook, pd.DataFrame(columns=[*COLUMNS, "tuned_best"]))


def shown_variant(variant: str, tuned_best: str) -> str:
    """A variant's name as published: a tuned row whose best record is a hand seed says so."""
    return f"{variant} (best record: the hand seed)" if tuned_best == SEED else variant


def seed_rows_first(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each ``<variant>_search_best`` row moved right after its ``<variant>`` row (the search's best
    non-seed kernel shown beside the seed-best row), the rest in order."""
    base = df["variant"].str.removesuffix(SEARCH_BEST_SUFFIX)
    position = pd.Series(range(len(df)), index=df.index, dtype=float)
    first = position.groupby([base, df["shape"].astype(str), df["dtype"]]).transform("min")
    order = first + df["variant"].str.endswith(SEARCH_BEST_SUFFIX) * 0.5
    return df.loc[order.sort_values(kind="stable").index]


def caption(notebook: str, run: pd.DataFrame, csv: str = "results.csv", *, timed: bool = True) -> str:
    """The line under a table of ``run``'s rows (one run): notebook, file, run id, GPU, driver, date, and (``timed``)
    how it timed TVM. A run built for an older architecture than its GPU's names it so (``results.run_label``)."""
    r = run.iloc[0]
    note = f"; {TIMING_NOTES[timing(run['timestamp'].iloc[:1]).iloc[0]]}" if timed else ""
    return (f"From `results/{notebook}/{csv}`, run {r['run_id']}: {run_label(run)}, driver {r['driver']}, "
            f"{str(r['timestamp'])[:10]}{note}.")

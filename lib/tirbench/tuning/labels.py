"""Whether a recorded MetaSchedule row measured a seed's kernel or one the search found, from the databases.

A space with seeds (``rules``, ``wgmma``) measures hand candidates first (``tirbench.tuning.seeds``); where the best
record is one of them, the row replaying it is the hand kernel re-measured, not MetaSchedule's result. Rows written
since the results CSV has the ``tuned_best`` column say so themselves (``tirbench.tuning.replay``); ``seed_labels``
labels the rows written before, from the databases under ``results/tuning/`` (their best record is among the ones
kept in git, ``archive.KEEP``), and ``with_tuned_best`` fills the column of a results frame with those labels.

A row is matched to its database by its workload, dtype and shape, and by the space its variant names
(``space_of_variant``: the name of a space among the variant's ``_``-separated words, else ``default``). A row of a
space without seeds is ``"search"``. A seeded space's row is labelled only while its database still has the trials
the row says it was tuned for (a database tuned further since may have another best): otherwise it stays unknown.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from tirbench.bench.results import read_results
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import trials_done
from tirbench.tuning.seeds import is_seed
from tirbench.tuning.spaces import SPACES, DesignSpace
from tirbench.workloads import conv2d, gemm
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import parse_conv_shape

#: ``(notebook, variant, shape, dtype)``: what ``seed_labels`` keys a label by.
RowKey = tuple[str, str, str, str]
#: The provider of a tuned row.
TUNED_PROVIDER = "metaschedule"


def space_of_variant(variant: str) -> DesignSpace:
    """The space a tuned row's ``variant`` was replayed from: the space named by one of its ``_``-separated words
    (``metaschedule_wgmma_space_float16``, ``nhwc_wgmma_ms``, ``metaschedule_rules``), else ``default``
    (``nhwc_metaschedule``, ``metaschedule_float32``)."""
    words = set(variant.split("_"))
    named = [space for name, space in SPACES.items() if name != "default" and name in words]
    return named[0] if len(named) == 1 else SPACES["default"]


def database_for(root: Path, workload: str, shape: str, dtype: str, space: DesignSpace) -> tuple[Workload, Path] | None:
    """The workload and the database under ``root/results/tuning`` of a ``workload`` (``gemm`` or ``conv2d``) of that
    ``shape`` and ``dtype`` tuned in ``space`` (``tune.work_dir_for``'s name, its layout read from it), or None."""
    pattern = re.compile(rf"{re.escape(dtype)}_(?:(?P<layout>[A-Z]+)_)?{re.escape(shape)}{re.escape(space.db_suffix)}")
    for work_dir in sorted((root / "results" / "tuning" / workload).glob(f"{dtype}_*")):
        match = pattern.fullmatch(work_dir.name)
        if match is None:
            continue
        if workload == "gemm" and len(sizes := shape.split("x")) == 3:
            return gemm(*map(int, sizes), dtype=dtype), work_dir
        if workload == "conv2d" and match["layout"]:
            return conv2d(**parse_conv_shape(shape), layout=match["layout"], dtype=dtype), work_dir
    return None


def database_label(root: Path, workload: str, shape: str, dtype: str, variant: str, trials: int) -> str | None:
    """``"seed"`` or ``"search"`` for a tuned row (``workload``, ``shape``, ``dtype``, ``variant``, tuned for
    ``trials``): see the module docstring; None where it is not known."""
    space = space_of_variant(variant)
    if space.seeds is None:
        return "search"
    found = database_for(root, workload, shape, dtype, space)
    if found is None or trials_done(found[1]) != trials:
        return None
    wl, work_dir = found
    sch = best_schedule(open_database(work_dir), wl, space.target())
    return "seed" if is_seed(space, wl, sch) else "search"


def _latest_tuned(root: Path) -> pd.DataFrame:
    """The latest row of each tuned ``RowKey`` over every ``results/*/results.csv``."""
    frames = [read_results(p) for p in sorted((root / "results").glob("*/results.csv"))]
    df = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else pd.DataFrame()
    if df.empty:
        return df
    tuned = df[df["provider"] == TUNED_PROVIDER].sort_values("timestamp", kind="stable")
    return tuned.drop_duplicates(["notebook", "variant", "shape", "dtype"], keep="last")


def _labels_with_trials(root: Path) -> dict[RowKey, tuple[str, int]]:
    out = {}
    for row in _latest_tuned(root).itertuples():
        label = row.tuned_best or database_label(root, row.workload, str(row.shape), row.dtype, row.variant,
                                                 int(row.trials))
        if label is not None:
            out[(row.notebook, row.variant, str(row.shape), row.dtype)] = (label, int(row.trials))
    return out


def seed_labels(root: Path) -> dict[RowKey, str]:
    """Per tuned row key ``(notebook, variant, shape, dtype)`` of the results under ``root`` (its latest row): the
    row's own ``tuned_best`` where it has one, else from its database: ``"seed"`` where the best record is a seed's
    kernel, ``"search"`` where the search found it (or the space has no seeds). A key whose label is not known (no
    database, or one tuned further since) is left out. Takes seconds per seeded database (and, in a process that has
    not yet, 20-30 s to register the tensor intrinsics a float16 database names)."""
    return {key: label for key, (label, _) in _labels_with_trials(root).items()}


def with_tuned_best(df: pd.DataFrame, root: Path) -> pd.DataFrame:
    """``df`` (rows of results CSVs) with an empty ``tuned_best`` of a tuned row filled from ``seed_labels`` where
    the row was tuned for as many trials as the labelled latest row; other rows as they were."""
    labels = _labels_with_trials(root)
    out = df.copy()
    if "tuned_best" not in out:
        out["tuned_best"] = ""

    def label(row: pd.Series) -> str:
        found = labels.get((row["notebook"], row["variant"], str(row["shape"]), row["dtype"]))
        recorded = row["tuned_best"] if isinstance(row["tuned_best"], str) else ""
        if recorded or row["provider"] != TUNED_PROVIDER or found is None or int(row["trials"]) != found[1]:
            return recorded
        return found[0]

    out["tuned_best"] = out.apply(label, axis=1) if len(out) else out["tuned_best"]
    return out

"""Winograd convolutions measured as the layers they compute, in one call: ``measure_winograd(layers)`` builds every
layer's F(m x m, 3x3) forms (``rules.winograd_forms``, a few GEMM tilings each: ``rules.winograd_tiles``) side by side
(``sweep_all``), verifies and times each, and keeps the fastest kernel of each form with its error against the float64
reference (``output_error``). A run gives a ``results.csv`` row on the layer's own conv2d workload (same shape, same
flop count; variant ``winograd_f<m>``) and a row of the error table ``winograd_error.csv`` (``ERROR_COLUMNS``);
``versus_cudnn`` puts a run's rows beside cuDNN's, layer by layer.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Collection, Sequence

import numpy as np
import pandas as pd
import tvm

from tirbench.bench.harness import Measurement, output_error
from tirbench.bench.results import RUN_FIELDS, latest_run, read_results
from tirbench.bench.sweep import Trial, sweep_all
from tirbench.schedules.conv.rules import winograd_family, winograd_forms, winograd_tiles
from tirbench.workloads.base import Workload

#: The error table beside a notebook's results, and its columns.
ERROR_CSV = "winograd_error.csv"
ERROR_COLUMNS = [*RUN_FIELDS, "shape", "layout", "m", "kernel", "max_abs", "rms", "max_rel", "atol", "margin"]


def variant(m: int, space: str = "") -> str:
    """The results variant of F(m x m, 3x3): ``winograd_f<m>``, ``winograd_f<m>_<space>`` for a tuned one."""
    return f"winograd_f{m}" + (f"_{space}" if space else "")


@dataclass(frozen=True)
class WinogradRun:
    """The fastest verified kernel of one Winograd form of a layer, and its output's error."""

    layer: Workload   #: the conv2d layer
    form: Workload    #: its Winograd form (``conv2d_winograd``)
    trial: Trial      #: the fastest verified candidate of the sweep
    error: dict[str, float]   #: ``error_stats`` of that kernel's output

    @property
    def m(self) -> int:
        return self.form.sizes["m"]

    @property
    def measurement(self) -> Measurement:
        """The kernel's measurement on the layer's workload, as variant ``winograd_f<m>``."""
        return replace(self.trial.measurement, workload=self.layer, variant=variant(self.m))

    def error_row(self) -> dict[str, object]:
        """Its row of the error table, without the run's fields (``Session.append_table`` adds them)."""
        return {"shape": self.layer.shape, "layout": self.form.layout, "m": self.m, "kernel": self.trial.label,
                **{k: float(f"{v:.4g}") for k, v in self.error.items()}}


def measure_winograd(layers: Sequence[Workload], *, tiles: Sequence[int] = (2, 4), keep: int = 2,
                     target: tvm.target.Target, repeats: int = 100, seed: int = 0) -> list[WinogradRun]:
    """Per layer (a 3x3 stride-1 conv2d; others have no Winograd form and are left out) and per ``m`` in ``tiles``:
    its ``keep`` best-ranked tilings built (all layers' at once), verified and timed, and the fastest one's error."""
    forms = [(layer, form) for layer in layers for form in winograd_forms(layer) if form.sizes["m"] in tiles]
    jobs = [(form, winograd_family().with_candidates(winograd_tiles(form, keep))) for _, form in forms]
    runs = []
    for (layer, form), result in zip(forms, sweep_all(jobs, target=target, repeats=repeats, seed=seed)):
        best = result.best_trial()
        if best is not None:
            runs.append(WinogradRun(layer, form, best, output_error(form, best.kernel, target=target, seed=seed)))
    return runs


def read_errors(path: Path, skip: Collection[str] = ()) -> pd.DataFrame:
    """The latest run's rows of an error table (empty without one), leaving out the runs in ``skip`` (those built for
    an older architecture than their GPU's, whose errors are recorded too)."""
    df = read_results(path, ERROR_COLUMNS)
    return latest_run(df[~df["run_id"].isin(list(skip))] if len(df) else df)


def versus_cudnn(df: pd.DataFrame, shapes: Sequence[str]) -> pd.DataFrame:
    """Per layer (``shapes``, in order) of a run's rows (``Session.frame``): cuDNN's faster layout, and each Winograd
    variant's time with cuDNN time / its time; layers without a cuDNN or Winograd row are left out."""
    out = []
    for shape in shapes:
        rows = df[df["shape"].astype(str) == shape]
        cudnn = rows[rows["provider"] == "cudnn"].sort_values("median_ms")
        ours = rows[rows["variant"].astype(str).str.startswith("winograd_")]
        if cudnn.empty or ours.empty:
            continue
        base = cudnn["median_ms"].iloc[0]
        row = {"layer": shape, "cuDNN": cudnn["variant"].iloc[0], "cuDNN ms": base}
        for r in ours.itertuples():
            row[f"{r.variant} ms"] = r.median_ms
            row[f"cuDNN / {r.variant}"] = base / r.median_ms
        out.append(row)
    return pd.DataFrame(out)


def geomean(values: pd.Series) -> float:
    """The geometric mean of the values that are there (NaN left out)."""
    values = values.dropna()
    return float(np.exp(np.log(values).mean())) if len(values) else float("nan")

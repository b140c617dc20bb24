"""One notebook run: says which mode it is in, collects verified measurements, commits them atomically.

On a CUDA GPU the run measures and, when ``save`` is on, appends its rows to
``results/<notebook>/results.csv`` and saves figures beside it. Without a GPU it builds and verifies what it
can on the CPU, writes nothing under ``results/``, and its plots show the recorded GPU rows, labelled so.

Under ``make run-all`` (``$TIRBENCH_STAGE_DIR`` set) rows and figures are staged in that folder instead, laid out
like ``results/``; run_all moves them in with the executed copy and the report once the notebook has run to its end,
so a notebook that fails later changes nothing. In Jupyter they are written in place, as above.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from tirbench.bench import results
from tirbench.bench.harness import Measurement
from tirbench.bench.plots import VENDORS
from tirbench.core.atomic import write_atomic
from tirbench.core.gpu import arch_for, current_gpu
from tirbench.core.machine import DeviceInfo, Peak, has_cuda_gpu, peak_for
from tirbench.core.paths import output_dir, project_root

#: Set by tirbench.report.run_all for each notebook's kernel: where the run stages its rows and figures.
STAGE_ENV = "TIRBENCH_STAGE_DIR"


def staging_dir() -> Path | None:
    """The folder this run stages into (``$TIRBENCH_STAGE_DIR``), or None outside ``make run-all``."""
    value = os.environ.get(STAGE_ENV)
    return Path(value) if value else None


def figure_dir(root: Path, notebook: str) -> Path:
    """The folder for a notebook's figures: staged under run-all, else ``output_dir(root)/<notebook>``."""
    return (staging_dir() or output_dir(root)) / notebook


class Session:
    """The state of one notebook run (see the module docstring). ``arch``: the architecture the run's kernels are
    built for (default: the GPU description's, ``current_gpu().arch``; a notebook building for an explicit target
    passes that target's), recorded in each TVM row's ``arch``; a vendor row records the device's own."""

    def __init__(self, notebook: str, *, quick: bool = False, save: bool = True, root: Path | None = None,
                 arch: str | None = None):
        self.notebook = notebook
        self.arch = arch or current_gpu().arch
        self.quick = quick
        self.save = save
        self.root = root or project_root()
        self.stage = staging_dir()
        self.gpu = has_cuda_gpu()
        self.device = DeviceInfo.detect() if self.gpu else None
        now = dt.datetime.now(dt.timezone.utc)
        self.timestamp = now.isoformat(timespec="seconds")
        self.run_id = results.new_run_id(now)
        self.measurements: list[Measurement] = []
        self.committed = 0   # how many of ``measurements`` are in the CSV (or staged) already
        print(self.banner())

    # -- where things go -------------------------------------------------------------------------------
    @property
    def results_csv(self) -> Path:
        return self.root / "results" / self.notebook / "results.csv"

    def figure_path(self, name: str) -> Path | None:
        """Where to save a figure: beside the CSV on a GPU run, under build/cpu-run/ without a GPU (staged under
        run-all, see the module docstring)."""
        if not self.save:
            return None
        base = figure_dir(self.root, self.notebook)
        base.mkdir(parents=True, exist_ok=True)
        return base / name

    # -- what the run says about itself ------------------------------------------------------------------
    def banner(self) -> str:
        mode = "quick" if self.quick else "full"
        if self.gpu:
            ptx = results.is_ptx(self.arch, self.device.compute_capability)
            built = f"; TVM kernels built for {self.arch}, run as PTX" if ptx else ""
            return f"[tirbench] GPU run ({mode}) on {self.device.describe()}{built}; run_id {self.run_id}"
        rec = self.recorded()
        src = (f"recorded on {rec['gpu'].iloc[0]} at {rec['timestamp'].iloc[0][:10]}" if not rec.empty
               else "none recorded yet")
        return (f"[tirbench] No CUDA GPU found: building CUDA kernels for {current_gpu().arch} (source shown), checking numerics "
                f"on llvm, plotting recorded GPU results ({src}); recorded results are left untouched.")

    @property
    def peak(self) -> Peak | None:
        gpu = self.device.gpu if self.gpu else next(iter(self.recorded()["gpu"]), "")
        return peak_for(gpu)

    # -- measurements ------------------------------------------------------------------------------------
    def record(self, m: Measurement, echo: bool = True) -> Measurement:
        """Keep a verified measurement of this run and (``echo``) print its one-line summary; one-line ValueError for
        one whose output was not checked (``Measurement.verified``)."""
        if not self.gpu:
            raise RuntimeError("measurements are recorded only on a CUDA GPU run")
        if not m.verified:
            raise ValueError(f"{m.variant} ({m.provider}): not verified against the reference in this run, so it "
                             "gets no row")
        self.measurements.append(m)
        if echo:
            print(m.summary())
        return m

    def run_fields(self) -> dict[str, object]:
        """The ``results.RUN_FIELDS`` of this (GPU) run: which run, when, where."""
        d = self.device
        return {"run_id": self.run_id, "timestamp": self.timestamp, "gpu": d.gpu, "driver": d.driver,
                "tvm_version": d.tvm_version}

    def rows(self) -> list[dict[str, object]]:
        d = self.device
        return [{
            **self.run_fields(), "notebook": self.notebook, "workload": m.workload.name,
            "shape": m.workload.shape, "dtype": m.workload.dtype, "variant": m.variant, "provider": m.provider,
            "trials": m.trials, "median_ms": round(m.timing.median_ms, 6), "p20_ms": round(m.timing.p20_ms, 6),
            "p80_ms": round(m.timing.p80_ms, 6), "gflops": round(m.gflops, 3), "gbps": round(m.gbps, 3),
            "verified": m.verified, "repeats": m.timing.repeats, "compute_capability": d.compute_capability,
            "tuned_best": m.tuned_best, "arch": self.arch_of(m.provider),
        } for m in self.measurements]

    def arch_of(self, provider: str) -> str:
        """The ``arch`` of a row of ``provider`` on this GPU run: the build's for TVM's kernels, the device's own for a
        vendor library's (``results.ADDED_COLUMNS``)."""
        return arch_for(self.device.compute_capability) if provider in VENDORS else self.arch

    def commit(self) -> int:
        """Append the rows recorded since the last commit to the CSV (GPU run with ``save`` on), or stage them under
        run-all; returns how many were written."""
        rows = self.rows()[self.committed:] if self.gpu and self.save else []
        if not rows:
            return 0
        csv = self.results_csv.relative_to(self.root)
        n = results.append_rows(self.stage / self.notebook / csv.name if self.stage else self.results_csv, rows)
        self.committed += n
        print(f"[tirbench] {n} rows staged: run-all appends them to {csv} once this notebook has run to its end"
              if self.stage else f"[tirbench] {n} rows appended to {csv}")
        return n

    def append_table(self, name: str, rows: list[dict[str, object]], columns: list[str],
                     validate: Callable[[Mapping[str, object]], None] = lambda row: None) -> int:
        """Append ``rows``, each with this run's ``run_fields`` added, to ``results/<notebook>/<name>``: a CSV of
        ``columns`` (``results.RUN_FIELDS`` first) beside the results, on a GPU run with ``save`` on. Written in
        place, or under run-all staged as the recorded file plus the rows, which run-all moves in with the figures
        once the notebook has run to its end. Returns how many were written."""
        if not (self.gpu and self.save) or not rows:
            return 0
        path, recorded = self.figure_path(name), self.root / "results" / self.notebook / name
        if path != recorded and not path.exists() and recorded.exists():
            write_atomic(path, recorded.read_bytes())
        return results.append_csv(path, [{**self.run_fields(), **row} for row in rows], columns, validate)

    # -- what to plot ------------------------------------------------------------------------------------
    def recorded(self) -> pd.DataFrame:
        """The latest recorded run in this notebook's CSV."""
        return results.latest_run(results.read_results(self.results_csv))

    def frame(self) -> pd.DataFrame:
        """This run's rows on a GPU; otherwise the latest recorded GPU run."""
        if self.gpu:
            return pd.DataFrame(self.rows())
        return self.recorded()

    def label(self) -> str:
        """Figure caption: measured now, or recorded (GPU, date)."""
        df = self.frame()
        if df.empty:
            return "no GPU results recorded yet"
        date, drv = str(df["timestamp"].iloc[0])[:10], df["driver"].iloc[0]
        where = f"{': ' if results.ptx_rows(df).any() else ' on '}{results.run_label(df)}"
        return f"{'measured' if self.gpu else 'recorded'}{where}, {date}, driver {drv}, TVM {df['tvm_version'].iloc[0]}"

"""One workload built for an older architecture and for the GPU's own, timed on the same GPU in one run: what the
newer architecture's features buy (on Hopper: TMA, wgmma, warp specialization), measured rather than assumed.

``older_arch(arch)`` names the architecture to compare with (sm_80 for a newer one, sm_75 for sm_80);
``same_gpu(session, wl, older=..., native=...)`` is the notebooks' one call: on a GPU run built for the GPU's own
architecture it measures and records, elsewhere it reads the recorded run. Underneath, ``across_archs(wl, builds)``
builds each (record, arch) pair's defaults for that arch (PTX where it is older than
the GPU's, ``machine.cuda_target``: the driver compiles it, as it would for an A100 binary shipped as PTX), verifies
and times each; ``ArchRun.row`` is its row of ``ARCH_CSV`` beside the notebook's results (``ARCH_COLUMNS``). Those
rows never enter the notebook's ``results.csv``: a PTX row there would make the whole run a PTX run, whose ratios
tables keep apart. ``arch_table`` shows a run's rows with each kernel's speed relative to the older architecture's
fastest, and ``show_archs`` is what a notebook displays: the table with where and when it was measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from tirbench.bench.results import RUN_FIELDS, is_ptx, latest_run, read_results
from tirbench.bench.session import Session
from tirbench.bench.sweep import Trial, sweep
from tirbench.core.gpu import parse_arch
from tirbench.core.machine import cuda_target
from tirbench.schedules.common.record import KernelRecord
from tirbench.workloads.base import Workload

#: The table beside a notebook's results, and its columns.
ARCH_CSV = "same_gpu_archs.csv"
ARCH_COLUMNS = [*RUN_FIELDS, "workload", "shape", "dtype", "variant", "arch", "ptx", "median_ms", "gflops",
                "verified", "repeats", "compute_capability"]
#: The older architectures compared with, newest first: each architecture with the newest one older than it (Ampere's
#: mma.sync and cp.async for every newer one, Ada to Blackwell; Turing's for sm_80).
BASELINE_ARCHS = ("sm_80", "sm_75")


def older_arch(arch: str) -> str | None:
    """The architecture ``arch``'s kernels are compared with (``BASELINE_ARCHS``: the newest one older than it), or
    None for Turing and older."""
    return next((a for a in BASELINE_ARCHS if parse_arch(a)[0] < parse_arch(arch)[0]), None)


@dataclass(frozen=True)
class ArchRun:
    """One family's kernel built for ``arch`` and measured (``trial``, verified) on this GPU."""

    arch: str
    trial: Trial

    def row(self, compute_capability: str) -> dict[str, object]:
        """Its row of ``ARCH_CSV`` without the run's fields (``Session.append_table`` adds them)."""
        m = self.trial.measurement
        return {"workload": m.workload.name, "shape": m.workload.shape, "dtype": m.workload.dtype,
                "variant": m.variant, "arch": self.arch, "ptx": is_ptx(self.arch, compute_capability),
                "median_ms": round(m.timing.median_ms, 6), "gflops": round(m.gflops, 3), "verified": m.verified,
                "repeats": m.timing.repeats, "compute_capability": compute_capability}


def across_archs(wl: Workload, builds: Sequence[tuple[KernelRecord, str]], *, repeats: int = 100,
                 seed: int = 0) -> list[ArchRun]:
    """Each (record, arch) of ``builds``: ``record``'s defaults built for ``arch``, verified and timed on ``wl``
    (``sweep``; one line each); the verified ones, in order (a family ``arch`` lacks a feature of is skipped in one
    line)."""
    runs = []
    for record, arch in builds:
        best = sweep(wl, record, target=cuda_target(arch), repeats=repeats, seed=seed, defaults_only=True).best_trial()
        if best is not None:
            runs.append(ArchRun(arch, best))
    return runs


def read_archs(path: Path) -> pd.DataFrame:
    """The latest run's rows of an ``ARCH_CSV`` (empty without one)."""
    return latest_run(read_results(path, ARCH_COLUMNS))


def same_gpu(session: Session, wl: Workload, *, older: Sequence[KernelRecord], native: Sequence[KernelRecord],
             repeats: int = 100, seed: int = 0) -> pd.DataFrame:
    """On a GPU run built for the GPU's own architecture: ``older``'s kernels built for ``older_arch`` of it and
    ``native``'s for it, measured on ``wl`` (``across_archs``) and appended to the notebook's ``ARCH_CSV``; their rows
    (with the run's fields). Without a GPU, or in a run built for an older architecture (its kernels are all PTX:
    nothing to compare), the latest recorded run's rows, left untouched."""
    if session.gpu and not is_ptx(session.arch, session.device.compute_capability) and older_arch(session.arch):
        cc = session.device.compute_capability
        runs = across_archs(wl, [*((r, older_arch(session.arch)) for r in older), *((r, session.arch) for r in native)],
                            repeats=repeats, seed=seed)
        rows = [r.row(cc) for r in runs]
        session.append_table(ARCH_CSV, rows, ARCH_COLUMNS)
        return pd.DataFrame([{**session.run_fields(), **row} for row in rows], columns=ARCH_COLUMNS)
    if session.gpu:
        print(f"this run builds for {session.arch} (PTX on this GPU): the comparison is measured by a run built for "
              "the GPU's own architecture; the recorded one is shown")
    return read_archs(session.root / "results" / session.notebook / ARCH_CSV)


def arch_table(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (one run's ``ARCH_CSV`` rows) as a table per workload: kernel, built for, how it ran, µs, TFLOP/s and
    its speed relative to the fastest kernel built for the run's oldest architecture on the same workload (rates in
    TOPS for integer workloads)."""
    if rows.empty:
        return pd.DataFrame()
    rows = rows.assign(ptx=rows["ptx"].astype(str).str.lower() == "true")
    oldest = min(rows["arch"], key=lambda a: parse_arch(str(a))[0])
    out = []
    for (shape, dtype), part in rows.groupby(["shape", "dtype"], sort=False):
        base = part.loc[part["arch"] == oldest, "median_ms"].min()
        for r in part.itertuples():
            out.append({"shape": shape, "dtype": dtype, "kernel": r.variant, "built for": r.arch,
                        "runs as": "PTX (the driver compiles it)" if r.ptx else "native",
                        "us": round(r.median_ms * 1e3, 1),
                        "TOPS" if str(dtype).startswith("int") else "TFLOP/s": round(r.gflops / 1e3, 1),
                        f"x {oldest}": round(base / r.median_ms, 2)})
    return pd.DataFrame(out)


def show_archs(rows: pd.DataFrame, session: Session) -> pd.DataFrame | None:
    """Print where and when ``rows`` (``same_gpu``'s) were measured and return their ``arch_table`` for the notebook to
    display; one line and None where none is recorded."""
    if rows.empty:
        print("No run built for the GPU's own architecture has measured this yet: run this notebook on a GPU newer "
              "than sm_80.")
        return None
    first = rows.iloc[0]
    print(f"{'measured' if session.gpu else 'recorded'} on {first['gpu']}, {str(first['timestamp'])[:10]}, "
          f"run {first['run_id']}")
    return arch_table(rows)

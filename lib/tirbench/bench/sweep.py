"""One call to measure a family of kernels: every candidate built in parallel, verified, then timed.

``sweep(workload, records)`` schedules each candidate of each ``KernelRecord`` (its ``candidates``, or its defaults
where it has none; ``defaults_only`` for a ladder), builds them side by side in worker processes (``build_all``),
checks each against the reference and times those that match; ``sweep_all`` does it for several workloads (a list of
layers, a few candidates each) with one parallel build for all of them. Every candidate ends in one line: its time
and rate, ``skipped`` (the family or a tile does not fit this workload: the helper's one-line reason; or the
target's architecture lacks a feature the family needs: ``KernelRecord.arch_refusal``'s line, once per family) or
``rejected`` (it failed to schedule, build or verify). A family whose every tried candidate was rejected raises
``SweepError`` naming it: a failed run, not a gap (``strict=False``: that line is printed and the other families
stand, where one layer of many must not stop the rest).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import pandas as pd
import tvm

from tirbench.bench.harness import Built, Measurement, build_all, message_lines, verify_then_time
from tirbench.core.errors import OneLineError
from tirbench.core.progress import BestBar
from tirbench.schedules.common.record import KernelRecord
from tirbench.workloads.base import Workload


class SweepError(OneLineError):
    """Every candidate of a kernel family failed on a workload."""


@dataclass(frozen=True)
class Trial:
    """One candidate's outcome: ``status`` is ``ok`` (``measurement`` set), ``skipped`` or ``rejected`` (``reason``)."""

    record: KernelRecord
    overrides: Mapping[str, Any]
    status: str
    reason: str = ""
    measurement: Measurement | None = None
    kernel: Built | None = field(default=None, repr=False, compare=False)   #: the built kernel, when measured

    @property
    def label(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.overrides.items())
        return f"{self.record.name}({params})" if params else self.record.name


@dataclass
class SweepResult:
    """Every trial of one ``sweep``, in the order tried."""

    workload: Workload
    trials: list[Trial] = field(default_factory=list)

    def measured(self, record: KernelRecord | None = None) -> list[Trial]:
        return [t for t in self.trials if t.status == "ok" and (record is None or t.record.name == record.name)]

    def best_trial(self, record: KernelRecord | None = None) -> Trial | None:
        """The fastest verified candidate (of ``record``, or of any family)."""
        return max(self.measured(record), key=lambda t: t.measurement.gflops, default=None)

    def best(self, record: KernelRecord | None = None, *, variant: str | None = None) -> Measurement | None:
        """The fastest verified candidate's measurement, renamed ``variant`` when given."""
        trial = self.best_trial(record)
        if trial is None:
            return None
        return replace(trial.measurement, variant=variant) if variant else trial.measurement

    def measurements(self) -> list[Measurement]:
        """Every verified candidate's measurement (variant = its family's name), in the order tried."""
        return [t.measurement for t in self.measured()]

    def table(self) -> pd.DataFrame:
        """One row per candidate: family, parameters, status, time, rate, reason."""
        return pd.DataFrame([{
            "kernel": t.record.name, "params": ", ".join(f"{k}={v}" for k, v in t.overrides.items()),
            "status": t.status, "median_ms": t.measurement.timing.median_ms if t.measurement else None,
            "TFLOP/s": t.measurement.gflops / 1e3 if t.measurement else None, "reason": t.reason,
        } for t in self.trials])


def one_line(err: BaseException) -> str:
    """An error as one line: the mismatch summary of a failed check, else the last non-empty line."""
    lines = message_lines(err)
    mismatch = [line for line in lines if line.startswith(("Mismatched elements", "Max absolute difference"))]
    text = "; ".join(mismatch) if mismatch else (lines[-1] if lines else "(no message)")
    return f"{type(err).__name__}: {text[:200]}"


def _candidates(record: KernelRecord, defaults_only: bool) -> list[Mapping[str, Any]]:
    return [{}] if defaults_only or not record.candidates else list(record.candidates)


def target_arch(target: tvm.target.Target) -> str | None:
    """The architecture a CUDA ``target`` builds for (its ``arch``: "sm_80"); None for another kind (llvm)."""
    return str(target.attrs["arch"]) if target.kind.name == "cuda" and "arch" in target.attrs else None


def _schedule(wl: Workload, records: Sequence[KernelRecord], defaults_only: bool,
              arch: str | None) -> tuple[list[Trial], list]:
    """Schedule every candidate: the trials already decided (skipped, rejected) and (trial, schedule) to build;
    a family ``arch`` (the target's) does not build is one skipped trial."""
    decided, to_build = [], []
    for record in records:
        reason = (record.arch_refusal(arch) if arch else None) or record.accepts(wl)
        if reason is not None:
            decided.append(Trial(record, {}, "skipped", reason))
            continue
        for overrides in _candidates(record, defaults_only):
            trial = Trial(record, overrides, "ok")
            try:
                to_build.append((trial, record.apply(wl, overrides)))
            except ValueError as err:   # a tile that does not fit this workload: the helper's one line
                decided.append(replace(trial, status="skipped", reason=str(err)))
            except Exception as err:  # noqa: BLE001 - fails to schedule: no number, but say so
                decided.append(replace(trial, status="rejected", reason=one_line(err)))
    return decided, to_build


def _measure(wl: Workload, scheduled: list, built: list, target: tvm.target.Target, repeats: int, seed: int,
             desc: str) -> list[Trial]:
    """Verify and time each built candidate (``built[i]`` is ``scheduled[i]``'s kernel, or the exception its build
    raised)."""
    unit = "TFLOP/s"
    bar = BestBar(range(len(scheduled)), desc=desc, unit=unit)
    trials = []
    for i in bar:
        trial, kernel = scheduled[i][0], built[i]
        try:
            if isinstance(kernel, Exception):
                raise kernel
            m = verify_then_time(wl, kernel, variant=trial.record.name, repeats=repeats, seed=seed, target=target)
        except Exception as err:  # noqa: BLE001 - fails to build or to verify: no number, but say so
            trial = replace(trial, status="rejected", reason=one_line(err))
        else:
            trial = replace(trial, measurement=m, kernel=kernel)
            bar.offer(m.gflops / 1e3)
        trials.append(trial)
        bar.write(_line(trial))
    bar.close()
    return trials


def build_by_config(jobs: Sequence[tuple[KernelRecord, Any]], target: tvm.target.Target) -> list:
    """``build_all`` over (record, schedule) pairs, one parallel build per distinct pass config; the built kernels
    (or their exceptions) in the order given."""
    built: list = [None] * len(jobs)
    for config in {tuple(sorted(r.pass_config.items())) for r, _ in jobs}:
        idx = [i for i, (r, _) in enumerate(jobs) if tuple(sorted(r.pass_config.items())) == config]
        for i, kernel in zip(idx, build_all([jobs[i][1] for i in idx], target, dict(config))):
            built[i] = kernel
    return built


def _line(trial: Trial) -> str:
    if trial.status == "ok":
        m = trial.measurement
        return f"  {trial.label}: {m.timing.median_ms * 1e3:,.1f} us, {m.gflops / 1e3:.1f} TFLOP/s"
    return f"  {trial.label}: {trial.status} ({trial.reason})"


def sweep(workload: Workload, records: KernelRecord | Sequence[KernelRecord], *, target: tvm.target.Target,
          repeats: int = 100, seed: int = 0, defaults_only: bool = False) -> SweepResult:
    """Build, verify and time every candidate of ``records`` on ``workload`` (see the module docstring)."""
    return sweep_all([(workload, records)], target=target, repeats=repeats, seed=seed, defaults_only=defaults_only)[0]


def sweep_all(jobs: Sequence[tuple[Workload, KernelRecord | Sequence[KernelRecord]]], *, target: tvm.target.Target,
              repeats: int = 100, seed: int = 0, defaults_only: bool = False,
              strict: bool = True) -> list[SweepResult]:
    """``sweep`` of each (workload, records) job, every candidate of every job built in one parallel batch (grouped by
    pass config), then each job's verified and timed in turn; one ``SweepResult`` per job, in order (``strict``: see
    the module docstring)."""
    plans = []
    for workload, records in jobs:
        records = [records] if isinstance(records, KernelRecord) else list(records)
        decided, scheduled = _schedule(workload, records, defaults_only, target_arch(target))
        for trial in decided:
            print(_line(trial))
        plans.append((workload, records, decided, scheduled))
    built = iter(build_by_config([(t.record, sch) for *_, scheduled in plans for t, sch in scheduled], target))
    results = []
    for workload, records, decided, scheduled in plans:
        names = "/".join(r.name for r in records) if len(records) <= 3 else f"{len(records)} kernels"
        kernels = [next(built) for _ in scheduled]
        measured = _measure(workload, scheduled, kernels, target, repeats, seed,
                            f"{names} {workload.shape}") if scheduled else []
        try:
            results.append(_checked(SweepResult(workload, decided + measured), records))
        except SweepError as err:
            if strict:
                raise
            print(f"  {err}")
            results.append(SweepResult(workload, decided + measured))
    return results


def _checked(result: SweepResult, records: Sequence[KernelRecord]) -> SweepResult:
    """``result``, or SweepError naming the first of ``records`` whose every tried candidate was rejected."""
    for record in records:
        tried = [t for t in result.trials if t.record.name == record.name]
        if tried and not result.measured(record) and any(t.status == "rejected" for t in tried):
            first = next(t.reason for t in tried if t.status == "rejected")
            raise SweepError(f"{record.name}: every candidate failed on {result.workload.name} "
                             f"{result.workload.shape} (first: {first})")
    return result

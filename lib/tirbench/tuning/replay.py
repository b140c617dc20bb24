"""Replay a tuning database in a notebook: its best schedule, verified then timed on a GPU, in one call.

    r = replay(gemm(4096, 4096, 4096), "v5", variant="metaschedule_v5_space_float32", root=session.root,
               target=cuda, repeats=repeats, seed=seed, trials=trials_v5, tune_now=tune_now)
    if r is not None and r.measurement is not None:
        session.record(r.measurement)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm import s_tir

from tirbench.bench.harness import Measurement, verify_then_time
from tirbench.core.machine import has_cuda_gpu
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import trials_done, tuner_vs_harness
from tirbench.tuning.spaces import DesignSpace, as_space
from tirbench.tuning.tune import tune, work_dir_for
from tirbench.workloads.base import Workload


@dataclass(frozen=True)
class Replay:
    """A replayed database: its space and work directory, the trials it was tuned for, its best schedule (for its
    trace and source), and that schedule verified then timed where a CUDA GPU ran it (else None)."""

    space: DesignSpace
    work_dir: Path
    trials: int
    schedule: s_tir.Schedule
    measurement: Measurement | None


def replay(workload: Workload, space: DesignSpace | str, *, variant: str, root: Path, target: tvm.target.Target,
           repeats: int = 100, seed: int = 0, trials: int = 0, tune_now: bool = False) -> Replay | None:
    """Replay ``workload``'s database in ``space`` (``work_dir_for(root, ...)``), with ``tune_now`` on a CUDA GPU
    tuned up to ``trials`` first. None, and one line, where the database has no trial yet; otherwise one line (best
    of how many trials, from where) and, on a CUDA GPU (``target`` a CUDA one), the best schedule verified then timed
    as ``variant`` (provider "metaschedule", the space's pass config) beside what the tuner recorded for it."""
    space = as_space(space)
    work_dir = work_dir_for(root, workload, space)
    gpu = target.kind.name == "cuda" and has_cuda_gpu()
    if tune_now and gpu:
        tune(workload, work_dir, trials=trials, space=space)
    where = f"{variant} {workload.shape}"
    done = trials_done(work_dir)
    if done == 0:
        print(f"{where}: no tuning database yet ({work_dir.relative_to(root)})")
        return None
    sch = best_schedule(open_database(work_dir), workload, space.target(target))
    print(f"{where}: best of {done} trials from {work_dir.relative_to(root)}")
    measurement = None
    if gpu:
        kernel, config = space.built_module(workload, sch.mod)  # the kernel the tuner measured for this schedule
        measurement = verify_then_time(workload, kernel, variant=variant, provider="metaschedule", trials=done,
                                       repeats=repeats, seed=seed, target=target, pass_config=config)
        print("  " + tuner_vs_harness(work_dir, measurement))
    return Replay(space=space, work_dir=work_dir, trials=done, schedule=sch, measurement=measurement)

"""Replay a tuning database in a notebook: its best schedule, verified then timed on a GPU, in one call.

    r = replay(gemm(4096, 4096, 4096), "v5", variant="metaschedule_v5_space_float32", root=session.root,
               target=cuda, repeats=repeats, seed=seed, trials=trials_v5, tune_now=tune_now)
    if r is not None and r.measurement is not None:
        session.record(r.measurement)

In a space with seeds (hand candidates measured first, ``tirbench.tuning.seeds``) the best record may be a seed's
kernel: the row then measures the hand kernel again, and says so (``tuned_best`` ``"seed"``, else ``"search"``).
``search_best`` replays, beside it, the fastest record whose kernel is no seed's, as ``<variant>_search_best``::

    if r is not None and (m := search_best(r, root=session.root, target=cuda, repeats=repeats, seed=seed)):
        session.record(m)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm import s_tir

from tirbench.bench.harness import Measurement, verify_then_time
from tirbench.core.gpu import ArchError
from tirbench.core.machine import has_cuda_gpu
from tirbench.tuning.archive import archived_database, is_trimmed
from tirbench.tuning.database import best_schedule, open_database, tuned_arch
from tirbench.tuning.history import trials_done, tuner_vs_harness
from tirbench.tuning.seeds import is_seed
from tirbench.tuning.spaces import DesignSpace, as_space
from tirbench.tuning.tune import tune, work_dir_for
from tirbench.workloads.base import Workload

#: What ``search_best`` appends to the replayed variant's name.
SEARCH_BEST_SUFFIX = "_search_best"


@dataclass(frozen=True)
class Replay:
    """A replayed database: the workload and variant it was replayed as, its space and work directory, the trials it
    was tuned for, its best schedule (for its trace and source), ``tuned_best`` (``"seed"`` where that schedule's
    kernel is one of the space's seeds, else ``"search"``), and that schedule verified then timed where a CUDA GPU
    ran it (else None)."""

    workload: Workload
    variant: str
    space: DesignSpace
    work_dir: Path
    trials: int
    schedule: s_tir.Schedule
    tuned_best: str
    measurement: Measurement | None


def _gpu(target: tvm.target.Target) -> bool:
    return target.kind.name == "cuda" and has_cuda_gpu()


def _measure(workload: Workload, space: DesignSpace, sch: s_tir.Schedule, *, variant: str, trials: int,
             tuned_best: str, target: tvm.target.Target, repeats: int, seed: int) -> Measurement:
    """``sch`` built as the tuner built it, verified then timed (provider "metaschedule"), labelled ``tuned_best``."""
    kernel, config = space.built_module(workload, sch.mod)  # the kernel the tuner measured for this schedule
    m = verify_then_time(workload, kernel, variant=variant, provider="metaschedule", trials=trials, repeats=repeats,
                         seed=seed, target=target, pass_config=config)
    return dataclasses.replace(m, tuned_best=tuned_best)


def _arch_refusal(space: DesignSpace, work_dir: Path, target: tvm.target.Target) -> str | None:
    """Why a CUDA ``target``'s architecture cannot replay (or tune) ``space``'s database in ``work_dir``: it lacks a
    feature the space ``needs``, or the database was tuned for another architecture (a schedule tuned for one is
    neither valid nor fast on another); None where it can, and for another target kind."""
    arch = str(target.attrs["arch"]) if target.kind.name == "cuda" and "arch" in target.attrs else None
    if arch is None:
        return None
    try:
        space.require_arch(arch)
    except ArchError as err:
        return str(err)
    tuned = tuned_arch(work_dir)
    if tuned is not None and tuned != arch:
        return f"tuned for {tuned}; this build is {arch}"
    return None


def replay(workload: Workload, space: DesignSpace | str, *, variant: str, root: Path, target: tvm.target.Target,
           repeats: int = 100, seed: int = 0, trials: int = 0, tune_now: bool = False) -> Replay | None:
    """Replay ``workload``'s database in ``space`` (``work_dir_for(root, ...)``), with ``tune_now`` on a CUDA GPU
    tuned up to ``trials`` first. None, and one line, where ``target``'s architecture cannot (``_arch_refusal``: the
    space needs a feature it lacks, or the database was tuned for another) or the database has no trial yet;
    otherwise one line (best
    of how many trials, from where; in a space with seeds, whether that best is a seed's kernel) and, on a CUDA GPU
    (``target`` a CUDA one), the best schedule verified then timed as ``variant`` (provider "metaschedule", the
    space's pass config, ``tuned_best`` set) beside what the tuner recorded for it."""
    space = as_space(space)
    work_dir = work_dir_for(root, workload, space)
    gpu = _gpu(target)
    where = f"{variant} {workload.shape}"
    refused = _arch_refusal(space, work_dir, target)
    if refused is not None:
        print(f"{where}: not replayed ({refused})")
        return None
    if tune_now and gpu:
        tune(workload, work_dir, trials=trials, space=space)
    done = trials_done(work_dir)
    if done == 0:
        print(f"{where}: no tuning database yet ({work_dir.relative_to(root)})")
        return None
    sch = best_schedule(open_database(work_dir), workload, space.target(target))
    label = "seed" if is_seed(space, workload, sch) else "search"
    said = {"seed": "; its best is a seed (a hand candidate the search started from)",
            "search": "; its best was found by the search"}[label] if space.seeds is not None else ""
    print(f"{where}: best of {done} trials from {work_dir.relative_to(root)}{said}")
    measurement = None
    if gpu:
        measurement = _measure(workload, space, sch, variant=variant, trials=done, tuned_best=label, target=target,
                               repeats=repeats, seed=seed)
        print("  " + tuner_vs_harness(work_dir, measurement))
    return Replay(workload=workload, variant=variant, space=space, work_dir=work_dir, trials=done, schedule=sch,
                  tuned_best=label, measurement=measurement)


def ranked_schedules(workload: Workload, work_dir: Path) -> list[tuple[float, s_tir.Schedule]]:
    """Every successful record of ``workload`` in the database in ``work_dir``, fastest first: (its mean run time in
    seconds, its schedule)."""
    db = open_database(work_dir)
    records = db.get_top_k(db.commit_workload(workload.mod), len(db.get_all_tuning_records()))
    out = []
    for record in records:
        sch = s_tir.Schedule(workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        out.append((sum(float(s) for s in record.run_secs) / len(record.run_secs), sch))
    return out


def _search_best_schedule(r: Replay, root: Path) -> tuple[float, s_tir.Schedule] | None:
    """The fastest record of ``r``'s database whose kernel is no seed's: among the records kept in git, else in the
    full database from the archive (``archive.archived_database``); None where no record is."""
    work_dirs = [r.work_dir]
    if is_trimmed(r.work_dir):
        work_dirs.append(archived_database(root, r.work_dir))
    for work_dir in work_dirs:
        for secs, sch in ranked_schedules(r.workload, work_dir):
            if not is_seed(r.space, r.workload, sch):
                return secs, sch
    return None


def search_best(r: Replay, *, root: Path, target: tvm.target.Target, repeats: int = 100,
                seed: int = 0) -> Measurement | None:
    """The fastest record of ``r``'s database whose kernel is no seed's, as ``<variant>_search_best``: one line (what
    it is, its run time as the tuner recorded it) and, on a CUDA GPU, that schedule verified then timed (provider
    "metaschedule", ``tuned_best`` ``"search"``). None, and one line, where the space has no seeds or the best is
    already the search's (``r.measurement`` is that row), or where every record is a seed's; None on a CPU."""
    variant = r.variant + SEARCH_BEST_SUFFIX
    if r.space.seeds is None or r.tuned_best == "search":
        print(f"{variant}: none apart from {r.variant}, whose best is the search's own")
        return None
    found = _search_best_schedule(r, root)
    if found is None:
        print(f"{variant}: every record of {r.work_dir.relative_to(root)} is a seed's kernel")
        return None
    secs, sch = found
    print(f"{variant}: the search's fastest kernel that is no seed, {secs * 1e3:.4f} ms as the tuner measured it")
    if not _gpu(target):
        return None
    return _measure(r.workload, r.space, sch, variant=variant, trials=r.trials, tuned_best="search", target=target,
                    repeats=repeats, seed=seed)

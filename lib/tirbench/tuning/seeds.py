"""Start a search where the conv rules stop: their candidates, measured and committed to the database first.

A design space with seeds (``DesignSpace.seeds``, the ``rules`` space) turns each candidate the rules would try into
the space's own trace with its sampled decisions set to the candidate's tiles
(``tirbench.schedules.common.decisions.with_decisions``). Before the first chunk, ``seed_database`` applies the
space's postprocessors to each, builds and measures it with the tuner's own builder and runner, and commits it as a
tuning record. MetaSchedule's evolutionary search then draws part of its
first population from the database's best records (``init_measured_ratio``) and mutates their tiles: the search
starts from the rules' choice instead of from random samples, and a seed is a trial like any other (it counts
toward ``--trials``).

``is_seed`` says whether a tuned schedule's kernel is a seed's: a best record that is one is the hand candidate the
search started from, not something the search found (``tirbench.tuning.labels``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.tuning.database import open_database
from tirbench.workloads.base import Workload

if TYPE_CHECKING:
    from tirbench.tuning.spaces import DesignSpace


def _postprocessed(ctx: ms.TuneContext, sch: s_tir.Schedule) -> s_tir.Schedule | None:
    """``sch`` after the space's postprocessors (as the search applies them); None where one rejects it."""
    sch = sch.copy()
    sch.enter_postproc()
    return sch if all(post.apply(sch) for post in ctx.space_generator.postprocs) else None


def seed_database(wl: Workload, work_dir: Path, seeds: Sequence[s_tir.Schedule], *, space_generator: object,
                  target: tvm.target.Target, builder: ms.builder.Builder, runner: ms.runner.Runner) -> int:
    """Build, measure and commit ``seeds`` (schedules of ``wl`` in the space ``space_generator`` makes) to the
    database in ``work_dir``: postprocessed, built and run as a trial is. Returns how many were committed (a seed a
    postprocessor rejects, or that fails to build or run, is left out)."""
    ctx = ms.TuneContext(mod=wl.mod, target=target, space_generator=space_generator, task_name="seeds")
    ready = [s for s in (_postprocessed(ctx, sch) for sch in seeds) if s is not None]
    if not ready:
        return 0
    built = builder.build([ms.builder.BuilderInput(sch.mod, target) for sch in ready])
    args_info = ms.arg_info.ArgInfo.from_prim_func(wl.mod["main"])
    ok = [(sch, b) for sch, b in zip(ready, built) if b.error_msg is None]
    futures = runner.run([ms.runner.RunnerInput(b.artifact_path, target.kind.name, args_info) for _, b in ok])
    db = open_database(work_dir)
    workload = db.commit_workload(wl.mod)
    committed = 0
    for (sch, _), future in zip(ok, futures):
        result = future.result()
        if result.error_msg is None:
            db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, result.run_secs, target,
                                                             args_info))
            committed += 1
    return committed


def sampled_decisions(sch: s_tir.Schedule) -> list[int | list[int]]:
    """The decisions of ``sch``'s sampling instructions before its postprocessing, in order, as plain ints (a
    perfect tile's as a list): equal for two schedules of one design that drew the same."""
    trace, out = sch.trace, []
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        if inst.kind.name.startswith("Sample"):
            decision = trace.decisions[inst]
            out.append([int(d) for d in decision] if hasattr(decision, "__len__") else int(decision))
    return out


def is_seed(space: DesignSpace, wl: Workload, sch: s_tir.Schedule) -> bool:
    """Whether the kernel of ``sch`` (a tuned schedule of ``wl`` in ``space``) is one of the space's seeds: by the
    space's own test where it has one (``DesignSpace.seed_kernel``: the wgmma space's decisions that its built kernel
    does not use are left out), else by equal sampled decisions. False in a space without seeds."""
    if space.seeds is None:
        return False
    if space.seed_kernel is not None:
        return space.seed_kernel(wl, sch)
    mine = sampled_decisions(sch)
    return any(sampled_decisions(seed) == mine for seed in space.seeds(wl))

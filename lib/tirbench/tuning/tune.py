"""Tune in resumable chunks into a JSON database (``tirbench.tuning.database``) under ``results/tuning/``.

A space with seeds (``rules``, ``wgmma``) has them measured and committed first (``tirbench.tuning.seeds``); they
count as trials. Tuning adds records to the database, so a run that already has ``trials`` trials only opens it, and a
run cut short resumes (a record cut off by the kill is dropped first). Each chunk prints trials done, trials per
minute and the best rate so far (and moves a tqdm bar), appends its wall time to ``tuning_chunks.csv`` and its
phases to ``tuning_phases.csv`` (``tirbench.tuning.logs``), and brings ``tuning_history.csv`` up to date
(``tirbench.tuning.history``).

A kernel is measured once per database (``tirbench.tuning.kernels``): a candidate that builds the same code as one
measured before (the wgmma space's stand-ins) is recorded with that measurement's run times, not measured again;
``measured_kernels.csv`` beside the database keeps each kernel's hash and run times.
"""
from __future__ import annotations

import time
from pathlib import Path

import tvm
from tvm.s_tir import meta_schedule as ms

from tirbench.core.machine import require_cuda_gpu
from tirbench.core.progress import BestBar
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.tuning import phases, throughput
from tirbench.tuning.builders import make_builder
from tirbench.tuning.database import compact_database, open_database, repair_database
from tirbench.tuning.history import sync_history, trials_done, tuning_history
from tirbench.tuning.kernels import ReuseRunner
from tirbench.tuning.logs import log_chunk, log_phases
from tirbench.tuning.processes import task_cores
from tirbench.tuning.runners import make_local_runner
from tirbench.tuning.seeds import seed_database
from tirbench.tuning.spaces import DesignSpace, as_space, uses_tensor_cores
from tirbench.workloads.base import Workload

#: MetaSchedule's evolutionary search population (its own default); ``--population`` changes it.
DEFAULT_POPULATION = 512


def tuned_pass_config(wl: Workload, space: DesignSpace | str = "default") -> dict[str, bool]:
    """The PassContext config a kernel tuned for ``wl`` in ``space`` is built with (the builders' ``f_build``
    applies the same one): tensor-core candidates, the v5 space's cp.async copies, or none."""
    return as_space(space).pass_config(wl)


def work_dir_for(root: Path, wl: Workload, space: DesignSpace | str = "default") -> Path:
    """``results/tuning/<workload>/<dtype>_[<layout>_]<shape><suffix>`` under the project root: the layout where
    the workload has one (conv2d), the space's suffix (``_v5space``, ``_templatespace``; none for the default)."""
    spec = as_space(space)
    spec.require(wl)
    layout = f"{wl.layout}_" if wl.layout else ""
    return root / "results" / "tuning" / wl.name / f"{wl.dtype}_{layout}{wl.shape}{spec.db_suffix}"


def space_target(space: DesignSpace | str, target: tvm.target.Target | None = None) -> tvm.target.Target:
    """The target to tune ``space`` with (``DesignSpace.target``: the v5 space's allows 227 KB of shared memory)."""
    return as_space(space).target(target)


def best_tflops(work_dir: Path, flops: int) -> float | None:
    """The best rate recorded so far in TFLOP/s; None before the first trial."""
    best = tuning_history(work_dir, flops)["best_gflops"]
    return float(best.iloc[-1]) / 1e3 if len(best) else None


def _label(wl: Workload, space: DesignSpace) -> str:
    return f"{wl.name} {wl.dtype} {wl.shape} ({space.name})"


def _open_bar(wl: Workload, work_dir: Path, space: DesignSpace, trials: int, done: int) -> BestBar:
    """Before the first chunk: a database cut short by a kill repaired (MetaSchedule appends after its last whole
    record), and the progress bar, starting at the trials and the best already there."""
    repair_database(work_dir)
    bar = BestBar(desc=f"tuning {_label(wl, space)}", unit="TFLOP/s", total=trials, initial=done, step="trial")
    if (best := best_tflops(work_dir, wl.flops)) is not None:
        bar.offer(best)
    return bar


def _run_chunk(wl: Workload, work_dir: Path, space: DesignSpace, target: tvm.target.Target, n: int,
               builder: ms.builder.Builder, runner: ms.runner.Runner, population: int) -> None:
    """``n`` trials of MetaSchedule's evolutionary search (``population``) into the database, each build and run
    timed (``phases``)."""
    if uses_tensor_cores(wl):
        import_tensor_intrin()  # the tuning process itself needs them registered, not only the builders
    ms.tune_tir(mod=wl.mod, target=target, work_dir=str(work_dir), max_trials_global=n,
                num_trials_per_iter=min(n, 64), space=space.generator(wl), seed=0,
                strategy=ms.search_strategy.EvolutionarySearch(population_size=population),
                num_tuning_cores=task_cores() or "physical",
                builder=phases.TimedBuilder(builder), runner=phases.TimedRunner(ReuseRunner(runner, work_dir)))


def _finish_chunk(wl: Workload, work_dir: Path, space: DesignSpace, bar: BestBar, *, done: int, trials: int,
                  wall: float, offset: int) -> int:
    """After a chunk: the records compacted, the chunk and history logs written, the progress shown. Returns the
    trials the chunk added."""
    compact_database(work_dir)
    new = trials_done(work_dir) - done
    log_chunk(work_dir, done + new, new, wall)
    sync_history(work_dir)
    best = best_tflops(work_dir, wl.flops)
    bar.update(new)
    if best is not None:
        bar.offer(best)
    bar.write(f"[tuning] {_label(wl, space)}: {done + new}/{trials} trials, {60 * new / wall:.1f} trials/min, "
              f"best so far {'-' if best is None else f'{best:,.2f} TFLOP/s'}")
    bar.write(log_phases(work_dir, offset, wall, new))
    return new


def _seed(wl: Workload, work_dir: Path, space: DesignSpace, target: tvm.target.Target, bar: BestBar,
          builder: ms.builder.Builder, runner: ms.runner.Runner) -> None:
    """Before the first chunk of a space with seeds: measure and commit them (``seeds.seed_database``), and say how
    long that took and the builder workers' and the runner's share of it."""
    t0, offset = time.monotonic(), phases.log_size()
    schedules = space.seeds(wl)
    n = seed_database(wl, work_dir, schedules, space_generator=space.generator(wl), target=target, builder=builder,
                      runner=ReuseRunner(runner, work_dir))
    took = phases.totals(phases.start_log(), offset).set_index("phase")["seconds"]
    sync_history(work_dir)
    bar.update(n)
    if (best := best_tflops(work_dir, wl.flops)) is not None:
        bar.offer(best)
    bar.write(f"[tuning] {_label(wl, space)}: {n} of {len(schedules)} seeds measured in {time.monotonic() - t0:.1f} s "
              f"(builds {took.get('build', 0.0):.1f} s summed over the workers, measurements "
              f"{took.get('measure', 0.0):.1f} s), best {'-' if best is None else f'{best:,.2f} TFLOP/s'}")
    if n == 0:
        raise RuntimeError(f"no seed of {_label(wl, space)} built and ran (see {work_dir / 'logs'})")


def tune(wl: Workload, work_dir: Path, *, trials: int, chunk: int = 64, seconds: float | None = None,
         target: tvm.target.Target | None = None, space: DesignSpace | str = "default", setup: str = "tuned",
         builder: ms.builder.Builder | None = None, runner: ms.runner.Runner | None = None,
         population: int = DEFAULT_POPULATION) -> ms.database.JSONDatabase:
    """Tune until the database has ``trials`` trials (chunks of ``chunk``), or ``seconds`` nearly run out.

    ``seconds`` is checked between chunks from the measured time per trial, so the first chunk always runs
    whole: keep ``chunk`` small where trials are slow. Without a ``runner``, tuning for CUDA needs a CUDA GPU here
    when any trial is left to run; with enough trials it only opens the database. ``space``: a ``DesignSpace`` or
    its name (``work_dir_for`` names its database). ``builder`` (``make_builder(wl, space, setup)``) and ``runner``
    (``make_local_runner(setup)``, or ``make_rpc_runner``) are made on first use unless given: share them across
    workloads of one dtype and space to pay their start-up once. ``population``: the evolutionary search's.
    """
    if setup not in throughput.SETUPS:
        raise ValueError(f"setup={setup!r}: expected one of {', '.join(map(repr, throughput.SETUPS))}")
    space = as_space(space)
    space.require(wl)
    target = space.target(target)
    deadline = None if seconds is None else time.monotonic() + seconds
    per_trial, bar = None, None
    while (left := trials - (done := trials_done(work_dir))) > 0:
        if runner is None and target.kind.name == "cuda":
            require_cuda_gpu()
        n = min(chunk, left)
        if deadline is not None and per_trial is not None and time.monotonic() + per_trial * n > deadline:
            print(f"[tuning] stopping with {done}/{trials} trials: the time is nearly up")
            break
        bar = bar or _open_bar(wl, work_dir, space, trials, done)
        builder = builder or make_builder(wl, space, setup)
        runner = runner or make_local_runner(setup)
        if done == 0 and space.seeds is not None:
            _seed(wl, work_dir, space, target, bar, builder, runner)
            continue
        t0, offset = time.monotonic(), phases.log_size()
        _run_chunk(wl, work_dir, space, target, n, builder, runner, population)
        wall = time.monotonic() - t0
        new = _finish_chunk(wl, work_dir, space, bar, done=done, trials=trials, wall=wall, offset=offset)
        per_trial = wall / max(new, 1)
        if new == 0:  # every candidate failed to build or run: another chunk would loop forever
            bar.write(f"[tuning] stopping: the chunk recorded no trial (see {work_dir / 'logs'})")
            break
    if bar is not None:
        bar.close()
    return open_database(work_dir)

"""MetaSchedule on a whole Relax model: notebook 09's ``metaschedule`` variant, tuned and replayed.

The tasks: the module TVM's default variant compiles (``pipeline.passes(rules=False)`` in the config's dtype and
layout), prepared as ``relax.get_pipeline("static_shape_tuning")`` prepares it (``prepared``:
``DecomposeOpsForInference``, ``CanonicalizeBindings``, then the "zero" pipeline: ``LegalizeOps``, ``FuseOps``,
``FuseTIR``); each fused PrimFunc (a conv with its epilogue, a pooling, the classifier's matmul) is a task.
``tune_model`` tunes them with MetaSchedule's own space and evolutionary search (a population of ``POPULATION``),
through the suite's builder (one pool of worker processes, the tensor intrinsics registered once in each) and runner
(one launch per repeat, the harness's L2 flush before each); ``trials`` counts every task's trials together. First
each task the database has no record of gets ``TRIALS_PER_ITER`` trials, one task after another, the most time
first (weight x FLOPs; ``ms.tune_tasks`` with its round-robin scheduler, so each task's records land as soon as it
is measured): a run stopped by a time limit keeps every task it finished, and one cut short leaves the largest
tasks tuned and the rest to DLight. Trials left after that go to MetaSchedule's gradient task scheduler over all
the tasks. One database per model and config (``work_dir_for``:
``results/tuning/relax/<model>_<dtype>_b<batch>/``, every task's records in it: no one workload, so notebook 00
draws no tuning curve of it), with ``tuning_history.csv`` beside it as for one workload's (``tuning.history``: every
trial, so ``trials_done`` counts them after ``tuning.archive`` trimmed it to each task's fastest records and its
tasks' hashes; ``pack`` archives it whole). Resumable: a run with ``trials`` trials recorded only opens it; one cut
short goes on from its records (MetaSchedule records every trial, failed ones too; a record cut off by a kill is
dropped first), its search starting from each task's best (of the records kept, on a trimmed database: the trimmed
tasks' modules come back from the model, ``database.fill_workloads``; unpack the archive to go on from every record).

``apply_database`` is the variant's ``finish``: the prepared module with each task that has records replaced by its
best schedule (``MetaScheduleApplyDatabase`` on the database's records of the model's tasks,
``database.tasks_database``; marked scheduled, so DLight leaves it); ``tvm.compile`` then schedules the rest with
DLight, as for ``tvm_default``.

    python -m tirbench.tuning.relax_model MODEL [--config fp32|fp16] [--batch N] [--trials N]

(a CUDA GPU, torch and torchvision; ``tune_command`` writes the line).
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.analysis import estimate_tir_flops

from tirbench.bench.harness import last_line
from tirbench.compile.models import CONFIGS, ModelConfig, TvmVariant, build_model, export_relax
from tirbench.compile.pipeline import passes
from tirbench.core.machine import cuda_target, require_cuda_gpu
from tirbench.core.paths import project_root
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.tuning.builders import PersistentBuilder, build_candidate, worker_init_for
from tirbench.tuning.database import (MODEL_DATABASES, compact_database, fill_workloads, recorded_tasks,
                                      repair_database, tasks_database, tasks_tuned)
from tirbench.tuning.history import sync_history, trials_done
from tirbench.tuning.processes import task_cores
from tirbench.tuning.runners import make_local_runner

#: Trials each task gets at its turn.
TRIALS_PER_ITER = 32
#: The evolutionary search's population (MetaSchedule's default is 512). A task's first turn has a cost model that
#: has seen none of its trials, so the larger population buys little there, and sampling it is most of the turn's
#: time: an fp16 NHWC conv's first 32 candidates took 47 s on an H200 host's 16 cores at 512; on 2 CPU cores 54 s
#: at 512, 17 s at 128.
POPULATION = 128


def work_dir_for(root: Path, model: str, config: ModelConfig) -> Path:
    """``results/tuning/relax/<model>_<dtype>_b<batch>`` under the project root."""
    return root / "results" / "tuning" / MODEL_DATABASES / f"{model}_{config.dtype}_b{config.batch}"


def replay_summary(work_dir: Path) -> str:
    """What replaying the database in ``work_dir`` gives the model: its trials and how many of its tasks they tuned
    (the others are DLight's, as in TVM's default variant)."""
    tuned, tasks = tasks_tuned(work_dir)
    return f"{trials_done(work_dir)} trials, {tuned} of {tasks} tasks tuned (the rest DLight's)"


def tune_command(model: str, config: ModelConfig, trials: int) -> str:
    """The command line that tunes ``model`` in ``config`` up to ``trials`` trials (``main``)."""
    batch = "" if config.batch == CONFIGS[config.name].batch else f" --batch {config.batch}"
    return f"python -m tirbench.tuning.relax_model {model} --config {config.name}{batch} --trials {trials}"


def prepared(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """``mod`` (after ``pipeline.passes``) as MetaSchedule's tasks are extracted from it and its database applied to
    it (see the module docstring)."""
    with target:
        return tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                         relax.transform.CanonicalizeBindings(), relax.get_pipeline("zero")])(mod)


def task_modules(mod: tvm.IRModule, target: tvm.target.Target) -> list[tvm.IRModule]:
    """The tasks of ``mod`` (``prepared``) as MetaSchedule tunes them, one module each."""
    return [task.dispatched[0] for task in ms.relax_integration.extract_tasks(mod, target)]


def apply_database(work_dir: str, fp16: bool, mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """``prepared(mod)`` with the best schedule of each task the database in ``work_dir`` has records of (``fp16``:
    a float16 model's, whose records may name tensor intrinsics)."""
    if fp16:
        import_tensor_intrin()
    mod = prepared(mod, target)
    with target, tasks_database(Path(work_dir), task_modules(mod, target)):
        return relax.transform.MetaScheduleApplyDatabase()(mod)


def metaschedule_variant(root: Path, model: str, config: ModelConfig) -> TvmVariant | None:
    """The ``metaschedule`` variant of ``model`` in ``config``, replaying its database; None where none is recorded."""
    work_dir = work_dir_for(root, model, config)
    if trials_done(work_dir) == 0:
        return None
    return TvmVariant("metaschedule", rules=False, provider="metaschedule",
                      finish=functools.partial(apply_database, str(work_dir), config.fp16))


def tune_model(mod: tvm.IRModule, target: tvm.target.Target, work_dir: Path, *, trials: int, fp16: bool,
               builder: ms.builder.Builder | None = None, runner: ms.runner.Runner | None = None) -> int:
    """Tune ``mod`` (after ``pipeline.passes``, rules off) for ``target`` until the database in ``work_dir`` has
    ``trials`` trials (see the module docstring); returns the trials it has. ``fp16``: the tasks may use tensor
    cores (their intrinsics registered here and in the builder's workers). Without a ``runner``, tuning for CUDA
    needs a CUDA GPU here where trials are left to run."""
    work_dir.mkdir(parents=True, exist_ok=True)
    repair_database(work_dir)
    left = trials - trials_done(work_dir)
    if left <= 0:
        return trials_done(work_dir)
    if runner is None and target.kind.name == "cuda":
        require_cuda_gpu()
    if fp16:
        import_tensor_intrin()
    tasks = ms.relax_integration.extract_tasks(prepared(mod, target), target)
    mods = [task.dispatched[0] for task in tasks]
    fill_workloads(work_dir, mods)   # a trimmed database's tasks
    arch = str(target.attrs["arch"]) if target.kind.name == "cuda" else None
    tools = dict(builder=builder or PersistentBuilder(functools.partial(build_candidate, None, {}),
                                                      max_workers=task_cores(),
                                                      initializer=worker_init_for(fp16, arch)),
                 runner=runner or make_local_runner("tuned"))
    untuned = sorted((task for task, seen in zip(tasks, recorded_tasks(work_dir, mods)) if not seen),
                     key=lambda task: -task.weight * estimate_tir_flops(task.dispatched[0]))
    if untuned:
        _tune_tasks(untuned, work_dir, min(left, TRIALS_PER_ITER * len(untuned)), "round-robin", TRIALS_PER_ITER,
                    **tools)
    if (left := trials - trials_done(work_dir)) > 0:
        _tune_tasks(tasks, work_dir, left, "gradient", None, **tools)
    compact_database(work_dir)
    sync_history(work_dir)
    return trials_done(work_dir)


def _tune_tasks(tasks: list[ms.ExtractedTask], work_dir: Path, trials: int, scheduler: str,
                per_task: int | None, *, builder: ms.builder.Builder, runner: ms.runner.Runner) -> None:
    """``tasks`` tuned for ``trials`` in all (``per_task`` at most each) into the database in ``work_dir``."""
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        tasks, str(work_dir), strategy=ms.search_strategy.EvolutionarySearch(population_size=POPULATION),
        num_threads=task_cores() or "physical", seed=0)
    ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(work_dir), max_trials_global=trials,
                  max_trials_per_task=per_task, num_trials_per_iter=min(TRIALS_PER_ITER, trials), builder=builder,
                  runner=runner, task_scheduler=scheduler)


def tune(model: str, config: ModelConfig, *, trials: int, root: Path, target: tvm.target.Target | None = None,
         seed: int = 0) -> int:
    """``model`` (``models.build_model``) in ``config`` exported, passed and tuned into its database
    (``work_dir_for``) up to ``trials``; returns the trials it has."""
    target = target or cuda_target()
    work_dir = work_dir_for(root, model, config)
    if trials_done(work_dir) >= trials:
        return trials_done(work_dir)
    if target.kind.name == "cuda":
        require_cuda_gpu()   # before the model is built and exported
    mod = export_relax(*build_model(model, config.batch, seed))
    with target:
        passed = tvm.transform.Sequential(passes(mod, target, rules=False, fp16=config.fp16,
                                                 nhwc=config.layout == "NHWC"))(mod)
    return tune_model(passed, target, work_dir, trials=trials, fp16=config.fp16)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tirbench.tuning.relax_model",
                                 description="MetaSchedule on a whole torchvision model through Relax (notebook 09)")
    ap.add_argument("model", help="a torchvision model builder's name (resnet50, mobilenet_v2, ...)")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="fp16")
    ap.add_argument("--batch", type=int, default=None, help="the config's batch by default")
    ap.add_argument("--trials", type=int, required=True, help="trials over all the model's tasks, in all")
    a = ap.parse_args(argv)
    config = CONFIGS[a.config]
    if a.batch is not None:
        config = ModelConfig(config.name, config.dtype, a.batch, config.layout)
    root, start = project_root(), time.monotonic()
    try:
        done = tune(a.model, config, trials=a.trials, root=root)
    except (ValueError, RuntimeError, ImportError) as err:
        print(f"relax_model: {last_line(err)}", file=sys.stderr)
        return 2
    print(f"[tuning] {a.model} {config.label()}: {done} trials in {work_dir_for(root, a.model, config)} "
          f"({time.monotonic() - start:.0f} s this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

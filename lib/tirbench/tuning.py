"""MetaSchedule wrappers: tune in resumable chunks into a JSON database, replay the best, read the history.

The database lives in a work directory under ``results/tuning/``; tuning adds records to it, so a run that
already has ``trials`` records replays the best schedule without tuning, and a run cut short resumes.

    python -m tirbench.tuning gemm 1024 1024 1024 --dtype float32 --trials 256 --seconds 540

tunes (on a CUDA GPU) until the database holds 256 records for that workload or the time is nearly up.
Two search spaces: ``"default"`` (MetaSchedule's own rules: ``"cuda"``, or ``"cuda-tensorcore"`` for fp16) and
``"v5"`` (fp32 only: the v5 warp-tiled template with its tile sizes sampled, ``gemm_v5_space``), each in its
own database.
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.machine import cuda_target, require_cuda_gpu
from tirbench.schedules.gemm import MAX_SHARED_BYTES, SIMT_ASYNC_CONFIG, gemm_v5_space
from tirbench.workloads.base import Workload

#: The search spaces ``tune`` knows: MetaSchedule's default rules, or the v5 template (fp32 GEMM).
SPACES = ("default", "v5")
#: The v5 space is one design space per (lanes, stages, prefetch, columns_outer): a warp's lane shape fixes the
#: split of two loops at once, and annotations and loop orders cannot be sampled.
V5_SPACE_VARIANTS = [(lanes, stages, prefetch, columns_outer) for lanes in ((8, 4), (4, 8)) for stages in (2, 3, 4)
                     for prefetch in ("none", "k_step") for columns_outer in (False, True)]

#: Compile-time config for tensor-core candidates (fp16 in, fp32 accumulate): without it ``tvm.compile`` fails
#: with "tvm_access_ptr element type must match the source buffer".
TENSOR_CORE_PASS_CONFIG = {"tirx.disable_storage_rewrite": True}


def import_tensor_intrin() -> None:
    """Builder-worker initializer: registers the CUDA tensor intrinsics (20-40 s per worker)."""
    import tvm.s_tir.tensor_intrin  # noqa: F401


def build_with_config(config: dict[str, bool], mod: tvm.IRModule, target: tvm.target.Target,
                      _params: object) -> tvm.runtime.Module:
    """MetaSchedule ``f_build`` (bound to a ``tuned_pass_config`` with ``functools.partial``): builds a candidate
    under that PassContext config, as the notebook builds the replayed kernel."""
    with tvm.transform.PassContext(config=config):
        return tvm.tirx.build(mod, target=target)


def uses_tensor_cores(wl: Workload) -> bool:
    return wl.dtype in ("float16", "int8")


def tuned_pass_config(wl: Workload, space: str = "default") -> dict[str, bool]:
    """The PassContext config a kernel tuned for ``wl`` in ``space`` is built with (the builders' ``f_build``
    applies the same one): tensor-core candidates, the v5 space's cp.async copies, or none."""
    if uses_tensor_cores(wl):
        return TENSOR_CORE_PASS_CONFIG
    return SIMT_ASYNC_CONFIG if space == "v5" else {}


def _require_space(wl: Workload, space: str) -> None:
    if space not in SPACES:
        raise ValueError(f"space={space!r}: expected one of {', '.join(map(repr, SPACES))}")
    if space == "v5" and (wl.name != "gemm" or wl.dtype != "float32"):
        raise ValueError(f"space='v5' is the fp32 GEMM template, not {wl.name} {wl.dtype}")


def work_dir_for(root: Path, wl: Workload, space: str = "default") -> Path:
    """``results/tuning/<workload>/<dtype>_<shape>`` under the project root (``..._v5space`` for the v5 space)."""
    _require_space(wl, space)
    suffix = "" if space == "default" else f"_{space}space"
    return root / "results" / "tuning" / wl.name / f"{wl.dtype}_{wl.shape}{suffix}"


def space_target(space: str, target: tvm.target.Target | None = None) -> tvm.target.Target:
    """The target to tune with: for the v5 space, one whose shared-memory limit is the dynamic 227 KB (the tag
    says 48 KB, the static limit, and ``VerifyGPUCode`` would drop every deep pipeline)."""
    target = target or cuda_target()
    if space == "default":
        return target
    spec = {k: v for k, v in dict(target.export()).items() if k != "host"}
    spec["max_shared_memory_per_block"] = MAX_SHARED_BYTES
    return tvm.target.Target(spec, host=target.host)


def v5_space(sch: s_tir.Schedule) -> list[s_tir.Schedule]:
    """``ScheduleFn`` body: the v5 template once per ``V5_SPACE_VARIANTS`` entry."""
    return [gemm_v5_space(sch.copy(), lanes=lanes, stages=stages, prefetch=prefetch, columns_outer=columns_outer)
            for lanes, stages, prefetch, columns_outer in V5_SPACE_VARIANTS]


def _space_generator(wl: Workload, space: str) -> ms.space_generator.SpaceGenerator | str:
    if space == "v5":
        return ms.space_generator.ScheduleFn(v5_space, sch_rules=[], postprocs="cuda", mutator_probs="cuda")
    if uses_tensor_cores(wl):
        return ms.space_generator.PostOrderApply(sch_rules="cuda-tensorcore", postprocs="cuda-tensorcore",
                                                 mutator_probs="cuda-tensorcore")
    return "post-order-apply"


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    work_dir.mkdir(parents=True, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=str(work_dir))


def _record_lines(work_dir: Path) -> list[str]:
    """The database's tuning records, one JSON line each, in the order they were measured."""
    path = work_dir / "database_tuning_record.json"
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def trials_done(work_dir: Path) -> int:
    """Tuning records already in the database (0 when there is none)."""
    return len(_record_lines(work_dir))


def tune(wl: Workload, work_dir: Path, *, trials: int, chunk: int = 64, seconds: float | None = None,
         target: tvm.target.Target | None = None, space: str = "default") -> ms.database.JSONDatabase:
    """Tune until the database holds ``trials`` records (chunks of ``chunk``), or ``seconds`` nearly run out.

    ``seconds`` is checked between chunks from the measured time per trial, so the first chunk always runs
    whole: keep ``chunk`` small where trials are slow. Needs a CUDA GPU when any trial is left to run; with
    enough records it only opens the database. ``space``: see ``SPACES`` (``work_dir_for`` names its database).
    """
    _require_space(wl, space)
    target = space_target(space, target)
    deadline = None if seconds is None else time.monotonic() + seconds
    per_trial = None
    while (left := trials - trials_done(work_dir)) > 0:
        require_cuda_gpu()
        n = min(chunk, left)
        if deadline is not None and per_trial is not None and time.monotonic() + per_trial * n > deadline:
            print(f"[tuning] stopping with {trials_done(work_dir)}/{trials} trials: the time is nearly up")
            break
        t0 = time.monotonic()
        tc = uses_tensor_cores(wl)
        if tc:
            import_tensor_intrin()  # the tuning process itself needs them registered, not only the builders
        config = tuned_pass_config(wl, space)
        f_build = functools.partial(build_with_config, config) if config else None
        ms.tune_tir(mod=wl.mod, target=target, work_dir=str(work_dir), max_trials_global=n,
                    num_trials_per_iter=min(n, 64), space=_space_generator(wl, space), seed=0,
                    builder=ms.builder.LocalBuilder(timeout_sec=120, initializer=import_tensor_intrin if tc else None,
                                                    f_build=f_build),
                    runner=ms.runner.LocalRunner(timeout_sec=60))
        per_trial = (time.monotonic() - t0) / n
        print(f"[tuning] {wl.name} {wl.dtype} {wl.shape}: {trials_done(work_dir)}/{trials} trials "
              f"({per_trial:.1f} s/trial)")
    return open_database(work_dir)


def best_schedule(db: ms.database.Database, wl: Workload, target: tvm.target.Target | None = None) -> s_tir.Schedule:
    """The best tuned schedule of ``wl`` in ``db``; one-line error if the database has none."""
    if uses_tensor_cores(wl):
        import_tensor_intrin()  # the tuned trace names tensor intrinsics
    sch = ms.tir_integration.compile_tir(db, wl.mod["main"], target or cuda_target())
    if sch is None:
        raise RuntimeError(f"no tuned schedule for {wl.name} {wl.dtype} {wl.shape} in the database: tune first")
    return sch


def tuning_history(work_dir: Path, flops: int) -> pd.DataFrame:
    """Per trial, in the order tuned: its GFLOP/s as MetaSchedule measured it, and the best so far.

    Read from the record file line by line: ``get_all_tuning_records`` returns the records sorted fastest
    first, which would make every curve look flat from the first trial.
    """
    rows = []
    for i, line in enumerate(_record_lines(work_dir)):
        secs = [float(s) for s in json.loads(line)[1][1] or []]  # [workload, [trace, run_secs, target, args]]
        ok = bool(secs) and all(np.isfinite(secs)) and min(secs) < 1e9
        rows.append({"trial": i + 1, "gflops": flops / float(np.mean(secs)) / 1e9 if ok else 0.0})
    df = pd.DataFrame(rows, columns=["trial", "gflops"])
    df["best_gflops"] = df["gflops"].cummax()
    return df


def main(argv: list[str] | None = None) -> int:
    from tirbench.session import project_root
    from tirbench.workloads import gemm

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["gemm"])
    p.add_argument("sizes", type=int, nargs=3, metavar=("M", "N", "K"))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--trials", type=int, required=True)
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--seconds", type=float, default=None, help="stop before this many seconds have passed")
    p.add_argument("--space", choices=SPACES, default="default")
    a = p.parse_args(argv)
    try:
        wl = gemm(*a.sizes, dtype=a.dtype)
        tune(wl, work_dir_for(project_root(), wl, a.space), trials=a.trials, chunk=a.chunk, seconds=a.seconds,
             space=a.space)
    except (ValueError, RuntimeError) as err:  # bad sizes/dtype/space, no GPU: one line, exit status 2
        p.error(str(err))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

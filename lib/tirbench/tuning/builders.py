"""MetaSchedule builders, ``stock`` (its ``LocalBuilder``, as this suite used it) and ``tuned`` (the trial-rate cuts).

Where a stock trial's time goes besides the search and the measurement (see ``docs/tuning.md``):

- ``LocalBuilder`` starts a new pool of worker processes for every batch of candidates (and one more in its
  constructor); each worker imports tvm, and where candidates use tensor cores its initializer imports
  ``tvm.s_tir.tensor_intrin`` (20-26 s on the GPU host). MetaSchedule's ``default_build`` (our fp32 default space)
  imports it too, in every fresh worker.
- Its ``default_export`` writes a tar of object files; the runner links it into a shared library (g++) before
  every measurement, one candidate after the other.

``PersistentBuilder`` keeps one pool for the whole process (every chunk, every shape of one dtype and space): the
imports are paid once per worker, and its workers start (and import) as soon as it is made, while the tuning process
starts its runner, not when the first candidates are waiting. Its workers build under the target's scope and export
a shared library, linked there, in parallel: the runner only loads it. On a machine whose TVM has its CUDA runtime
(the GPU host), building a CUDA module compiles the CUDA source right away (NVRTC, ``tvm_callback_cuda_compile``),
so the library carries a cubin and nothing is compiled when the runner loads it; under the target's scope that
compile takes the arch from the target instead of asking device 0. (Where TVM has no CUDA runtime, as on this
suite's CPU machines, the module keeps the source and the loading process compiles it: ``docs/tuning.md``.)
"""
from __future__ import annotations

import functools
from typing import Callable

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.utils import cpu_count
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from tirbench.core.build import build_with_config, export_shared
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import builds_ptx, use_ptx
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.tuning.kernels import export_hashed, write_hash
from tirbench.tuning.phases import call_timed, start_log, timed
from tirbench.tuning.processes import task_cores
from tirbench.tuning.spaces import DesignSpace, as_space, uses_tensor_cores
from tirbench.workloads.base import Workload

#: Candidates a builder worker builds before it is replaced (``LocalBuilder`` replaces its pool every batch because
#: of a memory leak in long-lived workers; a worker here lives this long).
MAX_BUILDS_PER_WORKER = 256

BuildFn = Callable[[tvm.IRModule, tvm.target.Target, object], tvm.runtime.Module]


def _stock_build(mod: tvm.IRModule, target: tvm.target.Target, params: object) -> tvm.runtime.Module:
    """MetaSchedule's ``default_build`` (a registered global function, which cannot be pickled to a worker itself)."""
    return tvm.get_global_func("s_tir.meta_schedule.builder.default_build")(mod, target, params)


def _stock_export(rt_mod: tvm.runtime.Module) -> str:
    """MetaSchedule's ``default_export``: a tar of object files, linked by whoever loads it."""
    return tvm.get_global_func("s_tir.meta_schedule.builder.default_export")(rt_mod)


def build_candidate(as_built: Callable[[tvm.IRModule, dict], tuple[tvm.IRModule, dict]] | None,
                    config: dict[str, bool], mod: tvm.IRModule, target: tvm.target.Target,
                    params: object) -> tvm.runtime.Module:
    """``f_build`` (bound to a space's ``as_built`` and pass config with ``functools.partial``): the candidate built
    as its space builds it (``DesignSpace.built_module``: another kernel where it stands for one), under the suite's
    pipeline (``build_with_config``)."""
    if as_built is not None:
        mod, config = as_built(mod, config)
    return build_with_config(config, mod, target, params)


def _started() -> None:
    """A builder worker's first job: nothing, once it has imported this module (what a build needs) and run the
    pool's initializer."""


def _build_and_export(job: tuple[BuildFn, tvm.IRModule, tvm.target.Target]) -> str:
    f_build, mod, target = job
    rt_mod = call_timed("build", f_build, mod, target, None)
    return write_hash(call_timed("export", export_shared, rt_mod), rt_mod)


@derived_object
class PersistentBuilder(ms.builder.PyBuilder):
    """A MetaSchedule builder whose worker pool lives as long as the builder (see the module docstring)."""

    def __init__(self, f_build: BuildFn, *, max_workers: int | None = None, timeout_sec: float = 120,
                 initializer: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.f_build = f_build
        self.timeout_sec = timeout_sec
        workers = max_workers or cpu_count(logical=True)
        self.pool = PopenPoolExecutor(max_workers=workers, timeout=timeout_sec, initializer=initializer,
                                      maximum_process_uses=MAX_BUILDS_PER_WORKER)
        # each starts its process now, in the background (see the module docstring)
        self.starting = [self.pool.submit(_started) for _ in range(workers)]

    def wait_started(self) -> None:
        """Return once every worker process has started (imported what a build needs, run the initializer)."""
        for future in self.starting:
            future.result()

    def build(self, build_inputs: list[ms.builder.BuilderInput]) -> list[ms.builder.BuilderResult]:
        results = []
        jobs = [(self.f_build, inp.mod, inp.target) for inp in build_inputs]
        for res in self.pool.map_with_error_catching(_build_and_export, jobs):
            if res.status == StatusKind.COMPLETE:
                results.append(ms.builder.BuilderResult(res.value, None))
            elif res.status == StatusKind.TIMEOUT:
                results.append(ms.builder.BuilderResult(None, f"Timeout, killed after {self.timeout_sec} seconds"))
            else:
                results.append(ms.builder.BuilderResult(None, f"An exception occurred\n{res.value}"))
        return results


def make_builder(wl: Workload, space: DesignSpace | str = "default", setup: str = "tuned") -> ms.builder.Builder:
    """The builder for ``wl``'s candidates in ``space``: its PassContext config, and the tensor intrinsics registered
    in each worker where the candidates use tensor cores; build and export timed (``tirbench.tuning.phases``); the hash
    of each artifact's code written beside it (``tirbench.tuning.kernels``: a kernel is measured once). Make it once
    and pass it to every ``tune`` of the same dtype and space. ``stock``: MetaSchedule's ``LocalBuilder`` (its
    constructor test-runs a pool: ~50 s with the tensor intrinsics); ``tuned``: ``PersistentBuilder``."""
    start_log()
    spec = as_space(space)
    config = spec.pass_config(wl)
    init = worker_init(wl)
    initializer = timed("worker_init", init) if init else None
    if setup == "stock":
        f_build = functools.partial(build_candidate, spec.as_built, config) if config or spec.as_built else \
            _stock_build
        return ms.builder.LocalBuilder(timeout_sec=120, f_build=timed("build", f_build), max_workers=task_cores(),
                                       f_export=functools.partial(export_hashed, timed("export", _stock_export)),
                                       initializer=initializer)
    return PersistentBuilder(functools.partial(build_candidate, spec.as_built, config), initializer=initializer,
                             max_workers=task_cores())


def worker_init(wl: Workload, arch: str | None = None) -> Callable[[], None] | None:
    """What each builder worker runs first: the tensor intrinsics registered where ``wl``'s candidates use tensor
    cores, and CUDA compiled to PTX where the build's architecture (``arch``, default ``current_gpu().arch``, what
    ``cuda_target()`` builds for) is older than the GPU's (``machine.builds_ptx``: the workers have no GPU context to
    tell, and a cubin for an older architecture does not load); None where neither."""
    return worker_init_for(uses_tensor_cores(wl), arch)


def worker_init_for(tensor_intrinsics: bool, arch: str | None = None) -> Callable[[], None] | None:
    """``worker_init`` for candidates that use tensor cores or not (``tensor_intrinsics``): a whole model's tasks
    (``tuning.relax_model``) are no one workload."""
    arch = arch or current_gpu().arch
    ptx_arch = arch if builds_ptx(arch) else None
    return functools.partial(_init_worker, tensor_intrinsics, ptx_arch) if tensor_intrinsics or ptx_arch else None


def _init_worker(tensor_intrinsics: bool, ptx_arch: str | None) -> None:
    if tensor_intrinsics:
        import_tensor_intrin()
    if ptx_arch:
        use_ptx(ptx_arch)

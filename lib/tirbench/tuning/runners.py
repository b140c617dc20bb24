"""MetaSchedule runners, ``stock`` (MetaSchedule's own measurement) and ``tuned`` (measured as the harness measures).

``stock``: MetaSchedule's defaults, ``EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100)``: the kernel runs back
to back for at least 100 ms with nothing evicting its inputs from L2, so a kernel whose inputs fit in L2 looks
faster than the notebook measures it (36.7 vs 33.4 TFLOPS seen at 1024^3).

``tuned``: one launch per repeat with the harness's L2 flush before each (``FLUSH_FUNC``: on CUDA the harness's
256 MiB flush kernel, ``harness.l2_flush``; on a CPU a ``CPU_FLUSH_BYTES`` buffer rewritten), so the ranking
MetaSchedule tunes on is the notebook's. A candidate whose first flushed launch is over ``SLOW_FACTOR`` times the
best median so far (per workload, per runner worker) is not repeated: it cannot become the best. The evaluator
checks, in the process that ran the kernel, that the flush ran once per repeat; a server without it (TVM's plain
``tvm.exec.rpc_server``) fails each measurement with a line saying to start ``tirbench.tuning.rpc.server``.

The tuned local runner also allocates a workload's arguments once per runner worker (``alloc_cached``) instead of
once per candidate: MetaSchedule's ``default_alloc_argument`` fills fresh random tensors for every candidate, 0.46 s
each for a 4096^3 fp16 GEMM on an H100 (22 of a 48-trial chunk's 139 s). Timing does not depend on the values.

Both kinds time their phases (``tirbench.tuning.phases``): argument allocation, the measurement, and through RPC the
session set-up and the module upload and load.
"""
from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import tempfile
from typing import Callable

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import local_runner, rpc_runner

from tirbench.bench import harness
from tirbench.tuning.phases import start_log, timed
from tirbench.tuning.rpc.tracker import RPCAddress

#: Global function (in the process that runs the kernel) called by ``time_evaluator`` before each repeat.
FLUSH_FUNC = "tirbench.tuning.runners.flush"
#: Global function returning how many flushes that process has made.
COUNT_FUNC = "tirbench.tuning.runners.flush_count"
#: Bytes rewritten per flush on a CPU device (larger than the L2 and L3 of the machines the tests run on).
CPU_FLUSH_BYTES = 32 << 20
#: Repeats of a candidate, one launch each, L2 flushed before each (the harness takes the median of 100).
TUNED_EVALUATOR = ms.runner.EvaluatorConfig(number=1, repeat=20, min_repeat_ms=0, enable_cpu_cache_flush=False)
#: A candidate whose first launch takes over this many times the best median so far gets no further repeats.
SLOW_FACTOR = 2.0
#: RPC session timeout (MetaSchedule's default is 10 s): a session uploads, loads and measures one candidate; the
#: server ends a session that runs longer (a hung kernel) and the candidate is recorded as failed.
SESSION_TIMEOUT_S = 60

_flushes = 0
_best: dict[tuple, float] = {}
#: ``alloc_cached``'s one entry: (device, argument info, repeats) and the tensors allocated for them.
_args_cache: dict[tuple, list[list[tvm.runtime.Tensor]]] = {}


@functools.cache
def _cpu_flush() -> Callable[[], None]:
    buf = np.zeros(CPU_FLUSH_BYTES // 8)
    return lambda: np.add(buf, 1.0, out=buf)


def _flush(*args: object) -> None:
    """``FLUSH_FUNC``: flush the caches of the device of the timed function's first tensor argument."""
    global _flushes
    dev = next(a.device for a in args if isinstance(a, tvm.runtime.Tensor))
    if dev.dlpack_device_type() == tvm.cuda(0).dlpack_device_type():
        harness.l2_flush(dev.index)()
    else:
        _cpu_flush()()
    _flushes += 1


def register() -> None:
    """Register ``FLUSH_FUNC`` and ``COUNT_FUNC`` in this process (a local runner worker's initializer)."""
    tvm.register_global_func(FLUSH_FUNC, _flush, override=True)
    tvm.register_global_func(COUNT_FUNC, lambda: _flushes, override=True)


def register_and_warm() -> None:
    """A tuned local runner worker's initializer: ``register``, and where it sees a CUDA GPU, its CUDA context made and
    the flush kernel built now, while the tuning process starts (not at the first measurement)."""
    register()
    if tvm.runtime.enabled("cuda") and tvm.cuda(0).exist:
        harness.l2_flush(0)


def prepare_server() -> None:
    """``server_init_callback`` of ``tirbench.tuning.rpc.server``, run in the listening process before any session is forked:
    registers the flush and, where TVM has its CUDA runtime, has a separate process build the flush kernel and export
    it (``harness.export_l2_flush``), so each forked session loads a compiled kernel instead of compiling one, and
    nothing CUDA-related runs in the process that forks. (Built in this process, the forked sessions saw no CUDA
    device: measured on an H100, 2026-11-23.) Should the export fail, each session builds the kernel itself."""
    register()
    if not tvm.runtime.enabled("cuda"):
        return
    path = os.path.join(tempfile.mkdtemp(prefix="tirbench-flush-"), "l2_flush.so")
    code = f"from tirbench.bench.harness import export_l2_flush; export_l2_flush({path!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        os.environ[harness.L2_FLUSH_LIBRARY_ENV] = path
    else:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"[rpc_server] the flush kernel was not exported ({last}); each session builds it", flush=True)


def alloc_cached(device: tvm.runtime.Device, args_info: list, alloc_repeat: int) -> list[list[tvm.runtime.Tensor]]:
    """``f_alloc_argument`` of the tuned local runner: MetaSchedule's ``default_alloc_argument``, kept for the next
    candidate of the same workload (the runner's worker process outlives candidates). One workload's tensors are
    kept at a time: a new argument list replaces them."""
    key = (str(device), repr(args_info), alloc_repeat)
    if key not in _args_cache:
        _args_cache.clear()
        _args_cache[key] = local_runner.default_alloc_argument(device, args_info, alloc_repeat)
    return _args_cache[key]


def _measure(rt_mod: tvm.runtime.Module, device: tvm.runtime.Device, config: ms.runner.EvaluatorConfig,
             repeated_args: list[list[tvm.runtime.Tensor]], get_function: Callable[[str], Callable]) -> list[float]:
    """Per argument set: one probe launch, then ``config.repeat - 1`` more unless the probe is over ``SLOW_FACTOR``
    times the best median so far; the flush before each, counted where the kernel ran."""
    try:
        count = get_function(COUNT_FUNC)
    except Exception as err:  # a plain tvm.exec.rpc_server, or a runner worker without the initializer
        raise RuntimeError(f"no {COUNT_FUNC} where the kernel runs: start the RPC servers with "
                           "`python -m tirbench.tuning.rpc.server` (the tuned setup flushes L2 as the harness does)") from err

    def evaluator(repeat: int) -> Callable:
        return rt_mod.time_evaluator(rt_mod.entry_name, device, number=config.number, repeat=repeat,
                                     min_repeat_ms=config.min_repeat_ms, f_preproc=FLUSH_FUNC)

    costs: list[float] = []
    for args in repeated_args:
        key = tuple((tuple(a.shape), str(a.dtype)) for a in args)
        before = int(count())
        samples = list(evaluator(1)(*args).results)
        if config.repeat > 1 and samples[0] <= SLOW_FACTOR * _best.get(key, math.inf):
            samples += evaluator(config.repeat - 1)(*args).results
        if int(count()) - before != len(samples):
            raise RuntimeError(f"{len(samples)} repeats but {int(count()) - before} L2 flushes")
        _best[key] = min(_best.get(key, math.inf), float(np.median(samples)))
        costs += [float(s) for s in samples]
    return costs


def run_evaluator_local(rt_mod: tvm.runtime.Module, device: tvm.runtime.Device,
                        config: ms.runner.EvaluatorConfig, repeated_args: list[list[tvm.runtime.Tensor]]) -> list[float]:
    """``LocalRunner``'s ``f_run_evaluator`` of the tuned setup."""
    return _measure(rt_mod, device, config, repeated_args, tvm.get_global_func)


def run_evaluator_rpc(session: tvm.rpc.RPCSession, rt_mod: tvm.runtime.Module, device: tvm.runtime.Device,
                      config: ms.runner.EvaluatorConfig, repeated_args: list[list[tvm.runtime.Tensor]]) -> list[float]:
    """``RPCRunner``'s ``f_run_evaluator`` of the tuned setup."""
    return _measure(rt_mod, device, config, repeated_args, session.get_function)


def make_local_runner(setup: str) -> ms.runner.LocalRunner:
    """The runner on this machine's GPU (device 0), ``stock`` or ``tuned``; phases timed either way."""
    start_log()
    if setup == "stock":
        return ms.runner.LocalRunner(timeout_sec=60,
                                     f_alloc_argument=timed("alloc", local_runner.default_alloc_argument),
                                     f_run_evaluator=timed("measure", local_runner.default_run_evaluator))
    return ms.runner.LocalRunner(timeout_sec=60, evaluator_config=TUNED_EVALUATOR,
                                 f_alloc_argument=timed("alloc", alloc_cached),
                                 f_run_evaluator=timed("measure", run_evaluator_local),
                                 initializer=register_and_warm)


def make_rpc_runner(setup: str, address: RPCAddress, servers: int) -> ms.runner.RPCRunner:
    """MetaSchedule's ``RPCRunner`` on the servers registered under ``address.key``: one session at a time per server
    (``max_workers`` = ``servers``; MetaSchedule's default of 1 would use one server whatever the number)."""
    start_log()
    config = ms.runner.RPCConfig(tracker_host=address.host, tracker_port=address.port, tracker_key=address.key,
                                 session_timeout_sec=SESSION_TIMEOUT_S)
    common = dict(rpc_config=config, max_workers=servers,
                  f_create_session=timed("session", rpc_runner.default_create_session),
                  f_upload_module=timed("upload_load", rpc_runner.default_upload_module),
                  f_alloc_argument=timed("alloc", rpc_runner.default_alloc_argument))
    if setup == "stock":
        return ms.runner.RPCRunner(**common, f_run_evaluator=timed("measure", rpc_runner.default_run_evaluator))
    return ms.runner.RPCRunner(**common, evaluator_config=TUNED_EVALUATOR,
                               f_run_evaluator=timed("measure", run_evaluator_rpc))

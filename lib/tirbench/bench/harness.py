"""Verify, then time: build a kernel, check it against the numpy reference, and only then measure it.

On a GPU, TVM kernels and the torch/cuBLAS/cuDNN baselines are timed by the same function (``time_launches``: one
launch per repeat between CUDA events, L2 flushed before each), in the same run.
A kernel whose output does not match raises AssertionError and gets no number.
"""
from __future__ import annotations

import functools
import os
import shutil
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import tvm
from tvm import s_tir
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from tirbench.core.build import build, build_with_config, export_shared
from tirbench.core.machine import builds_ptx, cpu_target, cuda_target, has_cuda_gpu, use_ptx
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.workloads.base import Workload, error_stats

#: Bytes written between timed repeats: several times the L2 of an H100 (50 MB) or H200 (60 MB).
L2_FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class Timing:
    """Median and 20th/80th percentiles of per-launch times, in milliseconds."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    repeats: int

    @classmethod
    def from_seconds(cls, samples: Sequence[float]) -> "Timing":
        ms = np.asarray(samples, dtype=np.float64) * 1e3
        return cls(float(np.median(ms)), float(np.percentile(ms, 20)), float(np.percentile(ms, 80)), len(ms))


@dataclass(frozen=True)
class Measurement:
    """A kernel's timing, with the rates derived from its workload. ``verified``: its output matched the reference in
    this run (``verify_then_time`` and the vendor baselines set it once their check has passed; a measurement made any
    other way is not verified, and ``Session`` gives it no row). ``tuned_best``: on a replayed MetaSchedule
    schedule, whether its kernel is one of the space's seeds (``"seed"``) or the search's (``"search"``), as
    ``results.TUNED_BEST``; empty otherwise."""

    workload: Workload
    variant: str
    provider: str
    timing: Timing
    trials: int = 0
    verified: bool = False
    tuned_best: str = ""

    @property
    def gflops(self) -> float:
        return self.workload.flops / (self.timing.median_ms * 1e-3) / 1e9

    @property
    def gbps(self) -> float:
        return self.workload.bytes / (self.timing.median_ms * 1e-3) / 1e9

    def summary(self) -> str:
        t = self.timing
        return (f"{self.variant:<22} {self.provider:<12} {self.workload.shape:>14}  {t.median_ms:9.4f} ms "
                f"[{t.p20_ms:.4f}, {t.p80_ms:.4f}]  {self.gbps:8.1f} GB/s  {self.gflops:10.1f} GFLOP/s")


#: Seconds one kernel's build may take in a ``build_all`` worker before it counts as failed.
BUILD_TIMEOUT_S = 300

#: A kernel ready to run: what ``build`` returns, or a module ``build_all`` loaded.
Built = tvm.runtime.Executable | tvm.runtime.Module


def _build_to_library(job: tuple[tvm.IRModule, tvm.target.Target, dict[str, object] | None, str | None]) -> str:
    """``build_all`` worker: the tuning builders' build (the suite's pipeline, inside the target's scope, so a CUDA
    compile takes the arch from the target, not from a device) and export; returns the shared library's path. With a
    ``ptx_arch`` (the caller's GPU is newer than the target: ``machine.builds_ptx``) CUDA compiles to PTX for it, as
    the caller's own builds do (the worker has no GPU context to tell)."""
    mod, target, pass_config, ptx_arch = job
    if ptx_arch:
        use_ptx(ptx_arch)
    return export_shared(build_with_config(pass_config or {}, mod, target, None))


@functools.cache
def _build_pool(tensor_intrinsics: bool) -> PopenPoolExecutor:
    """One pool of fresh worker processes (no CUDA context inherited) for every ``build_all`` of the process. With
    ``tensor_intrinsics`` each worker first registers TVM's tensor-core intrinsics: lowering an ``mma.sync`` /
    ``ldmatrix`` kernel looks up their index maps (15-25 s per worker, once, all workers at the same time)."""
    return PopenPoolExecutor(max_workers=min(16, os.cpu_count() or 1), timeout=BUILD_TIMEOUT_S,
                             initializer=import_tensor_intrin if tensor_intrinsics else None)


def _ready(_: int) -> bool:
    return True


def start_build_workers(target: tvm.target.Target) -> float:
    """Start ``build_all``'s worker processes now (each registers the tensor intrinsics once: 15-40 s, all at the
    same time), so that no later build pays for it; returns the seconds it took."""
    start = time.perf_counter()
    pool = _build_pool(target.kind.name == "cuda")
    list(pool.map_with_error_catching(_ready, range(min(16, os.cpu_count() or 1))))
    return time.perf_counter() - start


def message_lines(err: object) -> list[str]:
    """An error's non-empty lines, stripped (NUL bytes dropped: a kernel that NVRTC rejects at load time has given a
    message of NUL bytes alone)."""
    return [line.strip() for line in str(err).replace("\0", "").splitlines() if line.strip()]


def last_line(err: object) -> str:
    """An error's last non-empty line (TVM's and CUDA's errors end with the message), else its type's name."""
    lines = message_lines(err)
    return lines[-1] if lines else type(err).__name__


def build_all(kernels: Sequence[s_tir.Schedule | tvm.IRModule], target: tvm.target.Target,
              pass_config: dict[str, object] | None = None) -> list[Built | Exception]:
    """``build`` several kernels at once, in worker processes (an fp32 GEMM's CUDA compile takes seconds: a sweep's
    candidates build side by side). Per kernel, in order: the loaded module, ready for ``verify_then_time``, or the
    exception its build or its loading raised (its last line, as a RuntimeError; TimeoutError after
    ``BUILD_TIMEOUT_S``)."""
    cuda = target.kind.name == "cuda"
    ptx_arch = str(target.attrs["arch"]) if cuda and builds_ptx(str(target.attrs["arch"])) else None
    jobs = [(k.mod if isinstance(k, s_tir.Schedule) else k, target, pass_config, ptx_arch) for k in kernels]
    built: list[Built | Exception] = []
    for res in _build_pool(cuda).map_with_error_catching(_build_to_library, jobs):
        if res.status == StatusKind.COMPLETE:
            try:
                built.append(tvm.runtime.load_module(res.value))
            except Exception as err:  # noqa: BLE001 - e.g. a CUDA module where TVM has no CUDA runtime
                built.append(RuntimeError(last_line(err)))
            shutil.rmtree(os.path.dirname(res.value), ignore_errors=True)  # loaded: the file is no longer needed
        elif res.status == StatusKind.TIMEOUT:
            built.append(TimeoutError(f"build took over {BUILD_TIMEOUT_S} s"))
        else:
            built.append(RuntimeError(last_line(res.value)))
    return built


def _poisoned_output(workload: Workload, dev: tvm.runtime.Device) -> tvm.runtime.Tensor:
    """An output buffer pre-filled with NaN (floats) or a sentinel (ints), so unwritten elements fail the check."""
    fill = np.nan if np.dtype(workload.out_dtype).kind == "f" else np.iinfo(workload.out_dtype).min
    return tvm.runtime.tensor(np.full(workload.out_shape, fill, dtype=workload.out_dtype), dev)


def check_output(workload: Workload, out: np.ndarray, ref: np.ndarray, *, what: str) -> None:
    """``assert_allclose`` with the workload's tolerance; exact for integer outputs."""
    if np.dtype(workload.out_dtype).kind in "iu":
        np.testing.assert_array_equal(out, ref, err_msg=f"{what}: output differs from the reference")
    else:
        np.testing.assert_allclose(out, ref, **workload.tolerance, err_msg=f"{what}: output differs from the reference")


_last_case: list[tuple[Workload, int, list[np.ndarray], np.ndarray]] = []


def inputs_and_reference(workload: Workload, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Random inputs from ``seed`` and the reference output; the last pair is kept, since a notebook checks
    several kernels of one workload in a row (a 4096^3 GEMM reference takes seconds)."""
    if _last_case and _last_case[0][0] is workload and _last_case[0][1] == seed:
        return _last_case[0][2], _last_case[0][3]
    inputs = workload.make_inputs(np.random.default_rng(seed))
    _last_case[:] = [(workload, seed, inputs, workload.reference(*inputs))]
    return _last_case[0][2], _last_case[0][3]


def run_checked(workload: Workload, ex: Built, dev: tvm.runtime.Device, *,
                seed: int = 0, what: str = "kernel") -> list[tvm.runtime.Tensor]:
    """Run ``ex`` once on seeded random inputs, check against the reference, return the device arguments."""
    inputs, ref = inputs_and_reference(workload, seed)
    args = [tvm.runtime.tensor(x, dev) for x in inputs] + [_poisoned_output(workload, dev)]
    ex["main"](*args)
    dev.sync()
    check_output(workload, args[-1].numpy(), ref, what=what)
    return args


def output_error(workload: Workload, kernel: Built, *, target: tvm.target.Target, seed: int = 0) -> dict[str, float]:
    """Run a built kernel once on the seeded inputs, checked as ``run_checked`` checks it (a wrong output raises),
    and say how far its output is from the reference: ``error_stats`` against the workload's tolerance atol."""
    dev = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
    out = run_checked(workload, kernel, dev, seed=seed, what=f"{workload.name} {workload.shape}")[-1].numpy()
    return error_stats(out, inputs_and_reference(workload, seed)[1], workload.tolerance["atol"])


#: Environment variable naming an exported flush kernel (``export_l2_flush``) that ``l2_flush_executable`` loads
#: instead of building one: set by ``tirbench.tuning.runners.prepare_server`` for the RPC sessions it forks.
L2_FLUSH_LIBRARY_ENV = "TIRBENCH_L2_FLUSH_LIBRARY"


@functools.cache
def l2_flush_executable() -> tvm.runtime.Executable | tvm.runtime.Module:
    """The L2 flush kernel: a vector add over three ``L2_FLUSH_BYTES`` buffers, built for ``cuda_target()``, the GPU
    description's arch (inside the target's scope, so the CUDA compile takes the arch from the target), or loaded from the library that
    ``L2_FLUSH_LIBRARY_ENV`` names."""
    library = os.environ.get(L2_FLUSH_LIBRARY_ENV)
    if library and os.path.exists(library):
        return tvm.runtime.load_module(library)
    from tirbench.schedules.elementwise import bind_threads
    from tirbench.workloads.elementwise import vector_add

    sch = bind_threads(s_tir.Schedule(vector_add(L2_FLUSH_BYTES // 4).mod), threads=256, vector=4)
    with cuda_target():
        return build(sch, cuda_target())


def export_l2_flush(path: str) -> None:
    """Build the flush kernel and export it to ``path`` (a shared library ``tvm.runtime.load_module`` reads)."""
    l2_flush_executable().export_library(path)


@functools.cache
def l2_flush(device_id: int = 0) -> Callable[[], None]:
    """A call that rewrites ``L2_FLUSH_BYTES`` on CUDA device ``device_id`` (evicting its L2); buffers made once."""
    ex, dev = l2_flush_executable(), tvm.cuda(device_id)
    bufs = [tvm.runtime.empty((L2_FLUSH_BYTES // 4,), "float32", dev) for _ in range(3)]
    return lambda: ex["main"](*bufs)


def time_executable(ex: Built, dev: tvm.runtime.Device, args: Sequence[tvm.runtime.Tensor], *,
                    repeats: int) -> Timing:
    """Per-launch times of ``ex['main'](*args)``: on a GPU as ``time_launches`` times the vendor libraries (L2
    flushed before each launch, no sync between flush and launch, so the host's launch cost is not counted for
    either side); on the CPU ``time_evaluator``, one call per repeat."""
    mod = ex.mod if isinstance(ex, tvm.runtime.Executable) else ex
    if dev.dlpack_device_type() == tvm.cuda(0).dlpack_device_type():
        main = mod["main"]
        return time_launches(lambda: main(*args), repeats=repeats)
    evaluator = mod.time_evaluator("main", dev, number=1, repeat=repeats, min_repeat_ms=0)
    return Timing.from_seconds(evaluator(*args).results)


def verify_then_time(workload: Workload, kernel: s_tir.Schedule | tvm.IRModule | Built, *, variant: str,
                     repeats: int = 100, provider: str = "tvm", trials: int = 0, seed: int = 0,
                     target: tvm.target.Target | None = None,
                     pass_config: dict[str, object] | None = None) -> Measurement:
    """Build for the GPU (or ``target``; a kernel ``build_all`` built is taken as it is), verify against the
    reference, then time. Raises on a wrong result."""
    if target is None:
        target = cuda_target() if has_cuda_gpu() else cpu_target()
    dev = tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)
    built = isinstance(kernel, (tvm.runtime.Executable, tvm.runtime.Module))
    ex = kernel if built else build(kernel, target, pass_config)
    args = run_checked(workload, ex, dev, seed=seed, what=f"{variant} ({provider})")  # raises unless it matches
    return Measurement(workload, variant, provider, time_executable(ex, dev, args, repeats=repeats), trials,
                       verified=True)


def verify_then_time_torch(workload: Workload, fn: Callable[..., "object"], *, variant: str, provider: str,
                           repeats: int = 100, seed: int = 0,
                           prepare: Callable[..., Sequence["object"]] | None = None) -> Measurement:
    """The vendor baseline by the same rules: ``fn(*torch_inputs) -> torch output`` checked, then timed
    with CUDA events around one call per repeat, a 256 MiB buffer rewritten before each (L2 flush).
    ``prepare(*torch_inputs) -> inputs``: converts the inputs once, untimed (e.g. to channels_last memory)."""
    import torch

    inputs, ref = inputs_and_reference(workload, seed)
    tensors = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs]
    if prepare is not None:
        tensors = list(prepare(*tensors))
    out = fn(*tensors)
    torch.cuda.synchronize()
    check_output(workload, out.cpu().numpy().astype(workload.out_dtype), ref, what=f"{variant} ({provider})")
    return Measurement(workload, variant, provider, time_launches(lambda: fn(*tensors), repeats=repeats),
                       verified=True)


def time_launches(launch: Callable[[], object], *, repeats: int, flush: bool = True) -> Timing:
    """``launch()`` timed with CUDA events around one call per repeat, a 256 MiB buffer rewritten before each (L2
    flush; ``flush=False``: none, calls back to back), after 3 warm-up calls. Nothing waits between the flush and the
    launch: the host prepares the launch while the GPU flushes, so what is timed is the GPU's time (TVM's
    ``time_evaluator`` syncs first and so also counts the host's launch cost: about 15 us for a kernel whose TMA
    descriptors are encoded at each call)."""
    import torch

    buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if flush else None
    for _ in range(3):
        launch()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        if buffer is not None:
            buffer.add_(1.0)
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize()
    return Timing.from_seconds([s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)])

"""TVM's variants of a model (``compile.models``): each compiled in a process of its own, side by side, then loaded,
checked, timed, and its time split between conv kernels and the rest.

``compile_job`` builds the job's model from its seed (``models.build_model``: the same weights in every process),
exports it to Relax, runs ``pipeline.passes`` (``fp16``: ``ToMixedPrecision``; NHWC: ``ConvertLayout``; the conv
rules' dispatch for ``tvm_rules``) and the variant's ``finish``, compiles (``pipeline.compile_passed``) and exports a
library. ``start_compiles`` runs the jobs in fresh worker processes (no CUDA context inherited), at once: a whole
model's compile takes minutes, most of it single-threaded. ``measure_tvm`` loads one, checks it and times it as
``models.timed`` times PyTorch.

``kernel_split`` says where a compiled model's time goes: the Relax VM calls an instrument around each call it makes
(``VirtualMachine.set_instrument``; TVM 0.27 has no VM profiler: ``vm.profile`` and ``tvm.runtime.profiling`` are
gone), which records CUDA events around each kernel, the call queued behind a sleeping kernel so that the kernels run back to
back; conv kernels (the rules' and every PrimFunc named ``conv2d``) against the rest.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.support.popen_pool import PopenPoolExecutor

from tirbench.bench.choose import Choices
from tirbench.bench.harness import last_line
from tirbench.compile.dispatch import DispatchConvRules, LayerNote
from tirbench.compile.models import ModelConfig, TvmVariant, VariantResult, build_model, check, export_relax, timed
from tirbench.compile.pipeline import compile_passed, count_ops, passes
from tirbench.core.machine import builds_ptx, use_ptx

#: Seconds one variant's compile may take in its worker process before it counts as failed.
COMPILE_TIMEOUT_S = 900
#: Threads torch may use in a compile worker (it only exports the model there; the workers run side by side).
WORKER_THREADS = 2


@dataclass(frozen=True)
class CompileJob:
    """One TVM variant of one model and config, compiled for ``target`` into ``out_dir`` (``compile_job``);
    ``choices``: the conv rules' recorded choices (``bench.choose.Choices``' file and arch), ``ptx_arch``: CUDA
    compiled to PTX for it (``machine.builds_ptx``)."""

    model: str
    config: ModelConfig
    variant: TvmVariant
    target: tvm.target.Target
    out_dir: str
    choices: tuple[str, str] | None = None
    seed: int = 0
    ptx_arch: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.model, self.config.name, self.variant.name


@dataclass(frozen=True)
class Compiled:
    """What ``compile_job`` made of a job: the exported library (None, with ``error``, where the compile failed), the
    dispatch's note per conv, the ``relax.permute_dims`` left in the model, the conv kernels' names (the rules')
    and the compile's seconds."""

    job: CompileJob
    library: str | None = None
    error: str = ""
    notes: tuple[LayerNote, ...] = ()
    transposes: int = 0
    conv_kernels: frozenset[str] = frozenset()
    seconds: float = 0.0

    @property
    def dispatched(self) -> int:
        return len([n for n in self.notes if n.kernel])


def compile_job(job: CompileJob) -> Compiled:
    """Build ``job``'s model (``build_model``), export it, run the passes and the variant's ``finish``, compile and
    export the library into ``job.out_dir``; a failure is the result's one-line ``error``."""
    start = time.perf_counter()
    try:
        import torch

        torch.set_num_threads(WORKER_THREADS)
        if job.ptx_arch:
            use_ptx(job.ptx_arch)
        mod = export_relax(*build_model(job.model, job.config.batch, job.seed))
        choices = Choices(Path(job.choices[0]), arch=job.choices[1]) if job.choices else None
        ps = passes(mod, job.target, rules=job.variant.rules, choices=choices, fp16=job.config.fp16,
                    nhwc=job.config.layout == "NHWC")
        with job.target:
            passed = tvm.transform.Sequential(ps)(mod)
            if job.variant.finish is not None:
                passed = job.variant.finish(passed, job.target)
            ex = compile_passed(passed, job.target)
        library = str(Path(job.out_dir) / f"{'_'.join(job.key)}.so")
        ex.export_library(library)
    except Exception as err:  # noqa: BLE001 - a TVM or torch failure on one variant: its line, the others go on
        return Compiled(job, error=last_line(err), seconds=time.perf_counter() - start)
    notes = next((p.notes for p in ps if isinstance(p, DispatchConvRules)), [])
    kernels = frozenset(gv.name_hint for gv, f in passed.functions_items()
                        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs is not None and "tirbench.kernel" in f.attrs)
    return Compiled(job, library, notes=tuple(notes), transposes=count_ops(passed, "relax.permute_dims"),
                    conv_kernels=kernels, seconds=time.perf_counter() - start)


def jobs_for(models: list[str], configs: list[ModelConfig], variants: list[TvmVariant], *,
             target: tvm.target.Target, choices: Choices | None = None, seed: int = 0) -> list[CompileJob]:
    """A job per model, config and variant, compiled for ``target`` into one fresh folder (``Compiles.close``
    removes it); CUDA for an older architecture than this GPU's compiles to PTX (``machine.builds_ptx``)."""
    arch = str(target.attrs["arch"]) if target.kind.name == "cuda" else ""
    ptx_arch = arch if arch and builds_ptx(arch) else None
    recorded = (str(choices.path), choices.arch) if choices is not None else None
    out_dir = tempfile.mkdtemp(prefix="tirbench-relax-")
    return [CompileJob(model, config, variant, target, out_dir, recorded, seed, ptx_arch)
            for model in models for config in configs for variant in variants]


@dataclass
class Compiles:
    """``jobs`` compiling side by side, a fresh process each (``start_compiles``); ``result(job)`` waits for one."""

    jobs: list[CompileJob]
    futures: dict[tuple[str, str, str], Future] = field(default_factory=dict)
    pool: PopenPoolExecutor | None = None

    def result(self, job: CompileJob) -> Compiled:
        try:
            return self.futures[job.key].result()
        except TimeoutError:
            return Compiled(job, error=f"the compile took over {COMPILE_TIMEOUT_S} s", seconds=COMPILE_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - the worker's crash: its line
            return Compiled(job, error=f"the compile's process failed: {last_line(err)}")

    def close(self) -> None:
        """Stop the workers and remove the libraries (load them first)."""
        if self.pool is not None:
            self.pool.shutdown()
        for out_dir in {job.out_dir for job in self.jobs}:
            shutil.rmtree(out_dir, ignore_errors=True)


def start_compiles(jobs: list[CompileJob], workers: int | None = None) -> Compiles:
    """Start ``compile_job`` of each job, at most ``workers`` (default: one per job, up to the cores) at a time."""
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    pool = PopenPoolExecutor(max_workers=max(workers, 1), timeout=COMPILE_TIMEOUT_S)
    return Compiles(jobs, {job.key: pool.submit(compile_job, job) for job in jobs}, pool)


def tvm_output(vm: relax.VirtualMachine, x: tvm.runtime.Tensor) -> np.ndarray:
    """The model's output as numpy (an exported program returns a tuple of one)."""
    out = vm["main"](x)
    return (out if hasattr(out, "numpy") else out[0]).numpy()


def load(compiled: Compiled, dev: tvm.runtime.Device) -> relax.VirtualMachine:
    """The Relax VM of a compiled variant's library."""
    return relax.VirtualMachine(tvm.runtime.load_module(compiled.library), dev)


def is_conv_kernel(symbol: str, conv_kernels: frozenset[str]) -> bool:
    """Whether a kernel the VM calls is a convolution's: one of the rules' (``conv_kernels``) or a PrimFunc whose name
    says conv2d (TVM's legalized and fused ones: ``fused_conv2d_add_relu``)."""
    return symbol in conv_kernels or "conv2d" in symbol


def split_ms(calls: list[tuple[str, float]], conv_kernels: frozenset[str]) -> dict[str, float]:
    """One model call's kernels, ``(symbol, ms)`` each, as ``conv_ms`` (``is_conv_kernel``), ``other_ms`` and
    ``kernels`` (how many calls)."""
    conv = sum(ms for name, ms in calls if is_conv_kernel(name, conv_kernels))
    return {"conv_ms": conv, "other_ms": sum(ms for _, ms in calls) - conv, "kernels": len(calls)}


#: GPU clock cycles ``kernel_split`` holds the stream with before each call (``torch.cuda._sleep``: 25 ms at 2 GHz),
#: so that the host has queued every kernel and event before the first runs; doubled while that is not enough.
SLEEP_CYCLES = 50_000_000


def kernel_split(vm: relax.VirtualMachine, x: tvm.runtime.Tensor, conv_kernels: frozenset[str], *,
                 runs: int = 5) -> dict[str, float]:
    """Where one call of the model goes, on a CUDA GPU: each kernel the VM calls (not its ``vm.builtin`` calls)
    between CUDA events (``set_instrument``), ``split_ms`` of each call of the model, the median of ``runs`` calls
    after a first one. Each call is queued behind a sleeping kernel (``SLEEP_CYCLES``), so the kernels run back to
    back and each pair of events holds its kernel's GPU time, not the host's launch gaps (a model of small kernels,
    launch-bound, would otherwise count every gap to a kernel); where the GPU got to the first kernel before the
    host had queued the call, the sleep is doubled and the call measured again. No flush in between: each kernel
    finds in L2 what the one before it left there, as in a model's call."""
    import torch

    events: list[list] = []

    def instrument(_func, symbol, before, _ret, *_args):
        if not str(symbol).startswith("vm.builtin."):
            if before:
                events.append([str(symbol), torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)])
            events[-1][1 if before else 2].record()
        return 0

    vm.set_instrument(instrument)
    splits, sleep = [], SLEEP_CYCLES
    try:
        while len(splits) < runs + 1:
            events.clear()
            torch.cuda._sleep(sleep)
            vm["main"](x)
            queued_in_time = not events or not events[0][1].query()
            torch.cuda.synchronize()
            if not queued_in_time:
                sleep *= 2
                continue
            splits.append(split_ms([(name, start.elapsed_time(end)) for name, start, end in events], conv_kernels))
    finally:
        vm.set_instrument(None)
    return {key: statistics.median(s[key] for s in splits[1:]) for key in splits[0]}


def measure_tvm(compiled: Compiled, x: np.ndarray, ref: np.ndarray, *, repeats: int, flush: bool,
                dev: tvm.runtime.Device, split: bool = True) -> VariantResult:
    """A compiled variant loaded, checked against ``ref`` on input ``x``, timed, and (``split``) its
    ``kernel_split``."""
    job = compiled.job
    extra = dict(convs_dispatched=compiled.dispatched, convs=len(compiled.notes), transposes=compiled.transposes)
    if compiled.library is None:
        return VariantResult(job.model, job.config, job.variant.name, job.variant.provider, job.config.layout,
                             error=compiled.error, **extra)
    vm, x_tvm = load(compiled, dev), tvm.runtime.tensor(x, dev)
    result = check(job.model, job.config, job.variant.name, job.variant.provider, job.config.layout,
                   lambda: tvm_output(vm, x_tvm), ref, **extra)
    result = timed(result, lambda: vm["main"](x_tvm), repeats=repeats, flush=flush)
    if split and result.verified:
        result = dataclasses.replace(result, split=kernel_split(vm, x_tvm, compiled.conv_kernels))
    return result


def dispatch_lines(name: str, compiled: Compiled) -> list[str]:
    """What the conv rules' dispatch did in a compiled variant, for ``name``: how many convs took the rules' kernels
    (by family) and their epilogue, each conv left to DLight and each epilogue left to FuseOps with why, and the
    transposes (``relax.permute_dims``) left in the model."""
    notes = compiled.notes
    taken = [n for n in notes if n.kernel]
    fused = [n for n in taken if n.epilogue and not n.apart]
    families = collections.Counter(n.kernel.split("(")[0].split("{")[0] for n in taken)
    lines = [f"{name}: {len(taken)} of {len(notes)} convs dispatched to the rules' kernels: {dict(families)}",
             f"{name}: {len(fused)} of them with their epilogue fused: "
             f"{dict(collections.Counter(n.epilogue for n in fused))}"]
    lines += [f"  left for DLight: {n.reason}" if not n.kernel else f"  {n.epilogue} left to FuseOps: {n.apart}"
              for n in notes if not n.kernel or n.apart]
    return lines + [f"{name}: {sum(n.transposes for n in notes)} activation transposes around the rules' kernels; "
                    f"{compiled.transposes} relax.permute_dims in the model (weights' folded away)"]

"""The rules' kernels without a GPU: each candidate scheduled, its CUDA for the GPU description's arch written and
checked by ``nvcc``, and its numerics checked on ``llvm`` where they can be (``llvm_check``). Nothing is built for the
GPU or timed: that takes seconds per candidate, not the build of a sweep."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import tvm
from tvm import s_tir

from tirbench.bench.choose import rule_forms
from tirbench.bench.harness import run_checked
from tirbench.bench.sweep import one_line
from tirbench.core import lowering
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.machine import cpu_target
from tirbench.core.serial import without_threads
from tirbench.kernel.result import Candidate, KernelResult
from tirbench.schedules.common.record import KernelRecord
from tirbench.workloads.base import Workload

#: Most flops a candidate may have for its numerics to be run on llvm here: its GPU threads run one after another
#: there, each filling its own shared tiles (a 2^28-flop GEMM takes seconds).
LLVM_MAX_FLOPS = 1 << 28


def tag(wl: Workload) -> str:
    """A file name for ``wl``: ``gemm_1000x1000x1000_float32``, ``conv2d_1x64x56x56x64x3x3x1x1_float32_NCHW``."""
    return "_".join(filter(None, (wl.name, wl.shape, wl.dtype, wl.layout)))


def nvcc_summary(lines: list[str]) -> str:
    """ptxas's lines (``nvcc_report``) in short: registers and spill stores per kernel (``65 regs, 0 B spilled``)."""
    regs = re.findall(r"Used (\d+) registers", " ".join(lines))
    spills = re.findall(r"(\d+) bytes spill stores", " ".join(lines))
    return f"{'/'.join(regs)} regs, {'/'.join(spills)} B spilled"


def write_cuda(record: KernelRecord, sch: s_tir.Schedule, path: Path) -> str:
    """The CUDA TVM generates for ``sch`` (built with ``record``'s pass config), written to ``path``; returns it."""
    src = device_source(sch, pass_config=record.pass_config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(src)
    return src


def llvm_check(form: Workload, sch: s_tir.Schedule, seed: int) -> str:
    """Whether the candidate's TIR computes the reference, run on llvm with its threads one after another
    (``core.serial``); or why it cannot be run there: tensor-core intrinsics and TIRx kernels (TMA, mbarriers) have
    no llvm lowering, and a large workload takes too long serially."""
    if lowering.pipeline_for(sch.mod) == "tirx":
        return "not on llvm: a TIRx kernel (TMA, mbarriers, wgmma) has no llvm lowering"
    if any(inst.kind.name == "Tensorize" for inst in sch.trace.insts):
        return "not on llvm: tensor-core intrinsics (mma, wgmma) have no llvm lowering"
    if form.flops > LLVM_MAX_FLOPS:
        return f"not on llvm here: {form.flops / 1e9:.1f} GFLOP run serially is too slow (the GPU run checks it)"
    try:
        run_checked(form, build(without_threads(form.mod, sch), cpu_target()), tvm.cpu(0), seed=seed,
                    what=f"{form.name} {form.shape} on llvm")
    except AssertionError as err:
        return f"MISMATCH on llvm: {one_line(err)}"
    return "matches numpy"


def _candidate(form: Workload, record: KernelRecord, params: Mapping[str, Any], extra: Mapping[str, Any],
               path: Path, seed: int) -> Candidate:
    """One candidate scheduled, its CUDA written and given to nvcc, its numerics checked on llvm where possible."""
    shown = {**extra, **params}
    try:
        sch = record.apply(form, params)
    except ValueError as err:
        return Candidate(record.name, shown, "skipped", str(err), form=form, record=record)
    try:
        src = write_cuda(record, sch, path)
    except Exception as err:  # noqa: BLE001 - fails to lower or generate: say so, on one line
        return Candidate(record.name, shown, "rejected", one_line(err), form=form, record=record)
    try:
        nvcc = nvcc_summary(nvcc_report(src))
    except RuntimeError as err:
        if "rejected" in str(err):   # the GPU would reject it too (NVRTC, when the module is loaded)
            return Candidate(record.name, shown, "rejected", str(err), cuda=path, nvcc=str(err), form=form,
                             record=record)
        nvcc = str(err)              # no nvcc here
    llvm = llvm_check(form, sch, seed)
    status = "rejected" if llvm.startswith("MISMATCH") else "ok"
    return Candidate(record.name, shown, status, cuda=path, nvcc=nvcc, llvm=llvm, form=form, record=record)


def offline(wl: Workload, *, keep: int | None, out: Path, seed: int = 0) -> KernelResult:
    """The rules' candidates for ``wl`` (and its other forms), each's CUDA written under ``out/<tag>/``, checked by
    nvcc and, where it can be, on llvm (see the module docstring)."""
    folder = out / tag(wl)
    candidates = []
    for form, records, extra in rule_forms(wl, keep):
        for record in records:
            for params in record.candidates or ({},):
                path = folder / f"{len(candidates):02d}_{record.name}.cu"
                candidates.append(_candidate(form, record, params, extra, path, seed))
    return KernelResult(wl, tuple(candidates), cuda=folder)

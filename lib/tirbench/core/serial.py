"""GPU schedules on the CPU: a schedule's trace replayed without its thread bindings, so llvm can run it.

Each bound loop becomes an ordinary loop, so the threads of a block run one after another and every "thread" fills
its own copy of the shared-memory tiles before using them. The result is what the kernel's TIR computes (its index
arithmetic, predicates and padding), checked against numpy on a machine without a GPU; what only the GPU lowering
adds (barriers, cp.async, tensor-core intrinsics) is not exercised, and tensorized schedules cannot run this way.
"""
from __future__ import annotations

import tvm
from tvm import s_tir
from tvm.s_tir.schedule import Instruction

#: Annotations that only mean something to the CUDA lowering (the CPU pipeline rejects asynchronous stages).
_GPU_ONLY_ANNOTATIONS = ("software_pipeline_async_stages",)


def _runs_on_cpu(inst: Instruction) -> bool:
    if inst.kind.name == "Bind":
        return False
    return not (inst.kind.name == "Annotate" and str(inst.attrs[0]) in _GPU_ONLY_ANNOTATIONS)


def without_threads(mod: tvm.IRModule, sch: s_tir.Schedule) -> s_tir.Schedule:
    """``sch`` (a schedule of ``mod``) replayed on ``mod`` without thread bindings and asynchronous pipeline stages."""
    insts = [inst for inst in sch.trace.insts if _runs_on_cpu(inst)]
    decisions = {inst: d for inst, d in sch.trace.decisions.items() if _runs_on_cpu(inst)}
    serial = s_tir.Schedule(mod)
    s_tir.Trace(insts, decisions).apply_to_schedule(serial, remove_postproc=False)
    return serial

"""GPU schedules on the CPU: a schedule's trace replayed without its thread bindings, so llvm can run it.

Each bound loop becomes an ordinary loop, so the threads of a block run one after another and every "thread" fills
its own copy of the shared-memory tiles before using them. The result is what the kernel's TIR computes (its index
arithmetic, predicates and padding), checked against numpy on a machine without a GPU; what only the GPU lowering
adds (barriers, cp.async, tensor-core intrinsics) is not exercised. A wmma schedule runs so too without its tensor
intrinsics (``without_tensor_cores``): each tensorized loop nest is left as the loops the intrinsic's description
matched, its fragments local buffers.
"""
from __future__ import annotations

from typing import Callable

import tvm
from tvm import s_tir
from tvm.s_tir.schedule import Instruction

#: Annotations that only mean something to the CUDA lowering (the CPU pipeline rejects asynchronous stages).
_GPU_ONLY_ANNOTATIONS = ("software_pipeline_async_stages",)


def _runs_on_cpu(inst: Instruction) -> bool:
    if inst.kind.name == "Bind":
        return False
    return not (inst.kind.name == "Annotate" and str(inst.attrs[0]) in _GPU_ONLY_ANNOTATIONS)


def _replay(mod: tvm.IRModule, sch: s_tir.Schedule,
            keep: Callable[[Instruction], Instruction | None]) -> s_tir.Schedule:
    """``sch``'s trace replayed on ``mod``, each instruction as ``keep`` returns it (None: left out)."""
    insts, decisions = [], {}
    for inst in sch.trace.insts:
        kept = keep(inst)
        if kept is not None:
            insts.append(kept)
            if inst in sch.trace.decisions:
                decisions[kept] = sch.trace.decisions[inst]
    serial = s_tir.Schedule(mod)
    s_tir.Trace(insts, decisions).apply_to_schedule(serial, remove_postproc=False)
    return serial


def without_threads(mod: tvm.IRModule, sch: s_tir.Schedule) -> s_tir.Schedule:
    """``sch`` (a schedule of ``mod``) replayed on ``mod`` without thread bindings and asynchronous pipeline stages."""
    return _replay(mod, sch, lambda inst: inst if _runs_on_cpu(inst) else None)


def _local_fragments(inst: Instruction) -> Instruction | None:
    """``inst`` for ``without_tensor_cores``: None for a tensorize, a thread binding or a layout TVM could not check
    (``assume_injective_transform``: per-thread registers that fold the threads onto each other, valid only while
    each thread has its own; without it the buffer keeps its logical layout), a cache into a wmma fragment as one
    into a local buffer."""
    if inst.kind.name == "Tensorize" or not _runs_on_cpu(inst) or (
            inst.kind.name == "TransformLayout" and bool(inst.attrs[-1])):
        return None
    if inst.kind.name in ("CacheRead", "CacheWrite") and str(inst.attrs[1]).startswith("wmma."):
        return Instruction(inst.kind, inst.inputs, [inst.attrs[0], "local", *inst.attrs[2:]], inst.outputs)
    return inst


def without_tensor_cores(mod: tvm.IRModule, sch: s_tir.Schedule) -> s_tir.Schedule:
    """``without_threads`` for a wmma schedule: also without its tensor intrinsics, each wmma fragment (matrix_a,
    matrix_b, accumulator) a local buffer, so llvm runs the loops each intrinsic was matched against, and without
    per-thread register layouts (``_local_fragments``)."""
    return _replay(mod, sch, _local_fragments)

"""A convolution's epilogue (bias, residual, ReLU: the block ``"conv_epilogue"`` of ``workloads.conv2d(..., bias=,
residual=, relu=)``) fused into the store of a scheduled kernel, after its family's schedule: ``fuse_epilogue``.

Every family writes its result through one block, which reads the accumulators and stores them: the register
write-back ``cache_write`` made (split-K's partial sums, depthwise, the SIMT implicit GEMMs) or the implicit GEMM's
copy out of the shared C tile (the tensor-core families, which there also round to half: the "cast" block they
inlined into the epilogue comes along). The epilogue reads that result element by element, so
``reverse_compute_inline`` folds it into that block: the kernel stores max(acc + bias + residual, 0) straight from
its accumulators, and the float32 ``Yacc`` never exists. Where the result comes out of a reduction block (split-K's
second kernel: a thread sums the slices of its output), that block first gets a register write-back under its
thread loop. A store that cannot take it (a tensor intrinsic's, a reduction across threads) is refused in one line,
and the caller keeps the epilogue as a kernel of its own.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from tirbench.schedules.common.tiling import has_block

#: The workload's epilogue block (``workloads.conv2d``).
EPILOGUE = "conv_epilogue"
_REALIZE = tvm.get_global_func("s_tir.schedule.GetSBlockRealize")


def _thread_loop(sch: s_tir.Schedule, block: s_tir.SBlockRV) -> s_tir.LoopRV:
    """The innermost thread-bound loop above a reduction block whose reduction each thread runs alone; a one-line
    ValueError where a thread-bound loop takes part in the reduction, or none is bound."""
    loops = sch.get_loops(block)
    bound = [loop for loop in loops if sch.get(loop).thread_binding is not None]
    reduce_vars = {var.name for iv, value in zip(sch.get(block).iter_vars, _REALIZE(sch, block).iter_values)
                   if iv.iter_type == tirx.IterVar.CommReduce for var in tirx.analysis.undefined_vars(value)}
    if not bound or any(sch.get(loop).loop_var.name in reduce_vars for loop in bound):
        raise ValueError(f"the kernel's result comes out of a reduction no one thread runs "
                         f"({sch.get(block).name_hint})")
    return bound[-1]


def fuse_epilogue(sch: s_tir.Schedule) -> s_tir.Schedule:
    """``sch`` (a family's schedule of a ``conv2d`` workload) with its block ``"conv_epilogue"`` inlined into the
    block that stores the result (module docstring); ``sch`` itself where there is none; a one-line ValueError where
    the store cannot take it."""
    if not has_block(sch, EPILOGUE):
        return sch
    epilogue = sch.get_sblock(EPILOGUE)
    producers = sch.get_producers(epilogue)
    if len(producers) != 1:
        raise ValueError(f"the epilogue reads the results of {len(producers)} blocks, not one store")
    store = producers[0]
    try:
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(store).iter_vars):
            loop = _thread_loop(sch, store)
            write_back = sch.cache_write(store, 0, "local")
            sch.reverse_compute_at(write_back, loop)
        sch.reverse_compute_inline(epilogue)
    except s_tir.ScheduleError as err:
        said = str(err).rsplit("Error message:", 1)[-1].strip().splitlines()[0]
        raise ValueError(f"the kernel's store ({sch.get(store).name_hint}) cannot take the epilogue: {said}") from None
    return sch

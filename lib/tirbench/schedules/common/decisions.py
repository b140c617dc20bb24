"""A design space's schedule with its sampled tiles chosen: a hand candidate written in a space's own terms."""
from __future__ import annotations

from typing import Sequence

import tvm
from tvm import s_tir

from tirbench.workloads.base import Workload

#: The instruction whose decisions are set (one per sampled loop split, in the order the space samples them).
SAMPLE_PERFECT_TILE = "SamplePerfectTile"


def with_decisions(wl: Workload, design: s_tir.Schedule, decisions: Sequence[Sequence[int]]) -> s_tir.Schedule:
    """``design`` (a schedule of ``wl`` made by a space's function) replayed on ``wl`` with its ``SamplePerfectTile``
    decisions, in order, set to ``decisions``; a one-line ValueError when their count or products do not fit."""
    trace = design.trace
    samples = [inst for inst in trace.insts if inst.kind.name == SAMPLE_PERFECT_TILE]
    if len(samples) != len(decisions):
        raise ValueError(f"the design samples {len(samples)} tilings, the seed gives {len(decisions)}")
    for inst, decision in zip(samples, decisions):
        trace = trace.with_decision(inst, [int(d) for d in decision], remove_postproc=True)
    sch = s_tir.Schedule(wl.mod)
    try:
        trace.apply_to_schedule(sch, remove_postproc=True)
    except tvm.TVMError as err:
        raise ValueError(f"the seed's tiles do not fit the design: {str(err).strip().splitlines()[-1]}") from None
    return sch

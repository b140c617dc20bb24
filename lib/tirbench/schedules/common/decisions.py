"""A design space's schedule with its sampled tiles chosen: a hand candidate written in a space's own terms."""
from __future__ import annotations

from typing import Sequence

from tvm import s_tir

from tirbench.workloads.base import Workload

#: The instruction whose decisions are set (one per sampled loop split, in the order the space samples them).
SAMPLE_PERFECT_TILE = "SamplePerfectTile"
#: ... and whose picks are set by value where a seed gives them (``categorical``).
SAMPLE_CATEGORICAL = "SampleCategorical"


def with_decisions(wl: Workload, design: s_tir.Schedule, decisions: Sequence[Sequence[int]],
                   categorical: Sequence[int] | None = None) -> s_tir.Schedule:
    """``design`` (a schedule of ``wl`` made by a space's function) replayed on ``wl`` with its ``SamplePerfectTile``
    decisions, in order, set to ``decisions`` and, where ``categorical`` is given, its ``SampleCategorical`` ones set
    to pick those values; a one-line ValueError when their count or products do not fit, or a value is not among
    the candidates of its sample."""
    trace = design.trace
    samples = [inst for inst in trace.insts if inst.kind.name == SAMPLE_PERFECT_TILE]
    if len(samples) != len(decisions):
        raise ValueError(f"the design samples {len(samples)} tilings, the seed gives {len(decisions)}")
    for inst, decision in zip(samples, decisions):
        trace = trace.with_decision(inst, [int(d) for d in decision], remove_postproc=True)
    if categorical is not None:
        picks = [inst for inst in trace.insts if inst.kind.name == SAMPLE_CATEGORICAL]
        if len(picks) != len(categorical):
            raise ValueError(f"the design samples {len(picks)} categorical values, the seed gives {len(categorical)}")
        for inst, value in zip(picks, categorical):
            candidates = [int(c) for c in inst.attrs[0]]
            if value not in candidates:
                raise ValueError(f"the seed picks {value}, where the design samples one of {candidates}")
            trace = trace.with_decision(inst, candidates.index(value), remove_postproc=True)
    sch = s_tir.Schedule(wl.mod)
    try:
        trace.apply_to_schedule(sch, remove_postproc=True)
    except RuntimeError as err:   # ScheduleError, InternalError
        raise ValueError(f"the seed's tiles do not fit the design: {str(err).strip().splitlines()[-1]}") from None
    return sch

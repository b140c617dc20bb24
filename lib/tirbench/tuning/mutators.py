"""A MetaSchedule mutator for the categorical choices of the suite's hand-written design spaces.

MetaSchedule's own mutators move tile sizes (``MutateTileSize``) and only the categorical samples of its own rules'
patterns (the unroll depth of ``MutateUnroll``, the thread count of ``MutateThreadBinding``): a template's own
``sample_categorical`` (the ``wgmma`` space's pipeline depth and overlap) would be drawn in the first population and
never moved again. ``MutateCategorical`` picks one of a trace's categorical samples with more than one candidate and
draws another of its candidates, with the sample's own probabilities.
"""
from __future__ import annotations

import random

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace

SAMPLE_CATEGORICAL = "SampleCategorical"


@derived_object
class MutateCategorical(ms.mutator.PyMutator):
    """Redraw one ``sample_categorical`` decision of a trace (see the module docstring); None where it has none."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = seed
        self.calls = 0

    def _initialize_with_tune_context(self, context: ms.TuneContext) -> None:
        self.seed = int(context.rand_state)

    def apply(self, trace: Trace, rand_state: int) -> Trace | None:
        self.calls += 1
        rng = random.Random(hash((self.seed, int(rand_state), self.calls)))
        picks = [inst for inst in trace.insts if inst.kind.name == SAMPLE_CATEGORICAL and len(inst.attrs[0]) > 1]
        if not picks:
            return None
        inst = rng.choice(picks)
        current = int(trace.decisions[inst])
        others = [i for i in range(len(inst.attrs[0])) if i != current]
        weights = [float(inst.attrs[1][i]) for i in others]
        choice = rng.choices(others, weights=weights if sum(weights) > 0 else None)[0]
        return trace.with_decision(inst, choice, remove_postproc=True)

    def clone(self) -> ms.Mutator:
        copy = MutateCategorical(self.seed)
        copy.calls = self.calls
        return copy

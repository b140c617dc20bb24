"""Stand-ins for MetaSchedule's measuring side in CPU tests of a search: a runner future that is done at once with
a given run time."""
from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms


@derived_object
class DoneFuture(ms.runner.PyRunnerFuture):
    """A measurement that is done, at ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def done(self) -> bool:
        return True

    def result(self) -> ms.runner.RunnerResult:
        return ms.runner.RunnerResult([self.seconds], None)

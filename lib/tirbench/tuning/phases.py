"""Where a tuning trial's time goes: every process of a tuning run (the tuning process, its builder and runner
workers) appends ``phase,seconds`` lines to one log file, named by ``$TIRBENCH_PHASE_LOG``; ``tuning`` sets it per
chunk and sums the lines into ``tuning_phases.csv`` beside the database.

``TimedBuilder`` and ``TimedRunner`` wrap a MetaSchedule builder and runner to record, in the tuning process, how long
it waited for each (``builder_wall``, ``runner_wall``); the rest of a chunk's wall time is the search itself.

Builder and runner workers are subprocesses started by the tuning process, so they inherit the variable; a line
is one ``write`` on a file opened for appending, so lines of concurrent workers never interleave.
"""
from __future__ import annotations

import atexit
import functools
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

import pandas as pd
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

#: The environment variable naming the log; unset, nothing is recorded.
ENV = "TIRBENCH_PHASE_LOG"

F = TypeVar("F", bound=Callable)


def start_log() -> Path:
    """The log of this process and the workers it starts from now on: ``$TIRBENCH_PHASE_LOG``, set to a new temp
    file if unset. Call it before starting builder or runner workers (they read the variable when they start)."""
    if not os.environ.get(ENV):
        fd, path = tempfile.mkstemp(prefix="tirbench-phases-", suffix=".log")
        os.close(fd)
        os.environ[ENV] = path
        atexit.register(os.remove, path)
    return Path(os.environ[ENV])


def record(phase: str, seconds: float) -> None:
    """Append one ``phase,seconds`` line to the log (if ``$TIRBENCH_PHASE_LOG`` names one)."""
    path = os.environ.get(ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{phase},{seconds:.6f}\n")


def call_timed(phase: str, fn: Callable, *args: object) -> object:
    """``fn(*args)``, its duration recorded as ``phase``."""
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        record(phase, time.perf_counter() - t0)


def timed(phase: str, fn: F) -> F:
    """``fn`` recording its duration as ``phase``; picklable (a ``functools.partial`` of module-level functions), so
    MetaSchedule can send it to its worker processes as an ``f_build`` / ``f_run_evaluator`` / ... function."""
    return functools.partial(call_timed, phase, fn)  # type: ignore[return-value]


def log_size() -> int:
    """The log's size in bytes now (``start_log`` first): pass it to ``totals`` to read what is recorded later."""
    return start_log().stat().st_size


def totals(path: Path, offset: int = 0) -> pd.DataFrame:
    """Per phase recorded in the log at ``path`` after byte ``offset``: ``count`` (lines) and ``seconds`` (their sum);
    a line cut short is skipped."""
    data = Path(path).read_bytes()[offset:] if Path(path).exists() else b""
    rows = []
    for line in data.decode().splitlines():
        phase, _, secs = line.partition(",")
        try:
            rows.append((phase, float(secs)))
        except ValueError:
            continue
    df = pd.DataFrame(rows, columns=["phase", "seconds"])
    return df.groupby("phase")["seconds"].agg(count="count", seconds="sum").reset_index()


@derived_object
class TimedBuilder(ms.builder.PyBuilder):
    """``inner``, its ``build`` calls recorded as ``builder_wall``."""

    def __init__(self, inner: ms.builder.Builder) -> None:
        super().__init__()
        self.inner = inner

    def build(self, build_inputs: list[ms.builder.BuilderInput]) -> list[ms.builder.BuilderResult]:
        return call_timed("builder_wall", self.inner.build, build_inputs)


@derived_object
class TimedFuture(ms.runner.PyRunnerFuture):
    """``inner``, the wait for its result recorded as ``runner_wall``."""

    def __init__(self, inner: ms.runner.RunnerFuture) -> None:
        super().__init__()
        self.inner = inner

    def done(self) -> bool:
        return self.inner.done()

    def result(self) -> ms.runner.RunnerResult:
        return call_timed("runner_wall", self.inner.result)


@derived_object
class TimedRunner(ms.runner.PyRunner):
    """``inner``, the time in its ``run`` and in waiting for each result recorded as ``runner_wall`` (a local runner
    measures inside ``run``, an RPC runner while the results are awaited)."""

    def __init__(self, inner: ms.runner.Runner) -> None:
        super().__init__()
        self.inner = inner

    def run(self, runner_inputs: list[ms.runner.RunnerInput]) -> list[ms.runner.RunnerFuture]:
        return [TimedFuture(f) for f in call_timed("runner_wall", self.inner.run, runner_inputs)]

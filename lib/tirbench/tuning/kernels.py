"""One measurement per kernel: candidates that build the same code are measured once per database.

Candidates of a space can differ only in decisions their built kernel does not use (the wgmma space's
warp-specialized candidates are stand-ins: their v8 raster, stages and overlap are drawn but the kernel built is
the warp-specialized one), so they build identical code; measured again, the noise between two measurements of one
kernel would read as progress on the tuning curve.

The builders (``tirbench.tuning.builders``, both setups) write beside each artifact the hash of the code it holds
(``kernel_hash``: the source of the built module and of its imports, the CUDA kernel and the host code that launches
it, with the addresses LLVM names its alias metadata after left out). ``ReuseRunner`` wraps the runner ``tune`` is
given: a candidate whose kernel was measured before for this database (earlier in the batch, in an earlier chunk,
or in an earlier run: ``KERNELS_FILE`` beside the database keeps each kernel's hash and run times) is not run
again, and MetaSchedule gets that measurement's run times as its result.

What the database records: one record per candidate, as before (MetaSchedule commits each); a reused one holds the
run times measured for the first candidate with that kernel, not a measurement of its own. It counts as a trial,
and the tuning history shows it with that time, so the best-so-far curve cannot rise by measuring one kernel twice.
Each reuse is logged as a ``reused`` phase (``tuning_phases.csv``). A candidate whose builder wrote no hash, a
failed measurement, and a kernel measured before ``KERNELS_FILE`` existed are measured as before.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from tirbench.tuning.phases import call_timed, record

#: Beside an artifact: the hash of the kernel it holds.
HASH_SUFFIX = ".kernel"
#: Beside a database: ``kernel,run_s`` per kernel measured for it (``run_s``: its run times, space-separated).
KERNELS_FILE = "measured_kernels.csv"
#: LLVM's alias metadata names each buffer by its address in the building process: not part of the code.
_ADDRESS = re.compile(r'"0x[0-9a-f]+"')


def kernel_hash(rt_mod: tvm.runtime.Module) -> str:
    """A hash of the code ``rt_mod`` holds: its kind and source and those of its imports, in order."""
    digest, todo = hashlib.sha256(), [rt_mod]
    while todo:
        mod = todo.pop(0)
        digest.update(f"{mod.kind}\n{_ADDRESS.sub('0x', mod.inspect_source(''))}\n".encode())
        todo.extend(mod.imports)
    return digest.hexdigest()


def write_hash(artifact_path: str, rt_mod: tvm.runtime.Module) -> str:
    """Write the hash of ``rt_mod``, exported to ``artifact_path``, beside it (timed as the ``hash`` phase); the path.
    (MetaSchedule removes the artifact's directory, and the hash with it, once the candidate has run.)"""
    Path(artifact_path + HASH_SUFFIX).write_text(call_timed("hash", kernel_hash, rt_mod))
    return artifact_path


def export_hashed(export: Callable[[tvm.runtime.Module], str], rt_mod: tvm.runtime.Module) -> str:
    """An ``f_export``: ``export(rt_mod)``, the kernel's hash written beside the artifact (``write_hash``)."""
    return write_hash(export(rt_mod), rt_mod)


def artifact_hash(artifact_path: str) -> str | None:
    """The hash a builder wrote beside ``artifact_path``; None where there is none."""
    path = Path(artifact_path + HASH_SUFFIX)
    return path.read_text().strip() if path.exists() else None


def read_kernels(work_dir: Path) -> dict[str, list[float]]:
    """The kernels measured for the database in ``work_dir``: hash -> run times (a line cut short is left out)."""
    path = work_dir / KERNELS_FILE
    known: dict[str, list[float]] = {}
    for line in path.read_text().splitlines()[1:] if path.exists() else []:
        kernel, _, secs = line.partition(",")
        try:
            known[kernel] = [float(s) for s in secs.split()]
        except ValueError:
            continue
    return {k: v for k, v in known.items() if v}


def _remember(work_dir: Path, kernel: str, run_secs: list[float]) -> None:
    """Append one kernel's run times to ``KERNELS_FILE`` (one ``write``, so a kill cuts at most that line)."""
    path = work_dir / KERNELS_FILE
    head = "" if path.exists() and path.stat().st_size else "kernel,run_s\n"
    with path.open("a") as f:
        f.write(f"{head}{kernel},{' '.join(repr(s) for s in run_secs)}\n")


@derived_object
class MeasuredFuture(ms.runner.PyRunnerFuture):
    """A candidate measured by the inner runner; its result, once successful, remembered under its kernel's hash."""

    def __init__(self, inner: ms.runner.RunnerFuture, kernel: str | None, owner: "ReuseRunner") -> None:
        super().__init__()
        self.inner, self.kernel, self.owner, self.value = inner, kernel, owner, None

    def done(self) -> bool:
        return self.value is not None or self.inner.done()

    def result(self) -> ms.runner.RunnerResult:
        if self.value is None:
            self.value = self.inner.result()
            if self.kernel is not None and self.value.error_msg is None:
                self.owner.remember(self.kernel, [float(s) for s in self.value.run_secs])
        return self.value


@derived_object
class ReusedFuture(ms.runner.PyRunnerFuture):
    """A candidate whose kernel was measured before: that measurement's run times (or, for one measured in the same
    batch, its result once there)."""

    def __init__(self, run_secs: list[float] | None, first: MeasuredFuture | None = None) -> None:
        super().__init__()
        self.run_secs, self.first = run_secs, first

    def done(self) -> bool:
        return self.first is None or self.first.done()

    def result(self) -> ms.runner.RunnerResult:
        if self.first is not None:
            first = self.first.result()
            if first.error_msg is not None:
                return first
            self.run_secs = [float(s) for s in first.run_secs]
        return ms.runner.RunnerResult(run_secs=self.run_secs, error_msg=None)


@derived_object
class ReuseRunner(ms.runner.PyRunner):
    """``inner``, each kernel measured once for the database in ``work_dir`` (see the module docstring)."""

    def __init__(self, inner: ms.runner.Runner, work_dir: Path) -> None:
        super().__init__()
        self.inner, self.work_dir = inner, work_dir
        self.known = read_kernels(work_dir)

    def remember(self, kernel: str, run_secs: list[float]) -> None:
        if kernel not in self.known:
            self.known[kernel] = run_secs
            _remember(self.work_dir, kernel, run_secs)

    def run(self, runner_inputs: list[ms.runner.RunnerInput]) -> list[ms.runner.RunnerFuture]:
        kernels = [artifact_hash(inp.artifact_path) for inp in runner_inputs]
        first: dict[str, int] = {}
        for i, kernel in enumerate(kernels):
            if kernel is not None and kernel not in self.known:
                first.setdefault(kernel, i)
        measure = [i for i, kernel in enumerate(kernels) if kernel is None or first.get(kernel) == i]
        futures = self.inner.run([runner_inputs[i] for i in measure]) if measure else []
        measured = {i: MeasuredFuture(f, kernels[i], self) for i, f in zip(measure, futures)}
        out: list[ms.runner.RunnerFuture] = []
        for i, kernel in enumerate(kernels):
            if i in measured:
                out.append(measured[i])
                continue
            record("reused", 0.0)
            out.append(ReusedFuture(self.known[kernel]) if kernel in self.known
                       else ReusedFuture(None, measured[first[kernel]]))
        return out

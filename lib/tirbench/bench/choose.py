"""The conv rules, run: ``choose(wl)`` sweeps the candidates ``rule_records`` gives a layer and keeps the fastest
verified one; ``Choices`` records what was chosen (``choices.csv`` beside the notebook's results) so that a later
run replays one build per layer instead of the whole sweep (all layers' builds side by side: ``choose_all``).

A recorded choice is replayed only while the rules still offer it (same family, same parameters); otherwise the
layer is chosen again, live.
"""
from __future__ import annotations

import ast
import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import tvm

from tirbench.bench.harness import Measurement, verify_then_time
from tirbench.bench.sweep import SweepError, build_by_config, one_line, sweep
from tirbench.core.atomic import write_atomic
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv.rules import rule_records
from tirbench.workloads.base import Workload

#: The columns of ``choices.csv``.
FIELDS = ("dtype", "layout", "shape", "kernel", "params", "rules_s", "gpu")


@dataclass(frozen=True)
class Choice:
    """What the rules chose for a layer: the family, its parameters, how long choosing took (build, verify and
    time every candidate) and the chosen kernel's measurement (None when read from the file)."""

    kernel: str
    params: Mapping[str, Any]
    rules_s: float
    measurement: Measurement | None = None
    replayed: bool = False


def _key(wl: Workload) -> tuple[str, str, str]:
    return (wl.dtype, wl.layout, wl.shape)


def choose(wl: Workload, *, target: tvm.target.Target, repeats: int, seed: int) -> Choice:
    """Sweep the rules' candidates for ``wl``; the fastest verified one (SweepError when none verifies)."""
    start = time.perf_counter()
    result = sweep(wl, rule_records(wl), target=target, repeats=repeats, seed=seed)
    best = result.best_trial()
    if best is None:
        raise SweepError(f"the conv rules found no kernel for {wl.name} {wl.shape} ({wl.dtype})")
    return Choice(best.record.name, dict(best.overrides), time.perf_counter() - start, best.measurement)


class Choices:
    """The recorded choices of a notebook (``path``: its ``choices.csv``), keyed by (dtype, layout, shape)."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[tuple[str, str, str], dict[str, str]] = {}
        if path.exists():
            for row in csv.DictReader(io.StringIO(path.read_text())):
                self.rows[(row["dtype"], row["layout"], row["shape"])] = row

    def recorded(self, wl: Workload) -> Choice | None:
        row = self.rows.get(_key(wl))
        if row is None:
            return None
        return Choice(row["kernel"], ast.literal_eval(row["params"]), float(row["rules_s"]))

    def remember(self, wl: Workload, choice: Choice, gpu: str) -> None:
        self.rows[_key(wl)] = {"dtype": wl.dtype, "layout": wl.layout, "shape": wl.shape, "kernel": choice.kernel,
                               "params": repr(dict(choice.params)), "rules_s": f"{choice.rules_s:.1f}", "gpu": gpu}

    def write(self, path: Path) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows[k] for k in sorted(self.rows))
        write_atomic(path, buf.getvalue().encode())


def offered(wl: Workload, recorded: Choice) -> KernelRecord | None:
    """The rules' family for ``wl`` that still offers the ``recorded`` choice, narrowed to it; None if none does."""
    for record in rule_records(wl):
        if record.name == recorded.kernel and dict(recorded.params) in [dict(c) for c in record.candidates]:
            return record.with_candidates((recorded.params,))
    return None


def replay_all(wls: Sequence[Workload], choices: Choices, *, target: tvm.target.Target, repeats: int,
               seed: int) -> list[Choice | None]:
    """Every recorded choice the rules still offer, built at once in parallel (grouped by pass config), then each
    verified and timed; None for a layer with nothing to replay (and for one whose replay fails: one line)."""
    jobs = []
    for i, wl in enumerate(wls):
        recorded = choices.recorded(wl)
        record = recorded and offered(wl, recorded)
        if record:
            jobs.append((i, recorded, record, record.apply(wl, recorded.params)))
    out: list[Choice | None] = [None] * len(wls)
    for (i, recorded, record, _), kernel in zip(jobs, build_by_config([(j[2], j[3]) for j in jobs], target)):
        try:
            if isinstance(kernel, Exception):
                raise kernel
            m = verify_then_time(wls[i], kernel, variant=record.name, repeats=repeats, seed=seed, target=target)
        except Exception as err:  # noqa: BLE001 - a recorded choice that no longer builds or verifies
            print(f"  replay of {record.name}{dict(recorded.params)} on {wls[i].shape} failed "
                  f"({one_line(err)}): choosing again")
            continue
        out[i] = Choice(recorded.kernel, recorded.params, recorded.rules_s, m, True)
    return out


def choose_all(wls: Sequence[Workload], choices: Choices, *, now: bool, target: tvm.target.Target, repeats: int,
               seed: int) -> list[Choice]:
    """Per workload: the recorded choice replayed (``replay_all``), or, when ``now`` or nothing replays, ``choose``."""
    replayed = [None] * len(wls) if now else replay_all(wls, choices, target=target, repeats=repeats, seed=seed)
    return [r or choose(wl, target=target, repeats=repeats, seed=seed) for wl, r in zip(wls, replayed)]

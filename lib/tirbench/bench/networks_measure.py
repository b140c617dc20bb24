"""Notebook 10's measuring loop: whole networks, the least recently measured first, while they fit a time budget.

Every distinct convolution of five networks in three configs, each verified and timed beside cuDNN's two layouts, is
some 800 measurements: more than one notebook run of the suite's time limit. A run therefore measures whole networks
(every config of a network in the same run, so that its layers' times and cuDNN's compare within one run), in the
order ``stalest_first`` gives (a network with no recorded row first, then the one whose latest row is oldest), and
starts a network only while its estimated time (its layers not yet measured in this run x the seconds a layer has
taken so far, ``PRIOR_S_PER_LAYER`` before the first) fits what is left of ``max_seconds``. The next run goes on
with the networks left; the tables show each network from its latest run. ``max_seconds=None`` measures them all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import pandas as pd

from tirbench.bench.choose import Choice, Choices
from tirbench.bench.networks import CudnnBest, Plan, measure_layer
from tirbench.bench.session import Session
from tirbench.workloads.base import Workload

#: Seconds a layer of one config takes (replayed, verified, timed, cuDNN beside it) before a run has measured one.
PRIOR_S_PER_LAYER = 3.0


def stalest_first(names: Sequence[str], recorded: pd.DataFrame) -> list[str]:
    """``names`` ordered by their latest rows in ``recorded`` (a ``networks.csv`` frame): a network without a row for
    some config first, then by the oldest of its configs' latest run ids (a run id starts with its start time);
    ties keep the order given."""
    def age(name: str) -> str:
        rows = recorded[recorded["network"] == name] if len(recorded) else recorded
        if rows.empty:
            return ""
        latest = rows.groupby("config")["run_id"].max()
        return "" if len(latest) < recorded["config"].nunique() else str(latest.min())
    return sorted(names, key=age)


@dataclass
class NetworksRun:
    """What one run measured: the layers' rows (``measure_layer``), the networks measured whole, the networks left
    for a later run, and per config the networks that have a layer without a recorded choice."""

    rows: list[dict[str, object]] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    unrecorded: dict[str, set[str]] = field(default_factory=dict)


def measure_networks(order: Sequence[str], plans: Mapping[str, Plan], *, session: Session, cudnn: CudnnBest,
                     choices: Choices, replay: Callable[[list[Workload]], list[Choice | None]],
                     max_seconds: float | None, clock: Callable[[], float] = time.perf_counter) -> NetworksRun:
    """Measure the networks of ``order`` whole, each config of ``plans`` in turn, while they fit ``max_seconds``
    (module docstring); ``replay(workloads)``: their recorded choices, built and verified
    (``networks.replay_or_choose``). A layer that an earlier network of the run shares is measured once."""
    run, done = NetworksRun(), {config: set() for config in plans}
    start, spent_layers = clock(), 0
    for name in order:
        todo = {config: [p for p in found.planned if any(n == name for n, _ in p.layers)
                         and p.wl.shape not in done[config]] for config, found in plans.items()}
        layers = sum(map(len, todo.values()))
        rate = (clock() - start) / spent_layers if spent_layers else PRIOR_S_PER_LAYER
        if max_seconds is not None and run.measured and clock() - start + layers * rate > max_seconds:
            run.left.append(name)
            continue
        for config, planned in todo.items():
            for p, choice in zip(planned, replay([p.wl for p in planned])):
                done[config].add(p.wl.shape)
                if choice is None:
                    run.unrecorded.setdefault(config, set()).update(n for n, _ in p.layers)
                    continue
                run.rows.append(measure_layer(session, cudnn, choices, p.layers[0][1], config, plans[config].batch,
                                              p.wl, choice, echo=False))
        session.commit()
        spent_layers += layers
        run.measured.append(name)
        print(f"{name}: {layers} layers verified and timed beside cuDNN ({clock() - start:.0f} s so far)", flush=True)
    return run

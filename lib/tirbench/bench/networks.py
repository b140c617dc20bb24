"""Notebook 10's five networks (``workloads.networks``): every distinct convolution of each, per config (fp32 at
batch 1, fp16 and int8 at batch 32), its recorded choice replayed, verified and timed beside cuDNN's faster layout in
the same process; and the command that records the choices in chunks that fit a time limit:

    python -m tirbench.bench.networks choose NETWORK... [--config fp32 fp16 int8] [--max-seconds 540] [--stale]
    python -m tirbench.bench.networks plan [NETWORK...] [--config ...]
    python -m tirbench.bench.networks check [NETWORK...] [--config ...]

``choose`` (on a CUDA GPU) sweeps the rules' candidates (``choose_each``: ``bench.choose.choose_many``) on the layers
that have no recorded choice for the build's architecture (``--stale``: also those whose choice predates a family or
candidate the rules now offer, ``choose.is_stale``), a chunk of layers at a time, and after each chunk merges its
choices into ``results/10_networks/choices.csv`` under a lock (several processes, one per GPU, may share the file).
Each chunk holds as many layers as the time left allows at the last chunk's seconds a layer (``SECONDS_PER_LAYER``
before the first) x ``SAFETY``: it stops before ``--max-seconds`` (counted from its start), saying how many layers
are left, and the same command goes on from there. ResNet-50's layers that notebook 08 has chosen (its
``choices.csv``, ``ALSO``) count as recorded. Exit status: 0 every layer has a choice, 3 stopped for time, 1 a layer
got no verified kernel, 2 a bad command line (one line) or no GPU.

``plan`` (anywhere, no GPU needed) prints per network and config the distinct layers, those no family takes, those
recorded, and how long choosing the rest should take (``SECONDS_PER_LAYER``). ``check`` (anywhere with nvcc, before
a GPU session) generates the CUDA of every candidate ``choose`` would sweep on those layers and gives it to nvcc, a
process per core: a kernel nvcc rejects, NVRTC rejects when ``choose`` loads it on the GPU. It prints one line per
rejected candidate; exit status 1 if there is one.
"""
from __future__ import annotations

import argparse
import fcntl
import functools
import hashlib
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping, NoReturn, Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
import tvm

from tirbench.bench.baselines import cudnn_conv2d
from tirbench.bench.choose import Choice, Choices, choose_many, is_stale, replay_all, rule_forms
from tirbench.bench.harness import Measurement, start_build_workers
from tirbench.bench.sweep import one_line
from tirbench.bench.network import BATCHES, cudnn_workload, layer_workload, per_layer
from tirbench.bench.session import Session
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import DeviceInfo, cuda_target, has_cuda_gpu
from tirbench.core.paths import project_root
from tirbench.schedules.conv.rules import no_family
from tirbench.workloads.base import Workload
from tirbench.workloads.layers import ConvLayer
from tirbench.workloads.networks import NETWORKS

NOTEBOOK = "10_networks"
#: Where notebook 10 records its choices, and the other notebooks' it replays too (relative to the project root).
CHOICES = Path("results") / NOTEBOOK / "choices.csv"
#: The whole networks of each run (``network.network_summary``), beside its results.
NETWORKS_CSV = "networks.csv"
ALSO = (Path("results") / "08_resnet50" / "choices.csv",)
#: Seconds the rules take on a layer, per config, before a chunk has been timed: notebook 08's record on an H200
#: (results/08_resnet50/choices.csv, Hopper kernels: 3.2, 15.0 and 4.5 s a layer for fp32, fp16, int8), rounded up.
SECONDS_PER_LAYER = {"fp32": 4.0, "fp16": 16.0, "int8": 6.0}
#: A chunk is sized to take at most the time left / this (a chunk's layers may take longer than the last one's).
SAFETY = 1.5
#: Most layers in a chunk (their candidates are built side by side; a chunk cut short loses its time).
MAX_CHUNK = 24
#: Seconds kept back from ``--max-seconds`` for writing and exiting.
MARGIN_S = 20.0
#: Repeats per candidate while choosing (the median of each; notebook 10 times the chosen kernel again).
CHOOSE_REPEATS = 20


@dataclass
class Planned:
    """One distinct convolution of a config: its workload and the (network, layer) entries that share its shape."""

    wl: Workload
    layers: list[tuple[str, ConvLayer]] = field(default_factory=list)


@dataclass
class Plan:
    """A config's distinct convolutions over some networks (``plan``), and the layers it has no kernel for: (network,
    layer, why) where the config's workload cannot state the layer or no family takes it."""

    config: str
    batch: int
    planned: list[Planned]
    refused: list[tuple[str, ConvLayer, str]]


def plan(nets: Mapping[str, Sequence[ConvLayer]], config: str, batch: int) -> Plan:
    """``config``'s distinct workloads of the layers of ``nets`` (name -> layers) at ``batch``, in network order, each
    once however many networks have it; a layer the config cannot state (``layer_workload``) or no family takes
    (``rules.no_family``: read from the families, nothing scheduled) among the refused, with its one line."""
    by_shape: dict[str, Planned] = {}
    refused = []
    for name, net in nets.items():
        for layer in net:
            try:
                wl = layer_workload(layer, config, batch)
                why = no_family(wl)
            except ValueError as err:
                why = str(err)
            if why:
                refused.append((name, layer, why))
            else:
                by_shape.setdefault(wl.shape, Planned(wl)).layers.append((name, layer))
    return Plan(config, batch, list(by_shape.values()), refused)


def quick_layers(net: Sequence[ConvLayer]) -> list[ConvLayer]:
    """A quick run's layers of a network: its first and its first beyond plain (depthwise, grouped, 1x7...)."""
    beyond = [layer for layer in net if not layer.geometry.plain]
    return [net[0], *beyond[:1]]


def choices_for(root: Path, arch: str) -> Choices:
    """Notebook 10's recorded choices for ``arch``, notebook 08's ResNet-50 ones besides (``ALSO``)."""
    return Choices(root / CHOICES, arch=arch, also=[root / path for path in ALSO])


def record_command(names: Sequence[str], config: str) -> str:
    """The command that records the choices of ``config`` for the networks ``names``."""
    return f"python -m tirbench.bench.networks choose {' '.join(names)} --config {config}"


class CudnnBest:
    """cuDNN's faster layout per (shape, dtype), measured the first time a layer needs it in a run, both layouts'
    rows recorded (``record``): the fp16 and int8 configs share the fp16 measurement, and the networks sharing a
    layer share its measurement. ``measure``: ``baselines.cudnn_conv2d`` (a stand-in in the tests)."""

    def __init__(self, record: Callable[[Measurement], Measurement], *, repeats: int, seed: int,
                 measure: Callable[..., Measurement] = cudnn_conv2d):
        self.record, self.repeats, self.seed, self.measure = record, repeats, seed, measure
        self.runs: dict[tuple[str, str], Measurement] = {}

    def __call__(self, layer: ConvLayer, config: str, batch: int) -> Measurement:
        wl = cudnn_workload(layer, config, batch)
        if (wl.shape, wl.dtype) not in self.runs:
            runs = [self.record(self.measure(wl, channels_last=cl, repeats=self.repeats, seed=self.seed))
                    for cl in (False, True)]
            self.runs[wl.shape, wl.dtype] = min(runs, key=lambda m: m.timing.median_ms)
        return self.runs[wl.shape, wl.dtype]


def measure_layer(session: Session, cudnn: CudnnBest, choices: Choices, layer: ConvLayer, config: str, batch: int,
                  wl: Workload, choice: Choice, echo: bool = True) -> dict[str, object]:
    """One layer of ``config``: the chosen kernel's measurement recorded as variant ``rules``, then cuDNN's faster
    layout (``network.measured_with`` pairs them by that order), the choice remembered; the layer's row (notebook
    08's table: kernel, parameters, the rules' seconds, whether replayed, both times)."""
    ours = session.record(replace(choice.measurement, variant="rules"), echo)
    base = cudnn(layer, config, batch)
    choices.remember(wl, choice, session.device.gpu)
    return {"run": config, "layer": layer.name, "count": layer.count, "kernel": choice.kernel,
            "params": dict(choice.params), "rules_s": round(choice.rules_s, 1), "replayed": choice.replayed,
            "tvm_ms": ours.timing.median_ms, "cudnn_ms": base.timing.median_ms, "cudnn": base.variant}


def choose_each(wls: Sequence[Workload], *, target: tvm.target.Target, repeats: int,
                seed: int) -> list[Choice | None]:
    """``choose_many`` of the layers of ``wls`` the rules take, together; None for a layer they refuse (its one
    line printed: ``rule_forms``' ValueError, a depthwise window over 48 KB...) or that gets no verified kernel."""
    taken = []
    for wl in wls:
        try:
            rule_forms(wl)
            taken.append(wl)
        except ValueError as err:
            print(f"  {wl.name} {wl.shape} ({wl.dtype}): {err}")
    chosen = dict(zip((wl.shape for wl in taken), choose_many(taken, target=target, repeats=repeats, seed=seed,
                                                               missing_ok=True)))
    return [chosen.get(wl.shape) for wl in wls]


def replay_or_choose(wls: Sequence[Workload], choices: Choices, *, now: bool, target: tvm.target.Target,
                     repeats: int, seed: int) -> list[Choice | None]:
    """Per workload its recorded choice, built as recorded and verified (``replay_all(check_rules=False)``: the rules
    are not asked again); one with none, or whose replay failed, chosen now where ``now`` (``choose_each``), else
    None."""
    out = replay_all(wls, choices, target=target, repeats=repeats, seed=seed, check_rules=False)
    live = [i for i, choice in enumerate(out) if choice is None] if now else []
    for i, choice in zip(live, choose_each([wls[i] for i in live], target=target, repeats=repeats, seed=seed)):
        out[i] = choice
    return out


#: The ratios labelled on the figure's log axes (every minor tick labelled crowds the labels around 1).
RATIO_TICKS = (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10)


def networks_figure(df: pd.DataFrame, nets: Mapping[str, Sequence[ConvLayer]], batches: Mapping[str, int],
                    caption: str) -> plt.Figure:
    """A panel per network of ``nets``: per layer (network order), cuDNN time / TVM time of each config of
    ``batches`` (``per_layer``: each config's latest run in ``df``), log scale, a line at 1 (cuDNN's speed), each
    config's whole-network ratio in the legend and the worst layer named."""
    fig, axes = plt.subplots(len(nets), 1, figsize=(10, 1.0 + 2.4 * len(nets)), squeeze=False)
    for ax, (name, net) in zip(axes[:, 0], nets.items()):
        index = {layer.name: i for i, layer in enumerate(net)}
        worst = None
        for config, batch in batches.items():
            t = per_layer(df, config, net, batch).dropna(subset=["tvm_ms", "cudnn_ms"]) if len(df) else None
            if t is None or t.empty:
                continue
            ratio = t["cudnn_ms"] / t["tvm_ms"]
            total = (t["cudnn_ms"] * t["count"]).sum() / (t["tvm_ms"] * t["count"]).sum()
            ax.scatter([index[n] for n in t["layer"]], ratio, s=16,
                       label=f"{config} batch {batch}: network {total:.2f}x")
            low = int(ratio.to_numpy().argmin())
            if worst is None or ratio.iloc[low] < worst[0]:
                worst = (ratio.iloc[low], index[t["layer"].iloc[low]], t["layer"].iloc[low])
        ax.axhline(1, color="black", linestyle="--", linewidth=1, label="cuDNN")
        if worst is not None:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(FixedLocator(RATIO_TICKS))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.annotate(worst[2], (worst[1], worst[0]), fontsize=7, xytext=(5, 3), textcoords="offset points")
        ax.set_xlim(-1, len(net))
        ax.set_title(f"{name}: {len(net)} distinct convolutions", fontsize=10)
        ax.set_ylabel("cuDNN / TVM")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[-1, 0].set_xlabel("layer, in network order (above 1: faster than cuDNN; names in the per-layer tables)")
    fig.text(0.01, 0.005, caption, fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


# -- recording the choices in chunks ------------------------------------------------------------------------------

def pending(wls: Sequence[Workload], choices: Choices, stale: bool = False) -> list[Workload]:
    """The workloads of ``wls`` without a recorded choice (``stale``: or with one ``choose.is_stale`` calls stale)."""
    return [wl for wl in wls if (c := choices.recorded(wl)) is None or (stale and is_stale(wl, c))]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (a lock file in the temporary folder, named by the path) while inside."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"tirbench-choices-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def save_choices(path: Path, arch: str, chosen: Sequence[tuple[Workload, Choice]], gpu: str) -> None:
    """Merge ``chosen`` into the ``choices.csv`` at ``path``: under a lock, read again (another process may have
    written since), add, write atomically."""
    with _locked(path):
        current = Choices(path, arch)
        for wl, choice in chosen:
            current.remember(wl, choice, gpu)
        current.write(path)


def choose_in_chunks(todo: Sequence[Workload], *, choose: Callable[[list[Workload]], list[Choice | None]],
                     save: Callable[[list[Workload], list[Choice | None]], None], seconds_left: Callable[[], float],
                     prior: float, label: str, clock: Callable[[], float] = time.monotonic) -> list[Workload]:
    """``todo`` chosen a chunk at a time (``choose``), each chunk saved as soon as it is done (``save``): a chunk
    holds as many layers as ``seconds_left()`` allows at the last chunk's seconds a layer (``prior`` before the first)
    x ``SAFETY``, at most ``MAX_CHUNK``. Returns the layers left once the next chunk would not fit."""
    todo, per_layer = list(todo), prior
    while todo:
        size = min(MAX_CHUNK, len(todo), int(seconds_left() / (per_layer * SAFETY)))
        if size < 1:
            break
        chunk, todo = todo[:size], todo[size:]
        start = clock()
        save(chunk, choose(chunk))
        per_layer = max((clock() - start) / len(chunk), 1e-3)
        print(f"  {label}: {len(chunk)} layers chosen in {per_layer * len(chunk):.0f} s ({per_layer:.1f} s a layer); "
              f"{len(todo)} left", flush=True)
    return todo


def run_choose(names: Sequence[str], configs: Sequence[str], *, root: Path, arch: str, gpu: str,
               choose: Callable[[list[Workload]], list[Choice | None]], deadline: float, stale: bool = False,
               clock: Callable[[], float] = time.monotonic) -> int:
    """``choose``'s work (the module docstring) with the chunk chooser ``choose``, until ``deadline`` (of ``clock``);
    returns the exit status."""
    nets, path, missing = {name: NETWORKS[name] for name in names}, root / CHOICES, 0
    for i, config in enumerate(configs):
        found = plan(nets, config, BATCHES[config])
        todo = pending([p.wl for p in found.planned], choices_for(root, arch), stale)
        print(f"{config}: {len(found.planned)} distinct layers of {', '.join(names)}, {len(todo)} to choose "
              f"({len(found.refused)} layers no family takes)", flush=True)

        def save(chunk: list[Workload], chosen: list[Choice | None]) -> None:
            nonlocal missing
            got = [(wl, choice) for wl, choice in zip(chunk, chosen) if choice is not None]
            missing += len(chunk) - len(got)
            save_choices(path, arch, got, gpu)

        left = choose_in_chunks(todo, choose=choose, save=save, seconds_left=lambda: deadline - MARGIN_S - clock(),
                                prior=SECONDS_PER_LAYER[config], label=config, clock=clock)
        if left:
            later = f"; not started: {', '.join(configs[i + 1:])}" if configs[i + 1:] else ""
            print(f"stopped before the time limit: {config} has {len(left)} layers left{later}; the same command "
                  f"goes on from there", flush=True)
            return 3
    if missing:
        print(f"{missing} layers got no verified kernel (the lines above name them); they stay unrecorded")
    return 1 if missing else 0


def print_plan(names: Sequence[str], configs: Sequence[str], root: Path, arch: str) -> None:
    """Per config and network: distinct layers, layers no family takes, recorded, to choose and the estimated time;
    then per config over all of ``names`` (a layer two networks share counted once)."""
    choices = choices_for(root, arch)
    for config in configs:
        found = {name: plan({name: NETWORKS[name]}, config, BATCHES[config]) for name in names}
        groups = [(name, [name]) for name in names] + ([(f"all {len(names)} (shared layers once)", names)]
                                                       if len(names) > 1 else [])
        for what, group in groups:
            planned = list({p.wl.shape: p for name in group for p in found[name].planned}.values())
            refused = sum(len(found[name].refused) for name in group)
            todo = pending([p.wl for p in planned], choices)
            print(f"{config} {what}: {len(planned)} distinct layers, {refused} no family takes, "
                  f"{len(planned) - len(todo)} recorded for {arch}, {len(todo)} to choose "
                  f"(~{len(todo) * SECONDS_PER_LAYER[config]:.0f} s on an H100/H200)")


@functools.cache
def _pending_by_shape(names: tuple[str, ...], config: str, arch: str) -> dict[str, Workload]:
    todo = pending([p.wl for p in plan({n: NETWORKS[n] for n in names}, config, BATCHES[config]).planned],
                   choices_for(project_root(), arch))
    return {wl.shape: wl for wl in todo}


def _nvcc_candidate(job: tuple[tuple[str, ...], str, str, str, int, int, int]) -> str | None:
    """One candidate of a pending layer (names, config, arch, shape, form, record, candidate: indices) through nvcc:
    None, or one line saying why it is rejected."""
    names, config, arch, shape, f, r, c = job
    form, records, _ = rule_forms(_pending_by_shape(names, config, arch)[shape])[f]
    record = records[r]
    params = record.candidates[c] if record.candidates else {}
    try:
        sch = record.apply(form, params)
    except ValueError:   # a tile that does not fit: the sweep skips it too
        return None
    try:
        nvcc_report(device_source(sch, pass_config=record.pass_config), arch)
    except Exception as err:  # noqa: BLE001 - fails to lower, generate or compile: one line
        return f"{config} {shape} {record.name}({', '.join(f'{k}={v}' for k, v in params.items())}): {one_line(err)}"
    return None


def check_builds(names: Sequence[str], configs: Sequence[str], arch: str) -> int:
    """``check``: every candidate of the layers left to choose through nvcc (module docstring); the exit status."""
    jobs = []
    for config in configs:
        for shape, wl in _pending_by_shape(tuple(names), config, arch).items():
            jobs += [(tuple(names), config, arch, shape, f, r, c) for f, (_, records, _) in enumerate(rule_forms(wl))
                     for r, record in enumerate(records) for c in range(max(1, len(record.candidates)))]
    print(f"{len(jobs)} candidates of the layers left to choose, through nvcc for {arch}", flush=True)
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        failed = [line for line in pool.map(_nvcc_candidate, jobs) if line is not None]
    for line in failed:
        print(line)
    print(f"{len(failed)} of {len(jobs)} rejected")
    return 1 if failed else 0


class _Parser(argparse.ArgumentParser):
    """Errors as one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"networks: {message}\n")


def _network(name: str) -> str:
    if name not in NETWORKS:
        raise argparse.ArgumentTypeError(f"unknown network {name!r}: expected one of {', '.join(NETWORKS)}")
    return name


def _config(name: str) -> str:
    if name not in BATCHES:
        raise argparse.ArgumentTypeError(f"unknown config {name!r}: expected one of {', '.join(BATCHES)}")
    return name


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m tirbench.bench.networks", description=__doc__.splitlines()[0])
    commands = p.add_subparsers(dest="command", required=True)
    for name, what in (("choose", "record the rules' choices (CUDA GPU)"), ("plan", "what is left to choose"),
                       ("check", "nvcc every candidate of what is left to choose")):
        sub = commands.add_parser(name, help=what)
        sub.add_argument("networks", type=_network, nargs="+" if name == "choose" else "*", metavar="NETWORK",
                         help=f"one of {', '.join(NETWORKS)}")
        sub.add_argument("--config", type=_config, nargs="+", default=list(BATCHES), dest="configs",
                         help="fp32 (batch 1), fp16, int8 (batch 32); default: all three")
    choose = commands.choices["choose"]
    choose.add_argument("--max-seconds", type=float, default=540.0, help="stop before this (default 540)")
    choose.add_argument("--stale", action="store_true", help="also choose again the layers whose choice is stale")
    choose.add_argument("--repeats", type=int, default=CHOOSE_REPEATS, help="timed launches per candidate")
    choose.add_argument("--seed", type=int, default=0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    start = time.monotonic()
    args = build_parser().parse_args(argv)
    names, root, arch = list(dict.fromkeys(args.networks or NETWORKS)), project_root(), current_gpu().arch
    if args.command == "plan":
        print_plan(names, args.configs, root, arch)
        return 0
    if args.command == "check":
        return check_builds(names, args.configs, arch)
    if not has_cuda_gpu():
        print("networks: no CUDA GPU here: the rules' candidates are verified and timed on one; nothing chosen "
              "(`plan` says what is left)", file=sys.stderr)
        return 2
    target = cuda_target()
    print(f"build workers started in {start_build_workers(target):.0f} s", flush=True)
    return run_choose(names, args.configs, root=root, arch=arch, gpu=DeviceInfo.detect().gpu, stale=args.stale,
                      deadline=start + args.max_seconds,
                      choose=lambda wls: choose_each(wls, target=target, repeats=args.repeats, seed=args.seed))


if __name__ == "__main__":
    sys.exit(main())

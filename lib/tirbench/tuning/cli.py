"""Tune GEMM or conv2d workloads into their databases from the command line.

    python -m tirbench.tuning gemm 1024 1024 1024 --dtype float32 --trials 256 --seconds 540
    python -m tirbench.tuning conv2d 1 512 7 7 512 3 3 1 1 --layout NCHW --space template --trials 64
    python -m tirbench.tuning conv2d 32 64 56 56 64 3 3 1 1  32 512 7 7 512 3 3 1 1 --layout NHWC \\
        --dtype float16 --space wmma --trials 16 --chunk 16
    python -m tirbench.tuning conv2d_winograd 256 256 14 14 512 3 3 1 1 --m 4 --trials 256 --chunk 32 --seconds 540
    python -m tirbench.tuning gemm 4096 4096 4096 --dtype float16 --space wgmma --trials 256

tunes (on a CUDA GPU) until the database has that many trials for each workload or the time is nearly up. The search
space (``--space``) comes from the registry in ``tirbench.tuning.spaces``, each in its own database.

``--setup tuned`` (the default) measures as the harness does, one launch per repeat with the L2 flushed before each
(``tirbench.tuning.runners``), and builds with the trial-rate cuts (``tirbench.tuning.builders``); ``--setup stock`` is
MetaSchedule's own builder and measurement. ``--rpc HOST:PORT:KEY`` measures on the RPC servers registered under KEY
with that tracker (``tirbench.tuning.rpc.cluster`` starts a tracker and a server per GPU); the tracker, the key and
the address are checked before any database is opened. Bad input, no GPU, no tracker: one line, exit status 2.
Every run appends a row per tuned workload to a throughput file (``tirbench.tuning.throughput.path_for_run``).
A process that runs ``main`` again and again (``tirbench.tuning.warm``) passes it a ``Tools``: the builder and runner
one run made serve the next run of the same kind, so their worker processes start once.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn

from tvm.s_tir import meta_schedule as ms

from tirbench.bench.results import new_run_id
from tirbench.core.machine import cpu_target, require_cuda_gpu
from tirbench.core.paths import project_root
from tirbench.tuning import throughput
from tirbench.tuning.builders import PersistentBuilder, make_builder
from tirbench.tuning.history import trials_done, tuning_history
from tirbench.tuning.rpc import tracker
from tirbench.tuning.runners import make_local_runner, make_rpc_runner
from tirbench.tuning.spaces import SPACES, DesignSpace, get_space
from tirbench.tuning.tune import DEFAULT_POPULATION, tune, work_dir_for
from tirbench.workloads import conv2d, conv2d_winograd, gemm
from tirbench.workloads.base import Workload

#: The sizes each workload takes, in order (``conv2d_winograd``: a 3x3, stride-1, pad-1 conv2d by Winograd, ``--m``).
CONV_SIZES = ("N", "C", "H", "W", "K", "R", "S", "STRIDE", "PAD")
CLI_SIZES = {"gemm": ("M", "N", "K"), "conv2d": CONV_SIZES, "conv2d_winograd": CONV_SIZES}


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse ``type=``: ``kind`` of the text, refused unless above 0."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m tirbench.tuning", description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=list(CLI_SIZES))
    p.add_argument("sizes", type=int, nargs="+", metavar="SIZE",
                   help="; ".join(f"{name}: {' '.join(sizes)}" for name, sizes in CLI_SIZES.items())
                   + " (several groups: tuned one after the other)")
    p.add_argument("--dtype", default="float32",
                   help="float32 (default) or float16 (tensor cores: fp16 inputs, fp32 accumulation)")
    p.add_argument("--layout", default=None,
                   help="conv2d: NCHW (default), NHWC or HWCN; conv2d_winograd: NCHW (default) or NHWC")
    p.add_argument("--m", type=int, default=None,
                   help="conv2d_winograd only: the output tile of F(m x m, 3x3), 2 or 4 (default 4)")
    p.add_argument("--trials", type=positive(int), required=True,
                   help="tune until the database has this many trials (those already there count)")
    p.add_argument("--chunk", type=positive(int), default=64,
                   help="trials per call of MetaSchedule (default 64): progress and logs after each, and where "
                        "a killed run resumes; keep it small where trials are slow and --seconds is set")
    p.add_argument("--seconds", type=positive(float), default=None, help="stop before this many seconds have passed")
    p.add_argument("--population", type=positive(int), default=DEFAULT_POPULATION,
                   help="the evolutionary search's population (default: MetaSchedule's, %(default)s); its sampling "
                        "and checks are most of a trial's host CPU time")
    p.add_argument("--space", choices=list(SPACES), default="default",
                   help="; ".join(f"{name}: {space.description}" for name, space in SPACES.items()))
    p.add_argument("--setup", choices=throughput.SETUPS, default="tuned",
                   help="tuned: measured as the harness measures (L2 flushed before each launch) with the trial-rate "
                        "cuts; stock: MetaSchedule's own builder and measurement")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY", default=None,
                   help="measure on the RPC servers registered under KEY with the tracker at HOST:PORT "
                        "(MetaSchedule's RPCRunner; `python -m tirbench.tuning.rpc.cluster tune ...` starts them)")
    p.add_argument("--target", choices=("cuda", "llvm"), default="cuda",
                   help="llvm: tune for this CPU (tests, `rpc_cluster --llvm`): databases under build/tuning (or --db), "
                        "with an _llvm suffix")
    p.add_argument("--db", type=Path, default=None,
                   help="put the databases under this directory instead of results/tuning (the throughput row "
                        "then goes to build/tuning/throughput.csv)")
    return p


def cli_workloads(name: str, sizes: list[int], dtype: str, layout: str | None, m: int | None = None) -> list[Workload]:
    """The workloads the CLI names: one per group of sizes (several groups tune one after the other in one process,
    which starts TVM once); one-line ValueError for a size count that is no multiple of a group, a layout GEMM has
    not, or an ``m`` for another workload than ``conv2d_winograd``."""
    names = CLI_SIZES[name]
    if not sizes or len(sizes) % len(names):
        raise ValueError(f"{name} takes groups of {len(names)} sizes ({' '.join(names)}), got {len(sizes)}")
    if name == "gemm" and layout is not None:
        raise ValueError(f"--layout={layout}: only conv2d has a layout")
    if name != "conv2d_winograd" and m is not None:
        raise ValueError(f"--m={m}: only conv2d_winograd has an output tile")
    groups = [sizes[i:i + len(names)] for i in range(0, len(sizes), len(names))]
    if name == "gemm":
        return [gemm(*group, dtype=dtype) for group in groups]
    if name == "conv2d_winograd":
        return [conv2d_winograd(*group, m=4 if m is None else m, layout=layout or "NCHW", dtype=dtype)
                for group in groups]
    return [conv2d(*group, layout=layout or "NCHW", dtype=dtype) for group in groups]


@dataclass
class Run:
    """What the workloads of one CLI run share; the builder and runner are made for the first that tunes."""

    root: Path
    space: DesignSpace
    setup: str
    target_kind: str
    db: Path | None
    address: tracker.RPCAddress | None
    servers: int
    deadline: float | None
    run_id: str
    gpu: str | None = None
    builder: ms.builder.Builder | None = None
    runner: ms.runner.Runner | None = None

    def work_dir(self, wl: Workload) -> Path:
        """``work_dir_for``, under ``db`` instead of ``results/tuning`` if given; a CPU tuning run's under
        ``build/tuning`` by default, with ``_llvm`` appended so that it never mixes with a GPU database."""
        wd = work_dir_for(self.root, wl, self.space)
        llvm = self.target_kind == "llvm"
        base = self.db or (self.root / "build" / "tuning" if llvm else None)
        if base is not None:
            wd = base / wd.relative_to(self.root / "results" / "tuning")
        return wd.with_name(f"{wd.name}_llvm") if llvm else wd


def start_run(a: argparse.Namespace) -> tuple[list[Workload], Run]:
    """The workloads and the run's shared state; the tracker and its servers checked before any database opens."""
    deadline = None if a.seconds is None else time.monotonic() + a.seconds
    workloads = cli_workloads(a.workload, a.sizes, a.dtype, a.layout, a.m)
    if a.target == "llvm" and a.space != "default":
        raise ValueError(f"--target llvm tunes MetaSchedule's own rules only, not --space {a.space}")
    address = tracker.parse_rpc(a.rpc) if a.rpc else None
    servers = tracker.check(address) if address else 1
    now = dt.datetime.now(dt.timezone.utc)
    return workloads, Run(root=project_root(), space=get_space(a.space), setup=a.setup, target_kind=a.target,
                          db=a.db, address=address, servers=servers, deadline=deadline,
                          run_id=new_run_id(now))


@dataclass
class Tools:
    """A builder and runner kept from one ``main`` to the next in one process (``tirbench.tuning.warm``), with the GPU
    they measure on and what they were made for (``tools_key``)."""

    key: tuple = ()
    gpu: str | None = None
    builder: ms.builder.Builder | None = None
    runner: ms.runner.Runner | None = None


def tools_key(a: argparse.Namespace) -> tuple:
    """What a run's builder and runner depend on: the workload kind, dtype, layout, tile, space, setup, target and
    RPC tracker (one run shares them across its shapes)."""
    return a.workload, a.dtype, a.layout, a.m, a.space, a.setup, a.target, a.rpc


def make_tools(run: Run, wl: Workload) -> None:
    """The run's builder and runner (once, for every workload: one dtype, one space), and the GPU they measure on.
    The builder's workers start in the background; while the runner's worker starts, this process imports TVM's
    tensor intrinsics (which the first ``TuneContext`` imports otherwise, before any seed or search)."""
    if run.target_kind == "llvm":
        run.gpu = "cpu"
    else:
        run.gpu = require_cuda_gpu().device_name if run.address is None else tracker.remote_gpu_name(run.address)
    t0 = time.monotonic()
    run.builder = make_builder(wl, run.space, run.setup)
    with ThreadPoolExecutor(1) as pool:
        runner = pool.submit(lambda: make_rpc_runner(run.setup, run.address, run.servers) if run.address
                             else make_local_runner(run.setup))
        importlib.import_module("tvm.s_tir.tensor_intrin")
        importlib.import_module("xgboost")   # MetaSchedule's cost model imports it in the first search otherwise
        run.runner = runner.result()
    print(f"[tuning] {run.setup} setup on {run.servers} x {run.gpu} ({'rpc' if run.address else 'local'} runner): "
          f"builder, runner and tensor intrinsics ready in {time.monotonic() - t0:.1f} s", flush=True)


def tune_workload(run: Run, wl: Workload, trials: int, chunk: int,
                  population: int = DEFAULT_POPULATION) -> None:
    """Tune ``wl`` up to ``trials`` (nothing, and one line, where its database has them) and record the run's
    throughput (``throughput.path_for_run``)."""
    work_dir = run.work_dir(wl)
    t0, done = time.monotonic(), trials_done(work_dir)
    if done >= trials:
        print(f"[tuning] {wl.name} {wl.shape} {wl.dtype}: {done} trials recorded, budget {trials}: nothing to tune",
              flush=True)
        return
    if run.builder is None:
        make_tools(run, wl)
    seconds = None if run.deadline is None else run.deadline - time.monotonic()
    tune(wl, work_dir, trials=trials, chunk=chunk, seconds=seconds,
         target=cpu_target() if run.target_kind == "llvm" else None, space=run.space, setup=run.setup,
         builder=run.builder, runner=run.runner, population=population)
    new, wall = trials_done(work_dir) - done, time.monotonic() - t0
    if new > 0:
        best = tuning_history(work_dir, wl.flops)["best_gflops"]
        path = throughput.path_for_run(run.root, work_dir, gpu=run.target_kind == "cuda")
        throughput.append_rows(path, [{
            "run_id": run.run_id, "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gpu": run.gpu, "gpus": run.servers, "runner": "rpc" if run.address else "local", "setup": run.setup,
            "workload": wl.name, "shape": wl.shape, "dtype": wl.dtype, "space": run.space.name, "trials": new,
            "seconds": round(wall, 1), "trials_per_min": round(60 * new / wall, 2),
            "best_gflops": round(float(best.iloc[-1]), 2)}])


def main(argv: list[str] | None = None, tools: Tools | None = None, *, prepare: bool = False) -> int:
    """The CLI; ``tools``: a builder and runner to reuse where they were made for the same ``tools_key``, and where
    this run's are kept for the next. ``prepare``: only make them (for the first workload) and tune nothing, so that
    a tuning process (``tirbench.tuning.warm``) is ready before its first task."""
    p = build_parser()
    a = p.parse_args(argv)
    run = None
    try:
        workloads, run = start_run(a)
        if tools is not None and tools.key == tools_key(a):
            run.gpu, run.builder, run.runner = tools.gpu, tools.builder, tools.runner
            print(f"[tuning] the builder and runner of this process's last run, on {run.gpu}", flush=True)
        if prepare and run.builder is None:
            make_tools(run, workloads[0])
        if prepare and isinstance(run.builder, PersistentBuilder):   # its workers ready too, not in the first task
            t0 = time.monotonic()
            run.builder.wait_started()
            print(f"[tuning] the builder's workers started {time.monotonic() - t0:.1f} s later", flush=True)
        for wl in () if prepare else workloads:
            tune_workload(run, wl, a.trials, a.chunk, a.population)
    except (ValueError, RuntimeError) as err:  # bad input, no GPU, no tracker or server: one line, exit status 2
        p.exit(2, f"{p.prog}: error: {err}\n")
    finally:   # kept also where a workload failed: they are not what failed
        if tools is not None and run is not None and run.builder is not None:
            tools.key, tools.gpu, tools.builder, tools.runner = tools_key(a), run.gpu, run.builder, run.runner
    return 0

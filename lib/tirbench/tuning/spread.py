"""Tune many workloads at once on every GPU of a Dask cluster: one task per workload, one GPU per task.

    python -m tirbench.tuning.spread resnet50 --trials 32                  # notebook 08's 23 fp32 batch-1 layers
    python -m tirbench.tuning.spread --gpus 2 conv2d 1 64 56 56 64 3 3 1 1  1 512 7 7 512 3 3 1 1 --trials 64
    python -m tirbench.tuning.spread --scheduler tcp://HOST:8786 resnet50 --trials 32      # workers you started

Why tasks and not measurements: a trial is 0.5-1.5 s of search and 0.5 s of build for 0.01-0.08 s of measurement,
so spreading the measurements over GPUs (TVM's RPC tracker, ``tuning.rpc.cluster``, still the way to measure on a GPU
of another machine) cannot make tuning faster; every GPU needs its own search and its own builders. Here each
workload is a task: the tuning CLI (``python -m tirbench.tuning``) for that workload alone, run by a Dask worker
that owns one GPU (``resources={"GPU": 1}``) in the worker's one long-lived tuning process (``tuning.warm``, started
with its builder and runner before the first task, ``prepare_workers``), which keeps its imports, builder workers
and runner from task to task: a fresh process per task would pay them every time
(7 s a task on a CPU, most of a 50 s task on a GPU host). Its builds and its search's threads run on that worker's
share of the host's cores (``TIRBENCH_TASK_CORES``). A task tunes into the database ``tuning.replay`` reads; one
whose database already holds the trials returns at once, so a run resumes where the last one stopped, and a task
whose worker dies is re-run by Dask elsewhere and resumes from its database (the dead worker's tuning process dies
with it). Dask places the tasks and moves one still waiting to a worker that has run out (work stealing; no queue of
our own), so a faster GPU takes more of them.

One host (no ``--scheduler``): ``LocalCluster`` starts ``dask scheduler`` and one ``dask worker`` per GPU as
separate processes (``CUDA_VISIBLE_DEVICES`` set to its GPU, so CUDA is never initialised before a fork) and stops
them at the end, Ctrl-C and SIGTERM included. Several hosts: README, "Tuning on several GPUs". One bar per GPU (the
task it runs, its trials) and one overall; each run appends a row to ``network_tuning.csv`` (``ROW_COLUMNS``:
``results/tuning/`` for a GPU run into ``results/``, ``build/tuning/`` for any other). Bad input: one line, exit 2;
a task that failed: one line each, exit 1.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tirbench.bench.results import new_run_id
from tirbench.core.paths import project_root
from tirbench.tuning.processes import TASK_CORES_ENV, Children, ClusterError, raise_interrupt
from tirbench.tuning.warm import prepare_worker, run_task

#: The networks ``spread`` tunes by name: the tuning CLI's arguments for every distinct layer.
NETWORKS = {"resnet50": "notebook 08's 23 fp32 batch-1 ResNet-50 layers, NCHW, in the `rules` space"}
#: Columns of ``network_tuning.csv``, in order.
ROW_COLUMNS = ["run_id", "timestamp", "gpu", "gpus", "hosts", "host_cores", "cores_per_task", "engine", "space",
               "tasks", "trials_per_task", "population", "new_trials", "start_s", "wall_s", "trials_per_min"]
#: Seconds for the local scheduler and workers to come up.
START_TIMEOUT_S = 120
#: Seconds between two looks at the databases (the progress bars).
POLL_S = 2.0


@dataclass(frozen=True)
class Task:
    """One workload to tune: the tuning CLI's arguments for it alone, and where its database lives."""

    name: str
    argv: tuple[str, ...]
    work_dir: Path
    #: How long it is expected to take against the others: its filter taps (a 3x3 layer's task took 9-11 s on one
    #: H200, a 1x1 layer's ~6 s; ``docs/tuning.md``), then its flops.
    weight: tuple[int, int] = (1, 0)


def network_argv(name: str) -> list[str]:
    """The tuning CLI's arguments for ``NETWORKS[name]``'s layers (options after them are the caller's)."""
    from tirbench.workloads.resnet50 import resnet50_layers

    if name != "resnet50":
        raise ValueError(f"unknown network {name!r}: expected one of {', '.join(NETWORKS)}")
    return ["conv2d", *(str(v) for _, sizes in resnet50_layers(1) for v in sizes), "--space", "rules"]


def split_tasks(argv: list[str]) -> tuple[list[Task], argparse.Namespace]:
    """One ``Task`` per workload of the tuning CLI's ``argv`` (a network name expands to its layers; the options
    come after the sizes and go to every task), and the parsed arguments; one-line ValueError for bad input."""
    from tirbench.tuning import cli

    if argv and argv[0] in NETWORKS:
        argv = [*network_argv(argv[0]), *argv[1:]]
    a = cli.build_parser().parse_args(argv)
    if argv[1:1 + len(a.sizes)] != [str(v) for v in a.sizes]:
        raise ValueError("put the options after the sizes: WORKLOAD SIZES... [--trials N ...]")
    if a.rpc:
        raise ValueError("--rpc measures on another machine's GPU; spread runs each task on a GPU of its own")
    if a.seconds is not None:
        raise ValueError("--seconds: a spread run is resumable; stop it with Ctrl-C and run it again")
    workloads, run = cli.start_run(a)
    options, group = argv[1 + len(a.sizes):], len(a.sizes) // len(workloads)
    tasks = [Task(f"{wl.name} {wl.shape}", (a.workload, *map(str, a.sizes[i * group:(i + 1) * group]), *options),
                  run.work_dir(wl), (wl.sizes.get("r", 1) * wl.sizes.get("s", 1), wl.flops))
             for i, wl in enumerate(workloads)]
    return tasks, a


def priorities(tasks: list[Task]) -> list[int]:
    """Dask priorities (higher first) that start the longest tasks first (``Task.weight``), so that the last task
    to end on each GPU is a short one; equal weights keep their order."""
    order = sorted(range(len(tasks)), key=lambda i: tasks[i].weight, reverse=True)
    rank = {i: r for r, i in enumerate(order)}
    return [len(tasks) - rank[i] for i in range(len(tasks))]


class LocalCluster(Children):
    """A Dask scheduler on this host and one worker per entry of ``devices`` (``CUDA_VISIBLE_DEVICES`` set to it,
    one task at a time, on ``task_cores`` cores: its build processes and search threads); ``with LocalCluster(...)
    as c:`` starts them and stops them (``processes.Children``, logs under ``log_dir``); ``c.scheduler_file`` is what
    a client connects with."""

    def __init__(self, *, devices: list[str], task_cores: int, log_dir: Path):
        super().__init__(log_dir)
        self.devices, self.task_cores = devices, task_cores
        self.scheduler_file = self.log_dir / "scheduler.json"

    def start(self) -> None:
        self.scheduler_file.unlink(missing_ok=True)
        env = dict(os.environ)
        self.spawn("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                 "--port", "0", "--no-dashboard", "--scheduler-file", str(self.scheduler_file)], env)
        self.wait_for("Dask scheduler", self.scheduler_file.exists, timeout=START_TIMEOUT_S)
        for i, device in enumerate(self.devices):
            self.spawn(f"worker-{i}", [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                       str(self.scheduler_file), "--nworkers", "1", "--nthreads", "1",
                                       "--resources", "GPU=1", "--name", f"gpu-{device or i}", "--no-dashboard"],
                       {**env, "CUDA_VISIBLE_DEVICES": device, TASK_CORES_ENV: str(self.task_cores)})


def tune_tasks(client, tasks: list[Task], trials: int, log_dir: Path) -> tuple[list[dict], list[str]]:
    """Submit every task (one GPU each, the longest first: ``priorities``) and wait, one progress bar per worker and
    one overall (trials in the databases); returns the finished tasks' results and one line per failed task."""
    from distributed import as_completed
    from tqdm.std import tqdm

    from tirbench.tuning.history import trials_done

    log_dir.mkdir(parents=True, exist_ok=True)
    futures = {client.submit(run_task, list(t.argv), str(log_dir / f"task-{i:02d}.log"), key=f"tune-{i:02d}",
                             resources={"GPU": 1}, pure=False, priority=p): t
               for i, (t, p) in enumerate(zip(tasks, priorities(tasks)))}
    by_key = {f.key: t for f, t in futures.items()}
    workers = sorted(client.scheduler_info()["workers"])
    overall = tqdm(total=trials * len(tasks), desc="all tasks", unit="trial", position=0, dynamic_ncols=True)
    bars = {w: tqdm(total=trials, desc=f"GPU {i}", unit="trial", position=i + 1, dynamic_ncols=True, leave=False)
            for i, w in enumerate(workers)}
    pending, results, failed = as_completed(futures), [], []
    try:
        while not pending.is_empty():
            for future in pending.next_batch(block=False):
                if future.status == "finished":
                    results.append(future.result())
                else:
                    failed.append(f"{futures[future].name}: {future.exception()}")
            done = {t.name: min(trials_done(t.work_dir), trials) for t in tasks}
            overall.n = sum(done.values())
            overall.refresh()
            for worker, keys in client.processing().items():
                if worker in bars and keys:
                    task = by_key.get(keys[0])
                    if task is not None:
                        bars[worker].set_description(f"GPU {workers.index(worker)}: {task.name}")
                        bars[worker].n = done[task.name]
                        bars[worker].refresh()
            time.sleep(POLL_S)
    finally:
        for bar in (*bars.values(), overall):
            bar.close()
    return results, failed


def append_row(path: Path, row: dict[str, object]) -> None:
    """Append ``row`` to ``network_tuning.csv`` at ``path`` (``bench.results.append_csv``: atomically, refusing a
    file that is not whole)."""
    from tirbench.bench.results import append_csv, require_columns

    append_csv(path, [row], ROW_COLUMNS, require_columns(ROW_COLUMNS, "network tuning row"))


def path_for(root: Path) -> Path:
    """The recorded GPU runs' file: ``results/tuning/network_tuning.csv``."""
    return root / "results" / "tuning" / "network_tuning.csv"


def row_path(root: Path, tasks: list[Task], *, gpu: bool) -> Path:
    """``path_for(root)`` for a GPU run whose databases live under ``results/``, else
    ``build/tuning/network_tuning.csv`` (tests and trial runs leave tracked files alone)."""
    under_results = all(t.work_dir.resolve().is_relative_to((root / "results").resolve()) for t in tasks)
    return path_for(root) if gpu and under_results else root / "build" / "tuning" / "network_tuning.csv"


def prepare_workers(client, task: Task, log_dir: Path) -> None:
    """Every worker's tuning process started, with its builder and runner made for ``task``'s kind
    (``warm.prepare_worker``), before any task is submitted; one-line ClusterError for a worker where that failed."""
    for worker, rc in client.run(prepare_worker, list(task.argv), str(log_dir)).items():
        if rc != 0:
            raise ClusterError(f"worker {worker}: its tuning process could not be prepared (exit status {rc}; "
                               f"log in {log_dir})")


def spread(client, tasks: list[Task], a: argparse.Namespace, log_dir: Path, started: float) -> int:
    """Tune ``tasks`` on ``client``'s workers, print what was done, append the run's row; exit status 0, or 1 if a
    task failed. ``started``: when the command started (``time.monotonic()``); the row's ``start_s`` is from then
    until the workers' tuning processes are ready (``prepare_workers``), ``wall_s`` from their being ready until the
    last task is done."""
    from tirbench.tuning.history import trials_done

    info = client.scheduler_info()["workers"]
    gpus, hosts = len(info), len({w.get("host", addr.split("://")[-1].rsplit(":", 1)[0]) for addr, w in info.items()})
    before = sum(trials_done(t.work_dir) for t in tasks)
    if before < a.trials * len(tasks):
        prepare_workers(client, tasks[0], log_dir)
    t0 = time.monotonic()
    results, failed = tune_tasks(client, tasks, a.trials, log_dir)
    wall = time.monotonic() - t0
    new = sum(trials_done(t.work_dir) for t in tasks) - before
    for line in failed:
        print(f"[spread] failed: {line}", file=sys.stderr)
    processes = len({(r["host"], r["pid"]) for r in results})
    print(f"[spread] {len(results)} of {len(tasks)} tasks done on {gpus} GPU(s), {hosts} host(s), in {processes} "
          f"tuning process(es): {new} new trials in {wall:.0f} s ({60 * new / wall:.1f} trials/min) after "
          f"{t0 - started:.0f} s of start-up; logs: {log_dir}")
    if new > 0 and results:
        now = dt.datetime.now(dt.timezone.utc)
        append_row(row_path(project_root(), tasks, gpu=a.target == "cuda"), {
            "run_id": new_run_id(now), "timestamp": now.isoformat(timespec="seconds"),
            "gpu": results[0]["gpu"], "gpus": gpus, "hosts": hosts,
            "host_cores": max(r["cores"] for r in results),
            "cores_per_task": max(r["task_cores"] for r in results), "engine": "dask", "space": a.space,
            "tasks": len(tasks), "trials_per_task": a.trials, "population": a.population, "new_trials": new,
            "start_s": round(t0 - started, 1), "wall_s": round(wall, 1), "trials_per_min": round(60 * new / wall, 2)})
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    from tirbench.tuning.cli import OneLineParser

    p = OneLineParser(prog="python -m tirbench.tuning.spread", description=__doc__.splitlines()[0],
                      epilog="networks: " + "; ".join(f"{k}: {v}" for k, v in NETWORKS.items()))
    p.add_argument("--gpus", type=int, default=None,
                   help="local cluster: this many GPUs (default: every GPU CUDA_VISIBLE_DEVICES or nvidia-smi shows; "
                        "with --target llvm, CPU workers)")
    p.add_argument("--scheduler", default=None, help="a running Dask scheduler (tcp://HOST:8786) whose workers to use")
    p.add_argument("--connect-timeout", type=float, default=30.0,
                   help="--scheduler: seconds to wait for it to answer (default 30)")
    p.add_argument("--cores-per-task", type=int, default=None,
                   help="cores each GPU's task builds and searches on (default: the host's cores / GPUs)")
    p.add_argument("tuning", nargs=argparse.REMAINDER,
                   help="a network name or the tuning CLI's WORKLOAD SIZES... [options] (python -m tirbench.tuning -h)")
    return p


def local_devices(gpus: int | None, llvm: bool) -> list[str]:
    """The local workers' ``CUDA_VISIBLE_DEVICES``: ``gpus`` of the visible GPUs (all by default); for a CPU run
    (``llvm``) ``gpus`` workers that see none. One-line ValueError where there are not that many."""
    from tirbench.tuning.rpc.cluster import visible_gpus

    if llvm:
        return [""] * (gpus or 2)
    visible = visible_gpus()
    if not visible:
        raise ValueError("no GPU visible here (CUDA_VISIBLE_DEVICES / nvidia-smi): pass --target llvm for a CPU run")
    if gpus is not None and not 0 < gpus <= len(visible):
        raise ValueError(f"--gpus={gpus}: this host shows {len(visible)} GPU(s)")
    return visible[:gpus or len(visible)]


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    p = build_parser()
    a = p.parse_args(argv)
    try:
        tasks, ta = split_tasks(a.tuning)
        log_dir = project_root() / "build" / "spread" / dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        from distributed import Client

        signal.signal(signal.SIGTERM, raise_interrupt)
        if a.scheduler:
            with Client(a.scheduler, timeout=a.connect_timeout) as client:
                return spread(client, tasks, ta, log_dir, started)
        devices = local_devices(a.gpus, ta.target == "llvm")
        cores = a.cores_per_task or max(1, (os.cpu_count() or 1) // len(devices))
        with LocalCluster(devices=devices, task_cores=cores, log_dir=log_dir / "cluster") as cluster:
            with Client(scheduler_file=str(cluster.scheduler_file), timeout=START_TIMEOUT_S) as client:
                client.wait_for_workers(len(devices), timeout=START_TIMEOUT_S)
                return spread(client, tasks, ta, log_dir, started)
    except (ValueError, ClusterError, OSError) as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    except KeyboardInterrupt:
        print("[spread] interrupted: the cluster is stopped; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

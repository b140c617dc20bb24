"""One long-lived tuning process per Dask worker (``tirbench.tuning.spread``): the tuning CLI for task after task.

A fresh tuning process pays, before its first trial, for what a warm one already has: the Python start and imports
(tvm, MetaSchedule, the suite; torch too where it is installed: tvm_ffi imports it), TVM's tensor intrinsics
(``TuneContext`` imports them), the runner's worker process and the builder's worker processes (each importing tvm),
the first measurement's set-up (a CUDA context, the L2 flush kernel). On a CPU that is ~7 s a task for 3 s of tuning
(``docs/tuning.md``, "Several GPUs"); on a GPU host it was most of a 46-55 s task.

``TuningProcess`` is the Dask worker's side: ``spread`` has every worker start ``python -m tirbench.tuning.warm``
(in the worker's process group, so killing the worker's group kills it too) and make its builder and runner for the
run (``prepare_worker``) before the first task; a worker that joins later starts it with its first task. Every task
sends it one line, the CLI's arguments and the task's log file; the process runs ``cli.main`` on them with a
``cli.Tools`` it keeps, so the builder and runner of one task serve the next, and answers the exit status. Its
output, and that of the builder and runner workers it starts, goes to the task's log (a pipe copied there by a
thread: ``Relay``). A tuning process that died (a crash, the kernel's OOM killer) is replaced by a new one: between
tasks, on the next task; during a task, at once, and the task runs again in it, resuming from its database (once: a
second death fails the task). It gets SIGTERM when its worker dies (``PR_SET_PDEATHSIG``), so a task Dask re-runs
elsewhere never has two writers on its database.
"""
from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from tirbench.tuning.processes import task_cores

if TYPE_CHECKING:
    from tirbench.tuning.cli import Tools

#: The environment variable that tells the tuning process its Dask worker's pid (``PR_SET_PDEATHSIG`` is set after
#: the fork: a worker that died before then is noticed so).
PARENT_ENV = "TIRBENCH_WARM_PARENT"
#: Written through the relayed output at the end of each task: once the thread that copies it meets this byte, all
#: that was written before is in the task's log. (No text output holds a NUL.)
SYNC = b"\0"
#: Seconds to wait for the log to catch up at the end of a task.
SYNC_TIMEOUT_S = 30


class Relay:
    """This process's stdout and stderr (file descriptors 1 and 2, which the builder and runner workers it starts
    inherit) made a pipe whose output a thread appends to the current task's log (``to``)."""

    def __init__(self) -> None:
        read, write = os.pipe()
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(write)
        sys.stdout.reconfigure(line_buffering=True)
        self.read, self.log, self.lock, self.synced = read, None, threading.Lock(), threading.Event()
        threading.Thread(target=self._copy, daemon=True, name="relay").start()

    def to(self, path: str) -> None:
        """From now on, append what comes to ``path``."""
        with self.lock:
            if self.log is not None:
                self.log.close()
            self.log = open(path, "ab")

    def sync(self) -> None:
        """Return once all that was written so far is in the log."""
        sys.stdout.flush()
        sys.stderr.flush()
        self.synced.clear()
        os.write(1, SYNC)
        self.synced.wait(SYNC_TIMEOUT_S)

    def _copy(self) -> None:
        while chunk := os.read(self.read, 1 << 16):
            *synced, rest = chunk.split(SYNC)
            with self.lock:
                for part in (*synced, rest):
                    if part and self.log is not None:
                        self.log.write(part)
                if self.log is not None:
                    self.log.flush()
            if synced:
                self.synced.set()


def run_cli(argv: list[str], tools: Tools, *, prepare: bool = False) -> int:
    """``cli.main(argv, tools, prepare=prepare)``'s exit status (a traceback in the log for an error it does not turn
    into one line)."""
    from tirbench.tuning import cli

    try:
        return cli.main(argv, tools, prepare=prepare)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    except Exception:
        traceback.print_exc()
        return 1


def serve() -> None:
    """The tuning process: one JSON request a line on stdin (``{"argv": [...], "log": path, "prepare": bool}``), run
    by ``run_cli`` with its output to ``log``; one JSON answer a line (``{"rc": N}``) on the stdout it was started
    with. Returns at the end of stdin."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    if os.getppid() != int(os.environ.get(PARENT_ENV, os.getppid())):
        return
    requests, answers = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)   # the builder and runner workers inherit 0, 1 and 2
    os.close(devnull)
    relay = Relay()
    from tirbench.tuning.cli import Tools

    tools = Tools()
    for line in requests:
        request = json.loads(line)
        relay.to(request["log"])
        rc = run_cli(request["argv"], tools, prepare=request.get("prepare", False))
        relay.sync()
        answers.write(json.dumps({"rc": rc}) + "\n")


class TuningProcess:
    """A Dask worker's tuning process: ``run`` a task in it, starting one where there is none (see the module
    docstring)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The tuning process's pid; None before the first task."""
        return None if self.proc is None else self.proc.pid

    def run(self, argv: list[str], log: str, *, prepare: bool = False) -> int:
        """Run the tuning CLI on ``argv`` in the tuning process, its output appended to ``log``; its exit status (the
        process's, negative for a signal, where it died twice). ``prepare``: only make its builder and runner."""
        with self.lock:
            rc = self._attempt(argv, log, prepare)
            if rc is None:
                with open(log, "a") as out:
                    out.write(f"[spread] the tuning process died during this task (status {self.proc.wait()}): "
                              "running the task again in a new one\n")
                rc = self._attempt(argv, log, prepare)
            return (self.proc.wait() or 1) if rc is None else rc

    def close(self) -> None:
        """End the tuning process (its stdin closed: it returns once the task in hand is done)."""
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None

    def _attempt(self, argv: list[str], log: str, prepare: bool) -> int | None:
        """The task's exit status; None where the tuning process died before answering."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:   # died: its pipes closed
                self.proc.stdin.close()
                self.proc.stdout.close()
            self.proc = self._start(log)
        try:
            self.proc.stdin.write(json.dumps({"argv": argv, "log": log, "prepare": prepare}) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except BrokenPipeError:
            answer = ""
        if not answer:
            self.proc.wait()
            return None
        return int(json.loads(answer)["rc"])

    @staticmethod
    def _start(log: str) -> subprocess.Popen:
        """Start the tuning process from a thread that lives as long as it does: ``PR_SET_PDEATHSIG`` fires when the
        thread that started a process ends, not its process. What it writes before its first task goes to ``log``."""
        started: queue.Queue[subprocess.Popen | BaseException] = queue.Queue()

        def keep() -> None:
            try:
                with open(log, "a") as err:
                    proc = subprocess.Popen([sys.executable, "-m", "tirbench.tuning.warm"], text=True,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                            env={**os.environ, PARENT_ENV: str(os.getpid())})
            except BaseException as err:   # handed to the caller
                started.put(err)
                return
            started.put(proc)
            proc.wait()

        threading.Thread(target=keep, daemon=True, name="tuning-process").start()
        got = started.get()
        if isinstance(got, BaseException):
            raise got
        return got


#: This Dask worker's tuning process (started by its first task).
TUNER = TuningProcess()


def run_task(argv: list[str], log: str) -> dict[str, object]:
    """What a Dask worker runs for one task of ``tuning.spread``: the tuning CLI for one workload in the worker's
    tuning process (``TUNER``), its output appended to ``log``; the host, the GPU's name (``cpu`` for ``--target
    llvm``), the host's CPU cores, the wall time and the tuning process's pid. A RuntimeError with the log's last line
    if the CLI fails.
    (Here, not in ``spread``: run as ``python -m``, that module is ``__main__``, and Dask would send the function and
    a copy of ``TUNER`` by value with every task.)"""
    t0 = time.monotonic()
    rc = TUNER.run(argv, log)
    if rc != 0:
        lines = Path(log).read_text().strip().splitlines()
        raise RuntimeError(f"exit status {rc}: {lines[-1] if lines else 'no output'} (log: {log})")
    return {"host": socket.gethostname(), "gpu": gpu_name(llvm="llvm" in argv), "cores": os.cpu_count() or 1,
            "task_cores": task_cores() or os.cpu_count() or 1,
            "seconds": time.monotonic() - t0, "pid": TUNER.pid}


async def prepare_worker(argv: list[str], log_dir: str, dask_worker) -> int:
    """What ``tuning.spread`` runs on every Dask worker (``Client.run``, which passes ``dask_worker``) before the
    first task: the worker's tuning process started and its builder and runner made for ``argv``
    (``cli.main(..., prepare=True)``), output to ``prepare-<worker name>.log`` in ``log_dir``; the exit status. (In a
    thread: the worker's event loop goes on.)"""
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    log = str(Path(log_dir) / f"prepare-{dask_worker.name}.log")
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(TUNER.run, argv, log,
                                                                                     prepare=True))


@functools.cache
def gpu_name(*, llvm: bool) -> str:
    """The name of the GPU this worker sees (``nvidia-smi`` on its ``CUDA_VISIBLE_DEVICES``), ``cpu`` for a CPU run."""
    if llvm:
        return "cpu"
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", device],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or "unknown GPU"


if __name__ == "__main__":
    serve()

"""Child processes a tuning cluster starts (the RPC tracker and servers, ``tuning.rpc.cluster``; Dask's scheduler and
workers, ``tuning.spread``): each in its own session (process group), its output in ``<log_dir>/<name>.log``, and
all of them stopped together (SIGTERM to each group, SIGKILL to what is left), so that stopping one also stops the
processes it started."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from tirbench.core.errors import OneLineError

#: The environment variable that sets the cores one tuning task may use (``task_cores``).
TASK_CORES_ENV = "TIRBENCH_TASK_CORES"

#: Seconds a child is given to stop after SIGTERM before SIGKILL.
STOP_CHILD_S = 5


class ClusterError(OneLineError):
    """A process of the cluster could not be started, or did not become ready."""


class Children:
    """Child processes started with ``spawn``, waited for with ``wait_for`` and stopped with ``stop``; ``with
    cluster:`` calls the subclass's ``start`` and stops every child on the way out (also when ``start`` fails)."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        """Start the children (a subclass's)."""
        raise NotImplementedError

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Start ``cmd`` in a session of its own, stdout and stderr to ``<log_dir>/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{name}.log").open("w") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        self.procs[name] = proc
        return proc

    def wait_for(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        """Return once ``ready()``; a one-line ClusterError if a child exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [(name, p.returncode) for name, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise ClusterError(f"the {dead[0][0]} exited with status {dead[0][1]} while waiting for {what} "
                                   f"(see {self.log_dir / dead[0][0]}.log)")
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} after {timeout:.0f} s (logs: {self.log_dir})")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM each child's process group (the last started first), SIGKILL what is left after
        ``STOP_CHILD_S``; returns once no process of those groups is left."""
        procs = list(reversed(self.procs.values()))
        for proc in procs:
            signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_CHILD_S
        for proc in procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            signal_group(proc, signal.SIGKILL)  # also what the child started and left behind
            proc.wait()
        deadline = time.monotonic() + STOP_CHILD_S
        while any(signal_group(proc, 0) for proc in procs) and time.monotonic() < deadline:
            time.sleep(0.05)  # killed grandchildren: gone once reaped
        self.procs = {}


def signal_group(proc: subprocess.Popen, sig: int) -> bool:
    """Send ``sig`` to the child's process group; False if no process of it is left."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def raise_interrupt(signum: int, _frame: object) -> None:
    """A signal handler that turns SIGTERM (or any signal) into the KeyboardInterrupt a Ctrl-C raises."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def task_cores() -> int | None:
    """The cores a tuning task may use, its builder's worker processes and its search's threads (the cost model's
    too): ``TIRBENCH_TASK_CORES`` where set (``tuning.spread`` gives each GPU's task its share of the host's cores,
    so that tasks side by side do not each start a thread per core), else None (all of them)."""
    value = os.environ.get(TASK_CORES_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else None

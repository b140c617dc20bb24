"""Tune on every GPU of this host through TVM's RPC tracker: start a tracker and one RPC server per visible GPU
(``tirbench.tuning.rpc.server`` with ``CUDA_VISIBLE_DEVICES`` set to that GPU), wait until the tracker lists them, run
``python -m tirbench.tuning ... --rpc HOST:PORT:KEY``, then stop them, also on Ctrl-C or SIGTERM.

    python -m tirbench.tuning.rpc.cluster tune conv2d 1 256 14 14 256 3 3 1 1 --trials 64
    python -m tirbench.tuning.rpc.cluster --servers 2 --llvm tune gemm 64 64 64 --trials 16      # a CPU "cluster" (tests)
    python -m tirbench.tuning.rpc.cluster serve       # keep them up (other hosts join, tuning runs use --rpc) until Ctrl-C

Each child runs in its own process group (its own session), so stopping one stops the processes it started too
(a server's listening process and the sessions it forked); a tuning run gets the terminal's Ctrl-C itself and
is given ``STOP_TUNING_S`` to stop. Errors before tuning (a port in use, a server that does not register):
one line, exit status 2. Child logs: ``build/rpc-cluster/``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tirbench.tuning.processes import Children, ClusterError, raise_interrupt
from tirbench.tuning.rpc import tracker

DEFAULT_PORT = 9190
DEFAULT_KEY = "tirbench"
#: Seconds for the servers to start and register (each imports tvm and builds the L2 flush kernel).
REGISTER_TIMEOUT_S = 120
#: Seconds a tuning run is given to stop after Ctrl-C / SIGTERM before it is killed (its database survives a kill).
STOP_TUNING_S = 30
#: Server i tries the ports from ``SERVER_PORT + i * SERVER_PORTS`` on, ``SERVER_PORTS`` of them (8 servers stay below
#: ``DEFAULT_PORT``, the tracker's): servers started together with one range race (TVM's server sets SO_REUSEADDR, so
#: two may bind one port; the second ``listen`` fails with "Address already in use").
SERVER_PORT, SERVER_PORTS = 9090, 10


def visible_gpus() -> list[str]:
    """The GPUs a server is started for: ``CUDA_VISIBLE_DEVICES`` if set, else every GPU ``nvidia-smi -L`` lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def require_free_port(host: str, port: int) -> None:
    """One-line ClusterError if ``host:port`` cannot be bound (TVM's tracker would silently take the next port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            raise ClusterError(f"port {port} on {host} is in use ({err.strerror}): stop what holds it or pick "
                               "another with --port") from None


class Cluster(Children):
    """A tracker on ``port`` and ``servers`` RPC servers registered under ``key`` (one per entry of ``devices``, each
    seeing only that GPU; ``devices=None``: CPU servers). ``with Cluster(...) as c:`` starts and stops them
    (``processes.Children``: logs under ``log_dir``)."""

    def __init__(self, *, port: int, key: str, devices: list[str] | None, servers: int, host: str = "0.0.0.0",
                 log_dir: Path, min_servers: int | None = None):
        super().__init__(log_dir)
        self.port, self.key, self.host = port, key, host
        self.devices = devices if devices is not None else [""] * servers
        self.min_servers = min_servers or len(self.devices)

    @property
    def address(self) -> tracker.RPCAddress:
        """What a tuning run on this host passes as ``--rpc``."""
        return tracker.RPCAddress("127.0.0.1", self.port, self.key)

    def _registered(self) -> int:
        try:
            return tracker.count_servers(tracker.summary("127.0.0.1", self.port, timeout=1.0), self.key)
        except tracker.RPCError:
            return -1

    def start(self) -> None:
        """Start the tracker, then the servers; return once the tracker lists ``min_servers`` under the key."""
        require_free_port(self.host, self.port)
        env = {k: v for k, v in os.environ.items() if k != "TIRBENCH_PHASE_LOG"}
        self.spawn("tracker", [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", self.host, "--port",
                               str(self.port), "--port-end", str(self.port + 1), "--silent"], env)
        self.wait_for("tracker", lambda: self._registered() >= 0, timeout=60)
        for i, device in enumerate(self.devices):
            first = SERVER_PORT + i * SERVER_PORTS
            self.spawn(f"server-{i}", [sys.executable, "-m", "tirbench.tuning.rpc.server", "--tracker",
                                       f"127.0.0.1:{self.port}", "--key", self.key, "--host", self.host,
                                       "--port", str(first), "--port-end", str(first + SERVER_PORTS)],
                       {**env, "CUDA_VISIBLE_DEVICES": device})
        self.wait_for(f"{self.min_servers} servers registered under {self.key!r}",
                      lambda: self._registered() >= self.min_servers, timeout=REGISTER_TIMEOUT_S)


def _tune(cluster: Cluster, tuning_args: list[str], llvm: bool) -> int:
    """Run the tuning CLI through the cluster; on Ctrl-C / SIGTERM let it stop (or kill it), status 130."""
    cmd = [sys.executable, "-m", "tirbench.tuning", *tuning_args, "--rpc", str(cluster.address)]
    if llvm and "--target" not in tuning_args:
        cmd += ["--target", "llvm"]
    proc = subprocess.Popen(cmd)  # same process group: a Ctrl-C in the terminal reaches it directly
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_TUNING_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 130


def _print_tune_help(tune_parser: argparse.ArgumentParser) -> None:
    """``tune --help``: its usage, then the tuning CLI's arguments it passes on (no GPU or server needed)."""
    from tirbench.tuning.cli import build_parser

    print(tune_parser.format_help())
    build_parser().print_help()


def main(argv: list[str] | None = None) -> int:
    from tirbench.core.paths import project_root

    p = argparse.ArgumentParser(prog="python -m tirbench.tuning.rpc.cluster", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="the tracker's port")
    p.add_argument("--key", default=DEFAULT_KEY, help="the key the servers register under")
    p.add_argument("--host", default="0.0.0.0", help="the address the tracker and servers listen on")
    p.add_argument("--servers", type=int, default=None, help="servers to start (default: one per visible GPU)")
    p.add_argument("--llvm", action="store_true", help="CPU servers (no GPU); `tune` tunes with --target llvm")
    p.add_argument("--min-servers", type=int, default=None,
                   help="wait until the tracker lists this many servers (other hosts joining) before tuning")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="start, print how to tune and join, wait for Ctrl-C / SIGTERM, stop")
    t = sub.add_parser("tune", help="start, run `python -m tirbench.tuning ARGS --rpc ...`, stop", add_help=False,
                       prefix_chars="+", description="Start the tracker and servers, run the tuning CLI with ARGS "
                       "and --rpc to them, stop them.")  # every argument after `tune` goes to the tuning CLI
    t.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the tuning CLI's arguments (below)")
    a = p.parse_args(argv)
    if a.command == "tune" and {"-h", "--help"} & set(a.args):
        _print_tune_help(t)
        return 0
    # Both handlers set here: a launcher started with SIGINT ignored (a background job of a script or CI, which the
    # shell starts so) would otherwise ignore Ctrl-C / `kill -INT` and never stop; its children then start with
    # Python's default SIGINT handling too (exec resets a handled signal, not an ignored one).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_interrupt)
    if a.llvm and not a.servers:
        p.error("--llvm needs --servers N")
    devices = None if a.llvm else visible_gpus()[:a.servers]
    if devices == []:
        p.exit(2, f"{p.prog}: error: no GPU visible (CUDA_VISIBLE_DEVICES, nvidia-smi -L): use --llvm --servers N "
                  "for CPU servers\n")
    cluster = Cluster(port=a.port, key=a.key, host=a.host, devices=devices, servers=a.servers or 0,
                      min_servers=a.min_servers, log_dir=project_root() / "build" / "rpc-cluster")
    try:
        with cluster:
            n = len(cluster.devices)
            print(f"[rpc_cluster] tracker on port {a.port}, {n} server{'s' if n != 1 else ''} under key {a.key!r} "
                  f"(pids {' '.join(str(proc.pid) for proc in cluster.procs.values())}); logs in {cluster.log_dir}",
                  flush=True)
            if a.command == "tune":
                return _tune(cluster, a.args, a.llvm)
            print(f"[rpc_cluster] tune with: python -m tirbench.tuning ... --rpc {cluster.address}\n"
                  f"[rpc_cluster] another host joins with: python -m tirbench.tuning.rpc.server --tracker "
                  f"{socket.gethostname()}:{a.port} --key {a.key}\n[rpc_cluster] Ctrl-C stops them", flush=True)
            signal.pause()
    except ClusterError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The launcher (``tirbench.tuning.rpc.cluster``) on a CPU: a tracker and llvm RPC servers start, register and stop (also
on Ctrl-C / SIGTERM, leaving no process behind); a port in use is one line and exit status 2."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tirbench.tuning.rpc.cluster import Cluster, require_free_port, visible_gpus
from tirbench.tuning.rpc import tracker

ROOT = Path(__file__).resolve().parents[1]
#: One pytest-xdist worker runs every test that starts RPC servers (here and tests/test_tuning_rpc.py): a server takes
#: the first free port from 9090 on (``cluster.SERVER_PORT``), and two started at once on two workers could race for it.
pytestmark = pytest.mark.xdist_group("rpc")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_starts_registers_and_stops_every_process(tmp_path):
    port = free_port()
    with Cluster(port=port, key="t", devices=None, servers=2, host="127.0.0.1", log_dir=tmp_path) as cluster:
        info = tracker.summary("127.0.0.1", port)
        assert tracker.count_servers(info, "t") == 2 and tracker.check(cluster.address) == 2
        groups = [proc.pid for proc in cluster.procs.values()]
        assert len(groups) == 3 and all(map(group_alive, groups))
    assert not any(map(group_alive, groups))
    require_free_port("127.0.0.1", port)   # the tracker's port is free again


def test_busy_port_is_one_line_and_exit_status_2(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "tirbench.tuning.rpc.cluster", "--llvm", "--servers", "1", "--host",
                            "127.0.0.1", "--port", str(port), "tune", "gemm", "64", "64", "64", "--trials", "4"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and f"port {port} on 127.0.0.1 is in use" in err[0], r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_tracker_and_servers_on_a_signal(sig):
    """Started with SIGINT ignored, as a shell starts a background job of a script (CI): the launcher still stops on
    it (it used to ignore it and never exit when the suite itself ran so)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tirbench.tuning.rpc.cluster", "--llvm", "--servers", "1", "--host",
                             "127.0.0.1", "--port", str(port), "serve"], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    line = proc.stdout.readline()   # printed once the server is registered
    groups = [int(pid) for pid in line.split("(pids ")[1].split(")")[0].split()]
    assert tracker.count_servers(tracker.summary("127.0.0.1", port), "tirbench") == 1 and len(groups) == 2
    proc.send_signal(sig)
    try:
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:   # a failed test leaves nothing running: SIGTERM stops the launcher and its children
            proc.terminate()
            proc.wait(30)
    deadline = time.monotonic() + 10
    while any(map(group_alive, groups)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(group_alive, groups))
    with pytest.raises(tracker.RPCError, match=f"no RPC tracker answers at 127.0.0.1:{port}"):
        tracker.summary("127.0.0.1", port, timeout=1)


def test_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert visible_gpus() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


def test_tune_help_prints_the_help_without_a_gpu(monkeypatch, capsys):
    from tirbench.tuning.rpc.cluster import main

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")   # no GPU visible: the help needs none
    assert main(["tune", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m tirbench.tuning.rpc.cluster tune")
    assert "usage: python -m tirbench.tuning " in out and "--trials TRIALS" in out

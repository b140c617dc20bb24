"""The RPC tracker as the tuning CLI and the launcher see it: ``HOST:PORT:KEY`` addresses, the tracker's summary,
and the checks made before a tuning run measures through it (each failure one line, before any database is opened).

The summary is asked over TVM's own tracker protocol (``tvm.rpc.base``) on a socket with a timeout:
``tvm.rpc.connect_tracker`` retries a refused connection for 60 s, and a session requested for a key no server
has waits forever.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from tvm.rpc import base

from tirbench.core.errors import OneLineError

#: Seconds to wait for the tracker to answer.
TIMEOUT_S = 5.0


class RPCError(OneLineError):
    """A tracker that cannot be used: a bad address, no answer, no server for the key."""


@dataclass(frozen=True)
class RPCAddress:
    host: str
    port: int
    key: str

    def __str__(self) -> str:
        return f"{self.host}:{self.port}:{self.key}"


def parse_rpc(spec: str) -> RPCAddress:
    """``HOST:PORT:KEY`` (the key may not hold a colon); one-line RPCError otherwise."""
    parts = spec.split(":")
    if len(parts) != 3 or not all(parts) or not parts[1].isdigit() or not 0 < int(parts[1]) < 65536:
        raise RPCError(f"--rpc {spec!r}: expected HOST:PORT:KEY, e.g. 127.0.0.1:9190:h100")
    return RPCAddress(parts[0], int(parts[1]), parts[2])


def summary(host: str, port: int, timeout: float = TIMEOUT_S) -> dict:
    """The tracker's summary (``server_info``: one entry per registered server, ``queue_info``: per key);
    one-line RPCError if nothing answers at ``host:port`` as a tracker within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
                raise RPCError(f"{host}:{port} is not an RPC tracker")
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            return base.recvjson(sock)[1]
    except (OSError, struct.error, ValueError) as err:
        raise RPCError(f"no RPC tracker answers at {host}:{port} ({err.__class__.__name__}: {err})") from None


def count_servers(info: dict, key: str) -> int:
    """Servers registered under ``key`` in a tracker summary."""
    return sum(1 for item in info.get("server_info", []) if item.get("key") == f"server:{key}")


def check(address: RPCAddress) -> int:
    """The number of servers registered under the address's key; one-line RPCError if the tracker does not answer or
    has none (a run would wait for one forever)."""
    n = count_servers(summary(address.host, address.port), address.key)
    if n == 0:
        raise RPCError(f"the tracker at {address.host}:{address.port} has no server with key {address.key!r}: start "
                       f"one (python -m tirbench.tuning.rpc.server --tracker {address.host}:{address.port} --key "
                       f"{address.key}) or check the key")
    return n


def remote_gpu_name(address: RPCAddress, timeout: float = 60) -> str:
    """The name of CUDA device 0 of a server registered under the key (one session requested through the tracker);
    one-line RPCError if that session cannot use CUDA (e.g. a server forked after CUDA was initialised)."""
    from tvm import rpc

    try:
        session = rpc.connect_tracker(address.host, address.port).request(address.key, session_timeout=timeout)
        device = session.cuda(0)
        # ``exist`` goes through the CUDA runtime, which initialises the driver; ``device_name`` calls the driver
        # API directly and, asked first in a freshly forked session, fails with CUDA_ERROR_NOT_INITIALIZED.
        if not device.exist:
            raise RPCError("the session sees no CUDA device")
        return device.device_name
    except Exception as err:  # noqa: BLE001 - whatever the server says, as one line
        last = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        raise RPCError(f"a server with key {address.key!r} cannot use its GPU: {last}") from None

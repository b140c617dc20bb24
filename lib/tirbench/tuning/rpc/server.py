"""An RPC server for tuning: TVM's own (``tvm.rpc.Server``, as ``python -m tvm.exec.rpc_server`` starts it), with
what the tuned measurement needs and with CUDA kept out of the process that forks the sessions.

    python -m tirbench.tuning.rpc.server --tracker HOST:9190 --key h100          # one per GPU: CUDA_VISIBLE_DEVICES=i

Why TVM's server failed on a GPU host (cudaErrorInitializationError in every measurement): the server forks a
process per session from its listening process, and CUDA cannot be used in a child forked after the parent
initialised it. TVM's server never touches CUDA itself, but ``import tvm`` imports ``tvm_ffi``, which, where torch
is installed (our GPU hosts), runs ``torch.cuda.is_available()`` at import
(``tvm_ffi._optional_torch_c_dlpack.patch_torch_cuda_stream_protocol``); that calls ``cudaGetDeviceCount``, which
initialises the CUDA driver in the listening process. So before importing tvm this module sets
``TVM_FFI_DISABLE_TORCH_C_DLPACK=1`` (tvm_ffi skips that step; it only matters for torch tensors passed to TVM
functions, which a server never sees) and ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (torch answers ``is_available`` from
NVML, without initialising CUDA, should anything else ask). The sessions then fork from a process without CUDA,
each initialises its own, and a session starts in milliseconds. ``--no-fork`` would also avoid the error, but then
every session is a fresh interpreter that imports tvm (and torch) again, seconds per candidate on top of
MetaSchedule's 10 s default session timeout and its one-session-at-a-time default: that is why 31 candidates
produced no result within two minutes.

The listening process also registers ``tirbench.tuning.runners``'s L2 flush, which each forked session inherits, and has a
separate process build and export the flush kernel, which each session loads (``tirbench.tuning.runners.prepare_server``).
"""
from __future__ import annotations

import os

os.environ["TVM_FFI_DISABLE_TORCH_C_DLPACK"] = "1"  # before tvm is imported: see the module docstring
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"

import argparse  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tracker", required=True, help="HOST:PORT of the RPC tracker")
    p.add_argument("--key", required=True, help="the key the tuning run asks the tracker for")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on")
    p.add_argument("--port", type=int, default=9090, help="first port to try (the next free one up to --port-end)")
    p.add_argument("--port-end", type=int, default=9199)
    p.add_argument("--custom-addr", default=None, help="address the tracker gives clients (default: as it sees us)")
    a = p.parse_args(argv)
    host, _, port = a.tracker.rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--tracker {a.tracker!r}: expected HOST:PORT")

    from tvm import rpc

    from tirbench.tuning.runners import prepare_server

    server = rpc.Server(a.host, a.port, a.port_end, key=a.key, tracker_addr=(host, int(port)),
                        custom_addr=a.custom_addr, silent=True, server_init_callback=prepare_server)
    print(f"[rpc_server] key {a.key!r} on port {server.port}, registered with {a.tracker}", flush=True)
    server.proc.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

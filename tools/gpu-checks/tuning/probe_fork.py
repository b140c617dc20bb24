"""Why forked RPC sessions fail on the GPU host: import tvm, fork, allocate on CUDA in the child; in a subprocess with
the default environment and with the two variables tirbench.tuning.rpc.server sets."""
import os
import subprocess
import sys

CHILD = """
import os, sys, tvm
import torch  # noqa: F401  (already imported by tvm_ffi where installed)
print("   parent: torch imported, CUDA runtime loaded:", tvm.runtime.enabled("cuda"), flush=True)
pid = os.fork()
if pid == 0:
    try:
        a = tvm.runtime.empty((1024,), "float32", tvm.cuda(0))
        a.copyfrom(__import__("numpy").ones(1024, "float32"))
        print("   forked child: CUDA works", flush=True)
        os._exit(0)
    except Exception as e:
        print("   forked child: CUDA fails:", str(e).strip().splitlines()[-1][:160], flush=True)
        os._exit(1)
_, status = os.waitpid(pid, 0)
"""
for name, extra in [("default environment", {}),
                    ("TVM_FFI_DISABLE_TORCH_C_DLPACK=1 PYTORCH_NVML_BASED_CUDA_CHECK=1",
                     {"TVM_FFI_DISABLE_TORCH_C_DLPACK": "1", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"})]:
    print(f"-- {name}", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_FFI_DISABLE_TORCH_C_DLPACK",
                                                            "PYTORCH_NVML_BASED_CUDA_CHECK")}
    subprocess.run([sys.executable, "-c", CHILD], env={**env, **extra}, timeout=100)

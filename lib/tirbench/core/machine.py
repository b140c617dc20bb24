"""The machine we run on: CUDA GPU or not, device facts, and the CUDA target built from the GPU's description
(``core.gpu``)."""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass

import tvm
import tvm_ffi

from tirbench.core.gpu import (PEAKS, Peak, arch_for, current_gpu, has_cuda_gpu, parse_arch,  # noqa: F401 - re-exported
                               peak_for, peak_key)

#: The TVM tag each architecture builds with (``tvm/backend/cuda/target_tags.py``: 48 KiB static shared memory,
#: 1024 threads); an architecture without one gets ``target_dict``. sm_90a's tag is the H100's, right for the H200
#: too (the same chip; no H200 tag exists).
CUDA_TARGET_TAGS: dict[str, str] = {
    "sm_75": "nvidia/nvidia-t4", "sm_80": "nvidia/nvidia-a100", "sm_86": "nvidia/nvidia-a10",
    "sm_89": "nvidia/geforce-rtx-4090", "sm_90a": "nvidia/nvidia-h100", "sm_100a": "nvidia/nvidia-b100",
}


def target_dict(arch: str) -> dict[str, object]:
    """A CUDA target for an architecture without a TVM tag (sm_120a, sm_103a), with the tags' limits."""
    return {"kind": "cuda", "arch": arch, "max_shared_memory_per_block": 49152, "max_threads_per_block": 1024,
            "thread_warp_size": 32, "registers_per_block": 65536}


def cuda_target(arch: str | None = None) -> tvm.target.Target:
    """The CUDA target (with an llvm host) for ``arch``, by default ``current_gpu().arch``: the tag
    ``nvidia/nvidia-h100`` for sm_90a. On a GPU of a newer architecture, CUDA compiles to PTX (``ptx_if_older``)."""
    arch = arch or current_gpu().arch
    ptx_if_older(arch)
    return target_for(arch)


def target_for(arch: str) -> tvm.target.Target:
    """``arch``'s tag (``CUDA_TARGET_TAGS``) or ``target_dict``, with an llvm host."""
    tag = CUDA_TARGET_TAGS.get(arch)
    return tvm.target.Target(tag if tag else target_dict(arch), host="llvm")


def builds_ptx(arch: str) -> bool:
    """Whether this process's GPU is of a newer architecture than ``arch``, so that code for ``arch`` must be PTX:
    a cubin for an older architecture does not load there, its PTX does (the driver compiles it)."""
    return has_cuda_gpu() and parse_arch(arch)[0] < parse_arch(arch_for(current_gpu().compute_capability))[0]


def ptx_if_older(arch: str) -> None:
    """Where ``builds_ptx(arch)``, make TVM compile CUDA to PTX for ``arch`` in this process (``use_ptx``; build
    worker processes are told so by their caller: ``bench.harness.build_all``)."""
    if builds_ptx(arch):
        use_ptx(arch)


#: The architectures this process compiles CUDA to PTX for (``use_ptx``): older than its GPU's.
PTX_ARCHS: set[str] = set()


def compile_to_ptx(code: str, arch: str) -> bytearray:
    """``tvm_callback_cuda_compile`` once ``use_ptx`` ran: CUDA ``code`` for the current target's arch (else
    ``arch``'s: sm_80 -> compute_80) as PTX, through NVRTC when cuda-bindings is installed, else nvcc, where that arch
    is one of ``PTX_ARCHS``; for any other arch (the GPU's own, in a run that also builds for an older one: a notebook
    comparing the two on one GPU) TVM's own compile."""
    from tvm.support.nvcc import compile_cuda, tvm_callback_cuda_compile

    target = tvm.target.Target.current(allow_none=True)
    if target is None or target.kind.name != "cuda":
        target = target_for(arch)   # TVM calls this with the code only; its compilers read the current target
    with target:
        if str(target.arch) not in PTX_ARCHS:
            return tvm_callback_cuda_compile(code)
        compiler = "nvrtc" if importlib.util.find_spec("cuda") and importlib.util.find_spec("cuda.bindings") else "nvcc"
        return compile_cuda(code, target_format="ptx", arch="compute_" + str(target.arch).removeprefix("sm_"),
                            compiler=compiler)


@functools.cache
def use_ptx(arch: str) -> None:
    """Make TVM compile CUDA for ``arch`` to PTX in this process (``compile_to_ptx`` as
    ``tvm_callback_cuda_compile``, which TVM calls with the code only; ``arch`` where no CUDA target is current); once
    per arch. Code for any other arch still compiles as TVM compiles it."""
    PTX_ARCHS.add(arch)
    tvm_ffi.register_global_func("tvm_callback_cuda_compile", functools.partial(compile_to_ptx, arch=arch),
                                 override=True)


def cpu_target() -> tvm.target.Target:
    """The llvm target used for numerical checks on machines without a GPU."""
    return tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1})


def require_cuda_gpu() -> tvm.runtime.Device:
    """Device 0, or a one-line RuntimeError on a machine without a CUDA GPU."""
    if not has_cuda_gpu():
        raise RuntimeError("no CUDA GPU found: this step needs an NVIDIA GPU (run `nvidia-smi` to check)")
    return tvm.cuda(0)


@dataclass(frozen=True)
class DeviceInfo:
    """What every result row records about where it was measured."""

    gpu: str
    compute_capability: str
    driver: str
    tvm_version: str

    @classmethod
    def detect(cls) -> "DeviceInfo":
        dev = require_cuda_gpu()
        return cls(gpu=dev.device_name, compute_capability=dev.compute_version,
                   driver=_driver_version(), tvm_version=tvm.__version__)

    def describe(self) -> str:
        return (f"{self.gpu} (sm_{self.compute_capability.replace('.', '')}), driver {self.driver}, "
                f"TVM {self.tvm_version}")


def _driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or 'unknown'."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "unknown"
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"

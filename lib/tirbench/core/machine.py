"""The machine we run on: CUDA GPU or not, device facts, targets and the peak table."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

import tvm

#: TVM tag used for every CUDA build: sm_90a, 48 KiB static shared memory, 1024 threads. The H200 has
#: the same chip as the H100 (no H200 tag exists), so the same target serves both.
CUDA_TARGET_TAG = "nvidia/nvidia-h100"


def cuda_target() -> tvm.target.Target:
    """The sm_90a CUDA target (with an llvm host)."""
    return tvm.target.Target(CUDA_TARGET_TAG, host="llvm")


def cpu_target() -> tvm.target.Target:
    """The llvm target used for numerical checks on machines without a GPU."""
    return tvm.target.Target({"kind": "llvm", "num-cores": os.cpu_count() or 1})


@functools.cache
def has_cuda_gpu() -> bool:
    """True when TVM's CUDA runtime is loaded and sees device 0 (``TIRBENCH_FORCE_CPU=1`` says no)."""
    if os.environ.get("TIRBENCH_FORCE_CPU") == "1":
        return False
    try:
        return bool(tvm.runtime.enabled("cuda") and tvm.cuda(0).exist)
    except Exception:  # no driver, no libcuda: same answer
        return False


def require_cuda_gpu() -> tvm.runtime.Device:
    """Device 0, or a one-line RuntimeError on a machine without a CUDA GPU."""
    if not has_cuda_gpu():
        raise RuntimeError("no CUDA GPU found: this step needs an NVIDIA GPU (run `nvidia-smi` to check)")
    return tvm.cuda(0)


@dataclass(frozen=True)
class Peak:
    """Datasheet peaks (dense) of one GPU: the roofs on every plot."""

    fp32_tflops: float
    fp16_tensor_tflops: float
    int8_tensor_tops: float
    hbm_tbps: float
    memory_gb: float  # device memory (HBM), in 10^9 bytes


#: NVIDIA datasheet numbers for the SXM parts (H200 = H100 compute with more, faster HBM3e).
PEAKS: dict[str, Peak] = {
    "H100": Peak(fp32_tflops=67.0, fp16_tensor_tflops=989.0, int8_tensor_tops=1979.0, hbm_tbps=3.35, memory_gb=80.0),
    "H200": Peak(fp32_tflops=67.0, fp16_tensor_tflops=989.0, int8_tensor_tops=1979.0, hbm_tbps=4.8, memory_gb=141.0),
}


def peak_for(gpu_name: str) -> Peak | None:
    """The peak table entry whose key appears in ``gpu_name`` ("NVIDIA H200" -> H200), else None."""
    for key, peak in PEAKS.items():
        if key in gpu_name.upper():
            return peak
    return None


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

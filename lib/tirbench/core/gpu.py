"""One description of the GPU the suite builds for (``GpuSpec``): its architecture and the PTX features that come
with it, SMs, shared memory, registers, L2 and peaks; read from the device, else from ``TIRBENCH_ARCH`` (e.g.
``sm_80``), else an H100's (what the suite builds for on a machine without a GPU).

Every Hopper number of the suite outside the Hopper-only kernel families lives here: the cost models read
``current_gpu()`` instead.
"""
from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, replace

import tvm

from tirbench.core.errors import OneLineError

#: Environment variable naming the architecture to build for (``sm_75`` ... ``sm_120a``): without a GPU, the
#: architecture whose reference GPU (``REFERENCE_GPU``) the suite plans for; on a GPU, an older architecture than
#: the device's, whose code the driver then compiles from PTX.
ARCH_ENV = "TIRBENCH_ARCH"


@dataclass(frozen=True)
class Peak:
    """Datasheet peaks (dense: without 2:4 sparsity) of one GPU: the roofs on every plot."""

    fp32_tflops: float
    fp16_tensor_tflops: float  # fp16 inputs, fp32 accumulation (what the suite's fp16 kernels do)
    int8_tensor_tops: float
    hbm_tbps: float            # device memory bandwidth (HBM or GDDR), in 10^12 bytes/s
    memory_gb: float           # device memory, in 10^9 bytes


#: Dense datasheet peaks by the name a GPU reports (matched as a word: "NVIDIA A100-SXM4-80GB" is the A100, not the
#: A10), each from the NVIDIA document ``PEAK_SOURCES`` names. Longer names first.
PEAKS: dict[str, Peak] = {
    "H100": Peak(fp32_tflops=67.0, fp16_tensor_tflops=989.0, int8_tensor_tops=1979.0, hbm_tbps=3.35, memory_gb=80.0),
    "H200": Peak(fp32_tflops=67.0, fp16_tensor_tflops=989.0, int8_tensor_tops=1979.0, hbm_tbps=4.8, memory_gb=141.0),
    "B200": Peak(fp32_tflops=80.0, fp16_tensor_tflops=2250.0, int8_tensor_tops=4500.0, hbm_tbps=8.0, memory_gb=180.0),
    "A100": Peak(fp32_tflops=19.5, fp16_tensor_tflops=312.0, int8_tensor_tops=624.0, hbm_tbps=2.039, memory_gb=80.0),
    "A10": Peak(fp32_tflops=31.2, fp16_tensor_tflops=125.0, int8_tensor_tops=250.0, hbm_tbps=0.6, memory_gb=24.0),
    "L40S": Peak(fp32_tflops=91.6, fp16_tensor_tflops=362.05, int8_tensor_tops=733.0, hbm_tbps=0.864, memory_gb=48.0),
    "L4": Peak(fp32_tflops=30.3, fp16_tensor_tflops=121.0, int8_tensor_tops=242.5, hbm_tbps=0.3, memory_gb=24.0),
    "T4": Peak(fp32_tflops=8.1, fp16_tensor_tflops=65.0, int8_tensor_tops=130.0, hbm_tbps=0.32, memory_gb=16.0),
    "RTX 3090": Peak(fp32_tflops=35.6, fp16_tensor_tflops=71.0, int8_tensor_tops=284.0, hbm_tbps=0.936, memory_gb=24.0),
    "RTX 4090": Peak(fp32_tflops=82.6, fp16_tensor_tflops=165.2, int8_tensor_tops=660.6, hbm_tbps=1.008,
                     memory_gb=24.0),
    "RTX 5090": Peak(fp32_tflops=104.8, fp16_tensor_tflops=209.5, int8_tensor_tops=838.0, hbm_tbps=1.792,
                     memory_gb=32.0),
}

#: Where each peak comes from (the dense column; sparse figures are twice these). The GeForce cards' fp16 figure is
#: their rate with fp32 accumulation, half the one with fp16 accumulation.
PEAK_SOURCES: dict[str, str] = {
    "H100": "datasheet: NVIDIA H100 Tensor Core GPU datasheet, SXM5",
    "H200": "datasheet: NVIDIA H200 Tensor Core GPU datasheet, SXM",
    "B200": "datasheet: NVIDIA HGX B200 datasheet, per GPU",
    "A100": "datasheet: NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM4",
    "A10": "datasheet: NVIDIA A10 Tensor Core GPU datasheet",
    "L40S": "datasheet: NVIDIA L40S GPU datasheet",
    "L4": "datasheet: NVIDIA L4 Tensor Core GPU datasheet",
    "T4": "datasheet: NVIDIA T4 Tensor Core GPU datasheet",
    "RTX 3090": "datasheet: NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090",
    "RTX 4090": "datasheet: NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090",
    "RTX 5090": "datasheet: NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090",
}


def peak_key(gpu_name: str) -> str | None:
    """The peak table's name for ``gpu_name`` ("NVIDIA A100-SXM4-80GB" -> "A100"), matched as a whole word."""
    upper = gpu_name.upper()
    return next((k for k in PEAKS if re.search(rf"(?<![A-Z0-9]){re.escape(k)}(?![A-Z0-9])", upper)), None)


def peak_for(gpu_name: str) -> Peak | None:
    """The peak table entry of ``gpu_name`` ("NVIDIA H200" -> H200), else None."""
    key = peak_key(gpu_name)
    return PEAKS[key] if key else None


#: PTX features and the first compute capability that has them (major * 10 + minor), each checked with nvcc 13.
FEATURES_SINCE: dict[str, int] = {
    "wmma": 75, "ldmatrix": 75, "mma_m16n8k8": 75,
    "mma_m16n8k16": 80, "mma_s8_m16n8k32": 80, "cp_async": 80, "mbarrier": 80,
    "fp8_mma": 89, "tma": 90,
}
#: Features of one target suffix only: setmaxnreg on the "a"/"f" targets, wgmma on sm_90a, tcgen05 on datacenter
#: Blackwell.
FEATURES_ON: dict[str, tuple[str, ...]] = {
    "wgmma": ("sm_90a",),
    "tcgen05": ("sm_100a", "sm_103a"),
}
#: What each feature needs, in words (the one line a family is refused with).
NEEDS: dict[str, str] = {**{f: f"sm_{cc}+" for f, cc in FEATURES_SINCE.items()},
                         "setmaxnreg": "an sm_90a/sm_100a/sm_120a target",
                         **{f: "/".join(archs) for f, archs in FEATURES_ON.items()}}

_ARCH = re.compile(r"sm_(\d+)([af]?)")


def parse_arch(arch: str, name: str = "arch") -> tuple[int, str]:
    """``"sm_90a"`` -> (90, "a"); a one-line ArchError naming ``name`` for anything else."""
    m = _ARCH.fullmatch(arch) if isinstance(arch, str) else None
    if m is None:
        raise ArchError(f"{name}={arch!r}: expected an architecture such as 'sm_80' or 'sm_90a'")
    return int(m.group(1)), m.group(2)


def arch_for(compute_capability: str) -> str:
    """The target of a compute capability: "8.6" -> "sm_86", "9.0" -> "sm_90a" (the "a" from 9.0 up, which wgmma,
    setmaxnreg and tcgen05 need)."""
    major, minor = (int(x) for x in compute_capability.split("."))
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def features(arch: str) -> tuple[str, ...]:
    """The PTX features code built for ``arch`` may use."""
    cc, suffix = parse_arch(arch)
    found = [f for f, since in FEATURES_SINCE.items() if cc >= since]
    found += ["setmaxnreg"] * bool(suffix and cc >= 90)
    return tuple(found + [f for f, archs in FEATURES_ON.items() if arch in archs])


class ArchError(OneLineError):
    """An architecture the suite cannot build for, or a family asked for a feature its architecture lacks."""


def require_feature(feature: str, arch: str | None = None, *, who: str) -> None:
    """ArchError unless ``arch`` (default: ``current_gpu().arch``) has ``feature``: one line such as
    "v8_wgmma: needs wgmma (sm_90a); this build is sm_80"."""
    if feature not in NEEDS:
        raise ArchError(f"{who}: unknown feature {feature!r}; expected one of {', '.join(NEEDS)}")
    arch = arch or current_gpu().arch
    if feature not in features(arch):
        raise ArchError(f"{who}: needs {feature} ({NEEDS[feature]}); this build is {arch}")


@dataclass(frozen=True)
class GpuSpec:
    """The GPU the suite builds for: ``arch`` is what kernels are compiled for (the device's, or an older one from
    ``TIRBENCH_ARCH``), the rest are the device's facts."""

    name: str
    compute_capability: str        # the device's, "9.0"
    arch: str                      # the build's, "sm_90a"
    sm_count: int
    shared_memory_per_block: int   # bytes one block may opt in to (dynamic shared memory)
    registers_per_sm: int          # 32-bit registers
    l2_bytes: int
    peak: Peak
    peak_source: str               # "datasheet: <document>" or "derived: SMs x clock x ops per SM"

    @property
    def features(self) -> tuple[str, ...]:
        return features(self.arch)

    @property
    def ptx(self) -> bool:
        """Whether the build is for an older architecture than the device's (the driver compiles its PTX)."""
        return parse_arch(self.arch)[0] < parse_arch(arch_for(self.compute_capability))[0]


#: Shared memory a block may opt in to, by compute capability (CUDA C++ Programming Guide, "Technical
#: Specifications per Compute Capability"); TVM reports the 48 KB a block gets without opting in.
SHARED_OPT_IN: dict[int, int] = {75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
                                 90: 227 * 1024, 100: 227 * 1024, 103: 227 * 1024, 120: 99 * 1024}
#: 32-bit registers per SM: 64 K on every architecture since Turing.
REGISTERS_PER_SM = 65536
#: Dense operations per SM per clock (fp32 FMA = 2, fp16 tensor with fp32 accumulation, int8 tensor) from the
#: architecture whitepapers: the derived peak of a GPU the table does not know.
OPS_PER_SM_CLOCK: dict[int, tuple[int, int, int]] = {
    75: (128, 1024, 2048), 80: (128, 2048, 4096), 86: (256, 1024, 2048), 87: (256, 2048, 4096),
    89: (256, 1024, 2048), 90: (256, 4096, 8192), 100: (256, 8192, 16384), 103: (256, 8192, 16384),
    120: (256, 1024, 2048),
}


#: GPUs of each architecture (its compute capability) that the suite names: the README's "Which GPUs" table.
EXAMPLE_GPUS: dict[str, tuple[str, ...]] = {
    "7.5": ("T4", "RTX 20xx"), "8.0": ("A100",), "8.6": ("A10", "RTX 3090"), "8.9": ("L4", "L40S", "RTX 4090"),
    "9.0": ("H100", "H200"), "10.0": ("B200",), "12.0": ("RTX 5090",),
}


def _nearest(table: dict[int, object], cc: int) -> object:
    """``table``'s entry of the newest architecture not newer than ``cc`` (the oldest one for an older cc)."""
    return table[max((k for k in table if k <= cc), default=min(table))]


def derived_peak(cc: int, sm_count: int, clock_ghz: float, memory_gb: float) -> Peak:
    """Peaks from SMs x clock x ops per SM (``OPS_PER_SM_CLOCK``); the memory bandwidth stays unknown (NaN)."""
    fp32, fp16, int8 = (ops * sm_count * clock_ghz / 1e3 for ops in _nearest(OPS_PER_SM_CLOCK, cc))
    return Peak(fp32_tflops=fp32, fp16_tensor_tflops=fp16, int8_tensor_tops=int8, hbm_tbps=math.nan,
                memory_gb=memory_gb)


def _table_spec(name: str, cc: str, sms: int, l2_mb: int) -> GpuSpec:
    key = peak_key(name) or name
    return GpuSpec(name=name, compute_capability=cc, arch=arch_for(cc), sm_count=sms,
                   shared_memory_per_block=SHARED_OPT_IN[int(cc.replace(".", ""))], registers_per_sm=REGISTERS_PER_SM,
                   l2_bytes=l2_mb * 1024 * 1024, peak=PEAKS[key], peak_source=PEAK_SOURCES[key])


#: The GPU the suite plans for without a device, per architecture (SM counts and L2 from NVIDIA's datasheets and
#: architecture whitepapers).
REFERENCE_GPU: dict[str, GpuSpec] = {spec.arch: spec for spec in (
    _table_spec("Tesla T4", "7.5", 40, 4),
    _table_spec("NVIDIA A100-SXM4-80GB", "8.0", 108, 40),
    _table_spec("NVIDIA A10", "8.6", 72, 6),
    _table_spec("NVIDIA L4", "8.9", 58, 48),
    _table_spec("NVIDIA H100 80GB HBM3", "9.0", 132, 50),
    _table_spec("NVIDIA B200", "10.0", 148, 126),
    _table_spec("NVIDIA GeForce RTX 5090", "12.0", 170, 96),
)}


def _device_spec() -> GpuSpec:
    """Device 0's description, read through TVM's device attributes."""
    dev = tvm.cuda(0)
    cc, name = dev.compute_version, dev.device_name
    sms, cc_int = int(dev.multi_processor_count), int(cc.replace(".", ""))
    key = peak_key(name)
    if key:
        peak, source = PEAKS[key], PEAK_SOURCES[key]
    else:
        peak = derived_peak(cc_int, sms, dev.max_clock_rate / 1e6, dev.total_global_memory / 1e9)
        source = "derived: SMs x clock x ops per SM (no memory roof)"
    return GpuSpec(name=name, compute_capability=cc, arch=arch_for(cc), sm_count=sms,
                   shared_memory_per_block=max(int(dev.max_shared_memory_per_block),
                                               int(_nearest(SHARED_OPT_IN, cc_int))),
                   registers_per_sm=REGISTERS_PER_SM, l2_bytes=int(dev.l2_cache_size_bytes), peak=peak,
                   peak_source=source)


@functools.cache
def has_cuda_gpu() -> bool:
    """True when TVM's CUDA runtime is loaded and sees device 0 (``TIRBENCH_FORCE_CPU=1`` says no)."""
    if os.environ.get("TIRBENCH_FORCE_CPU") == "1":
        return False
    try:
        return bool(tvm.runtime.enabled("cuda") and tvm.cuda(0).exist)
    except Exception:  # no driver, no libcuda: same answer
        return False


@functools.cache
def _device_or_none() -> GpuSpec | None:
    return _device_spec() if has_cuda_gpu() else None


def current_gpu() -> GpuSpec:
    """The GPU the suite builds for: device 0 (built for ``TIRBENCH_ARCH`` when that names an older
    architecture), else ``REFERENCE_GPU[TIRBENCH_ARCH]``, else an H100's description."""
    arch = os.environ.get(ARCH_ENV) or None
    device = _device_or_none()
    if arch is None:
        return device or REFERENCE_GPU["sm_90a"]
    if arch not in REFERENCE_GPU:
        parse_arch(arch, ARCH_ENV)
        raise ArchError(f"{ARCH_ENV}={arch!r}: expected one of {', '.join(map(repr, REFERENCE_GPU))}")
    if device is None:
        return REFERENCE_GPU[arch]
    if parse_arch(arch)[0] > parse_arch(device.arch)[0]:
        raise ArchError(f"{ARCH_ENV}={arch!r}: newer than this GPU ({device.name}, {device.arch})")
    return replace(device, arch=arch)

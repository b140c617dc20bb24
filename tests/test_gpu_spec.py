"""The GPU description (issue 41): PTX features per architecture, the description without a GPU (``TIRBENCH_ARCH``)
and from a device, the CUDA target per architecture (sm_90a's exactly as before), the PTX build for an older
architecture than the device's, one-line refusals, and no Hopper number outside the description and the Hopper-only
families."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import tvm
import tvm_ffi

from tirbench.bench.params import ParameterError, require_target
from tirbench.core import gpu, machine
from tirbench.core.cuda_source import nvcc_report
from tirbench.core.gpu import (ARCH_ENV, REFERENCE_GPU, ArchError, arch_for, current_gpu, features, peak_key,
                               require_feature)

ROOT = Path(__file__).resolve().parents[1]
AMPERE = ("wmma", "ldmatrix", "mma_m16n8k8", "mma_m16n8k16", "mma_s8_m16n8k32", "cp_async", "mbarrier")


@pytest.fixture
def no_device(monkeypatch):
    """No GPU and no ``TIRBENCH_ARCH`` unless a test sets it."""
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setattr(gpu, "_device_or_none", lambda: None)


@pytest.mark.parametrize("arch, expected", [
    ("sm_75", ("wmma", "ldmatrix", "mma_m16n8k8")),
    ("sm_80", AMPERE),
    ("sm_86", AMPERE),
    ("sm_89", (*AMPERE, "fp8_mma")),
    ("sm_90a", (*AMPERE, "fp8_mma", "tma", "setmaxnreg", "wgmma")),
    ("sm_100a", (*AMPERE, "fp8_mma", "tma", "setmaxnreg", "tcgen05")),
    ("sm_103a", (*AMPERE, "fp8_mma", "tma", "setmaxnreg", "tcgen05")),
    ("sm_120a", (*AMPERE, "fp8_mma", "tma", "setmaxnreg")),
    ("sm_120", (*AMPERE, "fp8_mma", "tma")),
])
def test_features_per_arch(arch, expected):
    assert features(arch) == expected


@pytest.mark.parametrize("cc, arch", [("7.5", "sm_75"), ("8.6", "sm_86"), ("9.0", "sm_90a"), ("10.3", "sm_103a"),
                                      ("12.0", "sm_120a")])
def test_arch_for_adds_the_a_from_9_0(cc, arch):
    assert arch_for(cc) == arch


def test_without_a_gpu_the_description_is_an_h100s(no_device):
    spec = current_gpu()
    assert (spec.arch, spec.sm_count, spec.shared_memory_per_block) == ("sm_90a", 132, 227 * 1024)
    assert spec.peak.fp16_tensor_tflops == 989.0 and spec.peak_source.startswith("datasheet: ")
    assert not spec.ptx


@pytest.mark.parametrize("arch, name, sms, shared", [
    ("sm_75", "Tesla T4", 40, 64 * 1024), ("sm_80", "NVIDIA A100-SXM4-80GB", 108, 163 * 1024),
    ("sm_89", "NVIDIA L4", 58, 99 * 1024), ("sm_120a", "NVIDIA GeForce RTX 5090", 170, 99 * 1024),
])
def test_without_a_gpu_tirbench_arch_picks_its_reference_gpu(no_device, monkeypatch, arch, name, sms, shared):
    monkeypatch.setenv(ARCH_ENV, arch)
    spec = current_gpu()
    assert (spec.arch, spec.name, spec.sm_count, spec.shared_memory_per_block) == (arch, name, sms, shared)
    assert spec.peak is gpu.PEAKS[peak_key(name)]


def test_every_peak_names_its_datasheet():
    assert gpu.PEAKS.keys() == gpu.PEAK_SOURCES.keys()
    assert all(s.startswith("datasheet: NVIDIA ") for s in gpu.PEAK_SOURCES.values())
    assert {"T4", "A10", "A100", "L4", "L40S", "RTX 3090", "RTX 4090", "RTX 5090", "H100", "H200", "B200"} <= set(
        gpu.PEAKS)


@pytest.mark.parametrize("name, key", [("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A10", "A10"),
                                       ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"), ("Tesla T4", "T4"),
                                       ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA H200", "H200"),
                                       ("NVIDIA A10G", None)])
def test_peak_key_matches_whole_names(name, key):
    assert peak_key(name) == key


def fake_cuda(name: str, cc: str, sms: int) -> SimpleNamespace:
    return SimpleNamespace(compute_version=cc, device_name=name, multi_processor_count=sms,
                           max_shared_memory_per_block=48 * 1024, max_clock_rate=1_500_000,
                           total_global_memory=32 * 10**9, l2_cache_size_bytes=4 * 2**20)


def test_a_device_the_table_does_not_know_gets_a_derived_peak(monkeypatch):
    monkeypatch.setattr(gpu.tvm, "cuda", lambda index=0: fake_cuda("NVIDIA Jetson AGX Orin", "8.7", 16))
    spec = gpu._device_spec()
    assert (spec.arch, spec.sm_count, spec.shared_memory_per_block, spec.l2_bytes) == ("sm_87", 16, 163 * 1024,
                                                                                     4 * 2**20)
    assert spec.peak_source.startswith("derived: SMs x clock x ops per SM")
    assert spec.peak.fp32_tflops == pytest.approx(256 * 16 * 1.5 / 1e3)


def test_a_known_device_gets_its_datasheet_peak(monkeypatch):
    monkeypatch.setattr(gpu.tvm, "cuda", lambda index=0: fake_cuda("NVIDIA L40S", "8.9", 142))
    spec = gpu._device_spec()
    assert spec.peak is gpu.PEAKS["L40S"] and spec.peak_source == gpu.PEAK_SOURCES["L40S"]


@pytest.fixture
def h100_device(monkeypatch):
    """An H100 as the device (its reference description), no ``TIRBENCH_ARCH`` unless set; TVM's CUDA compile
    callback restored afterwards."""
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setattr(gpu, "_device_or_none", lambda: REFERENCE_GPU["sm_90a"])
    monkeypatch.setattr(machine, "has_cuda_gpu", lambda: True)
    machine.use_ptx.cache_clear()
    machine.PTX_ARCHS.clear()
    yield
    from tvm.support.nvcc import tvm_callback_cuda_compile
    tvm_ffi.register_global_func("tvm_callback_cuda_compile", tvm_callback_cuda_compile, override=True)
    machine.use_ptx.cache_clear()
    machine.PTX_ARCHS.clear()


def test_an_older_arch_on_a_device_keeps_its_facts_and_builds_ptx(h100_device, monkeypatch):
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    spec = current_gpu()
    assert (spec.arch, spec.sm_count, spec.ptx) == ("sm_80", 132, True)
    monkeypatch.setenv(ARCH_ENV, "sm_100a")
    with pytest.raises(ArchError, match=r"^TIRBENCH_ARCH='sm_100a': newer than this GPU \(.*H100.*, sm_90a\)$"):
        current_gpu()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_building_for_an_older_arch_installs_the_ptx_compile(h100_device, monkeypatch):
    code = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
    machine.cuda_target()
    require_target("nvidia/nvidia-h100")
    assert machine.use_ptx.cache_info().currsize == 0   # sm_90a on an H100: TVM's own cubin compile
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    target = machine.cuda_target()
    assert machine.use_ptx.cache_info().currsize == 1
    with target:
        ptx = bytes(tvm.get_global_func("tvm_callback_cuda_compile")(code)).decode()
    assert ".target sm_80" in ptx and ".entry k(" in ptx
    ptx = bytes(tvm.get_global_func("tvm_callback_cuda_compile")(code)).decode()   # no target current: the arch's
    assert ".target sm_80" in ptx
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvcc")   # TVM's own compile here (NVRTC needs cuda-bindings)
    with machine.target_for("sm_90a"):   # the GPU's own arch in the same process: TVM's compile, not PTX
        native = bytes(tvm.get_global_func("tvm_callback_cuda_compile")(code))
    assert b".target sm_" not in native and b"sm_90a" in native


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_notebook_target_tag_of_an_older_arch_compiles_ptx_too(h100_device):
    require_target("nvidia/nvidia-t4")
    assert machine.use_ptx.cache_info().currsize == 1
    code = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
    assert ".target sm_75" in bytes(tvm.get_global_func("tvm_callback_cuda_compile")(code)).decode()


def test_cuda_target_per_arch(no_device):
    assert machine.cuda_target().export() == tvm.target.Target("nvidia/nvidia-h100", host="llvm").export()
    for arch, tag in machine.CUDA_TARGET_TAGS.items():
        assert tvm.target.Target(tag).arch == arch
        assert machine.cuda_target(arch).export() == tvm.target.Target(tag, host="llvm").export()
    assert machine.cuda_target("sm_120a").arch == "sm_120a"


def test_notebook_target_auto_is_the_descriptions(no_device, monkeypatch):
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    assert require_target("auto").arch == "sm_75" and require_target("nvidia/nvidia-a100").arch == "sm_80"
    monkeypatch.setenv(ARCH_ENV, "sm_77")
    with pytest.raises(ParameterError, match=r"^target='auto': TIRBENCH_ARCH='sm_77': expected one of 'sm_75'"):
        require_target("auto")
    monkeypatch.setenv(ARCH_ENV, "ampere")
    with pytest.raises(ParameterError, match=r"^target='auto': TIRBENCH_ARCH='ampere': expected an architecture"):
        require_target("auto")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_report_compiles_for_the_descriptions_arch(no_device, monkeypatch):
    src = '#if __CUDA_ARCH__ != 750\n#error not sm_75\n#endif\nextern "C" __global__ void k(float* a) { a[0] = 1; }'
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    assert any("registers" in line for line in nvcc_report(src))
    monkeypatch.delenv(ARCH_ENV)
    with pytest.raises(RuntimeError, match="nvcc rejected"):
        nvcc_report(src)


@pytest.mark.parametrize("feature, arch, message", [
    ("wgmma", "sm_80", "v8_wgmma: needs wgmma (sm_90a); this build is sm_80"),
    ("wgmma", "sm_100a", "v8_wgmma: needs wgmma (sm_90a); this build is sm_100a"),
    ("tma", "sm_89", "v8_wgmma: needs tma (sm_90+); this build is sm_89"),
    ("cp_async", "sm_75", "v8_wgmma: needs cp_async (sm_80+); this build is sm_75"),
    ("tcgen05", "sm_120a", "v8_wgmma: needs tcgen05 (sm_100a/sm_103a); this build is sm_120a"),
    ("setmaxnreg", "sm_120", "v8_wgmma: needs setmaxnreg (an sm_90a/sm_100a/sm_120a target); this build is sm_120"),
    ("tensor_memory", "sm_90a", "v8_wgmma: unknown feature 'tensor_memory'; expected one of wmma, "),
])
def test_a_family_on_an_arch_without_its_feature_is_one_line(feature, arch, message):
    with pytest.raises(ArchError) as err:
        require_feature(feature, arch, who="v8_wgmma")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert err.value._render_traceback_() == [f"ArchError: {err.value}"]


def test_a_family_on_an_arch_with_its_feature_passes(no_device):
    require_feature("wgmma", who="v8_wgmma")   # the default build, sm_90a
    require_feature("mma_m16n8k8", "sm_75", who="v7")


def test_the_cost_models_read_the_description():
    """The rules' SM count and the tiles' shared-memory and register limits, imported under TIRBENCH_ARCH=sm_80
    without a GPU: an A100's."""
    code = ("import json; from tirbench.schedules.conv.rules import SMS; "
            "from tirbench.schedules.common.tiling import MAX_SHARED_BYTES, REGISTERS_PER_SM; "
            "print(json.dumps([SMS, MAX_SHARED_BYTES, REGISTERS_PER_SM]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", ARCH_ENV: "sm_80", "TIRBENCH_FORCE_CPU": "1"}).stdout
    assert json.loads(out.splitlines()[-1]) == [108, 163 * 1024, 65536]


#: Files that may name Hopper's numbers: the GPU description and the Hopper-only families (wgmma, TMA, warp
#: specialization, v9, the wgmma design space).
HOPPER_FILES = (
    "lib/tirbench/core/gpu.py", "lib/tirbench/core/machine.py",
    "lib/tirbench/schedules/gemm/tma_ws.py", "lib/tirbench/schedules/gemm/warp_specialized.py",
    "lib/tirbench/schedules/gemm/warpgroup.py", "lib/tirbench/schedules/conv/tma_ws.py",
    "lib/tirbench/schedules/intrinsics/wgmma.py", "lib/tirbench/schedules/spaces/",
)
#: Lines elsewhere that may: the Hopper-only families' recorded candidates (one persistent block per SM of an H100;
#: changing them would make recorded choices and tuning seeds stale), and 132s that are no SM count.
ALLOWED_LINES = (
    ("lib/tirbench/schedules/conv/records.py", '"persistent_ctas": 132'),
    ("lib/tirbench/schedules/gemm/records.py", '"persistent_ctas": 132'),
    ("notebooks/03_gemm.ipynb", "each row padded: 132 floats, not 128"),
    ("notebooks/07_conv2d_int8.ipynb", "show = np.r_[0:3, 125:132, 250:256]"),
)
HOPPER_WORDS = re.compile(r"(?<![\w.])132(?![\w.])|sm_90a|nvidia-h100")


def code_lines(path: Path) -> list[str]:
    """A Python file's lines, or a notebook's code cells' lines (its prose describes the recorded H100 runs)."""
    if path.suffix == ".py":
        return path.read_text().splitlines()
    cells = json.loads(path.read_text())["cells"]
    return [line for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()]


def test_no_hopper_number_outside_the_description_and_the_hopper_families():
    found = []
    for path in sorted([*(ROOT / "lib").rglob("*.py"), *(ROOT / "notebooks").glob("*.ipynb")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(HOPPER_FILES):
            continue
        found += [f"{rel}: {line.strip()}" for line in code_lines(path) if HOPPER_WORDS.search(line)
                  and not any(rel == f and allowed in line for f, allowed in ALLOWED_LINES)]
    assert not found, "\n".join(found)


def test_the_rpc_server_process_never_asks_for_the_gpu():
    """The tuning RPC server forks its sessions, which cannot use CUDA if the listening process initialised it:
    importing what it runs must not read the device (``current_gpu``, ``has_cuda_gpu``)."""
    code = ("import tirbench.tuning.rpc.server, tirbench.tuning.runners; from tirbench.core import gpu; "
            "print(gpu._device_or_none.cache_info().currsize, gpu.has_cuda_gpu.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["0", "0"]

"""Every GEMM and convolution family a Blackwell architecture offers (issue 41: ``record.for_arch`` from the family's
``needs``; the README's "Which GPUs" table) builds for it: under ``TIRBENCH_ARCH`` it schedules a small workload,
TVM builds it for the architecture's CUDA target, its CUDA uses exactly the features it declares, and nvcc compiles
every kernel of it to a cubin for the architecture without spilling (``nvcc_report``). The wgmma families (sm_90a
only) are refused there in one line each."""
from __future__ import annotations

import functools
import re

import pytest
from tvm import s_tir

from test_record_needs import SIGNS
from tirbench.core import gpu
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import ARCH_ENV, REFERENCE_GPU, arch_for, parse_arch
from tirbench.core.machine import cuda_target
from tirbench.report.readme import all_families
from tirbench.schedules.common.record import KernelRecord, for_arch
from tirbench.workloads import conv2d, conv2d_int8, gemm
from tirbench.workloads.base import Workload
from tirbench.workloads.winograd import conv2d_winograd

#: The Blackwell architectures the suite plans for (``REFERENCE_GPU``): a B200's and an RTX 5090's.
BLACKWELL = ("sm_100a", "sm_120a")
FAMILIES = {r.name: r for r in all_families()}
#: The families whose CUDA uses wgmma, which only sm_90a has.
HOPPER_ONLY = ("v8_wgmma", "v9_tma_ws", "splitk_wgmma", "nhwc_wgmma", "nhwc_tma_ws", "nhwc_1x1_tma", "int8_wgmma",
               "int8_tma_ws")
LAYER = (1, 128, 7, 7, 128, 3, 3, 1, 1)


@functools.cache
def small_workloads() -> tuple[Workload, ...]:
    """One small workload of each kind the families take (a split-K GEMM tile takes every row: 64)."""
    return (gemm(64, 128, 128), gemm(64, 128, 128, dtype="float16"), conv2d(*LAYER), conv2d(*LAYER, layout="NHWC"),
            conv2d(*LAYER, layout="NHWC", dtype="float16"), conv2d(128, *LAYER[1:], layout="HWCN"),
            conv2d(1, 64, 7, 7, 64, groups=64), conv2d(1, 64, 7, 7, 64, groups=64, layout="NHWC"),
            conv2d(1, 64, 7, 7, 128, groups=8), conv2d(1, 64, 7, 7, 128, groups=8, layout="NHWC", dtype="float16"),
            conv2d_int8(*LAYER, relu=True, residual=False), conv2d_int8(1, 64, 7, 7, 64, groups=64),
            conv2d_int8(1, 64, 7, 7, 64, groups=16), conv2d_int8(1, 64, 7, 7, 64, groups=16, filter_layout="KRS32"),
            conv2d_winograd(1, 128, 7, 7, 128))


@pytest.fixture
def no_device(monkeypatch):
    """No GPU: the build's description is ``REFERENCE_GPU[TIRBENCH_ARCH]``."""
    monkeypatch.setattr(gpu, "_device_or_none", lambda: None)


def test_the_blackwell_architectures_are_the_reference_gpus_from_10_0():
    assert BLACKWELL == tuple(arch for arch in REFERENCE_GPU if parse_arch(arch)[0] >= 100)
    assert set(HOPPER_ONLY) == {name for name, r in FAMILIES.items() if "wgmma" in r.needs}


@pytest.mark.parametrize("arch", BLACKWELL)
def test_blackwell_offers_every_family_but_the_wgmma_ones_and_says_why_in_one_line(arch):
    taken, skipped = for_arch(FAMILIES.values(), arch)
    assert taken and [r.name for r in taken] == [name for name in FAMILIES if name not in HOPPER_ONLY]
    assert skipped == [f"{name}: needs wgmma (sm_90a); this build is {arch}" for name in HOPPER_ONLY]


def test_plain_sm_120_offers_what_sm_120a_does():
    """What the suite builds for a 12.0 GPU is sm_120a (``arch_for``); the plain target lacks only setmaxnreg, which
    only families that also need wgmma use."""
    assert arch_for("12.0") == "sm_120a" and "sm_120" not in REFERENCE_GPU
    assert all("wgmma" in r.needs for r in FAMILIES.values() if "setmaxnreg" in r.needs)
    assert for_arch(FAMILIES.values(), "sm_120")[0] == for_arch(FAMILIES.values(), "sm_120a")[0]


def scheduled(record: KernelRecord) -> s_tir.Schedule:
    """``record`` with its defaults on the first of ``small_workloads`` it takes."""
    reasons = []
    for wl in small_workloads():
        if record.accepts(wl) is None:
            try:
                return record.apply(wl)
            except ValueError as err:
                reasons.append(str(err))
    pytest.fail(f"{record.name}: no small workload fits its defaults: {'; '.join(reasons) or 'none it takes'}")


@pytest.mark.parametrize("arch, name", [(arch, r.name) for arch in BLACKWELL
                                        for r in for_arch(FAMILIES.values(), arch)[0]])
def test_a_family_blackwell_offers_builds_for_it_and_compiles_with_nvcc(no_device, monkeypatch, arch, name):
    monkeypatch.setenv(ARCH_ENV, arch)
    record = FAMILIES[name]
    src = device_source(scheduled(record), cuda_target(arch), record.pass_config)
    assert {f for f, sign in SIGNS.items() if re.search(sign, src)} == set(record.needs)
    report = nvcc_report(src, arch)
    kernels = re.findall(r'extern "C" __global__[^;{]*\{', src)
    assert kernels and sum("registers" in line for line in report) == len(kernels)   # ptxas compiled each
    assert all("0 bytes spill stores, 0 bytes spill loads" in line for line in report if "spill" in line), report

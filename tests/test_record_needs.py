"""Every kernel family says which PTX features its CUDA uses (``KernelRecord.needs``, issue 41): the features found in
its generated CUDA (built for the default target, sm_90a) are exactly those it declares, and each is one the GPU
description knows."""
from __future__ import annotations

import re

import pytest
import tvm

from tirbench.core.cuda_source import device_source
from tirbench.core.gpu import NEEDS
from tirbench.core.machine import cuda_target
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv import records as conv_records
from tirbench.schedules.gemm import records as gemm_records
from tirbench.workloads import conv2d, conv2d_int8, gemm
from tirbench.workloads.winograd import conv2d_winograd

#: How each feature shows in TVM's CUDA.
SIGNS = {"wmma": r"wmma::", "ldmatrix": r"ldmatrix", "mma_m16n8k8": r"m16n8k8\b", "mma_m16n8k16": r"m16n8k16",
         "mma_s8_m16n8k32": r"m16n8k32", "cp_async": r"cp\.async\.c[ag]", "mbarrier": r"mbarrier",
         "tma": r"cp\.async\.bulk\.tensor", "setmaxnreg": r"setmaxnreg", "wgmma": r"wgmma", "tcgen05": r"tcgen05",
         "fp8_mma": r"\.e4m3|\.e5m2"}
BIG = (256, 256, 14, 14, 512, 3, 3, 1, 1)
RECORDS = {r.name: r for mod in (gemm_records, conv_records) for r in vars(mod).values() if isinstance(r, KernelRecord)}


def workload_for(record: KernelRecord):
    """A workload the family takes, in the form that uses all it needs (the int8 warp-specialized kernel loads its
    filter by TMA when it is stored KRSC; the int8 grouped tensor-core kernel reads it packed per lane group; the 1x1
    form takes 1x1 layers only; a split-K tile takes every row)."""
    if record.name == "int8_tma_ws":
        return conv2d_int8(*BIG, relu=True, residual=True, filter_layout="KRSC")
    if record.name == "int8_grouped_mma":
        return conv2d_int8(32, 256, 28, 28, 256, groups=32, filter_layout="KRS32")
    if record.name == "nhwc_1x1_tma":
        return conv2d(256, 256, 14, 14, 512, 1, 1, 1, 0, layout="NHWC", dtype="float16")
    if record.name.startswith("splitk"):
        return gemm(64, 4096, 4096, dtype=record.accepts(gemm(64, 64, 64)) and "float16" or "float32")
    options = [gemm(1024, 1024, 1024), gemm(1024, 1024, 1024, dtype="float16"), conv2d(*BIG, layout="HWCN"),
               conv2d(1, 512, 7, 7, 512),
               conv2d(*BIG), conv2d(*BIG, layout="NHWC"), conv2d(*BIG, layout="NHWC", dtype="float16"),
               conv2d_int8(*BIG, relu=True, residual=True), conv2d_winograd(32, 256, 14, 14, 256),
               conv2d(32, 256, 56, 56, 256, groups=256), conv2d(32, 256, 56, 56, 256, groups=256, layout="NHWC"),
               conv2d(32, 256, 28, 28, 256, groups=32),
               conv2d(32, 256, 28, 28, 256, groups=32, layout="NHWC", dtype="float16"),
               conv2d_int8(32, 256, 56, 56, 256, groups=256), conv2d_int8(32, 256, 28, 28, 256, groups=32)]
    return next(wl for wl in options if record.accepts(wl) is None)


def test_signs_cover_every_feature():
    assert SIGNS.keys() == NEEDS.keys()


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_family_needs_exactly_the_features_its_cuda_uses(name):
    record = RECORDS[name]
    sch = record.apply(workload_for(record))
    with tvm.transform.PassContext(config=record.pass_config):
        src = device_source(sch, cuda_target("sm_90a"))
    assert set(record.needs) <= NEEDS.keys()
    assert {f for f, sign in SIGNS.items() if re.search(sign, src)} == set(record.needs)

"""The generated CUDA of every LADDER / sweep / variant entry is byte-identical to the one recorded before the library
was restructured (``tests/data/cuda_hashes.json``: sha256 of the device source, or the one-line refusal)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import tvm

from tirbench.core.cuda_source import device_source
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv.records import HWCN_HOPPER, HWCN_SEED, INT8, NCHW_SPLITK, TENSOR_CORE
from tirbench.schedules.gemm.records import LADDER, V5_WARP_TILED, V8_WGMMA, padded
from tirbench.workloads import conv2d, conv2d_int8, gemm

RECORDED = json.loads((Path(__file__).parent / "data" / "cuda_hashes.json").read_text())
BIG = (256, 256, 14, 14, 512, 3, 3, 1, 1)


def key(record: KernelRecord, wl, overrides) -> str:
    params = record.params(overrides)
    ordered = {k: params[k] for k in sorted(params)}
    return f"{record.schedule.__name__}|{wl.name}:{wl.shape}:{wl.dtype}:{wl.layout}|{json.dumps(ordered, default=str)}"


def cases() -> list[tuple]:
    """(record, workload, overrides): each ladder rung at its defaults and its sweep, the padded sweeps, every
    convolution record at its defaults and its candidates, at the shapes recorded."""
    g1024 = {dt: gemm(1024, 1024, 1024, dtype=dt) for dt in ("float32", "float16")}
    out = [(r, g1024[dt], {}) for r in LADDER for dt in g1024 if r.accepts(g1024[dt]) is None]
    out += [(r, g1024[dt], c) for r in LADDER for dt in g1024 if r.accepts(g1024[dt]) is None for c in r.candidates]
    for record in (V5_WARP_TILED, V8_WGMMA):
        wl = gemm(2000, 3000, 1000, dtype=record.defaults.get("layout") and "float16" or "float32")
        out += [(record, wl, c) for c in padded(record, 2000).candidates]
    for record in (HWCN_SEED, HWCN_HOPPER):
        wl = conv2d(*BIG, layout="HWCN")
        out += [(record, wl, {})] + [(record, wl, c) for c in record.candidates]
    for shape in ((1, 512, 7, 7, 512, 3, 3, 1, 1), (1, 3, 224, 224, 64, 7, 7, 2, 3)):
        out += [(NCHW_SPLITK, conv2d(*shape), c) for c in NCHW_SPLITK.candidates]
    for shape in (BIG, (32, 512, 7, 7, 512, 3, 3, 1, 1)):
        wl = conv2d(*shape, layout="NHWC", dtype="float16")
        out += [(r, wl, {}) for r in TENSOR_CORE] + [(r, wl, c) for r in TENSOR_CORE for c in r.candidates]
        wl8 = conv2d_int8(*shape, relu=True, residual=True)
        out += [(r, wl8, c) for r in INT8 for c in r.candidates]
    return out


def generated(record: KernelRecord, wl, overrides) -> str:
    try:
        sch = record.apply(wl, overrides)
    except ValueError as err:
        return f"ValueError: {err}"
    with tvm.transform.PassContext(config=record.pass_config):
        src = device_source(sch, tvm.target.Target("nvidia/nvidia-h100", host="llvm"))
    return hashlib.sha256(src.encode()).hexdigest()


CASES = list({key(*case): case for case in cases()}.values())   # a default equal to a candidate counts once


def test_every_recorded_entry_is_still_listed() -> None:
    assert {key(*case) for case in CASES} == set(RECORDED)


@pytest.mark.parametrize("case", CASES, ids=[key(*case)[:90] for case in CASES])
def test_generated_cuda_unchanged(case) -> None:
    assert generated(*case) == RECORDED[key(*case)]

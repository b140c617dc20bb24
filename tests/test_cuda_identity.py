"""The generated CUDA of every LADDER / sweep / variant entry is byte-identical to the one recorded before the library
was restructured (``tests/data/cuda_hashes.json``: sha256 of the device source, or the one-line refusal)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import tvm
from tvm import s_tir

from tirbench.core.cuda_source import device_source
from tirbench.schedules.conv import direct as c32
from tirbench.schedules.conv import implicit_gemm as tc
from tirbench.schedules.conv import int8 as i8
from tirbench.schedules.gemm.simt import LADDER, PADDED_SWEEP, SWEEP, gemm_pass_config
from tirbench.workloads import conv2d, conv2d_int8, gemm

RECORDED = json.loads((Path(__file__).parent / "data" / "cuda_hashes.json").read_text())
BIG = (256, 256, 14, 14, 512, 3, 3, 1, 1)


def key(fn, wl, params) -> str:
    ordered = {k: params[k] for k in sorted(params)}
    return f"{fn.__name__}|{wl.name}:{wl.shape}:{wl.dtype}:{wl.layout}|{json.dumps(ordered, default=str)}"


def cases() -> list[tuple]:
    out = []
    for name, (fn, d, dt) in LADDER.items():
        out.append((fn, gemm(1024, 1024, 1024, dtype=dt), d, gemm_pass_config(name)))
    for sweep, size in ((SWEEP, (1024, 1024, 1024)), (PADDED_SWEEP, (2000, 3000, 1000))):
        for rung, cands in sweep.items():
            fn, d, dt = LADDER[rung]
            out += [(fn, gemm(*size, dtype=dt), {**d, **c}, gemm_pass_config(rung)) for c in cands]
    for name, (fn, d, layout) in c32.VARIANTS.items():
        out.append((fn, conv2d(*BIG, layout=layout), d, c32.conv2d_pass_config(name)))
        out += [(fn, conv2d(*BIG, layout=layout), {**d, **c}, c32.conv2d_pass_config(name))
                for c in c32.SWEEP.get(name, [])]
    for shape in ((1, 512, 7, 7, 512, 3, 3, 1, 1), (1, 3, 224, 224, 64, 7, 7, 2, 3)):
        out += [(c32.conv2d_nchw_splitk, conv2d(*shape), c, {}) for c in c32.SPLITK_SWEEP]
    for shape in (BIG, (32, 512, 7, 7, 512, 3, 3, 1, 1)):
        wl = conv2d(*shape, layout="NHWC", dtype="float16")
        out += [(fn, wl, d, tc.CONV_TC_CONFIG) for fn, d, _ in tc.VARIANTS.values()]
        out += [(tc.VARIANTS[name][0], wl, kw, tc.CONV_TC_CONFIG) for name, kw in tc.TC_SWEEP]
        wl8 = conv2d_int8(*shape, relu=True, residual=True)
        out += [(i8.INT8_VARIANTS[name], wl8, kw, tc.CONV_TC_CONFIG) for name, kw in i8.INT8_SWEEP]
    return out


def generated(fn, wl, params, config) -> str:
    try:
        sch = fn(s_tir.Schedule(wl.mod), **params)
    except ValueError as err:
        return f"ValueError: {err}"
    with tvm.transform.PassContext(config=config):
        src = device_source(sch, tvm.target.Target("nvidia/nvidia-h100", host="llvm"))
    return hashlib.sha256(src.encode()).hexdigest()


CASES = cases()


def test_every_recorded_entry_is_still_listed() -> None:
    assert sorted(key(fn, wl, p) for fn, wl, p, _ in CASES) == sorted(RECORDED)


@pytest.mark.parametrize("case", CASES, ids=[key(fn, wl, p)[:90] for fn, wl, p, _ in CASES])
def test_generated_cuda_unchanged(case) -> None:
    fn, wl, params, config = case
    assert generated(fn, wl, params, config) == RECORDED[key(fn, wl, params)]

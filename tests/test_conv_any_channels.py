"""Any input channels for the fp16 implicit-GEMM convolutions (the ResNet-50 stem's 3 channels, 96-channel layers):
where the k tile does not divide C, channel_block = C and GEMM_K = R * S * C is padded up to the k tile, the pad folded
into the im2col fill's predicate (no copy of X). Checked here without a GPU: both helpers build for sm_90a and nvcc
takes the CUDA; every access of X, W and Y is proven in bounds under the kernel's predicates; the stem's fills bound k
by R * S * C = 147 (without that bound the filter reads are no longer proven in bounds), and every read of X in its
CUDA is predicated; the default channel block follows C; channels in 8s fill in 16-byte copies in every k tile,
also where a k tile spans kernel taps (``implicit_gemm.split_taps``); the rewrite that allows it keeps every value
(on llvm)."""
from __future__ import annotations

import functools
import re
import shutil

import numpy as np
import pytest
import tvm
import tvm_ffi
from test_any_shape import BoundsProof, lowered, unproven_accesses
from tvm import s_tir, tirx
from tvm.script import tirx as T

from tirbench.core import lowering
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.schedules.conv.implicit_gemm import conv2d_nhwc_mma, default_channel_block, input_fill_block
from tirbench.schedules.conv.records import NHWC_MMA, NHWC_WGMMA, NHWC_WMMA
from tirbench.workloads import conv2d

#: (record, the parameters it runs at here, its k tile).
HELPERS = {"nhwc_wgmma": (NHWC_WGMMA, {"block_tile": (128, 128), "stages": 4}, 64),
           "nhwc_mma": (NHWC_MMA, {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3}, 32)}
STEM = (1, 3, 224, 224, 64, 7, 7, 2, 3)   # GEMM_K = 7 * 7 * 3 = 147
#: ConvNeXt's 4x4/4 stem: GEMM_K = 48 comes in 8s, its 3 channels do not (``implicit_gemm.element_copies``).
CONVNEXT_STEM = (32, 3, 224, 224, 96, 4, 4, 4, 0)
SHAPES = [STEM, (32, 3, 224, 224, 64, 7, 7, 2, 3), (32, 96, 28, 28, 128, 3, 3, 1, 1), (1, 64, 56, 56, 128, 1, 1, 2, 0),
          CONVNEXT_STEM]
BUFFERS = ("X", "W", "Y")
_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")


def fp16(shape: tuple[int, ...]):
    return conv2d(*shape, layout="NHWC", dtype="float16")


@functools.cache
def built(name: str, shape: tuple[int, ...]) -> tuple[s_tir.Schedule, str]:
    """The helper's schedule of the layer and its CUDA (built once per test session)."""
    record, params, _ = HELPERS[name]
    sch = record.apply(fp16(shape), params)
    with tvm.transform.PassContext(config=record.pass_config):
        return sch, device_source(sch)


def without_k_bound(mod: tvm.IRModule, bound: int) -> tirx.PrimFunc:
    """``mod``'s lowered kernel with every ``... < bound`` term taken out of its ``if_then_else`` predicates."""
    def drop(call):
        if not call.op.same_as(_IF_THEN_ELSE):
            return call
        terms, kept = [call.args[0]], []
        while terms:
            t = terms.pop()
            if isinstance(t, tirx.And):
                terms += [t.a, t.b]
            elif not (isinstance(t, tirx.LT) and isinstance(t.b, tirx.IntImm) and t.b.value == bound):
                kept.append(t)
        if not kept:
            return call.args[1]
        return tirx.if_then_else(functools.reduce(tirx.And, kept), call.args[1], call.args[2])
    return tvm_ffi.structural_map(tvm.IRModule({"main": lowered(mod)}), (tvm.ir.Call, drop))["main"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", HELPERS)
def test_any_channels_build_for_sm90a_and_stay_in_bounds(name, shape):
    sch, src = built(name, shape)
    assert 'extern "C" __global__' in src
    if shutil.which("nvcc"):
        assert any("registers" in line for line in nvcc_report(src))
    missed, checked = unproven_accesses(sch.mod, BUFFERS)
    assert checked >= 3 and not missed, missed[:3]


@pytest.mark.parametrize("name", HELPERS)
def test_stem_reads_x_only_under_the_k_bound(name):
    sch, src = built(name, STEM)
    tile_k = HELPERS[name][2]
    fill = sch.get(input_fill_block(sch))
    k = fill.iter_vars[1]
    assert int(k.dom.extent) == -(-147 // tile_k) * tile_k   # GEMM_K padded up to the k tile
    assert re.search(rf"T\.if_then_else\({k.var.name} < 147,", str(fill)), "the im2col fill does not bound k"
    loads = [i for i, line in enumerate(src.splitlines()) if "X_ptr[" in line]
    lines = src.splitlines()
    assert loads and all(lines[i - 1].strip().startswith("if (") for i in loads)   # element copies, each guarded
    assert all("_pred_" in copy for copy in re.findall(r"ptx_cp_async\w*\(buf_dyn_shmem_ptr, [^;]*?X_ptr", src))
    proof = BoundsProof(BUFFERS)
    proof.stmt(without_k_bound(sch.mod, 147).body)
    assert any(access.startswith("W[") for access in proof.unproven)   # the proof above rests on the k bound


@pytest.mark.parametrize("c, tile_k, explicit, block", [
    (3, 64, None, 3), (96, 64, None, 96), (96, 32, None, 32), (128, 64, None, 64), (96, 64, 32, 32)])
def test_default_channel_block_is_the_k_tile_where_it_divides_c_else_c(c, tile_k, explicit, block):
    sch = s_tir.Schedule(fp16((1, c, 8, 8, 64, 3, 3, 1, 1)).mod)
    assert default_channel_block(sch, tile_k, explicit) == block


def test_an_explicit_channel_block_must_divide_c_in_one_line():
    with pytest.raises(ValueError, match="channel_block .*=32 does not divide c \\(input channels\\)=3") as err:
        conv2d_nhwc_mma(s_tir.Schedule(fp16(STEM).mod), channel_block=32)
    assert "\n" not in str(err.value)


#: Inception-v3's 80-channel 3x3 (4.3x slower than cuDNN in k tiles of 64, 2026-11-28): 80 channels come in 16s, not
#: in 32s or 64s.
INCEPTION_80 = (32, 80, 73, 73, 192, 3, 3, 1, 0)


def x_copies(src: str) -> tuple[int, int]:
    """(16-byte cp.async copies from X, element loads of X) in a kernel's CUDA."""
    return (len(re.findall(r"ptx_cp_async\w*_16\w*\(buf_dyn_shmem_ptr, [^;]*?X_ptr", src)),
            len(re.findall(r"X_ptr\[", src)))


@pytest.mark.parametrize("record, params", [
    (NHWC_MMA, {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 16, "stages": 4}),   # one tap a k tile
    (NHWC_MMA, {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32, "stages": 4}),   # k tiles span taps
    (NHWC_WGMMA, {"block_tile": (128, 128), "stages": 4, "overlap": True}),                    # ... of 64
], ids=["mma_k16", "mma_k32", "wgmma_k64"])
def test_channels_in_8s_fill_in_16_byte_copies_in_any_k_tile(record, params):
    src = device_source(record.apply(fp16(INCEPTION_80), params), pass_config=record.pass_config)
    copies, loads = x_copies(src)
    assert copies > 0 and loads == 0


def test_wmma_fills_channels_in_8s_by_16_byte_loads():
    params = {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32}
    src = device_source(NHWC_WMMA.apply(fp16(INCEPTION_80), params))
    assert "*(uint4*)(X_ptr" in src and "X_ptr[" not in src


def test_split_lane_divisions_keeps_every_value_on_llvm():
    """An 8-wide vectorized copy whose indices divide by 240, 80 and 48 (Inception's taps), its block marked
    ``LANE_DIVISIONS``: built on llvm, it reads what numpy reads."""
    @T.prim_func(s_tir=True)
    def gather(a: T.Buffer((8192,), "float32"), b: T.Buffer((1024,), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in range(1024):
            with T.sblock("copy"):
                v = T.axis.spatial(1024, i)
                b[v] = a[v // 240 * 1000 + v % 80 * 3 + v // 48 % 5 * 17 + v % 240 // 16]
    sch = s_tir.Schedule(gather)
    _, lane = sch.split(sch.get_loops(sch.get_sblock("copy"))[0], [None, 8])
    sch.vectorize(lane)
    sch.annotate(sch.get_sblock("copy"), lowering.LANE_DIVISIONS, 8)
    assert not tvm_ffi.structural_equal(lowering.split_lane_divisions(sch.mod), sch.mod)   # rewritten
    ex = tvm.compile(sch.mod, target="llvm", tir_pipeline=lowering.PIPELINE)
    a = np.random.default_rng(0).standard_normal(8192).astype("float32")
    b = tvm.runtime.tensor(np.zeros(1024, "float32"))
    ex(tvm.runtime.tensor(a), b)
    v = np.arange(1024)
    np.testing.assert_array_equal(b.numpy(), a[v // 240 * 1000 + v % 80 * 3 + v // 48 % 5 * 17 + v % 240 // 16])

"""The warp-specialized convolutions (``schedules.conv.tma_ws``) on the CPU: the geometry they read from the
workload, the CUDA they generate for sm_90a (TMA filter tiles and mbarriers for fp16, the producer's zero-filling
cp.async gather signalling the same barriers, wgmma, no spills with nvcc; a 1x1 layer with both tiles by TMA, fp16
and int8),
one-line errors for what they cannot take, their place in the conv rules, and the int8 kernel's CUDA byte for byte
(``INT8_HASHES``). Numerical checks need the GPU (notebooks 06 to 08 verify every row they time)."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import tvm
import tvm.backend.cuda.tile_primitive.copy_async.tma as tma_plan
from tvm import s_tir

from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.schedules.conv.records import INT8_TMA_WS, NHWC_1X1_TMA, NHWC_TMA_WS
from tirbench.bench.choose import Choice, rule_forms, offered
from tirbench.schedules.conv.rules import int8_forms, rule_records
from tirbench.schedules.conv.tma_ws import conv2d_int8_tma_ws, conv2d_nhwc_tma_ws, conv_geometry, epilogue_ops
from tirbench.workloads.conv2d import conv2d
from tirbench.workloads.conv2d_int8 import conv2d_int8

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
#: sha256 of the int8 kernel's CUDA for each of its candidates at batch 256 (ReLU and residual), both filter layouts,
#: recorded before the kernel was composed from the pieces it shares with v9 (``tests/test_cuda_identity.py`` holds
#: the fp16 ones).
INT8_HASHES = json.loads((Path(__file__).parent / "data" / "int8_tma_ws_cuda_hashes.json").read_text())


def _fp16(*shape: int):
    return conv2d(*shape, layout="NHWC", dtype="float16")


@pytest.mark.parametrize("shape, stride, pad", [((2, 64, 9, 11, 64, 3, 3, 2, 1), 2, 1),
                                                ((7, 64, 35, 35, 64, 1, 1, 1, 0), 1, 0),
                                                ((1, 64, 8, 8, 64, 7, 7, 1, 3), 1, 3)])
def test_geometry_reads_stride_and_padding_from_the_module(shape, stride, pad):
    geom = conv_geometry(s_tir.Schedule(_fp16(*shape).mod), "NHWC")
    assert (geom["stride"], geom["pad"], geom["h"], geom["w"]) == (stride, pad, shape[2], shape[3])
    geom = conv_geometry(s_tir.Schedule(conv2d_int8(*shape).mod), "NCHW32")
    assert (geom["stride"], geom["pad"], geom["h"], geom["w"]) == (stride, pad, shape[2], shape[3])


@pytest.fixture(scope="module")
def fp16_source() -> str:
    """A batch-7 layer: GEMM_M = 7 * 28 * 28 = 5488, no multiple of the 128-row tile (the last rows are masked)."""
    return device_source(NHWC_TMA_WS.apply(_fp16(7, 128, 28, 28, 128), {"block_tile": (128, 128), "stages": 6}))


@pytest.fixture(scope="module")
def int8_source() -> str:
    return device_source(INT8_TMA_WS.apply(conv2d_int8(2, 128, 14, 14, 256, residual=True),
                                           {"block_tile": (128, 128), "stages": 4}))


def test_fp16_filter_tiles_come_by_tma_and_the_gather_signals_the_same_barriers(fp16_source):
    kernel = fp16_source[fp16_source.index('extern "C" __global__'):]
    assert kernel.splitlines()[0].count("const __grid_constant__ CUtensorMap") == 2   # the filter, and Y (stores)
    for construct in ("cp.async.bulk.tensor", "mbarrier.arrive.expect_tx", "mbarrier.try_wait",
                      "cp.async.mbarrier.arrive.noinc", "cp.async.ca.shared.global", "fence.proxy.async",
                      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "setmaxnreg.dec", "setmaxnreg.inc"):
        assert construct in fp16_source, construct
    assert re.search(r"mbarrier_init[^;]*\(uint\)129\)", fp16_source)   # 128 gather threads + the TMA thread


@pytest.fixture(scope="module")
def one_by_one_source() -> str:
    """A 1x1 layer at 7x7, batch 32: GEMM_M = 1568, no multiple of 128 (the TMA unit zero-fills the last rows)."""
    return device_source(NHWC_1X1_TMA.apply(_fp16(32, 2048, 7, 7, 512, 1, 1, 1, 0),
                                            {"block_tile": (128, 128), "stages": 6}))


def test_a_1x1_layer_loads_both_tiles_by_tma(one_by_one_source):
    kernel = one_by_one_source[one_by_one_source.index('extern "C" __global__'):]
    assert kernel.splitlines()[0].count("const __grid_constant__ CUtensorMap") == 3   # X as [N*H*W, C], W, and Y
    assert "cp.async.ca" not in one_by_one_source and "cp.async.mbarrier.arrive" not in one_by_one_source
    assert re.search(r"mbarrier_init[^;]*\(uint\)1\)", one_by_one_source)   # one TMA thread per stage
    assert "Y_ptr[" not in kernel   # Y goes out by TMA (rows past the last pixel are not written)


def test_the_tma_store_epilogue_stages_y_in_shared_memory_and_overlaps_the_next_tile(one_by_one_source):
    consumer = one_by_one_source.split("setmaxnreg.inc")[-1]
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in one_by_one_source
    assert "*(half2*)(((half*)_ptr)" in consumer   # two channels rounded to half per 4-byte store into shared
    assert "fence.proxy.async.shared::cta" in one_by_one_source and "bar.sync %0, 128;" in one_by_one_source
    assert "wait_group_read_1()" in consumer and "wait_group_0()" in consumer   # a buffer is reused once read
    plain = device_source(NHWC_1X1_TMA.apply(_fp16(32, 2048, 7, 7, 512, 1, 1, 1, 0), {"tma_store": False}))
    assert "*(half2*)(Y_ptr" in plain and "bulk_group" not in plain


@pytest.mark.parametrize("c, k", [(16, 96), (64, 80)])
def test_a_1x1_layer_of_channels_in_8s_takes_v9s_tma_edges(c, k):
    """MobileNetV2's 16 channels, Inception's 80 output channels: one k tile zero-filled past C by the TMA unit,
    the last block column stored only up to K, and nvcc takes it for sm_90a."""
    src = device_source(NHWC_1X1_TMA.apply(_fp16(32, c, 56, 56, k, 1, 1, 1, 0), {"block_tile": (128, 128),
                                                                                 "stages": 6}))
    kernel = src[src.index('extern "C" __global__'):]
    assert kernel.splitlines()[0].count("const __grid_constant__ CUtensorMap") == 3
    assert "Y_ptr[" not in kernel
    if shutil.which("nvcc"):
        assert "0 bytes spill stores" in " ".join(nvcc_report(src, "sm_90a"))


def test_a_1x1_layer_whose_channels_a_tensor_map_cannot_stride_is_refused_in_one_line():
    with pytest.raises(ValueError, match="k=12: TMA reads A .* must be a multiple of 8") as err:
        NHWC_1X1_TMA.apply(_fp16(2, 12, 14, 14, 64, 1, 1, 1, 0))
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def krsc_source() -> str:
    """The same layer with its filter stored (K, R, S, C): the rules' int8 form for the warp-specialized kernel."""
    return device_source(INT8_TMA_WS.apply(conv2d_int8(2, 128, 14, 14, 256, residual=True, filter_layout="KRSC"),
                                           {"block_tile": (128, 128), "stages": 4}))


def test_int8_with_a_krsc_filter_loads_its_k_tiles_by_tma(krsc_source):
    kernel = krsc_source[krsc_source.index('extern "C" __global__'):]
    assert kernel.splitlines()[0].count("const __grid_constant__ CUtensorMap") == 1   # W as [K, R*S*C]
    for construct in ("cp.async.bulk.tensor.2d", "mbarrier.arrive.expect_tx", "cp.async.mbarrier.arrive.noinc",
                      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8", "nearbyintf"):
        assert construct in krsc_source, construct
    assert re.search(r"mbarrier_init[^;]*\(uint\)129\)", krsc_source)   # 128 gathering threads + the TMA thread


def test_int8_gathers_both_operands_and_requantizes(int8_source):
    assert "cp.async.bulk.tensor" not in int8_source and "CUtensorMap" not in int8_source
    assert "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" in int8_source
    assert "cp.async.mbarrier.arrive.noinc" in int8_source
    assert re.search(r"mbarrier_init[^;]*\(uint\)128\)", int8_source)
    assert "Res_ptr" in int8_source and "nearbyintf" in int8_source   # the residual and round-half-even are fused


@pytest.fixture(scope="module")
def int8_one_by_one() -> tuple[str, list]:
    """An int8 1x1 layer of 64 channels at 14x14, batch 2, its filter stored (K, R, S, C), both tiles by TMA
    (``a_by_tma``): each image's 196 pixels in two 128-row tiles, the second zero-filled past the image, and one k
    tile zero-filled past C's two channel groups. Returns its CUDA and the tensor maps TVM planned, in order."""
    specs, encode = [], tma_plan._get_or_encode_descriptor
    tma_plan._get_or_encode_descriptor = lambda spec, sctx: specs.append(spec) or encode(spec, sctx)
    try:
        wl = conv2d_int8(2, 64, 14, 14, 256, 1, 1, 1, 0, relu=True, filter_layout="KRSC")
        source = device_source(INT8_TMA_WS.apply(wl, {"block_tile": (128, 256), "a_by_tma": True}))
    finally:
        tma_plan._get_or_encode_descriptor = encode
    return source, specs


def test_int8_1x1_loads_a_pixels_128_channels_as_one_4d_box(int8_one_by_one):
    """X (N, C/32, H, W, 32) viewed as (N, H*W, C/32, 32) with its own strides: the box (32 lanes, 4 groups, 128
    pixels, 1 image) lands as a [128, 128] tile, a pixel's 128 channels a row, 128-byte swizzled as wgmma reads it.
    Without the view's layout TVM would plan a map of X read as NHWC, and no error."""
    source, specs = int8_one_by_one
    x_map, w_map = ({"dims": [int(d) for d in spec.global_dims], "strides": [int(d) for d in spec.global_strides],
                     "box": [int(d) for d in spec.box_dims], "swizzle": int(spec.swizzle)} for spec in specs)
    assert x_map == {"dims": [32, 2, 196, 2], "strides": [196 * 32, 32, 2 * 196 * 32], "box": [32, 4, 128, 1],
                     "swizzle": 3}
    assert w_map == {"dims": [64, 256], "strides": [64], "box": [128, 256], "swizzle": 3}   # past C: zeros
    assert "cp.async.bulk.tensor.4d" in source and "cp.async.mbarrier.arrive" not in source
    assert re.search(r"mbarrier_init[^;]*\(uint\)1\)", source)   # one TMA thread per stage
    assert "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8" in source and "nearbyintf" in source


@pytest.mark.parametrize("make, message", [
    (lambda: conv2d_int8(2, 64, 14, 14, 256, 1, 1, 1, 0), "a_by_tma: .* filter_layout='KRSC'"),
    (lambda: conv2d_int8(2, 128, 14, 14, 256, 3, 3, 1, 1, filter_layout="KRSC"), "not 3x3 stride 1 pad 1"),
])
def test_int8_1x1_form_refuses_in_one_line(make, message):
    with pytest.raises(ValueError, match=message) as err:
        conv2d_int8_tma_ws(s_tir.Schedule(make().mod), a_by_tma=True)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def int8_one_by_one_source(int8_one_by_one) -> str:
    return int8_one_by_one[0]


@needs_nvcc
@pytest.mark.parametrize("which", ["fp16_source", "int8_source", "krsc_source", "one_by_one_source",
                                   "int8_one_by_one_source"])
def test_no_spills_with_nvcc(request, which):
    report = " ".join(nvcc_report(request.getfixturevalue(which)))
    assert re.search(r"0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads", report), report


@pytest.mark.parametrize("make, params, message", [
    (lambda: _fp16(2, 96, 14, 14, 128), {}, "=64 does not divide c \\(input channels\\)=96"),
    (lambda: _fp16(2, 64, 14, 14, 128), {"block_tile": (128, 256)}, "does not divide k \\(output channels\\)=128"),
    (lambda: _fp16(2, 64, 14, 14, 256), {"stages": 6}, "need 327776 bytes of shared memory .*store staging"),
    (lambda: _fp16(2, 64, 14, 14, 256), {"stages": 6, "tma_store": False}, "need 295008 bytes .*\\(TMA ring\\),"),
    (lambda: _fp16(2, 64, 14, 14, 256), {"lanes": 3}, "lanes=3"),
    (lambda: _fp16(2, 64, 14, 14, 256), {"block_tile": (128, 256), "consumers": 1}, "must be 64"),
    (lambda: conv2d(2, 64, 14, 14, 256, layout="NHWC"), {}, "takes float16 NHWC inputs"),
    (lambda: conv2d(2, 64, 14, 14, 256, layout="NCHW", dtype="float16"), {}, "needs an NHWC convolution"),
    (lambda: _fp16(2, 64, 14, 14, 256), {"a_by_tma": True}, "a_by_tma: .* not 3x3 stride 1 pad 1"),
    (lambda: _fp16(2, 64, 14, 14, 256, 1, 1, 2, 0), {"a_by_tma": True}, "not 1x1 stride 2 pad 0"),
])
def test_fp16_bad_input_is_one_line(make, params, message):
    with pytest.raises(ValueError, match=message) as err:
        conv2d_nhwc_tma_ws(s_tir.Schedule(make().mod), **params)
    assert "\n" not in str(err.value)


def test_int8_four_consumers_are_refused_not_hung():
    """A 256-row tile needs four consumer warpgroups, whose setmaxnreg budgets an SM cannot hold (it hung an H100)."""
    wl = conv2d_int8(4, 128, 14, 14, 256, filter_layout="KRSC")
    with pytest.raises(ValueError, match="consumers=4: .* more than an SM's 65536 .*: at most 2") as err:
        conv2d_int8_tma_ws(s_tir.Schedule(wl.mod), block_tile=(256, 128), consumers=4)
    assert "\n" not in str(err.value)


def test_int8_needs_four_channel_groups_per_k_tile():
    with pytest.raises(ValueError, match="the k tile \\(channels\\)=128 does not divide c \\(input channels\\)=64"):
        conv2d_int8_tma_ws(s_tir.Schedule(conv2d_int8(2, 64, 14, 14, 128).mod))


def test_rules_offer_the_warp_specialized_family_where_the_channels_allow():
    names = [record.name for record in rule_records(_fp16(32, 256, 14, 14, 256))]
    assert names == ["nhwc_wgmma", "nhwc_tma_ws", "nhwc_mma"]   # a 3x3 layer: no 1x1 family
    one = [record.name for record in rule_records(_fp16(32, 256, 56, 56, 64, 1, 1, 1, 0))]
    assert one == ["nhwc_wgmma", "nhwc_tma_ws", "nhwc_1x1_tma", "nhwc_mma"]
    assert "nhwc_1x1_tma" not in [record.name for record in rule_records(_fp16(32, 256, 56, 56, 512, 1, 1, 2, 0))]
    stem = [record.name for record in rule_records(_fp16(32, 3, 224, 224, 64, 7, 7, 2, 3))]
    assert "nhwc_tma_ws" not in stem and stem   # C = 3: no 64-channel k tile, the other families take it


def test_rules_give_an_int8_layer_whose_channels_fill_k_tiles_a_krsc_form_on_the_warp_specialized_kernel():
    wl = conv2d_int8(32, 256, 14, 14, 256, relu=True, residual=False)
    (form,) = int8_forms(wl)
    assert (form.shape, form.flops, form.out_shape) == (wl.shape, wl.flops, wl.out_shape)
    assert [r.name for r in rule_records(form)] == ["int8_tma_ws"] and int8_forms(form) == []
    assert [r.name for r in rule_records(wl)] == ["int8_wgmma", "int8_mma"]
    assert int8_forms(conv2d_int8(32, 64, 56, 56, 64)) == []   # 64 channels: no 128-channel k tile
    assert int8_forms(conv2d_int8(32, 256, 56, 56, 64, 1, 1, 1, 0)) == []   # 64 filters: no block tile takes them
    assert epilogue_ops(s_tir.Schedule(int8_forms(conv2d_int8(2, 128, 7, 7, 128, residual=True))[0].mod)) == \
        (True, True)   # the form keeps the layer's epilogue
    forms = rule_forms(wl)
    assert forms[-1][2] == {"filter_layout": "KRSC"} and forms[-1][1][0].name == "int8_tma_ws"
    cand = dict(forms[-1][1][0].candidates[0])
    found, record, params = offered(wl, Choice("int8_tma_ws", {"filter_layout": "KRSC", **cand}, 1.0))
    assert found is forms[-1][0] and params == cand and record.candidates == (cand,)
    assert offered(wl, Choice("int8_tma_ws", cand, 1.0)) is None   # the layer's own filter layout has no such family


@pytest.mark.parametrize("key", sorted(INT8_HASHES))
def test_int8_cuda_is_byte_identical_to_the_recorded(key):
    layout, params = key.split("|")
    wl = conv2d_int8(256, 256, 14, 14, 512, relu=True, residual=True, filter_layout=layout)
    sch = INT8_TMA_WS.apply(wl, {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(params).items()})
    with tvm.transform.PassContext(config=INT8_TMA_WS.pass_config):
        src = device_source(sch, tvm.target.Target("nvidia/nvidia-h100", host="llvm"))
    assert hashlib.sha256(src.encode()).hexdigest() == INT8_HASHES[key]

"""fp32 NCHW / NHWC convolution as an implicit GEMM on the v5 nest (``conv.simt_gemm``, records NCHW_GEMM and
NHWC_GEMM), at any shape. Checked here without a GPU: every candidate builds for sm_90a at ResNet-50-like layers no
tile divides (the 3-channel stem, batch 7, 35x35, 96 channels, 1x1 stride 2, 7x7 at batch 1, batch 32), and every
access of X, W and Y is proven in bounds under the kernel's predicates; nvcc takes the CUDA of every candidate and
ptxas spills nothing; the kernels' arithmetic (the schedule replayed without its thread bindings) matches numpy on
llvm, and so does the reindexed GEMM alone; X is read by 16-byte copies only where those are aligned and contiguous;
bad tiles and inputs are one-line errors."""
from __future__ import annotations

import functools
import re
import shutil

import pytest
import tvm
from test_any_shape import unproven_accesses, unproven_without_guards
from tvm import s_tir

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.machine import cpu_target
from tirbench.core.serial import without_threads
from tirbench.schedules.conv.records import NCHW_GEMM, NHWC_GEMM
from tirbench.schedules.conv.simt_gemm import (
    conv2d_nchw_implicit_gemm,
    conv2d_nhwc_implicit_gemm,
    nchw_as_gemm,
    nhwc_as_gemm,
)
from tirbench.workloads import conv2d

RECORDS = {"NCHW": NCHW_GEMM, "NHWC": NHWC_GEMM}
SHAPES = [(1, 3, 224, 224, 64, 7, 7, 2, 3), (7, 128, 28, 28, 128, 3, 3, 1, 1), (1, 64, 35, 35, 64, 3, 3, 1, 1),
          (2, 96, 28, 28, 128, 3, 3, 1, 1), (1, 256, 56, 56, 512, 1, 1, 2, 0), (1, 2048, 7, 7, 512, 1, 1, 1, 0),
          (32, 64, 56, 56, 64, 3, 3, 1, 1)]
CANDIDATES = [(layout, i) for layout in RECORDS for i in range(len(RECORDS[layout].candidates))]
BUFFERS = ("X", "W", "Y")


def shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@functools.cache
def built(layout: str, index: int, shape: tuple[int, ...]) -> tuple[s_tir.Schedule, str]:
    """Candidate ``index`` of the layout's record on the layer, and its CUDA (built once per test session)."""
    record = RECORDS[layout]
    sch = record.apply(conv2d(*shape, layout=layout), record.candidates[index])
    with tvm.transform.PassContext(config=record.pass_config):
        return sch, device_source(sch)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("layout, index", CANDIDATES)
def test_candidate_builds_for_sm90a_and_stays_in_bounds(layout, index, shape):
    sch, src = built(layout, index, shape)
    assert 'extern "C" __global__' in src and "cp_async" in src
    missed, checked = unproven_accesses(sch.mod, BUFFERS)
    assert checked >= 3 and not missed, missed[:3]


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
@pytest.mark.parametrize("layout, index", CANDIDATES)
def test_nvcc_takes_every_candidate_without_spills(layout, index):
    """At batch 7 (GEMM M or N = 5488, no tile divides it); 512-thread blocks get at most 128 registers a thread."""
    report = " | ".join(nvcc_report(built(layout, index, SHAPES[1])[1]))
    assert "Used" in report and "0 bytes spill stores, 0 bytes spill loads" in report, report


@pytest.mark.parametrize("layout", RECORDS)
def test_the_proof_rests_on_the_store_guard(layout):
    """With the ifs dropped, the stores of Y past the last pixel are no longer proven in bounds."""
    sch, _ = built(layout, 0, SHAPES[2])
    assert "pad_einsum" in str(sch.trace)
    assert unproven_without_guards(sch.mod, ("Y",))


#: Small layers of the same kinds, for llvm: the stem's 3 channels with a 7x7 window at stride 2, 7x7 pixels at batch
#: 3, a 1x1 stride-1 layer (NCHW's B is X, 16-byte fills), a 1x1 at stride 2, a 3x3 without padding.
SMALL = [(1, 3, 17, 17, 8, 7, 7, 2, 3), (3, 12, 7, 7, 20, 3, 3, 1, 1), (2, 16, 8, 8, 24, 1, 1, 1, 0),
         (1, 16, 9, 9, 12, 1, 1, 2, 0), (1, 6, 10, 10, 8, 3, 3, 1, 0)]
TILES = {"small": {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16},
         "default": {}}


@pytest.mark.parametrize("tiles", TILES)
@pytest.mark.parametrize("shape", SMALL, ids=shape_id)
@pytest.mark.parametrize("layout", RECORDS)
def test_scheduled_arithmetic_matches_numpy_on_llvm(layout, shape, tiles):
    """The kernel's TIR (im2col, padding predicates, tiles, pipeline) with its threads run one after another."""
    wl = conv2d(*shape, layout=layout)
    sch = RECORDS[layout].apply(wl, TILES[tiles])
    run_checked(wl, build(without_threads(wl.mod, sch), cpu_target()), tvm.cpu(0), what=f"{layout} {shape}")


@pytest.mark.parametrize("shape", SMALL, ids=shape_id)
@pytest.mark.parametrize("layout", RECORDS)
def test_gemm_reindexing_preserves_values(layout, shape):
    """The convolution reindexed into a GEMM block, nothing else scheduled: the same Y as the workload, and the
    block's loops are (m, n, k) with the extents of the module docstring."""
    wl = conv2d(*shape, layout=layout)
    n, c, _, _, k, r, s, _, _ = shape
    sch = s_tir.Schedule(wl.mod)
    if layout == "NCHW":
        nchw_as_gemm(sch)
    else:
        nhwc_as_gemm(sch, channel_block=c)
    pixels = wl.out_shape[2] * wl.out_shape[3] if layout == "NCHW" else wl.out_shape[1] * wl.out_shape[2]
    extents = [int(sch.get(loop).extent) for loop in sch.get_loops(sch.get_sblock("conv"))]
    assert extents == ([k, n * pixels, c * r * s] if layout == "NCHW" else [n * pixels, k, c * r * s])
    run_checked(wl, build(sch.mod, cpu_target()), tvm.cpu(0), what=f"reindexed {layout} {shape}")


def _x_vector_copies(src: str) -> int:
    """16-byte reads of X in CUDA source: cp.async copies and float4 loads."""
    return len(re.findall(r"_16_\d+_\d+\(buf_dyn_shmem_ptr, [^;]*?\bX_ptr", src)) + src.count("(float4*)(X_ptr")


@pytest.mark.parametrize("layout, shape, vectors", [
    ("NCHW", (1, 256, 56, 56, 64, 1, 1, 1, 0), True),    # B is X, 3136 pixels a plane: aligned rows
    ("NCHW", (1, 256, 56, 56, 512, 1, 1, 2, 0), False),  # stride 2: TVM would copy 16 contiguous bytes
    ("NCHW", (8, 64, 1, 1, 64, 1, 1, 1, 0), False),      # one pixel per image: B's columns are C floats apart
    ("NCHW", (1, 64, 58, 58, 64, 3, 3, 1, 0), False),    # no padding predicate, rows shifted by the window
    ("NCHW", (1, 2048, 7, 7, 512, 1, 1, 1, 0), False),   # 49 pixels: rows not 16-byte aligned
    ("NHWC", (1, 256, 56, 56, 64, 1, 1, 1, 0), False),   # A (im2col) goes through the transposed tile
])
def test_x_is_read_by_16_byte_copies_only_where_aligned_and_contiguous(layout, shape, vectors):
    sch = RECORDS[layout].apply(conv2d(*shape, layout=layout), {"block_tile": (64, 64), "warp_tile": (32, 32),
                                                                "thread_tile": (4, 8) if layout == "NCHW" else (8, 4)})
    with tvm.transform.PassContext(config=RECORDS[layout].pass_config):
        assert (_x_vector_copies(device_source(sch)) > 0) == vectors


def _layer(layout: str, dtype: str = "float32") -> s_tir.Schedule:
    return s_tir.Schedule(conv2d(2, 96, 28, 28, 128, layout=layout, dtype=dtype).mod)


@pytest.mark.parametrize("call, message", [
    (lambda: conv2d_nchw_implicit_gemm(_layer("NCHW"), block_tile=(256, 128), tile_k=64, stages=4),
     "shared memory"),
    (lambda: conv2d_nhwc_implicit_gemm(_layer("NHWC"), block_tile=(256, 128), tile_k=64, stages=4),
     "shared memory"),
    (lambda: conv2d_nchw_implicit_gemm(_layer("NCHW"), block_tile=(256, 512)), "threads per block"),
    (lambda: conv2d_nhwc_implicit_gemm(_layer("NHWC"), warp_tile=(64, 64)), "lanes"),
    (lambda: conv2d_nhwc_implicit_gemm(_layer("NHWC", "float16")), "takes float32 inputs"),
    (lambda: conv2d_nchw_implicit_gemm(_layer("NHWC")), "needs an NCHW convolution"),
    (lambda: conv2d_nhwc_implicit_gemm(_layer("NHWC"), channel_block=64), "channel_block"),
])
def test_bad_tiles_and_inputs_are_one_line_errors(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("layout", RECORDS)
def test_records_take_only_their_layout_in_float32(layout):
    record = RECORDS[layout]
    assert record.accepts(conv2d(1, 8, 8, 8, 8, layout=layout)) is None
    other = "NHWC" if layout == "NCHW" else "NCHW"
    assert "layout" in record.accepts(conv2d(1, 8, 8, 8, 8, layout=other))
    assert "float32" in record.accepts(conv2d(1, 8, 8, 8, 8, layout=layout, dtype="float16"))
    assert record.pass_config["tirx.use_async_copy"]


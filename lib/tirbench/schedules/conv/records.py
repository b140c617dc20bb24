"""Convolution kernels as data: one ``KernelRecord`` per family (helper, parameters, pass config, sweep candidates,
which workloads it takes). Why the families and their candidates are built as they are, and what they measure:
``docs/conv.md`` and ``docs/int8.md``.
"""
from __future__ import annotations

from typing import Any

from tirbench.schedules.common.record import Accepts, KernelRecord, takes, turing
from tirbench.schedules.common.tiling import SIMT_ASYNC_CONFIG
from tirbench.schedules.conv.depthwise import conv2d_depthwise
from tirbench.schedules.conv.direct import conv2d_hwcn_classic, conv2d_hwcn_implicit_gemm, conv2d_nchw_splitk
from tirbench.schedules.conv.grouped_mma import conv2d_nhwc_grouped_mma
from tirbench.schedules.conv.implicit_gemm import conv2d_nhwc_mma, conv2d_nhwc_wgmma, conv2d_nhwc_wmma
from tirbench.schedules.conv.int8 import (conv2d_int8_grouped_mma, conv2d_int8_mma, conv2d_int8_wgmma,
                                          conv2d_int8_wmma)
from tirbench.schedules.conv.tma_ws import conv2d_int8_tma_ws, conv2d_nhwc_tma_ws
from tirbench.schedules.conv.simt_gemm import (conv2d_nchw_implicit_gemm, conv2d_nhwc_grouped_gemm,
                                              conv2d_nhwc_implicit_gemm)
from tirbench.schedules.conv.winograd import conv2d_winograd_simt
from tirbench.schedules.gemm.tensorcore import MMA_ASYNC_CONFIG
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import geometry_of, plain_refusal


def takes_plain(block: str, dtypes: tuple[str, ...], layouts: tuple[str, ...]) -> Accepts:
    """``takes(block, dtypes, layouts)`` that also refuses, in one line, a conv2d layer with groups, dilation, or a
    stride or padding per axis (``plain_refusal``): every family here schedules one group, an undilated window, one
    stride and one padding."""
    accepts = takes(block, dtypes, layouts)

    def plain_accepts(wl: Workload) -> str | None:
        reason = accepts(wl)
        more = plain_refusal(wl) if reason is None and wl.name == "conv2d" else None
        return reason if more is None else f"takes groups 1, dilation 1, one stride and one padding, not {more}"

    return plain_accepts


def takes_groups(block: str, dtypes: tuple[str, ...], layouts: tuple[str, ...], groups: str) -> Accepts:
    """``takes(block, dtypes, layouts)`` for a family that takes any stride, padding and dilation (per axis, per
    side) and ``groups``: "one" (groups 1), "below C" (1 < groups < C, at least 2 output channels a group: the
    grouped implicit GEMM) or "C" (depthwise: groups = C, K = m * C); a one-line refusal otherwise."""
    accepts = takes(block, dtypes, layouts)
    wants = {"one": "groups 1", "below C": "1 < groups < C and 2 or more output channels a group",
             "C": "depthwise layers (groups = C)"}[groups]

    def groups_accepts(wl: Workload) -> str | None:
        reason = accepts(wl)
        if reason is not None or wl.name != "conv2d":
            return reason
        g, c, k = geometry_of(wl).groups, wl.sizes["c"], wl.sizes["k"]
        fits = {"one": g == 1, "below C": 1 < g < c and k // g >= 2, "C": g == c}[groups]
        return None if fits else f"takes {wants}, not groups {g} of {c} input and {k} output channels"

    return groups_accepts


#: The PassContext config of the wgmma / mma.sync kernels (cp.async; storage rewriting stays on for mma's "warp"
#: buffers).
CONV_TC_CONFIG = MMA_ASYNC_CONFIG

#: TVM's classic HWCN schedule (notebook 04 builds it one primitive at a time).
HWCN_SEED = KernelRecord("hwcn_seed", conv2d_hwcn_classic,
                         {"tile": 8, "threads": 8, "step": 8, "vthreads": 2, "vector": 4},
                         takes_plain("conv", ("float32", "float16"), ("HWCN",)), needs=())
#: The same layer as a GEMM per output pixel through the v5 nest; the sweep: the GEMM ladder's fastest fp32 tilings
#: at 4096^3 (block 128x256, tile_k 16), and smaller blocks for more blocks per SM.
HWCN_HOPPER = KernelRecord(
    "hwcn_hopper", conv2d_hwcn_implicit_gemm,
    {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
    takes_plain("conv", ("float32",), ("HWCN",)), SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (64, 32), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "tile_k": 16, "stages": 3, "columns_outer": True},
        {"block_tile": (256, 128), "warp_tile": (64, 32), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (32, 64), "tile_k": 16, "stages": 2, "prefetch": "k_step"},
        {"block_tile": (128, 128), "warp_tile": (32, 64), "tile_k": 32, "stages": 2},
    ), needs=("cp_async",))
#: Split-K for batch-1 NCHW layers: many slices for the deep 7x7 and 14x14 layers, fewer where channels are few
#: (the 56x56 layers, the 3-channel stem); a candidate that does not divide a layer is skipped.
NCHW_SPLITK = KernelRecord(
    "nchw_splitk", conv2d_nchw_splitk,
    {"split": 16, "block_k": 16, "thread_k": 2, "block_pixels": (7, 7), "step": 8},
    takes_plain("conv", ("float32",), ("NCHW",)), candidates=(
        {"split": 16, "block_k": 16, "thread_k": 2, "block_pixels": (7, 7), "step": 8},
        {"split": 32, "block_k": 32, "thread_k": 4, "block_pixels": (7, 7), "step": 8},
        {"split": 8, "block_k": 32, "thread_k": 4, "block_pixels": (7, 7), "step": 8},
        {"split": 8, "block_k": 16, "thread_k": 4, "block_pixels": (7, 14), "step": 8},
        {"split": 4, "block_k": 16, "thread_k": 4, "block_pixels": (14, 14), "step": 8},
        {"split": 4, "block_k": 16, "thread_k": 4, "block_pixels": (8, 8), "step": 8},
        {"split": 2, "block_k": 16, "thread_k": 4, "block_pixels": (8, 8), "step": 8},
        {"split": 1, "block_k": 16, "thread_k": 4, "block_pixels": (8, 8), "step": 3},
        {"split": 1, "block_k": 32, "thread_k": 8, "block_pixels": (8, 16), "step": 1},
    ), needs=())

#: fp32 implicit GEMM through the v5 nest, any shape (``conv.simt_gemm``), any stride, padding and dilation (per axis,
#: per side: the im2col gather takes them). The sweeps run from 4x4-thread tiles of 32 x 64 / 64 x 32 / 64 x 64 (more
#: blocks for batch-1 layers of 49 to 3136 pixels and many channels) to the GEMM ladder's 128 x 128 and 128 x 256
#: (batch 32 and up); NCHW's rows are output channels, its columns pixels, NHWC's the other way round.
SIMT_GEMM_DEFAULTS = {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16,
                      "stages": 3}
NCHW_GEMM = KernelRecord(
    "nchw_gemm", conv2d_nchw_implicit_gemm, SIMT_GEMM_DEFAULTS, takes_groups("conv", ("float32",), ("NCHW",), "one"),
    SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 32), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (4, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
    ), needs=("cp_async",))
NHWC_GEMM = KernelRecord(
    "nhwc_gemm", conv2d_nhwc_implicit_gemm, SIMT_GEMM_DEFAULTS, takes_groups("conv", ("float32",), ("NHWC",), "one"),
    SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 32), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (8, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 128), "warp_tile": (32, 64), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
    ), needs=("cp_async",))
#: Grouped NCHW layers (1 < groups < C, ResNeXt's 32 groups): the same helper, which makes the layer a batched GEMM, one
#: per group on blockIdx.y, rows the group's K / groups output channels (4 to 32 in ResNeXt-50), columns the pixels,
#: k the group's C / groups * R * S: 16- and 32-row tiles first, so a block wastes few rows on a small group.
NCHW_GROUPED_GEMM = KernelRecord(
    "nchw_grouped_gemm", conv2d_nchw_implicit_gemm, SIMT_GEMM_DEFAULTS,
    takes_groups("conv", ("float32",), ("NCHW",), "below C"), SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (16, 128), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 32, "stages": 3},
        {"block_tile": (32, 64), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (32, 128), "warp_tile": (16, 64), "thread_tile": (4, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (4, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
    ), needs=("cp_async",))
#: Grouped fp16 NHWC layers (1 < groups < C, ResNeXt-50's grouped 3x3s in fp16): a batched GEMM per group on
#: blockIdx.y through the v5 nest (``simt_gemm.conv2d_nhwc_grouped_gemm``), rows the pixels, columns the group's K /
#: groups output channels (4 to 32 in ResNeXt-50): 8-, 16- and 32-column tiles of 64 or 128 rows, fp32 accumulators
#: rounded to half on the store. 4x4 thread tiles (8x4 ones spill 8-12 bytes on Hopper); nvcc 13 builds all six for
#: Hopper without spills on ResNeXt-50's 7 grouped layers (for sm_80, 2 of the 42 kernels spill 4-8 bytes). Measured
#: once, slow: docs/conv.md.
NHWC_GROUPED_GEMM = KernelRecord(
    "nhwc_grouped_gemm", conv2d_nhwc_grouped_gemm,
    {"block_tile": (64, 16), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
    takes_groups("conv", ("float16",), ("NHWC",), "below C"), SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (64, 8), "warp_tile": (64, 8), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 8), "warp_tile": (64, 8), "thread_tile": (4, 4), "tile_k": 32, "stages": 3},
        {"block_tile": (64, 16), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 32, "stages": 3},
        {"block_tile": (128, 16), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 32, "stages": 2},
        {"block_tile": (64, 32), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 32), "warp_tile": (16, 32), "thread_tile": (4, 4), "tile_k": 32, "stages": 3},
    ), needs=("cp_async",))
#: ... and on mma.sync as the same batched implicit GEMM (``conv.grouped_mma``: the group on blockIdx.y): 32-channel
#: groups in 32-column tiles (k tiles of 32: 16-byte im2col fills), 16-channel groups in 16-column tiles with k tiles
#: of 16 (16-byte fills; one warp, the 16 x 16 filter tile's fetch allows no more), 4- and 8-channel groups in
#: 16-column tiles (zero filter columns past the group) with k tiles of 32 (element fills). Not yet timed.
NHWC_GROUPED_MMA = KernelRecord(
    "nhwc_grouped_mma", conv2d_nhwc_grouped_mma,
    {"block_tile": (128, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
    takes_groups("conv", ("float16",), ("NHWC",), "below C"), CONV_TC_CONFIG, candidates=(
        {"block_tile": (128, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (64, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (64, 32), "warp_tile": (64, 16), "tile_k": 16, "stages": 6},
        {"block_tile": (128, 16), "warp_tile": (128, 16), "tile_k": 16, "stages": 4},
        {"block_tile": (64, 16), "warp_tile": (64, 16), "tile_k": 16, "stages": 4},
        {"block_tile": (128, 16), "warp_tile": (64, 16), "tile_k": 32, "stages": 4},
    ), needs=("ldmatrix", "mma_m16n8k16", "cp_async"))
SIMT_GEMM: tuple[KernelRecord, ...] = (NCHW_GEMM, NHWC_GEMM)


SM75_HWCN = turing(HWCN_HOPPER)
SM75_NCHW_GEMM = turing(NCHW_GEMM)
SM75_NHWC_GEMM = turing(NHWC_GEMM)
SM75_NCHW_GROUPED_GEMM = turing(NCHW_GROUPED_GEMM)
SM75_NHWC_GROUPED_GEMM = turing(NHWC_GROUPED_GEMM)

#: Depthwise layers (groups = C, any channel multiplier m = K / C) as the memory-bound stencil they are
#: (``conv.depthwise``): the bound is the workload's bytes over HBM bandwidth, not FLOPs. A block copies its input
#: window (tile plus halo) to shared memory once and computes ``tile`` x ``channels`` outputs. NCHW: threads along
#: output columns, tiles for maps of 112/56 (8 x 32, 16 x 32, 14 x 28), 28/14 (14 x 14, two channels) and 7 (7 x 7,
#: eight channels); NHWC: threads along 32 or 64 channels, a few pixels a block, each tiling also with its window
#: copied 16 bytes at a time (``with_vector_copies``: fp16 at batch 32 reached 15-43% of the H200's HBM bandwidth
#: copying a value at a time, run 42cd11). No cp.async: any CUDA GPU.
DEPTHWISE_DEFAULTS = {"tile": (8, 32), "channels": 1, "thread_rows": 2}
DEPTHWISE_NCHW = KernelRecord(
    "depthwise_nchw", conv2d_depthwise, DEPTHWISE_DEFAULTS,
    takes_groups("conv", ("float32", "float16"), ("NCHW",), "C"), candidates=(
        {"tile": (8, 32), "channels": 1, "thread_rows": 2},
        {"tile": (16, 32), "channels": 1, "thread_rows": 4},
        {"tile": (14, 28), "channels": 1, "thread_rows": 2},
        {"tile": (14, 14), "channels": 2, "thread_rows": 2},
        {"tile": (8, 8), "channels": 4, "thread_rows": 2},
        {"tile": (7, 7), "channels": 8, "thread_rows": 1},
    ), needs=())


def with_vector_copies(*candidates: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Each channels-last stencil tiling twice, first with its window copied 16 bytes of channels at a time
    (``copy_bytes``), then a value at a time: the rules rank both alike, so a layer's best tilings get both."""
    return tuple(c for cand in candidates for c in ({**cand, "copy_bytes": 16}, cand))


DEPTHWISE_NHWC = KernelRecord(
    "depthwise_nhwc", conv2d_depthwise, {"tile": (4, 8), "channels": 32, "thread_rows": 4},
    takes_groups("conv", ("float32", "float16"), ("NHWC",), "C"), candidates=with_vector_copies(
        {"tile": (4, 8), "channels": 32, "thread_rows": 4},
        {"tile": (7, 7), "channels": 32, "thread_rows": 7},
        {"tile": (4, 4), "channels": 64, "thread_rows": 2},
        {"tile": (2, 8), "channels": 64, "thread_rows": 2},
        {"tile": (8, 8), "channels": 16, "thread_rows": 4},
    ) + (   # 8 channels a thread: fp16's store one 16-byte vector
        {"tile": (8, 8), "channels": 64, "thread_rows": 2, "copy_bytes": 16, "thread_channels": 8},
        {"tile": (4, 16), "channels": 32, "thread_rows": 2, "copy_bytes": 16, "thread_channels": 8},
        {"tile": (7, 7), "channels": 32, "thread_rows": 1, "copy_bytes": 16, "thread_channels": 8},
    ), needs=())
DEPTHWISE: tuple[KernelRecord, ...] = (DEPTHWISE_NCHW, DEPTHWISE_NHWC)
#: Grouped layers (1 < groups < C) on the same stencil, each output channel summing its group's C / groups input
#: channels from the window, one channel's taps in registers at a time: beside the batched implicit GEMMs (float32
#: NCHW, float16 NHWC), where a group's GEMM is small (ResNeXt: 4 to 32 channels a group, K = 36 to 288), and alone
#: where no GEMM family takes the layer (float32 NHWC, float16 NCHW). The depthwise tilings of each layout.
GROUPED_NCHW_STENCIL = KernelRecord(
    "grouped_nchw_stencil", conv2d_depthwise, DEPTHWISE_DEFAULTS,
    takes_groups("conv", ("float32", "float16"), ("NCHW",), "below C"), candidates=DEPTHWISE_NCHW.candidates,
    needs=())
GROUPED_NHWC_STENCIL = KernelRecord(
    "grouped_nhwc_stencil", conv2d_depthwise, DEPTHWISE_NHWC.defaults,
    takes_groups("conv", ("float32", "float16"), ("NHWC",), "below C"), candidates=DEPTHWISE_NHWC.candidates,
    needs=())

FP16_NHWC = takes_plain("conv", ("float16",), ("NHWC",))
#: The implicit GEMMs built on the workload's own blocks (``implicit_gemm.conv2d_as_gemm``: the window's stride,
#: dilation and padding stay in its reads and its pad block, which folds into the im2col fill) take any of them, per
#: axis and per side; the TMA kernels gather a plain window.
FP16_NHWC_ANY_WINDOW = takes_groups("conv", ("float16",), ("NHWC",), "one")
#: fp16 implicit GEMM on wgmma: wide tiles with the overlapped pipeline for the large GEMMs, 64-row tiles where
#: K = 64 or the GEMM is small.
NHWC_WGMMA = KernelRecord(
    "nhwc_wgmma", conv2d_nhwc_wgmma, {"block_tile": (128, 128), "stages": 4}, FP16_NHWC_ANY_WINDOW, CONV_TC_CONFIG,
    candidates=(
        {"block_tile": (128, 256), "stages": 4, "overlap": True},
        {"block_tile": (256, 128), "stages": 3, "overlap": True},
        {"block_tile": (128, 128), "stages": 4, "overlap": True},
        {"block_tile": (64, 256), "stages": 4, "overlap": True},
        {"block_tile": (128, 64), "stages": 4},
        {"block_tile": (64, 64), "stages": 4},
    ), needs=("cp_async", "wgmma"))
#: ... and on mma.sync, down to 32-row tiles for GEMM_M with no divisor that is a multiple of 64; 64 and 32 columns
#: for layers of few output channels (Inception's 32, MobileNetV2's 16: int8's tiles there), 256 x 64 with the im2col
#: fill through L1; and k tiles of 16, which divide the channels of layers whose channels come in 16s but not in 32s
#: or 64s (48, 80, 144), so that each k tile is one kernel tap.
NHWC_MMA = KernelRecord(
    "nhwc_mma", conv2d_nhwc_mma, {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3},
    FP16_NHWC_ANY_WINDOW, CONV_TC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 32, "stages": 3},
        {"block_tile": (32, 128), "warp_tile": (32, 32), "tile_k": 64, "stages": 3},
        {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (256, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 4, "l1_fill": True},
        {"block_tile": (128, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 16, "stages": 6},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 16, "stages": 6},
        {"block_tile": (256, 64), "warp_tile": (64, 64), "tile_k": 16, "stages": 6, "l1_fill": True},
    ), needs=("ldmatrix", "mma_m16n8k16", "cp_async"))
#: ... and warp-specialized (``conv.tma_ws``): filter tiles by TMA, im2col tiles gathered by a producer warpgroup, v9's
#: consumers, Y stored through shared memory by TMA (``tma_store``). Measured on an H100 (2026-11-25, notebook 06, against
#: cuDNN channels_last): 0.94x at batch 256 (170 us, persistent; 201 us with the register epilogue), 0.98x and 0.83x on
#: the 3x3 layers at 14x14 and 7x7 at batch 32.
NHWC_TMA_WS = KernelRecord(
    "nhwc_tma_ws", conv2d_nhwc_tma_ws,
    {"block_tile": (128, 256), "stages": 4, "consumers": 2, "persistent_ctas": 0, "lanes": 4, "l1_gather": True,
     "tma_store": True}, FP16_NHWC, candidates=(
        {"block_tile": (128, 256), "stages": 4, "persistent_ctas": 132},
        {"block_tile": (128, 256), "stages": 4},
        {"block_tile": (64, 256), "stages": 4, "consumers": 1},
        {"block_tile": (64, 128), "stages": 8, "consumers": 1},
        {"block_tile": (128, 128), "stages": 6},
        {"block_tile": (128, 64), "stages": 8},
    ), needs=("cp_async", "mbarrier", "tma", "setmaxnreg", "wgmma"))
#: The 1x1 layers of stride 1 without padding, whose input is their im2col matrix: ``conv2d_nhwc_tma_ws`` with A by
#: TMA too (``a_by_tma``), i.e. v9's GEMM (N*H*W x C) @ (C x K) with a half C, any C and K in 8s (the TMA unit handles
#: the edges); v9's tiles, persistent or not.
NHWC_1X1_TMA = KernelRecord(
    "nhwc_1x1_tma", conv2d_nhwc_tma_ws,
    {"block_tile": (128, 256), "stages": 4, "consumers": 2, "persistent_ctas": 132, "a_by_tma": True,
     "tma_store": True}, FP16_NHWC, candidates=(
        {"block_tile": (128, 256), "stages": 4},
        {"block_tile": (128, 256), "stages": 4, "persistent_ctas": 0},
        {"block_tile": (128, 128), "stages": 6},
        {"block_tile": (128, 64), "stages": 8},
        {"block_tile": (64, 128), "stages": 8, "consumers": 1, "persistent_ctas": 0},
    ), needs=("mbarrier", "tma", "setmaxnreg", "wgmma"))
TENSOR_CORE: tuple[KernelRecord, ...] = (NHWC_WGMMA, NHWC_MMA, NHWC_TMA_WS, NHWC_1X1_TMA)
#: ... and on wmma fragments with synchronous copies (v6's nest): Turing's (sm_75) family, offered only where none of
#: ``TENSOR_CORE`` builds (``record.first_offered``). Blocks of at most 128 x 64: the fp32 C tile in shared memory
#: (bm x (bn + 8) floats) stays within the 48 KB a block gets without opting in.
NHWC_WMMA = KernelRecord(
    "nhwc_wmma", conv2d_nhwc_wmma, {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32}, FP16_NHWC_ANY_WINDOW,
    candidates=(
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32},
        {"block_tile": (64, 128), "warp_tile": (32, 64), "tile_k": 32},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32},
        {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 32},
    ), needs=("wmma",))
TENSOR_CORE_TURING: tuple[KernelRecord, ...] = (NHWC_WMMA,)

INT8_NCHW32 = takes_plain("epilogue", ("int8",), ("NCHW32",))
#: ... and the int8 implicit GEMMs on the layer's own blocks, any window (as ``FP16_NHWC_ANY_WINDOW``).
INT8_ANY_WINDOW = takes_groups("epilogue", ("int8",), ("NCHW32",), "one")
#: int8 on wgmma: 128-byte swizzled k tiles where the channels allow (128x256 tiles: N = 256 per wgmma), the
#: interleaved layout for 64 channels (also with L1-caching im2col fills); 64-row tiles for a small GEMM M (Inception's
#: 2048->320 1x1 at 8x8, M = 2048: 12.6 us against 16.0 on 128x128 tiles, cuDNN fp16 10.3; H200, probe
#: ``int8_tile_grid_probe.py``).
INT8_WGMMA = KernelRecord(
    "int8_wgmma", conv2d_int8_wgmma, {"block_tile": (128, 128), "tile_k": 128, "stages": 4}, INT8_ANY_WINDOW,
    CONV_TC_CONFIG, candidates=(
        {"block_tile": (128, 256), "tile_k": 128, "stages": 4, "overlap": True, "l1_fill": True},
        {"block_tile": (128, 256), "tile_k": 128, "stages": 3, "overlap": True},
        {"block_tile": (256, 128), "tile_k": 128, "stages": 4, "overlap": True},
        {"block_tile": (128, 128), "tile_k": 128, "stages": 3, "overlap": True},
        {"block_tile": (64, 128), "tile_k": 128, "stages": 4, "overlap": True},
        {"block_tile": (128, 64), "tile_k": 64, "stages": 4, "layout": "interleaved"},
        {"block_tile": (128, 64), "tile_k": 64, "stages": 4, "layout": "interleaved", "l1_fill": True},
    ), needs=("cp_async", "wgmma"))
#: ... and on mma.sync m16n8k32, down to 32-row tiles for GEMM_M = 1568 (7x7 at batch 32); k tiles of 32 for layers
#: of one 32-channel group (the 3-channel stem, stored as 32 channels: the k tiles 64 and 128 do not divide it).
INT8_MMA = KernelRecord(
    "int8_mma", conv2d_int8_mma, {"block_tile": (128, 128), "warp_tile": (64, 64), "tile_k": 64, "stages": 3},
    INT8_ANY_WINDOW, CONV_TC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (32, 64), "tile_k": 64, "stages": 4},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 64, "stages": 4},
        {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 64, "stages": 4},
        {"block_tile": (256, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 4, "l1_fill": True},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32, "stages": 4},
    ), needs=("ldmatrix", "mma_s8_m16n8k32", "cp_async"))
#: ... and warp-specialized (``conv.tma_ws``), on the filter stored (K, R, S, C) (``conv2d_int8(...,
#: filter_layout="KRSC")``: a k tile's 128 channels are one TMA box row; the NC/32HW32 filter's 32 contiguous bytes
#: make the producer gather it, 198 us at batch 256). On an H100 (2026-11-25, probe, bit-exact): 136.8 us at batch
#: 256 (cuDNN fp16 161.1: 1.18x) with the im2col gathered through L2 only (``l1_gather=False``), against 146.5
#: through L1; batch 32: 3x3 @14 18.9 us, @7 20.8 (int8_wgmma 22.5, 36.4). The rules sweep it as another form of an
#: int8 layer whose channels fill whole k tiles (``rules.int8_forms``). A wider grid at batch 256 (2026-11-26, probe
#: ``int8_b256_grid_probe.py``, bit-exact): persistent blocks save 3-5 us, and the gather wants either 2 threads a row
#: through L1 (129.8 us) or 8 through L2 only (131.6; 4 threads: 144.8 and 168.6): the last two candidates.
INT8_TMA_WS = KernelRecord(
    "int8_tma_ws", conv2d_int8_tma_ws,
    {"block_tile": (128, 256), "stages": 4, "consumers": 2, "persistent_ctas": 0, "lanes": 4, "l1_gather": False},
    INT8_NCHW32, candidates=(
        {},
        {"block_tile": (128, 256), "stages": 4, "persistent_ctas": 132},
        {"block_tile": (128, 128), "stages": 6},
        {"block_tile": (64, 256), "stages": 4, "consumers": 1},
        {"block_tile": (64, 128), "stages": 8, "consumers": 1},
        {"block_tile": (128, 256), "stages": 4, "l1_gather": True},
        {"block_tile": (128, 256), "stages": 4, "persistent_ctas": 132, "lanes": 2, "l1_gather": True},
        {"block_tile": (128, 256), "stages": 4, "persistent_ctas": 132, "lanes": 8},
    ), needs=("cp_async", "mbarrier", "tma", "setmaxnreg", "wgmma"))
INT8: tuple[KernelRecord, ...] = (INT8_WGMMA, INT8_MMA)
#: ... and on wmma m16n16k16 s8 fragments, the next k tile prefetched into registers by synchronous copies
#: (``conv2d_int8_wmma``): Turing's (sm_75) int8 family, offered only where none of ``INT8`` builds
#: (``record.first_offered``). Blocks of at most 128 x 64 (the int32 C tile, bm x (bn + 8) values, fits sm_75's
#: 64 KB beside the k tiles), down to 32 rows for GEMM_M = 1568 (7x7 at batch 32); k tiles of 32 (every layer, the
#: 3-channel stem's one 32-channel group too) and of 64 on 128- and 32-row blocks (on 64-row blocks TVM cannot prove
#: a 3x3 layer's 16 im2col bytes one channel group and copies them byte by byte).
SM75_INT8_WMMA = KernelRecord(
    "sm75_int8_wmma", conv2d_int8_wmma, {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32},
    INT8_ANY_WINDOW,
    candidates=(
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 64},
        {"block_tile": (32, 64), "warp_tile": (16, 32), "tile_k": 64},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32},
        {"block_tile": (64, 128), "warp_tile": (32, 64), "tile_k": 32},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32},
    ), needs=("wmma",))
INT8_TURING: tuple[KernelRecord, ...] = (SM75_INT8_WMMA,)
#: int8 depthwise layers (``conv2d_int8(..., groups=C)``, K = C, filter (K, R, S)): the depthwise stencil on the
#: NC/32HW32 layout, threads along a block's 32 or 64 channels (whole lane groups) as in NHWC, int32 accumulators
#: requantized on the store. Memory-bound as fp16's, on half its bytes. No cp.async: any CUDA GPU.
INT8_DEPTHWISE = KernelRecord(
    "int8_depthwise", conv2d_depthwise, {"tile": (4, 8), "channels": 32, "thread_rows": 4},
    takes_groups("epilogue", ("int8",), ("NCHW32",), "C"), candidates=with_vector_copies(
        {"tile": (4, 8), "channels": 32, "thread_rows": 4},
        {"tile": (7, 7), "channels": 32, "thread_rows": 7},
        {"tile": (4, 4), "channels": 64, "thread_rows": 2},
        {"tile": (2, 8), "channels": 64, "thread_rows": 2},
        {"tile": (8, 8), "channels": 32, "thread_rows": 8},
    ), needs=())
#: int8 grouped layers (``conv2d_int8(..., groups=G)``, 1 < G < C, C and K multiples of 32, filter (K, C/G, R, S)):
#: the same stencil, each output channel summing its group's C/G input channels from the window (a block's 32 or 64
#: output channels read 32 or 64 input channels where a group has as many of each, as ResNeXt's), int32 accumulators
#: requantized on the store. Only the group's channels are multiplied (ResNeXt: 4 to 32 channels x 9 taps).
INT8_GROUPED = KernelRecord(
    "int8_grouped", conv2d_depthwise, {"tile": (4, 8), "channels": 32, "thread_rows": 4},
    takes_groups("epilogue", ("int8",), ("NCHW32",), "below C"), candidates=INT8_DEPTHWISE.candidates, needs=())
#: ... and on tensor cores where C = K and a group's channels divide 32 (ResNeXt's), its filter packed per lane group
#: (``conv2d_int8(..., filter_layout="KRS32")``): a batched implicit GEMM per 32-lane group on ldmatrix + mma.sync
#: m16n8k32 (``conv.int8.conv2d_int8_grouped_mma``), the other groups' zero lanes multiplied too. Block tiles of 64
#: and 128 pixels by the lane group's 32 channels in two warps, k tiles of one tap. On the H200 at ResNeXt-50's
#: 1024-channel 3x3/2 (batch 32): 10.9 us against the stencil's 119.6 and cuDNN's 14.0; k tiles of two taps took
#: 34.0 and 52.7 us (run 20261129T054542Z-70cfbe, results/kernel/beyond_plain.csv).
INT8_GROUPED_MMA = KernelRecord(
    "int8_grouped_mma", conv2d_int8_grouped_mma,
    {"block_tile": (64, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
    takes_groups("epilogue", ("int8",), ("NCHW32",), "below C"), CONV_TC_CONFIG, candidates=(
        {"block_tile": (64, 32), "warp_tile": (32, 32), "tile_k": 32, "stages": 4},
        {"block_tile": (128, 32), "warp_tile": (64, 32), "tile_k": 32, "stages": 4},
    ), needs=("ldmatrix", "mma_s8_m16n8k32", "cp_async"))

#: Winograd F(m x m, 3x3) fp32 (``conv2d_winograd``, NCHW or NHWC; m = 2 or 4 is the workload's, since the module
#: differs): input transform, the batched GEMM through the v5 nest, output transform. The sweep: the GEMM ladder's
#: 128x128 (first with v5_best's column-by-column FFMA order and raster 4: on the H100 4% faster than without at batch
#: 256, 1036 us against cuDNN's 1040) and 128x256 blocks for the batch-256 and batch-32 GEMMs (P = 4096 .. 12544
#: tiles), smaller blocks for the batch-1 layers, whose GEMMs have P = 4 .. 784 tiles (P and K not multiples of the
#: block tile are padded).
WINOGRAD = KernelRecord(
    "winograd_simt", conv2d_winograd_simt,
    {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3,
     "threads": 256},
    takes("batched_gemm", ("float32",), ("NCHW", "NHWC")), SIMT_ASYNC_CONFIG, candidates=(
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3,
         "columns_outer": True, "raster": 4},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3,
         "columns_outer": True, "raster": 4, "prefetch": "k_step"},
        {"block_tile": (128, 128), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (128, 64), "warp_tile": (64, 32), "thread_tile": (8, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 64), "warp_tile": (32, 32), "thread_tile": (4, 8), "tile_k": 16, "stages": 3},
        {"block_tile": (64, 32), "warp_tile": (32, 16), "thread_tile": (4, 4), "tile_k": 16, "stages": 3},
    ), needs=("cp_async",))
SM75_WINOGRAD = turing(WINOGRAD)

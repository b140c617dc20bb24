"""Conv rules: which kernel families take a convolution, and with which tiles, decided from the layer itself.

What TVM's DLight does for GEMM and GEMV (rules that read the block), for convolution: ``rule_records(wl)`` reads
the workload's dtype, layout and sizes, looks at it as a GEMM (``GemmView``: M = N*OH*OW output pixels, N = K
output channels, K = C*R*S), and returns the ``KernelRecord`` families that apply, each with a short list of
candidates ranked by a cost model of the GPU (its SM count ``SMS``, from ``core.gpu.current_gpu()``), so that
``bench.sweep`` builds, verifies and times only a few. No tuning: a layer is one sweep.

- float32 NCHW: split-K direct convolution (``NCHW_SPLITK``): slices of the input channels, output-channel
  blocks, output-pixel blocks; every factor a divisor of its axis (any H, W, C, K), ranked by blocks per SM and
  by the reuse of each shared-memory tile.
  And the implicit GEMM on the v5 nest (``NCHW_GEMM``: output channels x output pixels), tiles ranked by fill.
- Depthwise layers (groups = C, any channel multiplier), float32 or float16, NCHW or NHWC, and int8 (K = C): the
  shared-memory stencil (``DEPTHWISE_NCHW``, ``DEPTHWISE_NHWC``, ``INT8_DEPTHWISE``), tilings ranked by
  ``depthwise_score`` (real outputs, wave fill, halo).
- Grouped layers (1 < groups < C): the depthwise stencil, each output channel's sum over its group's channels too
  (``GROUPED_NCHW_STENCIL``, ``GROUPED_NHWC_STENCIL``, int8 ``INT8_GROUPED`` where C and K are multiples of 32),
  ranked as the depthwise tilings; float32 NCHW and float16 NHWC ones also the implicit GEMM batched over the groups
  (``NCHW_GROUPED_GEMM``, ``NHWC_GROUPED_GEMM``; float16 NHWC also on mma.sync, ``NHWC_GROUPED_MMA``), tiles ranked
  by how one group's GEMM, the groups side by side, fills the SMs; int8 ones where C = K and a group's channels
  divide 32 also on mma.sync (``INT8_GROUPED_MMA``), another workload of the same layer (``int8_forms``: the filter
  packed per 32-lane group), one GEMM per lane group.
- A dilation or a stride or padding per axis (per side): ``NCHW_GEMM`` and ``NHWC_GEMM`` take them, and the
  tensor-core implicit GEMMs on the layer's own blocks (``NHWC_WGMMA``, ``NHWC_MMA``, ``NHWC_WMMA``, ``INT8_WGMMA``,
  ``INT8_MMA``, ``SM75_INT8_WMMA``); split-K, HWCN and the TMA kernels do not. A layer no family takes is refused
  in one line.
- float32 NHWC: the implicit GEMM on the v5 nest (``NHWC_GEMM``: output pixels x output channels).
- float32 HWCN: the implicit GEMM on the v5 nest (``HWCN_HOPPER``), its candidates as recorded.
- float32 3x3, stride 1, pad 1 (NCHW, NHWC): also Winograd F(2x2) and F(4x4) (``winograd_forms``), another workload
  of the same layer (it takes the transformed filter), swept beside the direct families by ``bench.choose``.
- float16 NHWC: the implicit GEMM on wgmma, warp-specialized with TMA filter tiles, and on mma.sync
  (``NHWC_WGMMA``, ``NHWC_TMA_WS``, ``NHWC_MMA``), and for 1x1 layers of stride 1 v9's GEMM with both tiles by TMA
  (``NHWC_1X1_TMA``): tiles ranked by how evenly their blocks fill the last wave and how little of them is
  padding (channels in 8s fill the im2col tile 16 bytes at a time in any k tile: ``implicit_gemm.split_taps``).
  Where none of them builds (Turing, sm_75): on wmma fragments (``NHWC_WMMA``).
- int8 NC/32HW32: the same on the integer wgmma and mma.sync (``INT8_WGMMA``, ``INT8_MMA``); where the channels
  fill whole 128-channel k tiles, also the layer with its filter stored (K, R, S, C) (``int8_forms``) on the
  warp-specialized kernel, both tiles' loads off the consumers and the filter's by TMA (``INT8_TMA_WS``); where it
  has at most 4 channels (the RGB stem), also the layer with its filter stored (K, R, S8, 4) on mma.sync, a k tile of
  32 per kernel row instead of per tap (``INT8_MMA``, ``conv.int8``). Where none of them builds (Turing, sm_75): on
  wmma s8 fragments with synchronous copies (``SM75_INT8_WMMA``).

Only the families the build's architecture has the features of (``KernelRecord.needs``, ``record.offered``) are
offered, each one skipped said in one line the first time (``nhwc_tma_ws: needs tma (sm_90+); this build is
sm_80``); a layer none of whose families builds there is refused in one line (an ArchError).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tvm import s_tir

from tirbench.core.errors import refusal
from tirbench.core.gpu import ArchError, current_gpu
from tirbench.schedules.common.record import KernelRecord, first_offered, for_arch, offered
from tirbench.schedules.conv.records import (DEPTHWISE_NCHW, DEPTHWISE_NHWC, GROUPED_NCHW_STENCIL,
                                             GROUPED_NHWC_STENCIL, HWCN_HOPPER, INT8_DEPTHWISE, INT8_GROUPED,
                                             INT8_GROUPED_MMA, INT8_MMA,
                                             INT8_TMA_WS, INT8_TURING, INT8_WGMMA, NCHW_GEMM, NCHW_GROUPED_GEMM,
                                             NCHW_SPLITK, NHWC_1X1_TMA, NHWC_GEMM, NHWC_GROUPED_GEMM,
                                             NHWC_GROUPED_MMA, NHWC_MMA,
                                             NHWC_TMA_WS, NHWC_WGMMA, SM75_HWCN, SM75_NCHW_GEMM, SM75_NCHW_GROUPED_GEMM,
                                             SM75_NHWC_GEMM, SM75_NHWC_GROUPED_GEMM, SM75_WINOGRAD,
                                             TENSOR_CORE_TURING, WINOGRAD)
from tirbench.schedules.conv.tma_ws import epilogue_ops
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import geometry_of, output_size
from tirbench.workloads.conv2d_int8 import LANES, NARROW_LANES, conv2d_int8, filter_layout_of
from tirbench.workloads.winograd import conv2d_winograd, tiles_of

#: The depthwise family of each layout.
DEPTHWISE_BY_LAYOUT = {"NCHW": DEPTHWISE_NCHW, "NHWC": DEPTHWISE_NHWC, "NCHW32": INT8_DEPTHWISE}
#: The grouped layers' stencil family of each layout.
GROUPED_STENCIL_BY_LAYOUT = {"NCHW": GROUPED_NCHW_STENCIL, "NHWC": GROUPED_NHWC_STENCIL, "NCHW32": INT8_GROUPED}
#: The conv2d families the rules offer, in their order (which of them takes a layer's geometry: ``no_family``).
ALL_CONV = (DEPTHWISE_NCHW, DEPTHWISE_NHWC, INT8_DEPTHWISE, GROUPED_NCHW_STENCIL, GROUPED_NHWC_STENCIL, INT8_GROUPED,
            INT8_GROUPED_MMA, NCHW_SPLITK, NCHW_GEMM, NCHW_GROUPED_GEMM, NHWC_GEMM, NHWC_GROUPED_MMA, NHWC_GROUPED_GEMM,
            HWCN_HOPPER, NHWC_WGMMA, NHWC_TMA_WS, NHWC_1X1_TMA, NHWC_MMA, *TENSOR_CORE_TURING, INT8_WGMMA, INT8_MMA, INT8_TMA_WS,
            *INT8_TURING)
#: Streaming multiprocessors of the GPU the cost model plans for (``current_gpu()``: the device, else the reference
#: GPU of ``TIRBENCH_ARCH``, else an H100).
SMS = current_gpu().sm_count
#: Candidates kept per family.
KEEP = 4
#: Static shared memory a SIMT kernel may use per block (bytes).
SHARED_LIMIT = 48 * 1024
#: Most threads a split-K block may have; most multiply-adds in its unrolled step body (``step`` x R x S x
#: ``thread_k``); and most of both together (threads x body). ptxas 13 (Hopper build) hoists every shared-memory load of
#: the unrolled body into registers: past these, it keeps a block to 32 registers a thread and spills 1-2.6 KB.
#: Measured with ``nvcc -Xptxas -v`` on ResNet-50's 3x3 layer at 56x56: blocks of 392-784 threads with a 288-FMA
#: body spill 1.0-2.6 KB and run at 250 us on an H100; 256 threads with that body spill 8 bytes and run at 47 us;
#: 392-512 threads with a 144-FMA body (thread_k 2) take 128 registers and do not spill.
MAX_SPLITK_THREADS = 512
MAX_SPLITK_BODY = 288
MAX_SPLITK_UNROLLED = 256 * 288


@dataclass(frozen=True)
class GemmView:
    """A convolution as a GEMM: ``m`` output pixels (N*OH*OW), ``n`` output channels, ``k`` = C*R*S."""

    m: int
    n: int
    k: int

    def fill(self, bm: int, bn: int, gemms: int = 1) -> float:
        """How much of the GPU's work a ``bm`` x ``bn`` block tile does usefully: the share of the tiles that is
        not padding, times the share of the last wave's SMs that have a tile (one block per SM); ``gemms`` GEMMs of
        this shape side by side (Winograd's alpha^2) share the SMs."""
        tiles_m, tiles_n = -(-self.m // bm), -(-self.n // bn)
        useful = self.m * self.n / (tiles_m * bm * tiles_n * bn)
        tiles = tiles_m * tiles_n * gemms
        return useful * tiles / (math.ceil(tiles / SMS) * SMS)


def gemm_view(wl: Workload) -> GemmView:
    """``wl`` (a conv2d or conv2d_int8 workload) as a GEMM; a grouped layer as one group's GEMM (K / groups output
    channels, C / groups * R * S deep)."""
    z, g = wl.sizes, geometry_of(wl)
    oh, ow = g.out_hw(z["h"], z["w"], z["r"], z["s"])
    return GemmView(z["n"] * oh * ow, z["k"] // g.groups, z["c"] // g.groups * z["r"] * z["s"])


def depthwise_score(wl: Workload, cand: Mapping[str, Any]) -> float:
    """Higher is better for a depthwise tiling: the share of its blocks' outputs that are real (tiles and channel
    blocks past the layer's edges are not), times how well the blocks fill the last wave (several blocks an SM),
    over the input values a block copies per output it computes (the halo; the layer reads each input once)."""
    z, g = wl.sizes, geometry_of(wl)
    oh, ow = g.out_hw(z["h"], z["w"], z["r"], z["s"])
    (th, tw), ch = cand["tile"], cand["channels"]
    per = [-(-extent // tile) for extent, tile in ((oh, th), (ow, tw), (z["k"], ch))]
    useful = oh * ow * z["k"] / (per[0] * th * per[1] * tw * per[2] * ch)
    rows, cols = ((t - 1) * st + d * (w - 1) + 1 for t, st, d, w in
                  ((th, g.stride[0], g.dilation[0], z["r"]), (tw, g.stride[1], g.dilation[1], z["s"])))
    halo = rows * cols * -(-ch * z["c"] // z["k"]) / (th * tw * ch)   # the input channels ch output channels read
    threads = th // cand["thread_rows"] * tw * ch // cand.get("thread_channels", 1)
    waves = z["n"] * math.prod(per) / (SMS * max(1, min(16, 2048 // threads)))
    return useful * (waves / math.ceil(waves) if waves >= 1 else waves) / halo


def _divisors(n: int, at_most: int) -> list[int]:
    return [d for d in range(1, min(n, at_most) + 1) if n % d == 0]


def _splitk_score(z: Mapping[str, int], oh: int, ow: int, cand: Mapping[str, Any]) -> float:
    """Higher is better: shared-memory reuse (MACs per value loaded) times how well the blocks fill the SMs, less
    the cost of summing the slices."""
    py, px = cand["block_pixels"]
    win = ((py - 1) * z["stride"] + z["r"]) * ((px - 1) * z["stride"] + z["s"])
    macs = cand["block_k"] * py * px * z["r"] * z["s"]
    reuse = macs / (win + cand["block_k"] * z["r"] * z["s"])
    blocks = cand["split"] * z["n"] * (z["k"] // cand["block_k"]) * (oh // py) * (ow // px)
    threads = cand["block_k"] // cand["thread_k"] * py * px
    resident = SMS * max(1, min(16, 2048 // threads))
    waves = blocks / resident
    occupancy = waves / math.ceil(waves) if waves >= 1 else waves
    reduce_cost = 1 + 0.05 * (cand["split"] - 1)
    return reuse * occupancy / reduce_cost


def _splitk_shared_bytes(z: Mapping[str, int], cand: Mapping[str, Any]) -> int:
    py, px = cand["block_pixels"]
    win = ((py - 1) * z["stride"] + z["r"]) * ((px - 1) * z["stride"] + z["s"])
    return 4 * cand["step"] * (win + cand["block_k"] * z["r"] * z["s"])


def _fits(z: Mapping[str, int], oh: int, ow: int, cand: Mapping[str, Any]) -> bool:
    """Whether the tiling divides the layer and fits shared memory and the register limits above."""
    py, px = cand["block_pixels"]
    threads = cand["block_k"] // cand["thread_k"] * py * px
    body = cand["step"] * z["r"] * z["s"] * cand["thread_k"]
    return (z["k"] % cand["block_k"] == 0 and cand["block_k"] % cand["thread_k"] == 0 and oh % py == 0
            and ow % px == 0 and z["c"] % cand["split"] == 0 and z["c"] // cand["split"] % cand["step"] == 0
            and 32 <= threads <= MAX_SPLITK_THREADS and body <= MAX_SPLITK_BODY
            and threads * body <= MAX_SPLITK_UNROLLED
            and _splitk_shared_bytes(z, cand) <= SHARED_LIMIT)


def _splitk_pool(z: Mapping[str, int], oh: int, ow: int) -> list[dict[str, Any]]:
    """Every split-K tiling the rules consider: each factor a divisor of its axis, 64-512 threads in whole warps."""
    pool = []
    for block_k in (d for d in (8, 16, 32, 64) if z["k"] % d == 0):
        for thread_k in (d for d in (1, 2, 4, 8) if block_k % d == 0):
            for py in _divisors(oh, 16):
                for px in _divisors(ow, 16):
                    threads = block_k // thread_k * py * px
                    if not 64 <= threads <= MAX_SPLITK_THREADS or threads % 32:
                        continue
                    for split in _divisors(z["c"], 64):
                        steps = [d for d in (8, 4, 2, 1) if z["c"] // split % d == 0
                                 and d * z["r"] * z["s"] * thread_k <= MAX_SPLITK_BODY
                                 and threads * d * z["r"] * z["s"] * thread_k <= MAX_SPLITK_UNROLLED]
                        if not steps:
                            continue
                        step = steps[0]
                        pool.append({"split": split, "block_k": block_k, "thread_k": thread_k,
                                     "block_pixels": (py, px), "step": step})
    return pool


def splitk_candidates(wl: Workload, keep: int = KEEP) -> tuple[dict[str, Any], ...]:
    """The ``keep`` best split-K tilings of an NCHW float32 convolution by ``_splitk_score``, at most one per
    (split, block_k, thread_k), and the best of ``NCHW_SPLITK``'s recorded candidates that fits the layer."""
    z = wl.sizes
    oh, ow = output_size(z["h"], z["r"], z["stride"], z["pad"]), output_size(z["w"], z["s"], z["stride"], z["pad"])
    score = lambda c: -_splitk_score(z, oh, ow, c)   # noqa: E731
    chosen, seen = [], set()
    for cand in sorted((c for c in _splitk_pool(z, oh, ow) if _fits(z, oh, ow, c)), key=score):
        sig = (cand["split"], cand["block_k"], cand["thread_k"])
        if sig not in seen and len(chosen) < keep:
            seen.add(sig)
            chosen.append(cand)
    recorded = sorted((dict(c) for c in NCHW_SPLITK.candidates if _fits(z, oh, ow, c)), key=score)
    if recorded and recorded[0] not in chosen:
        chosen.append(recorded[0])
    return tuple(chosen)


def _tile(cand: Mapping[str, Any], record: KernelRecord) -> tuple[int, int]:
    return tuple(cand.get("block_tile", record.defaults["block_tile"]))


def ranked_tiles(wl: Workload, record: KernelRecord, keep: int = KEEP, *, view: GemmView | None = None,
                 score: Callable[[int, int], float] | None = None) -> tuple[Mapping[str, Any], ...]:
    """The ``keep`` best of ``record``'s recorded candidates that take ``wl`` (schedule without a ValueError), best
    first by ``score(bm, bn)`` of their block tile (default: ``view.fill`` to two decimals, ``view`` by default
    ``gemm_view(wl)``, rows = output pixels; ties: the larger tile)."""
    if score is None:
        view = view or gemm_view(wl)
        score = lambda bm, bn: round(view.fill(bm, bn), 2)   # noqa: E731

    def key(cand: Mapping[str, Any]) -> tuple[float, int]:
        bm, bn = _tile(cand, record)
        return (-score(bm, bn), -bm * bn)

    taken = []
    for cand in sorted(record.candidates, key=key):
        if len(taken) < keep and refusal(lambda: record.apply(wl, cand)) is None:
            taken.append(cand)
    return tuple(taken)


def built_here(wl: Workload, *groups: tuple[KernelRecord, ...]) -> list[KernelRecord]:
    """The families of the first of ``groups`` that the build's architecture builds any of (``first_offered``: a
    fallback group, Turing's, after the families it stands in for; each one skipped said once); a one-line ArchError
    naming the layer and the last family's missing feature where none is left."""
    taken = first_offered(*groups)
    if not taken:
        raise ArchError(f"no conv family builds {wl.name} {wl.dtype} {wl.layout or ''} here: "
                        f"{for_arch(groups[-1])[1][-1]}")
    return taken


def rule_records(wl: Workload, keep: int = KEEP) -> list[KernelRecord]:
    """The kernel families that take ``wl`` and build for the build's architecture (``built_here``), each with its
    ``keep`` best candidates for it (see the module docstring); a one-line ValueError for a workload no family
    takes. ``keep=0`` schedules no candidate (``refused_here``: only whether a family builds here)."""
    if wl.name == "conv2d" and any(f.accepts(wl) is None for f in DEPTHWISE_BY_LAYOUT.values()):
        return _depthwise_records(wl, keep, DEPTHWISE_BY_LAYOUT[wl.layout])
    if wl.name == "conv2d" and wl.dtype == "int8" and filter_layout_of(wl.mod) == "KRS32":   # one GEMM a lane group
        z = wl.sizes
        view = gemm_view(wl)
        return _grouped_records(wl, keep, GemmView(view.m, LANES, LANES * z["r"] * z["s"]), (INT8_GROUPED_MMA,),
                                groups=z["c"] // LANES)
    stencil = GROUPED_STENCIL_BY_LAYOUT.get(wl.layout or "")
    if wl.name == "conv2d" and stencil is not None and stencil.accepts(wl) is None:
        gemms = []
        if NCHW_GROUPED_GEMM.accepts(wl) is None:
            v = gemm_view(wl)   # NCHW: one group's GEMM has its output channels as rows, the pixels as columns
            gemms = _grouped_records(wl, keep, GemmView(v.n, v.m, v.k), (NCHW_GROUPED_GEMM,), (SM75_NCHW_GROUPED_GEMM,))
        elif NHWC_GROUPED_GEMM.accepts(wl) is None:   # NHWC: rows the pixels, as ``gemm_view``
            gemms = _grouped_records(wl, keep, gemm_view(wl), (NHWC_GROUPED_MMA, NHWC_GROUPED_GEMM),
                                     (SM75_NHWC_GROUPED_GEMM,))
        if not gemms:
            return _depthwise_records(wl, keep, stencil)
        return gemms + [r for r in _depthwise_records(wl, keep, stencil, required=False) if r.candidates or not keep]
    if wl.name == "conv2d" and (reason := no_family(wl)) is not None:
        raise ValueError(f"conv rules: no family takes conv2d {wl.shape} ({wl.dtype} {wl.layout}): {reason}")
    if wl.name == "conv2d" and wl.dtype == "float32" and wl.layout == "NCHW":
        v = gemm_view(wl)   # NCHW_GEMM's rows are output channels, its columns output pixels
        families = [*built_here(wl, (NCHW_SPLITK,)), *built_here(wl, (NCHW_GEMM,), (SM75_NCHW_GEMM,))]
        ranked = lambda f: (splitk_candidates(wl, keep) if f is NCHW_SPLITK    # noqa: E731
                            else ranked_tiles(wl, f, keep, view=GemmView(v.n, v.m, v.k)))
        records = [f.with_candidates(cands) for f in families if f.accepts(wl) is None and (cands := ranked(f))]
        if not records:
            raise ValueError(f"no split-K tiling or implicit-GEMM tile fits conv2d {wl.shape}")
        return records
    if wl.name == "conv2d" and wl.dtype == "float32" and wl.layout == "NHWC":
        return [f.with_candidates(ranked_tiles(wl, f, keep))
                for f in built_here(wl, (NHWC_GEMM,), (SM75_NHWC_GEMM,))]
    if wl.name == "conv2d" and wl.dtype == "float32" and wl.layout == "HWCN":
        return built_here(wl, (HWCN_HOPPER,), (SM75_HWCN,))
    if wl.name == "conv2d" and wl.dtype == "float16" and wl.layout == "NHWC":
        groups = ((NHWC_WGMMA, NHWC_TMA_WS, NHWC_1X1_TMA, NHWC_MMA), TENSOR_CORE_TURING)
    elif wl.dtype == "int8" and wl.layout == "NCHW32":
        groups = ({"KRSC": (INT8_TMA_WS,), "KRS8C4": (INT8_MMA,)}.get(filter_layout_of(wl.mod),
                                                                        (INT8_WGMMA, INT8_MMA)), INT8_TURING)
    else:
        raise ValueError(f"no conv rule takes {wl.name} {wl.dtype} {wl.layout or ''}: the rules take float32 "
                         f"NCHW, NHWC or HWCN, float16 NHWC, and conv2d_int8")
    families = tuple(built_here(wl, *groups))
    records = [f.with_candidates(cands) for f in families if (cands := ranked_tiles(wl, f, keep))]
    if not records and keep:   # keep=0 (``refused_here``): the families that build here were all it asked
        raise ValueError(f"no {'/'.join(f.name for f in families)} candidate takes {wl.name} {wl.shape}: "
                         f"{refusal(lambda: families[-1].apply(wl))}")
    return records


def _grouped_records(wl: Workload, keep: int, view: GemmView, *families: tuple[KernelRecord, ...],
                     groups: int | None = None) -> list[KernelRecord]:
    """A grouped implicit GEMM's family that builds here, its tiles ranked by how one group's GEMM (``view``, oriented
    as the family's rows and columns), the ``groups`` GEMMs (the layer's groups by default) side by side, fill the
    SMs."""
    score = lambda bm, bn: round(view.fill(bm, bn, groups or geometry_of(wl).groups), 2)  # noqa: E731
    return [f.with_candidates(ranked_tiles(wl, f, keep, score=score)) for f in built_here(wl, *families)]


def no_family(wl: Workload) -> str | None:
    """None where some family takes the conv2d ``wl`` (or it is plain); else why none does, in one line (read from
    the families' ``accepts``: nothing is scheduled)."""
    if not wl.extra or any(f.accepts(wl) is None for f in ALL_CONV):
        return None
    return (f"it has {geometry_of(wl).beyond_plain()}; beyond plain layers the families take depthwise layers "
            f"(float32 or float16, NCHW or NHWC; int8), grouped ones (float32 or float16, NCHW or NHWC, two output "
            f"channels a group or more; int8 with C and K multiples of 32) and a dilation or a stride or padding per "
            f"axis (float32 NCHW or NHWC, float16 NHWC, int8)")


def _depthwise_records(wl: Workload, keep: int, stencil: KernelRecord, *,
                       required: bool = True) -> list[KernelRecord]:
    """The stencil family ``stencil`` (depthwise or grouped) with its ``keep`` best candidates by
    ``depthwise_score`` that schedule the layer (a window over 48 KB is refused: one line where none fits and the
    family is ``required``, else none)."""
    family, = built_here(wl, (stencil,))
    taken = []
    for cand in sorted(family.candidates, key=lambda c: -depthwise_score(wl, c)):
        if len(taken) < keep and refusal(lambda: family.apply(wl, cand)) is None:
            taken.append(cand)
    if not taken and keep and required:
        raise ValueError(f"no {family.name} candidate takes conv2d {wl.shape}: {refusal(lambda: family.apply(wl))}")
    return [family.with_candidates(taken)]


def refused_here(wl: Workload) -> str | None:
    """The one line ``rule_records`` refuses ``wl`` with where the build's architecture has no family for it (an
    ArchError); None where one builds (whatever it says of the layer's shape). Asked for no candidates (``keep=0``),
    the rules schedule none: the families' architecture is decided before their candidates are ranked."""
    try:
        rule_records(wl, keep=0)
    except ArchError as err:
        return str(err)
    except ValueError:
        return None
    return None


def winograd_forms(wl: Workload) -> list[Workload]:
    """The same layer computed by Winograd F(2x2, 3x3) and F(4x4, 3x3) (``conv2d_winograd``, family ``WINOGRAD``),
    where it applies: a float32 NCHW or NHWC 3x3 convolution of stride 1 and padding 1, on an architecture that
    builds ``winograd_family()``; else none. The filter
    transform is outside the timed kernel (done once per filter, ahead of time; cuDNN's Winograd transforms its
    filter inside every call, inside its time)."""
    z = wl.sizes
    if wl.name == "conv2d" and wl.extra:   # groups, dilation, per-axis stride or padding: not Winograd's layer
        return []
    if (wl.name, wl.dtype) != ("conv2d", "float32") or wl.layout not in ("NCHW", "NHWC") or \
            (z["r"], z["s"], z["stride"], z["pad"]) != (3, 3, 1, 1) or winograd_family() is None:
        return []
    return [conv2d_winograd(z["n"], z["c"], z["h"], z["w"], z["k"], m=m, layout=wl.layout) for m in (2, 4)]


def int8_forms(wl: Workload) -> list[Workload]:
    """The same int8 layer with its filter packed for another kernel, once, outside the timed kernel (as TensorRT and
    cuDNN pack theirs): stored (K, R, S, C) (``INT8_TMA_WS``: a k tile's 128 channels are one TMA box row) where the
    channels fill whole k tiles and a candidate of that family takes the layer (its block tiles are 128 or 256
    output channels wide); stored (K, R, S8, 4) (``INT8_MMA``: 8 taps of 4 lanes per k tile of 32) where the layer
    has at most 4 channels; a grouped layer whose groups lie within lane groups (C = K) stored (K, R, S, 32)
    (``INT8_GROUPED_MMA``); else none (and none for a layer whose filter is packed already, a layer beyond plain,
    which both forms' kernels refuse, or where the build's architecture lacks the form's family: ``offered``)."""
    z = wl.sizes
    if (wl.dtype, wl.layout) != ("int8", "NCHW32"):
        return []
    if filter_layout_of(wl.mod) == "KCRS" and z["c"] == z["k"] and LANES % (z["c"] // geometry_of(wl).groups) == 0:
        return [int8_form(wl, "KRS32")] if offered((INT8_GROUPED_MMA,)) else []
    if filter_layout_of(wl.mod) != "KCRS32" or wl.extra:
        return []
    layout = "KRSC" if z["c"] % 128 == 0 else "KRS8C4" if z["c"] <= NARROW_LANES else None
    if layout is None or not offered((INT8_TMA_WS if layout == "KRSC" else INT8_MMA,)):
        return []
    form = int8_form(wl, layout)
    return [form] if layout == "KRS8C4" or ranked_tiles(form, INT8_TMA_WS, keep=1) else []


def int8_form(wl: Workload, filter_layout: str) -> Workload:
    """The int8 layer ``wl`` (NC/32HW32) with its filter stored ``filter_layout`` ("KRSC", "KRS8C4", "KRS32"), its
    epilogue (residual, ReLU) kept."""
    z = wl.sizes
    residual, relu = epilogue_ops(s_tir.Schedule(wl.mod))
    return conv2d_int8(*(z[a] for a in ("n", "c", "h", "w", "k", "r", "s")), **geometry_of(wl).kwargs(), relu=relu,
                       residual=residual, filter_layout=filter_layout)


def winograd_family() -> KernelRecord | None:
    """The Winograd family the build's architecture builds: ``WINOGRAD`` (cp.async), else its Turing sibling
    ``SM75_WINOGRAD`` (``first_offered``); None where neither does."""
    taken = first_offered((WINOGRAD,), (SM75_WINOGRAD,))
    return taken[0] if taken else None


def winograd_tiles(form: Workload, keep: int = KEEP) -> tuple[Mapping[str, Any], ...]:
    """The ``keep`` best of ``winograd_family()``'s candidates for a Winograd form of a layer (``winograd_forms``), by how the
    blocks of its alpha^2 GEMMs (K output channels x P tiles, C deep) fill the SMs (``GemmView.fill``, to one
    decimal: a layer of many waves fills them with any tile), then the larger tile (more reuse per value loaded)."""
    z = form.sizes
    th, tw = tiles_of(z["h"], z["w"], z["m"])
    view, gemms = GemmView(z["k"], z["n"] * th * tw, z["c"]), (z["m"] + 2) ** 2
    return ranked_tiles(form, winograd_family(), keep, score=lambda bm, bn: round(view.fill(bm, bn, gemms), 1))

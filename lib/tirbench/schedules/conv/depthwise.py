"""Depthwise convolution (groups = C, K = m * C) as the memory-bound stencil it is: SIMT, NCHW or NHWC, fp32 or fp16,
and int8 NC/32HW32 (``conv2d_int8(..., groups=C)``: K = C, channels-last within each group of 32, as NHWC); and
grouped layers with a few channels a group (ResNeXt's 4-32, in every one of those layouts and dtypes): the same
stencil, each output channel's sum over its group's input channels too, the window holding the input channels of the
block's output channels.

A depthwise layer does R * S multiply-adds per output and reads each input value R * S times, so it is bound by
memory, not arithmetic: its floor is the workload's ``bytes`` (input, filter and output once each) over the HBM
bandwidth. The schedule is notebook 02's shared-memory window sum in two dimensions: a block computes a tile of
``tile`` (rows x columns) outputs for ``channels`` output channels; it first copies the input window those outputs
read (the tile's rows and columns widened by the halo, ``(t - 1) * stride + (window - 1) * dilation + 1``, of the
``channels / m`` input channels) from global to shared memory once, cooperatively, with the zero padding inlined as a
predicate on that copy (the padded input never exists; any padding per side, stride and dilation per axis, since
TVM derives the window from the block's index expressions). Then each thread accumulates ``thread_rows`` consecutive
output rows of one column in registers (float32, also for float16 inputs), reading the window from shared memory and
its channel's R * S filter taps from registers (a grouped layer's: one input channel's taps at a time, that
channel's loop outside the rows), and stores them (float16: rounded on the store; int8: int32
accumulators, requantized on the store by the workload's epilogue).

Threads run along the contiguous axis: output columns in NCHW (a warp reads one window row and stores one output row),
channels in NHWC (a warp reads and stores ``channels`` contiguous values of a pixel). In the channels-last layouts the
window's copy can move 16 bytes of a pixel's channels at a time (``copy_bytes``), and a thread can sum several
consecutive channels and store them as one vector (``thread_channels``). Where a tile does not divide the
output, the edge blocks' threads past it are predicated off. No cp.async, no tensor cores: any CUDA GPU.
"""
from __future__ import annotations

import math

from tvm import s_tir

from tirbench.schedules.common.checks import loop_extent, require_divides, require_positive_int, require_threads
from tirbench.schedules.common.tiling import has_block
from tirbench.schedules.conv.direct import conv_block
from tirbench.workloads.conv2d_int8 import filter_layout_of

#: Static shared memory a block may use without opting in (bytes): the input window must fit.
SHARED_LIMIT = 48 * 1024


def depthwise_layout(sch: s_tir.Schedule) -> str:
    """"NCHW", "NHWC" or "NCHW32" (``conv2d_int8``'s): the layout of a ``"conv"`` block; a one-line ValueError for
    anything else. (The families decide which layers come here: depthwise and grouped ones, ``conv.records``.)"""
    for layout in ("NCHW", "NHWC", "NCHW32"):
        try:
            conv_block(sch, layout)
        except ValueError:
            continue
        return layout
    raise ValueError("the depthwise schedule needs an NCHW or NHWC convolution, conv2d(..., groups=c), or an int8 "
                     "one, conv2d_int8(..., groups=c)")


def conv2d_depthwise(sch: s_tir.Schedule, *, tile: tuple[int, int] = (8, 32), channels: int = 1,
                     thread_rows: int = 2, copy_bytes: int = 0, thread_channels: int = 1) -> s_tir.Schedule:
    """The depthwise convolution as a shared-memory stencil (module docstring): a block computes ``tile`` (output
    rows x columns) x ``channels`` output channels, ``tile[0] / thread_rows * tile[1] * channels`` threads each
    ``thread_rows`` consecutive rows of one column and channel. Any output size; the window must fit 48 KB.
    ``copy_bytes`` (channels-last layouts; 0: one value a copy): the window's copy moves that many bytes of a pixel's
    contiguous channels at a time (``_copy_window``). ``thread_channels`` (channels-last layouts): each thread sums
    that many consecutive output channels and stores them as one vector."""
    if has_block(sch, "epilogue") and filter_layout_of(sch.mod) == "KRS32":   # int8: its filter is the tensor cores'
        raise ValueError("the stencil reads a grouped layer's own filter: conv2d_int8(..., groups=G) with its 'KCRS' "
                         "filter; 'KRS32' is the grouped tensor-core kernel's (conv2d_int8_grouped_mma)")
    layout = depthwise_layout(sch)
    blk, ext = conv_block(sch, layout)
    (th, tw), params = tile, (("tile[0]", tile[0]), ("tile[1]", tile[1]), ("channels", channels))
    for param, value in (*params, ("thread_rows", thread_rows)):
        require_positive_int(value, param=param)
    require_divides(th, thread_rows, param="thread_rows", axis="tile[0]")
    if layout == "NCHW32" and channels % 32:
        raise ValueError(f"channels={channels}: an int8 NC/32HW32 block takes whole groups of 32 channels (32, 64...)")
    if ext["c"] > 1 and channels > 1 and channels % (per_group := _outputs_a_group(sch, layout, ext)):
        raise ValueError(f"channels={channels}: a block of a grouped layer takes one output channel or whole groups "
                         f"(a multiple of its {per_group} output channels a group)")
    require_positive_int(thread_channels, param="thread_channels")
    if layout == "NCHW" and thread_channels > 1:
        raise ValueError(f"thread_channels={thread_channels}: NCHW threads run along output columns; several "
                         "channels a thread take the channels-last layouts")
    require_divides(channels, thread_channels, param="thread_channels", axis="channels")
    threads = th // thread_rows * tw * channels // thread_channels
    require_threads(threads, param="tile[0]/thread_rows*tile[1]*channels/thread_channels")
    if layout == "NCHW":
        n, k, y, x, rc, ry, rx = sch.get_loops(blk)
    else:
        n, y, x, k, ry, rx, rc = sch.get_loops(blk)
    bk, tk, vk = sch.split(k, factors=[None, channels // thread_channels, thread_channels])
    by, ty, vy = sch.split(y, factors=[None, th // thread_rows, thread_rows])
    bx, tx = sch.split(x, factors=[None, tw])
    lanes = (tk, ty, tx) if layout == "NCHW" else (ty, tx, tk)   # the contiguous axis innermost
    grouped = ext["c"] > 1   # a group's channels outermost, so a thread holds one channel's taps at a time
    sch.reorder(n, bk, by, bx, *lanes, *((rc, vy) if grouped else (vy, rc)), vk, ry, rx)
    thread = sch.fuse(*lanes)
    sch.bind(thread, "threadIdx.x")
    window = sch.cache_read(blk, 0, "shared")
    sch.compute_at(window, bx)   # before the block loops are fused: TVM bounds the window exactly only then
    _require_window(sch, window)
    sch.bind(sch.fuse(n, bk, by, bx), "blockIdx.x")
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, thread)
    for last in ("cast", "epilogue"):   # float16: round the float32 accumulators on the store; int8: requantize them
        if has_block(sch, last):
            sch.reverse_compute_inline(sch.get_sblock(last))
    if thread_channels > 1:   # the store: a thread's channels of a pixel are contiguous
        sch.vectorize(sch.get_loops(acc)[-1])
    taps = sch.cache_read(blk, 1, "local")
    sch.compute_at(taps, rc if grouped else thread)
    _copy_window(sch, window, threads, copy_bytes, layout)
    sch.compute_inline(sch.get_sblock("pad"))
    for loop in (vy, vk, ry, rx):
        sch.unroll(loop)
    sch.decompose_reduction(blk, rc if grouped else vy)
    return sch


def _copy_window(sch: s_tir.Schedule, window: s_tir.SBlockRV, threads: int, copy_bytes: int, layout: str) -> None:
    """Spread the window's copy over the block's ``threads``; with ``copy_bytes``, each copy that many bytes of
    consecutive channels (the window's innermost axis in NHWC and NC/32HW32), split off before the other axes are
    fused, so that the zero-padding predicate is the same for every value of a vector. A one-line ValueError where
    the window's channels do not come in such vectors."""
    *outer, inner = sch.get_loops(window)[1:]
    if copy_bytes:
        require_positive_int(copy_bytes, param="copy_bytes")
        if layout == "NCHW":
            raise ValueError(f"copy_bytes={copy_bytes}: an NCHW window's rows are not whole vectors (their halo); "
                             "vector copies take the channels-last layouts")
        lanes = copy_bytes * 8 // sch.get(window).writes[0].source.dtype.bits
        require_divides(loop_extent(sch, inner), lanes, param=f"copy_bytes={copy_bytes} ({lanes} values)",
                        axis="the window's channels")
        inner, vector = sch.split(inner, factors=[None, lanes])
    fetch, lane = sch.split(sch.fuse(*outer, inner), factors=[None, threads])
    sch.bind(lane, "threadIdx.x")
    sch.unroll(fetch)
    if copy_bytes:
        sch.vectorize(vector)


def _outputs_a_group(sch: s_tir.Schedule, layout: str, ext: dict[str, int]) -> int:
    """A grouped layer's output channels a group: K x (C / groups) / C, C read from the padded input's shape."""
    xp = next(region.source for region in sch.get(sch.get_sblock("conv")).reads if region.source.name == "Xp")
    shape = [int(d) for d in xp.shape]
    channels = shape[3] if layout == "NHWC" else shape[1] * (shape[4] if layout == "NCHW32" else 1)
    return ext["k"] * ext["c"] // channels


def _require_window(sch: s_tir.Schedule, window: s_tir.SBlockRV) -> None:
    """A one-line ValueError where a block's input window (the copy's loops under the block loops) does not fit
    ``SHARED_LIMIT``."""
    extents = [loop_extent(sch, loop) for loop in sch.get_loops(window)[4:]]   # under (n, k, rows, columns)
    nbytes = math.prod(extents) * sch.get(window).writes[0].source.dtype.bits // 8
    if nbytes > SHARED_LIMIT:
        raise ValueError(f"the input window of a block ({'x'.join(map(str, extents))} values, {nbytes} bytes) does not "
                         f"fit {SHARED_LIMIT} bytes of shared memory: a smaller tile or fewer channels")

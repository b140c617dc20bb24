"""Quantised 2-D convolution: int8 in, int32 accumulate, a fused epilogue, int8 out, in the NC/32HW32 layout.

Layout ``"NCHW32"`` (cuDNN's ``NCHW_VECT_C`` with 32 lanes, CUTLASS's ``TensorNCxHWx<32>``): channels are grouped
by 32 and the group is the innermost axis, so one pixel's 32 channels are 32 contiguous bytes (two 16-byte loads).
Any C >= 1 is stored in Cg = ceil(C/32) groups; as with cuDNN's ``NCHW_VECT_C``, the lanes past C (input and filter)
must be zero, and the kernels' reduction runs over all Cg*32 channels, padded ones included. Any K >= 1 too: the output
holds Kg = ceil(K/32) groups, and the lanes past K are zero (their filters, bias and residual are zero, their scale
1), so the next layer reads them as the padded input lanes it expects.

============  ==========================
input X       (N, Cg, H, W, 32)
filter W      (Kg*32, Cg, R, S, 32); ``"KRSC"``: (Kg*32, R, S, Cg*32); ``"KRS8C4"`` (C <= 4): (Kg*32, R, S8, 4);
              a grouped layer's ``"KCRS"``: (K, C/groups, R, S), or ``"KRS32"``: (K, R, S, 32), each output channel's
              taps over the 32 lanes of its own lane group, zero outside its group (C = K, groups within a lane
              group); a depthwise layer's ``"KRS"``: (K, R, S)
output Y      (N, Kg, OH, OW, 32)
bias          (Kg*32,) int32
scale         (Kg*32,) float32, positive
residual      (N, Kg, OH, OW, 32) int8, optional
============  ==========================

The epilogue, per output element of channel k (``requantize``; numpy and the kernel do the same float32 steps)::

    acc = sum of int8 x int8 products (int32, exact)
    t   = nearbyint(float32(acc + bias[k]) * scale[k])     # round half to even
    t   = t + residual                                      # if residual
    t   = max(t, 0)                                         # if relu
    y   = clamp(t, -128, 127)                               # saturate to int8

The filter is a constant, packed once for the kernel that reads it: ``"KRSC"`` (each tap's channels contiguous, as
cuDNN's NHWC filters) gives a k tile of 128 channels as 128 contiguous bytes, one TMA box row
(``conv.tma_ws``), where the NC/32HW32 filter has 32. ``"KRS8C4"`` is for a layer of at most 4 input channels (the
RGB stem): each tap keeps 4 lanes and each kernel row 8 taps (S8 = S rounded up to a multiple of 8; the taps and lanes
past S and C are zero), so the reduction runs over R * S8 * 4 values, 32 per kernel row, instead of R * S * 32: the
block "conv" reads lanes 0-3 of each input pixel (the input and output stay NC/32HW32, the padded input ``Xp`` is
widened where the 8th tap of the last column needs it).

Blocks: ``"pad"`` (zero-padded input ``Xp``), ``"conv"`` (int32 ``Yacc``; loops n, oh, ow, k, r, s, c like the
NHWC conv, so the implicit-GEMM helpers reindex it the same way) and ``"epilogue"``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tvm
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_positive
from tirbench.workloads.conv2d import check_conv_params, conv2d_reference
from tirbench.workloads.conv_geometry import ConvGeometry

LANES = 32  #: channels per group of the NC/32HW32 layout
#: the filter as (K, Cg, R, S, 32), (K, R, S, Cg*32), (K, R, S8, 4); a grouped layer's (1 < groups < C) is "KCRS":
#: (K, C / groups, R, S), each output channel's taps over its group's input channels (PyTorch's grouped weight); a
#: depthwise layer's (groups = C = K) is "KRS": (K, R, S), its one tap set per channel; "KRS32" (K, R, S, 32) is a
#: grouped layer's filter packed for tensor cores: each output channel's taps over the 32 lanes of its own lane group
#: (C = K and 32 / (C / groups) groups a lane group), zero on the lanes of the other groups (``kcrs_to_krs32``)
FILTER_LAYOUTS = ("KCRS32", "KRSC", "KRS8C4", "KCRS", "KRS", "KRS32")
NARROW_LANES, NARROW_TAPS = 4, 8  #: ``"KRS8C4"``: lanes per tap and taps per kernel row


def channel_groups(c: int) -> int:
    """The 32-channel groups that hold ``c`` channels: ceil(c / 32)."""
    return -(-c // LANES)


def pad_channels(a: np.ndarray) -> np.ndarray:
    """``a`` with axis 1 (channels) zero-padded up to a multiple of 32 (``a`` itself where it already is one)."""
    extra = channel_groups(a.shape[1]) * LANES - a.shape[1]
    return np.pad(a, [(0, 0), (0, extra)] + [(0, 0)] * (a.ndim - 2)) if extra else a


def nchw_to_nchw32(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> (N, ceil(C/32), H, W, 32), contiguous; the lanes past C are zero."""
    x = pad_channels(x)
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // LANES, LANES, h, w).transpose(0, 1, 3, 4, 2))


def nchw32_to_nchw(x: np.ndarray, channels: int | None = None) -> np.ndarray:
    """(N, Cg, H, W, 32) -> (N, C, H, W), contiguous: the first ``channels`` channels (default all Cg*32)."""
    n, cg, h, w, lanes = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cg * lanes, h, w)[:, :channels])


def kcrs_to_kc32rs32(wt: np.ndarray) -> np.ndarray:
    """A (K, C, R, S) filter -> (K, ceil(C/32), R, S, 32), contiguous; the lanes past C are zero."""
    wt = pad_channels(wt)
    k, c, r, s = wt.shape
    return np.ascontiguousarray(wt.reshape(k, c // LANES, LANES, r, s).transpose(0, 1, 3, 4, 2))


def kc32rs32_to_kcrs(wt: np.ndarray, channels: int | None = None) -> np.ndarray:
    """(K, Cg, R, S, 32) -> (K, C, R, S), contiguous: the first ``channels`` channels (default all Cg*32)."""
    k, cg, r, s, lanes = wt.shape
    return np.ascontiguousarray(wt.transpose(0, 1, 4, 2, 3).reshape(k, cg * lanes, r, s)[:, :channels])


def kcrs_to_krsc(wt: np.ndarray) -> np.ndarray:
    """A (K, C, R, S) filter -> (K, R, S, Cg*32), contiguous; the channels past C are zero."""
    return np.ascontiguousarray(pad_channels(wt).transpose(0, 2, 3, 1))


def krsc_to_kcrs(wt: np.ndarray, channels: int | None = None) -> np.ndarray:
    """(K, R, S, Cg*32) -> (K, C, R, S), contiguous: the first ``channels`` channels (default all)."""
    return np.ascontiguousarray(wt.transpose(0, 3, 1, 2)[:, :channels])


def kcrs_to_krs32(wt: np.ndarray) -> np.ndarray:
    """A grouped layer's (K, C/groups, R, S) filter (C = K, groups within a 32-lane group) -> (K, R, S, 32),
    contiguous: output channel f's C/groups channels on the lanes of its group within its lane group, zeros
    elsewhere."""
    k, cpg, r, s = wt.shape
    out = np.zeros((k, r, s, LANES), wt.dtype)
    for f in range(k):
        first = f % LANES // cpg * cpg
        out[f, :, :, first:first + cpg] = wt[f].transpose(1, 2, 0)
    return out


def krs32_to_kcrs(wt: np.ndarray, channels: int) -> np.ndarray:
    """(K, R, S, 32) -> the grouped layer's (K, C/groups, R, S) (``channels``: C/groups), contiguous."""
    k = wt.shape[0]
    first = np.arange(k) % LANES // channels * channels
    lanes = first[:, None] + np.arange(channels)[None, :]   # (K, C/groups): each channel's lanes
    return np.ascontiguousarray(np.take_along_axis(wt, lanes[:, None, None, :], axis=3).transpose(0, 3, 1, 2))


def narrow_taps(s: int) -> int:
    """S8: the kernel width ``s`` rounded up to a multiple of ``NARROW_TAPS``."""
    return -(-s // NARROW_TAPS) * NARROW_TAPS


def kcrs_to_krs8c4(wt: np.ndarray) -> np.ndarray:
    """A (K, C, R, S) filter of C <= 4 channels -> (K, R, S8, 4), contiguous; the taps past S and lanes past C zero."""
    k, c, r, s = wt.shape
    out = np.zeros((k, r, narrow_taps(s), NARROW_LANES), wt.dtype)
    out[:, :, :s, :c] = wt.transpose(0, 2, 3, 1)
    return out


def krs8c4_to_kcrs(wt: np.ndarray, channels: int, taps: int) -> np.ndarray:
    """(K, R, S8, 4) -> (K, C, R, S), contiguous: the first ``channels`` lanes and ``taps`` taps."""
    return np.ascontiguousarray(wt[:, :, :taps, :channels].transpose(0, 3, 1, 2))


def filter_layout_of(mod: tvm.IRModule) -> str:
    """The filter layout of a ``conv2d_int8`` module (one of ``FILTER_LAYOUTS``), from the W its block "conv" reads:
    five axes "KCRS32"; three "KRS"; four, indexed by the reduction's channel second, "KCRS"; else, the last of 4
    lanes, "KRS8C4"; else, with the input's lane group read by the output channel (a grouped layer's), "KRS32";
    else "KRSC"."""
    sch = tvm.s_tir.Schedule(mod)
    block = sch.get(sch.get_sblock("conv"))
    w = next(region for region in block.reads if region.source.name == "W")
    by_rank = {5: "KCRS32", 3: "KRS"}
    if len(w.source.shape) in by_rank:
        return by_rank[len(w.source.shape)]
    if w.region[1].min.same_as(block.iter_vars[-1].var):   # W[k, rc, ry, rx]
        return "KCRS"
    if int(w.source.shape[-1]) == NARROW_LANES:
        return "KRS8C4"
    x = next(region for region in block.reads if region.source.name == "Xp")
    f = block.iter_vars[3].var   # the output channel
    return "KRS32" if any(v.same_as(f) for v in tvm.tirx.analysis.undefined_vars(x.region[1].min)) else "KRSC"


def requantize(acc: np.ndarray, bias: np.ndarray, scale: np.ndarray, residual: np.ndarray | None = None, *,
               relu: bool = True, channel_axis: int = 1) -> np.ndarray:
    """The epilogue on int accumulators (see the module docstring): int8, rounding half to even, saturating."""
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    t = (acc.astype(np.int64) + bias.reshape(shape)).astype(np.int32).astype(np.float32)
    t = np.rint(t * scale.reshape(shape).astype(np.float32)).astype(np.int64)
    if residual is not None:
        t = t + residual.astype(np.int64)
    if relu:
        t = np.maximum(t, 0)
    return np.clip(t, -128, 127).astype(np.int8)


def check_scale(scale: np.ndarray) -> None:
    """One-line ValueError for a requantisation scale that is not positive and finite."""
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise ValueError(f"scale must be positive and finite, got min {float(np.min(scale))!r}")


def _module(n, c, h, w, k, r, s, geometry: ConvGeometry, relu, residual, filter_layout):
    (sh, sw), (top, bottom, left, right), (dh, dw) = geometry.stride, geometry.pad, geometry.dilation
    oh, ow = geometry.out_hw(h, w, r, s)
    cg, kg = channel_groups(c), k // LANES
    # the reduction's taps and lanes: "KRS8C4" (a plain layer only) reads S8 taps (the last of them past the window:
    # Xp is widened for them) and 4 lanes of each pixel; a grouped layer its group's C / groups channels; the others
    # all Cg*32 lanes
    depthwise = filter_layout == "KRS"   # one input channel per output channel: the reduction's lanes are 1
    cpg, kpg = c // geometry.groups, k // geometry.groups   # a grouped layer's channels a group (C and K: 32s)
    taps, lanes = (narrow_taps(s), NARROW_LANES) if filter_layout == "KRS8C4" else \
        (s, 1 if depthwise else cpg if filter_layout == "KCRS" else LANES if filter_layout == "KRS32" else cg * LANES)
    x_shape = (n, cg, h, w, LANES)
    xp_shape = (n, cg, h + top + bottom, max(w + left + right, (ow - 1) * sw + (taps - 1) * dw + 1), LANES)
    w_shape = {"KCRS32": (k, cg, r, s, LANES), "KRSC": (k, r, s, cg * LANES), "KRS8C4": (k, r, taps, lanes),
               "KCRS": (k, cpg, r, s), "KRS": (k, r, s), "KRS32": (k, r, s, LANES)}[filter_layout]
    y_shape = (n, kg, oh, ow, LANES)

    def filt(wt, f, ry, rx, rc):  # the filter's value for output channel f, tap (ry, rx), input channel rc
        if depthwise:
            return wt[f, ry, rx]
        if filter_layout == "KCRS":
            return wt[f, rc, ry, rx]
        return wt[f, rc // LANES, ry, rx, rc % LANES] if filter_layout == "KCRS32" else wt[f, ry, rx, rc]

    def channel(f, rc):  # the input channel of output channel f's rc-th input channel
        if filter_layout == "KCRS":
            return f // kpg * cpg + rc
        if filter_layout == "KRS32":   # the lanes of f's own lane group
            return f // LANES * LANES + rc
        return f + rc if depthwise else rc

    def finish(t, res):  # residual add, ReLU, saturation (t: the rounded int32 value)
        if residual:
            t = t + T.Cast("int32", res)
        if relu:
            t = T.max(t, 0)
        return T.Cast("int8", T.min(T.max(t, -128), 127))

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer(x_shape, "int8"), W: T.Buffer(w_shape, "int8"), Bias: T.Buffer((k,), "int32"),
             Scale: T.Buffer((k,), "float32"), Res: T.Buffer(y_shape, "int8"), Y: T.Buffer(y_shape, "int8")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Xp = T.sblock_alloc_buffer(xp_shape, "int8")
        Yacc = T.sblock_alloc_buffer(y_shape, "int32")
        for i0, i1, i2, i3, i4 in T.grid(*xp_shape):
            with T.sblock("pad"):
                v0, v1, v2, v3, v4 = T.axis.remap("SSSSS", [i0, i1, i2, i3, i4])
                Xp[v0, v1, v2, v3, v4] = T.if_then_else(
                    top <= v2 and v2 < h + top and left <= v3 and v3 < w + left,
                    X[v0, v1, v2 - top, v3 - left, v4], T.int8(0))
        for o0, o1, o2, o3, u0, u1, u2 in T.grid(n, oh, ow, k, r, taps, lanes):  # padded lanes (and taps) included
            with T.sblock("conv"):
                b, y, x, f, ry, rx, rc = T.axis.remap("SSSSRRR", [o0, o1, o2, o3, u0, u1, u2])
                with T.init():
                    Yacc[b, f // LANES, y, x, f % LANES] = 0
                Yacc[b, f // LANES, y, x, f % LANES] = Yacc[b, f // LANES, y, x, f % LANES] + T.Cast(
                    "int32", Xp[b, channel(f, rc) // LANES, y * sh + ry * dh, x * sw + rx * dw,
                                channel(f, rc) % LANES]) * T.Cast(
                    "int32", filt(W, f, ry, rx, rc))
        for o0, o1, o2, o3, o4 in T.grid(*y_shape):
            with T.sblock("epilogue"):
                b, fg, y, x, fl = T.axis.remap("SSSSS", [o0, o1, o2, o3, o4])
                Y[b, fg, y, x, fl] = finish(T.Cast("int32", T.nearbyint(
                    T.Cast("float32", Yacc[b, fg, y, x, fl] + Bias[fg * LANES + fl]) * Scale[fg * LANES + fl])),
                    Res[b, fg, y, x, fl])

    return tvm.IRModule({"main": main})


def conv2d_int8(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int | Sequence[int] = 1,
                pad: int | Sequence[int] = 1, *, relu: bool = True, residual: bool = False,
                filter_layout: str = "KCRS32", groups: int = 1, dilation: int | Sequence[int] = 1) -> Workload:
    """int8 convolution with the fused epilogue, NC/32HW32 (see the module docstring; ``filter_layout``: the
    filter's, one of ``FILTER_LAYOUTS``).

    The module's arguments are X, W, bias, scale, residual, Y (residual is ignored unless ``residual``). The
    reference is exact: the int8 products are summed in float64 (exact below 2^53), then ``requantize``; the output
    must match bit for bit. ``shape`` is ``NxCxHxWxKxRxSxstridexpad`` as for ``conv2d`` (the real C and K); flops
    count 2 per multiply-add on the real channels, bytes the tensors as stored (Cg*32 and Kg*32 lanes). Any C and K
    >= 1: ``make_inputs`` zeroes the lanes past C and K (a scale of 1 past K), ``reference`` reads only the first C
    and K. Any dilation and any stride and padding per axis or side (``conv2d``'s forms and shape suffixes;
    ``"KRS8C4"`` a plain layer only); one group, a depthwise layer (groups = C = K, its filter ``"KRS"``), or a
    grouped one whose C and K are multiples of 32 (its filter ``"KCRS"``: a group's output channels in whole lane
    groups read its input channels only; or ``"KRS32"`` where C = K and a group's channels divide 32, the filter the
    grouped tensor-core kernel reads); other groups are refused in one line.
    """
    geometry = check_conv_params(n, c, h, w, k, r, s, stride, pad, "NCHW", dilation=dilation, groups=groups)
    depthwise = geometry.groups == c == k > 1
    grouped = geometry.groups != 1 and not depthwise
    if grouped and (c % LANES or k % LANES):
        raise ValueError(f"conv2d_int8 takes a grouped layer whose input and output channels are multiples of "
                         f"{LANES}, or a depthwise one (groups = C = K); this layer has groups {geometry.groups} of "
                         f"{c} input and {k} output channels")
    if filter_layout not in FILTER_LAYOUTS:
        raise ValueError(f"filter_layout={filter_layout!r}: expected one of {', '.join(FILTER_LAYOUTS)}")
    if filter_layout == "KCRS32":   # the default: a depthwise or grouped layer's filter is its own
        filter_layout = "KRS" if depthwise else "KCRS" if grouped else filter_layout
    if (filter_layout == "KRS") != depthwise:
        raise ValueError(f"filter_layout={filter_layout!r}: 'KRS' is the filter of a depthwise layer (groups = C = K) "
                         f"and the only one it takes")
    if (filter_layout in ("KCRS", "KRS32")) != grouped:
        raise ValueError(f"filter_layout={filter_layout!r}: 'KCRS' and 'KRS32' are the filters of a grouped layer "
                         f"(1 < groups < C) and the only ones it takes")
    if filter_layout == "KRS32" and (c != k or LANES % (c // geometry.groups)):
        raise ValueError(f"filter_layout='KRS32' packs a grouped layer whose input and output channels are as many "
                         f"and whose groups' channels divide {LANES}; this layer has {c} input and {k} output "
                         f"channels in {geometry.groups} groups")
    if filter_layout == "KRS8C4":
        geometry.require_plain("conv2d_int8 with filter_layout='KRS8C4'")
    if filter_layout == "KRS8C4" and c > NARROW_LANES:
        raise ValueError(f"filter_layout='KRS8C4' holds at most {NARROW_LANES} input channels, got c={c}")
    pack, unpack = {"KCRS32": (kcrs_to_kc32rs32, kc32rs32_to_kcrs), "KRSC": (kcrs_to_krsc, krsc_to_kcrs),
                    "KRS8C4": (kcrs_to_krs8c4, lambda wt, channels: krs8c4_to_kcrs(wt, channels, s)),
                    "KCRS": (np.ascontiguousarray, lambda wt, channels: wt),
                    "KRS": (lambda wt: np.ascontiguousarray(wt[:, 0]), lambda wt, channels: wt[:, None]),
                    "KRS32": (kcrs_to_krs32, lambda wt, channels: krs32_to_kcrs(wt, channels // geometry.groups))
                    }[filter_layout]
    check_positive(n=n)
    oh, ow = geometry.out_hw(h, w, r, s)
    kp = channel_groups(k) * LANES   # the output channels as stored
    y_shape = (n, kp // LANES, oh, ow, LANES)
    cpg = c // geometry.groups   # input channels a group
    red, stored = cpg * r * s, channel_groups(c) * LANES

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = rng.integers(-128, 128, (n, c, h, w), dtype=np.int8)
        wt = rng.integers(-128, 128, (k, cpg, r, s), dtype=np.int8)
        bias = rng.integers(-2 ** 16, 2 ** 16, k, dtype=np.int32)
        # outputs of a few tens: acc has a standard deviation of ~74^2 sqrt(red) (uniform int8 operands)
        scale = (rng.uniform(0.5, 1.5, k) * 40.0 / (74.0 ** 2 * np.sqrt(red))).astype(np.float32)
        res = rng.integers(-128, 128, y_shape, dtype=np.int8)
        if kp > k:   # the lanes past K: zero filters, bias and residual, a scale of 1 (see the module docstring)
            wt, bias = np.pad(wt, [(0, kp - k), (0, 0), (0, 0), (0, 0)]), np.pad(bias, (0, kp - k))
            scale, res = np.pad(scale, (0, kp - k), constant_values=1.0), nchw_to_nchw32(nchw32_to_nchw(res, k))
        return [nchw_to_nchw32(x), pack(wt), bias, scale, res]

    def reference(x: np.ndarray, wt: np.ndarray, bias: np.ndarray, scale: np.ndarray, res: np.ndarray) -> np.ndarray:
        check_scale(scale)
        acc = conv2d_reference(nchw32_to_nchw(x, c), unpack(wt, c)[:k], stride=geometry.stride, pad=geometry.pad,
                               dilation=geometry.dilation, groups=geometry.groups)
        acc = np.rint(acc).astype(np.int64)  # exact: every partial sum is an integer below 2^53
        out = requantize(acc, bias[:k], scale[:k], nchw32_to_nchw(res, k) if residual else None, relu=relu)
        return nchw_to_nchw32(out)   # the lanes past K: zero

    return Workload(
        name="conv2d",
        sizes={"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride": geometry.stride[0],
               "pad": geometry.pad[0]},
        dtype="int8", mod=_module(n, c, h, w, kp, r, s, geometry, relu, residual, filter_layout),
        make_inputs=make_inputs, reference=reference, out_shape=y_shape, out_dtype="int8",
        flops=2 * n * k * oh * ow * red,
        bytes=n * stored * h * w + kp * (LANES if filter_layout == "KRS32" else cpg if depthwise or grouped else
                                         stored) * r * s + kp * 8
        + n * kp * oh * ow * (2 if residual else 1),
        tolerance={"rtol": 0.0, "atol": 0.0}, layout="NCHW32", extra=geometry.extra(),
    )

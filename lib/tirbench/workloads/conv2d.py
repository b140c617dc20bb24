"""2-D convolution of any shape in three layouts: Y = conv(pad(X), W), stride and zero padding on both sides.

Layouts (``layout``), each naming the input, filter and output storage:

======  ==================  ===============  ====================
layout  input X             filter W         output Y
======  ==================  ===============  ====================
NCHW    (N, C, H, W)        (K, C, R, S)     (N, K, OH, OW)
NHWC    (N, H, W, C)        (R, S, C, K)     (N, OH, OW, K)
HWCN    (H, W, C, N)        (R, S, C, K)     (OH, OW, K, N)
======  ==================  ===============  ====================

Every module has two blocks: ``"pad"`` writes the zero-padded input into an intermediate buffer ``Xp`` (a schedule
inlines it into whatever reads it), ``"conv"`` accumulates over the input channels and the kernel window (for NCHW
in the order rc, ry, rx; for the channels-last layouts ry, rx, rc, so the innermost reduction walks contiguous
channels). The spatial loops of ``"conv"`` follow the output layout.
"""
from __future__ import annotations

import numpy as np
from tvm.script import ir as I
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array

LAYOUTS = ("NCHW", "NHWC", "HWCN")


def check_conv_params(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, pad: int,
                      layout: str) -> None:
    """One-line ValueError naming the parameter for sizes, stride, padding or layout a convolution cannot take."""
    check_positive(n=n, c=c, h=h, w=w, k=k, r=r, s=s, stride=stride)
    if not isinstance(pad, (int, np.integer)) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"pad must be a non-negative integer, got {pad!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    for name, size, window in (("r", h, r), ("s", w, s)):
        if window > size + 2 * pad:
            raise ValueError(f"kernel {name}={window} is larger than the padded input ({size} + 2*{pad})")
        if pad >= window:
            raise ValueError(f"pad={pad} must be smaller than the kernel {name}={window} "
                             f"(a wider border only adds outputs that see nothing but zeros)")


def output_size(size: int, window: int, stride: int, pad: int) -> int:
    """Output rows (or columns) of a convolution: floor((size + 2 pad - window) / stride) + 1."""
    return (size + 2 * pad - window) // stride + 1


def to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """An activation (input or output) in ``layout`` as NCHW."""
    return {"NCHW": x, "NHWC": x.transpose(0, 3, 1, 2), "HWCN": x.transpose(3, 2, 0, 1)}[layout]


def from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """An NCHW activation stored in ``layout`` (contiguous)."""
    return np.ascontiguousarray({"NCHW": x, "NHWC": x.transpose(0, 2, 3, 1), "HWCN": x.transpose(2, 3, 1, 0)}[layout])


def filter_to_kcrs(wt: np.ndarray, layout: str) -> np.ndarray:
    """A filter in ``layout``'s storage as (K, C, R, S)."""
    return wt if layout == "NCHW" else wt.transpose(3, 2, 0, 1)


def filter_from_kcrs(wt: np.ndarray, layout: str) -> np.ndarray:
    """A (K, C, R, S) filter stored for ``layout`` (contiguous)."""
    return np.ascontiguousarray(wt if layout == "NCHW" else wt.transpose(2, 3, 1, 0))


def conv2d_reference(x: np.ndarray, wt: np.ndarray, *, stride: int, pad: int) -> np.ndarray:
    """float64 NCHW convolution: one matrix product per kernel tap, (N*OH*OW, C) @ (C, K), summed."""
    n, c, h, w = x.shape
    k, _, r, s = wt.shape
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    xp = np.pad(x.astype(np.float64).transpose(0, 2, 3, 1), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    wt64 = wt.astype(np.float64)
    out = np.zeros((n * oh * ow, k))
    for ry in range(r):
        for rx in range(s):
            tap = xp[:, ry:ry + stride * (oh - 1) + 1:stride, rx:rx + stride * (ow - 1) + 1:stride, :]
            out += tap.reshape(n * oh * ow, c) @ wt64[:, :, ry, rx].T
    return out.reshape(n, oh, ow, k).transpose(0, 3, 1, 2)


def _module(n, c, h, w, k, r, s, stride, pad, layout, dtype):
    """The TVMScript module of one layout (blocks "pad" and "conv")."""
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    hp, wp = h + 2 * pad, w + 2 * pad

    if layout == "NCHW":
        @I.ir_module
        class Conv2dNCHW:
            @T.prim_func(s_tir=True)
            def main(X: T.Buffer((n, c, h, w), dtype), W: T.Buffer((k, c, r, s), dtype),
                     Y: T.Buffer((n, k, oh, ow), "float32")):
                T.func_attr({"global_symbol": "main", "tirx.noalias": True})
                Xp = T.sblock_alloc_buffer((n, c, hp, wp), dtype)
                for b, ci, yy, xx in T.grid(n, c, hp, wp):
                    with T.sblock("pad"):
                        vb, vc, vy, vx = T.axis.remap("SSSS", [b, ci, yy, xx])
                        Xp[vb, vc, vy, vx] = T.if_then_else(
                            pad <= vy and vy < h + pad and pad <= vx and vx < w + pad,
                            X[vb, vc, vy - pad, vx - pad], T.Cast(dtype, 0))
                for b, f, yy, xx, rc, ry, rx in T.grid(n, k, oh, ow, c, r, s):
                    with T.sblock("conv"):
                        vb, vf, vy, vx, vc, vr, vs = T.axis.remap("SSSSRRR", [b, f, yy, xx, rc, ry, rx])
                        with T.init():
                            Y[vb, vf, vy, vx] = T.float32(0)
                        Y[vb, vf, vy, vx] = Y[vb, vf, vy, vx] + \
                            Xp[vb, vc, vy * stride + vr, vx * stride + vs] * W[vf, vc, vr, vs]
        return Conv2dNCHW

    if layout == "NHWC":
        @I.ir_module
        class Conv2dNHWC:
            @T.prim_func(s_tir=True)
            def main(X: T.Buffer((n, h, w, c), dtype), W: T.Buffer((r, s, c, k), dtype),
                     Y: T.Buffer((n, oh, ow, k), "float32")):
                T.func_attr({"global_symbol": "main", "tirx.noalias": True})
                Xp = T.sblock_alloc_buffer((n, hp, wp, c), dtype)
                for b, yy, xx, ci in T.grid(n, hp, wp, c):
                    with T.sblock("pad"):
                        vb, vy, vx, vc = T.axis.remap("SSSS", [b, yy, xx, ci])
                        Xp[vb, vy, vx, vc] = T.if_then_else(
                            pad <= vy and vy < h + pad and pad <= vx and vx < w + pad,
                            X[vb, vy - pad, vx - pad, vc], T.Cast(dtype, 0))
                for b, yy, xx, f, ry, rx, rc in T.grid(n, oh, ow, k, r, s, c):
                    with T.sblock("conv"):
                        vb, vy, vx, vf, vr, vs, vc = T.axis.remap("SSSSRRR", [b, yy, xx, f, ry, rx, rc])
                        with T.init():
                            Y[vb, vy, vx, vf] = T.float32(0)
                        Y[vb, vy, vx, vf] = Y[vb, vy, vx, vf] + \
                            Xp[vb, vy * stride + vr, vx * stride + vs, vc] * W[vr, vs, vc, vf]
        return Conv2dNHWC

    @I.ir_module
    class Conv2dHWCN:
        @T.prim_func(s_tir=True)
        def main(X: T.Buffer((h, w, c, n), dtype), W: T.Buffer((r, s, c, k), dtype),
                 Y: T.Buffer((oh, ow, k, n), "float32")):
            T.func_attr({"global_symbol": "main", "tirx.noalias": True})
            Xp = T.sblock_alloc_buffer((hp, wp, c, n), dtype)
            for yy, xx, ci, b in T.grid(hp, wp, c, n):
                with T.sblock("pad"):
                    vy, vx, vc, vb = T.axis.remap("SSSS", [yy, xx, ci, b])
                    Xp[vy, vx, vc, vb] = T.if_then_else(
                        pad <= vy and vy < h + pad and pad <= vx and vx < w + pad,
                        X[vy - pad, vx - pad, vc, vb], T.Cast(dtype, 0))
            for yy, xx, f, b, ry, rx, rc in T.grid(oh, ow, k, n, r, s, c):
                with T.sblock("conv"):
                    vy, vx, vf, vb, vr, vs, vc = T.axis.remap("SSSSRRR", [yy, xx, f, b, ry, rx, rc])
                    with T.init():
                        Y[vy, vx, vf, vb] = T.float32(0)
                    Y[vy, vx, vf, vb] = Y[vy, vx, vf, vb] + \
                        W[vr, vs, vc, vf] * Xp[vy * stride + vr, vx * stride + vs, vc, vb]
    return Conv2dHWCN


def conv2d(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int = 1, pad: int = 1, *,
           layout: str = "NCHW", dtype: str = "float32") -> Workload:
    """A batch of ``n`` images of ``c`` x ``h`` x ``w`` convolved with ``k`` filters of ``c`` x ``r`` x ``s``.

    ``shape`` is ``NxCxHxWxKxRxSxstridexpad`` whatever the layout (the layout goes in the variant name). The
    output is float32; the reference is float64 (``conv2d_reference``) on NCHW copies of the inputs.
    """
    check_conv_params(n, c, h, w, k, r, s, stride, pad, layout)
    check_dtype(dtype, ("float32",))
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    x_nchw, w_kcrs = (n, c, h, w), (k, c, r, s)

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = random_array(rng, x_nchw, dtype)
        wt = random_array(rng, w_kcrs, dtype)
        return [from_nchw(x, layout), filter_from_kcrs(wt, layout)]

    def reference(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
        out = conv2d_reference(to_nchw(x, layout), filter_to_kcrs(wt, layout), stride=stride, pad=pad)
        return from_nchw(out.astype(np.float32), layout)

    itemsize = np.dtype(dtype).itemsize
    red = c * r * s
    return Workload(
        name="conv2d",
        sizes={"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride": stride, "pad": pad},
        dtype=dtype, mod=_module(n, c, h, w, k, r, s, stride, pad, layout, dtype),
        make_inputs=make_inputs, reference=reference,
        out_shape=tuple(from_nchw(np.empty((n, k, oh, ow), np.int8), layout).shape), out_dtype="float32",
        flops=2 * n * k * oh * ow * red, bytes=(n * c * h * w + k * red) * itemsize + n * k * oh * ow * 4,
        # as for GEMM: fp32 accumulation over red = c*r*s products differs from float64 by ~1e-7 * red at most
        tolerance={"rtol": 1e-3, "atol": 1e-5 * red}, layout=layout,
    )

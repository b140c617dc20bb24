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

from collections.abc import Callable

import numpy as np
import tvm
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


#: Per layout, the NCHW axes of an activation in storage order.
_NCHW_AXES = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1), "HWCN": (2, 3, 1, 0)}


def to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """An activation (input or output) in ``layout`` as NCHW."""
    return x.transpose(np.argsort(_NCHW_AXES[layout]))


def from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """An NCHW activation stored in ``layout`` (contiguous)."""
    return np.ascontiguousarray(x.transpose(_NCHW_AXES[layout]))


def stored_shape(nchw_shape: tuple[int, int, int, int], layout: str) -> tuple[int, ...]:
    """The shape of an activation of NCHW shape ``nchw_shape`` stored in ``layout`` (no array is made)."""
    return tuple(nchw_shape[axis] for axis in _NCHW_AXES[layout])


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


#: Per layout, the axes in storage order of X (n, c, y, x), W (k, c, r, s) and Y (n, k, y, x), and the reduction
#: order of "conv" (its spatial loops follow Y's order).
_ORDER = {"NCHW": ("ncyx", "kcrs", "nkyx", "crs"), "NHWC": ("nyxc", "rsck", "nyxk", "rsc"),
          "HWCN": ("yxcn", "rsck", "yxkn", "rsc")}


def _shapes(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, pad: int,
            layout: str) -> tuple[tuple[int, ...], ...]:
    """(X, padded X, W, Y, reduction) shapes, each in ``layout``'s storage order (the reduction in "conv"'s order)."""
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    x_order, w_order, y_order, red_order = _ORDER[layout]
    ext = {"n": n, "c": c, "k": k, "r": r, "s": s}
    return (tuple({**ext, "y": h, "x": w}[a] for a in x_order),
            tuple({**ext, "y": h + 2 * pad, "x": w + 2 * pad}[a] for a in x_order),
            tuple(ext[a] for a in w_order),
            tuple({**ext, "y": oh, "x": ow}[a] for a in y_order),
            tuple(ext[a] for a in red_order))


def _indexers(layout: str, stride: int, pad: int) -> tuple[Callable[..., tuple], ...]:
    """Index helpers, evaluated while the script is parsed (block variables in storage order -> indices):
    ``unpadded`` (X's indices of an element of Xp), ``pad_yx`` (an Xp element's row and column) and ``window``
    (the Xp and W indices of one output element and reduction step)."""
    x_order, w_order, y_order, red_order = _ORDER[layout]

    def unpadded(*xp_vars):
        at = dict(zip(x_order, xp_vars))
        return tuple(at[a] - pad if a in "yx" else at[a] for a in x_order)

    def pad_yx(*xp_vars):
        at = dict(zip(x_order, xp_vars))
        return at["y"], at["x"]

    def window(o0, o1, o2, o3, u0, u1, u2):
        at = {**dict(zip(y_order, (o0, o1, o2, o3))), **dict(zip(red_order, (u0, u1, u2)))}
        xp = {"n": at["n"], "c": at["c"], "y": at["y"] * stride + at["r"], "x": at["x"] * stride + at["s"]}
        return tuple(xp[a] for a in x_order), tuple(at[a] for a in w_order)

    return unpadded, pad_yx, window


def _module(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, pad: int, layout: str,
            dtype: str) -> tvm.IRModule:
    """The TVMScript module of one layout and dtype: blocks "pad" and "conv", and for float16 a "cast" block.

    float32: "conv" accumulates straight into Y. float16: "conv" accumulates the float32 products of the half
    inputs into a float32 buffer ``Yacc``, and "cast" rounds it into the half output Y (what cuDNN does).
    """
    x_shape, xp_shape, w_shape, y_shape, red_shape = _shapes(n, c, h, w, k, r, s, stride, pad, layout)
    unpadded, pad_yx, window = _indexers(layout, stride, pad)
    cast = dtype != "float32"
    out_dtype = dtype if cast else "float32"

    def acc(v):  # the float32 value of an input element
        return T.Cast("float32", v) if cast else v

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer(x_shape, dtype), W: T.Buffer(w_shape, dtype), Y: T.Buffer(y_shape, out_dtype)):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Xp = T.sblock_alloc_buffer(xp_shape, dtype)
        if cast:
            Yacc = T.sblock_alloc_buffer(y_shape, "float32")
        else:
            Yacc = T.meta_var(Y)  # accumulate in Y itself (meta_var: no rebinding, Y keeps its name)
        for i0, i1, i2, i3 in T.grid(*xp_shape):
            with T.sblock("pad"):
                v0, v1, v2, v3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
                vy, vx = T.meta_var(pad_yx(v0, v1, v2, v3))
                Xp[v0, v1, v2, v3] = T.if_then_else(
                    pad <= vy and vy < h + pad and pad <= vx and vx < w + pad,
                    X[unpadded(v0, v1, v2, v3)], T.Cast(dtype, 0))
        for o0, o1, o2, o3, u0, u1, u2 in T.grid(*y_shape, *red_shape):
            with T.sblock("conv"):
                v0, v1, v2, v3, r0, r1, r2 = T.axis.remap("SSSSRRR", [o0, o1, o2, o3, u0, u1, u2])
                xi, wi = T.meta_var(window(v0, v1, v2, v3, r0, r1, r2))
                with T.init():
                    Yacc[v0, v1, v2, v3] = T.float32(0)
                if layout == "HWCN":
                    Yacc[v0, v1, v2, v3] = Yacc[v0, v1, v2, v3] + acc(W[wi]) * acc(Xp[xi])
                else:
                    Yacc[v0, v1, v2, v3] = Yacc[v0, v1, v2, v3] + acc(Xp[xi]) * acc(W[wi])
        if cast:
            for o0, o1, o2, o3 in T.grid(*y_shape):
                with T.sblock("cast"):
                    v0, v1, v2, v3 = T.axis.remap("SSSS", [o0, o1, o2, o3])
                    Y[v0, v1, v2, v3] = T.Cast(dtype, Yacc[v0, v1, v2, v3])

    return tvm.IRModule({"main": main})


def conv2d(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int = 1, pad: int = 1, *,
           layout: str = "NCHW", dtype: str = "float32") -> Workload:
    """A batch of ``n`` images of ``c`` x ``h`` x ``w`` convolved with ``k`` filters of ``c`` x ``r`` x ``s``.

    ``shape`` is ``NxCxHxWxKxRxSxstridexpad`` whatever the layout (the layout goes in the variant name). float32
    inputs give a float32 output; float16 inputs are accumulated in float32 and rounded to a float16 output. The
    reference is float64 (``conv2d_reference``) on NCHW copies of the inputs.
    """
    check_conv_params(n, c, h, w, k, r, s, stride, pad, layout)
    check_dtype(dtype, ("float32", "float16"))
    out_dtype = "float32" if dtype == "float32" else dtype
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    x_nchw, w_kcrs = (n, c, h, w), (k, c, r, s)

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = random_array(rng, x_nchw, dtype)
        wt = random_array(rng, w_kcrs, dtype)
        return [from_nchw(x, layout), filter_from_kcrs(wt, layout)]

    def reference(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
        out = conv2d_reference(to_nchw(x, layout), filter_to_kcrs(wt, layout), stride=stride, pad=pad)
        return from_nchw(out.astype(np.float32), layout)  # compared in float32 whatever the output dtype

    itemsize = np.dtype(dtype).itemsize
    red = c * r * s
    return Workload(
        name="conv2d",
        sizes={"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride": stride, "pad": pad},
        dtype=dtype, mod=_module(n, c, h, w, k, r, s, stride, pad, layout, dtype),
        make_inputs=make_inputs, reference=reference,
        out_shape=stored_shape((n, k, oh, ow), layout), out_dtype=out_dtype,
        flops=2 * n * k * oh * ow * red,
        bytes=(n * c * h * w + k * red) * itemsize + n * k * oh * ow * np.dtype(out_dtype).itemsize,
        # as for GEMM: fp32 accumulation over red = c*r*s products differs from float64 by ~1e-7 * red at most;
        # a float16 output adds its rounding, half an ulp: 2**-11 of the value (rtol 2e-3 leaves 4x margin)
        tolerance={"rtol": 1e-3 if dtype == "float32" else 2e-3, "atol": 1e-5 * red}, layout=layout,
    )

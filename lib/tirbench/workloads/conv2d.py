"""2-D convolution of any shape in three layouts: Y = conv(pad(X), W), with strides, zero padding, dilation and groups.

Layouts (``layout``), each naming the input, filter and output storage (G = ``groups``):

======  ==================  ===============  ====================
layout  input X             filter W         output Y
======  ==================  ===============  ====================
NCHW    (N, C, H, W)        (K, C/G, R, S)   (N, K, OH, OW)
NHWC    (N, H, W, C)        (R, S, C/G, K)   (N, OH, OW, K)
HWCN    (H, W, C, N)        (R, S, C/G, K)   (OH, OW, K, N)
======  ==================  ===============  ====================

The semantics are ``torch.nn.functional.conv2d``'s: output channel k of group k // (K/G) reads the input channels
of that group only (G = C: depthwise); tap (ry, rx) of output (oy, ox) reads the padded input at row
oy * stride_h + ry * dilation_h and column ox * stride_w + rx * dilation_w; padding may differ on each of the four
sides (top, bottom, left, right), which torch's ``padding`` cannot say (``F.pad`` first does).

Every module has two blocks: ``"pad"`` writes the zero-padded input into an intermediate buffer ``Xp`` (a schedule
inlines it into whatever reads it), ``"conv"`` accumulates over the input channels of the group and the kernel
window (for NCHW in the order rc, ry, rx; for the channels-last layouts ry, rx, rc, so the innermost reduction walks
contiguous channels). The spatial loops of ``"conv"`` follow the output layout.

An epilogue (``ConvEpilogue``: ``bias``, ``residual``, ``relu``, as a network's conv layer with its bias or folded
batch norm, ResNet's shortcut and activation) adds a block ``"conv_epilogue"`` after ``"conv"``, which then
accumulates into a float32 buffer ``Yacc``: Y = max(Yacc + Bias[k] + Res, 0) in float32 (Bias: one value per output
channel, shape (K,); Res: the output's shape and layout; a float16 layer takes its ReLU in "cast": ``_module``). The
module's arguments: X, W, then Bias and Res where the epilogue has them, then Y. A kernel family's schedule then
inlines the block into the kernel's output store (``schedules.conv.epilogue``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, check_positive, random_array
from tirbench.workloads.conv_geometry import ConvGeometry, conv_geometry

LAYOUTS = ("NCHW", "NHWC", "HWCN")


def check_conv_params(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int | Sequence[int],
                      pad: int | Sequence[int], layout: str, *, dilation: int | Sequence[int] = 1,
                      groups: int = 1) -> ConvGeometry:
    """One-line ValueError naming the parameter for sizes, stride, padding, dilation, groups or layout a convolution
    cannot take; the ``ConvGeometry`` otherwise."""
    check_positive(n=n, c=c, h=h, w=w, k=k, r=r, s=s)
    g = conv_geometry(stride, pad, dilation, groups)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    for name, channels in (("c", c), ("k", k)):
        if channels % g.groups:
            raise ValueError(f"groups={g.groups} must divide {name}={channels}")
    t, b, left, right = g.pad
    for name, size, window, dil, before, after in (("r", h, r, g.dilation[0], t, b),
                                                    ("s", w, s, g.dilation[1], left, right)):
        span = dil * (window - 1) + 1
        if g.plain:
            if window > size + 2 * before:
                raise ValueError(f"kernel {name}={window} is larger than the padded input ({size} + 2*{before})")
            if before >= window:
                raise ValueError(f"pad={before} must be smaller than the kernel {name}={window} "
                                 f"(a wider border only adds outputs that see nothing but zeros)")
        elif span > size + before + after:
            raise ValueError(f"kernel {name}={window} (dilation {dil}: {span} wide) is larger than the padded input "
                             f"({size} + {before} + {after}): no output")
        elif max(before, after) >= span:
            raise ValueError(f"padding {max(before, after)} must be smaller than the kernel {name}={window} "
                             f"(dilation {dil}: {span} wide; a wider border only adds outputs of zeros)")
    return g


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


def conv2d_reference(x: np.ndarray, wt: np.ndarray, *, stride: int | Sequence[int], pad: int | Sequence[int],
                     dilation: int | Sequence[int] = 1, groups: int = 1) -> np.ndarray:
    """float64 NCHW convolution with torch's semantics (``conv_geometry`` for the forms of ``stride``, ``pad`` and
    ``dilation``; ``wt`` (K, C/groups, R, S)): one matrix product per kernel tap and group, (N*OH*OW, C/groups) @
    (C/groups, K/groups), summed over the taps."""
    g = conv_geometry(stride, pad, dilation, groups)
    n, c, h, w = x.shape
    k, cg, r, s = wt.shape
    (sh, sw), (t, b, left, right), (dh, dw) = g.stride, g.pad, g.dilation
    oh, ow = g.out_hw(h, w, r, s)
    xp = np.pad(x.astype(np.float64).transpose(0, 2, 3, 1), ((0, 0), (t, b), (left, right), (0, 0)))
    wt64 = wt.astype(np.float64)
    out = np.zeros((n * oh * ow, k))
    for ry in range(r):
        for rx in range(s):
            y0, x0 = ry * dh, rx * dw
            tap = xp[:, y0:y0 + sh * (oh - 1) + 1:sh, x0:x0 + sw * (ow - 1) + 1:sw, :].reshape(n * oh * ow, c)
            if groups == 1:
                out += tap @ wt64[:, :, ry, rx].T
            else:   # (G, P, C/G) @ (G, C/G, K/G) -> (G, P, K/G), output channel k = group * K/G + j
                per_group = tap.reshape(-1, groups, cg).transpose(1, 0, 2) @ \
                    wt64[:, :, ry, rx].reshape(groups, k // groups, cg).transpose(0, 2, 1)
                out += per_group.transpose(1, 0, 2).reshape(-1, k)
    return out.reshape(n, oh, ow, k).transpose(0, 3, 1, 2)


#: Per layout, the axes in storage order of X (n, c, y, x), W (k, c, r, s) and Y (n, k, y, x), and the reduction
#: order of "conv" (its spatial loops follow Y's order).
_ORDER = {"NCHW": ("ncyx", "kcrs", "nkyx", "crs"), "NHWC": ("nyxc", "rsck", "nyxk", "rsc"),
          "HWCN": ("yxcn", "rsck", "yxkn", "rsc")}


def _shapes(n: int, c: int, h: int, w: int, k: int, r: int, s: int, g: ConvGeometry,
            layout: str) -> tuple[tuple[int, ...], ...]:
    """(X, padded X, W, Y, reduction) shapes, each in ``layout``'s storage order (the reduction in "conv"'s order;
    W and the reduction over the C/groups channels of a group)."""
    oh, ow = g.out_hw(h, w, r, s)
    t, b, left, right = g.pad
    x_order, w_order, y_order, red_order = _ORDER[layout]
    ext = {"n": n, "c": c // g.groups, "k": k, "r": r, "s": s}
    return (tuple({**ext, "c": c, "y": h, "x": w}[a] for a in x_order),
            tuple({**ext, "c": c, "y": h + t + b, "x": w + left + right}[a] for a in x_order),
            tuple(ext[a] for a in w_order),
            tuple({**ext, "y": oh, "x": ow}[a] for a in y_order),
            tuple(ext[a] for a in red_order))


def _indexers(layout: str, c: int, k: int, g: ConvGeometry) -> tuple[Callable[..., tuple], ...]:
    """Index helpers, evaluated while the script is parsed (block variables in storage order -> indices):
    ``unpadded`` (X's indices of an element of Xp), ``pad_yx`` (an Xp element's row and column) and ``window``
    (the Xp and W indices of one output element and reduction step). A stride, dilation or group of 1 adds no term:
    a plain layer's indices are what they were before those existed."""
    x_order, w_order, y_order, red_order = _ORDER[layout]
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, left = g.pad[0], g.pad[2]

    def unpadded(*xp_vars):
        at = dict(zip(x_order, xp_vars))
        return tuple({"y": at["y"] - top, "x": at["x"] - left}.get(a, at[a]) for a in x_order)

    def pad_yx(*xp_vars):
        at = dict(zip(x_order, xp_vars))
        return at["y"], at["x"]

    def tap(out, step, rv, dil):   # the padded input's row (column) of output row (column) out at tap rv
        return out * step + (rv if dil == 1 else rv * dil)

    def window(o0, o1, o2, o3, u0, u1, u2):
        at = {**dict(zip(y_order, (o0, o1, o2, o3))), **dict(zip(red_order, (u0, u1, u2)))}
        channel = at["c"] if g.groups == 1 else at["k"] // (k // g.groups) * (c // g.groups) + at["c"]
        xp = {"n": at["n"], "c": channel, "y": tap(at["y"], sh, at["r"], dh), "x": tap(at["x"], sw, at["s"], dw)}
        return tuple(xp[a] for a in x_order), tuple(at[a] for a in w_order)

    return unpadded, pad_yx, window


@dataclass(frozen=True)
class ConvEpilogue:
    """What a ``conv2d`` workload does to its output before storing it, in this order: add a ``bias`` per output
    channel, add a ``residual`` of the output's shape, ``relu``. False (none) for a plain convolution."""

    bias: bool = False
    residual: bool = False
    relu: bool = False

    def __bool__(self) -> bool:
        return self.bias or self.residual or self.relu

    @property
    def tag(self) -> str:
        """The operations joined by '_': "bias_residual_relu", "bias", "" for none."""
        return "_".join(op for op in ("bias", "residual", "relu") if getattr(self, op))

    def apply(self, out: np.ndarray, bias: np.ndarray | None, residual: np.ndarray | None) -> np.ndarray:
        """The epilogue in float64 on an NCHW output (``bias`` (K,), ``residual`` NCHW, each None where absent)."""
        out = out + bias.astype(np.float64).reshape(1, -1, 1, 1) if self.bias else out
        out = out + residual.astype(np.float64) if self.residual else out
        return np.maximum(out, 0) if self.relu else out


def _module(n: int, c: int, h: int, w: int, k: int, r: int, s: int, g: ConvGeometry, layout: str,
            dtype: str, epilogue: ConvEpilogue = ConvEpilogue()) -> tvm.IRModule:
    """The TVMScript module of one layout and dtype: blocks "pad" and "conv", with an ``epilogue`` a block
    "conv_epilogue", and for float16 a "cast" block.

    float32: "conv" accumulates straight into Y (with an epilogue, into ``Yacc``, and "conv_epilogue" writes Y).
    float16: "conv" accumulates the float32 products of the half inputs into a float32 buffer ``Yacc``, and "cast"
    rounds it (or the epilogue's float32 sum ``Yepi``) into the half output Y (what cuDNN does). Its ReLU is taken
    there, on the rounded value (the same number: rounding keeps the sign and 0): TVM 0.27's CUDA code generation
    cannot broadcast a float32 constant over the 8 lanes of a 16-byte half store (``make_ulonglong4`` of 8 floats),
    and it can a half one. So a float16 "conv_epilogue" only adds the bias and the residual.
    """
    x_shape, xp_shape, w_shape, y_shape, red_shape = _shapes(n, c, h, w, k, r, s, g, layout)
    unpadded, pad_yx, window = _indexers(layout, c, k, g)
    top, left = g.pad[0], g.pad[2]
    cast = dtype != "float32"
    out_dtype = dtype if cast else "float32"
    channel = _ORDER[layout][2].index("k")   # the output channel's axis in Y
    relu_in_block = epilogue.relu and not cast
    block = epilogue.bias or epilogue.residual or relu_in_block   # "conv_epilogue" exists

    def acc(v):  # the float32 value of an input element
        return T.Cast("float32", v) if cast else v

    def finish(t, bias, res):  # "conv_epilogue" on the float32 accumulator t
        t = t + acc(bias) if epilogue.bias else t
        t = t + acc(res) if epilogue.residual else t
        return T.max(t, T.float32(0)) if relu_in_block else t

    def rounded(t):  # "cast": the half value, and a float16 epilogue's ReLU
        return T.max(T.Cast(dtype, t), T.Cast(dtype, 0)) if epilogue.relu else T.Cast(dtype, t)

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer(x_shape, dtype), W: T.Buffer(w_shape, dtype), Bias: T.Buffer((k,), dtype),
             Res: T.Buffer(y_shape, dtype), Y: T.Buffer(y_shape, out_dtype)):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Xp = T.sblock_alloc_buffer(xp_shape, dtype)
        if cast or block:
            Yacc = T.sblock_alloc_buffer(y_shape, "float32")
        else:
            Yacc = T.meta_var(Y)  # accumulate in Y itself (meta_var: no rebinding, Y keeps its name)
        if block and cast:
            Yepi = T.sblock_alloc_buffer(y_shape, "float32")
        elif block:
            Yepi = T.meta_var(Y)
        else:
            Yepi = T.meta_var(Yacc)   # "cast" rounds Yacc
        for i0, i1, i2, i3 in T.grid(*xp_shape):
            with T.sblock("pad"):
                v0, v1, v2, v3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
                vy, vx = T.meta_var(pad_yx(v0, v1, v2, v3))
                Xp[v0, v1, v2, v3] = T.if_then_else(
                    top <= vy and vy < h + top and left <= vx and vx < w + left,
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
        if block:
            for o0, o1, o2, o3 in T.grid(*y_shape):
                with T.sblock("conv_epilogue"):
                    v0, v1, v2, v3 = T.axis.remap("SSSS", [o0, o1, o2, o3])
                    vk = T.meta_var((v0, v1, v2, v3)[channel])
                    Yepi[v0, v1, v2, v3] = finish(Yacc[v0, v1, v2, v3], Bias[vk], Res[v0, v1, v2, v3])
        if cast:
            for o0, o1, o2, o3 in T.grid(*y_shape):
                with T.sblock("cast"):
                    v0, v1, v2, v3 = T.axis.remap("SSSS", [o0, o1, o2, o3])
                    Y[v0, v1, v2, v3] = rounded(Yepi[v0, v1, v2, v3])

    unused = {"Bias": not epilogue.bias, "Res": not epilogue.residual}
    params = [p for p in main.params if not unused.get(str(p.name), False)]
    return tvm.IRModule({"main": tvm.tirx.PrimFunc(params, main.body, main.ret_type, main.attrs)})


def conv2d(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int | Sequence[int] = 1,
           pad: int | Sequence[int] = 1, *, layout: str = "NCHW", dtype: str = "float32", groups: int = 1,
           dilation: int | Sequence[int] = 1, bias: bool = False, residual: bool = False,
           relu: bool = False) -> Workload:
    """A batch of ``n`` images of ``c`` x ``h`` x ``w`` convolved with ``k`` filters of ``c / groups`` x ``r`` x ``s``.

    ``stride``: one int or (sh, sw); ``pad``: one int, (ph, pw) (top = bottom, left = right) or (top, bottom, left,
    right); ``dilation``: one int or (dh, dw); ``groups`` divides c and k (c: depthwise). Semantics: torch's (module
    docstring). ``shape`` is ``NxCxHxWxKxRxSxstridexpad`` whatever the layout (the layout goes in the variant name),
    with stride = sh and pad = top; a layer with more appends it (``ConvGeometry.extra``): ``_g32`` groups,
    ``_d2`` (or ``_d2x1``) dilation, ``_s2x1`` a stride per axis, ``_p0x3`` a padding per axis (ph x pw) or
    ``_p0x1x0x1`` one per side (top x bottom x left x right), in that order: Inception's 1x7 with pad (0, 3) is
    ``1x768x17x17x192x1x7x1x0_p0x3``. A plain layer's shape, sizes and module are what they were before these
    arguments existed. float32 inputs give a float32 output; float16 inputs are accumulated in float32 and rounded to
    a float16 output. The reference is float64 (``conv2d_reference``) on NCHW copies of the inputs. ``flops`` count
    the C/groups input channels each output reads.

    ``bias``, ``residual``, ``relu``: the epilogue (``ConvEpilogue``; module docstring). Its inputs follow X and W
    (Bias (K,), Res in the output's layout), its reference adds them to the float64 convolution; ``bytes`` count
    their reads, ``flops`` the convolution's alone, and ``shape`` and ``name`` are the layer's. Without them the
    module, shape and name are what they were before these arguments existed.
    """
    g = check_conv_params(n, c, h, w, k, r, s, stride, pad, layout, dilation=dilation, groups=groups)
    check_dtype(dtype, ("float32", "float16"))
    out_dtype = "float32" if dtype == "float32" else dtype
    oh, ow = g.out_hw(h, w, r, s)
    x_nchw, w_kcrs = (n, c, h, w), (k, c // g.groups, r, s)
    epilogue = ConvEpilogue(bool(bias), bool(residual), bool(relu))

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = random_array(rng, x_nchw, dtype)
        wt = random_array(rng, w_kcrs, dtype)
        extra = [random_array(rng, (k,), dtype)] if epilogue.bias else []
        extra += [from_nchw(random_array(rng, (n, k, oh, ow), dtype), layout)] if epilogue.residual else []
        return [from_nchw(x, layout), filter_from_kcrs(wt, layout), *extra]

    def reference(x: np.ndarray, wt: np.ndarray, *extra: np.ndarray) -> np.ndarray:
        out = conv2d_reference(to_nchw(x, layout), filter_to_kcrs(wt, layout), stride=g.stride, pad=g.pad,
                               dilation=g.dilation, groups=g.groups)
        b = extra[0] if epilogue.bias else None
        res = to_nchw(extra[-1], layout) if epilogue.residual else None
        out = epilogue.apply(out, b, res)
        return from_nchw(out.astype(np.float32), layout)  # compared in float32 whatever the output dtype

    itemsize = np.dtype(dtype).itemsize
    red = c // g.groups * r * s
    epilogue_bytes = (k if epilogue.bias else 0) + (n * k * oh * ow if epilogue.residual else 0)
    return Workload(
        name="conv2d",
        sizes={"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride": g.stride[0], "pad": g.pad[0]},
        dtype=dtype, mod=_module(n, c, h, w, k, r, s, g, layout, dtype, epilogue),
        make_inputs=make_inputs, reference=reference,
        out_shape=stored_shape((n, k, oh, ow), layout), out_dtype=out_dtype,
        flops=2 * n * k * oh * ow * red,
        bytes=(n * c * h * w + k * red + epilogue_bytes) * itemsize + n * k * oh * ow * np.dtype(out_dtype).itemsize,
        # as for GEMM: fp32 accumulation over red = c/groups*r*s products differs from float64 by ~1e-7 * red at most;
        # a float16 output adds its rounding, half an ulp: 2**-11 of the value (rtol 2e-3 leaves 4x margin)
        tolerance={"rtol": 1e-3 if dtype == "float32" else 2e-3, "atol": 1e-5 * red}, layout=layout,
        extra=g.extra(),
    )

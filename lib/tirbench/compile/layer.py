"""The suite's layer behind a ``relax.nn.conv2d`` call: its sizes, geometry, dtype and layout read from the call, as
a ``workloads.conv2d`` workload in the layout a kernel family wants.

A call stores its tensors in one of the suite's two layouts (``LAYOUTS``): NCHW data, OIHW weights (the model's
own), or NHWC data, HWIO weights (what ``relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})``
makes: the NHWC families' (N, H, W, C) and (R, S, C, K)), its output in its data's layout.

Relax states padding as (top, left, bottom, right) (``topi.nn.get_pad_tuple``); the suite as (top, bottom, left,
right) (``workloads.conv2d.ConvGeometry``): ``layer_of`` reorders it.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from tirbench.workloads.base import Workload
from tirbench.workloads.conv2d import ConvEpilogue, conv2d
from tirbench.workloads.layers import ConvLayer

#: The dtypes the suite's conv workloads take (``workloads.conv2d``).
DTYPES = ("float32", "float16")
#: The (data, weight, output) layouts a call may have, by the suite's layout name (module docstring).
LAYOUTS = {"NCHW": ("NCHW", "OIHW", "NCHW"), "NHWC": ("NHWC", "HWIO", "NHWC")}


@dataclass(frozen=True)
class RelaxConv:
    """A Relax call's convolution: the layer (``workloads.layers.ConvLayer``: sizes and geometry) over a batch of
    ``n``, inputs of ``dtype``, written as ``out_dtype`` by the call, its tensors stored in ``layout`` (a key of
    ``LAYOUTS``)."""

    layer: ConvLayer
    n: int
    dtype: str
    out_dtype: str
    layout: str = "NCHW"

    def workload(self, layout: str, epilogue: ConvEpilogue = ConvEpilogue()) -> Workload:
        """The layer as the suite's workload stored in ``layout``, with ``epilogue`` (a one-line ValueError where it
        cannot be one)."""
        return conv2d(**self.layer.conv2d_kwargs(self.n), layout=layout, dtype=self.dtype, bias=epilogue.bias,
                      residual=epilogue.residual, relu=epilogue.relu)


def _static(expr: relax.Expr, what: str) -> tuple[int, ...]:
    """The static shape of a tensor argument, or a one-line ValueError."""
    shape = getattr(expr.ty, "shape", None)
    if shape is None or not all(isinstance(d, tvm.tirx.IntImm) for d in shape.values):
        raise ValueError(f"conv2d {what} has no static shape ({expr.ty})")
    return tuple(int(d) for d in shape.values)


def is_conv2d(expr: relax.Expr) -> bool:
    """Whether ``expr`` is a call of ``relax.nn.conv2d``."""
    return isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.nn.conv2d"


def layer_of(call: relax.Call) -> RelaxConv:
    """The layer a ``relax.nn.conv2d`` call computes; a one-line ValueError for one the suite's workloads cannot
    state: other layouts than one of ``LAYOUTS``, a dtype other than float32 or float16 (or
    data and weights of two dtypes), an output of another dtype than the inputs' (fp16 inputs written as float32
    excepted: ``dispatch`` casts the kernel's float16 output), or a shape that is not static."""
    attrs = call.attrs
    layouts = (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout))
    layout = next((name for name, stored in LAYOUTS.items() if stored == layouts), None)
    if layout is None:
        raise ValueError(f"conv2d takes NCHW data, OIHW weights and an NCHW output, or NHWC/HWIO/NHWC here, not "
                         f"{'/'.join(layouts)}")
    data, weight = call.args
    dtype, wdtype, out_dtype = str(data.ty.dtype), str(weight.ty.dtype), str(call.ty.dtype)
    if dtype != wdtype or dtype not in DTYPES:
        raise ValueError(f"conv2d takes float32 or float16 data and weights of one dtype, not {dtype} and {wdtype}")
    if out_dtype != dtype and (dtype, out_dtype) != ("float16", "float32"):
        raise ValueError(f"conv2d of {dtype} inputs writes {dtype} here, not {out_dtype}")
    (n, c, h, w), (k, cg, r, s) = _static(data, "data"), _static(weight, "weight")
    if layout == "NHWC":   # stored as (N, H, W, C) and (R, S, C, K)
        (n, h, w, c), (r, s, cg, k) = (n, c, h, w), (k, cg, r, s)
    top, left, bottom, right = (int(p) for p in attrs.padding)
    groups = int(attrs.groups)
    if cg * groups != c:
        raise ValueError(f"conv2d weight has {cg} channels per group; data has {c} in {groups} groups")
    layer = ConvLayer("relax.nn.conv2d", c, h, w, k, r, s, tuple(int(v) for v in attrs.strides),
                      (top, bottom, left, right), 1, groups, tuple(int(v) for v in attrs.dilation))
    return RelaxConv(layer, n, dtype, out_dtype, layout)

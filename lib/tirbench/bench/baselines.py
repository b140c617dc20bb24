"""Vendor baselines through torch, verified and timed by the harness's rules (same run, L2 flushed, median);
``vendor(wl)``: the vendor's kernel for any workload the rules take (cuBLAS for a GEMM, cuDNN's faster layout for a
convolution)."""
from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from tirbench.bench.harness import Measurement, inputs_and_reference, time_launches, verify_then_time_torch
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import geometry_of


def torch_conv_args(wl: Workload) -> tuple[tuple[int, int, int, int] | None, dict[str, Any]]:
    """How torch computes a ``conv2d`` workload: ``F.pad``'s (left, right, top, bottom) where a padding differs
    between the two sides of an axis, else None; and ``F.conv2d``'s stride, padding (0 after ``F.pad``), dilation
    and groups, each one int where the axes agree (a plain layer: ``stride=stride, padding=pad, dilation=1,
    groups=1``)."""
    g = geometry_of(wl)
    top, bottom, left, right = g.pad
    shortest = g.kwargs()
    asymmetric = (top, left) != (bottom, right)   # torch's padding is the same on both sides of an axis
    padding = 0 if asymmetric else top if top == left else (top, left)
    args = {"stride": shortest["stride"], "padding": padding, "dilation": shortest["dilation"], "groups": g.groups}
    return ((left, right, top, bottom) if asymmetric else None), args


def cudnn_conv2d(wl: Workload, *, channels_last: bool = False, repeats: int = 100, seed: int = 0) -> Measurement:
    """cuDNN's convolution of an NCHW ``conv2d`` workload: ``torch.nn.functional.conv2d`` with TF32 off and
    ``cudnn.benchmark`` on (cuDNN times its algorithms on the first call and keeps the fastest, Winograd and FFT
    included). ``channels_last``: the same tensors in NHWC memory (converted once, untimed), often cuDNN's faster
    layout. Variant ``cudnn_nhwc`` or ``cudnn_nchw``, provider ``cudnn``."""
    import torch

    if wl.name != "conv2d" or wl.layout != "NCHW":
        raise ValueError(f"cudnn_conv2d takes an NCHW conv2d workload, got {wl.name} {wl.layout or ''}".strip())
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    pre_pad, args = torch_conv_args(wl)

    def conv(x, w):
        # an asymmetric padding: F.pad first (torch's padding is one per axis), inside the timed call, so cuDNN's
        # time has one more kernel, the padded copy of X
        return torch.nn.functional.conv2d(x if pre_pad is None else torch.nn.functional.pad(x, pre_pad), w, **args)

    def to_channels_last(x, w):
        return x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)

    return verify_then_time_torch(wl, conv, variant="cudnn_nhwc" if channels_last else "cudnn_nchw",
                                  provider="cudnn", repeats=repeats, seed=seed,
                                  prepare=to_channels_last if channels_last else None)


def cublas_gemm(wl: Workload, *, repeats: int = 100, seed: int = 0, like_c: bool = False) -> Measurement:
    """cuBLAS's GEMM of a ``gemm`` workload: ``torch.matmul`` with TF32 and fp16 reduced-precision reductions off
    (fp16 inputs: a half C, as cuBLAS's fp16 GEMM writes it). Variant ``cublas_<dtype>``, provider ``cublas``.
    ``like_c``: fp16 inputs with a float32 C go through cuBLAS's GEMM that writes a float32 C, the GEMM the kernel
    computes (``torch.mm(..., out_dtype=torch.float32)``, variant ``cublas_float16_fp32_c``), where this torch has it
    (``mm_writes_fp32``); else the half C as above."""
    import torch

    if wl.name != "gemm":
        raise ValueError(f"cublas_gemm takes a gemm workload, got {wl.name}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    if like_c and (wl.dtype, wl.out_dtype) == ("float16", "float32") and mm_writes_fp32():
        return verify_then_time_torch(wl, lambda a, b: torch.mm(a, b, out_dtype=torch.float32),
                                      variant=f"cublas_{wl.dtype}_fp32_c", provider="cublas", repeats=repeats,
                                      seed=seed)
    return verify_then_time_torch(wl, torch.matmul, variant=f"cublas_{wl.dtype}", provider="cublas",
                                  repeats=repeats, seed=seed)


@cache
def mm_writes_fp32() -> bool:
    """Whether this torch's ``torch.mm`` takes ``out_dtype`` (fp16 inputs, a float32 C: cuBLAS's GEMM with a float32
    output; torch 2.11 has it), tried once on a 16 x 16 GEMM."""
    import torch

    a = torch.ones(16, 16, dtype=torch.float16, device="cuda")
    try:
        return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError):
        return False


def vendor(wl: Workload, *, repeats: int = 100, seed: int = 0) -> Measurement:
    """The vendor's kernel for ``wl``: cuBLAS for a ``gemm`` (C in the workload's dtype where torch can: ``like_c``);
    for a convolution (any layout, or int8, for which cuDNN's fp16 stands in), cuDNN on the NCHW layer of the same
    sizes in both memory layouts, the faster kept."""
    if wl.name == "gemm":
        return cublas_gemm(wl, repeats=repeats, seed=seed, like_c=True)
    from tirbench.workloads import conv2d

    dtype = "float16" if wl.dtype == "int8" else wl.dtype
    nchw = conv2d(*(wl.sizes[a] for a in "nchwkrs"), layout="NCHW", dtype=dtype, **geometry_of(wl).kwargs())
    return min((cudnn_conv2d(nchw, channels_last=cl, repeats=repeats, seed=seed) for cl in (False, True)),
               key=lambda m: m.timing.median_ms)


def int_mm_conv_gemm(wl: Workload, *, b_column_major: bool, repeats: int = 100, seed: int = 0) -> Measurement:
    """cuBLASLt's int8 GEMM (``torch._int_mm``) on the GEMM an int8 ``conv2d_int8`` layer amounts to: A = the im2col
    matrix (M = N*OH*OW, K = R*S*C, built once, untimed), B = the filter as K x N (column-major: the filter's own
    k-contiguous order; row-major: the transposed copy), int32 out, no epilogue. Checked exactly against a float64
    product (exact below 2^53). Variant ``int_mm_b_colmajor`` / ``int_mm_b_rowmajor``, provider ``cublaslt``."""
    import torch

    from tirbench.workloads.conv_geometry import output_size
    from tirbench.workloads.conv2d_int8 import kc32rs32_to_kcrs, nchw32_to_nchw

    if wl.name != "conv2d" or wl.dtype != "int8":
        raise ValueError(f"int_mm_conv_gemm takes an int8 conv2d workload, got {wl.name} {wl.dtype}")
    (x32, w32, *_), _ = inputs_and_reference(wl, seed)
    n, _, h, w, k, r, s, stride, pad = wl.sizes.values()
    c = x32.shape[1] * x32.shape[-1]   # the stored channels: the lanes past the real ones are zero
    oh, ow = output_size(h, r, stride, pad), output_size(w, s, stride, pad)
    xp = np.pad(nchw32_to_nchw(x32).transpose(0, 2, 3, 1), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    taps = [xp[:, ry:ry + stride * (oh - 1) + 1:stride, rx:rx + stride * (ow - 1) + 1:stride, :]
            for ry in range(r) for rx in range(s)]
    a = np.ascontiguousarray(np.stack(taps, axis=3).reshape(n * oh * ow, r * s * c))   # k = (ry, rx, c)
    b = kc32rs32_to_kcrs(w32).transpose(0, 2, 3, 1).reshape(k, r * s * c)                # [N, K]
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    a_dev = torch.from_numpy(a).cuda()
    b_dev = torch.from_numpy(np.ascontiguousarray(b)).cuda().t() if b_column_major else \
        torch.from_numpy(np.ascontiguousarray(b.T)).cuda()
    out = torch._int_mm(a_dev, b_dev)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), ref.astype(np.int64),
                                  err_msg="torch._int_mm: output differs from the reference")
    variant = "int_mm_b_colmajor" if b_column_major else "int_mm_b_rowmajor"
    return Measurement(wl, variant, "cublaslt", time_launches(lambda: torch._int_mm(a_dev, b_dev), repeats=repeats),
                       verified=True)

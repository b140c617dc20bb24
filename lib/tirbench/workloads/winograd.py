"""Winograd convolution F(m x m, 3 x 3) (Lavin & Gray, 2016), fp32, NCHW and NHWC: 3x3 kernels, stride 1, pad 1.

An output tile of m x m pixels is computed from an alpha x alpha input tile (alpha = m + 2) as

    Y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A        ((.) = elementwise; g the 3x3 filter, d the input tile)

summed over the input channels. Summing over channels commutes with A^T[.]A, so the work is four steps:

1. the filter transform U[xi, nu, c, k] = (G g_kc G^T)[xi, nu]: once per filter, ahead of time (untimed; cuDNN's
   Winograd transforms its filter inside every call);
2. the input transform V[xi, nu, c, p] = (B^T d_cp B)[xi, nu] of each tile p (the tiles overlap by 2 pixels;
   pixels outside the image, the padding and the edge tiles' overhang, are zeros);
3. a batched GEMM: for each of the alpha^2 positions (xi, nu), M[xi, nu] = U[xi, nu]^T (K x C) @ V[xi, nu] (C x P);
4. the output transform Y_tile = A^T M[:, :, k, p] A, cropped where the last tiles overhang the image.

Multiplications per output: 9 * C direct, (alpha / m)^2 * C in the GEMM: 2.25x fewer for F(2x2), 4x for F(4x4).
The price is accuracy: the transforms' entries (up to 5 in B and 8 in A for F(4x4)) amplify rounding errors; see
``winograd_error_scale`` and ``measured_errors``.

The workload module (``conv2d_winograd``) takes the input X and the pre-transformed filter U, so its timing leaves
the filter transform out; ``winograd_filter_transform`` is that transform as a workload of its own.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import tvm
from tvm import tirx
from tvm.script import tirx as T

from tirbench.workloads.base import Workload, check_dtype, error_stats, random_array
from tirbench.workloads.conv2d import (
    check_conv_params,
    conv2d_reference,
    filter_from_kcrs,
    filter_to_kcrs,
    from_nchw,
    stored_shape,
    to_nchw,
)

#: Output tile sizes with transforms here: F(2x2, 3x3) and F(4x4, 3x3).
TILES = (2, 4)
LAYOUTS = ("NCHW", "NHWC")
EPS32 = float(np.finfo(np.float32).eps)


@functools.cache
def transforms(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m x m, 3x3) in float64: shapes (m, alpha), (alpha, 3), (alpha, alpha).

    F(2, 3) interpolates at 0, 1, -1, infinity; F(4, 3) at 0, 1, -1, 2, -2, infinity, with G's rows scaled by
    1/4, -1/6, -1/6, 1/24, 1/24, 1 so that B^T has small integer entries (Lavin & Gray's matrices)."""
    if m == 2:
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
        g = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    elif m == 4:
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
             [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
              [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    else:
        raise ValueError(f"m={m!r}: Winograd transforms exist here for m = 2 (F(2x2,3x3)) and 4 (F(4x4,3x3))")
    return np.array(at, float), np.array(g, float), np.array(bt, float)


def tiles_of(h: int, w: int, m: int) -> tuple[int, int]:
    """Tile rows and columns covering an h x w output with m x m tiles (the last ones may overhang)."""
    return -(-h // m), -(-w // m)


# ---- the algorithm in numpy (NCHW), in float64 or emulated in float32 -------------------------------------------

def filter_transform(wt: np.ndarray, m: int, dtype: type = np.float64) -> np.ndarray:
    """U[xi, nu, c, k] = (G w[k, c] G^T)[xi, nu] of a (K, C, 3, 3) filter, computed in ``dtype``."""
    _, g, _ = transforms(m)
    g = g.astype(dtype)
    return np.einsum("ar,kcrs,bs->abck", g, wt.astype(dtype), g, optimize=True).astype(dtype)


def filter_from_transform(u: np.ndarray, m: int) -> np.ndarray:
    """The (K, C, 3, 3) float64 filter whose transform is (closest to) ``u``: G^+ U G^+T (G has full column rank, so
    this inverts ``filter_transform`` exactly, and for a rounded U gives the least-squares filter)."""
    g_pinv = np.linalg.pinv(transforms(m)[1])
    return np.einsum("ra,abck,sb->kcrs", g_pinv, u.astype(np.float64), g_pinv, optimize=True)


def input_tiles(x: np.ndarray, m: int) -> np.ndarray:
    """d[c, p, a, b]: the overlapping alpha x alpha tiles of the NCHW input padded by 1 (zeros past the image, where
    the last tiles overhang it); p runs over (n, tile row, tile column)."""
    n, c, h, w = x.shape
    th, tw = tiles_of(h, w, m)
    alpha = m + 2
    xp = np.zeros((n, c, th * m + 2, tw * m + 2), x.dtype)
    xp[:, :, 1:h + 1, 1:w + 1] = x
    rows = (np.arange(th) * m)[:, None] + np.arange(alpha)            # (th, alpha)
    cols = (np.arange(tw) * m)[:, None] + np.arange(alpha)            # (tw, alpha)
    d = xp[:, :, rows[:, None, :, None], cols[None, :, None, :]]       # (n, c, th, tw, alpha, alpha)
    return d.transpose(1, 0, 2, 3, 4, 5).reshape(c, n * th * tw, alpha, alpha)


def input_transform(x: np.ndarray, m: int, dtype: type = np.float64) -> np.ndarray:
    """V[xi, nu, c, p] = (B^T d[c, p] B)[xi, nu], computed in ``dtype``."""
    bt = transforms(m)[2].astype(dtype)
    return np.einsum("ax,cpxy,by->abcp", bt, input_tiles(x.astype(dtype), m), bt, optimize=True).astype(dtype)


def batched_gemm(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """M[xi, nu] = U[xi, nu]^T @ V[xi, nu]: alpha^2 GEMMs of (K x C) @ (C x P), in the inputs' dtype."""
    return np.matmul(u.transpose(0, 1, 3, 2), v)


def output_transform(mm: np.ndarray, m: int, n: int, h: int, w: int, dtype: type = np.float64) -> np.ndarray:
    """The NCHW output: A^T M[:, :, k, p] A per tile, cropped to h x w, computed in ``dtype``."""
    at = transforms(m)[0].astype(dtype)
    th, tw = tiles_of(h, w, m)
    k = mm.shape[2]
    y = np.einsum("ia,abkp,jb->kpij", at, mm.astype(dtype), at, optimize=True).astype(dtype)
    y = y.reshape(k, n, th, tw, m, m).transpose(1, 0, 2, 4, 3, 5).reshape(n, k, th * m, tw * m)
    return np.ascontiguousarray(y[:, :, :h, :w])


def winograd_conv2d(x: np.ndarray, u: np.ndarray, m: int, dtype: type = np.float64) -> np.ndarray:
    """The whole algorithm on an NCHW input and a transformed filter U, every step computed in ``dtype``."""
    n, _, h, w = x.shape
    v = input_transform(x, m, dtype)
    return output_transform(batched_gemm(u.astype(dtype), v), m, n, h, w, dtype)


# ---- numerics ----------------------------------------------------------------------------------------------------

@functools.cache
def amplification(m: int) -> float:
    """How much larger, in root mean square, the terms an output sums are in F(m x m, 3x3) than in the direct
    convolution, per input channel, for independent unit-variance inputs and filter weights.

    A term of output (i, j) is A[a, i] A[b, j] U[a, b] V[a, b]; U[a, b] has variance sum_rs (G[a, r] G[b, s])^2,
    V[a, b] has sum_xy (B[x, a] B[y, b])^2, so the terms' total variance is the sum over (a, b) of the product of
    the three; the direct convolution's 9 products have total variance 9. The worst output (i, j) counts.
    """
    at, g, bt = transforms(m)
    gg = (g ** 2).sum(axis=1)
    bb = (bt ** 2).sum(axis=1)
    per_ab = np.outer(gg * bb, gg * bb)                               # (alpha, alpha)
    worst = max(float((np.outer(at[i] ** 2, at[j] ** 2) * per_ab).sum()) for i in range(m) for j in range(m))
    return float(np.sqrt(worst / 9))


#: Safety factor of the tolerance (see ``winograd_tolerance``).
SAFETY = 64


def winograd_error_scale(m: int, c: int) -> float:
    """The predicted root-mean-square error of an fp32 F(m x m, 3x3) output for unit-variance inputs and weights:
    eps32 * sqrt(9 c) * ``amplification(m)``, i.e. float32 rounding of terms whose total size is the direct
    convolution's (sqrt(9 c)) times the transforms' growth. Measured in numpy's float32 on ResNet-50's 3x3 layers it
    is within 2.2x of the actual rms error for both m (``measure_error``)."""
    return EPS32 * float(np.sqrt(9 * c)) * amplification(m)


def winograd_tolerance(m: int, c: int) -> dict[str, float]:
    """``assert_allclose`` tolerance of an fp32 Winograd output against the float64 reference: an absolute bound of
    ``SAFETY`` (64) times ``winograd_error_scale``, no relative part (the error follows the size of the terms summed,
    not of their sum). The 64 covers: the largest of ~10^6 Gaussian errors is ~5 rms; the model is off by up to 2.2x;
    a sequential fp32 accumulation over c (a GPU thread's, the unscheduled module's on llvm) can err up to ~5x more
    than numpy's blocked one. For C = 512 that is 0.016 for F(4x4) (outputs ~68 rms) and 8.7e-4 for F(2x2)."""
    return {"rtol": 0.0, "atol": SAFETY * winograd_error_scale(m, c)}


def measure_error(n: int, c: int, h: int, w: int, k: int, *, m: int, seed: int = 0) -> dict[str, float]:
    """The fp32 algorithm (numpy, every step rounded to float32) against the float64 reference on standard-normal
    data: ``error_stats`` (max and rms absolute error, max error relative to the largest output, the tolerance's
    atol and how many times the max error fits in it, ``margin``) and ``m``."""
    rng = np.random.default_rng(seed)
    x = random_array(rng, (n, c, h, w), "float32")
    u = filter_transform(random_array(rng, (k, c, 3, 3), "float32"), m).astype(np.float32)
    ref = conv2d_reference(x, filter_from_transform(u, m), stride=1, pad=1)
    return {"m": m, **error_stats(winograd_conv2d(x, u, m, np.float32), ref, winograd_tolerance(m, c)["atol"])}


# ---- the TensorIR modules -----------------------------------------------------------------------------------------

def _entry(mat: np.ndarray, i: tirx.PrimExpr, j: tirx.PrimExpr) -> tirx.PrimExpr:
    """``mat[i, j]`` as a float32 expression: selects over the nonzero entries, which fold to the constant (and the
    products with a zero away) once i and j are constants, i.e. once a schedule unrolls the loops."""
    expr = tirx.const(0, "float32")
    for (r, c), value in np.ndenumerate(mat):
        if value:
            expr = tirx.Select(tirx.all(i == r, j == c), tirx.const(float(value), "float32"), expr)
    return expr


def _coefficient(mat: np.ndarray, i: tirx.PrimExpr, j: tirx.PrimExpr, a: tirx.PrimExpr,
                 b: tirx.PrimExpr) -> tirx.PrimExpr:
    """``mat[i, a] * mat[j, b]``: the weight of input (a, b) in output (i, j) of a 2-D transform ``mat . mat^T``."""
    return _entry(mat, i, a) * _entry(mat, j, b)


def _indexers(h: int, w: int, m: int, layout: str) -> tuple[Callable[..., tuple], ...]:
    """Index helpers, evaluated while the script is parsed: ``pixel`` (tile p's pixel at (a, b) of its padded tile:
    image, row, column), ``at`` (an activation's indices in ``layout``), ``inside`` (whether a pixel is in the
    image)."""
    th, tw = tiles_of(h, w, m)

    def pixel(p, a, b):
        return p // (th * tw), p // tw % th * m + a - 1, p % tw * m + b - 1

    def at(img, ch, row, col):
        return (img, ch, row, col) if layout == "NCHW" else (img, row, col, ch)

    def inside(row, col):
        return tirx.all(0 <= row, row < h, 0 <= col, col < w)

    return pixel, at, inside


def _module(n: int, c: int, h: int, w: int, k: int, m: int, layout: str) -> tvm.IRModule:
    """The Winograd convolution as five blocks: "input_tile" (D[c, p, a, b], the padded alpha x alpha tiles),
    "input_transform" (V = B^T D B), "batched_gemm" (M[xi, nu] = U[xi, nu]^T V[xi, nu]), "output_transform"
    (Z[k, p] = A^T M[:, :, k, p] A) and "output" (Y = Z, cropped where the last tiles overhang the image)."""
    alpha, (th, tw) = m + 2, tiles_of(h, w, m)
    tiles = n * th * tw
    at_mat, _, bt_mat = transforms(m)
    pixel, at, inside = _indexers(h, w, m, layout)
    x_shape, y_shape = stored_shape((n, c, h, w), layout), stored_shape((n, k, h, w), layout)

    @T.prim_func(s_tir=True)
    def main(X: T.Buffer(x_shape, "float32"), U: T.Buffer((alpha, alpha, c, k), "float32"),
             Y: T.Buffer(y_shape, "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        D = T.sblock_alloc_buffer((c, tiles, alpha, alpha))
        V = T.sblock_alloc_buffer((alpha, alpha, c, tiles))
        M = T.sblock_alloc_buffer((alpha, alpha, k, tiles))
        Z = T.sblock_alloc_buffer((k, tiles, m, m))
        for i0, i1, i2, i3 in T.grid(c, tiles, alpha, alpha):
            with T.sblock("input_tile"):
                vc, vp, va, vb = T.axis.remap("SSSS", [i0, i1, i2, i3])
                img, row, col = T.meta_var(pixel(vp, va, vb))
                D[vc, vp, va, vb] = T.if_then_else(inside(row, col), X[at(img, vc, row, col)], T.float32(0))
        for i0, i1, i2, i3, r0, r1 in T.grid(alpha, alpha, c, tiles, alpha, alpha):
            with T.sblock("input_transform"):
                ve, vu, vc, vp, va, vb = T.axis.remap("SSSSRR", [i0, i1, i2, i3, r0, r1])
                with T.init():
                    V[ve, vu, vc, vp] = T.float32(0)
                V[ve, vu, vc, vp] = V[ve, vu, vc, vp] + D[vc, vp, va, vb] * _coefficient(bt_mat, ve, vu, va, vb)
        for i0, i1, i2, i3, r0 in T.grid(alpha, alpha, k, tiles, c):
            with T.sblock("batched_gemm"):
                ve, vu, vk, vp, vc = T.axis.remap("SSSSR", [i0, i1, i2, i3, r0])
                with T.init():
                    M[ve, vu, vk, vp] = T.float32(0)
                M[ve, vu, vk, vp] = M[ve, vu, vk, vp] + U[ve, vu, vc, vk] * V[ve, vu, vc, vp]
        for i0, i1, i2, i3, r0, r1 in T.grid(k, tiles, m, m, alpha, alpha):
            with T.sblock("output_transform"):
                vk, vp, vi, vj, va, vb = T.axis.remap("SSSSRR", [i0, i1, i2, i3, r0, r1])
                with T.init():
                    Z[vk, vp, vi, vj] = T.float32(0)
                Z[vk, vp, vi, vj] = Z[vk, vp, vi, vj] + M[va, vb, vk, vp] * _coefficient(at_mat, vi, vj, va, vb)
        for i0, i1, i2, i3 in T.grid(k, tiles, m, m):
            with T.sblock("output"):
                vk, vp, vi, vj = T.axis.remap("SSSS", [i0, i1, i2, i3])
                img, row, col = T.meta_var(pixel(vp, vi + 1, vj + 1))
                if inside(row, col):   # a condition in the body, not T.where: compute_at keeps it
                    Y[at(img, vk, row, col)] = Z[vk, vp, vi, vj]

    return tvm.IRModule({"main": main})


def check_winograd_params(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, pad: int, m: int,
                          layout: str, dtype: str, *, groups: int = 1, dilation: int = 1) -> None:
    """One-line ValueError for what F(m x m, 3x3) here cannot take: other kernels, strides, padding, groups,
    dilation, m, dtypes."""
    geometry = check_conv_params(n, c, h, w, k, r, s, stride, pad, "NCHW" if layout not in LAYOUTS else layout,
                                 dilation=dilation, groups=groups)
    geometry.require_plain("Winograd F(m x m, 3x3)")
    stride, pad = geometry.stride[0], geometry.pad[0]
    if (r, s) != (3, 3):
        raise ValueError(f"Winograd F(m x m, 3x3) takes 3x3 kernels, got {r}x{s}")
    if stride != 1:
        raise ValueError(f"stride={stride}: Winograd computes every output of a tile, so stride 1 only")
    if pad != 1:
        raise ValueError(f"pad={pad}: the tiles here pad by 1 (same-size output), so pad 1 only")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if m not in TILES:
        transforms(m)   # raises the one-line error naming the m that exist
    check_dtype(dtype, ("float32",))


def conv2d_winograd(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int = 1, pad: int = 1,
                    *, m: int = 4, layout: str = "NCHW", dtype: str = "float32", groups: int = 1,
                    dilation: int = 1) -> Workload:
    """A 3x3, stride-1, pad-1 fp32 convolution by Winograd F(m x m, 3x3); ``main(X, U, Y)`` takes the input and the
    transformed filter U[xi, nu, c, k] (``filter_transform``; the same U for both layouts).

    ``make_inputs`` draws X and a filter W and returns [X, U] with U the float64 transform of W rounded to float32.
    ``reference(X, U)`` recovers the filter exactly from U (``filter_from_transform``) and convolves directly in
    float64, and returns float64 (a measured error has no rounding of the reference in it): it shares no transform
    with the algorithm, so a wrong B or A fails it. ``flops`` is the direct convolution's 2 N K C H W 9, so GFLOP/s
    are "effective" ones, comparable with cuDNN's (which count the same way whatever algorithm it picks); the GEMM
    does 4/9 (m = 2) or 1/4 (m = 4) of those multiply-adds. ``bytes``: X + U + Y once. Tolerance:
    ``winograd_tolerance``. ``groups``, ``dilation`` and a stride or padding per axis are refused in one line.
    """
    check_winograd_params(n, c, h, w, k, r, s, stride, pad, m, layout, dtype, groups=groups, dilation=dilation)
    alpha = m + 2

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = random_array(rng, (n, c, h, w), dtype)
        wt = random_array(rng, (k, c, 3, 3), dtype)
        return [from_nchw(x, layout), filter_transform(wt, m).astype(np.float32)]

    def reference(x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return from_nchw(conv2d_reference(to_nchw(x, layout), filter_from_transform(u, m), stride=1, pad=1), layout)

    return Workload(
        name="conv2d_winograd", sizes={"n": n, "c": c, "h": h, "w": w, "k": k, "m": m}, dtype=dtype,
        mod=_module(n, c, h, w, k, m, layout), make_inputs=make_inputs, reference=reference,
        out_shape=stored_shape((n, k, h, w), layout), out_dtype=dtype, flops=2 * n * k * c * h * w * 9,
        bytes=(n * c * h * w + alpha * alpha * c * k + n * k * h * w) * 4,
        tolerance=winograd_tolerance(m, c), layout=layout,
    )


def _filter_module(c: int, k: int, m: int, layout: str) -> tvm.IRModule:
    """The filter transform as one block, "filter_transform": U[xi, nu, c, k] = sum_rs G[xi, r] G[nu, s] W[k, c, r, s]
    (W stored as ``layout``'s filter: (K, C, 3, 3) for NCHW, (3, 3, C, K) for NHWC)."""
    alpha, g_mat = m + 2, transforms(m)[1]
    w_shape = (k, c, 3, 3) if layout == "NCHW" else (3, 3, c, k)

    def at(vk, vc, vr, vs):
        return (vk, vc, vr, vs) if layout == "NCHW" else (vr, vs, vc, vk)

    @T.prim_func(s_tir=True)
    def main(W: T.Buffer(w_shape, "float32"), U: T.Buffer((alpha, alpha, c, k), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i0, i1, i2, i3, r0, r1 in T.grid(alpha, alpha, c, k, 3, 3):
            with T.sblock("filter_transform"):
                ve, vu, vc, vk, vr, vs = T.axis.remap("SSSSRR", [i0, i1, i2, i3, r0, r1])
                with T.init():
                    U[ve, vu, vc, vk] = T.float32(0)
                U[ve, vu, vc, vk] = U[ve, vu, vc, vk] + W[at(vk, vc, vr, vs)] * _coefficient(g_mat, ve, vu, vr, vs)

    return tvm.IRModule({"main": main})


def winograd_filter_transform(c: int, k: int, *, m: int = 4, layout: str = "NCHW") -> Workload:
    """The filter transform U = G W G^T of ``conv2d_winograd`` as a workload (done once per filter, so untimed in the
    convolution's numbers). Tolerance: each U entry sums 9 products W * G G^T with |G G^T| <= 1/4 (m = 4) or 1
    (m = 2; exact in float32, entries 0, 1/4, 1/2, 1), so fp32 errs by at most ~9 eps max|W| ~ 6e-6 for
    standard-normal weights (max|W| < 6): atol 2e-5."""
    check_winograd_params(1, c, 3, 3, k, 3, 3, 1, 1, m, layout, "float32")
    alpha = m + 2

    def make_inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [filter_from_kcrs(random_array(rng, (k, c, 3, 3), "float32"), layout)]

    def reference(wt: np.ndarray) -> np.ndarray:
        return filter_transform(filter_to_kcrs(wt, layout), m).astype(np.float32)

    return Workload(
        name="winograd_filter_transform", sizes={"c": c, "k": k, "m": m}, dtype="float32",
        mod=_filter_module(c, k, m, layout), make_inputs=make_inputs, reference=reference,
        out_shape=(alpha, alpha, c, k), out_dtype="float32", flops=2 * alpha * alpha * c * k * 9,
        bytes=(9 + alpha * alpha) * c * k * 4, tolerance={"rtol": 0.0, "atol": 2e-5}, layout=layout,
    )

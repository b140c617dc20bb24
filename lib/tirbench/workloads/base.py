"""The Workload record shared by every notebook."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import tvm

from tirbench.core.frames import name_frame_files

# Workloads are TVMScript, and the schedules and TVM's tensor intrinsics parse more of it, much of it inside an import
# (``tvm.s_tir.tensor_intrin``: 20-40 s a process before): ~10x faster with the frames' files named (core.frames).
name_frame_files()

@dataclass(frozen=True)
class Workload:
    """One problem instance: ``mod`` computes ``reference(*make_inputs(rng))`` into its last argument.

    ``flops`` and ``bytes`` are the useful work: arithmetic done and the fewest bytes that must move
    through device memory (each input read once, each output written once).
    """

    name: str
    sizes: dict[str, int]
    dtype: str
    mod: tvm.IRModule
    make_inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    out_shape: tuple[int, ...]
    out_dtype: str
    flops: int
    bytes: int
    tolerance: dict[str, float] = field(default_factory=lambda: {"rtol": 1e-5, "atol": 1e-5})
    layout: str = ""   # storage layout of the tensors where a workload has several (conv2d: NCHW, NHWC, HWCN)
    #: What a workload has beyond ``sizes`` only at some layers, by tag (conv2d: ``{"g": 32}`` for groups): each
    #: appended to ``shape`` as ``_<tag><value>``, a tuple's items joined by 'x'; empty for most.
    extra: dict[str, int | tuple[int, ...]] = field(default_factory=dict)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the buffers ``mod`` takes (inputs and output, each as large as its shape), counted from the
        module's signature without allocating any."""
        return sum(math.prod(int(d) for d in buf.shape) * np.dtype(str(buf.dtype)).itemsize
                   for buf in self.mod["main"].params)

    @property
    def shape(self) -> str:
        """Sizes joined by 'x', then each of ``extra`` as ``_<tag><value>``: the ``shape`` column of the results CSV."""
        return shape_text(self.sizes.values(), self.extra)


def shape_text(sizes: Iterable[int], extra: dict[str, int | tuple[int, ...]]) -> str:
    """``sizes`` joined by 'x', then each of ``extra`` as ``_<tag><value>`` (a tuple's items joined by 'x')."""
    tags = "".join(f"_{tag}{'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for tag, v in extra.items())
    return "x".join(str(v) for v in sizes) + tags


def check_dtype(dtype: str, allowed: Sequence[str]) -> None:
    """One-line ValueError for a dtype a workload does not support."""
    if dtype not in allowed:
        raise ValueError(f"unsupported dtype {dtype!r}: expected one of {', '.join(allowed)}")


def check_positive(**sizes: int) -> None:
    """One-line ValueError for a size that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Standard-normal data in ``dtype`` (never zeros: they hide unwritten outputs)."""
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def error_stats(out: np.ndarray, ref: np.ndarray, atol: float) -> dict[str, float]:
    """How far ``out`` is from ``ref``: the max and rms absolute error, the max error relative to the largest
    reference value, the tolerance's ``atol`` and how many times the max error fits in it (``margin``)."""
    err = np.abs(out.astype(np.float64) - ref)
    worst = float(err.max())
    return {"max_abs": worst, "rms": float(np.sqrt((err ** 2).mean())), "max_rel": worst / float(np.abs(ref).max()),
            "atol": atol, "margin": atol / worst if worst else float("inf")}

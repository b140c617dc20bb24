"""What ``tirbench.kernel`` returns: one ``Candidate`` per kernel the rules offer, and the ``KernelResult`` of a
workload (the candidates, the vendor's kernel, the chosen one), printed as a short table."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tirbench.bench.harness import Measurement
from tirbench.core.gpu import current_gpu
from tirbench.schedules.common.record import KernelRecord
from tirbench.workloads.base import Workload


@dataclass(frozen=True)
class Candidate:
    """One of the rules' kernels for a workload: its family, its parameters (with what makes its form: Winograd's
    ``m``, the int8 ``filter_layout``), ``status`` (``ok``: verified and timed, or on a CPU scheduled and its CUDA
    written; ``skipped``: a tile that does not fit; ``rejected``: failed to schedule, build or verify) and why;
    on a GPU its ``measurement``; on a CPU its CUDA file, what ``nvcc`` says of it and what ``llvm`` checked."""

    family: str
    params: Mapping[str, Any]
    status: str
    reason: str = ""
    measurement: Measurement | None = None
    cuda: Path | None = None
    nvcc: str = ""
    llvm: str = ""
    form: Workload | None = field(default=None, repr=False, compare=False)
    record: KernelRecord | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items()) or "(defaults)"

    @property
    def median_us(self) -> float | None:
        return self.measurement.timing.median_ms * 1e3 if self.measurement else None


@dataclass(frozen=True)
class KernelResult:
    """The rules' kernels for ``workload``: every candidate, and on a GPU the vendor's kernel (``vendor``) and the
    fastest verified candidate (``chosen``); ``cuda``: the chosen kernel's CUDA file (GPU) or the folder of every
    candidate's (CPU); ``device``: the GPU that measured them, or None."""

    workload: Workload
    candidates: tuple[Candidate, ...]
    device: str | None = None
    vendor: Measurement | None = None
    chosen: Candidate | None = None
    cuda: Path | None = None

    def table(self) -> str:
        """The candidates as a short table: on a GPU kernel, params, median us, TFLOPS, vendor us and ratio (vendor
        time / kernel time: above 1 is faster than the vendor); on a CPU kernel, params, status, llvm and nvcc."""
        if self.device is None:
            head = ("kernel", "params", "status", "llvm", "nvcc")
            rows = [(c.family, c.label, c.status + (f" ({c.reason})" if c.reason else ""), c.llvm, c.nvcc)
                    for c in self.candidates]
        else:
            head = ("kernel", "params", "median us", "TFLOPS", "vendor us", "ratio")
            vendor_us = self.vendor.timing.median_ms * 1e3 if self.vendor else None
            rows = [(c.family + (" *" if c is self.chosen else ""), c.label,
                     *((f"{c.median_us:,.1f}", f"{c.measurement.gflops / 1e3:.1f}") if c.measurement else
                       (f"{c.status}: {c.reason}"[:60], "")),
                     f"{vendor_us:,.1f}" if vendor_us else "-",
                     f"{vendor_us / c.median_us:.2f}" if vendor_us and c.measurement else "-")
                    for c in self.candidates]
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in [head, *rows])

    def summary(self) -> str:
        """One line: the chosen kernel and its time against the vendor's (GPU), or what was written (CPU)."""
        wl = self.workload
        name = f"{wl.name} {wl.shape} {wl.dtype}{' ' + wl.layout if wl.layout else ''}"
        if self.device is None:
            return f"{name}: {len(self.candidates)} candidates, their CUDA for {current_gpu().arch} in {self.cuda}"
        if self.chosen is None:
            return f"{name}: no candidate verified"
        c, v = self.chosen, self.vendor
        versus = (f", {v.variant} {v.timing.median_ms * 1e3:,.1f} us: {v.timing.median_ms * 1e3 / c.median_us:.2f}x "
                  f"the vendor's speed" if v else "")
        return (f"{name}: {c.family}({c.label}) {c.median_us:,.1f} us, {c.measurement.gflops / 1e3:.1f} TFLOPS"
                f"{versus}; its CUDA: {self.cuda}")

"""Your own layer in one call: ``best_kernel(workload)`` (or ``gemm(...)`` / ``conv2d(...)``) runs the rules on it.

On a GPU every candidate of every family the rules offer (Winograd and int8 forms included) is built, verified
against the reference and timed (``bench.choose.sweep_forms``), beside the vendor's kernel in the same process
(``bench.baselines.vendor``: cuBLAS, cuDNN); the fastest verified one is the choice, its CUDA written to a file, and
with ``csv`` the choice and the vendor appended to a results CSV (``bench.results``). Without a GPU one line says so
first; then each candidate is scheduled, its CUDA written and checked by nvcc, and its numerics checked on llvm
where they can be (``kernel.offline``): nothing is built for the GPU.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from tirbench.bench import baselines, results
from tirbench.bench.choose import sweep_forms
from tirbench.bench.harness import Measurement
from tirbench.bench.session import Session
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import cuda_target, has_cuda_gpu
from tirbench.kernel.offline import offline, tag, write_cuda
from tirbench.kernel.result import Candidate, KernelResult
from tirbench.workloads import conv2d as conv2d_workload
from tirbench.workloads import conv2d_int8
from tirbench.workloads import gemm as gemm_workload
from tirbench.workloads.base import Workload

#: What needs a GPU, said in one line on a machine without one, before anything else is done.
NO_GPU = ("[tirbench] No CUDA GPU: building, verifying and timing the kernels and the vendor comparison need an "
          f"NVIDIA GPU; here: the rules' candidates, their CUDA for {current_gpu().arch} (checked by nvcc) and the "
          "numerics llvm can check")
#: The notebook name the result rows carry.
NOTEBOOK = "kernel"


def default_out() -> Path:
    """Where the CUDA goes unless told: ``build/kernel/`` under the current folder."""
    return Path("build") / "kernel"


def conv_layer(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int | Sequence[int] = 1,
               pad: int | Sequence[int] = 1, *, dtype: str = "float32", layout: str | None = None, groups: int = 1,
               dilation: int | Sequence[int] = 1) -> Workload:
    """The convolution workload the rules take for these sizes: float32 NCHW (or ``layout``), float16 NHWC, int8
    NC/32HW32 (the fused requantizing epilogue, no ReLU, no residual); ``stride``, ``pad``, ``groups`` and
    ``dilation`` as ``conv2d`` takes them; one-line ValueError naming a bad parameter."""
    if dtype == "int8":
        if layout not in (None, "NCHW32"):
            raise ValueError(f"layout={layout!r}: int8 convolutions are stored NC/32HW32 (NCHW32)")
        return conv2d_int8(n, c, h, w, k, r, s, stride, pad, relu=False, residual=False, groups=groups,
                           dilation=dilation)
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype={dtype!r}: the conv rules take float32, float16 or int8")
    return conv2d_workload(n, c, h, w, k, r, s, stride, pad, dtype=dtype, groups=groups, dilation=dilation,
                           layout=layout or ("NHWC" if dtype == "float16" else "NCHW"))


def _vendor(wl: Workload, *, repeats: int, seed: int) -> Measurement | None:
    """The vendor's kernel for ``wl`` (``baselines.vendor``), or None where torch is not installed."""
    try:
        return baselines.vendor(wl, repeats=repeats, seed=seed)
    except ImportError:
        return None


def _result(wl: Workload, layer: list, vendor: Measurement | None, out: Path, device: str) -> KernelResult:
    """``wl``'s candidates from its swept forms (``sweep_forms``), the fastest verified one chosen and its CUDA
    written to ``out/<tag>.cu``."""
    pairs = []
    for (form, _, extra), swept in layer:
        for t in swept.trials:
            m = t.measurement and (t.measurement if form is wl else replace(t.measurement, workload=wl))
            pairs.append((Candidate(t.record.name, {**extra, **t.overrides}, t.status, t.reason, m, form=form,
                                    record=t.record), t.overrides))
    timed = [(c, o) for c, o in pairs if c.measurement is not None]
    chosen, overrides = min(timed, key=lambda p: p[0].median_us, default=(None, None))
    cuda = None
    if chosen is not None:
        cuda = out / f"{tag(wl)}.cu"
        write_cuda(chosen.record, chosen.record.apply(chosen.form, overrides), cuda)
    return KernelResult(wl, tuple(c for c, _ in pairs), device, vendor, chosen, cuda)


def row_variant(r: KernelResult) -> str:
    """The results variant of a choice: ``rules_<family>``, with ``_fp16_c`` for a GEMM of float16 inputs that writes a
    half C (as cuBLAS's fp16 GEMM does; notebook 03_gemm_shapes' ``v9_best_fp16_c``)."""
    half_c = r.workload.name == "gemm" and r.workload.dtype == r.workload.out_dtype == "float16"
    return f"rules_{r.chosen.family}" + ("_fp16_c" if half_c else "")


def _measured(wls: Sequence[Workload], *, keep: int | None, repeats: int, seed: int, out: Path, csv: Path | None,
              say: Callable[[str], None]) -> list[KernelResult]:
    """The GPU path (module docstring), every candidate of every workload built in one parallel batch."""
    target = cuda_target()
    # prints the GPU, driver, TVM version and run id; the rows' arch is the target's (results.ADDED_COLUMNS)
    session = Session(NOTEBOOK, save=csv is not None, arch=str(target.attrs["arch"]))
    swept = sweep_forms(wls, target=target, repeats=repeats, seed=seed, keep=keep)
    found = [_result(wl, layer, _vendor(wl, repeats=repeats, seed=seed), out, session.device.describe())
             for wl, layer in zip(wls, swept)]
    if any(r.vendor is None for r in found):
        say("[tirbench] torch is not installed: no vendor comparison (pip install -r requirements-gpu.txt)")
    if csv is not None:
        session.measurements += [m for r in found if r.chosen for m in
                                 (replace(r.chosen.measurement, variant=row_variant(r)), r.vendor) if m]
        say(f"[tirbench] {results.append_rows(csv, session.rows())} rows appended to {csv}")
    return found


def best_kernels(wls: Sequence[Workload], *, keep: int | None = None, repeats: int = 50, seed: int = 0,
                 out: Path | None = None, csv: Path | None = None,
                 say: Callable[[str], None] = print) -> list[KernelResult]:
    """The rules' kernels for each of ``wls`` (``gemm``, ``conv2d`` or ``conv2d_int8`` workloads), measured on a GPU
    (every candidate of every workload built in one parallel batch) or written and checked without one (module
    docstring). ``keep``: candidates per family (None: the rules' default); ``out``: the folder for the CUDA
    (``default_out()``); ``csv``: a results CSV each choice's row (variant ``rules_<family>``) and its vendor's are
    appended to (GPU only); ``say``: where the run's one-line notes go."""
    out = out or default_out()
    if not has_cuda_gpu():
        say(NO_GPU)
        return [offline(wl, keep=keep, out=out, seed=seed) for wl in wls]
    return _measured(wls, keep=keep, repeats=repeats, seed=seed, out=out, csv=csv, say=say)


def best_kernel(wl: Workload, **options: Any) -> KernelResult:
    """``best_kernels`` of ``wl`` alone (``options``: its)."""
    return best_kernels([wl], **options)[0]


def gemm(m: int, n: int, k: int, *, dtype: str = "float32", out_dtype: str = "float32",
         **options: Any) -> KernelResult:
    """``best_kernel`` of C[m, n] = A[m, k] @ B[k, n] (``options``: ``best_kernel``'s)."""
    return best_kernel(gemm_workload(m, n, k, dtype=dtype, out_dtype=out_dtype), **options)


def conv2d(n: int, c: int, h: int, w: int, k: int, r: int = 3, s: int = 3, stride: int | Sequence[int] = 1,
           pad: int | Sequence[int] = 1, *, dtype: str = "float32", layout: str | None = None, groups: int = 1,
           dilation: int | Sequence[int] = 1, **options: Any) -> KernelResult:
    """``best_kernel`` of the convolution ``conv_layer`` makes of these sizes (``options``: ``best_kernel``'s)."""
    return best_kernel(conv_layer(n, c, h, w, k, r, s, stride, pad, dtype=dtype, layout=layout, groups=groups,
                                  dilation=dilation), **options)

"""The rules' cuBLAS comparison (``baselines.vendor``) times the GEMM the kernel computes: fp16 inputs with a float32
C through cuBLAS's GEMM that writes a float32 C (``torch.mm(..., out_dtype=...)``, variant
``cublas_float16_fp32_c``) where torch has it, else cuBLAS's half C (``cublas_float16``); the notebooks' own
``cublas_gemm`` keeps the half C. Run without a GPU: torch and the timing are stand-ins."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tirbench.bench import baselines
from tirbench.workloads import gemm


@pytest.fixture
def timed(monkeypatch):
    """The variants ``verify_then_time_torch`` was asked for, and the functions it was given, with a stand-in torch."""
    calls = []
    flags = SimpleNamespace(allow_tf32=True, allow_fp16_reduced_precision_reduction=True)
    fake = SimpleNamespace(backends=SimpleNamespace(cuda=SimpleNamespace(matmul=flags)), matmul=object(),
                           mm=object(), float32="float32")
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(baselines, "verify_then_time_torch", lambda wl, fn, *, variant, **kw: calls.append(
        (variant, fn)) or variant)
    return calls


@pytest.mark.parametrize("out_dtype, writes_fp32, variant", [
    ("float32", True, "cublas_float16_fp32_c"),
    ("float32", False, "cublas_float16"),   # an older torch: the half C, named as such
    ("float16", True, "cublas_float16"),
])
def test_the_vendor_gemm_writes_the_kernels_c(timed, monkeypatch, out_dtype, writes_fp32, variant):
    monkeypatch.setattr(baselines, "mm_writes_fp32", lambda: writes_fp32)
    assert baselines.vendor(gemm(64, 64, 64, "float16", out_dtype=out_dtype)) == variant
    assert sys.modules["torch"].backends.cuda.matmul.allow_tf32 is False


def test_fp32_inputs_and_the_notebooks_cublas_keep_their_kernel(timed, monkeypatch):
    monkeypatch.setattr(baselines, "mm_writes_fp32", lambda: True)
    assert baselines.vendor(gemm(64, 64, 64, "float32")) == "cublas_float32"
    assert baselines.cublas_gemm(gemm(64, 64, 64, "float16")) == "cublas_float16"
    assert [fn for _, fn in timed] == [sys.modules["torch"].matmul] * 2

"""``python -m tirbench.kernel`` and ``tirbench.kernel.gemm(...)`` on a CPU machine: bad input is one line and exit
status 2; the candidates, their CUDA (which nvcc accepts) and the llvm numerics come with one line saying what needs a
GPU, and nothing is built for the GPU."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tirbench.kernel as kernel
from tirbench.bench.harness import Measurement, Timing
from tirbench.core.cuda_source import nvcc_report
from tirbench.kernel.cli import main
from tirbench.kernel.result import Candidate, KernelResult
from tirbench.kernel.run import NO_GPU
from tirbench.workloads import gemm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setattr(kernel.run, "has_cuda_gpu", lambda: False)


@pytest.mark.parametrize("argv, names", [
    (["gemm", "-5", "10", "10"], "m must be a positive integer"),
    (["gemm", "10", "10"], "required: K"),
    (["gemm", "10", "x", "10"], "argument N"),
    (["gemm", "8", "8", "8", "--dtype", "int8"], "dtype"),
    (["gemm", "8", "8", "8", "--keep", "0"], "--keep"),
    (["conv2d", "1", "8", "8", "8", "8", "11", "3", "1", "1"], "kernel r=11"),
    (["conv2d", "1", "8", "8", "8", "8", "3", "3", "0", "1"], "stride must be a positive integer"),
    (["conv2d", "1", "8", "8", "8", "8", "3", "3", "1", "1", "--dtype", "float16", "--layout", "NCHW"], "float16 NCHW"),
    (["conv2d", "1", "8", "8", "8", "8", "3", "3", "1", "1", "--dtype", "int8", "--layout", "NHWC"], "layout="),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, names, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and names in err and err.count("\n") == 1, err


def test_the_module_refuses_in_one_line_without_a_traceback():
    run = subprocess.run([sys.executable, "-m", "tirbench.kernel", "gemm", "0", "8", "8"], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "TIRBENCH_FORCE_CPU": "1"})
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [
        "python -m tirbench.kernel: error: m must be a positive integer, got 0"]


def test_cpu_path_gives_the_candidates_their_cuda_and_the_llvm_check_after_one_gpu_line(tmp_path, monkeypatch):
    """A SIMT candidate's numerics on llvm (its threads one after another) match numpy; its CUDA is written (nvcc's
    check of it: the next test)."""
    monkeypatch.setattr(kernel.offline, "nvcc_report", lambda src: ["Used 1 registers", "0 bytes spill stores"])
    said = []
    result = kernel.gemm(70, 96, 40, keep=1, out=tmp_path, say=said.append)
    assert said == [NO_GPU] and result.device is None and result.chosen is None
    (cand,) = result.candidates
    assert cand.family == "v5_warp_tiled" and cand.status == "ok" and cand.llvm == "matches numpy"
    assert cand.cuda.parent == result.cuda == tmp_path / "gemm_70x96x40_float32" and cand.cuda.exists()
    assert "matches numpy" in result.table() and str(result.cuda) in result.summary()


@pytest.mark.parametrize("nvcc_says, status", [("nvcc rejected the generated source: error: x", "rejected"),
                                               ("nvcc not found: install the CUDA toolkit", "ok")])
def test_a_candidate_nvcc_rejects_is_rejected_and_no_nvcc_leaves_it_be(tmp_path, monkeypatch, nvcc_says, status):
    """CUDA nvcc rejects, NVRTC rejects on the GPU: such a candidate is no ``ok``; without nvcc there is no verdict."""
    def nvcc(src):
        raise RuntimeError(nvcc_says)
    monkeypatch.setattr(kernel.offline, "nvcc_report", nvcc)
    (cand,) = kernel.gemm(70, 96, 40, keep=1, out=tmp_path, say=lambda line: None).candidates
    assert cand.status == status and cand.nvcc == nvcc_says


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="nvcc is not installed")
def test_cli_cpu_path_prints_tensor_core_candidates_and_writes_cuda_nvcc_accepts(tmp_path, capsys):
    assert main(["gemm", "128", "256", "128", "--dtype", "float16", "--keep", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == NO_GPU and not any("Traceback" in line for line in out)
    table = "\n".join(out)
    assert "v9_tma_ws" in table and "v8_wgmma" in table and "no llvm lowering" in table and "regs" in table
    files = sorted((tmp_path / "gemm_128x256x128_float16").glob("*.cu"))
    assert len(files) == 2
    assert any("registers" in line for line in nvcc_report(files[1].read_text()))   # built for sm_90a


def test_gpu_table_gives_each_candidate_its_time_and_the_ratio_to_the_vendor():
    wl = gemm(64, 64, 64)
    timed = lambda ms, variant="v5", provider="tvm": Measurement(wl, variant, provider, Timing(ms, ms, ms, 3))  # noqa: E731
    fast = Candidate("v5_warp_tiled", {"block_tile": (64, 64)}, "ok", measurement=timed(0.010))
    slow = Candidate("v5_warp_tiled", {"block_tile": (64, 32)}, "ok", measurement=timed(0.020))
    skipped = Candidate("v5_warp_tiled", {"tile_k": 7}, "skipped", "tile_k=7 must divide k")
    result = KernelResult(wl, (fast, slow, skipped), "a GPU", timed(0.015, "cublas_float32", "cublas"), fast,
                          Path("x.cu"))
    rows = result.table().splitlines()
    assert rows[0].split() == ["kernel", "params", "median", "us", "TFLOPS", "vendor", "us", "ratio"]
    assert rows[1].startswith("v5_warp_tiled *") and rows[1].split()[-2:] == ["15.0", "1.50"]
    assert rows[2].split()[-2:] == ["15.0", "0.75"] and "skipped: tile_k=7" in rows[3]
    assert "1.50x the vendor's speed" in result.summary()

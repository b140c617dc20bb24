"""Generated device source: extract the kernels, show them, and check the CUDA with nvcc (no GPU needed)."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping

import tvm
from tvm import s_tir

from tirbench.core import lowering
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import cuda_target


def device_source(kernel: s_tir.Schedule | tvm.IRModule, target: tvm.target.Target | None = None,
                  pass_config: Mapping[str, object] | None = None) -> str:
    """The full device source TVM generates for ``kernel`` (CUDA for ``cuda_target()`` by default), under the
    PassContext ``pass_config`` its kernel record builds it with (the tensor-core kernels need theirs); None: the
    caller's PassContext."""
    mod = kernel.mod if isinstance(kernel, s_tir.Schedule) else kernel
    if pass_config is None:   # the caller's PassContext, if any
        ex = tvm.compile(mod, target=target or cuda_target(), tir_pipeline=lowering.pipeline_for(mod))
    else:
        with tvm.transform.PassContext(config=dict(pass_config)):
            ex = tvm.compile(mod, target=target or cuda_target(), tir_pipeline=lowering.pipeline_for(mod))
    return ex.mod.imports[0].inspect_source()


def kernel_only(src: str) -> str:
    """The CUDA source from the first kernel definition on (drops TVM's fixed preamble and declarations)."""
    defs = [m.start() for m in re.finditer(r'extern "C" __global__[^;{]*\{', src)]
    return src[defs[0]:].strip() if defs else src


def show_cuda(kernel: s_tir.Schedule | tvm.IRModule) -> str:
    """Print and return the generated CUDA kernel(s) for ``cuda_target()``."""
    src = kernel_only(device_source(kernel))
    print(src)
    return src


def nvcc_report(src: str, arch: str | None = None) -> list[str]:
    """Compile CUDA source to a cubin with nvcc for ``arch`` (default: ``current_gpu().arch``) and return ptxas's
    register/shared-memory/spill lines.

    Raises RuntimeError if nvcc is missing or rejects the source.
    """
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if nvcc is None:
        raise RuntimeError("nvcc not found: install the CUDA toolkit or put nvcc on PATH")
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "kernel.cu"
        cu.write_text(src)
        r = subprocess.run([nvcc, f"-arch={arch or current_gpu().arch}", "-cubin", "-o", str(Path(d) / "kernel.cubin"), "--resource-usage",
                            "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", str(cu)],
                           capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["(nothing on stderr)"]
        first_error = next((line for line in lines if ": error" in line), lines[-1])
        raise RuntimeError(f"nvcc rejected the generated source: {first_error.strip()}")
    return [line.split(":", 1)[-1].strip() for line in (r.stdout + r.stderr).splitlines()
            if "registers" in line or "spill" in line]

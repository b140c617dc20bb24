"""Issue 41: code built for an older architecture than the GPU's runs there as PTX and computes right.

For each architecture older than the device's (sm_75, sm_80, sm_86, sm_89), in a process of its own with
``TIRBENCH_ARCH`` set: the GPU description, then a vector add and a tensor-core GEMM of a family that architecture
has (v6 wmma on sm_75, v7 mma.sync with ldmatrix and cp.async from sm_80), built with ``cuda_target()`` and checked
against numpy. Without the PTX compile the sm_XY cubins would not load on a newer GPU (CUDA_ERROR_NO_BINARY_FOR_GPU).

    PYTHONPATH=lib python3 tools/gpu-checks/ptx_arch_check.py          # < 1 min on an H100 or H200
"""
from __future__ import annotations

import os
import subprocess
import sys

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89")


def check_one() -> None:
    """In this process: the description and the two kernels for ``TIRBENCH_ARCH``; a wrong output raises."""
    import tvm
    from tvm import s_tir

    from tirbench.bench.harness import run_checked
    from tirbench.core.build import build
    from tirbench.core.gpu import current_gpu
    from tirbench.core.machine import cuda_target
    from tirbench.schedules.elementwise import bind_threads
    from tirbench.schedules.gemm.records import V6_WMMA, V7_MMA_LDMATRIX
    from tirbench.workloads import gemm
    from tirbench.workloads.elementwise import vector_add

    spec = current_gpu()
    print(f"{spec.arch} on {spec.name}: ptx={spec.ptx}, {spec.sm_count} SMs, features {', '.join(spec.features)}")
    add = vector_add(1 << 20)
    run_checked(add, build(bind_threads(s_tir.Schedule(add.mod), threads=256, vector=4), cuda_target()),
                tvm.cuda(0), what="vector_add")
    record = V7_MMA_LDMATRIX if "cp_async" in spec.features else V6_WMMA
    wl = gemm(1024, 1024, 1024, dtype="float16")
    run_checked(wl, build(record.apply(wl), cuda_target(), dict(record.pass_config)), tvm.cuda(0), what=record.name)
    print(f"PASS {spec.arch}: vector_add and {record.name} verified")


def main() -> int:
    from tirbench.core.gpu import arch_for, current_gpu, has_cuda_gpu, parse_arch

    if not has_cuda_gpu():
        print("no CUDA GPU: this check runs kernels built for older architectures on the GPU")
        return 2
    native = parse_arch(arch_for(current_gpu().compute_capability))[0]
    failed = []
    for arch in (a for a in ARCHS if parse_arch(a)[0] < native):
        done = subprocess.run([sys.executable, __file__, "--one"], env={**os.environ, "TIRBENCH_ARCH": arch},
                              capture_output=True, text=True)
        print(done.stdout.strip() or f"{arch}: no output")
        if done.returncode:
            failed.append(arch)
            print(f"FAIL {arch}: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--one"]:
        check_one()
    else:
        sys.exit(main())

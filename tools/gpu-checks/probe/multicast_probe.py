"""#40 diagnosis: v9 with a multicast in clusters (``multicast``, of A or of B: ``shares``), one candidate per
process (a hung kernel costs its line, not the run), a half C. The kernel is built by ``tma_ws.v9_kernel`` itself, past
``require_multicast``, so that forms the rules do not offer are measured too. Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/multicast_probe.py
"""
import subprocess
import sys

CASES = [  # (size, params): clusters of two sharing A (the rules' choice at 2000x3000x1000, for reference) or B
    ((2000, 3000, 1000), {"block_tile": (128, 192), "stages": 4, "multicast": 2}),
    ((2000, 3000, 1000), {"block_tile": (128, 192), "stages": 4, "multicast": 2, "shares": "B"}),
    ((2000, 3000, 1000), {"block_tile": (128, 192), "stages": 4, "persistent_ctas": 0, "multicast": 2,
                          "shares": "B"}),
    ((2000, 3000, 1000), {"block_tile": (128, 256), "stages": 4, "multicast": 2, "shares": "B"}),
    ((4096, 4096, 4096), {"block_tile": (128, 256), "stages": 4, "multicast": 2, "shares": "B"}),
    ((4096, 4096, 4096), {"block_tile": (128, 256), "stages": 4, "multicast": 2}),
]


def one(size: tuple[int, int, int], params: dict) -> None:
    from tvm import s_tir
    from tvm.ir import IRModule

    from tirbench.bench.harness import verify_then_time
    from tirbench.core.machine import cuda_target
    from tirbench.schedules.gemm.records import V9_TMA_WS
    from tirbench.schedules.gemm.tma_ws import v9_kernel
    from tirbench.workloads import gemm
    wl = gemm(*size, dtype="float16", out_dtype="float16")
    kernel = v9_kernel(*size, out_dtype="float16", **V9_TMA_WS.params(params))
    m = verify_then_time(wl, s_tir.Schedule(IRModule({"main": kernel})), variant="v9", repeats=30,
                         target=cuda_target())
    print(f"{size} {params}: {m.timing.median_ms * 1e3:.1f} us", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(eval(sys.argv[1]), eval(sys.argv[2]))
        sys.exit()
    for size, params in CASES:
        try:
            r = subprocess.run([sys.executable, __file__, repr(size), repr(params)], capture_output=True, text=True,
                               timeout=45)
            print(r.stdout.strip() or f"{size} {params}: FAIL {r.stderr.strip().splitlines()[-1:]}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{size} {params}: HUNG (45 s)", flush=True)

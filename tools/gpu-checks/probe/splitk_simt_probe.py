"""#40 diagnosis: fp32 split-K (``SPLITK_SIMT``) forms at 100x3000x5000 that the rules do not offer, each verified
and timed (L2 flushed) beside the rules' best so far, in one process. Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/splitk_simt_probe.py
"""
from tirbench.bench.harness import verify_then_time
from tirbench.core.machine import cuda_target
from tirbench.schedules.gemm.records import SPLITK_SIMT
from tirbench.workloads import gemm

BEST = {"split": 11, "block_tile": (128, 256), "warp_tile": (64, 32), "thread_tile": (8, 8), "stages": 3,
        "columns_outer": True}
#: The rules' best at 100x3000x5000 (0.88x), then one change each; each built with the record's PassContext config
#: (as the rules build it).
CASES = [
    {},
    {"stages": 4},
    {"tile_k": 8, "stages": 4},
    {"tile_k": 8, "stages": 6},
    {"tile_k": 32, "stages": 2},
    {"prefetch": "k_step"},
    {"prefetch": "next_tile"},
    {"warp_tile": (32, 64), "prefetch": "k_step"},
    {"split": 21},
    {"block_tile": (128, 128)},
    {"block_tile": (128, 128), "prefetch": "next_tile"},
    {"block_tile": (128, 128), "tile_k": 32, "stages": 2},
]

if __name__ == "__main__":
    wl = gemm(100, 3000, 5000, dtype="float32", out_dtype="float32")
    for change in CASES:
        params = {**BEST, **change}
        try:
            m = verify_then_time(wl, SPLITK_SIMT.apply(wl, params), variant="splitk_simt", repeats=30,
                                 target=cuda_target(), pass_config=dict(SPLITK_SIMT.pass_config))
            print(f"{change or 'rules best'}: {m.timing.median_ms * 1e3:.1f} us", flush=True)
        except Exception as err:  # noqa: BLE001 - a probe reports every form and goes on
            print(f"{change}: FAIL {str(err).splitlines()[-1][:200]}", flush=True)

"""#42 diagnosis: Inception-v3's fp16 layers whose GEMM has few k tiles (32-96 channels: GEMM_K = 64-864), where the
implicit GEMMs are latency-bound (run ``e73a8e``: the 32-channel 3x3s at 147-149 px 0.53-0.56x cuDNN, the 80-channel
3x3 at 73 px 0.66x). Each layer on ``NHWC_WGMMA`` and ``NHWC_MMA`` in tiles x pipeline depths, fewer stages leaving
room for more blocks an SM; built with the record's PassContext config, verified, timed (L2 flushed) beside cuDNN's
faster layout, in one process. Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/shallow_k_probe.py
"""
from tirbench.bench.baselines import vendor
from tirbench.bench.harness import verify_then_time
from tirbench.core.errors import refusal
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import NHWC_MMA, NHWC_WGMMA
from tirbench.workloads import conv2d

LAYERS = [(32, 149, 32, 0), (32, 147, 64, 1), (80, 73, 192, 0), (96, 35, 96, 1)]   # (C, H = W, K, pad), 3x3
WGMMA = [{"block_tile": bt, "stages": st, **({"overlap": True} if overlap else {})}
         for bt in ((64, 64), (128, 64), (128, 128)) for st in (2, 3, 4) for overlap in (False, True)
         if st >= 3 or not overlap]
MMA = [{"block_tile": (bm, 64), "warp_tile": (64, wn), "tile_k": 32, "stages": st}
       for bm, wn in ((128, 32), (256, 64)) for st in (2, 3)]

if __name__ == "__main__":
    for c, size, k, pad in LAYERS:
        wl = conv2d(32, c, size, size, k, 3, 3, 1, pad, layout="NHWC", dtype="float16")
        cudnn_us = vendor(wl, repeats=30).timing.median_ms * 1e3
        for record, cands in ((NHWC_WGMMA, WGMMA), (NHWC_MMA, MMA)):
            for params in cands:
                why = refusal(lambda: record.apply(wl, params))
                if why:
                    print(f"{wl.shape} {record.name} {params}: refused: {why}", flush=True)
                    continue
                m = verify_then_time(wl, record.apply(wl, params), variant=record.name, repeats=30,
                                     target=cuda_target(), pass_config=dict(record.pass_config))
                us = m.timing.median_ms * 1e3
                print(f"{wl.shape} {record.name} {params}: {us:.1f} us, cuDNN {cudnn_us:.1f} us, "
                      f"{cudnn_us / us:.2f}x", flush=True)

"""#42 diagnosis: Inception-v3's fp16 layers whose GEMM has few k tiles (32-96 channels: GEMM_K = 64-864), where the
implicit GEMMs lose to cuDNN (run ``e73a8e``: the 32-channel 3x3s at 147-149 px 0.53-0.56x, the 80-channel 3x3 at 73
px 0.66x). Each layer on ``NHWC_WGMMA`` in 128- and 256-row tiles, 2 to 4 stages, im2col fills through L1 or not
(``l1_fill``: a tap's neighbours in its kernel row read the same pixels shifted by one), and on ``NHWC_MMA``'s
L1-filling tile; built with the record's PassContext config, verified, timed (L2 flushed) beside cuDNN's
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
WGMMA = [{"block_tile": bt, "stages": st, **({"l1_fill": True} if l1 else {})}
         for bt in ((128, 64), (256, 64)) for st in (2, 3, 4) for l1 in (False, True)]
MMA = [{"block_tile": (256, 64), "warp_tile": (64, 64), "tile_k": 32, "stages": 3, "l1_fill": True}]

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

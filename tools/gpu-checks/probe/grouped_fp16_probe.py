"""#42 diagnosis: ResNeXt-50's grouped 3x3s in fp16 (batch 32, NHWC) on ``NHWC_GROUPED_MMA`` in every tile of its
sweep and in 128 x 32 tiles of two 64 x 32 warps (the int8 grouped kernel's fastest, not in the sweep), each built
with the record's PassContext config, verified and timed (L2 flushed) beside cuDNN's faster layout, in one process.
In notebook 10's run ``55ae26`` these layers are 0.50-0.96x cuDNN (the stencil at 128 and 256 channels,
``nhwc_grouped_mma`` at 512 and 1024). Run from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/grouped_fp16_probe.py
"""
from tirbench.bench.baselines import vendor
from tirbench.bench.harness import verify_then_time
from tirbench.core.errors import refusal
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import NHWC_GROUPED_MMA
from tirbench.workloads import conv2d

LAYERS = [(128, 56, 1), (256, 56, 2), (256, 28, 1), (512, 28, 2), (512, 14, 1), (1024, 14, 2), (1024, 7, 1)]
TWO_WARPS = {"block_tile": (128, 32), "warp_tile": (64, 32), "tile_k": 32, "stages": 4}

if __name__ == "__main__":
    for c, size, stride in LAYERS:
        wl = conv2d(32, c, size, size, c, 3, 3, stride, 1, groups=32, layout="NHWC", dtype="float16")
        cudnn_us = vendor(wl, repeats=30).timing.median_ms * 1e3
        for params in (*NHWC_GROUPED_MMA.candidates, TWO_WARPS):
            why = refusal(lambda: NHWC_GROUPED_MMA.apply(wl, params))
            if why:
                print(f"{wl.shape} {params}: refused: {why}", flush=True)
                continue
            m = verify_then_time(wl, NHWC_GROUPED_MMA.apply(wl, params), variant="nhwc_grouped_mma", repeats=30,
                                 target=cuda_target(), pass_config=dict(NHWC_GROUPED_MMA.pass_config))
            us = m.timing.median_ms * 1e3
            print(f"{wl.shape} {params}: {us:.1f} us, cuDNN {cudnn_us:.1f} us, {cudnn_us / us:.2f}x", flush=True)

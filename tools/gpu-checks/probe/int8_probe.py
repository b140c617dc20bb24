"""#14: the batch-256 int8 wgmma kernel with l1_fill / raster variants beside cuDNN fp16 NHWC (same run)."""
import time

from tirbench.bench.baselines import cudnn_conv2d
from tirbench.bench.harness import verify_then_time
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import INT8_WGMMA
from tirbench.workloads import conv2d, conv2d_int8

shape = (256, 256, 14, 14, 512, 3, 3, 1, 1)
wl = conv2d_int8(*shape, relu=True, residual=True)
base = dict(block_tile=(256, 128), tile_k=128, stages=4, overlap=True)
t0 = time.time()
wide = dict(block_tile=(128, 256), tile_k=128, stages=3, overlap=True)
configs = [base, {**base, "l1_fill": True}, wide, {**wide, "stages": 4}, {**wide, "l1_fill": True},
           {**wide, "stages": 4, "l1_fill": True}, {**wide, "raster": 4}, base]
for i, kw in enumerate(configs):
    try:
        m = verify_then_time(wl, INT8_WGMMA.apply(wl, kw), variant="w", repeats=50, seed=0, target=cuda_target(),
                             pass_config=INT8_WGMMA.pass_config)
        print(f"int8_wgmma {kw}: {m.timing.median_ms * 1e3:.1f} us [{time.time() - t0:.0f}s]", flush=True)
    except Exception as e:
        print(f"int8_wgmma {kw}: FAIL {str(e).splitlines()[-1][:200]}", flush=True)
    if i in (0, 3, len(configs) - 1):
        c = cudnn_conv2d(conv2d(*shape, layout="NCHW", dtype="float16"), channels_last=True, repeats=50, seed=0)
        print(f"  cudnn fp16 nhwc: {c.timing.median_ms * 1e3:.1f} us", flush=True)

"""#42 diagnosis: the int8 layers that lose most to cuDNN fp16 in run ``0b4d3a`` (the 1x1 layers of ResNet-50 and
ResNeXt-50 at 0.78-0.81x, Inception's 2048->320 at 8x8 at 0.60x, 3x3s at 0.69-0.80x), each on a wide grid of
``INT8_MMA`` and ``INT8_WGMMA`` tilings (nine and six block tiles, k tiles of 32 to 128, L1 fills or not, 3 or 4
wgmma stages: 90 a layer, not only the families' recorded candidates), beside cuDNN fp16's faster layout, every
kernel verified (bit-exact) and timed (L2 flushed) in one process; the fastest few per layer are printed. Run from the
repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_tile_grid_probe.py
"""
import itertools

from tirbench.bench.baselines import vendor
from tirbench.bench.harness import start_build_workers
from tirbench.bench.sweep import sweep_all
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import INT8_MMA, INT8_WGMMA
from tirbench.workloads import conv2d_int8

#: (N, C, H = W, K, R = S, stride, pad) of the layers.
LAYERS = [(32, 64, 56, 256, 1, 1, 0), (32, 128, 56, 256, 1, 1, 0), (32, 256, 28, 512, 1, 1, 0),
          (32, 512, 14, 1024, 1, 1, 0), (32, 2048, 8, 320, 1, 1, 0),
          (32, 288, 35, 384, 3, 2, 0), (32, 448, 8, 384, 3, 1, 1)]
MMA_TILES = [((128, 128), (64, 64)), ((128, 256), (64, 64)), ((256, 128), (64, 64)), ((128, 128), (64, 32)),
             ((64, 128), (32, 64)), ((64, 256), (64, 64)), ((128, 64), (64, 32)), ((256, 64), (64, 64)),
             ((64, 64), (32, 32))]
MMA = [{"block_tile": bt, "warp_tile": wt, "tile_k": tk, "stages": st, **extra}
       for (bt, wt), tk, st, extra in itertools.product(MMA_TILES, (32, 64, 128), (4,), ({}, {"l1_fill": True}))]
WGMMA = [{"block_tile": bt, "tile_k": tk, "stages": st, "overlap": True, "layout": lay}
         for bt in ((128, 64), (128, 128), (128, 256), (64, 128), (64, 256), (256, 128)) for st in (3, 4)
         for tk, lay in ((64, "interleaved"), (128, "swizzle128"), (128, "interleaved"))]
SHOWN = 8

if __name__ == "__main__":
    target = cuda_target()
    start_build_workers(target)
    wls = [conv2d_int8(n, c, hw, hw, k, rs, rs, stride, pad, relu=True, residual=False)
           for n, c, hw, k, rs, stride, pad in LAYERS]
    results = sweep_all([(wl, [INT8_MMA.with_candidates(MMA), INT8_WGMMA.with_candidates(WGMMA)]) for wl in wls],
                        target=target, repeats=30, seed=0, strict=False)
    for wl, result in zip(wls, results):
        cudnn_us = vendor(wl, repeats=30).timing.median_ms * 1e3
        table = result.table()
        ok = table[table["status"] == "ok"].sort_values("median_ms")
        print(f"{wl.shape}: cuDNN fp16 {cudnn_us:.1f} us; {len(ok)} of {len(table)} candidates verified", flush=True)
        for row in ok.head(SHOWN).itertuples():
            us = row.median_ms * 1e3
            print(f"  {row.kernel} {row.params}: {us:.1f} us, {cudnn_us / us:.2f}x", flush=True)

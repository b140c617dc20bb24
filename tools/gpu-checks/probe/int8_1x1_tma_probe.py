"""#42: the int8 1x1 form with both tiles by TMA (``conv2d_int8_tma_ws(..., a_by_tma=True)``, the filter stored
(K, R, S, C)) on the int8 1x1 layers that lose most to cuDNN fp16 (``int8_tile_grid_probe.py``: 0.78-0.86x on every
tiling of the implicit GEMMs), each tile verified (bit-exact: the first GPU run of this kernel) and timed (L2
flushed), beside the kernel notebook 10 replays and cuDNN fp16's faster layout in one process. Run from the repository
root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_1x1_tma_probe.py
"""
from tirbench.bench.baselines import vendor
from tirbench.bench.choose import Choices, families_by_name
from tirbench.bench.harness import start_build_workers, verify_then_time
from tirbench.bench.networks import CHOICES
from tirbench.bench.sweep import sweep_all
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import INT8_TMA_WS
from tirbench.workloads import conv2d_int8

#: (N, C, H = W, K) of 1x1 layers of stride 1: ResNet-50's and ResNeXt-50's, Inception's 2048->320 at 8x8.
LAYERS = [(32, 64, 56, 256), (32, 128, 56, 256), (32, 256, 56, 64), (32, 256, 28, 512), (32, 512, 14, 1024),
          (32, 1024, 14, 256), (32, 2048, 8, 320)]
TILES = [{"block_tile": (128, 256), "stages": 4}, {"block_tile": (128, 128), "stages": 6},
         {"block_tile": (64, 256), "stages": 4, "consumers": 1}, {"block_tile": (64, 128), "stages": 8, "consumers": 1},
         {"block_tile": (128, 64), "stages": 8}]
CANDIDATES = [{**tile, "a_by_tma": True, "persistent_ctas": ctas} for tile in TILES
              for ctas in (0, current_gpu().sm_count)]

if __name__ == "__main__":
    target = cuda_target()
    start_build_workers(target)
    choices = Choices(CHOICES)
    layers = [(conv2d_int8(n, c, hw, hw, k, 1, 1, 1, 0, relu=True), conv2d_int8(n, c, hw, hw, k, 1, 1, 1, 0, relu=True,
                                                                               filter_layout="KRSC"))
              for n, c, hw, k in LAYERS]
    results = sweep_all([(krsc, INT8_TMA_WS.with_candidates(CANDIDATES)) for _, krsc in layers], target=target,
                        repeats=30, seed=0, strict=False)
    for (wl, krsc), result in zip(layers, results):
        cudnn_us = vendor(wl, repeats=30).timing.median_ms * 1e3
        chosen = choices.recorded(wl)
        line = f"{wl.shape}: cuDNN fp16 {cudnn_us:.1f} us"
        if chosen is not None:
            record = families_by_name()[chosen.kernel]
            form = krsc if chosen.params.get("filter_layout") == "KRSC" else wl
            params = {key: value for key, value in chosen.params.items() if key != "filter_layout"}
            m = verify_then_time(form, record.apply(form, params), variant=record.name, repeats=30, target=target,
                                 pass_config=dict(record.pass_config))
            line += f"; replayed {chosen.kernel} {params}: {m.timing.median_ms * 1e3:.1f} us"
        print(line, flush=True)
        table = result.table().sort_values("median_ms")
        for row in table.itertuples():
            if row.status == "ok":
                us = row.median_ms * 1e3
                print(f"  a_by_tma {row.params}: {us:.1f} us, {cudnn_us / us:.2f}x", flush=True)
            else:
                print(f"  a_by_tma {row.params}: {row.status} ({row.reason})", flush=True)

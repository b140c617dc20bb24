"""#29: the int8 batch-256 layer (256x256x14x14 -> 512, 3x3, bias + residual + ReLU, filter stored (K, R, S, C)) on
the warp-specialized kernel over a grid of its parameters wider than ``INT8_TMA_WS``'s candidates (block tile,
stages, producer threads per im2col row, the gather through L1 or not, persistent blocks), each verified bit for bit,
timed in two rounds (the second in reverse order, so that a drift of the clocks shows), cuDNN fp16 channels-last
before and after. Prints the ten fastest by their slower round, against the issue's 1.2x cuDNN fp16:

    PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_b256_grid_probe.py          # the whole grid
    PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_b256_grid_probe.py --focus  # 128x256, persistent: 16, ~1 min
"""
import itertools
import sys

SHAPE = (256, 256, 14, 14, 512, 3, 3, 1, 1)
LANES = (1, 2, 4, 8)   # producer threads per im2col row
TILES = {(128, 256): 2, (128, 128): 2, (64, 256): 1}   # block tile: consumer warpgroups


def grid(focus: bool = False):
    """Every parameter set of the grid that the kernel's checks accept (``focus``: 128x256 tiles in persistent
    blocks, 3 or 4 stages)."""
    from tirbench.core.errors import refusal
    from tirbench.schedules.conv.records import INT8_TMA_WS
    from tirbench.schedules.conv.rules import int8_forms
    from tirbench.workloads import conv2d_int8

    (form,) = [f for f in int8_forms(conv2d_int8(*SHAPE, relu=True, residual=True))]
    out = []
    tiles = {(128, 256): 2} if focus else TILES
    for (tile, consumers), stages, lanes, l1 in itertools.product(tiles.items(), (3, 4) if focus else (3, 4, 5, 6),
                                                                  LANES, (False, True)):
        for ctas in (132,) if focus else (0, 132) if tile == (128, 256) else (0,):
            params = {"block_tile": tile, "consumers": consumers, "stages": stages, "lanes": lanes,
                      "l1_gather": l1, "persistent_ctas": ctas}
            if refusal(lambda: INT8_TMA_WS.apply(form, params)) is None:
                out.append(params)
    return form, out


def main(focus: bool) -> None:
    from tirbench.bench.baselines import cudnn_conv2d
    from tirbench.bench.harness import start_build_workers
    from tirbench.bench.sweep import sweep
    from tirbench.core.machine import cuda_target
    from tirbench.schedules.conv.records import INT8_TMA_WS
    from tirbench.workloads import conv2d

    cuda = cuda_target()
    start_build_workers(cuda)
    form, cands = grid(focus)
    fp16 = conv2d(*SHAPE, layout="NCHW", dtype="float16")

    def cudnn():
        return cudnn_conv2d(fp16, channels_last=True, repeats=50, seed=0).timing.median_ms

    base = [cudnn()]
    times: dict[str, list[float]] = {}
    for order in (cands, cands[::-1]):
        result = sweep(form, INT8_TMA_WS.with_candidates(order), target=cuda, repeats=50, seed=0)
        for trial in result.measured():
            times.setdefault(repr(dict(trial.overrides)), []).append(trial.measurement.timing.median_ms)
    base.append(cudnn())
    ref = max(base)
    print(f"{len(cands)} candidates; cuDNN fp16 channels-last {base[0] * 1e3:.1f} / {base[1] * 1e3:.1f} us")
    for params, ms in sorted(times.items(), key=lambda kv: max(kv[1]))[:10]:
        print(f"  {' / '.join(f'{t * 1e3:.1f}' for t in ms)} us: {ref / max(ms):.3f}x cuDNN fp16 (target 1.2x)  {params}")


if __name__ == "__main__":
    main("--focus" in sys.argv[1:])

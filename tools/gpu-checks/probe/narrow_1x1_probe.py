"""#42 diagnosis: the fp16 1x1 layers of few channels (MobileNetV2's 16-144, Inception's 64->80 and 768->160), whose
time is their output write, on ``NHWC_1X1_TMA`` (v9's GEMM, persistent or not, Y stored by TMA) now that it takes any
C and K in 8s (the TMA unit zero-fills the k tile past C and clips the columns past K), beside the kernel notebook 10
replays (``results/10_networks/choices.csv``) and cuDNN's faster layout, each verified and timed (L2 flushed) in one
process. In run ``0b4d3a`` MobileNetV2's 16->96 at 112x112 is 0.53x cuDNN, Inception's 64->80 at 73x73 0.49x. Run
from the repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/probe/narrow_1x1_probe.py
"""
from tirbench.bench.baselines import vendor
from tirbench.bench.choose import Choices, families_by_name
from tirbench.bench.harness import verify_then_time
from tirbench.bench.networks import CHOICES
from tirbench.core.errors import refusal
from tirbench.core.machine import cuda_target
from tirbench.schedules.conv.records import NHWC_1X1_TMA
from tirbench.workloads import conv2d

#: (N, C, H = W, K) of 1x1 layers of stride 1.
LAYERS = [(32, 16, 112, 96), (32, 24, 56, 144), (32, 32, 112, 16), (32, 96, 56, 24), (32, 144, 56, 24),
          (32, 64, 73, 80), (32, 768, 17, 160)]


def timed(wl, record, params) -> float:
    m = verify_then_time(wl, record.apply(wl, params), variant=record.name, repeats=30, target=cuda_target(),
                         pass_config=dict(record.pass_config))
    return m.timing.median_ms * 1e3


if __name__ == "__main__":
    choices = Choices(CHOICES)
    for n, c, size, k in LAYERS:
        wl = conv2d(n, c, size, size, k, 1, 1, 1, 0, layout="NHWC", dtype="float16")
        cudnn_us = vendor(wl, repeats=30).timing.median_ms * 1e3
        chosen = choices.recorded(wl)
        if chosen is not None:
            us = timed(wl, families_by_name()[chosen.kernel], chosen.params)
            print(f"{wl.shape} replayed {chosen.kernel} {chosen.params}: {us:.1f} us, cuDNN {cudnn_us:.1f} us, "
                  f"{cudnn_us / us:.2f}x", flush=True)
        for params in NHWC_1X1_TMA.candidates:
            why = refusal(lambda: NHWC_1X1_TMA.apply(wl, params))
            if why:
                print(f"{wl.shape} nhwc_1x1_tma {params}: refused: {why}", flush=True)
                continue
            us = timed(wl, NHWC_1X1_TMA, params)
            print(f"{wl.shape} nhwc_1x1_tma {params}: {us:.1f} us, cuDNN {cudnn_us:.1f} us, {cudnn_us / us:.2f}x",
                  flush=True)

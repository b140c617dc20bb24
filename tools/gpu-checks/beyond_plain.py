"""Convolutions beyond plain layers on a GPU (issue 42, < 5 min on an H100/H200), all at batch 32: Inception-v3's 1x7
and 7x1 layers (padding per axis) in fp16 and int8, its 48-channel 1x1 in int8 (the last output group's lanes past K
zero), MobileNetV2's 16-channel projection and stride-2 depthwise 3x3 and ConvNeXt-T's depthwise 7x7 in int8, and
ResNeXt-50's grouped 3x3 in fp16 where a family takes it: the rules' candidates built in one parallel batch,
verified (int8 bit for bit) and timed beside cuDNN's faster layout (int8 against cuDNN fp16, as notebook 10) in the
same process (``tirbench.kernel.best_kernels``). Appends each choice's row (variant ``rules_<family>``) and cuDNN's
to ``results/kernel/beyond_plain.csv`` and prints each choice against cuDNN (``KernelResult.summary``). Run from the
repository root:
    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/beyond_plain.py [--keep 2] [--repeats 30]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tirbench.core.errors import refusal
from tirbench.core.machine import require_cuda_gpu
from tirbench.kernel import best_kernels
from tirbench.kernel.run import conv_layer
from tirbench.schedules.conv.rules import rule_records

#: (n, c, h, w, k, r, s, stride, pad, dtype, groups)
LAYERS = ((32, 128, 17, 17, 128, 1, 7, 1, (0, 3), "float16", 1), (32, 128, 17, 17, 192, 7, 1, 1, (3, 0), "float16", 1),
          (32, 128, 17, 17, 128, 1, 7, 1, (0, 3), "int8", 1), (32, 128, 17, 17, 192, 7, 1, 1, (3, 0), "int8", 1),
          (32, 192, 35, 35, 48, 1, 1, 1, 0, "int8", 1), (32, 32, 112, 112, 16, 1, 1, 1, 0, "int8", 1),
          (32, 144, 56, 56, 144, 3, 3, 2, 1, "int8", 144), (32, 96, 56, 56, 96, 7, 7, 1, 3, "int8", 96),
          (32, 256, 28, 28, 256, 3, 3, 1, 1, "float16", 32))
CSV = Path("results/kernel/beyond_plain.csv")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--keep", type=int, default=2, help="candidates per family (default 2)")
    args = ap.parse_args()
    require_cuda_gpu()
    start = time.time()
    wls = []
    for *sizes, dtype, groups in LAYERS:
        wl = conv_layer(*sizes, dtype=dtype, groups=groups)
        if (why := refusal(lambda: rule_records(wl, keep=0))) is None:
            wls.append(wl)
        else:
            print(f"{wl.shape} {dtype}: skipped, {why}")
    CSV.parent.mkdir(parents=True, exist_ok=True)
    for r in best_kernels(wls, keep=args.keep, repeats=args.repeats, out=Path("build/kernel"), csv=CSV):
        print(r.summary())
    print(f"[{time.time() - start:.0f} s] rows appended to {CSV}")


if __name__ == "__main__":
    main()

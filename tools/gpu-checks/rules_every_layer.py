"""Issue 41: notebook 08's conv rules give every ResNet-50 layer a verified kernel on each older architecture.

For each architecture older than the device's (default sm_75, sm_80, sm_89), in a process of its own with
``TIRBENCH_ARCH`` set (its code runs as PTX): the 23 layers in fp32 (batch 1, NCHW), fp16 (NHWC) and int8 (the
notebook's forms) at ``--batch`` (8, as notebook 08's quick run), each layer's rule forms swept with one candidate per
family (``bench.choose.sweep_forms(keep=1)``: every family the rules offer there built in one parallel batch, each
kernel verified against its reference, exact for int8, then timed), the fastest kept. A configuration no family of
the architecture takes is one line. Appends a row per layer to ``results/kernel/rules_every_layer.csv`` (arch, GPU,
config, layer, shape, the kernel, its time) and prints a count per architecture and configuration.

    PYTHONPATH=lib python3 tools/gpu-checks/rules_every_layer.py [--archs sm_75 sm_89] [--configs fp32 int8]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ARCHS = ("sm_75", "sm_80", "sm_89")
CONFIGS = ("fp32", "fp16", "int8")
CSV = Path("results/kernel/rules_every_layer.csv")
FIELDS = ["timestamp", "gpu", "driver", "tvm_version", "arch", "config", "layer", "shape", "kernel", "params",
          "verified", "median_ms"]


def check_one(configs: list[str], batch: int) -> int:
    """In this process (``TIRBENCH_ARCH`` set): every layer of each config swept and verified; returns the number of
    layers without a verified kernel."""
    from datetime import datetime, timezone

    from tirbench.bench.choose import sweep_forms
    from tirbench.bench.results import append_csv
    from tirbench.core.gpu import current_gpu
    from tirbench.core.machine import DeviceInfo, cuda_target
    from tirbench.schedules.conv.rules import refused_here
    from tirbench.workloads import conv2d, conv2d_int8
    from tirbench.workloads.resnet50 import RESNET50

    make = {"fp32": lambda layer: conv2d(*layer.shape(1), layout="NCHW", dtype="float32"),
            "fp16": lambda layer: conv2d(*layer.shape(batch), layout="NHWC", dtype="float16"),
            "int8": lambda layer: conv2d_int8(*layer.shape(batch), relu=True, residual=False)}
    arch, device, target = current_gpu().arch, DeviceInfo.detect(), cuda_target()
    missing, rows = 0, []
    for config in configs:
        wls = [make[config](layer) for layer in RESNET50]
        why = refused_here(wls[0])
        if why:
            print(f"{arch} {config}: no family ({why})")
            missing += len(wls)
            continue
        start = time.perf_counter()
        found = 0
        for layer, wl, forms in zip(RESNET50, wls, sweep_forms(wls, target=target, repeats=5, seed=0, keep=1)):
            trials = [t for _, result in forms if (t := result.best_trial())]
            best = min(trials, key=lambda t: t.measurement.timing.median_ms, default=None)
            found += best is not None
            rows.append({"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "gpu": device.gpu,
                         "driver": device.driver, "tvm_version": device.tvm_version, "arch": arch, "config": config,
                         "layer": layer.name, "shape": wl.shape, "kernel": best.record.name if best else "",
                         "params": repr(dict(best.overrides)) if best else "", "verified": best is not None,
                         "median_ms": f"{best.measurement.timing.median_ms:.6f}" if best else ""})
        missing += len(wls) - found
        print(f"{arch} {config}: {found} of {len(wls)} layers a verified kernel "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    CSV.parent.mkdir(parents=True, exist_ok=True)
    append_csv(CSV, rows, FIELDS, lambda row: None)   # atomic; refuses a file that is not whole
    return missing


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", nargs="+", default=list(ARCHS))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--batch", type=int, default=8, help="batch of the fp16 and int8 layers")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return 1 if check_one(args.configs, args.batch) else 0
    from tirbench.core.gpu import has_cuda_gpu

    if not has_cuda_gpu():
        print("no CUDA GPU: this check runs the rules' kernels on the GPU")
        return 2
    failed = []
    for arch in args.archs:
        done = subprocess.run([sys.executable, __file__, "--one", "--batch", str(args.batch), "--configs",
                               *args.configs], env={**os.environ, "TIRBENCH_ARCH": arch})
        if done.returncode:
            failed.append(arch)
    print("FAIL: " + ", ".join(failed) if failed else f"PASS: every layer a verified kernel on {', '.join(args.archs)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

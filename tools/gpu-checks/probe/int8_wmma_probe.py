"""Issue 41: Turing's int8 family (``sm75_int8_wmma``) on a GPU, built for sm_75 (on a newer GPU: PTX the driver
compiles). Every candidate on notebook 08's ResNet-50 int8 layers (batch 32) and on layers whose tiles pad pixels and
channels, each verified bit for bit and timed (``sweep``); one line per layer with its best candidate, PASS/FAIL at the
end. Writes nothing.

    PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_wmma_probe.py          # a few minutes on an H100
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("TIRBENCH_ARCH", "sm_75")   # before tirbench reads it

#: Layers beyond ResNet-50's: (shape, residual); the stem's 3 channels, 49 pixels and 96 channels in 64 x 128 tiles, a
#: strided 1x1 smaller than a tile, notebook 07's QUICK layers.
EXTRA = [((2, 3, 17, 17, 64, 7, 7, 2, 3), True), ((1, 64, 7, 7, 96, 3, 3, 1, 1), True),
         ((2, 128, 7, 5, 64, 1, 1, 2, 0), False), ((64, 64, 8, 8, 128, 3, 3, 1, 1), True),
         ((16, 64, 8, 8, 64, 3, 3, 1, 1), True)]


def main() -> int:
    from tirbench.bench.harness import start_build_workers
    from tirbench.bench.sweep import SweepError, sweep_all
    from tirbench.core.gpu import current_gpu, has_cuda_gpu
    from tirbench.core.machine import cuda_target
    from tirbench.schedules.conv.records import SM75_INT8_WMMA
    from tirbench.workloads import conv2d_int8
    from tirbench.workloads.resnet50 import RESNET50

    if not has_cuda_gpu():
        print("no CUDA GPU: this probe runs the kernels")
        return 2
    spec = current_gpu()
    print(f"{SM75_INT8_WMMA.name} built for {spec.arch} on {spec.name} (ptx={spec.ptx})", flush=True)
    layers = {layer.name: conv2d_int8(*layer.shape(32), relu=True, residual=False) for layer in RESNET50}
    layers.update({"x".join(map(str, shape)): conv2d_int8(*shape, relu=True, residual=res) for shape, res in EXTRA})
    cuda = cuda_target()
    start_build_workers(cuda)
    failed = []
    for name, wl in layers.items():
        try:
            (result,) = sweep_all([(wl, SM75_INT8_WMMA)], target=cuda, repeats=20, seed=0)
        except SweepError as err:
            failed.append(name)
            print(f"FAIL {name}: {err}", flush=True)
            continue
        rejected = [t for t in result.trials if t.status == "rejected"]
        best = result.best_trial()
        failed += [name] * bool(rejected)
        print(f"{'FAIL' if rejected else 'ok  '} {name} {wl.shape}: {len(result.measured())} verified, "
              f"{len(rejected)} rejected; best {best.label} {best.measurement.timing.median_ms * 1e3:,.1f} us, "
              f"{best.measurement.gflops / 1e3:.1f} TOPS", flush=True)
    print(f"{'FAIL' if failed else 'PASS'}: {len(layers) - len(set(failed))} of {len(layers)} layers verified bit "
          f"for bit on every candidate")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""#28/#29: the int8 layers' packed-filter forms (``rules.int8_forms``) as the conv rules choose them, before a
notebook 08 run: the stem with its filter stored (K, R, S8, 4) on mma.sync (new: a kernel that has not yet run on a
GPU) and the batch-256 3x3 layer with its filter stored (K, R, S, C) on the warp-specialized kernel, each beside
cuDNN's faster fp16 layout in the same process, with the targets of the issues.

Each layer runs in a process of its own, so a kernel that faults on the GPU (a CUDA error poisons its process) costs
its own line and not the run:

    PYTHONPATH=lib python3 tools/gpu-checks/probe/int8_forms_probe.py          # ~2 min on an H100
"""
import multiprocessing as mp
import sys

LAYERS = {   # name: (shape, relu, residual, the cuDNN fp16 / TVM target, if any)
    "stem b32": ((32, 3, 224, 224, 64, 7, 7, 2, 3), True, False, None),
    "3x3 b256": ((256, 256, 14, 14, 512, 3, 3, 1, 1), True, True, 1.2),
}


def probe(name: str) -> None:
    from tirbench.bench.baselines import cudnn_conv2d
    from tirbench.bench.choose import choose_many
    from tirbench.bench.harness import start_build_workers
    from tirbench.core.machine import cuda_target
    from tirbench.workloads import conv2d, conv2d_int8

    shape, relu, residual, target = LAYERS[name]
    cuda = cuda_target()
    start_build_workers(cuda)
    (choice,) = choose_many([conv2d_int8(*shape, relu=relu, residual=residual)], target=cuda, repeats=50, seed=0)
    fp16 = conv2d(*shape, layout="NCHW", dtype="float16")
    cudnn = min(cudnn_conv2d(fp16, channels_last=cl, repeats=50, seed=0).timing.median_ms for cl in (False, True))
    ours = choice.measurement.timing.median_ms
    verdict = "" if target is None else f" (target {target}x: {'PASS' if cudnn / ours >= target else 'FAIL'})"
    print(f"{name}: {choice.kernel} {dict(choice.params)} {ours * 1e3:.1f} us, cuDNN fp16 {cudnn * 1e3:.1f} us: "
          f"{cudnn / ours:.2f}x{verdict}; rules {choice.rules_s:.0f} s", flush=True)


if __name__ == "__main__":
    failed = 0
    for layer in LAYERS:
        proc = mp.get_context("spawn").Process(target=probe, args=(layer,))
        proc.start()
        proc.join()
        if proc.exitcode:
            failed += 1
            print(f"{layer}: the process failed (exit {proc.exitcode})", flush=True)
    sys.exit(1 if failed else 0)

"""Issue 44: torchvision models compiled through TVM Relax with and without the conv rules, against PyTorch eager.

For each model (random weights, eval mode, batch 1, fp32, NCHW): ``torch.export`` -> ``from_exported_program`` ->
``tirbench.compile.pipeline.compile_model`` twice (``rules=False``: TVM's default pipeline, DLight; ``rules=True``:
each conv the rules take dispatched to their kernel with its bias, shortcut and ReLU fused into its store, notebook
08's recorded choices where they apply), each checked
against PyTorch's output on the same input (max |difference| <= ``RTOL`` x max |torch|: randomly initialised
models give outputs of any scale, 1e-9 for MobileNetV2), then timed: the
median of ``--repeats`` calls of the whole model (Relax VM ``time_evaluator``, one call per repeat, no L2 flush:
end-to-end latency), and PyTorch eager (cuDNN, TF32 off) the same way with CUDA events. Prints a table and what the
dispatch did per conv; appends rows to ``results/kernel/relax_models.csv``. Run from the repository root:

    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/relax_models.py [--models resnet50 mobilenet_v2]
"""
from __future__ import annotations

import argparse
import collections
import csv
import datetime as dt
import time
import uuid
from pathlib import Path

import numpy as np

CSV = Path("results/kernel/relax_models.csv")
COLUMNS = ["run_id", "timestamp", "gpu", "tvm_version", "torch_version", "model", "batch", "dtype", "variant",
           "median_ms", "max_rel_diff", "verified", "convs_dispatched", "convs"]
#: fp32 end to end, relative to the output's largest magnitude: dozens of layers, each summing in another order than
#: cuDNN's (llvm builds of both models, rules on, agree with PyTorch on a CPU to about 1e-6).
RTOL = 1e-3


def torch_median_ms(fn, x, repeats: int) -> float:
    """The median of ``repeats`` calls of ``fn(x)``, each timed with CUDA events."""
    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2"])
    ap.add_argument("--repeats", type=int, default=50)
    a = ap.parse_args()

    import torch
    import torchvision
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from tirbench.bench.choose import Choices
    from tirbench.compile.dispatch import DispatchConvRules
    from tirbench.compile.pipeline import compile_model, passes
    from tirbench.core.machine import cuda_target, require_cuda_gpu

    gpu = require_cuda_gpu().device_name
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    target, dev = cuda_target(), tvm.cuda(0)
    choices = Choices(Path("results/08_resnet50/choices.csv"))
    now = dt.datetime.now(dt.timezone.utc)
    run_id = f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    rows = []
    for name in a.models:
        t0 = time.time()
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
        mod = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
        with torch.no_grad():
            model_gpu, x_gpu = model.cuda(), x.cuda()
            ref = model_gpu(x_gpu).float().cpu().numpy()
            eager_ms = torch_median_ms(model_gpu, x_gpu, a.repeats)
        dispatch = passes(mod, target, choices=choices)   # batch norms folded first, as compile_model does
        with target:
            tvm.transform.Sequential(dispatch)(mod)
        notes = next(p for p in dispatch if isinstance(p, DispatchConvRules)).notes
        taken = [n for n in notes if n.kernel]
        print(f"{name}: {len(taken)} of {len(notes)} convs dispatched to the rules' kernels:",
              dict(collections.Counter(n.kernel.split("(")[0].split("{")[0] for n in taken)))
        fused = [n for n in taken if n.epilogue and not n.apart]
        print(f"{name}: {len(fused)} of them with their epilogue fused:",
              dict(collections.Counter(n.epilogue for n in fused)))
        for n in notes:
            if not n.kernel:
                print(f"  left for DLight: {n.reason}")
            elif n.apart:
                print(f"  {n.epilogue} left to FuseOps: {n.apart}")
        base = dict(run_id=run_id, timestamp=now.isoformat(timespec="seconds"), gpu=gpu, tvm_version=tvm.__version__,
                    torch_version=torch.__version__, model=name, batch=1, dtype="float32",
                    convs_dispatched=len(taken), convs=len(notes))
        rows.append(dict(base, variant="torch_eager", median_ms=round(eager_ms, 4), max_rel_diff=0.0, verified=True))
        x_tvm = tvm.runtime.tensor(x.numpy(), dev)
        for rules in (False, True):
            vm = relax.VirtualMachine(compile_model(mod, target, rules=rules, choices=choices), dev)
            out = vm["main"](x_tvm)
            out = (out if hasattr(out, "numpy") else out[0]).numpy()   # an exported program returns a tuple
            diff = float(np.abs(out - ref).max() / np.abs(ref).max())
            ok = diff <= RTOL
            timer = vm.time_evaluator("main", dev, number=1, repeat=a.repeats)
            ms = float(np.median(timer(x_tvm).results)) * 1e3 if ok else float("nan")
            rows.append(dict(base, variant="tvm_rules" if rules else "tvm_default", median_ms=round(ms, 4),
                             max_rel_diff=diff, verified=ok))
        print(f"{name}: {time.time() - t0:.0f} s")
    print(f"\n{'model':>14} {'variant':>12} {'ms':>9} {'rel. diff':>11} verified  (on {gpu})")
    for r in rows:
        print(f"{r['model']:>14} {r['variant']:>12} {r['median_ms']:9.3f} {r['max_rel_diff']:11.2e} {r['verified']}")
    CSV.parent.mkdir(parents=True, exist_ok=True)
    new = not CSV.exists()
    with CSV.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            w.writeheader()
        w.writerows(rows)
    print(f"rows appended to {CSV}")


if __name__ == "__main__":
    main()

"""Issue 44: torchvision models compiled through TVM Relax with and without the conv rules, against PyTorch.

For each model (random weights, batch-norm statistics calibrated on one random batch: torchvision's random init
shrinks MobileNetV2's activations to 1e-9, under float16's range; eval mode): ``torch.export`` in float32 ->
``from_exported_program`` -> ``tirbench.compile.pipeline.passes`` (``fp16`` for ``--dtype float16``: the model made
float16 by ``ToMixedPrecision``; ``nhwc`` for layout NHWC: ``ConvertLayout``, the model NHWC between its layers) ->
``compile_passed``, twice per layout (``rules=False``: TVM's default pipeline, DLight; ``rules=True``: each conv the
rules take dispatched to their kernel with its bias, shortcut and ReLU fused into its store, notebook 08's recorded
choices where they apply). Beside them PyTorch in the model's dtype: eager (cuDNN, TF32 off) in NCHW and in channels
last (layout NHWC), and ``torch.compile`` (default mode; skipped with one line where there is no Triton).
Every variant is checked against the float32 PyTorch model on the same input (max |difference| <= tolerance x max
|reference|: ``RTOL`` for float32, ``FP16_RTOL`` for float16), then timed as the suite's harness times kernels
(``harness.time_launches``: median of ``--repeats`` calls of the whole model between CUDA events, the same 256 MiB
L2 flush before each call for every variant; ``--flush none``: calls back to back). Prints what the dispatch did per
conv and how many transposes remain, a table, and appends rows to ``CSV`` (``results.append_csv``).
Run from the repository root:

    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/relax_models.py \\
        [--models resnet50 mobilenet_v2] [--dtype float16 --batch 32] [--layouts NCHW NHWC] [--flush l2|none]
"""
from __future__ import annotations

import argparse
import collections
import copy
import datetime as dt
import importlib.util
import time
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

#: Version 2 of the rows (``layout`` and ``flush`` added); version 1, ``relax_models.csv``, keeps the first runs.
CSV = Path("results/kernel/relax_models_v2.csv")
COLUMNS = ["run_id", "timestamp", "gpu", "tvm_version", "torch_version", "model", "batch", "dtype", "layout",
           "flush", "variant", "median_ms", "max_rel_diff", "verified", "convs_dispatched", "convs", "transposes"]
#: float32 end to end, relative to the output's largest magnitude: dozens of layers, each summing in another order than
#: cuDNN's (llvm builds of both models, rules on, agree with PyTorch on a CPU to about 1e-6).
RTOL = 1e-3
#: float16 against the float32 model: each layer rounds its weights and its output to half precision (unit roundoff
#: u = 2**-11), errors that add up over the depth. Measured on a CPU (torch 2.13, the calibrated models of ``main``,
#: PyTorch float16 against float32, max |difference| / max |reference|): ResNet-50 3.7e-2 (76 u) at batch 1, 3.2e-2
#: (67 u) at batch 32; MobileNetV2 1.2e-2 (25 u) and 1.7e-2 (34 u). The tolerance is 2x the largest, 150 u = 7.3e-2:
#: a kernel that reads a wrong element or layout is off by about the output's own magnitude.
FP16_RTOL = 150 * 2.0 ** -11


def calibrate(model, x):
    """``model`` in eval mode, each batch norm's statistics those of one batch ``x`` (see the module docstring)."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None   # a cumulative average: after one batch, that batch's statistics
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def rel_diff(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())


def torch_variants(model, x, dtype: str) -> dict[str, tuple[str, Callable[[], object]]]:
    """PyTorch's variants: name -> (layout, call), on the GPU in ``dtype``; ``torch.compile`` skipped with one
    line where Triton is missing."""
    import torch

    half = dtype == "float16"
    eager = model.half() if half else model
    xs = x.half() if half else x
    last = copy.deepcopy(eager).to(memory_format=torch.channels_last)
    x_last = xs.to(memory_format=torch.channels_last)
    out = {"torch_eager": ("NCHW", lambda: eager(xs)), "torch_eager_channels_last": ("NHWC", lambda: last(x_last))}
    if importlib.util.find_spec("triton") is None:
        print("torch.compile: skipped (no Triton here)")
    else:
        compiled = torch.compile(eager)
        out["torch_compile"] = ("NCHW", lambda: compiled(xs))
    return out


def dispatch_summary(name: str, notes: list, mod) -> int:
    """Print what the dispatch did per conv; return the transposes left in ``mod`` (``relax.permute_dims``)."""
    from tirbench.compile.pipeline import count_ops

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
    left = count_ops(mod, "relax.permute_dims")
    print(f"{name}: {sum(n.transposes for n in notes)} activation transposes around the rules' kernels; "
          f"{left} relax.permute_dims in the model (weights' folded away)")
    return left


def validate(row: Mapping[str, object]) -> None:
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"relax_models row lacks columns: {', '.join(missing)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2"])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layouts", nargs="+", choices=["NCHW", "NHWC"], default=None,
                    help="the TVM variants' layouts (default: NCHW for float32, NCHW and NHWC for float16)")
    ap.add_argument("--flush", choices=["l2", "none"], default="l2")
    a = ap.parse_args()
    layouts = a.layouts or (["NCHW"] if a.dtype == "float32" else ["NCHW", "NHWC"])
    tolerance = RTOL if a.dtype == "float32" else FP16_RTOL

    import torch
    import torchvision
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from tirbench.bench.choose import Choices
    from tirbench.bench.harness import time_launches
    from tirbench.bench.results import append_csv, new_run_id
    from tirbench.compile.dispatch import DispatchConvRules
    from tirbench.compile.pipeline import compile_passed, count_ops, passes
    from tirbench.core.machine import cuda_target, require_cuda_gpu

    gpu = require_cuda_gpu().device_name
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    target, dev = cuda_target(), tvm.cuda(0)
    choices = Choices(Path("results/08_resnet50/choices.csv"))
    now = dt.datetime.now(dt.timezone.utc)
    run_id = new_run_id(now)
    flush = a.flush == "l2"
    rows = []
    for name in a.models:
        t0 = time.time()
        gen = torch.Generator().manual_seed(0)
        model = calibrate(getattr(torchvision.models, name)(weights=None), torch.randn(8, 3, 224, 224, generator=gen))
        x = torch.randn(a.batch, 3, 224, 224, generator=gen)
        mod = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
        base = dict(run_id=run_id, timestamp=now.isoformat(timespec="seconds"), gpu=gpu, tvm_version=tvm.__version__,
                    torch_version=torch.__version__, model=name, batch=a.batch, dtype=a.dtype, flush=a.flush)
        with torch.no_grad():
            model_gpu, x_gpu = model.cuda(), x.cuda()
            ref = model_gpu(x_gpu).double().cpu().numpy()   # float32 PyTorch: every variant's reference
            for variant, (layout, call) in torch_variants(model_gpu, x_gpu, a.dtype).items():
                try:
                    diff = rel_diff(call().float().cpu().numpy(), ref)
                except Exception as err:  # noqa: BLE001 - torch.compile failing here: say it, go on
                    print(f"{name} {variant}: failed: {str(err).strip().splitlines()[-1]}")
                    continue
                ok = diff <= tolerance
                ms = time_launches(call, repeats=a.repeats, flush=flush).median_ms if ok else float("nan")
                rows.append(dict(base, layout=layout, variant=variant, median_ms=round(ms, 4), max_rel_diff=diff,
                                 verified=ok, convs_dispatched=0, convs=0, transposes=0))
        x_tvm = tvm.runtime.tensor(x.numpy(), dev)
        for layout in layouts:
            for rules in (False, True):
                variant = "tvm_rules" if rules else "tvm_default"
                ps = passes(mod, target, rules=rules, choices=choices, fp16=a.dtype == "float16",
                            nhwc=layout == "NHWC")
                try:
                    with target:
                        passed = tvm.transform.Sequential(ps)(mod)
                    vm = relax.VirtualMachine(compile_passed(passed, target), dev)
                except Exception as err:  # noqa: BLE001 - a TVM failure on one variant: say it, go on
                    print(f"{name} {variant} {layout}: failed: {str(err).strip().splitlines()[-1]}")
                    continue
                notes = next((p.notes for p in ps if isinstance(p, DispatchConvRules)), [])
                left = (dispatch_summary(f"{name} {a.dtype} {layout}", notes, passed) if rules
                        else count_ops(passed, "relax.permute_dims"))
                out = vm["main"](x_tvm)
                out = (out if hasattr(out, "numpy") else out[0]).numpy()   # an exported program returns a tuple
                diff = rel_diff(out, ref)
                ok = diff <= tolerance
                ms = time_launches(lambda: vm["main"](x_tvm), repeats=a.repeats, flush=flush).median_ms if ok \
                    else float("nan")
                rows.append(dict(base, layout=layout, variant=variant, median_ms=round(ms, 4), max_rel_diff=diff,
                                 verified=ok, convs_dispatched=len([n for n in notes if n.kernel]),
                                 convs=len(notes), transposes=left))
        print(f"{name}: {time.time() - t0:.0f} s")
    print(f"\n{'model':>14} {'variant':>26} {'layout':>6} {'ms':>9} {'rel. diff':>11} verified  "
          f"({gpu}, {a.dtype}, batch {a.batch}, flush {a.flush}, tolerance {tolerance:.2e})")
    for r in rows:
        print(f"{r['model']:>14} {r['variant']:>26} {r['layout']:>6} {r['median_ms']:9.3f} {r['max_rel_diff']:11.2e} "
              f"{r['verified']}")
    CSV.parent.mkdir(parents=True, exist_ok=True)
    print(f"{append_csv(CSV, rows, COLUMNS, validate)} rows appended to {CSV}")


if __name__ == "__main__":
    main()

"""Issue 44: torchvision models compiled through TVM Relax with and without the conv rules, against PyTorch.

A thin command line over ``tirbench.compile.models`` (the models, PyTorch's variants, the check and its tolerances),
``tirbench.compile.model_builds`` (TVM's variants compiled side by side, one process each, then checked and timed)
and ``tirbench.compile.model_results`` (the rows): notebook 09 runs the same. Per model, ``tvm_default`` and
``tvm_rules`` in each of ``--layouts`` (default: NCHW for float32, NCHW and NHWC for float16), PyTorch eager in
NCHW and channels-last and ``torch.compile``, each checked against the float32 PyTorch model (``RTOL`` /
``FP16_RTOL``) and timed with the harness's L2 flush before each call (``--flush none``: calls back to back). Prints
what the dispatch did per conv and how many transposes remain, a table, and appends rows to ``TOOL_CSV``. Run from
the repository root:

    . /opt/gpukit/env.sh && PYTHONPATH=lib python3 tools/gpu-checks/relax_models.py \\
        [--models resnet50 mobilenet_v2] [--dtype float16 --batch 32] [--layouts NCHW NHWC] [--flush l2|none]
"""
from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from tirbench.compile.models import TVM_VARIANTS, ModelConfig, prepare_torch, time_torch


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

    import torch
    import tvm

    from tirbench.bench.choose import Choices
    from tirbench.bench.results import append_csv, new_run_id, require_columns
    from tirbench.compile.model_builds import dispatch_lines, jobs_for, measure_tvm, start_compiles
    from tirbench.compile.model_results import TOOL_COLUMNS, TOOL_CSV, tool_row
    from tirbench.core.machine import cuda_target, require_cuda_gpu

    gpu = require_cuda_gpu().device_name
    target, dev = cuda_target(), tvm.cuda(0)
    short = "fp16" if a.dtype == "float16" else "fp32"
    configs = [ModelConfig(f"{short}_{layout}", a.dtype, a.batch, layout) for layout in layouts]
    now = dt.datetime.now(dt.timezone.utc)
    run = dict(run_id=new_run_id(now), timestamp=now.isoformat(timespec="seconds"), gpu=gpu,
               tvm_version=tvm.__version__, torch_version=torch.__version__, flush=a.flush)
    flush = a.flush == "l2"
    jobs = jobs_for(a.models, configs, list(TVM_VARIANTS), target=target,
                    choices=Choices(Path("results/08_resnet50/choices.csv")))
    compiles = start_compiles(jobs)   # every variant compiles in a process of its own, side by side
    torch_runs = {name: prepare_torch(name, configs[0]) for name in a.models}   # checked while TVM compiles
    compiled = {job.key: compiles.result(job) for job in jobs}   # all of them before any timing: a quiet host
    results = []
    for name, torch_run in torch_runs.items():
        results += time_torch(torch_run, repeats=a.repeats, flush=flush)
        for job in [j for j in jobs if j.model == name]:
            built = compiled[job.key]
            print(f"{name} {job.variant.name} {job.config.layout}: compiled in {built.seconds:.0f} s")
            if job.variant.rules and built.library:
                print(*dispatch_lines(f"{name} {a.dtype} {job.config.layout}", built), sep="\n")
            results.append(measure_tvm(built, torch_run.x, torch_run.ref, repeats=a.repeats, flush=flush,
                                       dev=dev, split=False))
    compiles.close()
    for r in results:
        if r.error:
            print(f"{r.model} {r.variant} {r.layout}: failed: {r.error}")
    rows = [tool_row(r, run) for r in results if not r.error]
    print(f"\n{'model':>14} {'variant':>26} {'layout':>6} {'ms':>9} {'rel. diff':>11} verified  "
          f"({gpu}, {a.dtype}, batch {a.batch}, flush {a.flush}, tolerance {configs[0].tolerance:.2e})")
    for r in rows:
        print(f"{r['model']:>14} {r['variant']:>26} {r['layout']:>6} {r['median_ms']:9.3f} {r['max_rel_diff']:11.2e} "
              f"{r['verified']}")
    TOOL_CSV.parent.mkdir(parents=True, exist_ok=True)
    n = append_csv(TOOL_CSV, rows, TOOL_COLUMNS, require_columns(TOOL_COLUMNS, "relax_models row"))
    print(f"{n} rows appended to {TOOL_CSV}")


if __name__ == "__main__":
    main()

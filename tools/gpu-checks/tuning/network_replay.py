"""Issue 43's replay check: notebook 08's 23 fp32 batch-1 layers, each `rules`-space database's best kernel verified
and timed (as 08's MetaSchedule column replays it), from the databases of several tree copies on this one GPU, and the
network time of each (each layer's median x how often ResNet-50 runs it).

    python tools/gpu-checks/tuning/network_replay.py /tmp/scale/1 /tmp/scale/4 [--repeats 50] [--csv OUT.csv]

The first root is the reference: each other root's network time is given as a ratio of it (the issue asks for the
4-GPU databases within 5% of the 1-GPU run's)."""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from tirbench.core.machine import cuda_target
from tirbench.tuning.replay import replay
from tirbench.workloads import conv2d
from tirbench.workloads.resnet50 import RESNET50


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="+", type=Path, help="tree copies whose results/tuning/conv2d databases to replay")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--csv", type=Path, default=None, help="write the per-layer times here")
    a = p.parse_args()
    target, rows = cuda_target(), []
    for layer in RESNET50:
        wl = conv2d(*layer.shape(1), layout="NCHW", dtype="float32")
        for root in a.roots:
            r = replay(wl, "rules", variant="metaschedule_rules", root=root, target=target, repeats=a.repeats)
            ms = r.measurement.timing.median_ms if r is not None and r.measurement is not None else float("nan")
            rows.append({"root": str(root), "layer": layer.name, "count": layer.count, "trials": r.trials if r else 0,
                         "tuned_best": r.tuned_best if r else "", "median_ms": ms})
    df = pd.DataFrame(rows)
    if a.csv:
        df.to_csv(a.csv, index=False)
    per_layer = df.pivot(index="layer", columns="root", values="median_ms")
    print(per_layer.round(4).to_string())
    totals = (df["median_ms"] * df["count"]).groupby(df["root"]).sum()
    ref = totals[str(a.roots[0])]
    for root in a.roots:
        missing = int(df[(df["root"] == str(root))]["median_ms"].isna().sum())
        print(f"network (23 layers x counts) from {root}: {totals[str(root)]:.4f} ms, {totals[str(root)] / ref:.3f}x "
              f"the first root's" + (f"; {missing} layers not replayed" if missing else ""))


if __name__ == "__main__":
    main()

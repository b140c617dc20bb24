"""Pilot summary: the throughput rows written since START, tuned vs stock trials per minute, where a trial's time went
(tuning_phases.csv of each database), and each database's best kernel as MetaSchedule recorded it and as the harness
times it (verified, L2 flushed before each of 100 launches, median)."""
import sys
from pathlib import Path

import pandas as pd

from tirbench.bench.harness import verify_then_time
from tirbench.core.machine import cuda_target
from tirbench.core.paths import project_root
from tirbench.tuning import throughput
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import trials_done, tuning_history
from tirbench.tuning.logs import PHASE_LOG
from tirbench.workloads import conv2d

start, work = sys.argv[1], Path(sys.argv[2])
pd.set_option("display.width", 200)
rows = throughput.read(throughput.path_for(project_root()))
rows = rows[rows["timestamp"] >= start]
print(rows.drop(columns=["run_id", "timestamp", "workload", "dtype", "space"]).to_string(index=False))
local = rows[rows["runner"] == "local"].groupby("setup")[["trials_per_min", "trials"]].max()
if {"stock", "tuned"} <= set(local.index):
    same = "same budget" if local.loc["stock", "trials"] == local.loc["tuned", "trials"] else "BUDGETS DIFFER"
    print(f"tuned / stock trials per minute (local, same workload and space, {same}): "
          f"{local.loc['tuned', 'trials_per_min'] / local.loc['stock', 'trials_per_min']:.2f}x  (done when >= 1.5x)")
wl = conv2d(1, 256, 14, 14, 256, 3, 3, 1, 1)
for name in ("stock", "tuned", "rpc"):
    wd = work / f"db-{name}" / "conv2d" / "float32_NCHW_1x256x14x14x256x3x3x1x1"
    if not trials_done(wd):
        print(f"{name}: no database")
        continue
    phases = pd.read_csv(wd / PHASE_LOG)
    trials = phases.loc[phases["phase"] == "chunk_wall", "count"].sum()
    per_trial = (phases.groupby("phase")["seconds"].sum() / max(trials, 1)).round(3)
    print(f"{name}: seconds per trial over {trials} trials: {per_trial.to_dict()}")
    h = tuning_history(wd, wl.flops)
    recorded = h["gflops"].max()
    m = verify_then_time(wl, best_schedule(open_database(wd), wl), variant=f"ms_{name}", provider="metaschedule",
                         repeats=100, target=cuda_target())
    print(f"{name}: best of {len(h)} trials, MetaSchedule recorded {wl.flops / recorded / 1e6:.4f} ms "
          f"({recorded:,.0f} GFLOP/s); the harness measures {m.timing.median_ms:.4f} ms ({m.gflops:,.0f} GFLOP/s)")

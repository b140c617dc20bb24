"""What notebook 00 shows, from the recorded files only (it measures nothing): every notebook's latest results per
GPU (each workload shape and dtype from the latest run that measured it) summarised per workload and shape, a
roofline per GPU, the tuning curves of every MetaSchedule database, and the tuning throughput (trials per minute by
setup and number of GPUs).

Rows of different GPUs are never compared with each other: each GPU has its own latest runs of each notebook, its own
table rows, ratios and roofline. A kernel doing under ``STREAMING_BELOW`` FLOP per byte is rated in GB/s (against the
HBM roof), any other in GFLOP/s (against the roofline at its arithmetic intensity: the HBM slope or the compute roof
of its dtype, whichever is lower).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from tirbench.bench.plots import VENDORS
from tirbench.bench.results import read_results
from tirbench.core.machine import PEAKS, Peak, peak_for
from tirbench.tuning.spaces import SPACES
from tirbench.tuning import throughput
from tirbench.tuning.history import tuning_history
from tirbench.tuning.logs import tuning_chunks
from tirbench.workloads import Workload, conv2d, conv2d_winograd, gemm

#: Below this many FLOP per byte a kernel streams memory: it is rated in GB/s.
STREAMING_BELOW = 1.0
#: How the three kinds of kernel are drawn on the roofline: (label, marker, face colour; None = the workload's).
KINDS = {"hand": ("best hand schedule", "o", None), "ms": ("MetaSchedule", "^", None),
         "vendor": ("vendor library", "s", "black")}


def load_results(root: Path) -> pd.DataFrame:
    """Every row of every ``results/*/results.csv`` (each file read strictly: ``results.read_results``)."""
    frames = [read_results(p) for p in sorted((root / "results").glob("*/results.csv"))]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: What a "latest run" is the latest of: a notebook's workload shape in one dtype on one GPU.
LATEST_KEYS = ["notebook", "gpu", "workload", "shape", "dtype"]


def latest_per_gpu(df: pd.DataFrame) -> pd.DataFrame:
    """For each notebook, GPU, workload shape and dtype, the rows of the latest run (by timestamp) that measured it:
    a run of part of a notebook (notebook 08's int8 configuration alone) leaves the latest rows of the rest in place,
    and TVM and the vendor are still read from one run."""
    if df.empty:
        return df
    last = df.sort_values("timestamp").groupby(LATEST_KEYS)["run_id"].last().rename("latest_run").reset_index()
    latest = df.merge(last, on=LATEST_KEYS, how="left")["latest_run"].to_numpy()
    return df[df["run_id"].to_numpy() == latest].reset_index(drop=True)


def gpu_key(gpu: str) -> str:
    """A short name for file names: the peak table's key ("H100"), else the GPU name made safe."""
    return next((k for k in PEAKS if k in gpu.upper()), re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_"))


def compute_roof(peak: Peak, dtype: str) -> float | None:
    """The compute roof of ``dtype`` in GFLOP/s (fp16 and int8 on tensor cores), None for another dtype."""
    roofs = {"float32": peak.fp32_tflops, "float16": peak.fp16_tensor_tflops, "int8": peak.int8_tensor_tops}
    return roofs[dtype] * 1e3 if dtype in roofs else None


def percent_of_peak(peak: Peak | None, dtype: str, intensity: float, gflops: float, gbps: float) -> float:
    """The achieved rate as % of what the roofline allows at ``intensity`` (GB/s against HBM for streaming kernels)."""
    if peak is None:
        return math.nan
    hbm = peak.hbm_tbps * 1e3
    if intensity < STREAMING_BELOW:
        return 100 * gbps / hbm
    roof = compute_roof(peak, dtype)
    return math.nan if roof is None else 100 * gflops / min(roof, intensity * hbm)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and (notebook, workload, shape, dtype) of its latest run: the fastest hand schedule, MetaSchedule
    kernel and vendor kernel with their rates, the ratios to the vendor and the best TVM kernel's % of peak."""
    if df.empty:
        return pd.DataFrame()
    rows = []
    for (gpu, nb, wl, shape, dtype), g in latest_per_gpu(df).groupby(["gpu", "notebook", "workload", "shape", "dtype"],
                                                                      sort=False):
        intensity = float(g["gflops"].iloc[0] / g["gbps"].iloc[0]) if g["gbps"].iloc[0] else math.nan
        metric = "gbps" if intensity < STREAMING_BELOW else "gflops"
        best = {kind: g[sel].sort_values(metric).iloc[-1] if sel.any() else None for kind, sel in (
            ("hand", g["provider"] == "tvm"), ("ms", g["provider"] == "metaschedule"),
            ("vendor", g["provider"].isin(VENDORS)))}
        vendor = best["vendor"][metric] if best["vendor"] is not None else math.nan
        ours = [best[k] for k in ("hand", "ms") if best[k] is not None]
        top = max(ours, key=lambda r: r[metric]) if ours else None
        row = {"gpu": gpu, "date": str(g["timestamp"].max())[:10], "notebook": nb, "workload": wl, "shape": shape,
               "dtype": dtype, "unit": "GB/s" if metric == "gbps" else "GFLOP/s", "intensity": intensity}
        for kind, r in best.items():
            row[kind] = None if r is None else r["variant"]
            row[f"{kind}_rate"] = math.nan if r is None else r[metric]
            row[f"{kind}_gflops"] = math.nan if r is None else r["gflops"]
        row["hand / vendor"] = row["hand_rate"] / vendor
        row["MS / vendor"] = row["ms_rate"] / vendor
        row["best TVM % of peak"] = (math.nan if top is None else
                                     percent_of_peak(peak_for(gpu), dtype, intensity, top["gflops"], top["gbps"]))
        rows.append(row)
    return pd.DataFrame(rows)


def summary_table(s: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with readable column names, for display."""
    names = {"hand": "best hand schedule", "hand_rate": "hand rate", "ms": "MetaSchedule", "ms_rate": "MS rate",
             "vendor": "vendor", "vendor_rate": "vendor rate"}
    cols = ["notebook", "workload", "shape", "dtype", "unit", *names, "hand / vendor", "MS / vendor",
            "best TVM % of peak", "date"]
    return s[cols].rename(columns=names).round({"hand rate": 0, "MS rate": 0, "vendor rate": 0, "hand / vendor": 3,
                                                "MS / vendor": 3, "best TVM % of peak": 1})


def roofline(s: pd.DataFrame, gpu: str, caption: str) -> plt.Figure:
    """One GPU's roofline: achieved GFLOP/s against FLOP per byte for each kernel of ``summary`` (hand, MetaSchedule
    and vendor; kernels without FLOPs, such as a copy, have no point), under the HBM roof and the FP32 / FP16 / INT8
    roofs of the peak table."""
    s = s[(s["gpu"] == gpu) & (s["intensity"] > 0)]
    peak = peak_for(gpu)
    fig, ax = plt.subplots(figsize=(10, 6))
    lo, hi = s["intensity"].min() / 4 if len(s) else 0.05, s["intensity"].max() * 4 if len(s) else 1e4
    if peak is not None:
        hbm = peak.hbm_tbps * 1e3
        top = max(compute_roof(peak, d) for d in ("float32", "float16", "int8"))
        x = np.geomspace(lo, max(hi, 2 * top / hbm), 200)
        ax.plot(x, np.minimum(x * hbm, top), color="tab:red", linewidth=1.5, label=f"HBM {peak.hbm_tbps} TB/s")
        for dtype, name, style in (("float32", "FP32", ":"), ("float16", "FP16 tensor", "--"),
                                   ("int8", "INT8 tensor (TOPS)", "-.")):
            roof = compute_roof(peak, dtype)
            ax.plot(x[x >= roof / hbm], np.full((x >= roof / hbm).sum(), roof), color="0.3", linestyle=style,
                    label=f"{name} {roof / 1e3:g} T")
    groups = list(dict.fromkeys(zip(s["workload"], s["dtype"])))
    for i, (wl, dtype) in enumerate(groups):
        part = s[(s["workload"] == wl) & (s["dtype"] == dtype)]
        for kind, (_, marker, face) in KINDS.items():
            pts = part.dropna(subset=[f"{kind}_gflops"])
            ax.scatter(pts["intensity"], pts[f"{kind}_gflops"], marker=marker, s=45, zorder=3,
                       facecolor=face or f"C{i % 10}", edgecolor=f"C{i % 10}" if face else "black", linewidth=0.8)
    handles = [Line2D([], [], marker="o", linestyle="", color=f"C{i % 10}", label=f"{wl} {dt}")
               for i, (wl, dt) in enumerate(groups)]
    handles += [Line2D([], [], marker=m, linestyle="", markerfacecolor=face or "white", markeredgecolor="black",
                       color="black", label=label) for label, m, face in KINDS.values()]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, FLOP / byte that must move")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"Roofline, {gpu}: every workload's best hand schedule, MetaSchedule and vendor kernel")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, fontsize=7, loc="lower right", ncol=2)
    fig.text(0.01, 0.005, caption, fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


@dataclass(frozen=True)
class TunedDatabase:
    """A MetaSchedule database under ``results/tuning/``, with the workload and space its directory names."""

    work_dir: Path
    workload: Workload
    space: str

    @property
    def label(self) -> str:
        wl = self.workload
        return f"{wl.dtype} {wl.layout + ' ' if wl.layout else ''}{wl.shape} ({self.space})"


def workload_of(work_dir: Path) -> tuple[Workload, str]:
    """The workload and space a database directory is named after (``tuning.work_dir_for`` read backwards);
    ValueError or TypeError for a name it cannot read."""
    stem, space = work_dir.name, "default"
    for spec in SPACES.values():
        if spec.db_suffix and stem.endswith(spec.db_suffix):
            stem, space = stem.removesuffix(spec.db_suffix), spec.name
    dtype, *layout, shape = stem.split("_")
    sizes = [int(v) for v in shape.split("x")]
    if work_dir.parent.name == "gemm" and not layout:
        return gemm(*sizes, dtype=dtype), space
    if work_dir.parent.name == "conv2d" and len(layout) == 1:
        return conv2d(*sizes, layout=layout[0], dtype=dtype), space
    if work_dir.parent.name == "conv2d_winograd" and len(layout) == 1:   # sizes N C H W K, then m
        return conv2d_winograd(*sizes[:-1], m=sizes[-1], layout=layout[0], dtype=dtype), space
    raise ValueError("not a database name tirbench.tuning.tune writes")


def tuning_databases(root: Path) -> tuple[list[TunedDatabase], list[str]]:
    """Every database with records under ``results/tuning/``, and one line for each one whose name is not read."""
    found, skipped = [], []
    for rec in sorted((root / "results" / "tuning").glob("*/*/database_tuning_record.json")):
        try:
            found.append(TunedDatabase(rec.parent, *workload_of(rec.parent)))
        except (ValueError, TypeError) as err:
            skipped.append(f"{rec.parent.parent.name}/{rec.parent.name}: {str(err).splitlines()[0]}")
    return found, skipped


def tuning_table(dbs: list[TunedDatabase]) -> pd.DataFrame:
    """Per database: its trials, the best rate MetaSchedule measured, and the wall seconds per trial (from the chunk
    log ``tune`` keeps; NaN for a database tuned before it)."""
    rows = []
    for db in dbs:
        h, chunks = tuning_history(db.work_dir, db.workload.flops), tuning_chunks(db.work_dir)
        rows.append({"workload": db.workload.name, "database": db.label, "trials": len(h),
                     "best TFLOP/s": h["best_gflops"].max() / 1e3 if len(h) else math.nan,
                     "wall s / trial": chunks["wall_s"].sum() / max(chunks["new_trials"].sum(), 1)
                     if len(chunks) else math.nan})
    return pd.DataFrame(rows).round({"best TFLOP/s": 2, "wall s / trial": 1})


def tuning_figure(dbs: list[TunedDatabase], title: str) -> plt.Figure:
    """Tuning curves: the best rate so far against trials (MetaSchedule's measurements), and the wall seconds per
    trial of each logged chunk against the trials done after it."""
    rows = math.ceil(len(dbs) / 3)
    fig, (rate, wall) = plt.subplots(1, 2, figsize=(13, 4.5 + 0.2 * rows))
    for i, db in enumerate(dbs):
        h = tuning_history(db.work_dir, db.workload.flops)
        style = dict(color=f"C{i % 10}", linestyle=("-", "--", ":")[i // 10 % 3])
        rate.plot(h["trial"], h["best_gflops"] / 1e3, label=db.label, **style)
        chunks = tuning_chunks(db.work_dir)
        if len(chunks):
            wall.plot(chunks["trials"], chunks["s_per_trial"], marker="o", label=db.label, **style)
    rate.set(xlabel="trials", ylabel="best TFLOP/s so far", yscale="log", title=f"{title}: best rate vs trials")
    wall.set(xlabel="trials done", ylabel="wall seconds per trial (chunk)", title=f"{title}: wall time per trial")
    if not wall.lines:
        wall.text(0.5, 0.5, "no chunk log: these databases were tuned\nbefore tune() kept tuning_chunks.csv",
                  ha="center", va="center", transform=wall.transAxes, color="0.4")
    for ax in (rate, wall):
        ax.grid(True, alpha=0.3)
    if dbs:
        fig.legend(*rate.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.2 * rows / (4.5 + 0.2 * rows) + 0.01, 1, 1))
    return fig


def tuning_throughput(root: Path) -> pd.DataFrame:
    """The GPU rows of ``results/tuning/throughput.csv`` (CPU runs of the tests left out); empty without the file."""
    df = throughput.read(throughput.path_for(root))
    return df[df["gpu"] != "cpu"].reset_index(drop=True)


#: What a throughput panel compares: one panel per GPU model and tuned workload.
PANEL = ["gpu", "workload", "shape", "dtype", "space"]


def throughput_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per GPU model, workload, number of GPUs, runner and setup: the runs, their trials and seconds, the trials per
    minute over all of them (trials / seconds, so a long run weighs more than a short one) and the fastest run's."""
    if df.empty:
        return pd.DataFrame()
    table = (df.groupby([*PANEL, "gpus", "runner", "setup"])
             .agg(runs=("run_id", "nunique"), trials=("trials", "sum"), seconds=("seconds", "sum"),
                  fastest_run=("trials_per_min", "max"))
             .reset_index())
    table["trials_per_min"] = (60 * table["trials"] / table["seconds"]).round(2)
    return table


def throughput_figure(df: pd.DataFrame) -> plt.Figure:
    """Trials per minute (``throughput_table``'s, over all recorded runs) for each runner and number of GPUs
    measuring at once, a bar per setup, one panel per GPU model and workload; a note where nothing is recorded."""
    table = throughput_table(df)
    panels = list(table.groupby(PANEL, sort=True)) if len(table) else []
    cols = min(max(len(panels), 1), 3)
    fig, axes = plt.subplots(math.ceil(max(len(panels), 1) / cols), cols, figsize=(4.5 * cols, 3.8), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no tuning run recorded yet\n(results/tuning/throughput.csv)", ha="center",
                        va="center", transform=axes[0, 0].transAxes, color="0.4")
    for ax, ((gpu, wl, shape, dtype, space), g) in zip(axes.flat, panels):
        slots = sorted(set(zip(g["gpus"], g["runner"])), key=lambda s: (s[0], throughput.RUNNERS.index(s[1])))
        setups = [s for s in throughput.SETUPS if (g["setup"] == s).any()]
        width = 0.8 / len(setups)
        for i, setup in enumerate(setups):
            rows = g[g["setup"] == setup]
            xs = [slots.index(slot) + (i - (len(setups) - 1) / 2) * width for slot in zip(rows["gpus"], rows["runner"])]
            bars = ax.bar(xs, rows["trials_per_min"].to_numpy(), width=0.95 * width,
                          color=f"C{throughput.SETUPS.index(setup)}", label=setup)
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(range(len(slots)), [f"{runner}, {n} GPU{'s' if n > 1 else ''}" for n, runner in slots])
        ax.set(ylabel="trials per minute", title=f"{gpu}\n{wl} {dtype} {shape} ({space})")
        ax.title.set_fontsize(8)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig

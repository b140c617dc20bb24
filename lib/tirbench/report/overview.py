"""What notebook 00 shows, from the recorded files only (it measures nothing): every notebook's latest results per
GPU (each workload shape and dtype from the latest run that measured it) summarised per workload and shape, a
roofline per GPU, the tuning curves of every MetaSchedule database, and the tuning throughput (trials per minute by
setup and number of GPUs).

Rows of different GPUs are never compared with each other: each GPU has its own latest runs of each notebook, its own
table rows, ratios and roofline. Nor are rows built for different architectures: code built for an older one than the
GPU's (PTX, ``results.is_ptx``) has its own latest runs and table rows, named "sm_80 code on <GPU> (PTX)", with no
ratio to the vendor's native kernel, and no point on the roofline. A kernel doing under ``STREAMING_BELOW`` FLOP per
byte is rated in GB/s (against the HBM roof), any other in GFLOP/s (against the roofline at its arithmetic intensity:
the HBM slope or the compute roof of its dtype, whichever is lower).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tirbench.bench.plots import VENDORS
from tirbench.bench.results import gpu_label, is_ptx
from tirbench.core.machine import Peak, peak_for, peak_key
from tirbench.report.published import labelled_results, shown_variant
from tirbench.tuning.database import MODEL_DATABASES
from tirbench.tuning.spaces import SPACES
from tirbench.tuning import spread, throughput
from tirbench.tuning.history import tuning_history
from tirbench.tuning.logs import tuning_chunks
from tirbench.workloads import Workload, conv2d, conv2d_winograd, gemm
from tirbench.workloads.conv_geometry import parse_conv_shape

#: Below this many FLOP per byte a kernel streams memory: it is rated in GB/s.
STREAMING_BELOW = 1.0
#: Notebooks the per-shape summary (table and roofline) leaves out: their own tables publish their rows (10_networks:
#: some 300 layer shapes of five networks, as per-network tables and its networks.csv).
OWN_TABLES = ("10_networks",)
#: How the three kinds of kernel are drawn on the roofline: (label, marker, face colour; None = the workload's).
KINDS = {"hand": ("best hand schedule", "o", None), "ms": ("MetaSchedule", "^", None),
         "vendor": ("vendor library", "s", "black")}


def load_results(root: Path) -> pd.DataFrame:
    """Every row of every ``results/*/results.csv`` (each file read strictly: ``results.read_results``), each with
    its ``tuned_best`` (``published.labelled_results``)."""
    frames = [f for f in labelled_results(root).values() if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: What a "latest run" is the latest of: a notebook's variant of a workload shape in one dtype on one GPU, built for
#: one architecture.
LATEST_KEYS = ["notebook", "gpu", "arch", "workload", "shape", "dtype", "variant"]


def latest_per_gpu(df: pd.DataFrame) -> pd.DataFrame:
    """For each notebook, GPU, workload shape, dtype and variant, the rows of the latest run (by timestamp) that
    measured it: a run of part of a notebook (notebook 08's int8 configuration alone, which measures cuDNN fp16 again)
    leaves the latest rows of everything it did not measure in place."""
    if df.empty:
        return df
    df = with_arch(df)
    last = df.sort_values("timestamp").groupby(LATEST_KEYS)["run_id"].last().rename("latest_run").reset_index()
    latest = df.merge(last, on=LATEST_KEYS, how="left")["latest_run"].to_numpy()
    return df[df["run_id"].to_numpy() == latest].reset_index(drop=True)


def with_arch(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with an ``arch`` column ("" where a frame has none)."""
    return df if "arch" in df else df.assign(arch="")


def gpu_key(gpu: str) -> str:
    """A short name for file names: the peak table's key ("H100", "RTX_4090"), else the GPU name, made safe."""
    return re.sub(r"[^A-Za-z0-9]+", "_", peak_key(gpu) or gpu).strip("_")


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
    """Per GPU, architecture built for and (notebook, workload, shape, dtype) with a TVM row, each variant from its
    latest run: the fastest hand schedule, MetaSchedule kernel (saying so where its best record is a hand seed) and
    vendor kernel with their rates, the ratios to the vendor (of the same run where it has one; ``vendor run`` names
    it where not the best TVM kernel's; a vendor row is native to its GPU, so rows built for an older architecture
    have none) and the best TVM kernel's % of peak. ``gpu_shown`` names the GPU as tables do (``results.gpu_label``),
    ``ptx`` says whether the rows ran as PTX. The notebooks of ``OWN_TABLES`` are left out."""
    df = df[~df["notebook"].isin(OWN_TABLES)] if len(df) else df
    if df.empty:
        return pd.DataFrame()
    rows = []
    groups = latest_per_gpu(df).groupby(["gpu", "arch", "notebook", "workload", "shape", "dtype"], sort=False)
    for (gpu, arch, nb, wl, shape, dtype), g in groups:
        intensity = float(g["gflops"].iloc[0] / g["gbps"].iloc[0]) if g["gbps"].iloc[0] else math.nan
        metric = "gbps" if intensity < STREAMING_BELOW else "gflops"
        best = {kind: g[sel].sort_values(metric).iloc[-1] if sel.any() else None for kind, sel in (
            ("hand", g["provider"] == "tvm"), ("ms", g["provider"] == "metaschedule"),
            ("vendor", g["provider"].isin(VENDORS)))}
        ours = [best[k] for k in ("hand", "ms") if best[k] is not None]
        if not ours:   # only the vendor measured here (the native rows of a run built for an older architecture)
            continue
        top = max(ours, key=lambda r: r[metric]) if ours else None
        best["vendor"] = _vendor_of(g, metric, top["run_id"])   # the vendor measured in the best TVM kernel's run
        cc = g["compute_capability"].iloc[0] if "compute_capability" in g else None
        ptx = cc is not None and is_ptx(arch, cc)
        row = {"gpu": gpu, "arch": arch, "gpu_shown": gpu_label(gpu, arch, cc) if ptx else gpu, "ptx": ptx,
               "date": str(g["timestamp"].max())[:10], "notebook": nb, "workload": wl, "shape": shape, "dtype": dtype,
               "unit": "GB/s" if metric == "gbps" else "GFLOP/s", "intensity": intensity}
        for kind, r in best.items():
            row[kind] = None if r is None else shown_variant(r["variant"], r.get("tuned_best", ""))
            row[f"{kind}_rate"] = math.nan if r is None else r[metric]
            row[f"{kind}_gflops"] = math.nan if r is None else r["gflops"]
        for kind, ratio in (("hand", "hand / vendor"), ("ms", "MS / vendor")):
            vendor = _vendor_of(g, metric, best[kind]["run_id"]) if best[kind] is not None else None
            row[ratio] = row[f"{kind}_rate"] / vendor[metric] if vendor is not None else math.nan
        row["vendor run"] = (best["vendor"]["run_id"] if best["vendor"] is not None
                             and best["vendor"]["run_id"] != top["run_id"] else "same")
        row["best TVM % of peak"] = percent_of_peak(peak_for(gpu), dtype, intensity, top["gflops"], top["gbps"])
        rows.append(row)
    return pd.DataFrame(rows)


def _vendor_of(g: pd.DataFrame, metric: str, run_id: str) -> pd.Series | None:
    """The fastest vendor row of ``g`` (one workload shape's latest rows) measured in run ``run_id``, else the
    fastest of the others (measured again by a later run), else None: a ratio divides rows of one run where it can
    (``summary``'s ``vendor run`` names the run where it cannot)."""
    vendor = g[g["provider"].isin(VENDORS)]
    same = vendor[vendor["run_id"] == run_id]
    pick = same if len(same) else vendor
    return pick.sort_values(metric).iloc[-1] if len(pick) else None


def summary_table(s: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with readable column names, for display; where it has rows of code built for an older architecture
    (``ptx``), a ``GPU`` column names each row's GPU as tables do ("sm_80 code on <GPU> (PTX)")."""
    names = {"hand": "best hand schedule", "hand_rate": "hand rate", "ms": "MetaSchedule", "ms_rate": "MS rate",
             "vendor": "vendor", "vendor_rate": "vendor rate"}
    gpu = ["gpu_shown"] if "ptx" in s and s["ptx"].any() else []
    cols = ["notebook", "workload", "shape", "dtype", *gpu, "unit", *names, "hand / vendor", "MS / vendor",
            "best TVM % of peak", "vendor run", "date"]
    return s[cols].rename(columns={**names, "gpu_shown": "GPU"}).round(
        {"hand rate": 0, "MS rate": 0, "vendor rate": 0, "hand / vendor": 3, "MS / vendor": 3, "best TVM % of peak": 1})


def roofline(s: pd.DataFrame, gpu: str, caption: str) -> plt.Figure:
    """One GPU's roofline: achieved GFLOP/s against FLOP per byte for each kernel of ``summary`` (hand, MetaSchedule
    and vendor; kernels without FLOPs, such as a copy, have no point; code built for an older architecture, PTX, has
    none either: the caption says how many such rows the table has), under the HBM roof and the FP32 / FP16 / INT8
    roofs of the peak table."""
    s = s[(s["gpu"] == gpu) & (s["intensity"] > 0)]
    ptx = s["ptx"] if "ptx" in s else pd.Series(False, index=s.index)
    if ptx.any():
        archs = ", ".join(sorted(set(s.loc[ptx, "arch"])))
        caption += f"; not drawn: {int(ptx.sum())} rows of code built for {archs} (PTX)"
    s = s[~ptx]
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


@functools.cache
def workload_of(work_dir: Path) -> tuple[Workload, str]:
    """The workload and space a database directory is named after (``tuning.tune.work_dir_for`` read backwards);
    ValueError or TypeError for a name it cannot read. Cached: the name says everything, and a workload is TVMScript
    parsed anew at each call (a tenth of a second; a README has three tables of the same ~50 databases)."""
    stem, space = work_dir.name, "default"
    for spec in SPACES.values():
        if spec.db_suffix and stem.endswith(spec.db_suffix):
            stem, space = stem.removesuffix(spec.db_suffix), spec.name
    dtype, _, rest = stem.partition("_")
    layout, _, conv_shape = rest.partition("_")   # conv2d: LAYOUT_shape, the shape with its own _g32, _d2... tags
    if work_dir.parent.name == "conv2d" and layout.isalpha():
        return conv2d(**parse_conv_shape(conv_shape), layout=layout, dtype=dtype), space
    dtype, *layout, shape = stem.split("_")
    sizes = [int(v) for v in shape.split("x")]
    if work_dir.parent.name == "gemm" and not layout:
        return gemm(*sizes, dtype=dtype), space
    if work_dir.parent.name == "conv2d_winograd" and len(layout) == 1:   # sizes N C H W K, then m
        return conv2d_winograd(*sizes[:-1], m=sizes[-1], layout=layout[0], dtype=dtype), space
    raise ValueError("not a database name tirbench.tuning.tune writes")


def tuning_databases(root: Path) -> tuple[list[TunedDatabase], list[str]]:
    """Every database with records under ``results/tuning/`` (a whole model's, under ``MODEL_DATABASES``, is no one
    workload's: left out), and one line for each one whose name is not read."""
    found, skipped = [], []
    for rec in sorted((root / "results" / "tuning").glob("*/*/database_tuning_record.json")):
        if rec.parent.parent.name == MODEL_DATABASES:
            continue
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


#: A tuning-curve panel names each database in its legend up to this many; past it, one colour and one entry.
LEGEND_MAX = 8


def tuning_figure(dbs: list[TunedDatabase], title: str) -> plt.Figure:
    """Tuning curves, one panel per design space: each database's best rate so far against trials (MetaSchedule's
    measurements; a legend per panel, or one line colour where a space has more than ``LEGEND_MAX`` databases, e.g.
    the ``rules`` space's 23 layers), then the wall seconds per trial of each logged chunk, a colour per space."""
    spaces = sorted({db.space for db in dbs})
    cols = min(len(spaces) + 1, 3)
    rows = math.ceil((len(spaces) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    panels, wall = list(axes.flat[:len(spaces)]), axes.flat[len(spaces)]
    for ax in axes.flat[len(spaces) + 1:]:
        ax.axis("off")
    for s_i, (space, ax) in enumerate(zip(spaces, panels)):
        group = [db for db in dbs if db.space == space]
        many = len(group) > LEGEND_MAX
        for i, db in enumerate(group):
            h = tuning_history(db.work_dir, db.workload.flops)
            label = (f"{len(group)} databases, a line each" if i == 0 else None) if many else db.label
            ax.plot(h["trial"], h["best_gflops"] / 1e3, color=f"C{s_i % 10}" if many else f"C{i % 10}",
                    linewidth=0.9 if many else 1.5, alpha=0.6 if many else 1.0, label=label)
            chunks = tuning_chunks(db.work_dir)
            if len(chunks):
                wall.plot(chunks["trials"], chunks["s_per_trial"], marker="o", markersize=3, color=f"C{s_i % 10}",
                          label=space if space not in wall.get_legend_handles_labels()[1] else None)
        ax.set(xlabel="trials", ylabel="best TFLOP/s so far", yscale="log", title=f"{title}, {space} space")
        ax.legend(fontsize=6.5, loc="lower right")
    wall.set(xlabel="trials done", ylabel="wall seconds per trial (chunk)", title=f"{title}: wall time per trial")
    if wall.lines:
        wall.legend(fontsize=7, title="space", title_fontsize=7)
    else:
        wall.text(0.5, 0.5, "no chunk log: these databases were tuned\nbefore tune() kept tuning_chunks.csv",
                  ha="center", va="center", transform=wall.transAxes, color="0.4")
    for ax in [*panels, wall]:
        ax.grid(True, alpha=0.3)
        ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def tuning_throughput(root: Path) -> pd.DataFrame:
    """The GPU rows of ``results/tuning/throughput.csv`` (CPU runs of the tests left out); empty without the file."""
    df = throughput.read(throughput.path_for(root))
    return df[df["gpu"] != "cpu"].reset_index(drop=True)


#: What a row of ``throughput_table`` pools runs by.
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
    """Trials per minute (``throughput_table``'s, over all recorded runs), one panel per GPU model and design space:
    a horizontal bar per workload shape, runner and number of GPUs measuring at once, coloured by setup; a note where
    nothing is recorded."""
    table = throughput_table(df)
    panels = list(table.groupby(["gpu", "space"], sort=True)) if len(table) else []
    heights = [max(len(g), 1) * 0.28 + 1.0 for _, g in panels] or [3.0]
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no tuning run recorded yet\n(results/tuning/throughput.csv)", ha="center",
                        va="center", transform=axes[0, 0].transAxes, color="0.4")
    for ax, ((gpu, space), g) in zip(axes[:, 0], panels):
        g = g.sort_values(["workload", "dtype", "shape", "gpus", "runner", "setup"])
        names = [f"{r.workload} {r.dtype} {r.shape} · {r.runner}, {r.gpus} GPU{'s' if r.gpus > 1 else ''}"
                 for r in g.itertuples()]
        ys = list(range(len(g)))[::-1]
        bars = ax.barh(ys, g["trials_per_min"], color=[f"C{throughput.SETUPS.index(s)}" for s in g["setup"]])
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
        ax.set_xlim(0, 1.25 * g["trials_per_min"].max())   # room for the labels and the legend
        ax.set_yticks(ys, names, fontsize=7)
        ax.set(xlabel="trials per minute", title=f"{gpu}: {space} space")
        ax.title.set_fontsize(9)
        ax.legend(handles=[Patch(color=f"C{throughput.SETUPS.index(s)}", label=s) for s in throughput.SETUPS
                           if (g["setup"] == s).any()], fontsize=7, loc="lower right", title="setup",
                  title_fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def network_tuning(root: Path) -> pd.DataFrame:
    """The GPU rows of ``results/tuning/network_tuning.csv`` (``tuning.spread``: one row per run of tasks spread over
    GPUs); empty without the file."""
    path = spread.path_for(root)
    if not path.exists():
        return pd.DataFrame(columns=spread.ROW_COLUMNS)
    df = pd.read_csv(path)
    return df[df["gpu"] != "cpu"].reset_index(drop=True)


#: What makes spread runs comparable: the same GPU model, host size, space, task set and population, and the same
#: clock (``prepared``: the tuning processes made ready before the clock starts, ``start_s`` recorded).
SCALING_KEYS = ["gpu", "host_cores", "space", "tasks", "trials_per_task", "population", "prepared"]


def scaling_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per ``SCALING_KEYS`` and number of GPUs: the fastest run's trials per minute, its start-up and tuning time,
    and the speed-up of its tuning over the same task set's one-GPU run (NaN where none is recorded)."""
    if df.empty:
        return pd.DataFrame()
    keys = SCALING_KEYS
    best = df.assign(prepared=df["start_s"].notna()).sort_values("trials_per_min").groupby([*keys, "gpus"]).tail(1)
    one = best[best["gpus"] == 1].set_index(keys)["trials_per_min"]
    best = best.assign(speedup=[r.trials_per_min / one.get(tuple(getattr(r, k) for k in keys), math.nan)
                                for r in best.itertuples()])
    return best[[*keys, "gpus", "hosts", "run_id", "start_s", "wall_s", "trials_per_min", "speedup"]].sort_values(
        [*keys, "gpus"])


def scaling_figure(df: pd.DataFrame) -> plt.Figure:
    """Trials per minute against the number of GPUs (``scaling_table``), a line per GPU model, space and task set,
    beside the ideal (the one-GPU rate times the GPUs); a note where nothing is recorded."""
    table = scaling_table(df)
    fig, ax = plt.subplots(figsize=(6, 4))
    if table.empty:
        ax.text(0.5, 0.5, "no spread tuning run recorded yet\n(results/tuning/network_tuning.csv)", ha="center",
                va="center", transform=ax.transAxes, color="0.4")
        ax.set_axis_off()
        return fig
    for i, (key, g) in enumerate(table.groupby(SCALING_KEYS, sort=True)):
        ax.plot(g["gpus"], g["trials_per_min"], "o-", color=f"C{i}", label=f"{key[0]} ({key[1]} cores), "
                f"{key[2]} space, {key[3]} tasks x {key[4]} trials, population {key[5]}"
                f"{', tuning processes ready first' if key[6] else ''}")
        base = g.loc[g["gpus"] == 1, "trials_per_min"]
        if len(base):
            ax.plot(g["gpus"], base.iloc[0] * g["gpus"], ":", color=f"C{i}", alpha=0.6)
    ax.set(xlabel="GPUs", ylabel="trials per minute", title="Tuning spread over GPUs (dotted: linear)")
    ax.set_xticks(sorted(table["gpus"].unique()))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig

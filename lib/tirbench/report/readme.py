"""Regenerate the README's results tables from results/*/results.csv.

    python -m tirbench.report.readme README.md

rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` (what the headline rows are, from
``HEADLINES``, then the rows: one table per timing method, ``published.timing``), and between
each sweep's markers (``<!-- conv-sweep:start -->`` ... ``<!-- conv-sweep:end -->``: the batch-1 ResNet-50 layers
against cuDNN, with their geometric mean; ``conv-fp16-sweep``: the fp16 batch-32 layers), ``gemm-padded`` (notebook
03's padded kernels against cuBLAS), ``gemm-rules`` (the GEMM rules' choices against cuBLAS, ``report.gemm_rules``),
``conv-winograd`` and ``winograd-error`` (notebook 04's Winograd kernels against cuDNN, and their errors from
``winograd_error.csv``), ``resnet50-network`` (notebook 08: ResNet-50's convolutions as
a whole network, the conv rules against cuDNN per run, each from its latest run, and MetaSchedule's ``rules`` space on
the fp32 layers), ``networks`` (notebook 10: five networks' convolutions as whole networks, from its
``networks.csv``, ``report.networks``), ``which-gpus`` (per architecture: example GPUs, the families it builds from
their ``needs``, and whether recorded rows ran code built for it natively or as PTX) and ``tuning-throughput`` (``results/tuning/throughput.csv``, each run marked by whether today's
databases come from it) when the README has that section; nothing is typed by hand. Each table is read from the
latest run that has its rows (a run of part of a notebook leaves the rest in place), never mixes runs timed before
and after ``published.CUDA_EVENTS_SINCE``, and ends with a caption naming the notebook's file, run, GPU and date; a
tuned row whose best record is a hand seed says so (``published.with_tuned_best``). A row built for an older
architecture than its GPU's names its GPU "sm_80 code on <GPU> (PTX)" (``results.gpu_label``) and is never divided by a
native row: the tables against cuDNN or cuBLAS read native runs only (``results.native_runs``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from tirbench.bench.network import (config_tables, metaschedule_per_layer, metaschedule_run, metaschedule_totals,
                                    network_totals)
from tirbench.bench.results import is_ptx, latest_run_where, native_runs, read_results
from tirbench.bench.winograd import ERROR_CSV, geomean, read_errors, versus_cudnn
from tirbench.compile import model_results
from tirbench.core.errors import OneLineError
from tirbench.core.gpu import EXAMPLE_GPUS, REFERENCE_GPU
from tirbench.report.gemm_rules import gemm_rules_table
from tirbench.report.headline import HEADLINES, UNITS, headline_rows, headline_sentence
from tirbench.report.networks import networks_table
from tirbench.report.published import (EVALUATOR, EVENTS, SEED, caption, labelled_results, recorded_rows, shown_variant,
                                       timing)
from tirbench.report.tuning_runs import network_tuning_table, runs_behind_databases, unrecorded_databases
from tirbench.schedules.common.record import KernelRecord, for_arch
from tirbench.schedules.conv import records as conv_records
from tirbench.schedules.gemm import records as gemm_records
from tirbench.tuning.database import MODEL_DATABASES
from tirbench.tuning.relax_model import replay_summary
from tirbench.workloads.resnet50 import RESNET50

START, END = "<!-- results:start -->", "<!-- results:end -->"
#: What a headline table of each timing method says above its rows.
TIMING_TITLES = {EVENTS: "**Timed with CUDA events** (TVM and the vendor timed alike):",
                 EVALUATOR: "**Timed before the harness used CUDA events** (TVM with `time_evaluator`, its times "
                            "including the host's launch cost; not comparable with the rows above, awaiting a re-run):"}


@dataclass(frozen=True)
class Sweep:
    """A per-layer table (fastest TVM kernel vs fastest cuDNN run, and the geometric mean of cuDNN time / TVM time)
    of the latest run of one notebook that has its layers, written between ``<!-- {marker}:start -->`` and
    ``<!-- {marker}:end -->``."""

    marker: str
    notebook: str
    shapes: tuple[str, ...]

    @property
    def start(self) -> str:
        return _markers(self.marker)[0]

    @property
    def end(self) -> str:
        return _markers(self.marker)[1]


def _markers(name: str) -> tuple[str, str]:
    """The README comments that open and close the generated section ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


#: Every notebook's labelled rows (``published.labelled_results``); None: read them.
Recorded = Mapping[str, pd.DataFrame] | None


def _rows(root: Path, notebook: str, recorded: Recorded) -> pd.DataFrame:
    """``notebook``'s recorded rows with their ``tuned_best`` (of ``recorded``, else read from ``root``)."""
    return recorded_rows(labelled_results(root) if recorded is None else recorded, notebook)


SWEEPS: list[Sweep] = [
    Sweep("conv-sweep", "05_conv2d_batch1", ("1x64x56x56x64x3x3x1x1", "1x128x28x28x128x3x3x1x1",
                                             "1x256x14x14x256x3x3x1x1", "1x512x7x7x512x3x3x1x1",
                                             "1x256x56x56x64x1x1x1x0", "1x3x224x224x64x7x7x2x3")),
    Sweep("conv-fp16-sweep", "06_conv2d_tensorcore", ("32x64x56x56x64x3x3x1x1", "32x256x14x14x256x3x3x1x1",
                                                      "32x512x7x7x512x3x3x1x1", "32x256x56x56x64x1x1x1x0")),
    Sweep("conv-int8-sweep", "07_conv2d_int8", ("256x256x14x14x512x3x3x1x1", "32x64x56x56x64x3x3x1x1",
                                                "32x256x14x14x256x3x3x1x1", "32x512x7x7x512x3x3x1x1")),
]


def headline_table(root: Path, recorded: Recorded = None) -> str:
    """What the headline rows are (``headline_sentence``), then the rows of each notebook's latest run that has them,
    one table per timing method (``published.timing``), each with a caption per run it shows."""
    recorded = labelled_results(root) if recorded is None else recorded
    frames, not_run = [], []
    for nb, head in HEADLINES:
        rows = headline_rows(recorded_rows(recorded, nb), head)
        if rows.empty:
            not_run.append(nb)
            continue
        frames.append(rows.assign(notebook=nb, metric=head.metric))
    parts = [headline_sentence()]
    if frames:
        rows = pd.concat(frames, ignore_index=True)
        rows["timing"] = timing(rows["timestamp"])
        parts += [part for method in (EVENTS, EVALUATOR) if (rows["timing"] == method).any()
                  for part in (TIMING_TITLES[method], _headline_lines(rows[rows["timing"] == method]))]
    if not_run:
        parts.append("Not run on a GPU yet: " + ", ".join(f"`{nb}`" for nb in dict.fromkeys(not_run)) + ".")
    return "\n\n".join(parts)


def _headline_lines(rows: pd.DataFrame) -> str:
    """A markdown table of headline rows (``headline_rows`` of several notebooks), then a caption per run."""
    lines = ["| notebook | workload | shape | variant | provider | median ms | rate | vs baseline | GPU, date |",
             "|---|---|---|---|---|---:|---:|---:|---|"]
    for r in rows.to_dict("records"):
        ratio = f"{r['ratio']:.3f}x {r['baseline']}" if pd.notna(r["ratio"]) else ""
        lines.append(f"| {r['notebook']} | {r['workload']} | {r['shape']} | "
                     f"{shown_variant(r['variant'], r['tuned_best'])} | {r['provider']} | {r['median_ms']:.4f} | "
                     f"{r[r['metric']]:,.0f} {UNITS[r['metric']]} | {ratio} | {r['gpu_shown']}, "
                     f"{str(r['timestamp'])[:10]} |")
    runs = rows.drop_duplicates(["notebook", "run_id"])
    captions = [f"- {caption(r['notebook'], rows[rows['run_id'] == r['run_id']], timed=False)}"
                for r in runs.to_dict("records")]
    return "\n".join(lines) + "\n\n" + "\n".join(captions)


def sweep_table(root: Path, sweep: Sweep = SWEEPS[0], recorded: Recorded = None) -> str:
    """Per layer of ``sweep`` in the latest run of its notebook that has its layers: the fastest TVM kernel (hand or
    tuned), the fastest cuDNN layout, cuDNN time / TVM time, and the geometric mean of that ratio."""
    df = native_runs(_rows(root, sweep.notebook, recorded))
    df = latest_run_where(df, df["shape"].astype(str).isin(sweep.shapes)) if len(df) else df
    lines = ["| layer (NxCxHxWxKxRxSxstridexpad) | fastest TVM | ms | fastest cuDNN | ms | cuDNN time / TVM time |",
             "|---|---|---:|---|---:|---:|"]
    ratios = []
    for shape in sweep.shapes:
        rows = df[df["shape"].astype(str) == shape] if not df.empty else df
        ours = rows[rows["provider"].isin(["tvm", "metaschedule"])].sort_values("median_ms")
        vendor = rows[rows["provider"] == "cudnn"].sort_values("median_ms")
        if ours.empty or vendor.empty:
            continue
        ratios.append(vendor["median_ms"].iloc[0] / ours["median_ms"].iloc[0])
        best = ours.iloc[0]
        lines.append(f"| {shape} | {shown_variant(best['variant'], best['tuned_best'])} | {best['median_ms']:.4f} | "
                     f"{vendor['variant'].iloc[0]} | {vendor['median_ms'].iloc[0]:.4f} | {ratios[-1]:.3f}x |")
    if not ratios:
        return "not run on a GPU yet"
    mean = float(np.exp(np.mean(np.log(ratios))))
    lines.append(f"| geometric mean over {len(ratios)} layers | | | | | **{mean:.3f}x** |")
    return "\n".join(lines) + f"\n\n{caption(sweep.notebook, df)}"


def padded_table(root: Path) -> str:
    """Notebook 03_gemm_shapes' latest run with padded kernels: per shape no tile divides, the padded v5 (fp32) and v8 (fp16)
    kernels against cuBLAS at the same shape."""
    df = native_runs(read_results(root / "results" / "03_gemm_shapes" / "results.csv"))
    df = latest_run_where(df, df["variant"].astype(str).str.endswith("_padded")) if len(df) else df
    padded = df[df["variant"].astype(str).str.endswith("_padded")] if not df.empty else df
    if padded.empty:
        return "not run on a GPU yet"
    lines = ["| shape (MxNxK) | kernel | dtype | ms | TFLOP/s | cuBLAS TFLOP/s | kernel / cuBLAS |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in padded.itertuples():
        vendor = df[(df["shape"] == r.shape) & (df["variant"] == f"cublas_{r.dtype}")]
        if vendor.empty:
            continue
        v = vendor.iloc[-1]
        lines.append(f"| {r.shape} | {r.variant} | {r.dtype} | {r.median_ms:.4f} | {r.gflops / 1e3:.1f} | "
                     f"{v['gflops'] / 1e3:.1f} | {r.gflops / v['gflops']:.3f}x |")
    return "\n".join(lines) + f"\n\n{caption('03_gemm_shapes', df)}"


def throughput_table(root: Path) -> str:
    """Every recorded tuning run (``results/tuning/throughput.csv``): where it ran, how, its trials per minute, and
    whether today's database of its workload comes from it (``tuning_runs.behind``); then the databases whose
    tuning no row records."""
    df = runs_behind_databases(root)
    if df.empty:
        return "no tuning run recorded yet"
    lines = ["| run | GPU | GPUs | runner | setup | workload | shape | space | trials | seconds | trials/min | "
             "today's database from it |", "|---|---|---:|---|---|---|---|---|---:|---:|---:|---|"]
    lines += [f"| {r.run_id} | {r.gpu} | {r.gpus} | {r.runner} | {r.setup} | {r.workload} {r.dtype} | {r.shape} | "
              f"{r.space} | {r.trials} | {r.seconds:.1f} | {r.trials_per_min:.2f} | {r.database} |"
              for r in df.itertuples()]
    unrecorded = unrecorded_databases(root)
    note = ("\n\nDatabases replayed today whose tuning (in their `tuning_chunks.csv`) no run above records:\n\n"
            + "\n".join(f"- {line}" for line in unrecorded)) if unrecorded else ""
    return ("\n".join(lines) + "\n\nFrom `results/tuning/throughput.csv` and each database's `tuning_chunks.csv`."
            + note)


#: Notebook 04's Winograd layers: the batch-256 layer, then ResNet-50's 3x3 stride-1 layers at batch 1 and 32.
WINOGRAD_LAYERS = ("256x256x14x14x512x3x3x1x1", *(f"{n}x{c}x{s}x{s}x{c}x3x3x1x1" for n in (1, 32)
                                                  for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))))


def winograd_table(root: Path) -> str:
    """Notebook 04's latest run with Winograd rows: per Winograd layer, cuDNN's faster layout and each Winograd
    variant's time with cuDNN time / its time (``versus_cudnn``), and the geometric mean of each ratio."""
    df = native_runs(read_results(root / "results" / "04_conv2d" / "results.csv"))
    df = latest_run_where(df, df["variant"].astype(str).str.startswith("winograd_f")) if len(df) else df
    table = versus_cudnn(df, WINOGRAD_LAYERS) if not df.empty else pd.DataFrame()
    if table.empty:
        return "not run on a GPU yet"
    variants = [col.removeprefix("cuDNN / ") for col in table if col.startswith("cuDNN / ")]
    lines = ["| layer (NxCxHxWxKxRxSxstridexpad) | fastest cuDNN | ms | "
             + " | ".join(f"{v} ms | cuDNN / {v}" for v in variants) + " |",
             "|---|---|---:|" + "---:|---:|" * len(variants)]
    for r in table.to_dict("records"):
        cells = [f"{r[f'{v} ms']:.4f} | {r[f'cuDNN / {v}']:.3f}x" if pd.notna(r[f"{v} ms"]) else " | "
                 for v in variants]   # a variant this layer has no row of
        lines.append(f"| {r['layer']} | {r['cuDNN']} | {r['cuDNN ms']:.4f} | " + " | ".join(cells) + " |")
    means = [f" | **{geomean(table[f'cuDNN / {v}']):.3f}x**" for v in variants]
    lines.append(f"| geometric mean over {len(table)} layers | | | " + " | ".join(means) + " |")
    return "\n".join(lines) + f"\n\n{caption('04_conv2d', df)}"


def winograd_error_table(root: Path) -> str:
    """Notebook 04's latest Winograd error table (``winograd_error.csv``): per layer, F(2x2) and F(4x4) side by side,
    the largest error of the timed kernel's output against the float64 reference (in brackets: relative to the
    largest output) and the tolerance it was checked with."""
    rows = read_results(root / "results" / "04_conv2d" / "results.csv")
    ptx_runs = set(rows["run_id"]) - set(native_runs(rows)["run_id"]) if len(rows) else set()
    df = read_errors(root / "results" / "04_conv2d" / ERROR_CSV, skip=ptx_runs)
    if df.empty:
        return "not run on a GPU yet"
    lines = ["| layer (NxCxHxWxKxRxSxstridexpad) | layout | F(2x2) max error (relative) | F(2x2) tolerance | "
             "F(4x4) max error (relative) | F(4x4) tolerance | F(4x4) / F(2x2) error |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (shape, layout), rows in df.groupby(["shape", "layout"], sort=False):
        by_m = {int(r.m): r for r in rows.itertuples()}
        cells = [f"{by_m[m].max_abs:.2e} ({by_m[m].max_rel:.1e}) | {by_m[m].atol:.2e}" if m in by_m else " | "
                 for m in (2, 4)]
        ratio = f"{by_m[4].max_abs / by_m[2].max_abs:.1f}x" if {2, 4} <= set(by_m) else ""
        lines.append(f"| {shape} | {layout} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines) + f"\n\n{caption('04_conv2d', df, ERROR_CSV, timed=False)}"


def network_table(root: Path, recorded: Recorded = None) -> str:
    """Notebook 08's ResNet-50 convolutions as a whole network (time x count summed over the layers): per config, from
    its latest run, the conv rules against cuDNN's faster layout (fp16 for int8), then the MetaSchedule ``rules``
    space against the rules on the fp32 layers it has a row for (and how many of its best records are seeds)."""
    df = native_runs(_rows(root, "08_resnet50", recorded))
    found = config_tables(df, RESNET50)
    batches, tables = {c: batch for c, (batch, _) in found.items()}, {c: t for c, (_, t) in found.items()}
    if not tables:
        return "not run on a GPU yet"
    lines = ["| run | layers | convolutions | TVM rules ms (network) | cuDNN ms (network) | cuDNN time / TVM time | "
             "run_id |", "|---|---:|---:|---:|---:|---:|---|"]
    for config, t in network_totals(pd.concat(tables.values(), ignore_index=True)).to_dict("index").items():
        vendor = " (cuDNN fp16)" if config == "int8" else ""
        lines.append(f"| {config} batch {batches[config]}{vendor} | {t['layers']} | {t['convolutions']} | "
                     f"{t['tvm_ms']:.3f} | {t['cudnn_ms']:.3f} | {t['cuDNN / TVM']:.3f}x | {t['run_id']} |")
    paragraphs, runs = ["\n".join(lines)], [t["run_id"].iloc[0] for t in tables.values()]
    if "fp32" in tables:
        ms = metaschedule_per_layer(df, tables["fp32"], RESNET50, batches["fp32"])
        if not ms.empty:
            runs.append(metaschedule_run(df)["run_id"].iloc[0])
            paragraphs.append(_metaschedule_line(ms, len(tables["fp32"]), metaschedule_run(df)))
    return "\n\n".join(paragraphs + [caption("08_resnet50", df[df["run_id"] == r]) for r in dict.fromkeys(runs)])


#: Notebook 09's columns in the README: its variants' times, then the rules' speed-ups.
MODEL_VARIANTS = {"tvm_rules": "TVM rules", "metaschedule": "TVM MetaSchedule", "tvm_default": "TVM default (DLight)",
                  "torch_eager": "eager", "torch_eager_channels_last": "eager channels-last",
                  "torch_compile": "torch.compile"}


def relax_models_table(root: Path) -> str:
    """Notebook 09's whole models (each model's and dtype's latest run, ``model_results.recorded``): per model and
    run, each variant's ms (a variant that failed its check or was not built: empty, and the checks say why), then
    the fastest eager variant's and ``torch.compile``'s time over the rules'."""
    shown = model_results.recorded(root)
    if shown.rows.empty:
        return "not run on a GPU yet"
    table = model_results.times_table(shown.rows)
    variants = [v for v in MODEL_VARIANTS if v in table.columns]
    lines = ["| model | dtype | batch | " + " | ".join(f"{MODEL_VARIANTS[v]} ms" for v in variants)
             + " | eager / rules | torch.compile / rules |", "|---|---|---:|" + "---:|" * (len(variants) + 2)]
    for r in table.to_dict("records"):
        eager = min(r.get(v, np.nan) for v in ("torch_eager", "torch_eager_channels_last"))
        ratios = [f"{t / r['tvm_rules']:.2f}x" if pd.notna(t) and pd.notna(r.get("tvm_rules")) else ""
                  for t in (eager, r.get("torch_compile", np.nan))]
        times = [f"{r[v]:.3f}" if pd.notna(r[v]) else "" for v in variants]
        lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | " + " | ".join(times + ratios) + " |")
    runs = [shown.rows[shown.rows["run_id"] == run] for run in dict.fromkeys(shown.rows["run_id"])]
    failed = shown.checks[~shown.checks["verified"].astype(str).isin(["True", "true"])]
    note = "".join(f"\n\n{r.model} {r.dtype} {r.variant}: no time, " + (
        f"{r.error}" if isinstance(r.error, str) and r.error else
        f"its check failed (max |difference| / max |reference| {float(r.max_rel_diff):.3g} > {float(r.tolerance):.3g})")
        for r in failed.itertuples())
    from_notebook = shown.source == f"results/{model_results.NOTEBOOK}/results.csv"
    source = " ".join(caption(model_results.NOTEBOOK, run) for run in runs) if from_notebook else shown.label()
    return "\n".join(lines) + note + _model_databases_line(root) + f"\n\n{source}"


def _model_databases_line(root: Path) -> str:
    """What the MetaSchedule column replays: per whole-model database, its trials and the tasks they tuned (the
    others DLight schedules, as in TVM default)."""
    dbs = sorted(p for p in (root / "results" / "tuning" / MODEL_DATABASES).glob("*") if p.is_dir())
    if not dbs:
        return ""
    return (f"\n\nTVM MetaSchedule replays `results/tuning/{MODEL_DATABASES}/` (a short budget so far): "
            + "; ".join(f"{work_dir.name} {replay_summary(work_dir)}" for work_dir in dbs) + ".")


def _metaschedule_line(ms: pd.DataFrame, layers: int, run: pd.DataFrame) -> str:
    """The MetaSchedule ``rules`` space's network time on the fp32 layers of ``ms`` (``metaschedule_per_layer``, of
    the rows of ``run``) against the rules' on the same layers, and how many of its best records are seeds."""
    totals = metaschedule_totals(ms)
    ms_total, rules_total = totals["ms_rules_ms"], totals["rules_ms"]
    tuned = run[run["variant"] == "metaschedule_rules"]
    known = tuned["tuned_best"].isin([SEED, "search"])
    seeds = (f" Layers whose best record is a seed (a conv rules candidate the search starts from): "
             f"{int((tuned['tuned_best'] == SEED).sum())} of the {int(known.sum())} whose database tells."
             if known.any() else "")
    return (f"MetaSchedule's `rules` space on the fp32 layers ({len(ms)} of {layers} layers, {ms['count'].sum()} "
            f"convolutions, best of up to {ms['trials'].max()} trials a layer, run {run['run_id'].iloc[0]}): "
            f"{ms_total:.3f} ms against the conv rules' {rules_total:.3f} ms on the same layers "
            f"({rules_total / ms_total:.3f}x the rules' speed).{seeds}")


#: Generated sections besides the headline rows, the sweeps and the network: marker -> table builder.
def all_families() -> list[KernelRecord]:
    """Every GEMM and convolution family (``gemm.records``, ``conv.records``), once each, in their modules' order."""
    found = {r.name: r for mod in (gemm_records, conv_records) for r in vars(mod).values()
             if isinstance(r, KernelRecord)}
    return list(found.values())


def _runs_built_for(rows: pd.DataFrame, arch: str) -> str:
    """How rows built for ``arch`` ran: measured natively and/or as PTX on a newer GPU (naming the GPUs), else not."""
    mine = rows[rows["arch"] == arch]
    ptx = mine.apply(lambda r: is_ptx(r["arch"], r["compute_capability"]), axis=1).astype(bool) if len(mine) else []
    said = [f"{how} on {', '.join(sorted(set(part['gpu'].astype(str))))}"
            for how, part in (("measured natively", mine[~ptx] if len(mine) else mine),
                              ("verified as PTX", mine[ptx] if len(mine) else mine)) if len(part)]
    return "; ".join(said) or "no recorded run yet"


def which_gpus_table(root: Path) -> str:
    """Per architecture the suite plans for (``core.gpu.REFERENCE_GPU``): example GPUs, the GEMM and convolution
    families it builds (``record.for_arch``: from each family's ``needs``), and whether recorded rows (every
    ``results/*/results.csv``) measured code built for it natively or as PTX on a newer GPU."""
    frames = [read_results(p) for p in sorted((root / "results").glob("*/results.csv"))]
    rows = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else \
        pd.DataFrame(columns=["arch", "gpu", "compute_capability"])
    families = all_families()
    lines = ["**Which GPUs** (generated): per architecture, the GEMM and convolution families the suite builds for it "
             "and whether a recorded run measured code built for it.", "",
             "| architecture | example GPUs | families it builds | recorded runs |", "|---|---|---|---|"]
    for arch, spec in REFERENCE_GPU.items():
        built = for_arch(families, arch)[0]
        names = ", ".join(f"`{r.name}`" for r in built)
        lines.append(f"| {arch} | {', '.join(EXAMPLE_GPUS.get(spec.compute_capability, ()))} | "
                     f"{len(built)} of {len(families)}: {names} | {_runs_built_for(rows, arch)} |")
    return "\n".join(lines) + ("\n\nFamilies from each family's `needs` (`KernelRecord.needs`, `core.gpu`); "
                               "`nhwc_wmma` and the `sm75_` families are Turing's fallbacks, built everywhere but "
                               "offered by the rules only where the families they stand in for do not build "
                               "(`record.first_offered`); recorded runs from `results/*/results.csv` (`arch`: what "
                               "the kernel was built for).")


SECTIONS = {"gemm-padded": padded_table, "gemm-rules": gemm_rules_table, "conv-winograd": winograd_table,
            "winograd-error": winograd_error_table, "tuning-throughput": throughput_table,
            "which-gpus": which_gpus_table,
            "relax-models": relax_models_table, "networks": networks_table, "network-tuning": network_tuning_table}


def _replace(text: str, start: str, end: str, body: str) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def _replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the generated section ``name`` rewritten as ``body``, where ``text`` has that section."""
    start, end = _markers(name)
    return _replace(text, start, end, body) if start in text and end in text else text


def update_readme(readme: Path, root: Path) -> bool:
    """Replace the marked sections of ``readme``; returns whether the file changed. The sections are computed first
    and the file read just before it is written, so an edit made meanwhile outside the markers is kept."""
    if START not in readme.read_text() or END not in readme.read_text():
        raise ValueError(f"{readme} has no {START} ... {END} section")
    recorded = labelled_results(root)
    bodies = {"results": headline_table(root, recorded), "resnet50-network": network_table(root, recorded)}
    bodies |= {sweep.marker: sweep_table(root, sweep, recorded) for sweep in SWEEPS}
    bodies |= {name: table(root) for name, table in SECTIONS.items()}
    text = readme.read_text()
    new = text
    for name, body in bodies.items():
        new = _replace_section(new, name, body)
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    readme = Path(argv[1] if len(argv) > 1 else "README.md").resolve()
    try:
        changed = update_readme(readme, readme.parent)
    except OneLineError as err:  # a results CSV that is not whole
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(f"{readme.name}: results table {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Regenerate the README's results table from results/*/results.csv (latest run of each notebook).

    python -m tirbench.report.readme README.md

rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` (the headline rows), and between
each sweep's markers (``<!-- conv-sweep:start -->`` ... ``<!-- conv-sweep:end -->``: the batch-1 ResNet-50 layers
against cuDNN, with their geometric mean; ``conv-fp16-sweep``: the fp16 batch-32 layers), ``gemm-padded`` (notebook
03's padded kernels against cuBLAS), ``conv-winograd`` and ``winograd-error`` (notebook 04's Winograd kernels against
cuDNN, and their errors from ``winograd_error.csv``), ``resnet50-network`` (notebook 08: ResNet-50's convolutions as
a whole network, the conv rules against cuDNN per run, each from its latest run, and MetaSchedule's ``rules`` space on
the fp32 layers) and ``tuning-throughput`` (``results/tuning/throughput.csv``) when the README has that section;
nothing is typed by hand.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tirbench.bench.network import (DTYPES, metaschedule_per_layer, metaschedule_run, metaschedule_totals,
                                    network_totals, per_layer, recorded_batch)
from tirbench.bench.results import latest_run, read_results
from tirbench.bench.winograd import ERROR_CSV, geomean, read_errors, versus_cudnn
from tirbench.core.errors import OneLineError
from tirbench.tuning import throughput
from tirbench.workloads.resnet50 import RESNET50

START, END = "<!-- results:start -->", "<!-- results:end -->"


@dataclass(frozen=True)
class Headline:
    """Which rows of a notebook's latest run the README shows, and what they are compared with."""

    shapes: tuple[str, ...]   # rows with these shapes
    baseline: str             # variant each row is divided by; "{dtype}" is replaced by the row's dtype;
                              # "fastest:<provider>": that provider's fastest row of the same shape and dtype
                         # (of the same shape in any dtype where it has none in this one)
    metric: str               # "gbps" or "gflops"
    variants: tuple[str, ...] | None = None   # only these variants (None: all)


HEADLINES: list[tuple[str, Headline]] = [
    ("01_vector_add", Headline(("67108864",), "a+b", "gbps")),
    ("02_window_sum", Headline(("67108864x3", "67108864"), "copy", "gbps")),
    ("03_gemm", Headline(("4096x4096x4096",), "cublas_{dtype}", "gflops")),
    ("03_gemm", Headline(("1024x1024x1024",), "cublas_{dtype}", "gflops",
                         ("v5_best", "v7_best", "v8_best", "v9_best", "metaschedule_float32",
                          "metaschedule_v5_space_float32", "cublas_float32", "cublas_float16"))),
    ("04_conv2d", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("05_conv2d_batch1", Headline(("1x512x7x7x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("06_conv2d_tensorcore", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("07_conv2d_int8", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
]


@dataclass(frozen=True)
class Sweep:
    """A per-layer table (fastest TVM kernel vs fastest cuDNN run, and the geometric mean of cuDNN time / TVM time)
    of one notebook's latest run, written between ``<!-- {marker}:start -->`` and ``<!-- {marker}:end -->``."""

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


def _run_label(df: pd.DataFrame) -> str:
    """The line under a generated table: the GPU, driver and run its rows come from."""
    return f"{df['gpu'].iloc[0]}, driver {df['driver'].iloc[0]}, run {df['run_id'].iloc[0]}."


SWEEPS: list[Sweep] = [
    Sweep("conv-sweep", "05_conv2d_batch1", ("1x64x56x56x64x3x3x1x1", "1x128x28x28x128x3x3x1x1", "1x256x14x14x256x3x3x1x1",
                                      "1x512x7x7x512x3x3x1x1", "1x256x56x56x64x1x1x1x0", "1x3x224x224x64x7x7x2x3")),
    Sweep("conv-fp16-sweep", "06_conv2d_tensorcore", ("32x64x56x56x64x3x3x1x1", "32x256x14x14x256x3x3x1x1",
                                                      "32x512x7x7x512x3x3x1x1", "32x256x56x56x64x1x1x1x0")),
    Sweep("conv-int8-sweep", "07_conv2d_int8", ("256x256x14x14x512x3x3x1x1", "32x64x56x56x64x3x3x1x1",
                                                "32x256x14x14x256x3x3x1x1", "32x512x7x7x512x3x3x1x1")),
]
UNITS = {"gbps": "GB/s", "gflops": "GFLOP/s"}


def headline_table(root: Path) -> str:
    """A markdown table: per notebook, the headline rows of its latest recorded GPU run."""
    lines = ["| notebook | workload | shape | variant | provider | median ms | rate | vs baseline | GPU, date |",
             "|---|---|---|---|---|---:|---:|---:|---|"]
    not_run: set[str] = set()
    for nb, head in HEADLINES:
        df = latest_run(read_results(root / "results" / nb / "results.csv"))
        if df.empty:
            if nb not in not_run:
                not_run.add(nb)
                lines.append(f"| {nb} | | | | | | | | not run on a GPU yet |")
            continue
        df = df[df["shape"].astype(str).isin(head.shapes)]
        if head.variants is not None:
            df = df[df["variant"].isin(head.variants)]
        for r in df.itertuples():
            baseline, base = _baseline(df, head, r)
            ratio = f"{getattr(r, head.metric) / base.iloc[0]:.3f}x {baseline}" if len(base) else ""
            lines.append(f"| {nb} | {r.workload} | {r.shape} | {r.variant} | {r.provider} | {r.median_ms:.4f} | "
                         f"{getattr(r, head.metric):,.0f} {UNITS[head.metric]} | {ratio} | "
                         f"{r.gpu}, {str(r.timestamp)[:10]} |")
    return "\n".join(lines)


def _baseline(df: pd.DataFrame, head: Headline, r) -> tuple[str, pd.Series]:
    """The name of the row ``r`` is compared with, and its metric (empty when the run has no such row)."""
    same = df[(df["dtype"] == r.dtype) & (df["shape"].astype(str) == str(r.shape))]
    if head.baseline.startswith("fastest:"):
        provider = head.baseline.split(":", 1)[1]
        rows = same[same["provider"] == provider]
        if rows.empty:  # the vendor has no kernel in this dtype (int8 convolution): its fastest in any dtype
            rows = df[(df["shape"].astype(str) == str(r.shape)) & (df["provider"] == provider)]
        rows = rows.sort_values(head.metric)
        return (rows["variant"].iloc[-1], rows[head.metric].iloc[-1:]) if len(rows) else (head.baseline, rows[head.metric])
    baseline = head.baseline.format(dtype=r.dtype)
    return baseline, df.loc[(df["variant"] == baseline) & (df["dtype"] == r.dtype), head.metric]


def sweep_table(root: Path, sweep: Sweep = SWEEPS[0]) -> str:
    """Per layer of ``sweep`` in its notebook's latest run: the fastest TVM kernel (hand or tuned), the fastest cuDNN
    layout, cuDNN time / TVM time, and the geometric mean of that ratio."""
    df = latest_run(read_results(root / "results" / sweep.notebook / "results.csv"))
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
        lines.append(f"| {shape} | {ours['variant'].iloc[0]} | {ours['median_ms'].iloc[0]:.4f} | "
                     f"{vendor['variant'].iloc[0]} | {vendor['median_ms'].iloc[0]:.4f} | {ratios[-1]:.3f}x |")
    if not ratios:
        return "not run on a GPU yet"
    lines.append(f"| geometric mean over {len(ratios)} layers | | | | | **{float(np.exp(np.mean(np.log(ratios)))):.3f}x** |")
    return "\n".join(lines) + f"\n\n{_run_label(df)}"


def padded_table(root: Path) -> str:
    """Notebook 03's latest run: per shape no tile divides, the padded v5 (fp32) and v8 (fp16) kernels against cuBLAS
    at the same shape."""
    df = latest_run(read_results(root / "results" / "03_gemm" / "results.csv"))
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
    return "\n".join(lines) + f"\n\n{_run_label(df)}"


def throughput_table(root: Path) -> str:
    """Every recorded tuning run (``results/tuning/throughput.csv``): where it ran, how, and its trials per minute."""
    path = throughput.path_for(root)
    df = throughput.read(path) if path.exists() else pd.DataFrame()
    if df.empty:
        return "no tuning run recorded yet"
    lines = ["| run | GPU | GPUs | runner | setup | workload | shape | space | trials | seconds | trials/min |",
             "|---|---|---:|---|---|---|---|---|---:|---:|---:|"]
    lines += [f"| {r.run_id} | {r.gpu} | {r.gpus} | {r.runner} | {r.setup} | {r.workload} {r.dtype} | {r.shape} | "
              f"{r.space} | {r.trials} | {r.seconds:.1f} | {r.trials_per_min:.2f} |" for r in df.itertuples()]
    return "\n".join(lines)


#: Notebook 04's Winograd layers: the batch-256 layer, then ResNet-50's 3x3 stride-1 layers at batch 1 and 32.
WINOGRAD_LAYERS = ("256x256x14x14x512x3x3x1x1", *(f"{n}x{c}x{s}x{s}x{c}x3x3x1x1" for n in (1, 32)
                                                  for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))))


def winograd_table(root: Path) -> str:
    """Notebook 04's latest run: per Winograd layer, cuDNN's faster layout and each Winograd variant's time with
    cuDNN time / its time (``versus_cudnn``), and the geometric mean of each ratio."""
    df = latest_run(read_results(root / "results" / "04_conv2d" / "results.csv"))
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
    return "\n".join(lines) + f"\n\n{_run_label(df)}"


def winograd_error_table(root: Path) -> str:
    """Notebook 04's latest Winograd error table (``winograd_error.csv``): per layer, F(2x2) and F(4x4) side by side,
    the largest error of the timed kernel's output against the float64 reference (in brackets: relative to the
    largest output) and the tolerance it was checked with."""
    df = read_errors(root / "results" / "04_conv2d" / ERROR_CSV)
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
    return "\n".join(lines) + f"\n\n{_run_label(df)}"


def network_table(root: Path) -> str:
    """Notebook 08's ResNet-50 convolutions as a whole network (time x count summed over the layers): per config, from
    its latest run, the conv rules against cuDNN's faster layout (fp16 for int8), then the MetaSchedule ``rules``
    space against the rules on the fp32 layers it has a row for."""
    df = read_results(root / "results" / "08_resnet50" / "results.csv")
    batches = {config: batch for config in DTYPES if (batch := recorded_batch(df, config)) is not None}
    tables = {config: per_layer(df, config, RESNET50, batch) for config, batch in batches.items()}
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
            paragraphs.append(_metaschedule_line(ms, len(tables["fp32"]), runs[-1]))
    return "\n\n".join(paragraphs + [_run_label(df[df["run_id"] == r]) for r in dict.fromkeys(runs)])


def _metaschedule_line(ms: pd.DataFrame, layers: int, run: str) -> str:
    """The MetaSchedule ``rules`` space's network time on the fp32 layers of ``ms`` (``metaschedule_per_layer``)
    against the rules' on the same layers."""
    totals = metaschedule_totals(ms)
    ms_total, rules_total = totals["ms_rules_ms"], totals["rules_ms"]
    return (f"MetaSchedule's `rules` space on the fp32 layers ({len(ms)} of {layers} layers, {ms['count'].sum()} "
            f"convolutions, best of up to {ms['trials'].max()} trials a layer, run {run}): {ms_total:.3f} ms against "
            f"the conv rules' {rules_total:.3f} ms on the same layers ({rules_total / ms_total:.3f}x the rules' "
            "speed).")


#: Generated sections besides the headline rows and the sweeps: marker -> table builder.
SECTIONS = {"gemm-padded": padded_table, "conv-winograd": winograd_table, "winograd-error": winograd_error_table,
            "resnet50-network": network_table, "tuning-throughput": throughput_table}


def _replace(text: str, start: str, end: str, body: str) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def _replace_section(text: str, name: str, table: Callable[[], str]) -> str:
    """``text`` with the generated section ``name`` rewritten by ``table()``, where ``text`` has that section."""
    start, end = _markers(name)
    return _replace(text, start, end, table()) if start in text and end in text else text


def update_readme(readme: Path, root: Path) -> bool:
    """Replace the marked sections of ``readme``; returns whether the file changed."""
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} ... {END} section")
    new = _replace(text, START, END, headline_table(root))
    for sweep in SWEEPS:
        new = _replace_section(new, sweep.marker, lambda sweep=sweep: sweep_table(root, sweep))
    for name, table in SECTIONS.items():
        new = _replace_section(new, name, lambda table=table: table(root))
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

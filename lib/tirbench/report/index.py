"""The report index: ``<out>/reports/index.html``, one line per notebook with its headline numbers (from the recorded
``results/*/results.csv``), a link to its HTML report and a thumbnail of its main plot.

    python -m tirbench.report.index            # <out> = results/ on a CUDA GPU, build/cpu-run/ without one

Links are relative (``<stem>.html``, ``../<stem>/<plot>.png``), so the index works wherever the folder is copied;
a notebook whose report or plot is missing (not run, or failed) gets a note instead of a dead link.
"""
from __future__ import annotations

import html
import math
import sys
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from tirbench.core.atomic import write_atomic
from tirbench.core.errors import OneLineError
from tirbench.core.paths import output_dir, project_root
from tirbench.bench.network import config_tables, network_totals
from tirbench.bench.networks import NOTEBOOK as NETWORKS_NOTEBOOK
from tirbench.bench.results import native_runs
from tirbench.core.machine import peak_for
from tirbench.report.headline import HEADLINES, UNITS, headline_rows
from tirbench.report.networks import networks_html
from tirbench.report.overview import percent_of_peak, summary
from tirbench.report.published import labelled_results, recorded_rows, shown_variant
from tirbench.workloads.resnet50 import RESNET50

#: Each notebook's main plot (a glob in its figure folder); another notebook shows its first PNG.
MAIN_PLOTS = {"00_overview": "roofline_*.png", "01_vector_add": "vector_add_bandwidth.png",
              "02_window_sum": "window_sum_bandwidth.png", "03_gemm": "gemm_ladder_float16.png",
              "03_gemm_shapes": "gemm_padded.png", "03_gemm_tuning": "gemm_tuning_curves.png",
              "04_conv2d": "conv2d_big_layer.png", "05_conv2d_batch1": "conv2d_resnet50_batch1.png",
              "06_conv2d_tensorcore": "conv2d_fp16.png", "07_conv2d_int8": "conv2d_int8.png",
              "08_resnet50": "resnet50_ratios.png", "09_relax_models": "relax_models_fp16.png",
              "10_networks": "networks_ratios.png"}
#: The notebook whose entry is its whole-network table (``network_totals``), not per-shape lines; and notebook 10,
#: whose entry is its five networks' table (``report.networks``).
NETWORK = "08_resnet50"
#: What a rate counted in the direct convolution's FLOPs says for a kernel that does fewer (Winograd).
FEWER_FLOPS = ("rate = the direct convolution's FLOPs / its time; a Winograd kernel does fewer FLOPs, so no % of "
               "peak: compare times")


def main_plot(out: Path, stem: str) -> Path | None:
    """The notebook's main plot in ``out/<stem>/``, or None when it has none there."""
    folder = out / stem
    found = sorted(folder.glob(MAIN_PLOTS.get(stem, "*.png"))) or sorted(folder.glob("*.png"))
    return found[0] if found else None


def _of_peak(r: pd.Series) -> str:
    """``, N% of peak`` for a headline row, or why not."""
    if str(r["variant"]).startswith("winograd_f"):
        return f"; {FEWER_FLOPS}"
    pct = percent_of_peak(peak_for(r["gpu"]), r["dtype"], r["gflops"] / r["gbps"] if r["gbps"] else math.nan,
                          r["gflops"], r["gbps"])
    return "" if math.isnan(pct) else f", {pct:.0f}% of peak"


def headline_lines(df: pd.DataFrame, stem: str) -> list[str]:
    """Per GPU, per headline shape and dtype of ``stem`` (``headline.HEADLINES``, the README's definition): its
    fastest TVM kernel (hand or tuned, saying so where a tuned best is a hand seed) against the baseline, and % of
    peak; per architecture built for (``headline_rows``: code built for an older one is named "sm_80 code on <GPU>
    (PTX)" and has no ratio to a native row)."""
    lines = []
    for gpu in sorted(df["gpu"].unique()) if len(df) else []:
        for nb, head in HEADLINES:
            if nb != stem:
                continue
            rows = headline_rows(df[df["gpu"] == gpu], head)
            ours = rows[rows["provider"].isin(["tvm", "metaschedule"])]
            for _, g in ours.groupby(["gpu_shown", "shape", "dtype"], sort=False):
                r = g.sort_values(head.metric).iloc[-1]
                vs = "" if math.isnan(r["ratio"]) else f" = {r['ratio']:.2f}x {r['baseline']}"
                lines.append(f"{r['workload']} {r['shape']} {r['dtype']}: "
                             f"{shown_variant(r['variant'], r['tuned_best'])} {r[head.metric]:,.0f} "
                             f"{UNITS[head.metric]}{vs}{_of_peak(r)} ({r['gpu_shown']}, {str(r['timestamp'])[:10]}, "
                             f"run {r['run_id']})")
    return lines


def network_html(df: pd.DataFrame) -> str:
    """Notebook 08's entry: one line, then its whole-network times per config (``network_totals``, of native runs:
    ``results.native_runs``) as a table."""
    tables = config_tables(native_runs(df), RESNET50)
    if not tables:
        return "<ul><li>no GPU results recorded yet</li></ul>"
    totals = network_totals(pd.concat([t for _, t in tables.values()], ignore_index=True))
    cells = "".join(f"<tr><td>{html.escape(config)} batch {tables[config][0]}</td><td>{t['tvm_ms']:.3f}</td>"
                    f"<td>{t['cudnn_ms']:.3f}</td><td>{t['cuDNN / TVM']:.2f}x</td>"
                    f"<td>{html.escape(t['run_id'])}</td></tr>" for config, t in totals.to_dict("index").items())
    return ("<p>ResNet-50's convolutions as one network (time x count summed over the 23 distinct layers): the conv "
            "rules against cuDNN's faster layout (int8: cuDNN fp16).</p><table><tr><th>config</th><th>rules ms</th>"
            f"<th>cuDNN ms</th><th>cuDNN / rules</th><th>run</th></tr>{cells}</table>")


def headlines(s: pd.DataFrame, stem: str, df: pd.DataFrame | None = None) -> list[str]:
    """The index's lines for ``stem``: for a notebook with ``HEADLINES``, ``headline_lines`` of its rows ``df``; for
    another, one line per shape of ``s`` (``overview.summary``): its fastest TVM kernel against the vendor."""
    if s.empty:
        return ["no GPU results recorded yet"]
    if stem.startswith("00_"):
        return [f"{s['notebook'].nunique()} notebooks, {len(s)} workload shapes; GPUs: "
                f"{', '.join(sorted(s['gpu'].unique()))}; roofline and tuning curves"]
    if any(nb == stem for nb, _ in HEADLINES):
        return headline_lines(df if df is not None else pd.DataFrame(), stem) or ["no GPU results recorded yet"]
    lines = []
    for r in s[s["notebook"] == stem].to_dict("records"):
        kind = max((k for k in ("hand", "ms") if not math.isnan(r[f"{k}_rate"])), key=lambda k: r[f"{k}_rate"],
                   default=None)
        if kind is None:
            continue
        ratio = r["hand / vendor" if kind == "hand" else "MS / vendor"]
        vs = "" if math.isnan(ratio) else f" = {ratio:.2f}x {r['vendor']}"
        lines.append(f"{r['workload']} {r['shape']} {r['dtype']}: {r[kind]} {r[f'{kind}_rate']:,.0f} {r['unit']}{vs}"
                     f" ({r['gpu_shown']}, {r['date']})")
    return lines or ["no GPU results recorded yet"]


def index_html(out: Path, root: Path) -> str:
    """The index page for the notebooks in ``root/notebooks`` and the reports and plots under ``out``."""
    recorded = labelled_results(root)
    s = summary(pd.concat([f for f in recorded.values() if len(f)], ignore_index=True)
                if any(len(f) for f in recorded.values()) else pd.DataFrame())
    rows = []
    for nb in sorted((root / "notebooks").glob("[0-9]*.ipynb")):
        stem = nb.stem
        report = out / "reports" / f"{stem}.html"
        link = (f'<a href="{quote(report.name)}">{html.escape(stem)}</a>' if report.exists()
                else f'{html.escape(stem)}<br><small>no report (not run, or it failed)</small>')
        plot = main_plot(out, stem)
        thumb = (f'<a href="../{quote(stem)}/{quote(plot.name)}"><img src="../{quote(stem)}/{quote(plot.name)}" '
                 f'alt="{html.escape(stem)}: {html.escape(plot.name)}" width="320"></a>' if plot else
                 "<small>no plot</small>")
        df = recorded_rows(recorded, stem)
        heads = (network_html(df) if stem == NETWORK else networks_html(root) if stem == NETWORKS_NOTEBOOK else
                 "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in headlines(s, stem, df)) + "</ul>")
        rows.append(f"<tr><td>{link}</td><td>{heads}</td><td>{thumb}</td></tr>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tirbench reports</title><style>"
            "body{font-family:sans-serif;margin:2em}td{vertical-align:top;padding:.5em;border-top:1px solid #ccc}"
            "td td,td th{border-top:none;padding:.1em .6em;text-align:right}"
            "ul{margin:0;padding-left:1.2em}</style></head><body>\n<h1>TensorIR GPU kernels: reports</h1>\n"
            "<p>Headline numbers: the latest recorded GPU run of each notebook's headline shapes (per GPU; the "
            "README's definition, <code>tirbench.report.headline</code>), fastest TVM kernel against the baseline."
            "</p>\n<table>\n"
            "<tr><th>notebook</th><th>headline numbers</th><th>main plot</th></tr>\n"
            + "\n".join(rows) + "\n</table>\n</body></html>\n")


def write_index(out: Path, root: Path) -> Path:
    """Write ``out/reports/index.html`` atomically; returns its path."""
    path = out / "reports" / "index.html"
    write_atomic(path, index_html(out, root).encode())
    return path


def main(argv: list[str]) -> int:
    root = project_root()
    out = Path(argv[1]) if len(argv) > 1 else output_dir(root)
    try:
        print(f"[tirbench] report index: {write_index(out, root)}")
    except OneLineError as err:  # a results CSV that is not whole
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

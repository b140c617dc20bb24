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
from tirbench.report.overview import load_results, summary
from tirbench.report.readme import HEADLINES

#: Each notebook's main plot (a glob in its figure folder); another notebook shows its first PNG.
MAIN_PLOTS = {"00_overview": "roofline_*.png", "01_vector_add": "vector_add_bandwidth.png",
              "02_window_sum": "window_sum_bandwidth.png", "03_gemm": "gemm_ladder_float16.png",
              "04_conv2d": "conv2d_big_layer.png", "05_conv2d_batch1": "conv2d_resnet50_batch1.png",
              "06_conv2d_tensorcore": "conv2d_fp16.png"}


def main_plot(out: Path, stem: str) -> Path | None:
    """The notebook's main plot in ``out/<stem>/``, or None when it has none there."""
    folder = out / stem
    found = sorted(folder.glob(MAIN_PLOTS.get(stem, "*.png"))) or sorted(folder.glob("*.png"))
    return found[0] if found else None


def headlines(s: pd.DataFrame, stem: str) -> list[str]:
    """One line per headline shape (``report.HEADLINES``; every shape for another notebook) of the notebook's latest
    run on each GPU: its fastest TVM kernel against the vendor, and % of peak."""
    if s.empty:
        return ["no GPU results recorded yet"]
    if stem.startswith("00_"):
        return [f"{s['notebook'].nunique()} notebooks, {len(s)} workload shapes; GPUs: "
                f"{', '.join(sorted(s['gpu'].unique()))}; roofline and tuning curves"]
    rows = s[s["notebook"] == stem]
    shapes = {shape for nb, head in HEADLINES if nb == stem for shape in head.shapes}
    if shapes:
        rows = rows[rows["shape"].isin(shapes)]
    lines = []
    for r in rows.to_dict("records"):
        kind = max((k for k in ("hand", "ms") if not math.isnan(r[f"{k}_rate"])), key=lambda k: r[f"{k}_rate"],
                   default=None)
        if kind is None:
            continue
        ratio, pct = r["hand / vendor" if kind == "hand" else "MS / vendor"], r["best TVM % of peak"]
        vs = "" if math.isnan(ratio) else f" = {ratio:.2f}x {r['vendor']}"
        of_peak = "" if math.isnan(pct) else f", {pct:.0f}% of peak"
        lines.append(f"{r['workload']} {r['shape']} {r['dtype']}: {r[kind]} {r[f'{kind}_rate']:,.0f} {r['unit']}{vs}"
                     f"{of_peak} ({r['gpu']}, {r['date']})")
    return lines or ["no GPU results recorded yet"]


def index_html(out: Path, root: Path) -> str:
    """The index page for the notebooks in ``root/notebooks`` and the reports and plots under ``out``."""
    s = summary(load_results(root))
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
        heads = "".join(f"<li>{html.escape(line)}</li>" for line in headlines(s, stem))
        rows.append(f"<tr><td>{link}</td><td><ul>{heads}</ul></td><td>{thumb}</td></tr>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tirbench reports</title><style>"
            "body{font-family:sans-serif;margin:2em}td{vertical-align:top;padding:.5em;border-top:1px solid #ccc}"
            "ul{margin:0;padding-left:1.2em}</style></head><body>\n<h1>TensorIR GPU kernels: reports</h1>\n"
            "<p>Headline numbers: the latest recorded GPU run of each notebook's shapes (per GPU), fastest TVM kernel "
            "against the vendor library.</p>\n<table>\n"
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

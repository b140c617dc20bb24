"""One plotting helper for every notebook: a line (or bar) per provider/variant, the vendor baseline, the peak."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import LogFormatter, ScalarFormatter

from tirbench.bench.results import ptx_rows
from tirbench.core.atomic import write_atomic
from tirbench.core.errors import OneLineError
from tirbench.core.images import palette_png

#: Providers drawn as the reference (dashed black line / dark bar).
VENDORS = ("cublas", "cublaslt", "cudnn", "torch")
#: x columns that hold positions (0, 1, 2 ...) standing for names (layers, shapes): their ticks must name them.
POSITIONAL = ("size",)


class IncompleteFigureError(OneLineError):
    """A figure that would be saved without what makes it readable (the names of a positional x axis)."""


def missing_names(fig: plt.Figure) -> list[str]:
    """The x labels of the axes of ``fig`` that are positional (``POSITIONAL``) but show numbers, not names."""
    return [ax.get_xlabel() for ax in fig.axes
            if ax.get_xlabel() in POSITIONAL
            and isinstance(ax.xaxis.get_major_formatter(), (ScalarFormatter, LogFormatter))]


def save_figure(fig: plt.Figure, path: Path | None, dpi: int = 110) -> None:
    """Save ``fig`` as a (palette) PNG at ``path`` atomically (a failed or killed run leaves the previous plot whole); nothing
    when ``path`` is None (``Session.figure_path`` with ``save`` off). IncompleteFigureError, and nothing written,
    for a positional x axis without its names (``missing_names``)."""
    if path is None:
        return
    for label in missing_names(fig):
        raise IncompleteFigureError(f"{Path(path).name}: the x axis {label!r} shows positions without their names: "
                                    f"pass xticks= to plot_providers (or set the tick labels before saving)")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    write_atomic(path, palette_png(buf.getvalue()))


def series_name(provider: str, variant: str, arch: str = "") -> str:
    """A line's or bar's name in the legend: "v7 (tvm)", and for code built for an older architecture than the GPU's
    (``arch`` given: ``results.is_ptx``) "v7 (tvm, sm_80 code as PTX)"."""
    return f"{variant} ({provider}{f', {arch} code as PTX' if arch else ''})"


def ptx_arch(rows: pd.DataFrame) -> str:
    """The architecture ``rows`` (one series) were built for where they ran as PTX (``results.ptx_rows``), else ""."""
    ptx = ptx_rows(rows)
    return str(rows.loc[ptx, "arch"].iloc[0]) if ptx.any() else ""


def plot_providers(df: pd.DataFrame, *, x: str, y: str, title: str, caption: str, ylabel: str,
                   peak: float | None = None, peak_name: str = "peak", kind: str = "line", logx: bool = False,
                   xticks: Sequence[str] | None = None, xlabel: str | None = None,
                   path: Path | None = None) -> plt.Figure:
    """Plot ``y`` against ``x`` with one line (kind="line") or one bar (kind="bar") per provider/variant.

    ``xticks`` names the positions 0, 1, 2 ... that ``x`` holds (layers, shapes); ``xlabel`` replaces the column
    name under the axis. ``peak`` draws a roof and a right-hand axis in % of it. ``caption`` (GPU, date,
    measured/recorded: ``Session.label``, which names a run of code built for an older architecture "sm_80 code on
    <GPU> (PTX)") is printed under the axes; a series of such code says so in the legend (``series_name``). The
    figure, complete, is saved to ``path`` (PNG) when given.
    """
    if kind not in ("line", "bar"):
        raise ValueError(f"kind must be 'line' or 'bar', got {kind!r}")
    if xticks is not None and not set(df[x]) <= set(range(len(xticks))):
        raise ValueError(f"xticks names {len(xticks)} positions, x={x!r} has values "
                         f"{min(df[x]):g}..{max(df[x]):g}: give one name per position")
    fig, ax = plt.subplots(figsize=(9, 5))
    if kind == "line":
        vendor_styles = iter([("black", "--", "s"), ("0.45", "-.", "^"), ("0.25", ":", "D"), ("0.6", "--", "v")])
        for (provider, variant), g in df.groupby(["provider", "variant"], sort=False):
            g = g.sort_values(x)
            color, style, marker = next(vendor_styles, ("black", "--", "s")) if provider in VENDORS else (None, "-", "o")
            ax.plot(g[x], g[y], marker=marker, linestyle=style, color=color,
                    label=series_name(provider, variant, ptx_arch(g)))
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(x if xlabel is None else xlabel)
        if xticks is not None:
            ax.set_xticks(range(len(xticks)), list(xticks), rotation=20, ha="right")
    else:
        names = [series_name(r["provider"], r["variant"], ptx_arch(df.loc[[i]])) for i, r in df.iterrows()]
        colors = ["0.25" if p in VENDORS else f"C{i % 10}" for i, p in enumerate(df["provider"])]
        ax.bar(names, df[y], color=colors)
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        vendor_rows = df[df["provider"].isin(VENDORS)]
        if not vendor_rows.empty:
            ax.axhline(vendor_rows[y].max(), color="black", linestyle="--", linewidth=1,
                       label=f"{series_name(vendor_rows['provider'].iloc[0], vendor_rows['variant'].iloc[0])}")
    if peak:
        ax.axhline(peak, color="tab:red", linestyle=":", linewidth=1.5, label=f"{peak_name} ({peak:g})")
        sec = ax.secondary_yaxis("right", functions=(lambda v: v / peak * 100, lambda p: p * peak / 100))
        sec.set_ylabel(f"% of {peak_name}")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.text(0.01, 0.005, caption, fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save_figure(fig, path)
    return fig

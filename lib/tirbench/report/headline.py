"""Each notebook's headline rows and what they are compared with: one definition for the README (``readme``) and the
report index (``index``).

``HEADLINES`` names, per notebook, the shapes (and variants) shown and the baseline each row is divided by;
``headline_rows`` takes them from the latest run that has them (per architecture built for: a run of code built for an
older architecture than its GPU's, PTX, is shown beside the native one, never instead of it), with the baseline's name
and the ratio (to a baseline built for the same architecture on the same GPU only); ``headline_sentence`` says in words
what ``HEADLINES`` holds.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tirbench.bench.plots import VENDORS
from tirbench.bench.results import gpu_labels, latest_run_where, ptx_rows
from tirbench.report.published import seed_rows_first


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
    ("03_gemm_shapes", Headline(("4096x4096x4096", "1024x1024x1024"), "cublas_{dtype}", "gflops",
                                ("v5_best", "v7_best", "v8_best", "v9_best", "v9_best_fp16_c", "cublas_float32",
                                 "cublas_float16"))),
    ("03_gemm_tuning", Headline(("4096x4096x4096", "1024x1024x1024"), "cublas_{dtype}", "gflops")),
    ("04_conv2d", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("05_conv2d_batch1", Headline(("1x512x7x7x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("06_conv2d_tensorcore", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
    ("07_conv2d_int8", Headline(("256x256x14x14x512x3x3x1x1",), "fastest:cudnn", "gflops")),
]
UNITS = {"gbps": "GB/s", "gflops": "GFLOP/s"}
#: What each unit is, in the sentence above the table.
UNIT_MEANING = {"gbps": "GB/s of the bytes that must move (each input read once, each output written once)",
                "gflops": "GFLOP/s (for a convolution: the direct convolution's FLOPs / time, so a Winograd kernel, "
                          "cuDNN's or notebook 04's `winograd_f*`, can show more than the FP32 peak: compare times)"}


def _selected(df: pd.DataFrame, head: Headline) -> pd.Series:
    sel = df["shape"].astype(str).isin(head.shapes)
    return sel & df["variant"].isin(head.variants) if head.variants is not None else sel


def baseline_of(rows: pd.DataFrame, head: Headline, r: pd.Series) -> tuple[str, float]:
    """The name and rate of the row that ``r`` (one of ``rows``, runs' headline rows) is compared with, of ``r``'s run;
    NaN when the run has no such row. Only rows built for ``r``'s architecture on ``r``'s GPU are baselines (a PTX row
    of a run built for an older architecture is never divided by the vendor's native row)."""
    rows = rows[(rows["run_id"] == r["run_id"]) & (rows["gpu"] == r["gpu"]) & (_arch(rows) == r.get("arch", ""))]
    same = rows[(rows["dtype"] == r["dtype"]) & (rows["shape"].astype(str) == str(r["shape"]))]
    if head.baseline.startswith("fastest:"):
        provider = head.baseline.split(":", 1)[1]
        found = same[same["provider"] == provider]
        if found.empty:  # the vendor has no kernel in this dtype (int8 convolution): its fastest in any dtype
            found = rows[(rows["shape"].astype(str) == str(r["shape"])) & (rows["provider"] == provider)]
        found = found.sort_values(head.metric)
        return (found["variant"].iloc[-1], float(found[head.metric].iloc[-1])) if len(found) else (head.baseline,
                                                                                                    float("nan"))
    name = head.baseline.format(dtype=r["dtype"])
    found = same.loc[same["variant"] == name, head.metric]
    return name, float(found.iloc[0]) if len(found) else float("nan")


def _arch(df: pd.DataFrame) -> pd.Series:
    """Each row's ``arch`` ("" for a frame without the column)."""
    return df["arch"] if "arch" in df else pd.Series("", index=df.index)


def run_builds(df: pd.DataFrame) -> pd.Series:
    """Per row of ``df``, the build of its run: "" for a run with no PTX row (``results.ptx_rows``), else the
    architecture its PTX rows were built for."""
    ptx = ptx_rows(df)
    built = dict(zip(df.loc[ptx, "run_id"], _arch(df)[ptx]))
    return df["run_id"].map(lambda run: str(built.get(run, "")))


def headline_rows(df: pd.DataFrame, head: Headline) -> pd.DataFrame:
    """The rows of ``head`` in the latest run of ``df`` (one notebook's rows) that has them (a row of its own, not only
    the vendor's: a run built for an architecture without a notebook's databases measures cuBLAS alone), then in the latest such
    run of each older architecture built for (``run_builds``: PTX on a newer GPU), each in the run's order with a
    search's best beside its seed-best row, each with ``baseline`` (the name of the row it is compared with),
    ``ratio`` (its rate / the baseline's; NaN where the run has no baseline row built for the same architecture on
    the same GPU) and ``gpu_shown`` (``results.gpu_label``)."""
    if df.empty:
        return df.assign(baseline=[], ratio=[], gpu_shown=[])
    builds = run_builds(df)
    parts = []
    for build in sorted(set(builds), key=lambda b: (b != "", b)):
        part = df[builds == build]
        run = latest_run_where(part, _selected(part, head) & ~part["provider"].isin(VENDORS))
        parts.append(seed_rows_first(run[_selected(run, head)]) if len(run) else run)
    rows = pd.concat(parts)
    bases = [baseline_of(rows, head, r) for _, r in rows.iterrows()]
    return rows.assign(baseline=[name for name, _ in bases],
                       ratio=[r / base for r, (_, base) in zip(rows[head.metric], bases)], gpu_shown=gpu_labels(rows))


def _baseline_words(baseline: str) -> str:
    if baseline.startswith("fastest:"):
        provider = baseline.split(":", 1)[1]
        return (f"the fastest {provider} row of the same shape and dtype (of the shape in any dtype where {provider} "
                "has none in the row's: torch has no int8 cuDNN convolution, so int8 rows are compared with fp16)")
    return f"`{baseline.replace('{dtype}', '<dtype>')}`" + (" of the row's dtype" if "{dtype}" in baseline else "")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def headline_sentence() -> str:
    """What ``HEADLINES`` holds, in words: per notebook its shapes, each baseline and the notebooks compared with it,
    and what each rate is."""
    shown = [f"`{nb}` at {_listed(list(head.shapes))}" + (f" ({', '.join(head.variants)})" if head.variants else "")
             for nb, head in HEADLINES]
    by_baseline: dict[str, list[str]] = {}
    by_metric: dict[str, list[str]] = {}
    for nb, head in HEADLINES:
        for key, groups in ((head.baseline, by_baseline), (head.metric, by_metric)):
            names = groups.setdefault(key, [])
            if nb not in names:
                names.append(nb)
    against = [f"{_listed([f'`{nb}`' for nb in nbs])} against {_baseline_words(b)}" for b, nbs in by_baseline.items()]
    units = [f"{UNIT_MEANING[m]} for {_listed([f'`{nb}`' for nb in nbs])}" for m, nbs in by_metric.items()]
    return ("Each notebook's headline rows, from its latest GPU run that measured them: " + "; ".join(shown)
            + ". Each row's \"vs baseline\" divides its rate by another row's of the same run: "
            + "; ".join(against) + ". \"rate\" is " + "; ".join(units) + ".")

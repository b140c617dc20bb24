"""What notebook 09 records and shows of its models (``compile.models``): a row per verified variant in
``results/09_relax_models/results.csv`` as every notebook records its kernels (workload = the model, shape = the
batch, the model's FLOPs and the bytes that must move: its weights, input and output), each variant's check in
``checks.csv`` (verified or not: a variant that fails its check has no timed row) and the time split of TVM's
variants in ``time_split.csv``; the tool's rows (``tools/gpu-checks/relax_models.py``, ``TOOL_CSV``); and where no
GPU is, the recorded rows (``recorded``: the notebook's latest run per config, else the tool's, labelled so), a
table and a bar chart per config.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import tvm

from tirbench.bench.harness import Measurement
from tirbench.bench.results import COLUMNS, RUN_FIELDS, read_results
from tirbench.compile.models import CONFIGS, TORCH_LAYOUTS, ModelConfig, VariantResult, tolerance
from tirbench.workloads.base import Workload

NOTEBOOK = "09_relax_models"
#: The tool's rows, version 2 (``layout`` and ``flush`` added); version 1, ``relax_models.csv``, keeps the first runs.
TOOL_CSV = Path("results") / "kernel" / "relax_models_v2.csv"
TOOL_COLUMNS = ["run_id", "timestamp", "gpu", "tvm_version", "torch_version", "model", "batch", "dtype", "layout",
                "flush", "variant", "median_ms", "max_rel_diff", "verified", "convs_dispatched", "convs", "transposes"]
#: The notebook's side tables, beside its results.csv.
CHECKS, SPLITS = "checks.csv", "time_split.csv"
CHECK_COLUMNS = [*RUN_FIELDS, "model", "batch", "dtype", "layout", "variant", "provider", "max_rel_diff", "tolerance",
                 "verified", "error", "convs_dispatched", "convs", "transposes"]
SPLIT_COLUMNS = [*RUN_FIELDS, "model", "batch", "dtype", "variant", "provider", "kernels", "conv_ms", "other_ms",
                 "model_ms"]
#: The order variants are shown in, and each provider's colour.
VARIANTS = ("tvm_rules", "metaschedule", "tvm_default", "torch_compile", "torch_eager_channels_last", "torch_eager")
COLOURS = {"tvm": "tab:blue", "metaschedule": "tab:orange", "torch": "0.55"}
#: A panel whose slowest variant takes over this many times its fastest's time has a log scale.
LOG_ABOVE = 8


def provider_of(variant: str) -> str:
    """The ``provider`` of a variant's rows: torch's variants ``torch``, MetaSchedule's ``metaschedule``, ``tvm``."""
    return "torch" if variant in TORCH_LAYOUTS else "metaschedule" if variant == "metaschedule" else "tvm"


def config_of(dtype: str) -> ModelConfig:
    """The notebook's config of ``dtype`` (``models.CONFIGS``)."""
    return next(c for c in CONFIGS.values() if c.dtype == dtype)


# -- rows of a run -------------------------------------------------------------------------------------------------
def model_workload(model: str, config: ModelConfig, flops: int, params: int, out_elements: int) -> Workload:
    """The model as a results row's workload: named after the model, shape its batch, ``flops`` one call's, bytes
    its ``params`` in the config's dtype plus its float32 input and output (the exported model's). It runs through
    Relax: its ``mod`` is empty."""
    itemsize = np.dtype(config.dtype).itemsize
    inputs = config.batch * 3 * 224 * 224
    return Workload(model, {"n": config.batch}, config.dtype, tvm.IRModule(), lambda rng: [], lambda *a: None,
                    (config.batch, out_elements // config.batch), config.dtype, flops,
                    params * itemsize + 4 * (inputs + out_elements), {"rtol": config.tolerance, "atol": 0.0})


def measurement(result: VariantResult, workload: Workload) -> Measurement:
    """A verified, timed variant as the ``Measurement`` a session records (MetaSchedule's best is the search's: its
    default space has no seeds)."""
    if result.timing is None:
        raise ValueError(f"{result.model} {result.variant}: not verified and timed in this run, so it gets no row")
    return Measurement(workload, result.variant, result.provider, result.timing, verified=True,
                       tuned_best="search" if result.provider == "metaschedule" else "")


def check_row(result: VariantResult) -> dict[str, object]:
    """``CHECK_COLUMNS`` (but the run's) of a variant's check."""
    return {"model": result.model, "batch": result.config.batch, "dtype": result.config.dtype,
            "layout": result.layout, "variant": result.variant, "provider": result.provider,
            "max_rel_diff": result.max_rel_diff, "tolerance": result.config.tolerance, "verified": result.verified,
            "error": result.error, "convs_dispatched": result.convs_dispatched, "convs": result.convs,
            "transposes": result.transposes}


def split_row(result: VariantResult) -> dict[str, object] | None:
    """``SPLIT_COLUMNS`` (but the run's) of a TVM variant's time split; None where it has none."""
    if result.split is None or result.timing is None:
        return None
    return {"model": result.model, "batch": result.config.batch, "dtype": result.config.dtype,
            "variant": result.variant, "provider": result.provider, **result.split,
            "model_ms": result.timing.median_ms}


def tool_row(result: VariantResult, run: Mapping[str, object]) -> dict[str, object]:
    """The tool's row (``TOOL_COLUMNS``) of a variant; ``run``: its run_id, timestamp, gpu, versions and flush."""
    ms = result.timing.median_ms if result.timing is not None else float("nan")
    return {**run, "model": result.model, "batch": result.config.batch, "dtype": result.config.dtype,
            "layout": result.layout, "variant": result.variant, "median_ms": round(ms, 4),
            "max_rel_diff": result.max_rel_diff, "verified": result.verified,
            "convs_dispatched": result.convs_dispatched, "convs": result.convs, "transposes": result.transposes}


# -- what was recorded ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recorded:
    """Recorded rows to show: ``rows`` in the results schema, ``checks`` and ``splits`` as ``CHECK_COLUMNS`` and
    ``SPLIT_COLUMNS``, and ``source``: the file (and tool) they come from."""

    rows: pd.DataFrame
    checks: pd.DataFrame
    splits: pd.DataFrame
    source: str
    measured: bool = False

    def label(self, dtype: str | None = None) -> str:
        """A caption: "recorded run" and where from (or "measured" for this run's), each run (of ``dtype``'s rows)
        with its GPU and date."""
        rows = self.checks if self.rows.empty else self.rows
        rows = rows if dtype is None else rows[rows["dtype"] == dtype]
        if rows.empty:
            return "no GPU run recorded yet"
        if self.measured:
            return f"measured in this run ({self.source}): {_runs(rows)}"
        return f"recorded run{'s' * (rows['run_id'].nunique() > 1)} of {self.source}: {_runs(rows)}"


def from_results(results: list[VariantResult], run: Mapping[str, object], source: str) -> Recorded:
    """This run's ``results`` as ``Recorded`` (``run``: its ``RUN_FIELDS``; ``source``: what it measured with): a row
    per timed variant, a check per variant, a split per TVM variant that has one."""
    rows = pd.DataFrame([{**run, "notebook": NOTEBOOK, "workload": r.model, "shape": str(r.config.batch),
                          "dtype": r.config.dtype, "variant": r.variant, "provider": r.provider,
                          "median_ms": r.timing.median_ms, "verified": True}
                         for r in results if r.timing is not None], columns=COLUMNS)
    checks = pd.DataFrame([{**run, **check_row(r)} for r in results], columns=CHECK_COLUMNS)
    splits = pd.DataFrame([{**run, **row} for r in results if (row := split_row(r))], columns=SPLIT_COLUMNS)
    return Recorded(rows, checks, splits, source, measured=True)


def _latest_per(df: pd.DataFrame, model: str) -> pd.DataFrame:
    """The rows of each model's and dtype's latest run (``model``: the column naming the model; a run may measure
    one model or one config: ``-p configs '[fp16]'``)."""
    if df.empty:
        return df
    last = df.sort_values("timestamp", kind="stable").groupby([model, "dtype"])["run_id"].last()
    keep = [last[(m, d)] == r for m, d, r in zip(df[model], df["dtype"], df["run_id"])]
    return df[keep].reset_index(drop=True)


def _same_runs(df: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` (a side table) of the runs, models and dtypes of ``rows`` (results rows)."""
    keys = set(zip(rows["run_id"], rows["workload"], rows["dtype"]))
    return df[[k in keys for k in zip(df["run_id"], df["model"], df["dtype"])]].reset_index(drop=True)


def _runs(df: pd.DataFrame) -> str:
    """Each run of ``df``: what it measured (dtypes), its id, GPU and date."""
    runs = df.drop_duplicates("run_id")
    return "; ".join(f"{'/'.join(sorted(set(df.loc[df['run_id'] == r.run_id, 'dtype'])))} run {r.run_id} "
                     f"({r.gpu}, {str(r.timestamp)[:10]})" for r in runs.itertuples())


def recorded(root: Path) -> Recorded:
    """The notebook's recorded rows (each dtype's latest run, with its checks and splits); where it has none yet,
    the tool's (``from_tool``)."""
    folder = root / "results" / NOTEBOOK
    rows = _latest_per(read_results(folder / "results.csv"), "workload")
    if rows.empty:
        return from_tool(read_results(root / TOOL_CSV, TOOL_COLUMNS))
    checks, splits = (_same_runs(read_results(folder / name, columns), rows)
                      for name, columns in ((CHECKS, CHECK_COLUMNS), (SPLITS, SPLIT_COLUMNS)))
    return Recorded(rows, checks, splits, f"results/{NOTEBOOK}/results.csv")


def from_tool(df: pd.DataFrame) -> Recorded:
    """The tool's rows (``TOOL_COLUMNS``) as ``Recorded``: each model's and dtype's latest run, TVM's variants in the layout of
    the notebook's config of that dtype (``config_of``), every PyTorch variant; a timed row per verified variant,
    a check per variant, no splits (the tool does not measure them)."""
    df = _latest_per(df, "model")
    if len(df):
        keep = df["variant"].isin(list(TORCH_LAYOUTS)) | (df["layout"] == df["dtype"].map(lambda d: config_of(d).layout))
        df = df[keep].reset_index(drop=True)
    provider = df["variant"].map(provider_of)
    checks = df.assign(provider=provider, tolerance=df["dtype"].map(tolerance), error="", driver="")
    timed = checks[checks["verified"].astype(bool) & checks["median_ms"].notna()]
    rows = pd.DataFrame({c: timed[c] if c in timed else "" for c in COLUMNS}).assign(
        notebook=NOTEBOOK, workload=timed["model"], shape=timed["batch"].astype(str), trials=0,
        verified=True, gflops=math.nan, gbps=math.nan, p20_ms=math.nan, p80_ms=math.nan, repeats=math.nan)
    return Recorded(rows.reset_index(drop=True), checks[CHECK_COLUMNS].reset_index(drop=True),
                    pd.DataFrame(columns=SPLIT_COLUMNS), f"tools/gpu-checks/relax_models.py ({TOOL_CSV.as_posix()})")


# -- tables and plots ----------------------------------------------------------------------------------------------
def times_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, dtype and batch: each variant's median ms (``VARIANTS`` order), the fastest PyTorch variant, and
    its time over the conv rules' (``torch / rules``, above 1: the rules' model is faster)."""
    if rows.empty:
        return pd.DataFrame()
    table = rows.pivot_table(index=["workload", "dtype", "shape"], columns="variant", values="median_ms",
                             aggfunc="first", sort=False)
    table = table[[v for v in VARIANTS if v in table.columns]]
    torch = table[[v for v in TORCH_LAYOUTS if v in table.columns]]
    table["fastest torch"] = torch.apply(lambda r: r.idxmin() if r.notna().any() else "", axis=1) \
        if torch.shape[1] else ""
    if "tvm_rules" in table and torch.shape[1]:
        table["torch / rules"] = torch.min(axis=1) / table["tvm_rules"]
    return table.rename_axis(index=["model", "dtype", "batch"], columns=None).reset_index()


def checks_table(checks: pd.DataFrame) -> pd.DataFrame:
    """Each variant's check: its difference from the float32 model against the tolerance, whether it passed (or
    its error), and for TVM's the convs the rules took (of all) and the transposes left in the model."""
    out = checks[["model", "dtype", "batch", "layout", "variant", "max_rel_diff", "tolerance", "verified",
                  "error"]].copy()
    rules = checks["variant"] == "tvm_rules"
    out["convs to the rules"] = np.where(rules, checks["convs_dispatched"].astype(str) + " of "
                                         + checks["convs"].astype(str), "")
    out["transposes"] = np.where(checks["provider"] != "torch", checks["transposes"].astype(str), "")
    out["error"] = out["error"].fillna("")
    return out.reset_index(drop=True)


def split_table(splits: pd.DataFrame) -> pd.DataFrame:
    """Where each TVM variant's time goes (``model_builds.kernel_split``): conv kernels against the rest, each
    kernel between CUDA events (no flush between them), the conv kernels' share, and the model's timed call (L2
    flushed before it), and the kernels' sum against that call (``kernels / call``: above 1 where the events cost
    each kernel its overlap with the next one's start, which a model of many small kernels shows)."""
    if splits.empty:
        return pd.DataFrame()
    out = splits[["model", "dtype", "batch", "variant", "kernels", "conv_ms", "other_ms", "model_ms"]].copy()
    out["conv share %"] = 100 * out["conv_ms"] / (out["conv_ms"] + out["other_ms"])
    out["kernels / call"] = (out["conv_ms"] + out["other_ms"]) / out["model_ms"]
    return out.round({"conv_ms": 3, "other_ms": 3, "model_ms": 3, "conv share %": 1,
                      "kernels / call": 2}).reset_index(drop=True)


def _failure(check: pd.Series) -> str:
    """Why a variant failed its check: its error, or its difference against the tolerance."""
    error = check["error"] if isinstance(check["error"], str) else ""
    return error or f"rel. diff {check['max_rel_diff']:.3g} > {check['tolerance']:.3g}"


def plot_config(rows: pd.DataFrame, checks: pd.DataFrame, dtype: str, caption: str) -> plt.Figure:
    """One config's bar chart: a panel per model, a bar per timed variant (its median ms; a log scale where the
    slowest takes over ``LOG_ABOVE`` times the fastest's time), and each variant that failed its check named where
    its bar would be."""
    rows = rows[rows["dtype"] == dtype]
    checks = checks[(checks["dtype"] == dtype) & ~checks["verified"].astype(bool)] if len(checks) else checks
    models = list(dict.fromkeys(rows["workload"]))
    fig, axes = plt.subplots(1, max(len(models), 1), figsize=(5.2 * max(len(models), 1), 3.4), squeeze=False)
    for ax, model in zip(axes.flat, models):
        part = rows[rows["workload"] == model].set_index("variant")
        failed = checks[checks["model"] == model].drop_duplicates("variant").set_index("variant")
        shown = [v for v in VARIANTS if v in part.index or v in failed.index]
        ms = part["median_ms"].astype(float)
        for y, variant in enumerate(shown):
            if variant in part.index:
                ax.barh(y, ms[variant], color=COLOURS[provider_of(variant)])
                ax.text(ms[variant], y, f" {ms[variant]:.3f}", va="center", fontsize=8)
        if ms.max() > LOG_ABOVE * ms.min():
            ax.set_xscale("log")
            ax.set_xlim(ms.min() / 2, ms.max() * 4)
        else:
            ax.set_xlim(0, ms.max() * 1.3)
        for y, variant in enumerate(shown):
            if variant not in part.index:
                ax.text(ax.get_xlim()[0], y, f" failed its check: {_failure(failed.loc[variant])}", va="center",
                        fontsize=8, color="tab:red")
        ax.set_yticks(range(len(shown)), shown, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{model}, {dtype}, batch {part['shape'].iloc[0]}", fontsize=9)
        ax.set_xlabel("ms per call (median, L2 flushed before each)", fontsize=8)
        ax.grid(True, axis="x", alpha=0.3)
    lines = textwrap.wrap(caption, 150)
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0.02 + 0.035 * len(lines), 1, 1))
    return fig

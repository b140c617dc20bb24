"""A network's convolutions as one network (notebook 08: ResNet-50; ``workloads.networks`` has four more): per
layer, the conv rules' kernel (variant ``rules``) beside cuDNN's faster layout, and the network's time, the sum over
layers of time x count, from a results frame. Each config's rows come from the latest run that measured it; int8 is
compared with cuDNN's fp16 rows of the same shape (torch has no int8 cuDNN convolution)."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from tirbench.bench.results import latest_run_where
from tirbench.workloads.layers import ConvLayer

DTYPES = {"fp32": "float32", "fp16": "float16", "int8": "int8"}   # config -> dtype of its TVM rows
CUDNN_DTYPES = {"fp32": "float32", "fp16": "float16", "int8": "float16"}   # config -> dtype of its cuDNN rows
COLUMNS = ["run", "layer", "count", "tvm_ms", "cudnn_ms", "run_id"]
MS_COLUMNS = ["layer", "count", "trials", "rules_ms", "ms_rules_ms", "cudnn_ms"]


def layer_shape(layer: ConvLayer, batch: int) -> str:
    """The ``shape`` column of ``layer``'s rows at ``batch`` (that of its conv2d and conv2d_int8 workloads; a grouped,
    dilated or per-axis layer's with its suffix, ``_g32``...)."""
    return layer.shape_name(batch)


def _rules_rows(df: pd.DataFrame, config: str) -> pd.Series:
    """Where ``df`` holds the conv rules' rows of ``config``."""
    return (df["variant"] == "rules") & (df["dtype"] == DTYPES[config])


def recorded_batch(df: pd.DataFrame, config: str) -> int | None:
    """The batch of the latest run in ``df`` that measured ``config`` (its rules rows' first size), None if none."""
    run = latest_run_where(df, _rules_rows(df, config))
    rows = run[_rules_rows(run, config)]
    return int(rows["shape"].iloc[0].split("x")[0]) if len(rows) else None


def measured_with(run: pd.DataFrame, config: str) -> pd.DataFrame:
    """The cuDNN rows of one run (in the order they were recorded) that ``config``'s measurement of each layer took:
    those following that config's ``rules`` row of the same shape, before the next ``rules`` row. Runs before
    2026-11-27 measured cuDNN fp16 once per config (fp16 and int8): each config is compared with its own measurement,
    never with the faster of the two. Notebook 08 now measures it once per run and layer, with the first of the two
    configs: a config without cuDNN rows of its own for a shape takes that one measurement."""
    rules = run["variant"] == "rules"
    owner_dtype = run["dtype"].where(rules).ffill()
    owner_shape = run["shape"].where(rules).ffill()
    cudnn = (run["provider"] == "cudnn") & (run["dtype"] == CUDNN_DTYPES[config]) & (owner_shape == run["shape"])
    own = run[cudnn & (owner_dtype == DTYPES[config])]
    return pd.concat([own, run[cudnn & ~run["shape"].isin(own["shape"])]])


def per_layer(df: pd.DataFrame, config: str, net: Iterable[ConvLayer], batch: int) -> pd.DataFrame:
    """``config``'s rows of the layers ``net`` at ``batch`` (``COLUMNS``): of the latest run in ``df`` that measured
    it (a run may measure some of the configs), the rules' time and the faster layout of cuDNN's measurement taken
    with it (``measured_with``) side by side, per layer."""
    layers = {layer_shape(layer, batch): layer for layer in net}
    run = latest_run_where(df, _rules_rows(df, config) & df["shape"].isin(layers))
    ours = run[_rules_rows(run, config) & run["shape"].isin(layers)]
    fastest = measured_with(run, config).groupby("shape")["median_ms"].min()
    rows = [{"run": config, "layer": layers[s].name, "count": layers[s].count, "tvm_ms": t,
             "cudnn_ms": fastest.get(s, np.nan), "run_id": r}
            for s, t, r in zip(ours["shape"], ours["median_ms"], ours["run_id"])]
    return pd.DataFrame(rows, columns=COLUMNS)


def config_tables(df: pd.DataFrame, net: Iterable[ConvLayer]) -> dict[str, tuple[int, pd.DataFrame]]:
    """Per config that ``df`` has a run of: its batch (``recorded_batch``) and ``per_layer`` table of ``net``."""
    batches = {config: batch for config in DTYPES if (batch := recorded_batch(df, config)) is not None}
    return {config: (batch, per_layer(df, config, net, batch)) for config, batch in batches.items()}


def network_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per run of ``table`` (``per_layer``'s rows), in its order: layers, convolutions (the counts' sum), the
    network's TVM and cuDNN times (time x count summed over its layers), cuDNN / TVM, and the run_id."""
    weighted = table.assign(tvm_ms=table["tvm_ms"] * table["count"], cudnn_ms=table["cudnn_ms"] * table["count"])
    totals = weighted.groupby("run", sort=False).agg(
        layers=("layer", "size"), convolutions=("count", "sum"), tvm_ms=("tvm_ms", "sum"),
        cudnn_ms=("cudnn_ms", "sum"), run_id=("run_id", "first"))
    totals.insert(4, "cuDNN / TVM", totals["cudnn_ms"] / totals["tvm_ms"])
    return totals


def _metaschedule_rows(df: pd.DataFrame) -> pd.Series:
    """Where ``df`` holds the fp32 layers' best of the MetaSchedule ``rules`` space."""
    return (df["variant"] == "metaschedule_rules") & (df["dtype"] == "float32")


def metaschedule_run(df: pd.DataFrame) -> pd.DataFrame:
    """All rows of the latest run in ``df`` with a ``metaschedule_rules`` row (empty if none has one)."""
    return latest_run_where(df, _metaschedule_rows(df))


def metaschedule_per_layer(df: pd.DataFrame, fp32: pd.DataFrame, net: Iterable[ConvLayer],
                           batch: int) -> pd.DataFrame:
    """The layers of ``fp32`` (``per_layer``'s fp32 rows of ``net`` at ``batch``) with a ``metaschedule_rules`` row
    in the latest run of ``df`` that has one (``MS_COLUMNS``): its trials and time beside the rules' and cuDNN's."""
    shapes = {layer.name: layer_shape(layer, batch) for layer in net}
    run = metaschedule_run(df)
    ms = run[_metaschedule_rows(run)].set_index("shape")
    rows = []
    for r in fp32.to_dict("records"):
        shape = shapes[r["layer"]]
        if shape in ms.index:
            rows.append({"layer": r["layer"], "count": r["count"], "trials": int(ms.loc[shape, "trials"]),
                         "rules_ms": r["tvm_ms"], "ms_rules_ms": ms.loc[shape, "median_ms"], "cudnn_ms": r["cudnn_ms"]})
    return pd.DataFrame(rows, columns=MS_COLUMNS)


def metaschedule_totals(ms: pd.DataFrame) -> dict[str, float]:
    """The network's times over the layers of ``ms`` (``metaschedule_per_layer``), time x count summed: the rules',
    the MetaSchedule ``rules`` space's and cuDNN's."""
    return {c: float((ms[c] * ms["count"]).sum()) for c in ("rules_ms", "ms_rules_ms", "cudnn_ms")}

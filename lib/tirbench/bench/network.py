"""A network's convolutions as one network (notebook 08: ResNet-50; notebook 10: the five of ``workloads.networks``):
each config's workload of a layer (``layer_workload``), and from a results frame per layer the conv rules' kernel
(variant ``rules``) beside cuDNN's faster layout, and the network's time, the sum over layers of time x count. Each
config's rows come from the latest run that measured it; int8 is compared with cuDNN's fp16 rows of the same shape
(torch has no int8 cuDNN convolution). ``network_summary``: one run's whole networks, the rows of notebook 10's
``networks.csv``; ``depthwise_bandwidth``: depthwise layers judged by the HBM bandwidth they reach as well."""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tirbench.bench.results import latest_run_where, native_runs
from tirbench.workloads.base import Workload
from tirbench.workloads.conv2d_int8 import conv2d_int8
from tirbench.workloads.layers import ConvLayer

DTYPES = {"fp32": "float32", "fp16": "float16", "int8": "int8"}   # config -> dtype of its TVM rows
CUDNN_DTYPES = {"fp32": "float32", "fp16": "float16", "int8": "float16"}   # config -> dtype of its cuDNN rows
LAYOUTS = {"fp32": "NCHW", "fp16": "NHWC", "int8": "NCHW32"}   # config -> layout of its TVM workload
#: The batch each config is measured at by default (notebooks 08 and 10): fp32 batch 1, fp16 and int8 batch 32.
BATCHES = {"fp32": 1, "fp16": 32, "int8": 32}
COLUMNS = ["run", "layer", "count", "tvm_ms", "cudnn_ms", "run_id"]
MS_COLUMNS = ["layer", "count", "trials", "rules_ms", "ms_rules_ms", "cudnn_ms"]
#: The columns of notebook 10's ``networks.csv`` (``network_summary``).
NETWORKS_COLUMNS = ["run_id", "gpu", "network", "config", "layers", "convolutions", "tvm_ms", "cudnn_ms",
                    "worst_layer", "worst_ratio"]
BANDWIDTH_COLUMNS = ["layer", "count", "tvm_ms", "tvm_gbps", "tvm_hbm", "cudnn_ms", "cudnn_gbps", "cudnn_hbm"]


def _require_config(config: str) -> None:
    if config not in DTYPES:
        raise ValueError(f"config {config!r}: expected one of {', '.join(DTYPES)}")


def layer_workload(layer: ConvLayer, config: str, batch: int) -> Workload:
    """``config``'s workload of ``layer`` at ``batch``: fp32 a float32 NCHW ``conv2d``, fp16 a float16 NHWC one, int8
    ``conv2d_int8`` (NC/32HW32, bias + ReLU + requantisation fused); a one-line ValueError where the config cannot
    state the layer (int8: a grouped layer whose channels are not multiples of 32)."""
    _require_config(config)
    if config == "int8":
        return conv2d_int8(**layer.conv2d_kwargs(batch), relu=True, residual=False)
    return layer.workload(batch, LAYOUTS[config], DTYPES[config])


def cudnn_workload(layer: ConvLayer, config: str, batch: int) -> Workload:
    """The NCHW ``conv2d`` that cuDNN runs for ``config`` (float16 for int8) of ``layer`` at ``batch``."""
    _require_config(config)
    return layer.workload(batch, "NCHW", CUDNN_DTYPES[config])


def is_depthwise(layer: ConvLayer) -> bool:
    """A depthwise layer: one group per input channel."""
    return layer.groups == layer.c > 1


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


def verified_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` whose kernel was verified in its run (``verified`` True)."""
    return df[df["verified"].astype(str).isin(["True", "true"])] if len(df) else df


def network_summary(run: pd.DataFrame, nets: Mapping[str, Sequence[ConvLayer]],
                    batches: Mapping[str, int]) -> list[dict[str, object]]:
    """The rows of ``networks.csv`` (``NETWORKS_COLUMNS``) from one run's rows: per network of ``nets`` (name -> its
    layers) and config of ``batches`` (config -> batch) the run measured, over the layers with a verified rules row
    and a verified cuDNN row (``per_layer``): how many, their convolutions (counts summed), the network's TVM and
    cuDNN times (time x count summed), and the worst layer: the lowest cuDNN time / TVM time, and that ratio.
    Unverified rows count for nothing; a run built for an older architecture gives no row (its kernels ran as PTX:
    not compared with cuDNN, ``results.native_runs``)."""
    rows, out = native_runs(verified_rows(run)), []
    for name, net in nets.items():
        for config, batch in batches.items():
            table = per_layer(rows, config, net, batch).dropna(subset=["tvm_ms", "cudnn_ms"]).reset_index(drop=True)
            if table.empty:
                continue
            ratio = table["cudnn_ms"] / table["tvm_ms"]
            worst = int(ratio.idxmin())
            run_id = table["run_id"].iloc[0]
            out.append({"run_id": run_id, "gpu": rows.loc[rows["run_id"] == run_id, "gpu"].iloc[0], "network": name,
                        "config": config, "layers": len(table), "convolutions": int(table["count"].sum()),
                        "tvm_ms": round(float((table["tvm_ms"] * table["count"]).sum()), 6),
                        "cudnn_ms": round(float((table["cudnn_ms"] * table["count"]).sum()), 6),
                        "worst_layer": table["layer"].iloc[worst], "worst_ratio": round(float(ratio[worst]), 4)})
    return out


def depthwise_bandwidth(df: pd.DataFrame, config: str, net: Iterable[ConvLayer], batch: int,
                        hbm_tbps: float | None) -> pd.DataFrame:
    """The depthwise layers of ``net`` in ``config``'s latest run of ``df`` (``BANDWIDTH_COLUMNS``): memory-bound, so
    judged by the bandwidth they reach as well as by cuDNN's time. Per layer, the rules' kernel and cuDNN's faster
    layout (the measurement taken with it, ``measured_with``): time, GB/s (the workload's bytes, input, filter and
    output once each, over the time) and that share of ``hbm_tbps`` (the GPU's HBM bandwidth, TB/s; None: NaN)."""
    layers = {layer_shape(layer, batch): layer for layer in net if is_depthwise(layer)}
    run = latest_run_where(df, _rules_rows(df, config) & df["shape"].isin(layers)) if len(df) else df
    if run.empty:
        return pd.DataFrame(columns=BANDWIDTH_COLUMNS)
    ours = run[_rules_rows(run, config) & run["shape"].isin(layers)]
    theirs = measured_with(run, config).sort_values("median_ms").drop_duplicates("shape").set_index("shape")
    peak = hbm_tbps * 1e3 if hbm_tbps else math.nan
    rows = []
    for r in ours.to_dict("records"):
        v = theirs.loc[r["shape"]] if r["shape"] in theirs.index else None
        rows.append({"layer": layers[r["shape"]].name, "count": layers[r["shape"]].count, "tvm_ms": r["median_ms"],
                     "tvm_gbps": r["gbps"], "tvm_hbm": r["gbps"] / peak,
                     "cudnn_ms": np.nan if v is None else v["median_ms"],
                     "cudnn_gbps": np.nan if v is None else v["gbps"],
                     "cudnn_hbm": np.nan if v is None else v["gbps"] / peak})
    return pd.DataFrame(rows, columns=BANDWIDTH_COLUMNS)


def layer_table(df: pd.DataFrame, net: Sequence[ConvLayer], batches: Mapping[str, int]) -> pd.DataFrame:
    """Per layer of ``net`` (network order) its count and, per config of ``batches`` that ``df`` has rows of (each from
    its latest run, ``per_layer``), the rules' time, cuDNN's and cuDNN / TVM (columns ``<config> ms``, ``<config>
    cuDNN ms``, ``<config> cuDNN/TVM``); empty where a config has no row of the layer."""
    out = pd.DataFrame({"layer": [layer.name for layer in net], "count": [layer.count for layer in net]})
    for config, batch in batches.items():
        table = per_layer(df, config, net, batch).set_index("layer") if len(df) else pd.DataFrame()
        if table.empty:
            continue
        out[f"{config} ms"] = out["layer"].map(table["tvm_ms"])
        out[f"{config} cuDNN ms"] = out["layer"].map(table["cudnn_ms"])
        out[f"{config} cuDNN/TVM"] = out[f"{config} cuDNN ms"] / out[f"{config} ms"]
    return out


def recorded_networks(df: pd.DataFrame) -> pd.DataFrame:
    """The latest row of each (network, config) of a ``networks.csv`` frame (``NETWORKS_COLUMNS``; a run id starts
    with its start time, so the latest sorts last), in the order first recorded, with cuDNN / TVM."""
    if df.empty:
        return pd.DataFrame(columns=[*NETWORKS_COLUMNS, "cuDNN / TVM"])
    order = df.drop_duplicates(["network", "config"])[["network", "config"]]
    latest = df.sort_values("run_id", kind="stable").drop_duplicates(["network", "config"], keep="last")
    out = order.merge(latest, on=["network", "config"])[NETWORKS_COLUMNS]
    return out.assign(**{"cuDNN / TVM": out["cudnn_ms"] / out["tvm_ms"]})

"""Notebook 10's whole networks as published: the README section ``networks`` (``networks_table``) and the report
index's entry (``networks_html``), from ``results/10_networks/networks.csv``: each network and config's latest row
(``network.recorded_networks``: one full GPU run's verified rows, written by the notebook), captioned with its run
from the notebook's ``results.csv``."""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from tirbench.bench.network import BATCHES, NETWORKS_COLUMNS, recorded_networks
from tirbench.bench.networks import NETWORKS_CSV, NOTEBOOK
from tirbench.bench.results import read_results
from tirbench.report.published import caption
from tirbench.workloads.networks import NETWORKS


def recorded(root: Path) -> pd.DataFrame:
    """The latest row of each network and config in ``root``'s ``networks.csv`` (empty where none is recorded)."""
    return recorded_networks(read_results(root / "results" / NOTEBOOK / NETWORKS_CSV, NETWORKS_COLUMNS))


def _config(config: str) -> str:
    """A config as the tables name it: its batch, and for int8 the cuDNN it is compared with."""
    return f"{config} batch {BATCHES[config]}" + (" (cuDNN fp16)" if config == "int8" else "")


def _layers(r: pd.Series) -> str:
    """Layers timed of the network's distinct convolutions."""
    return f"{r['layers']} of {len(NETWORKS[r['network']])}" if r["network"] in NETWORKS else str(r["layers"])


def networks_table(root: Path) -> str:
    """Per network and config (latest row each): the layers with a verified kernel and cuDNN time (of the network's
    distinct convolutions), their convolutions, the network's TVM and cuDNN times over them, cuDNN / TVM, the worst
    layer with its ratio and the run; then a caption per run."""
    df = recorded(root)
    if df.empty:
        return "not run on a GPU yet"
    lines = ["| network | run | layers | convolutions | TVM rules ms (network) | cuDNN ms (network) | "
             "cuDNN time / TVM time | worst layer (cuDNN / TVM) | run_id |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    lines += [f"| {r['network']} | {_config(r['config'])} | {_layers(r)} | {r['convolutions']} | {r['tvm_ms']:.3f} | "
              f"{r['cudnn_ms']:.3f} | {r['cuDNN / TVM']:.3f}x | {r['worst_layer']} ({r['worst_ratio']:.2f}x) | "
              f"{r['run_id']} |" for r in df.to_dict("records")]
    rows = read_results(root / "results" / NOTEBOOK / "results.csv")
    captions = [caption(NOTEBOOK, rows[rows["run_id"] == run]) for run in dict.fromkeys(df["run_id"])
                if (rows["run_id"] == run).any()]
    return "\n".join(lines) + "".join(f"\n\n{c}" for c in captions)


def networks_html(root: Path) -> str:
    """The index's entry for notebook 10: one line, then its whole networks (``networks_table``'s rows) as a table."""
    df = recorded(root)
    if df.empty:
        return "<ul><li>no GPU results recorded yet</li></ul>"
    cells = "".join(f"<tr><td>{html.escape(r['network'])}</td><td>{html.escape(_config(r['config']))}</td>"
                    f"<td>{_layers(r)}</td><td>{r['tvm_ms']:.3f}</td><td>{r['cudnn_ms']:.3f}</td>"
                    f"<td>{r['cuDNN / TVM']:.2f}x</td><td>{html.escape(str(r['worst_layer']))} "
                    f"({r['worst_ratio']:.2f}x)</td><td>{html.escape(r['run_id'])}</td></tr>"
                    for r in df.to_dict("records"))
    return ("<p>Five networks' convolutions, each as one network (time x count summed over its layers with a verified "
            "kernel): the conv rules against cuDNN's faster layout (int8: cuDNN fp16).</p><table><tr><th>network</th>"
            "<th>config</th><th>layers</th><th>rules ms</th><th>cuDNN ms</th><th>cuDNN / rules</th>"
            f"<th>worst layer</th><th>run</th></tr>{cells}</table>")

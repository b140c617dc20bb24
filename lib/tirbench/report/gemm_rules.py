"""The README's GEMM rules table (``<!-- gemm-rules:start -->``), from ``results/kernel/gemm_rules.csv``
(``tools/gpu-checks/gemm_rules.py``: the rules' one call per shape, cuBLAS in the same process).

Per shape, input dtype and C (float32, or the half C cuBLAS's fp16 GEMM writes: variant ``rules_<family>_fp16_c``),
the latest verified choice and the cuBLAS row of its own run that writes the same C: ``cublas_float16_fp32_c``
(``baselines.vendor``, torch's ``out_dtype``) for fp16 inputs with a float32 C where that run has it, else
``cublas_<dtype>``, named in the row. The ratio is cuBLAS time / the rules' time; the goal is ``GOAL``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tirbench.bench.results import native_runs, read_results

#: Where ``tools/gpu-checks/gemm_rules.py`` appends its rows, under the repository root.
CSV = Path("results") / "kernel" / "gemm_rules.csv"
#: cuBLAS time / the rules' time that #40 asks of every shape.
GOAL = 0.9


def half_c(variant: str) -> bool:
    """Whether a rules row wrote a half C (``kernel.run.row_variant``)."""
    return variant.endswith("_fp16_c")


def vendor_for(run: pd.DataFrame, row: pd.Series) -> pd.Series | None:
    """The cuBLAS row of ``run`` (the rules row's own run) at ``row``'s shape and dtype that writes its C."""
    same = run[(run["provider"] == "cublas") & (run["shape"] == row["shape"]) & (run["dtype"] == row["dtype"])]
    names = [f"cublas_{row['dtype']}"]
    if row["dtype"] == "float16" and not half_c(row["variant"]):
        names.insert(0, f"cublas_{row['dtype']}_fp32_c")
    for name in names:
        if not (found := same[same["variant"] == name]).empty:
            return found.iloc[-1]
    return None


def gemm_rules_table(root: Path) -> str:
    """The table (module docstring), one row per shape, dtype and C in the order the CSV first measured them (each
    row names its run), and a caption: the file, the GPUs, the dates and the goal."""
    path = root / CSV
    df = native_runs(read_results(path)) if path.exists() else pd.DataFrame()
    rules = df[df["variant"].astype(str).str.startswith("rules_")] if len(df) else df
    if rules.empty:
        return "not run on a GPU yet"
    rules = rules.assign(c=["half" if half_c(v) else "float32" for v in rules["variant"]])
    shapes = {shape: i for i, shape in enumerate(dict.fromkeys(rules["shape"]))}
    latest = rules.sort_values("timestamp", kind="stable").groupby(["shape", "dtype", "c"], sort=False).tail(1)
    latest = latest.assign(at=[(shapes[s], d != "float32", c != "float32")
                               for s, d, c in zip(latest["shape"], latest["dtype"], latest["c"])]).sort_values("at")
    lines = ["| shape (MxNxK) | inputs | C | rules' kernel | us | cuBLAS | cuBLAS us | cuBLAS time / rules' time "
             "| run |", "|---|---|---|---|---:|---|---:|---:|---|"]
    for _, r in latest.iterrows():
        v = vendor_for(df[df["run_id"] == r["run_id"]], r)
        if v is None:
            continue
        ratio = v["median_ms"] / r["median_ms"]
        mark = "" if ratio >= GOAL else " (under the goal)"
        lines.append(f"| {r['shape']} | {r['dtype']} | {r['c']} | {r['variant']} | {r['median_ms'] * 1e3:.1f} | "
                     f"{v['variant']} | {v['median_ms'] * 1e3:.1f} | {ratio:.2f}x{mark} | {r['run_id']} |")
    runs = latest.drop_duplicates("run_id")
    gpus = ", ".join(sorted(set(runs["gpu"])))
    dates = f"{str(runs['timestamp'].min())[:10]} to {str(runs['timestamp'].max())[:10]}"
    return ("\n".join(lines) + f"\n\nFrom `{CSV.as_posix()}` (`tools/gpu-checks/gemm_rules.py`): each shape's latest "
            f"run, the rules' choice and cuBLAS in the same process; {gpus}, {dates}; the goal is {GOAL}x. "
            "`cublas_float16` writes a half C: beside a float32 C it is not the same GEMM (`cublas_float16_fp32_c` "
            "is, in runs that have it).")

"""Does a re-run on the same GPU keep a notebook's ratios? The latest native run against the one before it.

    python -m tirbench.report.rerun [--tolerance 0.03] [NOTEBOOK...]      (default: every notebook with headlines)

Per notebook, on the GPU of its latest native run (``results.native_runs``: no row built for an older architecture), the
two latest native runs that have its headline ratios: each headline row's rate over its baseline of the same run
(``headline.HEADLINES``, ``headline_rows``: TVM's and MetaSchedule's rows over cuBLAS / cuDNN), and for notebook 08 each
config's whole-network cuDNN time / TVM time (``bench.network``). A row's change is the later ratio over the earlier
one, minus one; rows the two runs do not share are left out. Exit status 1 where a change is past ``--tolerance``, 2
where no notebook has two runs to compare. A run drops from the CSV the runs it measured again
(``results.prune_superseded``; git keeps them): the runs compared are those of the CSV and of its last ``HISTORY``
committed versions (``with_history``), so a re-run is compared with the run it replaced, committed or not. Runs timed
differently (``published.timing``) are not compared.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from tirbench.bench.network import config_tables, network_totals
from tirbench.bench.plots import VENDORS
from tirbench.bench.results import native_runs, read_results
from tirbench.core.paths import project_root
from tirbench.report.headline import HEADLINES, headline_rows
from tirbench.report.published import timing
from tirbench.workloads.resnet50 import RESNET50

NETWORK = "08_resnet50"
KEY = ["shape", "dtype", "variant"]
#: Committed versions of a results CSV read for the runs it no longer holds.
HISTORY = 20


def run_ratios(df: pd.DataFrame, notebook: str) -> pd.DataFrame:
    """Per native run of ``df`` (one notebook's rows): its headline ratios (``KEY``, ``ratio``, with ``run_id``,
    ``timestamp``, ``gpu``); for notebook 08 one row per config (variant ``network``)."""
    parts = []
    for _, run in native_runs(df).groupby("run_id", sort=False):
        if notebook == NETWORK:
            tables = config_tables(run, RESNET50)
            if not tables:
                continue
            totals = network_totals(pd.concat([t for _, t in tables.values()], ignore_index=True))
            ratios = pd.DataFrame({"shape": [f"batch {tables[c][0]}" for c in totals.index], "dtype": totals.index,
                                   "variant": "network", "ratio": totals["cuDNN / TVM"].to_numpy()})
        else:
            rows = headline_rows(run, dict(HEADLINES)[notebook])
            ratios = rows.loc[~rows["provider"].isin(VENDORS) & rows["ratio"].notna(), [*KEY, "ratio"]]
        parts.append(ratios.assign(run_id=run["run_id"].iloc[0], timestamp=run["timestamp"].max(),
                                   gpu=run["gpu"].iloc[0]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*KEY, "ratio", "run_id",
                                                                                   "timestamp", "gpu"])


def _git(*args: str) -> subprocess.CompletedProcess:
    """``git args`` in the project root; a failed one (exit status 1, no output) where git is not installed."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=project_root())
    except OSError:
        return subprocess.CompletedProcess(["git", *args], 1, "", "")


def versions(path: Path, depth: int = HISTORY) -> list[str]:
    """The texts of the CSV at ``path`` as the last ``depth`` commits that changed it left it, newest first."""
    rel = path.relative_to(project_root()).as_posix()
    revs = _git("log", "-n", str(depth), "--format=%H", "--", rel).stdout.split()
    return [out.stdout for rev in revs if (out := _git("show", f"{rev}:{rel}")).returncode == 0 and out.stdout]


def with_history(path: Path, depth: int = HISTORY) -> pd.DataFrame:
    """The results CSV at ``path`` with the rows of its committed ``versions`` that it no longer has (a re-run drops
    the runs it measured again: ``results.prune_superseded``)."""
    parts = [read_results(path)]
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(versions(path, depth)):
            (Path(tmp) / f"{i}.csv").write_text(text)
            parts.append(read_results(Path(tmp) / f"{i}.csv"))
    return pd.concat(parts, ignore_index=True).drop_duplicates(["run_id", *KEY, "provider"])


def compare(ratios: pd.DataFrame) -> pd.DataFrame:
    """The latest run of ``ratios`` (``run_ratios``): its ratios beside those of the run before it on the same GPU timed
    the same way (``published.timing``: a run timed with ``time_evaluator`` is not compared with one timed with CUDA
    events) (``KEY``, ``gpu``, ``before``, ``after``, ``change``, ``runs``: "earlier -> later"); empty where there is
    no such run."""
    if ratios.empty:
        return pd.DataFrame()
    gpu = ratios.sort_values("timestamp")["gpu"].iloc[-1]
    out = []
    for gpu, g in ratios[ratios["gpu"] == gpu].groupby("gpu", sort=False):
        order = g.drop_duplicates("run_id").sort_values("timestamp")
        order = order[timing(order["timestamp"]) == timing(order["timestamp"].iloc[-1:]).iloc[0]]
        runs = order["run_id"].tolist()
        if len(runs) < 2:
            continue
        before, after = (g[g["run_id"] == r].set_index(KEY)["ratio"] for r in runs[-2:])
        both = pd.concat({"before": before, "after": after}, axis=1, join="inner").reset_index()
        out.append(both.assign(gpu=gpu, change=both["after"] / both["before"] - 1, runs=f"{runs[-2]} -> {runs[-1]}"))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", default=[nb for nb, _ in HEADLINES] + [NETWORK])
    ap.add_argument("--tolerance", type=float, default=0.03, help="largest |change| that passes (0.03: 3%%)")
    args = ap.parse_args(argv)
    known = {nb for nb, _ in HEADLINES} | {NETWORK}
    for nb in args.notebooks:
        if nb not in known:
            print(f"notebook {nb!r}: no headline ratios (one of {', '.join(sorted(known))})")
            return 2
    compared, worst = 0, 0.0
    for nb in args.notebooks:
        table = compare(run_ratios(with_history(project_root() / "results" / nb / "results.csv"), nb))
        if table.empty:
            print(f"{nb}: no GPU has two native runs with its headline rows")
            continue
        compared += 1
        for (gpu, runs), t in table.groupby(["gpu", "runs"], sort=False):
            print(f"{nb} on {gpu}, runs {runs}:")
            for r in t.to_dict("records"):
                flag = "" if abs(r["change"]) <= args.tolerance else "  <- past the tolerance"
                print(f"  {r['variant']:<34} {r['dtype']:<8} {r['shape']:<26} {r['before']:7.3f}x -> "
                      f"{r['after']:7.3f}x  {r['change']:+7.1%}{flag}")
        worst = max(worst, float(table["change"].abs().max()))
    if not compared:
        return 2
    print(f"largest change {worst:.1%} (tolerance {args.tolerance:.0%})")
    return 1 if worst > args.tolerance else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What ``make run-all`` runs: every notebook through papermill, its HTML report, then the report index.

    python -m tirbench.report.run_all [-p NAME VALUE]... [NOTEBOOK...]      (default: every notebooks/[0-9]*.ipynb)

Executed notebooks and reports go to ``results/executed`` and ``results/reports`` on a CUDA GPU, to
``build/cpu-run/`` without one (``session.output_dir``: a CPU run never writes under ``results/``). Each ``-p``
(its value read as YAML: ``-p threads 128``, ``-p sizes_log2 '[20, 22]'``) goes to the notebooks that declare that
parameter. Notebooks run one after the other, ``00_overview`` last (it reads what the others recorded); then the
index (``tirbench.report.index``) is written.

A notebook that fails does not stop the others: papermill writes to a scratch copy under ``build/run-all/`` that
replaces the executed notebook only on success (the failed copy stays there to read), its report is not rendered,
and the summary names it; the exit status is then 1. Each notebook's time and the total are printed; a notebook
over ``BUDGET_S`` is flagged.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import papermill as pm
import yaml
from nbconvert import HTMLExporter

from tirbench.core.atomic import write_atomic
from tirbench.core.machine import has_cuda_gpu
from tirbench.core.paths import output_dir, project_root
from tirbench.report.index import write_index

#: A notebook should finish within this many seconds on an H100, replaying the recorded tuning databases.
BUDGET_S = 540
#: Figures shown inline in the executed notebook, whatever MPLBACKEND the shell has (the GPU kit sets Agg).
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


@dataclass
class Outcome:
    notebook: str
    seconds: float
    error: str | None = None


def run_order(notebooks: list[Path]) -> list[Path]:
    """The notebooks in name order, the overview (``00_*``) last."""
    return sorted(notebooks, key=lambda nb: (nb.stem.startswith("00_"), nb.name))


def execute(nb: Path, out: Path, scratch: Path, params: dict[str, object]) -> None:
    """Execute ``nb`` with those of ``params`` it declares into ``out/executed/`` and render ``out/reports/``; on an
    error nothing under ``out`` changes (the failed copy stays in ``scratch``)."""
    declared = pm.inspect_notebook(str(nb))
    tmp = scratch / f"{nb.stem}.ipynb"
    pm.execute_notebook(str(nb), str(tmp), parameters={k: v for k, v in params.items() if k in declared},
                        cwd=str(nb.parent), kernel_name="python3")
    body, _ = HTMLExporter().from_filename(str(tmp))
    executed = out / "executed" / nb.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(tmp, executed)
    write_atomic(out / "reports" / f"{nb.stem}.html", body.encode())


def _one_line(err: BaseException) -> str:
    if isinstance(err, pm.PapermillExecutionError):
        return f"{err.ename}: {err.evalue}".splitlines()[0] + f" (cell {err.exec_count})"
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"


def run_all(notebooks: list[Path], params: dict[str, object], root: Path) -> list[Outcome]:
    """Run every notebook (see the module docstring), then write the index; returns each one's outcome."""
    out = output_dir(root)
    scratch = root / "build" / "run-all"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["MPLBACKEND"] = INLINE_BACKEND  # inherited by each notebook's kernel
    print(f"[run-all] {'GPU' if has_cuda_gpu() else 'no GPU'}: executed notebooks and reports go to {out}")
    outcomes = []
    for nb in run_order(notebooks):
        print(f"== {nb.stem} -> {out / 'executed' / nb.name}", flush=True)
        t0 = time.monotonic()
        try:
            execute(nb, out, scratch, params)
            outcomes.append(Outcome(nb.stem, time.monotonic() - t0))
        except Exception as err:  # noqa: BLE001 - any failure of one notebook: note it, run the next
            outcomes.append(Outcome(nb.stem, time.monotonic() - t0, _one_line(err)))
            print(f"[run-all] {nb.stem} FAILED: {outcomes[-1].error}; its executed copy and report are unchanged; "
                  f"the failed run is in {scratch / nb.name}", flush=True)
        print(f"[run-all] {nb.stem}: {outcomes[-1].seconds:.1f} s", flush=True)
    t0 = time.monotonic()
    try:
        print(f"[run-all] report index: {write_index(out, root)}")
        outcomes.append(Outcome("index.html", time.monotonic() - t0))
    except Exception as err:  # noqa: BLE001
        outcomes.append(Outcome("index.html", time.monotonic() - t0, _one_line(err)))
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    """Per notebook: ok / FAILED, seconds (flagged over ``BUDGET_S``); the total; the failed ones named."""
    lines = ["== run-all summary"]
    for o in outcomes:
        over = f"  over the {BUDGET_S // 60}-minute budget" if o.seconds > BUDGET_S else ""
        lines.append(f"  {o.notebook:<28} {'FAILED' if o.error else 'ok':<7} {o.seconds:8.1f} s{over}"
                     + (f"  {o.error}" if o.error else ""))
    failed = [o.notebook for o in outcomes if o.error]
    lines.append(f"  total {sum(o.seconds for o in outcomes):.1f} s; "
                 + (f"FAILED: {', '.join(failed)}" if failed else "all ok"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path)
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    a = p.parse_args(argv)
    root = project_root()
    notebooks = [nb.resolve() for nb in a.notebooks] or sorted((root / "notebooks").glob("[0-9]*.ipynb"))
    outcomes = run_all(notebooks, {name: yaml.safe_load(value) for name, value in a.parameter}, root)
    print(summary(outcomes))
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

"""What ``make run-all`` runs: every notebook through papermill, its HTML report, then the report index.

    python -m tirbench.report.run_all [-p NAME VALUE]... [NOTEBOOK...]      (default: every notebooks/[0-9]*.ipynb)

Executed notebooks and reports go to ``results/executed`` and ``results/reports`` on a CUDA GPU, to
``build/cpu-run/`` without one (``session.output_dir``: a CPU run never writes under ``results/``). Each ``-p``
(its value read as YAML: ``-p threads 128``, ``-p sizes_log2 '[20, 22]'``) goes to the notebooks that declare that
parameter; a name that no selected notebook declares, a ``-p NAME`` without a value, or a notebook path that does
not exist stops it before anything runs (one line, exit status 2).
Notebooks run one after the other, ``00_overview`` last (it reads what the others recorded); then the index
(``tirbench.report.index``) is written. Kernels talk to papermill over IPC (local sockets), not TCP.

Each notebook stages its rows and figures under ``build/run-all/<notebook>/staged/`` (``Session``,
``$TIRBENCH_STAGE_DIR``) and papermill writes to a scratch copy beside it; only when the notebook ran to its end do
the rows (appended atomically), figures, executed copy and report move into place together. A notebook that fails
does not stop the others: nothing of it moves (the failed copy and what it staged stay there to read), and the
summary names it; the exit status is then 1. Each notebook's time and the total are printed; a notebook over
``BUDGET_S`` is flagged.

A partial run publishes its rows only: a notebook run with a parameter that narrows what it measures (``quick``,
fewer ``configs``, other sizes: any parameter set to another value than the notebook's default, except those of
``params.NEUTRAL`` such as ``repeats`` and ``seed``; ``params.narrowing``) appends its rows and data CSVs, but the
published executed copy, report and figures in ``results/`` stay those of the last full run (one line says so; the
partial run's executed copy stays in ``build/run-all/`` to read). So does a run built for an older architecture than
the GPU's (``TIRBENCH_ARCH=sm_80``, ``-p target nvidia/nvidia-a100``: its kernels run as PTX; ``ptx_build``). A run
without a GPU writes to ``build/cpu-run/``, where every run's copies go.

Executed copies are compacted first (``report.compact``: palette PNGs, merged progress lines, TVMScript styled by
class, pandas tables on one line); reports link one shared stylesheet (``reports/report.css``), both made small
(``report.slim``: the rules that can apply to a report, spans that style nothing unwrapped). After a change to either,
``python -m tirbench.report.rerender`` compacts the published copies again and renders their reports as a run would.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import difflib
import io
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import papermill as pm
import tvm
import yaml
from nbconvert import HTMLExporter
from traitlets.config import Config

from tirbench.bench import results
from tirbench.bench.networks import NOTEBOOK as NETWORKS_NOTEBOOK
from tirbench.bench.params import narrowing
from tirbench.bench.session import STAGE_ENV
from tirbench.core.atomic import write_atomic
from tirbench.core.gpu import current_gpu
from tirbench.core.machine import builds_ptx, has_cuda_gpu
from tirbench.core.paths import output_dir, project_root
from tirbench.report.compact import compact_notebook
from tirbench.report.index import write_index
from tirbench.report.slim import slim_body, slim_stylesheet

#: A notebook should finish within this many seconds on an H100, replaying the recorded tuning databases.
BUDGET_S = 540
#: Figures shown inline in the executed notebook, whatever MPLBACKEND the shell has (the GPU kit sets Agg).
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
#: Kernels over IPC: nothing listens on a TCP port (and ipykernel has no "TCP without encryption" to warn about).
KERNEL_CONFIG = Config({"KernelManager": {"transport": "ipc"}})
#: The reports' shared stylesheet, in ``reports/`` beside them.
STYLESHEET = "report.css"


class UsageError(Exception):
    """A command line that cannot run: one line, exit status 2, nothing run."""


@dataclass
class Outcome:
    notebook: str
    seconds: float
    error: str | None = None


def run_order(notebooks: list[Path]) -> list[Path]:
    """The notebooks in name order, the overview (``00_*``) last."""
    return sorted(notebooks, key=lambda nb: (nb.stem.startswith("00_"), nb.name))


def check_parameter_values(argv: list[str]) -> None:
    """UsageError for a ``-p NAME`` without its value: the next word would be taken as the value (a notebook's path,
    so every notebook would run) or as the name of another ``-p``."""
    for i, word in enumerate(argv):
        if word not in ("-p", "--parameter"):
            continue
        name, value = (argv[i + 1:i + 3] + [None, None])[:2]
        if name is None or name.startswith("-") or name.endswith(".ipynb"):
            raise UsageError(f"run-all: {word} needs a name and a value (-p NAME VALUE, e.g. -p repeats 20); "
                             "nothing was run")
        if value is None or value in ("-p", "--parameter") or value.endswith(".ipynb"):
            raise UsageError(f"run-all: `{word} {name}` needs a value (-p NAME VALUE, e.g. -p {name} 20)"
                             + (f"; {value} is a notebook, not a value" if value and value.endswith(".ipynb") else "")
                             + "; nothing was run")


def check_notebooks(notebooks: list[Path], root: Path) -> None:
    """UsageError naming the first of ``notebooks`` that is not a notebook file, listing those in ``notebooks/``."""
    for nb in notebooks:
        if not nb.is_file() or nb.suffix != ".ipynb":
            there = ", ".join(p.name for p in sorted((root / "notebooks").glob("[0-9]*.ipynb")))
            raise UsageError(f"run-all: no notebook {nb}; the notebooks are (in notebooks/): {there}; nothing was run")


def unknown_parameters(notebooks: list[Path], params: dict[str, object]) -> str | None:
    """One line naming each parameter that none of ``notebooks`` declares (cell tagged ``parameters``), or None."""
    declared = {name for nb in notebooks for name in pm.inspect_notebook(str(nb))}
    unknown = [name for name in params if name not in declared]
    if not unknown:
        return None

    def named(name: str) -> str:
        close = difflib.get_close_matches(name, sorted(declared), n=1)
        return f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else "")

    which = ", ".join(nb.stem for nb in notebooks)
    return (f"run-all: unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(named, unknown))}: "
            f"no selected notebook ({which}) declares {'them' if len(unknown) > 1 else 'it'}; nothing was run")


@contextlib.contextmanager
def environ(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block (the kernels started there inherit it), restored after."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def render_report(executed: Path, reports: Path) -> str:
    """The HTML report of ``executed``, its head's stylesheets written once to ``reports/STYLESHEET`` and linked,
    both made small (``report.slim``)."""
    body, _ = HTMLExporter().from_filename(str(executed))
    head, rest = body.split("</head>", 1)
    css = slim_stylesheet("\n".join(re.findall(r"<style[^>]*>(.*?)</style>", head, re.S)))
    sheet = reports / STYLESHEET
    if not sheet.exists() or sheet.read_bytes() != css.encode():
        write_atomic(sheet, css.encode())
    head = re.sub(r"\s*<style[^>]*>.*?</style>", "", head, flags=re.S)
    return slim_body(f'{head}<link href="{STYLESHEET}" rel="stylesheet"/>\n</head>{rest}', css)


def move_staged(staged: Path, out: Path, root: Path, figures: bool = True) -> list[str]:
    """Append each staged ``<notebook>/results.csv`` to ``root/results/`` (atomically; then the runs measured again
    since are pruned, ``results.prune_superseded``, and in notebook 10's, whose tables take each network from its
    latest run, the layers measured again) and move every other staged file to ``out`` (with ``figures`` off, the
    other CSVs only); returns what moved, in words."""
    moved, counts = [], [0, 0]   # figures, other CSVs
    for path in sorted(p for p in staged.rglob("*") if p.is_file()):
        rel = path.relative_to(staged)
        if not figures and path.suffix != ".csv":
            continue
        if rel.name == "results.csv":
            rows = [dict(r, verified=r["verified"] == "True") for r in csv.DictReader(io.StringIO(path.read_text()))]
            n = results.append_rows(root / "results" / rel, rows)
            pruned = results.prune_superseded(root / "results" / rel, by_shape=rel.parent.name == NETWORKS_NOTEBOOK)
            dropped = f"; {pruned} older row{'s' if pruned != 1 else ''} measured again since dropped, git history " \
                      "keeps them" if pruned else ""
            moved.append(f"{n} rows ({Path('results') / rel}{dropped})")
        else:
            write_atomic(out / rel, path.read_bytes())
            counts[path.suffix == ".csv"] += 1
    return moved + [f"{n} {what}{'s' if n != 1 else ''}" for n, what in zip(counts, ("figure", "table")) if n]


def kept_because(nb: Path, params: dict[str, object], out: Path, root: Path) -> str | None:
    """Why ``nb``'s published executed copy, report and figures stay as they are after a run with ``params``
    (``params.narrowing``: a partial run), or None where this run replaces them (a full run, or a run without a GPU,
    whose copies go to ``build/cpu-run/``)."""
    if out != root / "results":
        return None
    emulated = ptx_build(params)
    if emulated:
        return f"a run built for {emulated}, an older architecture than this GPU's (PTX)"
    defaults = {name: spec["default"] for name, spec in pm.inspect_notebook(str(nb)).items()}
    narrowed = narrowing(defaults, params)
    if not narrowed:
        return None
    which = ", ".join(f"{name}={value!r} (default {default!r})" for name, (value, default) in narrowed.items())
    return f"a partial run ({which})"


def ptx_build(params: dict[str, object]) -> str | None:
    """The architecture this run builds for where the GPU runs it as PTX (``machine.builds_ptx``: an older one, from
    ``-p target`` or ``TIRBENCH_ARCH``), else None. Such a run's rows are recorded (labelled PTX), but the published
    executed copies, reports and figures stay those of the GPU's own architecture."""
    target = params.get("target", "auto")
    if target == "auto":
        arch = current_gpu().arch
    else:
        try:
            arch = str(tvm.target.Target(str(target)).attrs.get("arch", ""))
        except (ValueError, TypeError):
            return None   # the notebook refuses it in one line
    return arch if arch and builds_ptx(arch) else None


def execute(nb: Path, out: Path, scratch: Path, root: Path, params: dict[str, object]) -> list[str]:
    """Execute ``nb`` with those of ``params`` it declares, staging under ``scratch/<stem>/staged``; then move its
    rows and figures, its executed copy (``out/executed/``) and report (``out/reports/``) into place; after a partial
    run (``kept_because``) only its rows and data CSVs, the rest printed in one line. On an error nothing under
    ``out`` or ``root/results`` changes. Returns what moved, in words."""
    declared = pm.inspect_notebook(str(nb))
    tmp, staged = scratch / f"{nb.stem}.ipynb", scratch / nb.stem / "staged"
    shutil.rmtree(staged, ignore_errors=True)
    given = {k: v for k, v in params.items() if k in declared}
    with environ(STAGE_ENV, str(staged)):
        pm.execute_notebook(str(nb), str(tmp), parameters=given, cwd=str(nb.parent), kernel_name="python3",
                            config=KERNEL_CONFIG)
    compact_notebook(tmp)
    partial = kept_because(nb, given, out, root)
    if partial:
        moved = move_staged(staged, out, root, figures=False)
        shutil.rmtree(staged, ignore_errors=True)
        print(f"[run-all] {nb.stem}: {partial}: the published executed copy, report and figures in {out} were kept "
              f"(the last full run's); this run's executed copy is {tmp}", flush=True)
        return moved
    body = render_report(tmp, out / "reports")
    moved = move_staged(staged, out, root)
    executed = out / "executed" / nb.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(tmp, executed)
    write_atomic(out / "reports" / f"{nb.stem}.html", body.encode())
    shutil.rmtree(scratch / nb.stem, ignore_errors=True)
    return moved + ["the executed copy and the report"]


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
            moved = execute(nb, out, scratch, root, params)
            outcomes.append(Outcome(nb.stem, time.monotonic() - t0))
            print(f"[run-all] {nb.stem}: moved in {', '.join(moved) or 'nothing'}", flush=True)
        except Exception as err:  # noqa: BLE001 - any failure of one notebook: note it, run the next
            outcomes.append(Outcome(nb.stem, time.monotonic() - t0, _one_line(err)))
            print(f"[run-all] {nb.stem} FAILED: {outcomes[-1].error}; its rows, figures, executed copy and report "
                  f"are unchanged; the failed run is in {scratch / nb.name}, what it staged is in "
                  f"{scratch / nb.stem / 'staged'}", flush=True)
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # type: ignore[override]
        """One line, not argparse's usage block."""
        raise UsageError(f"run-all: {message} (usage: run_all [-p NAME VALUE]... [NOTEBOOK...]); nothing was run")


def parse(argv: list[str], root: Path) -> tuple[list[Path], dict[str, object]]:
    """The notebooks (default: every ``notebooks/[0-9]*.ipynb``) and parameters of a command line; UsageError for
    one that cannot run."""
    check_parameter_values(argv)
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path)
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    a = p.parse_args(argv)
    check_notebooks(a.notebooks, root)
    notebooks = [nb.resolve() for nb in a.notebooks] or sorted((root / "notebooks").glob("[0-9]*.ipynb"))
    return notebooks, {name: _yaml_value(name, value) for name, value in a.parameter}


def _yaml_value(name: str, value: str) -> object:
    """``value`` read as YAML; UsageError naming the parameter if it is not YAML."""
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as err:
        raise UsageError(f"run-all: -p {name} {value!r} is not a YAML value ({str(err).splitlines()[0]}); "
                         "nothing was run") from None


def main(argv: list[str] | None = None) -> int:
    root = project_root()
    try:
        notebooks, params = parse(sys.argv[1:] if argv is None else argv, root)
    except UsageError as err:
        print(err, file=sys.stderr)
        return 2
    unknown = unknown_parameters(notebooks, params)
    if unknown:
        print(unknown, file=sys.stderr)
        return 2
    if params.get("tune_now") is True and not has_cuda_gpu():
        print("[run-all] tune_now=True, but no CUDA GPU here: nothing will be tuned (the notebooks replay the "
              "recorded databases)", flush=True)
    outcomes = run_all(notebooks, params, root)
    print(summary(outcomes))
    return 1 if any(o.error for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The published executed copies compacted again and their reports rendered again, without running a notebook.

    python -m tirbench.report.rerender [NOTEBOOK...]      (default: every results/executed/*.ipynb)

After a change to ``report.compact`` or ``report.slim``: each executed copy in ``results/executed`` is compacted
(``compact_notebook``: compacting a compacted copy changes only what the change adds) and its report in
``results/reports`` (with the shared stylesheet) is written as ``run_all`` would write it after a GPU run, byte for
byte. Needs no GPU; the numbers, tables and text stay those of the run that made the copy. A name that is no executed
copy there stops it before anything is written (one line, exit status 2).
"""
from __future__ import annotations

import sys
from pathlib import Path

from tirbench.core.atomic import write_atomic
from tirbench.core.paths import project_root
from tirbench.report.compact import compact_notebook
from tirbench.report.run_all import render_report


def rerender(executed: list[Path], reports: Path) -> None:
    """Compact each of ``executed`` in place and write its report (``<stem>.html``) under ``reports``."""
    for nb in executed:
        compact_notebook(nb)
        write_atomic(reports / f"{nb.stem}.html", render_report(nb, reports).encode())


def main(argv: list[str] | None = None) -> int:
    results = project_root() / "results"
    names = sys.argv[1:] if argv is None else argv
    executed = [results / "executed" / f"{Path(name).stem}.ipynb" for name in names] or \
        sorted((results / "executed").glob("*.ipynb"))
    missing = [nb.name for nb in executed if not nb.is_file()]
    if missing:
        print(f"rerender: no executed copy {', '.join(missing)} in {results / 'executed'}; nothing was written",
              file=sys.stderr)
        return 2
    rerender(executed, results / "reports")
    for nb in executed:
        print(f"[rerender] {nb.stem}: {results / 'reports' / nb.stem}.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())

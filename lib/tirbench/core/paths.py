"""Where things are: the project root, and where a run writes (``results/`` on a GPU run, ``build/cpu-run/``
without one)."""
from __future__ import annotations

import os
from pathlib import Path

from tirbench.core.machine import has_cuda_gpu


def project_root(start: Path | None = None) -> Path:
    """The checkout holding ``results/`` and ``notebooks/``: ``$TIRBENCH_ROOT``, else the nearest parent."""
    if os.environ.get("TIRBENCH_ROOT"):
        return Path(os.environ["TIRBENCH_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "notebooks").is_dir() and (d / "pyproject.toml").is_file():
            return d
    raise RuntimeError(f"cannot find the project root above {here}: set TIRBENCH_ROOT to the checkout")


def output_dir(root: Path) -> Path:
    """Where a run writes executed notebooks, reports and figures: ``results/`` on a CUDA GPU run, ``build/cpu-run/``
    without a GPU (so that a CPU run never writes under ``results/``)."""
    return root / "results" if has_cuda_gpu() else root / "build" / "cpu-run"

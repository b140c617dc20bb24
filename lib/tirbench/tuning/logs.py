"""The logs ``tune`` keeps beside a database, a row per chunk: its wall time (``tuning_chunks.csv``) and where that
time went, per phase (``tuning_phases.csv``, from ``tirbench.tuning.phases``)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from tirbench.tuning import phases

#: Per tuning chunk: when it finished, the trials after it, how many it added, its wall seconds.
CHUNK_LOG = "tuning_chunks.csv"
#: Per chunk and phase (``tirbench.tuning.phases``): how often it ran and its seconds.
PHASE_LOG = "tuning_phases.csv"
#: Phases shown per trial after each chunk: in the tuning process (walls), then summed over the workers.
SHOWN_PHASES = {"search": "search", "builder_wall": "builder", "runner_wall": "runner", "worker_init": "worker init",
                "build": "build", "export": "export", "session": "session", "upload_load": "upload+load",
                "hash": "hash", "alloc": "alloc", "measure": "measure"}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def tuning_chunks(work_dir: Path) -> pd.DataFrame:
    """The chunk log: per chunk, ``trials`` (trials after it), ``new_trials`` and ``wall_s``, plus ``s_per_trial``;
    empty for a database tuned before the log existed."""
    path = work_dir / CHUNK_LOG
    rows = path.read_text().splitlines(keepends=True)[1:] if path.exists() else []
    rows = [r.rstrip("\n").split(",") for r in rows if r.endswith("\n")]  # a line cut short by a kill is left out
    df = pd.DataFrame(rows, columns=["finished", "trials", "new_trials", "wall_s"])
    df = df.astype({"trials": int, "new_trials": int, "wall_s": float})
    df["s_per_trial"] = df["wall_s"] / df["new_trials"].clip(lower=1)
    return df


def log_chunk(work_dir: Path, trials: int, new_trials: int, wall_s: float) -> None:
    """Append a chunk's row to ``CHUNK_LOG``."""
    path = work_dir / CHUNK_LOG
    head = "" if path.exists() else "finished,trials,new_trials,wall_s\n"
    with path.open("a") as f:
        f.write(f"{head}{_now()},{trials},{new_trials},{wall_s:.1f}\n")


def log_phases(work_dir: Path, offset: int, wall_s: float, new_trials: int) -> str:
    """Append the chunk's phases (recorded in the phase log after byte ``offset``) to ``PHASE_LOG``; the line that
    says where a trial's time went: search (the chunk's wall time outside the builder and the runner), the waits for
    the builder and the runner, and the workers' time per phase (builds run in parallel, so theirs can exceed
    the builder's wall time)."""
    df = phases.totals(phases.start_log(), offset)
    walls = dict(zip(df["phase"], df["seconds"]))
    search = wall_s - walls.get("builder_wall", 0.0) - walls.get("runner_wall", 0.0)
    df = pd.concat([df, pd.DataFrame({"phase": ["chunk_wall", "search"], "count": [new_trials] * 2,
                                      "seconds": [wall_s, search]})], ignore_index=True)
    path = work_dir / PHASE_LOG
    finished = _now()
    with path.open("a") as f:
        f.write("" if path.stat().st_size else "finished,phase,count,seconds\n")
        f.writelines(f"{finished},{r.phase},{r.count},{r.seconds:.3f}\n" for r in df.itertuples())
    secs = dict(zip(df["phase"], df["seconds"]))
    shown = [f"{label} {secs[p] / max(new_trials, 1):.3f}" for p, label in SHOWN_PHASES.items() if p in secs]
    counts = dict(zip(df["phase"], df["count"]))
    reused = f"; {counts['reused']} trials reused a kernel measured before" if counts.get("reused") else ""
    return "  seconds per trial: " + ", ".join(shown) + reused

"""MetaSchedule wrappers: tune in resumable chunks into a JSON database, replay the best, read the history.

The database lives in a work directory under ``results/tuning/``; tuning adds records to it, so a run that
already has ``trials`` records replays the best schedule without tuning, and a run cut short resumes: a run killed
while MetaSchedule was writing a record leaves a cut-off last line, which is dropped (``repair_database``) so that
the database opens with every complete record kept. Each chunk prints trials done, trials per minute and the best
rate so far (and moves a tqdm bar), appends its wall time to ``tuning_chunks.csv`` beside the database, and says
where a trial's time went (search, builder, runner, and per phase in the workers; ``tuning_phases.csv``).

    python -m tirbench.tuning gemm 1024 1024 1024 --dtype float32 --trials 256 --seconds 540
    python -m tirbench.tuning conv2d 1 512 7 7 512 3 3 1 1 --layout NCHW --space template --trials 64
    python -m tirbench.tuning conv2d 32 64 56 56 64 3 3 1 1  32 512 7 7 512 3 3 1 1 --layout NHWC \
        --dtype float16 --space wmma --trials 16 --chunk 16

tunes (on a CUDA GPU) until the database holds that many records for each workload or the time is nearly up.
The search space (``--space``) comes from the registry in ``tirbench.tuning.spaces``: ``"default"`` (MetaSchedule's own
rules), ``"v5"`` (the fp32 GEMM v5 template), ``"template"`` (AutoTVM's conv2d template), ``"splitk"`` (NCHW conv2d
with the input channels split across blocks), each in its own database.

``--setup tuned`` (the default) measures as the harness does, one launch per repeat with the L2 flushed before each
(``tirbench.tuning.runners``), and builds with the trial-rate cuts (``tirbench.tuning.builders``); ``--setup stock`` is
MetaSchedule's own builder and measurement. ``--rpc HOST:PORT:KEY`` measures on the RPC servers registered under KEY
with that tracker (MetaSchedule's ``RPCRunner``, one session at a time per server; ``tirbench.tuning.rpc.cluster`` starts a
tracker and a server per GPU); the tracker, the key and the address are checked before any database is opened (one
line, exit status 2). Every run appends a row per tuned workload to ``results/tuning/throughput.csv``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.core.atomic import write_atomic

# build_with_config and import_tensor_intrin live with the builders; importable from here as before
from tirbench.core.build import build_with_config  # noqa: F401
from tirbench.core.machine import cpu_target, cuda_target, require_cuda_gpu
from tirbench.core.progress import BestBar
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.tuning.builders import make_builder
from tirbench.tuning.runners import make_local_runner, make_rpc_runner

# V5_SPACE_VARIANTS and v5_space live in the registry; importable from here as before (tests, notebooks)
from tirbench.tuning.spaces import SPACES, V5_SPACE_VARIANTS, get_space, uses_tensor_cores, v5_space  # noqa: F401
from tirbench.tuning import phases, throughput
from tirbench.tuning.rpc import tracker
from tirbench.workloads.base import Workload

if TYPE_CHECKING:
    from tirbench.bench.harness import Measurement


def tuned_pass_config(wl: Workload, space: str = "default") -> dict[str, bool]:
    """The PassContext config a kernel tuned for ``wl`` in ``space`` is built with (the builders' ``f_build``
    applies the same one): tensor-core candidates, the v5 space's cp.async copies, or none."""
    return get_space(space).pass_config(wl)


def work_dir_for(root: Path, wl: Workload, space: str = "default") -> Path:
    """``results/tuning/<workload>/<dtype>_[<layout>_]<shape><suffix>`` under the project root: the layout where
    the workload has one (conv2d), the space's suffix (``_v5space``, ``_templatespace``; none for the default)."""
    spec = get_space(space)
    spec.require(wl)
    layout = f"{wl.layout}_" if wl.layout else ""
    return root / "results" / "tuning" / wl.name / f"{wl.dtype}_{layout}{wl.shape}{spec.db_suffix}"


def space_target(space: str, target: tvm.target.Target | None = None) -> tvm.target.Target:
    """The target to tune ``space`` with (``DesignSpace.target``: the v5 space's allows 227 KB of shared memory)."""
    return get_space(space).target(target)


#: The files of a MetaSchedule JSON database; MetaSchedule appends one JSON line per workload / measured trial.
DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")
#: Per tuning chunk: when it finished, the records after it, how many it added, its wall seconds.
CHUNK_LOG = "tuning_chunks.csv"


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    """The JSON database in ``work_dir`` (made if missing; a cut-off last record dropped first, see
    ``repair_database``). A tensor-core database (``work_dir_for`` names it ``float16_...`` / ``int8_...``) has
    records that name tensor intrinsics, which must be registered to read it."""
    if work_dir.name.startswith(("float16_", "int8_")):
        import_tensor_intrin()
    work_dir.mkdir(parents=True, exist_ok=True)
    repair_database(work_dir)
    return ms.database.JSONDatabase(work_dir=str(work_dir))


def _json_lines(path: Path) -> list[str]:
    """The complete JSON lines of a database file, in order. A last line that does not parse is a write cut short
    (a killed run) and is left out; a bad line before it is a one-line RuntimeError (the file is damaged)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    for i, line in enumerate(lines):
        try:
            json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return lines[:-1]
            raise RuntimeError(f"{path}: line {i + 1} of {len(lines)} is not JSON: the database is damaged, not "
                               "just cut short; move it aside") from None
    return lines


def repair_database(work_dir: Path) -> int:
    """Rewrite (atomically) a database file whose last line was cut short by a killed run, keeping every complete
    line: MetaSchedule cannot read such a file and would append its next record to the broken line. Returns the
    number of lines dropped; a whole database is not touched."""
    dropped = 0
    for name in DATABASE_FILES:
        path = work_dir / name
        if not path.exists():
            continue
        text = path.read_text()
        lines = _json_lines(path)
        whole = "".join(f"{line}\n" for line in lines)
        if text != whole:
            dropped += len([line for line in text.splitlines() if line.strip()]) - len(lines)
            write_atomic(path, whole.encode())
            print(f"[tuning] {path}: dropped a cut-off last line (a run killed while writing); kept {len(lines)}")
    return dropped


def _compact_embedded(value: object) -> object:
    """``value`` (a decoded record) with every string that holds a JSON object re-encoded without indentation."""
    if isinstance(value, list):
        return [_compact_embedded(v) for v in value]
    if isinstance(value, str) and value.startswith("{\n"):
        try:
            return json.dumps(json.loads(value), separators=(",", ":"))
        except json.JSONDecodeError:
            return value
    return value


def compact_database(work_dir: Path) -> int:
    """Rewrite (atomically) the tuning records with the objects their traces embed as JSON text (index maps of
    ``TransformLayout``, with spans) re-encoded compactly: MetaSchedule writes them indented, over half of a
    tensor-core record. Same records, same order, same meaning. Returns the bytes saved."""
    path = work_dir / "database_tuning_record.json"
    if not path.exists():
        return 0
    lines = _json_lines(path)
    compact = "".join(json.dumps(_compact_embedded(json.loads(line)), separators=(",", ":")) + "\n"
                      for line in lines)
    saved = path.stat().st_size - len(compact.encode())
    if saved > 0:
        write_atomic(path, compact.encode())
    return max(saved, 0)


def _record_lines(work_dir: Path) -> list[str]:
    """The database's complete tuning records, one JSON line each, in the order they were measured."""
    return _json_lines(work_dir / "database_tuning_record.json")


def trials_done(work_dir: Path) -> int:
    """Complete tuning records in the database (0 when there is none)."""
    return len(_record_lines(work_dir))


def tuning_chunks(work_dir: Path) -> pd.DataFrame:
    """The chunk log ``tune`` keeps beside the database: per chunk, ``trials`` (records after it), ``new_trials``
    and ``wall_s``, plus ``s_per_trial``; empty for a database tuned before the log existed."""
    path = work_dir / CHUNK_LOG
    rows = path.read_text().splitlines(keepends=True)[1:] if path.exists() else []
    rows = [r.rstrip("\n").split(",") for r in rows if r.endswith("\n")]  # a line cut short by a kill is left out
    df = pd.DataFrame(rows, columns=["finished", "trials", "new_trials", "wall_s"])
    df = df.astype({"trials": int, "new_trials": int, "wall_s": float})
    df["s_per_trial"] = df["wall_s"] / df["new_trials"].clip(lower=1)
    return df


def _log_chunk(work_dir: Path, trials: int, new_trials: int, wall_s: float) -> None:
    path = work_dir / CHUNK_LOG
    head = "" if path.exists() else "finished,trials,new_trials,wall_s\n"
    with path.open("a") as f:
        f.write(f"{head}{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')},{trials},{new_trials},"
                f"{wall_s:.1f}\n")


#: Per chunk and phase (``tirbench.tuning.phases``): how often it ran and its seconds, beside the database.
PHASE_LOG = "tuning_phases.csv"
#: Phases shown per trial after each chunk: in the tuning process (walls), then summed over the workers.
SHOWN_PHASES = {"search": "search", "builder_wall": "builder", "runner_wall": "runner", "worker_init": "worker init",
                "build": "build", "export": "export", "session": "session", "upload_load": "upload+load",
                "alloc": "alloc", "measure": "measure"}


def _log_phases(work_dir: Path, offset: int, wall_s: float, new_trials: int) -> str:
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
    finished = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    with path.open("a") as f:
        f.write("" if path.stat().st_size else "finished,phase,count,seconds\n")
        f.writelines(f"{finished},{r.phase},{r.count},{r.seconds:.3f}\n" for r in df.itertuples())
    secs = dict(zip(df["phase"], df["seconds"]))
    shown = [f"{label} {secs[p] / max(new_trials, 1):.3f}" for p, label in SHOWN_PHASES.items() if p in secs]
    return "  seconds per trial: " + ", ".join(shown)


def _best_tflops(work_dir: Path, flops: int) -> float | None:
    best = tuning_history(work_dir, flops)["best_gflops"]
    return float(best.iloc[-1]) / 1e3 if len(best) else None


def tune(wl: Workload, work_dir: Path, *, trials: int, chunk: int = 64, seconds: float | None = None,
         target: tvm.target.Target | None = None, space: str = "default", setup: str = "tuned",
         builder: ms.builder.Builder | None = None, runner: ms.runner.Runner | None = None) -> ms.database.JSONDatabase:
    """Tune until the database holds ``trials`` records (chunks of ``chunk``), or ``seconds`` nearly run out.

    ``seconds`` is checked between chunks from the measured time per trial, so the first chunk always runs
    whole: keep ``chunk`` small where trials are slow. Without a ``runner``, tuning for CUDA needs a CUDA GPU here
    when any trial is left to run; with enough records it only opens the database. ``space``: a name in ``SPACES``
    (``work_dir_for`` names its database). ``builder`` (``make_builder(wl, space, setup)``) and ``runner``
    (``make_local_runner(setup)``, or ``make_rpc_runner``) are made on first use unless given: share them across
    workloads of one dtype and space to pay their start-up once. After each chunk, a line says where a trial's time
    went (``PHASE_LOG``).
    """
    if setup not in throughput.SETUPS:
        raise ValueError(f"setup={setup!r}: expected one of {', '.join(map(repr, throughput.SETUPS))}")
    spec = get_space(space)
    spec.require(wl)
    target = spec.target(target)
    deadline = None if seconds is None else time.monotonic() + seconds
    per_trial = None
    bar = None
    while (left := trials - (done := trials_done(work_dir))) > 0:
        if runner is None and target.kind.name == "cuda":
            require_cuda_gpu()
        n = min(chunk, left)
        if deadline is not None and per_trial is not None and time.monotonic() + per_trial * n > deadline:
            print(f"[tuning] stopping with {done}/{trials} trials: the time is nearly up")
            break
        if bar is None:
            repair_database(work_dir)  # a run killed mid-write: MetaSchedule appends after its last whole record
            bar = BestBar(desc=f"tuning {wl.name} {wl.dtype} {wl.shape} ({space})", unit="TFLOP/s", total=trials,
                          initial=done, step="trial")
            if (best := _best_tflops(work_dir, wl.flops)) is not None:
                bar.offer(best)
        t0 = time.monotonic()
        if uses_tensor_cores(wl):
            import_tensor_intrin()  # the tuning process itself needs them registered, not only the builders
        builder = builder or make_builder(wl, space, setup)
        runner = runner or make_local_runner(setup)
        offset = phases.log_size()
        ms.tune_tir(mod=wl.mod, target=target, work_dir=str(work_dir), max_trials_global=n,
                    num_trials_per_iter=min(n, 64), space=spec.generator(wl), seed=0,
                    builder=phases.TimedBuilder(builder), runner=phases.TimedRunner(runner))
        wall = time.monotonic() - t0
        compact_database(work_dir)
        new = trials_done(work_dir) - done
        per_trial = wall / max(new, 1)
        _log_chunk(work_dir, done + new, new, wall)
        best = _best_tflops(work_dir, wl.flops)
        bar.update(new)
        if best is not None:
            bar.offer(best)
        bar.write(f"[tuning] {wl.name} {wl.dtype} {wl.shape} ({space}): {done + new}/{trials} trials, "
                  f"{60 * new / wall:.1f} trials/min, best so far "
                  f"{'-' if best is None else f'{best:,.2f} TFLOP/s'}")
        bar.write(_log_phases(work_dir, offset, wall, new))
        if new == 0:  # every candidate failed to build or run: another chunk would loop forever
            bar.write(f"[tuning] stopping: the chunk recorded no trial (see {work_dir / 'logs'})")
            break
    if bar is not None:
        bar.close()
    return open_database(work_dir)


def best_schedule(db: ms.database.Database, wl: Workload, target: tvm.target.Target | None = None) -> s_tir.Schedule:
    """The best tuned schedule of ``wl`` in ``db``; one-line error if the database has none."""
    if uses_tensor_cores(wl):
        import_tensor_intrin()  # the tuned trace names tensor intrinsics
    sch = ms.tir_integration.compile_tir(db, wl.mod["main"], target or cuda_target())
    if sch is None:
        raise RuntimeError(f"no tuned schedule for {wl.name} {wl.dtype} {wl.shape} in the database: tune first")
    return sch


def tuning_history(work_dir: Path, flops: int) -> pd.DataFrame:
    """Per trial, in the order tuned: its GFLOP/s as MetaSchedule measured it, and the best so far.

    Read from the record file line by line: ``get_all_tuning_records`` returns the records sorted fastest
    first, which would make every curve look flat from the first trial.
    """
    rows = []
    for i, line in enumerate(_record_lines(work_dir)):
        secs = [float(s) for s in json.loads(line)[1][1] or []]  # [workload, [trace, run_secs, target, args]]
        ok = bool(secs) and all(np.isfinite(secs)) and min(secs) < 1e9
        rows.append({"trial": i + 1, "gflops": flops / float(np.mean(secs)) / 1e9 if ok else 0.0})
    df = pd.DataFrame(rows, columns=["trial", "gflops"])
    df["best_gflops"] = df["gflops"].cummax()
    return df


def where_it_flattens(history: pd.DataFrame, fraction: float = 0.99) -> dict[str, float]:
    """Where a tuning curve (``tuning_history``) flattens: ``trials``; ``best_gflops`` at the end; ``flat_from``, the
    first trial whose best so far is within ``fraction`` of the final best (0 without a successful trial); and
    ``half_budget``, the best after half the trials as a fraction of the final best (near 1: the second half
    found little; well below: the curve is still rising and a larger budget would likely pay)."""
    best = history["best_gflops"].to_numpy()
    final = float(best[-1]) if len(best) else 0.0
    if final <= 0:
        return {"trials": len(best), "best_gflops": 0.0, "flat_from": 0, "half_budget": 0.0}
    return {"trials": len(best), "best_gflops": final, "flat_from": int(np.argmax(best >= fraction * final)) + 1,
            "half_budget": float(best[(len(best) - 1) // 2]) / final}


def tuner_vs_harness(work_dir: Path, m: Measurement) -> str:
    """One line: the best trial's rate as MetaSchedule's runner recorded it in ``work_dir`` beside the rate the
    harness measured for the replayed kernel ``m`` (verified, L2 flushed, median): where they differ, the tuner
    ranked its candidates by a number the notebook's measurement does not reproduce."""
    recorded = float(tuning_history(work_dir, m.workload.flops)["gflops"].max())
    if not recorded > 0:
        return f"{m.variant}: the database holds no successful measurement"
    return (f"{m.variant}: tuner recorded {recorded / 1e3:.2f} TFLOP/s for its best trial, the harness measures "
            f"{m.gflops / 1e3:.2f} TFLOP/s ({m.gflops / recorded:.2f}x)")


#: CLI: the sizes each workload takes, in order.
CLI_SIZES = {"gemm": ("M", "N", "K"), "conv2d": ("N", "C", "H", "W", "K", "R", "S", "STRIDE", "PAD")}


def _cli_workloads(name: str, sizes: list[int], dtype: str, layout: str | None) -> list[Workload]:
    """The workloads the CLI names: one per group of sizes (several groups tune one after the other in one process,
    which starts TVM once); one-line ValueError for a size count that is no multiple of a group, or a layout GEMM
    has not."""
    from tirbench.workloads import conv2d, gemm

    names = CLI_SIZES[name]
    if not sizes or len(sizes) % len(names):
        raise ValueError(f"{name} takes groups of {len(names)} sizes ({' '.join(names)}), got {len(sizes)}")
    if name == "gemm" and layout is not None:
        raise ValueError(f"--layout={layout}: only conv2d has a layout")
    groups = [sizes[i:i + len(names)] for i in range(0, len(sizes), len(names))]
    if name == "gemm":
        return [gemm(*group, dtype=dtype) for group in groups]
    return [conv2d(*group, layout=layout or "NCHW", dtype=dtype) for group in groups]


def _work_dir(root: Path, wl: Workload, space: str, db: Path | None, target_kind: str) -> Path:
    """The CLI's database for ``wl``: ``work_dir_for`` (under ``db`` instead of ``results/tuning`` if given), with
    ``_llvm`` appended for a CPU tuning run so that it never mixes with a GPU database."""
    wd = work_dir_for(root, wl, space)
    if db is not None:
        wd = db / wd.relative_to(root / "results" / "tuning")
    return wd.with_name(f"{wd.name}_llvm") if target_kind == "llvm" else wd


def _device_name(address: tracker.RPCAddress | None, target_kind: str) -> str:
    """The GPU the trials run on: device 0 here, or a server's (one session opened through the tracker); "cpu"."""
    if target_kind == "llvm":
        return "cpu"
    if address is None:
        return require_cuda_gpu().device_name
    return tracker.remote_gpu_name(address)


def main(argv: list[str] | None = None) -> int:
    from tirbench.core.paths import project_root

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=list(CLI_SIZES))
    p.add_argument("sizes", type=int, nargs="+", metavar="SIZE",
                   help="; ".join(f"{name}: {' '.join(sizes)}" for name, sizes in CLI_SIZES.items())
                   + " (several groups: tuned one after the other)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--layout", default=None, help="conv2d only: NCHW (default), NHWC or HWCN")
    p.add_argument("--trials", type=int, required=True)
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--seconds", type=float, default=None, help="stop before this many seconds have passed")
    p.add_argument("--space", choices=list(SPACES), default="default",
                   help="; ".join(f"{name}: {space.description}" for name, space in SPACES.items()))
    p.add_argument("--setup", choices=throughput.SETUPS, default="tuned",
                   help="tuned: measured as the harness measures (L2 flushed before each launch) with the trial-rate "
                        "cuts; stock: MetaSchedule's own builder and measurement")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY", default=None,
                   help="measure on the RPC servers registered under KEY with the tracker at HOST:PORT "
                        "(MetaSchedule's RPCRunner; `python -m tirbench.tuning.rpc.cluster tune ...` starts them)")
    p.add_argument("--target", choices=("cuda", "llvm"), default="cuda",
                   help="llvm: tune for this CPU (tests, `rpc_cluster --llvm`); databases get an _llvm suffix")
    p.add_argument("--db", type=Path, default=None,
                   help="put the databases under this directory instead of results/tuning (throughput.csv stays)")
    a = p.parse_args(argv)
    deadline = None if a.seconds is None else time.monotonic() + a.seconds
    try:
        workloads = _cli_workloads(a.workload, a.sizes, a.dtype, a.layout)
        if a.target == "llvm" and a.space != "default":
            raise ValueError(f"--target llvm tunes MetaSchedule's own rules only, not --space {a.space}")
        address = tracker.parse_rpc(a.rpc) if a.rpc else None
        servers = tracker.check(address) if address else 1  # before any database is opened
        root = project_root()
        now = dt.datetime.now(dt.timezone.utc)
        run_id, gpu = f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}", None
        target = cpu_target() if a.target == "llvm" else None
        builder = runner = None  # made once, on the first chunk that tunes, for every workload (one dtype, one space)
        for wl in workloads:
            work_dir = _work_dir(root, wl, a.space, a.db, a.target)
            t0, done = time.monotonic(), trials_done(work_dir)
            if done >= a.trials:
                print(f"[tuning] {wl.name} {wl.shape} {wl.dtype}: {done} trials recorded, budget {a.trials}: "
                      "nothing to tune", flush=True)
                continue
            if builder is None:
                gpu = _device_name(address, a.target)
                t_builder = time.monotonic()
                builder = make_builder(wl, a.space, a.setup)
                t_runner = time.monotonic()
                runner = make_rpc_runner(a.setup, address, servers) if address else make_local_runner(a.setup)
                print(f"[tuning] {a.setup} setup on {servers} x {gpu} ({'rpc' if address else 'local'} runner): "
                      f"builder made in {t_runner - t_builder:.1f} s, runner in {time.monotonic() - t_runner:.1f} s",
                      flush=True)
            seconds = None if deadline is None else deadline - time.monotonic()
            tune(wl, work_dir, trials=a.trials, chunk=a.chunk, seconds=seconds, target=target, space=a.space,
                 setup=a.setup, builder=builder, runner=runner)
            new, wall = trials_done(work_dir) - done, time.monotonic() - t0
            if new > 0:
                best = tuning_history(work_dir, wl.flops)["best_gflops"]
                throughput.append_rows(throughput.path_for(root), [{
                    "run_id": run_id, "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "gpu": gpu, "gpus": servers, "runner": "rpc" if address else "local", "setup": a.setup,
                    "workload": wl.name, "shape": wl.shape, "dtype": wl.dtype, "space": a.space, "trials": new,
                    "seconds": round(wall, 1), "trials_per_min": round(60 * new / wall, 2),
                    "best_gflops": round(float(best.iloc[-1]), 2)}])
    except (ValueError, RuntimeError) as err:  # bad input, no GPU, no tracker or server: one line, exit status 2
        p.exit(2, f"{p.prog}: error: {err}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

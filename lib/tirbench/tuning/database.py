"""A MetaSchedule JSON database in its work directory: open it (a record cut short by a killed run dropped first),
compact its records, read them in the order they were measured, and replay its best schedule.

MetaSchedule appends one JSON line per workload (``database_workload.json``: ``[hash, module]``) and per measured
trial (``database_tuning_record.json``: ``[workload, [trace, run_secs, target, args]]``, ``workload`` the line of
the workload file, from 0). A whole model's database in git keeps each workload's hash only (``stub_workloads``):
the module is the model's own task of that hash (``tasks_database``, ``fill_workloads``).
"""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Callable

import numpy as np
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.core.atomic import write_atomic
from tirbench.core.machine import cuda_target
from tirbench.schedules.intrinsics.registry import import_tensor_intrin
from tirbench.tuning.spaces import uses_tensor_cores
from tirbench.workloads.base import Workload

#: The file of workloads, one JSON line each.
WORKLOAD_FILE = "database_workload.json"
#: The file of measured trials, one JSON line each.
RECORD_FILE = "database_tuning_record.json"
#: The files of a MetaSchedule JSON database.
DATABASE_FILES = (WORKLOAD_FILE, RECORD_FILE)
#: The folder under ``results/tuning`` of whole-model databases (``tuning.relax_model``): every task of a model in
#: one database, so no one workload's (notebook 00's tuning curves leave them out; ``tuning.archive`` trims per task).
MODEL_DATABASES = "relax"


def is_model_database(work_dir: Path) -> bool:
    """True for a whole model's database (under ``MODEL_DATABASES``)."""
    return work_dir.parent.name == MODEL_DATABASES


def open_database(work_dir: Path) -> ms.database.JSONDatabase:
    """The JSON database in ``work_dir`` (made if missing; a cut-off last record dropped first, see
    ``repair_database``). A tensor-core database (``work_dir_for`` names it ``float16_...`` / ``int8_...``) has
    records that name tensor intrinsics, which must be registered to read it."""
    if work_dir.name.startswith(("float16_", "int8_")):
        import_tensor_intrin()
    work_dir.mkdir(parents=True, exist_ok=True)
    repair_database(work_dir)
    return ms.database.JSONDatabase(work_dir=str(work_dir))


def json_lines(path: Path) -> list[str]:
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


def record_lines(work_dir: Path) -> list[str]:
    """The database's complete tuning records, one JSON line each, in the order they were measured."""
    return json_lines(work_dir / RECORD_FILE)


def tuned_arch(work_dir: Path) -> str | None:
    """The architecture the database's first record was tuned for (its target's ``arch``: "sm_80"); None for an
    empty database."""
    lines = record_lines(work_dir)
    return str(json.loads(lines[0])[1][2].get("arch")) if lines else None


def record_workload(line: str) -> int:
    """The workload a tuning record measured: its line of the workload file, from 0."""
    return int(json.loads(line)[0])


def run_seconds(line: str) -> float | None:
    """A record's mean measured run time in seconds; None for a trial that failed to build or run."""
    secs = [float(s) for s in json.loads(line)[1][1] or []]
    ok = bool(secs) and all(np.isfinite(secs)) and min(secs) < 1e9
    return float(np.mean(secs)) if ok else None


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
        lines = json_lines(path)
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


def _compact_workload(line: str) -> str:
    """A workload line, ``[hash, base64(8-byte length + module JSON)]``, with the module's JSON re-encoded without
    indentation (MetaSchedule writes it indented: 60 KB for a conv2d, 30 KB compact)."""
    shash, blob = json.loads(line)
    raw = base64.b64decode(blob)
    (size,) = struct.unpack("<Q", raw[:8])
    body = raw[8:8 + size]
    if not body.startswith(b"{\n"):
        return line
    text = json.dumps(json.loads(body), separators=(",", ":")).encode()
    return json.dumps([shash, base64.b64encode(struct.pack("<Q", len(text)) + text).decode()], separators=(",", ":"))


def _rewrite_lines(path: Path, compact_line: Callable[[str], str]) -> int:
    """Rewrite (atomically) a database file with each line compacted; the bytes saved."""
    if not path.exists():
        return 0
    compact = "".join(compact_line(line) + "\n" for line in json_lines(path))
    saved = path.stat().st_size - len(compact.encode())
    if saved > 0:
        write_atomic(path, compact.encode())
    return max(saved, 0)


def compact_database(work_dir: Path) -> int:
    """Rewrite (atomically) the database's files compactly: in the tuning records, the objects their traces embed
    as JSON text (index maps of ``TransformLayout``, with spans), and in the workload file the module's JSON, both
    of which MetaSchedule writes indented (over half of a tensor-core record). Same records, same order, same
    meaning. Returns the bytes saved."""
    return (_rewrite_lines(work_dir / RECORD_FILE,
                           lambda line: json.dumps(_compact_embedded(json.loads(line)), separators=(",", ":")))
            + _rewrite_lines(work_dir / WORKLOAD_FILE, _compact_workload))


def stub_workloads(work_dir: Path) -> int:
    """Rewrite (atomically) the workload file with each line cut to ``[hash]``, its module left out: in a whole
    model's database, the module is the model's own task of that hash (30-50 KB a task). Returns the bytes saved."""
    return _rewrite_lines(work_dir / WORKLOAD_FILE, lambda line: json.dumps(json.loads(line)[:1]))


def has_stubs(work_dir: Path) -> bool:
    """True where some workload of the database is a stub (``stub_workloads``)."""
    return any(len(json.loads(line)) == 1 for line in json_lines(work_dir / WORKLOAD_FILE))


def _workload_hash(mod: tvm.IRModule) -> str:
    """``mod``'s hash as MetaSchedule's workload file writes it (the first item of its line)."""
    return ms.database.Workload(mod).as_json()[0]


def _workload_line(mod: tvm.IRModule) -> str:
    """``mod``'s line of a workload file, as MetaSchedule writes it (compacted): its hash first."""
    return _compact_workload(json.dumps(ms.database.Workload(mod).as_json(), separators=(",", ":")))


def fill_workloads(work_dir: Path, mods: list[tvm.IRModule]) -> int:
    """Put back (atomically) the module of each stub of the workload file (``stub_workloads``) from ``mods``, the
    model's tasks, matched by hash; one-line RuntimeError where none has a stub's hash. Returns the stubs filled."""
    path, lines = work_dir / WORKLOAD_FILE, json_lines(work_dir / WORKLOAD_FILE)
    stubs = [json.loads(line)[0] for line in lines if len(json.loads(line)) == 1]
    if not stubs:
        return 0
    full = {json.loads(line)[0]: line for line in map(_workload_line, mods)}
    if missing := [h for h in stubs if h not in full]:
        raise RuntimeError(f"{path}: {len(missing)} of its workloads are none of the model's tasks (hash "
                           f"{missing[0]}): unpack the full database (make tuning-databases DEST=results/tuning)")
    write_atomic(path, "".join(f"{full.get(json.loads(line)[0], line)}\n" for line in lines).encode())
    return len(stubs)


def tasks_tuned(work_dir: Path) -> tuple[int, int]:
    """A whole model's database: how many of its tasks have a record, and how many tasks it knows (MetaSchedule
    commits every task's workload when tuning starts; a task without a record is left to DLight)."""
    workloads = len(json_lines(work_dir / WORKLOAD_FILE))
    return len({record_workload(line) for line in record_lines(work_dir)}), workloads


def recorded_tasks(work_dir: Path, mods: list[tvm.IRModule]) -> list[bool]:
    """For each of ``mods`` (a model's tasks), whether the database in ``work_dir`` has a record of it (matched by
    the hash of its workload, as ``tasks_database``; a failed trial counts: the task was tuned)."""
    hashes = [json.loads(line)[0] for line in json_lines(work_dir / WORKLOAD_FILE)]
    measured = {hashes[record_workload(line)] for line in record_lines(work_dir)}
    return [_workload_hash(mod) in measured for mod in mods]


def tasks_database(work_dir: Path, mods: list[tvm.IRModule]) -> ms.database.MemoryDatabase:
    """The records of the database in ``work_dir`` (a cut-off last line dropped first) of each of ``mods`` (a model's
    tasks), matched by the hash of the workload they measured, in memory: what MetaSchedule's JSON database of the
    same records gives for these tasks, stubs (``stub_workloads``) or not."""
    repair_database(work_dir)
    db = ms.database.MemoryDatabase()
    index = {json.loads(line)[0]: i for i, line in enumerate(json_lines(work_dir / WORKLOAD_FILE))}
    workloads = {index[h]: db.commit_workload(mod) for mod in mods
                 if (h := _workload_hash(mod)) in index}
    for line in record_lines(work_dir):
        if (wl := workloads.get(record_workload(line))) is not None:
            db.commit_tuning_record(ms.database.TuningRecord.from_json(json.loads(line)[1], wl))
    return db


def best_schedule(db: ms.database.Database, wl: Workload, target: tvm.target.Target | None = None) -> s_tir.Schedule:
    """The best tuned schedule of ``wl`` in ``db``; one-line error if the database has none."""
    if uses_tensor_cores(wl):
        import_tensor_intrin()  # the tuned trace names tensor intrinsics
    sch = ms.tir_integration.compile_tir(db, wl.mod["main"], target or cuda_target())
    if sch is None:
        raise RuntimeError(f"no tuned schedule for {wl.name} {wl.dtype} {wl.shape} in the database: tune first")
    return sch

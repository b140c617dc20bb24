"""The tuning databases in git are trimmed: per workload the ``KEEP`` fastest records (enough to replay the best
schedule and, where that is a seed's, the search's best beside it: ``replay.search_best``, which reads the archive
where no kept record is the search's) and ``tuning_history.csv`` (every trial, for the curves and ``trials_done``).
A whole model's database (``tuning.relax_model``, every task a workload) keeps each task's ``MODEL_KEEP`` fastest
records, and of each task only its hash (``database.stub_workloads``: the model gives the module back). The full
databases live in ``results/tuning/databases.tar.xz`` (xz packs them 100:1).

    python -m tirbench.tuning.archive unpack [DEST]   # full databases under DEST (default build/tuning-databases)
    python -m tirbench.tuning.archive pack            # archive the full databases under results/tuning, then
    python -m tirbench.tuning.archive trim            # trim them (pack refuses a trimmed one: unpack it first)

``make tuning-databases DEST=...`` runs ``unpack``. With ``DEST=results/tuning`` the full databases replace the
trimmed ones, unless a trimmed one has trials the archive lacks (one line, exit status 2); elsewhere, tune or replay
them with ``python -m tirbench.tuning ... --db DEST``.
"""
from __future__ import annotations

import argparse
import io
import sys
import tarfile
from pathlib import Path

from tirbench.core.atomic import write_atomic
from tirbench.tuning.database import (DATABASE_FILES, RECORD_FILE, has_stubs, is_model_database, record_lines,
                                      record_workload, run_seconds, stub_workloads)
from tirbench.tuning.history import HISTORY_FILE, Trial, history_trials, sync_history, trials_done, write_history

#: Records kept per workload in git (a tensor-core record is 15-25 KB): the best, and the next, which so far has
#: always been the search's best where the best is a seed's. A search resumed on a trimmed database starts from
#: these; unpack the archive to start it from every record.
KEEP = 2
#: Records kept per task of a whole model's database: the best, all its replay reads (its tasks have no seeds, so no
#: search's best beside a seed's); an fp16 model's tensor-core tasks' records are 15-25 KB each.
MODEL_KEEP = 1
#: The archive of the full databases, under the project root.
ARCHIVE = Path("results") / "tuning" / "databases.tar.xz"
#: The files of a database the archive holds.
ARCHIVED_FILES = (*DATABASE_FILES, HISTORY_FILE)


def database_dirs(tuning_dir: Path) -> list[Path]:
    """Every database under ``tuning_dir``: one workload's (``<workload>/<name>/``) and a whole model's
    (``relax/<model>_<dtype>_b<batch>/``), sorted."""
    return sorted(p.parent for p in tuning_dir.glob(f"*/*/{RECORD_FILE}"))


def is_trimmed(work_dir: Path) -> bool:
    """True when the record file lacks some of the database's trials, or the workload file some modules."""
    return len(record_lines(work_dir)) < trials_done(work_dir) or has_stubs(work_dir)


def _fastest(lines: list[str], keep: int) -> list[int]:
    """The indices of the ``keep`` fastest records of each workload (the first tuned of equal ones), in order."""
    timed: dict[int, list[tuple[float, int]]] = {}
    for i, line in enumerate(lines):
        if (secs := run_seconds(line)) is not None:
            timed.setdefault(record_workload(line), []).append((secs, i))
    return sorted(i for runs in timed.values() for _, i in sorted(runs)[:keep])


def trim_database(work_dir: Path, keep: int | None = None) -> int:
    """Keep the ``keep`` fastest records of each workload (in the order tuned; by default ``KEEP``, ``MODEL_KEEP`` for
    a whole model's database) and the whole history beside them, both rewritten atomically; a whole model's workloads
    cut to their hashes (``stub_workloads``). Returns the records dropped."""
    sync_history(work_dir)
    lines = record_lines(work_dir)
    kept = _fastest(lines, keep if keep is not None else MODEL_KEEP if is_model_database(work_dir) else KEEP)
    if len(kept) < len(lines):
        renumber = {old + 1: new + 1 for new, old in enumerate(kept)}
        write_history(work_dir, [Trial(t.trial, t.run_s, t.chunk, renumber.get(t.record, 0))
                                 for t in history_trials(work_dir)])
        write_atomic(work_dir / RECORD_FILE, "".join(f"{lines[i]}\n" for i in kept).encode())
    if is_model_database(work_dir):
        stub_workloads(work_dir)
    return len(lines) - len(kept)


def pack(root: Path) -> Path:
    """Write the archive of every database under ``results/tuning`` (each whole, its history brought up to date);
    one-line RuntimeError for a trimmed one (``unpack`` it into ``results/tuning`` before tuning it further)."""
    tuning_dir = root / "results" / "tuning"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9) as tar:
        for work_dir in database_dirs(tuning_dir):
            if is_trimmed(work_dir):
                raise RuntimeError(f"{work_dir.relative_to(root)} is trimmed: unpack the archive into results/tuning "
                                   "first, so that the archive keeps every record")
            sync_history(work_dir)
            for name in ARCHIVED_FILES:
                info = tar.gettarinfo(work_dir / name, arcname=str((work_dir / name).relative_to(tuning_dir)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with (work_dir / name).open("rb") as f:
                    tar.addfile(info, f)
    write_atomic(root / ARCHIVE, buf.getvalue())
    return root / ARCHIVE


def _archived(root: Path) -> dict[Path, dict[str, bytes]]:
    """The archive's databases: relative work directory -> file name -> contents."""
    found: dict[Path, dict[str, bytes]] = {}
    with tarfile.open(root / ARCHIVE, mode="r:xz") as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            if not member.isfile() or path.is_absolute() or ".." in path.parts or path.name not in ARCHIVED_FILES:
                raise RuntimeError(f"{root / ARCHIVE}: unexpected member {member.name!r}")
            found.setdefault(path.parent, {})[path.name] = tar.extractfile(member).read()
    return found


def archived_database(root: Path, work_dir: Path, dest: Path | None = None) -> Path:
    """The full database of ``work_dir`` (a database under ``root/results/tuning``) from the archive, written under
    ``dest`` (default ``root/build/tuning-databases``) at the same relative path (kept there where a whole copy with as
    many trials is there already), which is returned; one-line
    RuntimeError where the archive lacks it or holds fewer trials than ``work_dir``."""
    rel = work_dir.relative_to(root / "results" / "tuning")
    out = (dest or root / "build" / "tuning-databases") / rel
    if (out / RECORD_FILE).exists() and not is_trimmed(out) and trials_done(out) == trials_done(work_dir):
        return out  # written before
    files = _archived(root).get(rel)
    if files is None or set(files) != set(ARCHIVED_FILES):
        raise RuntimeError(f"{root / ARCHIVE} holds no whole copy of {rel}: pack the full databases first")
    for name, data in files.items():
        write_atomic(out / name, data)
    if trials_done(out) < trials_done(work_dir):
        raise RuntimeError(f"{root / ARCHIVE} holds {trials_done(out)} trials of {rel}, the database "
                           f"{trials_done(work_dir)}: pack the full databases again")
    return out


def unpack(root: Path, dest: Path) -> list[Path]:
    """Put the full databases under ``dest`` (their files replaced, logs left); one-line RuntimeError, before any
    is written, where a database there has more trials than the archived one. Returns the work directories."""
    archived = _archived(root)
    for rel, files in archived.items():
        there = trials_done(dest / rel)
        ours = len(files[HISTORY_FILE].decode().splitlines()) - 1  # a whole history: a row per trial
        if there > ours:
            raise RuntimeError(f"{dest / rel} has {there} trials, the archive {ours}: it would lose trials")
    for rel, files in archived.items():
        for name, data in files.items():
            write_atomic(dest / rel / name, data)
    return [dest / rel for rel in archived]


def main(argv: list[str] | None = None) -> int:
    from tirbench.core.paths import project_root

    p = argparse.ArgumentParser(prog="python -m tirbench.tuning.archive", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    u = sub.add_parser("unpack", help="put the full databases under DEST")
    u.add_argument("dest", nargs="?", type=Path, default=Path("build") / "tuning-databases")
    sub.add_parser("pack", help="archive the full databases under results/tuning")
    sub.add_parser("trim", help=f"keep the {KEEP} fastest records of each workload under results/tuning "
                               f"({MODEL_KEEP} of each task of a whole model)")
    a = p.parse_args(argv)
    root = project_root()
    try:
        if a.command == "unpack":
            dirs = unpack(root, a.dest if a.dest.is_absolute() else root / a.dest)
            print(f"{len(dirs)} full tuning databases under {a.dest}")
        elif a.command == "pack":
            print(f"wrote {pack(root).relative_to(root)}")
        else:
            dropped = sum(trim_database(wd) for wd in database_dirs(root / "results" / "tuning"))
            print(f"dropped {dropped} records; kept the {KEEP} fastest of each workload ({MODEL_KEEP} of each task "
                  "of a whole model)")
    except RuntimeError as err:
        p.exit(2, f"{p.prog}: error: {err}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The results CSV: its columns, an atomic appender, strict readers for the latest run, and the pruning of runs that
later runs have measured again, or of their layers where a notebook reads each layer from its latest run (git history
keeps them; the clone stays small).

Columns added after files were written (``ADDED_COLUMNS``) come last: a file written before one was added has a
header without it, is read with it empty, and gets it (an empty field on each of its old rows, every other byte
kept) when rows are next appended to it."""
from __future__ import annotations

import csv
import datetime as dt
import io
import re
import uuid
from pathlib import Path
from typing import Callable, Iterable, Mapping

import pandas as pd

from tirbench.core.atomic import write_atomic
from tirbench.core.errors import OneLineError
from tirbench.core.gpu import ArchError, arch_for, parse_arch, peak_key

#: Columns added to the schema after files were written, in the order added (see the module docstring).
#: ``tuned_best``: on a MetaSchedule row, whether the replayed best record's kernel is one of the space's seeds (a hand
#: candidate measured first: ``"seed"``) or one the search found (``"search"``); empty on other rows, and unknown
#: (empty) on rows written before the column existed (``tirbench.tuning.labels.seed_labels`` labels those).
#: ``arch``: the architecture the row's kernel was built for ("sm_80", "sm_89"); a vendor library's row (cuBLAS,
#: cuDNN, torch) has the device's own (``arch_for(compute_capability)``: the library runs its code for the device).
#: Rows written before the column existed read it as ``build_arch`` says (an H100/H200's own: Hopper's "a" target).
ADDED_COLUMNS = ["tuned_best", "arch"]
#: Column order of every results/<notebook>/results.csv (the first 18 are the published schema).
COLUMNS = ["run_id", "timestamp", "gpu", "driver", "tvm_version", "notebook", "workload", "shape", "dtype",
           "variant", "provider", "trials", "median_ms", "p20_ms", "p80_ms", "gflops", "gbps", "verified",
           "repeats", "compute_capability", *ADDED_COLUMNS]
#: ``tuned_best`` values: a seed's kernel, the search's, or not a tuned row (or not known).
TUNED_BEST = ("seed", "search", "")

#: The columns that say which run a row comes from: every CSV a run writes starts with them.
RUN_FIELDS = COLUMNS[:5]

#: What a row measures: a later row of the same key supersedes it (per GPU: notebook 00 shows each GPU's latest).
ROW_KEY = ["gpu", "arch", "workload", "shape", "dtype", "variant", "provider"]
#: The most recent runs a results CSV keeps whatever later runs measured (`rerun` reads older ones from git).
KEEP_RUNS = 1

#: ``provider`` values a row may carry.
PROVIDERS = ("tvm", "metaschedule", "cublas", "cublaslt", "cudnn", "torch")


class ResultsFileError(OneLineError):
    """A results CSV that is not whole: other columns than ``COLUMNS``, or a line cut short (a crash mid-write of
    a writer other than ``append_rows``, a bad merge). Reading it would silently drop or blank rows."""


def accepted_headers(columns: list[str]) -> list[list[str]]:
    """The headers a file of ``columns`` may have: ``columns``, or ``columns`` without a trailing run of
    ``ADDED_COLUMNS`` (a file written before they were added)."""
    headers = [columns]
    while headers[-1] and headers[-1][-1] in ADDED_COLUMNS:
        headers.append(headers[-1][:-1])
    return headers


def check_csv(path: Path, text: str, columns: list[str] = COLUMNS) -> list[str]:
    """The header of ``text``, the CSV at ``path`` (``columns`` for an empty one); ResultsFileError naming ``path``
    unless it is one of ``accepted_headers(columns)`` with rows of as many fields, each ending with a newline."""
    if not text:
        return columns
    lines = list(csv.reader(io.StringIO(text)))
    header = lines[0]
    if header not in accepted_headers(columns):
        extra = [c for c in header if c not in columns]
        missing = [c for c in columns if c not in header]
        raise ResultsFileError(f"{path}: columns differ from the schema (unknown: {', '.join(extra) or '-'}; "
                               f"missing: {', '.join(missing) or '-'}): move it aside, no row of it is read")
    if not text.endswith("\n"):
        raise ResultsFileError(f"{path}: the last line has no newline (a write cut short): repair or move it aside")
    for number, fields in enumerate(lines[1:], start=2):
        if len(fields) != len(header):
            raise ResultsFileError(f"{path}: line {number} has {len(fields)} fields, expected {len(header)}: "
                                   f"repair or move it aside")
    return header


def new_run_id(now: dt.datetime) -> str:
    """A run's id: its UTC start to the second and six random hex digits (``20261127T191007Z-181291``)."""
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def require_columns(columns: list[str], what: str = "row") -> Callable[[Mapping[str, object]], None]:
    """A validator for ``append_csv``: ValueError naming the ``columns`` a row lacks (``what``: the row's kind)."""
    def validate(row: Mapping[str, object]) -> None:
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"{what} lacks columns: {', '.join(missing)}")
    return validate


def validate_row(row: Mapping[str, object]) -> None:
    """ValueError for a row that lacks a column (an ``ADDED_COLUMNS`` one it lacks is written empty), names an unknown
    provider or ``tuned_best``, has an ``arch`` that is not an architecture ("sm_80"), or is not verified."""
    missing = [c for c in COLUMNS if c not in row and c not in ADDED_COLUMNS]
    if missing:
        raise ValueError(f"result row lacks columns: {', '.join(missing)}")
    if row["provider"] not in PROVIDERS:
        raise ValueError(f"provider {row['provider']!r} is not one of {', '.join(PROVIDERS)}")
    if row.get("tuned_best", "") not in TUNED_BEST:
        raise ValueError(f"tuned_best {row.get('tuned_best')!r} is not one of {', '.join(map(repr, TUNED_BEST))}")
    if row.get("arch", ""):
        try:
            parse_arch(row["arch"], "arch")
        except ArchError as err:
            raise ValueError(str(err)) from None
    if row["verified"] is not True:
        raise ValueError("only verified kernels get a result row")


def append_rows(path: Path, rows: Iterable[Mapping[str, object]]) -> int:
    """Append rows to ``path`` atomically: write old + new content to a temp file beside it, then rename.

    A crash or error at any point leaves the previous file untouched. Returns the number of rows appended.
    """
    return append_csv(path, rows, COLUMNS, validate_row)


def append_csv(path: Path, rows: Iterable[Mapping[str, object]], columns: list[str],
               validate: Callable[[Mapping[str, object]], None]) -> int:
    """Validate ``rows``, then append them (``columns`` in order) to the CSV at ``path`` atomically, writing the
    header into a new file, and into a file written before ``ADDED_COLUMNS`` their empty fields (see the module
    docstring); refuses a file that is not whole (``check_csv``). Returns the number appended."""
    rows = list(rows)
    for row in rows:
        validate(row)
    if not rows:
        return 0
    path = Path(path)
    old = path.read_text() if path.exists() else ""
    header = check_csv(path, old, columns)  # never append to a file that is not whole
    if header != columns:
        pad = "," * (len(columns) - len(header))
        rows_text = "".join(line[:-1] + pad + "\n" for line in old.splitlines(keepends=True)[1:])
        old = ",".join(columns) + "\n" + rows_text
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    if not old:
        writer.writeheader()
    writer.writerows({c: row[c] if c in row or c not in ADDED_COLUMNS else "" for c in columns} for row in rows)
    write_atomic(path, (old + buf.getvalue()).encode())
    return len(rows)


def read_results(path: Path, columns: list[str] = COLUMNS) -> pd.DataFrame:
    """All rows of a results CSV, or of another CSV of ``columns`` a run writes (an empty frame of them if there is
    none), ``ADDED_COLUMNS`` empty ("") where a row has none, ``arch`` as ``build_arch`` reads it; ResultsFileError
    for a file that is not whole (``check_csv``)."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    check_csv(path, text, columns)
    if not text:
        return pd.DataFrame(columns=columns)
    added = {c: str for c in ADDED_COLUMNS if c in columns}
    df = pd.read_csv(io.StringIO(text), dtype={"shape": str, "run_id": str, **added}).reindex(columns=columns)
    for c in added:
        df[c] = df[c].astype(object).fillna("").astype(str)
    if "arch" in added and "compute_capability" in columns:
        df["arch"] = [build_arch(str(gpu), arch, cc) for gpu, arch, cc in
                      zip(df["gpu"], df["arch"], df["compute_capability"])]
    return df


#: The GPUs of the rows recorded before the ``arch`` column: every one of them was built for the GPU's own
#: architecture (``core.gpu.arch_for`` of its compute capability, 9.0: Hopper's "a" target).
BEFORE_ARCH_GPUS = ("H100", "H200")


def build_arch(gpu: str, arch: str, compute_capability: object) -> str:
    """The architecture a row's kernel was built for: its ``arch``; where that is empty (recorded before the column),
    on an H100/H200 the GPU's own (``arch_for(compute_capability)``: what every such row was built for), else ""
    (not known)."""
    return arch or (arch_for(str(compute_capability)) if peak_key(gpu) in BEFORE_ARCH_GPUS else "")


def is_ptx(arch: str, compute_capability: object) -> bool:
    """Whether code built for ``arch`` ran as PTX on a GPU of ``compute_capability`` ("9.0"): an older architecture
    than the GPU's own, which the driver compiled. False for an unknown (empty) ``arch`` or compute capability."""
    cc = str(compute_capability)
    if not arch or not re.fullmatch(r"\d+\.\d+", cc):
        return False
    return parse_arch(arch)[0] < parse_arch(arch_for(cc))[0]


def gpu_label(gpu: str, arch: str, compute_capability: object) -> str:
    """What a table names a row's GPU by: the GPU, or for code built for an older architecture than the GPU's,
    "sm_80 code on NVIDIA H100 80GB HBM3 (PTX)"."""
    return f"{arch} code on {gpu} (PTX)" if is_ptx(arch, compute_capability) else gpu


def gpu_labels(df: pd.DataFrame) -> pd.Series:
    """``gpu_label`` of each row of ``df`` (rows of results CSVs; a frame without ``arch`` names its GPUs)."""
    if "arch" not in df or "compute_capability" not in df:
        return df["gpu"].astype(str)
    return pd.Series([gpu_label(str(g), str(a), c) for g, a, c in zip(df["gpu"], df["arch"], df["compute_capability"])],
                     index=df.index, dtype=object)


def ptx_rows(df: pd.DataFrame) -> pd.Series:
    """Per row of ``df``, whether it is ``is_ptx`` (all False for a frame without ``arch``)."""
    if "arch" not in df or "compute_capability" not in df:
        return pd.Series(False, index=df.index)
    return pd.Series([is_ptx(str(a), c) for a, c in zip(df["arch"], df["compute_capability"])], index=df.index,
                     dtype=bool)


def run_label(run: pd.DataFrame) -> str:
    """What a caption names the GPU of ``run`` (one run's rows) by: its GPU, or for a run built for an older
    architecture, its PTX rows' ``gpu_label`` (and "beside native rows" where it also has rows native to the GPU: the
    vendor's)."""
    ptx = ptx_rows(run)
    if not ptx.any():
        return str(run["gpu"].iloc[0])
    return gpu_labels(run)[ptx].iloc[0] + (" beside native rows" if (~ptx).any() else "")


def native_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` from runs none of whose rows is PTX (``ptx_rows``): the runs whose kernels may be compared
    with a vendor's (a run built for an older architecture measures the vendor natively beside its PTX code)."""
    if df.empty:
        return df
    return df[~df["run_id"].isin(df.loc[ptx_rows(df), "run_id"])]


def latest_run(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the most recent run (by timestamp) in ``df``."""
    if df.empty:
        return df
    last = df.sort_values("timestamp")["run_id"].iloc[-1]
    return df[df["run_id"] == last].reset_index(drop=True)


def latest_run_where(df: pd.DataFrame, rows: pd.Series) -> pd.DataFrame:
    """All rows of the most recent run among those with a row where ``rows`` holds (a notebook run may measure a
    part of what the notebook can: ``-p configs '[fp16]'``); empty if none has one."""
    return latest_run(df[df["run_id"].isin(df.loc[rows, "run_id"])]) if len(df) else df


def _by_time(df: pd.DataFrame) -> tuple[pd.DataFrame, set[str]]:
    """``df``'s rows oldest first (by timestamp, stable), and its ``KEEP_RUNS`` most recent runs."""
    ordered = df.sort_values("timestamp", kind="stable")
    return ordered, set(ordered.drop_duplicates("run_id", keep="last")["run_id"].iloc[-KEEP_RUNS:])


def needed_runs(df: pd.DataFrame) -> set[str]:
    """The runs of ``df`` to keep: each holding the newest row (by timestamp) of some ``ROW_KEY``, and the
    ``KEEP_RUNS`` most recent."""
    if df.empty:
        return set()
    ordered, recent = _by_time(df)
    return set(ordered.drop_duplicates(ROW_KEY, keep="last")["run_id"]) | recent


#: What a run measured of one layer or shape (``prune_superseded(..., by_shape=True)``).
SHAPE_KEY = ["gpu", "arch", "workload", "shape"]


def kept_rows(df: pd.DataFrame, by_shape: bool = False) -> pd.Series:
    """Which rows of ``df`` to keep: those of the runs ``needed_runs`` keeps; ``by_shape`` (a notebook that reads each
    layer from its latest run, as notebook 10 its networks): less a kept run's rows of a ``SHAPE_KEY`` group that
    later rows of the same ``ROW_KEY`` supersede one and all (every dtype, variant and provider, so what is left keeps
    its ratios within one run), except in the ``KEEP_RUNS`` most recent runs."""
    if df.empty:
        return pd.Series(dtype=bool)
    keep = df["run_id"].isin(needed_runs(df))
    if not by_shape:
        return keep
    ordered, recent = _by_time(df)
    superseded = ordered.duplicated(ROW_KEY, keep="last").reindex(df.index)
    whole = superseded.groupby([df["run_id"], *(df[c] for c in SHAPE_KEY)], dropna=False).transform("all")
    return keep & (df["run_id"].isin(recent) | ~whole)


def prune_superseded(path: Path, by_shape: bool = False) -> int:
    """Drop from the results CSV at ``path`` (atomically, every other line byte for byte) the rows ``kept_rows``
    does not keep: each was measured again by a later run. Returns the rows dropped."""
    path = Path(path)
    df = read_results(path)
    keep = kept_rows(df, by_shape)
    if keep.all():
        return 0
    header, *lines = path.read_text().splitlines(keepends=True)
    if len(lines) != len(df):
        raise OneLineError(f"{path}: {len(lines)} lines but {len(df)} rows; not pruned")
    kept = [line for line, ok in zip(lines, keep) if ok]
    write_atomic(path, "".join([header, *kept]).encode())
    return len(lines) - len(kept)

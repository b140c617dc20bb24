"""The conv and GEMM rules, run: ``choose(wl)`` sweeps the candidates the rules give a layer or a GEMM
(``rule_forms``: ``conv.rules``, ``gemm.rules``) and keeps the fastest verified one (``sweep_forms`` keeps every
trial); ``Choices`` records what was chosen (``choices.csv`` beside the notebook's results, per architecture) so
that a later run for the same architecture replays one build per layer instead of the whole sweep (all layers' builds
side by side: ``choose_all``).

A recorded choice is replayed only while the rules still offer it (same family, same parameters); otherwise the
layer is chosen again, live. A choice also records what the rules offered when it was made (``families``: each
family's name and a digest of its candidates): once the rules offer the layer a family or a candidate it was not
chosen among (one added since), the choice is stale and the layer is chosen again, live, as far as ``choose_all``'s
time budget goes (the others replay, and a later run goes on). The layers chosen in one run are swept together:
every candidate of every layer built in one parallel batch (``choose_many``).

``replay_all(..., check_rules=False)`` builds a recorded choice without asking the rules (its family by name, its
form from its parameters): the recorded kernel is still verified before it is timed, but neither whether the rules
still offer it nor staleness is checked (asking costs about a second per tensor-core layer; notebook 10 replays some
300 layers).

Where the rules also give the layer as another workload (Winograd: ``winograd_forms``; an int8 layer with its filter
packed for another kernel: ``int8_forms``), those are swept too; such a choice keeps what makes its form among its
parameters (Winograd's ``m``, the int8 ``filter_layout``), and its measurement is reported on the layer's own
workload (same shape, same flop count).
"""
from __future__ import annotations

import ast
import csv
import hashlib
import io
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import tvm
import tvm_ffi

from tirbench.bench.harness import Measurement, verify_then_time
from tirbench.bench.results import build_arch
from tirbench.bench.sweep import SweepError, SweepResult, build_by_config, one_line, sweep_all
from tirbench.core.atomic import write_atomic
from tirbench.core.gpu import current_gpu
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv import records as conv_records
from tirbench.schedules.conv.rules import (int8_form, int8_forms, rule_records, winograd_family, winograd_forms,
                                           winograd_tiles)
from tirbench.schedules.gemm import records as gemm_records
from tirbench.schedules.gemm import rules as gemm_rules
from tirbench.workloads.base import Workload
from tirbench.workloads.conv2d_int8 import filter_layout_of

#: The columns of ``choices.csv``: ``arch`` is the architecture the chosen kernel was built for (a row recorded before
#: the column reads as its GPU's: ``results.build_arch``).
FIELDS = ("dtype", "layout", "shape", "kernel", "params", "rules_s", "gpu", "families", "arch")
#: The compute capability of the GPUs whose rows predate the ``arch`` column (``results.BEFORE_ARCH_GPUS``).
BEFORE_ARCH_CC = "9.0"
#: Choosing a stale layer again is budgeted at its recorded time x this (the new families add candidates), at most
#: ``RECHOOSE_CAP`` seconds (what the rules may take on a layer; a recorded time can include a cold start).
RECHOOSE_ESTIMATE = 1.5
RECHOOSE_CAP = 60.0


@dataclass(frozen=True)
class Choice:
    """What the rules chose for a layer: the family, its parameters, how long choosing took (build, verify and
    time every candidate), the chosen kernel's measurement (None when read from the file), and the families the rules
    offered then (``families_offered``)."""

    kernel: str
    params: Mapping[str, Any]
    rules_s: float
    measurement: Measurement | None = None
    replayed: bool = False
    families: tuple[str, ...] = ()


def _key(arch: str, wl: Workload) -> tuple[str, str, str, str]:
    return (arch, wl.dtype, wl.layout, wl.shape)


#: A form of a workload the rules sweep: the workload, its families, and what a choice of it records among its
#: parameters.
Form = tuple[Workload, list[KernelRecord], dict[str, Any]]
#: ``rule_forms`` per module and ``keep``: replaying a layer asks for them twice (``offered``, ``is_stale``), and the
#: rules schedule every candidate to rank it (about a second per tensor-core layer).
_FORMS: dict[tuple[int, int | None], list[Form]] = {}


def rule_forms(wl: Workload, keep: int | None = None) -> list[Form]:
    """The workloads the rules sweep for ``wl``: itself with its families (the GEMM rules' for a gemm, else the conv
    rules'), each Winograd form with ``winograd_family()`` (``WINOGRAD``, on sm_75 its Turing sibling; and the ``m``
    a choice of it records), and each int8 form with its families (and its ``filter_layout``); ``keep``: candidates
    per family (None: the rules' default, and every Winograd candidate; else Winograd's ``keep`` best, ``winograd_tiles``). Worked out once per module (the rules
    read nothing else); a one-line ValueError for a workload no rule takes."""
    key = (tvm_ffi.structural_hash(wl.mod), keep)
    if key not in _FORMS:
        kept = {} if keep is None else {"keep": keep}
        if wl.name == "gemm":
            _FORMS[key] = [(wl, gemm_rules.rule_records(wl, **kept), {})]
        else:
            _FORMS[key] = [(wl, rule_records(wl, **kept), {})] + \
                [(form, [winograd_family() if keep is None
                         else winograd_family().with_candidates(winograd_tiles(form, keep))],
                  {"m": form.sizes["m"]}) for form in winograd_forms(wl)] + \
                [(form, rule_records(form, **kept), {"filter_layout": filter_layout_of(form.mod)})
                 for form in int8_forms(wl)]
    return _FORMS[key]


def _tag(record: KernelRecord) -> str:
    """The family's name and a digest of its candidates: ``nhwc_tma_ws:1a2b3c4d``."""
    return f"{record.name}:{hashlib.sha1(repr(record.candidates).encode()).hexdigest()[:8]}"


def families_offered(wl: Workload) -> tuple[str, ...]:
    """The families the rules give ``wl`` (and its other forms), each tagged with its candidates (``_tag``), sorted."""
    return tuple(sorted({_tag(record) for _, records, _ in rule_forms(wl) for record in records}))


def is_stale(wl: Workload, recorded: Choice) -> bool:
    """True when the rules now give ``wl`` a family or a candidate that ``recorded`` was not chosen among."""
    return not set(families_offered(wl)) <= set(recorded.families)


def _as_layer(m: Measurement, wl: Workload) -> Measurement:
    """A measurement of another form of the layer, reported on the layer's workload."""
    return m if m.workload is wl else replace(m, workload=wl)


def sweep_forms(wls: Sequence[Workload], *, target: tvm.target.Target, repeats: int, seed: int,
                keep: int | None = None, strict: bool = True) -> list[list[tuple[Form, SweepResult]]]:
    """Per workload of ``wls``, each of its ``rule_forms`` with its sweep: every candidate of every form of every
    workload built in one parallel batch (``sweep_all``), then verified and timed (SweepError for a family whose
    every candidate failed; with ``strict=False`` its line only)."""
    forms = [rule_forms(wl, keep) for wl in wls]
    results = iter(sweep_all([(form, records) for layer in forms for form, records, _ in layer], target=target,
                             repeats=repeats, seed=seed, strict=strict))
    return [[(form, next(results)) for form in layer] for layer in forms]


def choose_many(wls: Sequence[Workload], *, target: tvm.target.Target, repeats: int, seed: int,
                missing_ok: bool = False) -> list[Choice | None]:
    """Per layer of ``wls``, the fastest verified of the rules' candidates for it and its other forms
    (``sweep_forms``); each layer's ``rules_s`` is its share of the batch's time. A layer with no verified kernel:
    a SweepError, or with ``missing_ok`` None (and one line); ``missing_ok`` also lets a family that failed on one
    layer leave the others and the other families standing (its line printed)."""
    if not wls:
        return []
    start = time.perf_counter()
    picks = []
    swept = sweep_forms(wls, target=target, repeats=repeats, seed=seed, strict=not missing_ok)
    for wl, layer in zip(wls, swept):
        best, extra = None, {}
        for (_, _, params), result in layer:
            trial = result.best_trial()
            if trial and (best is None or trial.measurement.timing.median_ms < best.measurement.timing.median_ms):
                best, extra = trial, params
        if best is None:
            missing = f"the rules found no kernel for {wl.name} {wl.shape} ({wl.dtype})"
            if not missing_ok:
                raise SweepError(missing)
            print(f"  {missing}")
        picks.append((wl, best, extra))
    share = (time.perf_counter() - start) / len(wls)
    return [best and Choice(best.record.name, {**extra, **best.overrides}, share, _as_layer(best.measurement, wl),
                            families=families_offered(wl)) for wl, best, extra in picks]


def choose(wl: Workload, *, target: tvm.target.Target, repeats: int, seed: int) -> Choice:
    """The rules' choice for one layer (``choose_many`` of it alone)."""
    return choose_many([wl], target=target, repeats=repeats, seed=seed)[0]


def _read_choices(path: Path) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """The rows of a ``choices.csv`` (none if there is none), keyed by (arch, dtype, layout, shape)."""
    rows = {}
    if path.exists():
        for row in csv.DictReader(io.StringIO(path.read_text())):
            row["arch"] = build_arch(row["gpu"], row.get("arch") or "", BEFORE_ARCH_CC)
            rows[(row["arch"], row["dtype"], row["layout"], row["shape"])] = row
    return rows


class Choices:
    """The recorded choices of a notebook (``path``: its ``choices.csv``), keyed by (arch, dtype, layout, shape): a
    build for ``arch`` (default: the build's, ``current_gpu().arch``) replays and records only its own
    architecture's choices, and keeps the others' rows. ``also``: other notebooks' ``choices.csv``, read only: a
    layer ``path`` has no row for replays theirs (notebook 10 replays notebook 08's ResNet-50 layers); ``write``
    writes ``path``'s rows and those remembered since."""

    def __init__(self, path: Path, arch: str | None = None, also: Sequence[Path] = ()):
        self.path = path
        self.arch = arch or current_gpu().arch
        self.rows = _read_choices(path)
        self.others = {key: row for other in reversed(also) for key, row in _read_choices(other).items()}

    def recorded(self, wl: Workload) -> Choice | None:
        key = _key(self.arch, wl)
        row = self.rows.get(key) or self.others.get(key)
        if row is None:
            return None
        return Choice(row["kernel"], ast.literal_eval(row["params"]), float(row["rules_s"]),
                      families=tuple(filter(None, row.get("families", "").split(" "))))

    def remember(self, wl: Workload, choice: Choice, gpu: str) -> None:
        self.rows[_key(self.arch, wl)] = {
            "dtype": wl.dtype, "layout": wl.layout, "shape": wl.shape, "kernel": choice.kernel,
            "params": repr(dict(choice.params)), "rules_s": f"{choice.rules_s:.1f}", "gpu": gpu,
            "families": " ".join(choice.families), "arch": self.arch}

    def write(self, path: Path) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows[k] for k in sorted(self.rows))
        write_atomic(path, buf.getvalue().encode())


def offered(wl: Workload, recorded: Choice) -> tuple[Workload, KernelRecord, dict[str, Any]] | None:
    """The form of ``wl`` and the rules' family that still offer the ``recorded`` choice, the family narrowed to it,
    and the parameters to schedule it with; None if none does."""
    for form, records, extra in rule_forms(wl):
        params = {k: v for k, v in recorded.params.items() if k not in extra}
        if any(recorded.params.get(k) != v for k, v in extra.items()):
            continue
        for record in records:
            if record.name == recorded.kernel and params in [dict(c) for c in record.candidates]:
                return form, record.with_candidates((params,)), params
    return None


def families_by_name() -> dict[str, KernelRecord]:
    """Every convolution and GEMM family (``conv.records``, ``gemm.records``) by its name."""
    return {r.name: r for mod in (conv_records, gemm_records) for r in vars(mod).values()
            if isinstance(r, KernelRecord)}


def recorded_form(wl: Workload, recorded: Choice) -> tuple[Workload, KernelRecord, dict[str, Any]] | None:
    """What ``offered`` gives, without asking the rules: the form of ``wl`` the recorded parameters name (Winograd's
    ``m``, the int8 ``filter_layout``; else ``wl``), the family of the recorded name narrowed to the recorded
    parameters, and those; None for a family no module defines (or a Winograd form the layer does not have)."""
    record = families_by_name().get(recorded.kernel)
    if record is None:
        return None
    params = {k: v for k, v in recorded.params.items() if k not in ("m", "filter_layout")}
    form = wl
    if "m" in recorded.params:
        form = next((f for f in winograd_forms(wl) if f.sizes["m"] == recorded.params["m"]), None)
    elif "filter_layout" in recorded.params:
        form = int8_form(wl, recorded.params["filter_layout"])
    return None if form is None else (form, record.with_candidates((params,)), params)


def replay_all(wls: Sequence[Workload], choices: Choices, *, target: tvm.target.Target, repeats: int,
               seed: int, check_rules: bool = True) -> list[Choice | None]:
    """Every recorded choice the rules still offer (``check_rules=False``: every recorded choice, ``recorded_form``),
    built at once in parallel (grouped by pass config), then each verified and timed; None for a layer with nothing
    to replay (and for one whose replay fails: one line)."""
    jobs = []
    for i, wl in enumerate(wls):
        recorded = choices.recorded(wl)
        try:
            found = recorded and (offered(wl, recorded) if check_rules else recorded_form(wl, recorded))
            if found:
                form, record, params = found
                jobs.append((i, recorded, form, record, record.apply(form, params)))
        except ValueError as err:   # unchecked: a family that no longer takes the layer or these parameters
            print(f"  replay of {recorded.kernel}{dict(recorded.params)} on {wl.shape} failed ({one_line(err)})")
    out: list[Choice | None] = [None] * len(wls)
    for (i, recorded, form, record, _), kernel in zip(jobs, build_by_config([(j[3], j[4]) for j in jobs], target)):
        try:
            if isinstance(kernel, Exception):
                raise kernel
            m = verify_then_time(form, kernel, variant=record.name, repeats=repeats, seed=seed, target=target)
        except Exception as err:  # noqa: BLE001 - a recorded choice that no longer builds or verifies
            print(f"  replay of {record.name}{dict(recorded.params)} on {wls[i].shape} failed ({one_line(err)})")
            continue
        out[i] = replace(recorded, measurement=_as_layer(m, wls[i]), replayed=True)
    return out


def choose_all(wls: Sequence[Workload], choices: Choices, *, now: bool, target: tvm.target.Target, repeats: int,
               seed: int, budget_s: float | None = None) -> list[Choice]:
    """Per workload: the recorded choice replayed (``replay_all``), or, when ``now`` or nothing replays, chosen live;
    the layers chosen live are chosen together (``choose_many``). A recorded choice that is stale (``is_stale``) is
    not replayed but chosen again while the estimates of the stale layers chosen again (each its recorded time x
    ``RECHOOSE_ESTIMATE``, at most ``RECHOOSE_CAP``) stay within ``budget_s`` (None: no limit); one line says how many
    stale choices were replayed instead, for a later run."""
    again, kept, spent = set(), [], 0.0
    for i, wl in enumerate([] if now else wls):
        recorded = choices.recorded(wl)
        if recorded is not None and is_stale(wl, recorded):
            estimate = min(recorded.rules_s * RECHOOSE_ESTIMATE, RECHOOSE_CAP)
            if budget_s is None or spent + estimate <= budget_s:
                spent += estimate
                again.add(i)
            else:
                kept.append(wl.shape)
    out: list[Choice | None] = [None] * len(wls)
    replaying = [i for i in range(len(wls)) if not now and i not in again]
    for i, choice in zip(replaying, replay_all([wls[i] for i in replaying], choices, target=target, repeats=repeats,
                                               seed=seed)):
        out[i] = choice
    live = [i for i, choice in enumerate(out) if choice is None]
    for i, choice in zip(live, choose_many([wls[i] for i in live], target=target, repeats=repeats, seed=seed)):
        out[i] = choice
    if kept:
        print(f"  {len(kept)} stale choices replayed (the rules offer these layers a family or candidate added since; "
              f"past the {budget_s:.0f} s budget): {', '.join(kept)}; a later run chooses them again")
    return out

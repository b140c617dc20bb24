"""One kernel family as data: what the notebooks sweep, verify and time, and what the tests hash.

A ``KernelRecord`` names a schedule helper, its parameters spelled out, the PassContext config its kernels are built
with, the candidates a sweep tries (each overrides the defaults) and which workloads it takes: ``accepts(workload)``
reads the workload's module (its blocks) and its dtype and layout, as TVM's DLight rules read the block, and
returns ``None`` or the one-line reason it does not apply. ``needs`` names the PTX features its CUDA uses: a family
is offered only where the build's architecture has them (``for_arch``; ``apply`` refuses it elsewhere in one line).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from tvm import s_tir

from tirbench.core.gpu import ArchError, require_feature
from tirbench.schedules.common.tiling import SIMT_SYNC_CONFIG
from tirbench.workloads.base import Workload

Accepts = Callable[[Workload], "str | None"]


@dataclass(frozen=True)
class KernelRecord:
    """A kernel family (see the module docstring)."""

    name: str
    schedule: Callable[..., s_tir.Schedule]
    defaults: Mapping[str, Any]
    accepts: Accepts
    pass_config: Mapping[str, object] = field(default_factory=dict)
    candidates: tuple[Mapping[str, Any], ...] = ()
    #: The PTX features its CUDA uses (``core.gpu.FEATURES_SINCE`` / ``FEATURES_ON`` names: "cp_async", "wgmma", ...),
    #: which an architecture must have to run it (``core.gpu.require_feature``; ``for_arch``).
    needs: tuple[str, ...] = ()

    def params(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The helper's keyword arguments: the defaults, then ``overrides``."""
        return {**self.defaults, **(overrides or {})}

    def require_arch(self, arch: str | None = None) -> None:
        """A one-line ArchError unless ``arch`` (default: the build's, ``current_gpu().arch``) has every feature the
        family ``needs``: the first it lacks, "v9_tma_ws: needs tma (sm_90+); this build is sm_80"."""
        for feature in self.needs:
            require_feature(feature, arch, who=self.name)

    def arch_refusal(self, arch: str | None = None) -> str | None:
        """``require_arch``'s one line, or None where ``arch`` builds the family."""
        try:
            self.require_arch(arch)
        except ArchError as err:
            return str(err)
        return None

    def apply(self, wl: Workload, overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> s_tir.Schedule:
        """Schedule ``wl``'s module with the defaults and ``overrides``; a one-line ValueError where the build's
        architecture lacks a feature the family needs (``require_arch``: an ArchError), the family does not take
        ``wl`` or a parameter does not fit it."""
        self.require_arch()
        reason = self.accepts(wl)
        if reason is not None:
            raise ValueError(f"{self.name} does not take {wl.name} {wl.shape} ({wl.dtype}): {reason}")
        return self.schedule(s_tir.Schedule(wl.mod), **self.params({**(overrides or {}), **kwargs}))

    def with_candidates(self, candidates: Iterable[Mapping[str, Any]]) -> "KernelRecord":
        return replace(self, candidates=tuple(candidates))

    def describe(self, overrides: Mapping[str, Any] | None = None) -> str:
        """``helper(k=v, ...)`` with the parameters a kernel of this family is scheduled with."""
        args = ", ".join(f"{k}={v}" for k, v in self.params(overrides).items())
        return f"{self.schedule.__name__}({args})"


def for_arch(records: Iterable[KernelRecord], arch: str | None = None) -> tuple[list[KernelRecord], list[str]]:
    """The ``records`` that ``arch`` (default: the build's) builds, in their order, and one line for each of the
    others saying why (``arch_refusal``: "v9_tma_ws: needs tma (sm_90+); this build is sm_80")."""
    taken, skipped = [], []
    for record in records:
        reason = record.arch_refusal(arch)
        if reason is None:
            taken.append(record)
        else:
            skipped.append(reason)
    return taken, skipped


#: The lines ``offered`` has printed in this process (each is said once: the rules run once per layer).
_SAID: set[str] = set()


def offered(records: Iterable[KernelRecord], arch: str | None = None) -> list[KernelRecord]:
    """``for_arch``'s records, printing each skipped family's line the first time this process skips it."""
    taken, skipped = for_arch(records, arch)
    for line in skipped:
        if line not in _SAID:
            _SAID.add(line)
            print(line)
    return taken


def first_offered(*groups: Iterable[KernelRecord], arch: str | None = None) -> list[KernelRecord]:
    """``offered``'s records of the first of ``groups`` that ``arch`` (default: the build's) builds any of (a
    fallback family, such as Turing's wmma convolution, comes after the families it stands in for); [] where none
    does. Each group tried is ``offered``: its skipped families said in one line each."""
    for group in groups:
        taken = offered(group, arch)
        if taken:
            return taken
    return []


def has_block(wl: Workload, name: str) -> bool:
    """Whether ``wl``'s module has a block called ``name``."""
    try:
        s_tir.Schedule(wl.mod).get_sblock(name)
    except Exception:  # noqa: BLE001 - TVM raises its own error type for a missing block
        return False
    return True


def takes(block: str, dtypes: tuple[str, ...], layouts: tuple[str, ...] | None = None,
          out_dtypes: tuple[str, ...] | None = None) -> Accepts:
    """``accepts`` for a family whose kernels schedule the block ``block`` of a workload with inputs of one of
    ``dtypes`` (and, where given, one of ``layouts``, an output of one of ``out_dtypes``)."""

    def accepts(wl: Workload) -> str | None:
        if not has_block(wl, block):
            return f"its module has no block {block!r}"
        if wl.dtype not in dtypes:
            return f"takes {' or '.join(dtypes)} inputs, not {wl.dtype}"
        if layouts is not None and wl.layout not in layouts:
            return f"takes the {' or '.join(layouts)} layout, not {wl.layout or 'none'}"
        if out_dtypes is not None and wl.out_dtype not in out_dtypes:
            return f"writes {' or '.join(out_dtypes)} outputs, not {wl.out_dtype}"
        return None

    return accepts


def require_a_candidate(wl: Workload, records: Iterable[KernelRecord]) -> Workload:
    """``wl`` itself when some candidate (or the defaults) of one of ``records`` schedules it; else a one-line
    ValueError naming the families and why the last of them refused."""
    records = tuple(records)
    reason = ""
    for record in records:
        for cand in record.candidates or ({},):
            try:
                record.apply(wl, cand)
                return wl
            except ValueError as err:
                reason = str(err)
    raise ValueError(f"no {'/'.join(r.name for r in records)} kernel takes {wl.name} {wl.shape}: {reason}")


def turing(record: KernelRecord) -> KernelRecord:
    """``record``'s Turing (sm_75: no cp.async) sibling ``sm75_<name>``: the same helper and tiles with
    ``async_copy=False`` and 2 stages, built without ``use_async_copy``: each k tile's shared-memory fill is a
    synchronous copy (global loads, then shared stores) one tile ahead of the math, so a warp waits for its own loads
    and other warps' math hides them. Offered only where ``record`` does not build (``record.first_offered``)."""
    candidates = []
    for cand in ({**c, "stages": 2} for c in record.candidates):
        if cand not in candidates:
            candidates.append(cand)
    return replace(record, name=f"sm75_{record.name}", defaults={**record.defaults, "stages": 2, "async_copy": False},
                   pass_config=SIMT_SYNC_CONFIG, candidates=tuple(candidates), needs=())

"""The kernel the conv rules give a layer, as a PrimFunc a Relax module calls with ``R.call_tir``.

The kernel: a recorded choice (``bench.choose.Choices``, per arch, dtype, layout and shape) where the rules still
offer it on the layer's own workload, else the first candidate of the first family ``rule_records`` ranks for the
layer (the rules' own pick, untimed). A Winograd choice is not taken in this version (its kernel reads the
transformed filter: a weight transform would have to join the model); neither are the TIRx families
(``nhwc_tma_ws``, ``nhwc_1x1_tma``): one ``tvm.compile`` of a Relax module lowers every PrimFunc with one TIR
pipeline, the suite's s_tir one (``core.lowering.PIPELINE``), and a TIRx kernel needs TVM's ``tirx`` pipeline.
A layer with an epilogue (bias, residual, ReLU) gets the family and parameters chosen for the layer alone, scheduled
on its workload with the epilogue, which ``schedules.conv.epilogue.fuse_epilogue`` then inlines into the kernel's
store (``with_epilogue``).

Marks the PrimFunc carries (``relax_callable``):
- no ``global_symbol``: the suite's workloads call theirs ``main``, the Relax entry's name; Relax's
  ``AttachGlobalSymbol`` names it after its GlobalVar;
- ``tirx.is_scheduled``: DLight's ``ApplyDefaultSchedule`` leaves it as scheduled;
- ``op_pattern`` 8 (kOpaque): ``FuseOps`` fuses nothing into it. Without it ``AnnotateTIROpPattern`` finds the
  conv fusable with its bias add and ReLU and ``FuseTIR`` fails on the scheduled blocks (checked: "Inconsistent
  buffers Y and y mapped to the same relax var");
- ``tirx.noalias`` (the workloads set it; ``tvm.compile`` of a Relax module needs nothing more), and for the
  record ``tirbench.kernel`` (``KernelRecord.describe``) and ``tirbench.pass_config`` (``build_config``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tvm import s_tir, tirx

from tirbench.bench.choose import Choices, offered
from tirbench.core import lowering
from tirbench.core.serial import without_threads
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv.epilogue import fuse_epilogue
from tirbench.schedules.conv.records import CONV_TC_CONFIG
from tirbench.schedules.conv.rules import rule_records
from tirbench.workloads.base import Workload
from tirbench.workloads.conv2d import ConvEpilogue

#: The layout each dtype's families take: float32 NCHW (the model's own: no transposes), float16 NHWC (the
#: tensor-core families; ``dispatch`` transposes around the kernel).
LAYOUT = {"float32": "NCHW", "float16": "NHWC"}
#: ``op_pattern`` of a PrimFunc FuseOps must not fuse (relax ``OpPatternKind.kOpaque``).
OPAQUE = 8


def build_config(record: KernelRecord) -> dict[str, bool]:
    """The PassContext config ``record``'s kernels build with, stated in full where another kernel's could break
    them: the tensor-core families (``CONV_TC_CONFIG``) need storage rewriting on for mma's "warp" buffers."""
    keep_rewrite = {"tirx.disable_storage_rewrite": False} if dict(record.pass_config) == CONV_TC_CONFIG else {}
    return {**keep_rewrite, **{k: bool(v) for k, v in record.pass_config.items()}}


@dataclass(frozen=True)
class ConvKernel:
    """The kernel chosen for a layer's ``workload``: its family, parameters, scheduled PrimFunc, where the choice
    came from (``recorded`` or ``rules``) and the epilogue fused into its store (``with_epilogue``)."""

    workload: Workload
    record: KernelRecord
    params: Mapping[str, Any]
    func: tirx.PrimFunc
    source: str
    epilogue: ConvEpilogue = ConvEpilogue()

    @property
    def name(self) -> str:
        """The PrimFunc's name in the module: ``nchw_splitk_1x64x56x56x64x3x3x1x1``, and its epilogue's tag after it
        (``..._bias_relu``)."""
        return "_".join(part for part in (self.record.name, self.workload.shape, self.epilogue.tag) if part)

    def describe(self) -> str:
        return f"{self.record.name}{dict(self.params)} ({self.source})"


def relax_callable(func: tirx.PrimFunc, record: KernelRecord, params: Mapping[str, Any]) -> tirx.PrimFunc:
    """``func`` marked for a Relax module (see the module docstring)."""
    attrs = {"tirx.is_scheduled": True, "op_pattern": OPAQUE, "tirx.noalias": True,
             "tirbench.kernel": record.describe(params), "tirbench.pass_config": build_config(record)}
    func = func.without_attr("global_symbol")
    for key, value in attrs.items():
        func = func.with_attr(key, value)
    return func


def _callable(wl: Workload, sch: s_tir.Schedule, record: KernelRecord, params: Mapping[str, Any],
              serial: bool) -> tirx.PrimFunc:
    """The PrimFunc of ``sch`` (``record``'s schedule of ``wl`` with ``params``) marked by ``relax_callable``;
    ``serial``: its schedule replayed without thread bindings (``core.serial``)."""
    if serial:
        sch = without_threads(wl.mod, sch)
    return relax_callable(sch.mod["main"], record, params)


def _picks(wl: Workload, choices: Choices | None) -> list[tuple[KernelRecord, Mapping[str, Any], str]]:
    """The recorded choice where the rules still offer it on ``wl`` itself, then each family's best candidate
    (``keep=1``: the rules rank every candidate by scheduling it, and stop at the first that schedules)."""
    recorded = choices.recorded(wl) if choices is not None else None
    found = offered(wl, recorded) if recorded is not None else None
    first = [(found[1], found[2], "recorded")] if found and found[0].name == wl.name else []
    return first + [(record, dict(record.candidates[0]), "rules") for record in rule_records(wl, keep=1)]


def choose_kernel(wl: Workload, *, choices: Choices | None = None, serial: bool = False) -> ConvKernel:
    """The kernel for ``wl`` (see the module docstring), its PrimFunc marked by ``relax_callable``; ``serial``: its
    schedule without thread bindings (``core.serial``: llvm runs it, for numerics without a GPU). A one-line
    ValueError where the rules refuse ``wl`` (``rule_records``' line) or none of their picks builds here."""
    reasons = []
    for record, params, source in _picks(wl, choices):
        sch = record.apply(wl, params)
        if lowering.pipeline_for(sch.mod) == "tirx":
            reasons.append(f"{record.name} is a TIRx kernel (the module's TIR pipeline is s_tir)")
            continue
        if serial and any(inst.kind.name == "Tensorize" for inst in sch.trace.insts):
            reasons.append(f"{record.name} uses tensor-core intrinsics (no llvm lowering)")
            continue
        return ConvKernel(wl, record, dict(params), _callable(wl, sch, record, params, serial), source)
    raise ValueError(f"no kernel of the conv rules builds {wl.name} {wl.shape} {wl.dtype} here: {'; '.join(reasons)}")


def with_epilogue(kernel: ConvKernel, wl: Workload, epilogue: ConvEpilogue, *, serial: bool = False) -> ConvKernel:
    """``kernel``'s family and parameters on ``wl``, its layer with ``epilogue`` (``workloads.conv2d``), the epilogue
    fused into the family's store (``schedules.conv.epilogue``); a one-line ValueError where that store cannot take
    it."""
    sch = fuse_epilogue(kernel.record.apply(wl, kernel.params))
    func = _callable(wl, sch, kernel.record, kernel.params, serial)
    return ConvKernel(wl, kernel.record, kernel.params, func, kernel.source, epilogue)



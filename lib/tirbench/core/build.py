"""Build a kernel with the suite's TIR pipeline, and export it as a shared library.

``build`` is what a notebook calls; ``build_with_config`` / ``export_shared`` are what worker processes call
(``bench.harness.build_all``, the tuning builders), inside the target's scope so that a CUDA compile at build time
takes the arch from the target rather than from a device.

Every process that imports this module compiles CUDA with NVRTC's automatic precompiled header (``NVRTC_OPTIONS``,
through TVM's ``TVM_CUDA_NVRTC_EXTRA_OPTS`` unless it is set already): TVM puts the same libcu++ headers before every
kernel, and a process that compiles many (a builder worker, the chooser's) parses them once. On an H200 host 32
rules-space convolution candidates compiled in 0.78 s each instead of 1.15, to byte-identical cubins.
"""
from __future__ import annotations

import os
import tempfile

import tvm
from tvm import s_tir

from tirbench.core import lowering

#: NVRTC's options added to TVM's: the automatic precompiled header (module docstring).
NVRTC_OPTIONS = "--pch"
os.environ.setdefault("TVM_CUDA_NVRTC_EXTRA_OPTS", NVRTC_OPTIONS)


def build(kernel: s_tir.Schedule | tvm.IRModule, target: tvm.target.Target,
          pass_config: dict[str, object] | None = None) -> tvm.runtime.Executable:
    """``tvm.compile`` a schedule's module (or a module) for ``target``, under ``pass_config`` if given, with the
    suite's TIR pipeline (``tirbench.core.lowering``: TVM's default plus zero-filling cp.async for int8 tiles; TVM's
    ``tirx`` pipeline for a kernel written in TIRx)."""
    mod = kernel.mod if isinstance(kernel, s_tir.Schedule) else kernel
    with tvm.transform.PassContext(config=pass_config or {}):
        return tvm.compile(mod, target=target, tir_pipeline=lowering.pipeline_for(mod))


def build_with_config(config: dict[str, bool], mod: tvm.IRModule, target: tvm.target.Target,
                      _params: object) -> tvm.runtime.Module:
    """MetaSchedule ``f_build`` (bound to a ``tuned_pass_config`` with ``functools.partial``): builds a candidate
    under that PassContext config and the suite's TIR pipeline, as the notebook builds the replayed kernel, inside
    the target's scope (a CUDA compile at build time takes its arch from there)."""
    with target, tvm.transform.PassContext(config=config):
        return tvm.tirx.build(mod, target=target, pipeline=lowering.pipeline_for(mod))


def export_shared(rt_mod: tvm.runtime.Module) -> str:
    """``f_export``: the module as a shared library, linked here, in a fresh directory (MetaSchedule removes the
    directory after the measurement)."""
    path = os.path.join(tempfile.mkdtemp(prefix="tirbench-build-"), "tvm_tmp_mod.so")
    rt_mod.export_library(path)
    return path

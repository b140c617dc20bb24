"""MetaSchedule postprocessors of the suite's hand-written design spaces: ``VerifyGPUCodeAsBuilt`` (the ``wmma`` and
``wgmma`` spaces) checks a candidate against the GPU's limits as it will be built; ``RewriteWgmma`` (the ``wgmma``
space) finishes a candidate once its decisions are known (see ``tirbench.schedules.spaces.wgmma_space``).

MetaSchedule's ``VerifyGPUCode`` lowers every candidate with a fixed pass list that always runs ``StorageRewrite``.
For the wmma kernels that pass merges the fp32 C tile into the fp16 A/B tiles' shared memory, after which the
wmma store's typed pointer no longer matches and lowering fails: every candidate is rejected, however small. The
kernels are built with ``tirx.disable_storage_rewrite`` (``WMMA_CONFIG``), so this check lowers them the same way
and then applies the same limits (shared memory, threads per block, vthreads, 16-byte vectors), counting the
threads itself.
"""
from __future__ import annotations

import math
import re

import tvm
from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir import transform as st
from tvm.s_tir.analysis import verify_gpu_code
from tvm.tirx import transform as tt


def _lowering(storage_rewrite: bool = False) -> tvm.transform.Sequential:
    """``VerifyGPUCode``'s lowering passes, in its order, without ``StorageRewrite`` unless ``storage_rewrite``."""
    return tvm.transform.Sequential([
        st.LowerCrossThreadReduction(), st.LowerInitBlock(), st.PlanAndUpdateBufferAllocationLocation(),
        st.ConvertBlocksToOpaque(), st.ManifestSharedMemoryLocalStage(), st.CompactBufferAllocation(),
        st.LowerMatchBuffer(), st.InjectSoftwarePipeline(), st.LowerOpaqueBlock(), tt.FlattenBuffer(),
        tt.NarrowDataType(32), st.StmtSimplify(), tt.VectorizeLoop(True), st.InjectVirtualThread(),
        st.InjectDoubleBuffer(), *([tt.StorageRewrite()] if storage_rewrite else []),
        st.MergeSharedMemoryAllocations(), tt.LowerIntrin()])


def threads_per_block(func: tvm.tirx.PrimFunc) -> int:
    """Threads a block of the lowered kernel ``func`` launches: the product of its threadIdx extents (each axis
    once). ``verify_gpu_code`` misses threadIdx.x when only the cooperative copies bind it (wmma calls run on a
    warp's lanes implicitly), so a 56-warp candidate would pass as 56 threads."""
    extents = dict(re.findall(r'T\.launch_thread\("(threadIdx\.[xyz])", (\d+)\)', func.script()))
    return math.prod(int(e) for e in extents.values())


@derived_object
class VerifyGPUCodeAsBuilt(ms.postproc.PyPostproc):
    """``VerifyGPUCode`` lowering as the kernels are built: without storage rewriting (default; see the module
    docstring) or with it (``storage_rewrite``), and vectors up to ``max_vector_bytes`` (``VerifyGPUCode``: 16; the
    convolutions' epilogue reads 8 floats of C, 32 bytes, which CUDA splits into two 16-byte loads)."""

    def __init__(self, storage_rewrite: bool = False, max_vector_bytes: int = 16) -> None:
        super().__init__()
        self.storage_rewrite = storage_rewrite
        self.max_vector_bytes = max_vector_bytes
        self.target: tvm.target.Target | None = None
        self.limits: dict[str, int] = {}

    def _initialize_with_tune_context(self, context: ms.TuneContext) -> None:
        self.target = context.target
        attrs = self.target.attrs
        self.limits = {"max_shared_memory_per_block": int(attrs["max_shared_memory_per_block"]),
                       "max_threads_per_block": int(attrs["max_threads_per_block"]),
                       "max_vthread": 8, "max_vector_bytes": self.max_vector_bytes}

    def apply(self, sch: s_tir.Schedule) -> bool:
        for gv, func in sch.mod.functions.items():
            if not isinstance(func, tvm.tirx.PrimFunc):
                continue
            func = func.with_attr("global_symbol", gv.name_hint).with_attr("target", self.target)
            try:
                lowered = _lowering(self.storage_rewrite)(tvm.IRModule({gv.name_hint: func}))
            except Exception:  # noqa: BLE001 - a candidate that does not lower is a rejected candidate
                return False
            for f in lowered.functions.values():
                if not verify_gpu_code(f, self.limits) or threads_per_block(f) > self.limits["max_threads_per_block"]:
                    return False
        return True

    def clone(self) -> ms.Postproc:
        copy = VerifyGPUCodeAsBuilt(self.storage_rewrite, self.max_vector_bytes)
        copy.target, copy.limits = self.target, dict(self.limits)
        return copy


def _cuda_postprocs(verify: VerifyGPUCodeAsBuilt) -> list[ms.Postproc]:
    """MetaSchedule's "cuda" postprocessors with ``VerifyGPUCode`` swapped for ``verify``."""
    return [verify if isinstance(p, ms.postproc.VerifyGPUCode) else p for p in ms.Postproc.create("cuda")]


def cuda_postprocs_keep_storage() -> list[ms.Postproc]:
    """MetaSchedule's "cuda" postprocessors checking kernels built without storage rewriting (the wmma space)."""
    return _cuda_postprocs(VerifyGPUCodeAsBuilt())


@derived_object
class RewriteWgmma(ms.postproc.PyPostproc):
    """The ``wgmma`` space's postprocessor: tensorizes and pipelines each candidate once its decisions are known
    (``tirbench.schedules.spaces.wgmma_space.finish_wgmma``); rejects a combination the hand kernel's checks refuse."""

    def _initialize_with_tune_context(self, context: ms.TuneContext) -> None:
        from tirbench.schedules.intrinsics.wgmma import register_space_intrins

        register_space_intrins()  # here, not from the search's threads

    def apply(self, sch: s_tir.Schedule) -> bool:
        from tirbench.schedules.spaces.wgmma_space import finish_wgmma

        try:
            return finish_wgmma(sch)
        except (ValueError, tvm.TVMError):  # a decision the intrinsics cannot take is a rejected candidate
            return False

    def clone(self) -> ms.Postproc:
        return RewriteWgmma()


def wgmma_postprocs() -> list[ms.Postproc]:
    """``RewriteWgmma`` first (the candidates are tensorized before anything else looks at them), then MetaSchedule's
    "cuda" postprocessors with ``VerifyGPUCode`` as the kernels are built (``VerifyGPUCodeAsBuilt``: storage
    rewriting on, as ``MMA_ASYNC_CONFIG`` builds them; the convolution's 32-byte epilogue reads allowed); the space's
    target allows 227 KB of shared memory."""
    return [RewriteWgmma(), *_cuda_postprocs(VerifyGPUCodeAsBuilt(storage_rewrite=True, max_vector_bytes=32))]

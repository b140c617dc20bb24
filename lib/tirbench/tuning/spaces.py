"""The MetaSchedule design spaces ``tirbench.tuning.tune`` can search, by name: what each is for, which workloads it
takes, how its candidates are generated and built, and where its database goes.

A space is one ``DesignSpace`` in ``SPACES``; ``get_space(name)`` looks it up (one-line error for an unknown name),
once, where a name comes in (the CLI, ``replay``); the functions behind take the ``DesignSpace``.
To add one, write its schedule function (``sch -> sch`` with ``sample_*`` decisions, or ``sch -> [sch, ...]`` for
several design spaces) in ``tirbench.schedules`` and add an entry::

    SPACES["mine"] = DesignSpace(name="mine", description="...", check=require_..., schedule_fn=my_space,
                                 pass_config=lambda wl: {}, db_suffix="_minespace")

``tune``, ``replay``, ``work_dir_for``, ``space_target``, ``tuned_pass_config`` and the CLI's ``--space`` then know it.
A space whose kernels use PTX features some architectures lack says so in ``needs`` (``core.gpu`` names, as
``KernelRecord.needs``): searching it (``generator``) on a build without them is refused in one line
(``space='v5': needs cp_async (sm_80+); this build is sm_75``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.core.gpu import require_feature
from tirbench.core.machine import cuda_target
from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.common.tiling import MAX_SHARED_BYTES, SIMT_ASYNC_CONFIG
from tirbench.schedules.conv.direct import conv2d_nchw_splitk_space, splitk_decisions
from tirbench.schedules.conv.records import NCHW_SPLITK, NHWC_TMA_WS
from tirbench.schedules.conv.rules import rule_records
from tirbench.schedules.conv.template import conv2d_template_space, require_nchw_fp32_conv
from tirbench.schedules.conv.wmma_space import WMMA_CONFIG, conv2d_wmma_space
from tirbench.schedules.gemm.records import V5_WARP_TILED, V8_WGMMA
from tirbench.schedules.gemm.simt import gemm_v5_space
from tirbench.schedules.spaces.wgmma_space import (require_wgmma_workload, tuned_kernel, wgmma_pass_config,
                                                   wgmma_seeds, wgmma_space)
from tirbench.schedules.spaces.ws_kernels import as_built
from tirbench.tuning.mutators import MutateCategorical
from tirbench.tuning.postprocs import cuda_postprocs_keep_storage, wgmma_postprocs
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import require_plain

#: Compile-time config for tensor-core candidates (fp16 in, fp32 accumulate): without it ``tvm.compile`` fails
#: with "tvm_access_ptr element type must match the source buffer".
TENSOR_CORE_PASS_CONFIG = {"tirx.disable_storage_rewrite": True}

#: The v5 space is one design space per (lanes, stages, prefetch, columns_outer): a warp's lane shape fixes the
#: split of two loops at once, and annotations and loop orders cannot be sampled.
V5_SPACE_VARIANTS = [(lanes, stages, prefetch, columns_outer) for lanes in ((8, 4), (4, 8)) for stages in (2, 3, 4)
                     for prefetch in ("none", "k_step") for columns_outer in (False, True)]

ScheduleFnBody = Callable[[s_tir.Schedule], Union[s_tir.Schedule, list[s_tir.Schedule]]]


def uses_tensor_cores(wl: Workload) -> bool:
    return wl.dtype in ("float16", "int8")


@dataclass(frozen=True)
class DesignSpace:
    """One search space. ``schedule_fn=None``: MetaSchedule's own rules ("cuda", "cuda-tensorcore" for fp16/int8);
    otherwise a template for ``ScheduleFn`` (no rules, the "cuda" postprocessors, ``mutator_probs``)."""

    name: str
    description: str  #: one line: what the space is for
    check: Callable[[Workload], None]  #: one-line ValueError for a workload the space cannot schedule
    schedule_fn: ScheduleFnBody | None
    pass_config: Callable[[Workload], dict[str, bool]]  #: PassContext config its candidates are built with
    db_suffix: str  #: appended to the work directory's name
    dynamic_shared_memory: bool = False  #: tune against the 227 KB dynamic shared-memory limit, not 48 KB
    mutator_probs: str | Callable[[], dict[ms.Mutator, float]] = "cuda"
    #: the postprocessors of a template space: MetaSchedule's "cuda" ones, or a factory for others
    postprocs: str | Callable[[], list[ms.Postproc]] = "cuda"
    #: schedules of a workload in this space, measured and committed before the search (``tirbench.tuning.seeds``)
    seeds: Callable[[Workload], list[s_tir.Schedule]] | None = None
    #: ``(candidate module, pass config) -> (module built, its config)``: where a candidate stands for a kernel no
    #: schedule produces (the ``wgmma`` space's warp-specialized one), what the builders and ``replay`` build instead
    as_built: Callable[[tvm.IRModule, dict], tuple[tvm.IRModule, dict]] | None = None
    #: whether a tuned schedule's kernel is a seed's, where equal sampled decisions would not say (``seeds.is_seed``)
    seed_kernel: Callable[[Workload, s_tir.Schedule], bool] | None = None
    #: the PTX features its kernels use (``core.gpu.FEATURES_SINCE`` / ``FEATURES_ON`` names), which the build's
    #: architecture must have for a search (``require_arch``)
    needs: tuple[str, ...] = ()

    def built_module(self, wl: Workload, mod: tvm.IRModule) -> tuple[tvm.IRModule, dict]:
        """The module a candidate ``mod`` of ``wl`` is built as, and the PassContext config it is built with."""
        config = dict(self.pass_config(wl))
        return self.as_built(mod, config) if self.as_built is not None else (mod, config)

    def require(self, wl: Workload) -> None:
        self.check(wl)

    def require_arch(self, arch: str | None = None) -> None:
        """A one-line ArchError unless ``arch`` (default: the build's, ``current_gpu().arch``) has every feature the
        space ``needs`` (the first it lacks)."""
        for feature in self.needs:
            require_feature(feature, arch, who=f"space={self.name!r}")

    def generator(self, wl: Workload) -> ms.space_generator.SpaceGenerator | str:
        """The ``space`` argument of ``ms.tune_tir`` for ``wl`` (refused in one line where the build's architecture
        lacks a feature the space ``needs``)."""
        self.require(wl)
        self.require_arch()
        if self.schedule_fn is None:
            if not uses_tensor_cores(wl):
                return "post-order-apply"
            return ms.space_generator.PostOrderApply(sch_rules="cuda-tensorcore", postprocs="cuda-tensorcore",
                                                     mutator_probs="cuda-tensorcore")
        probs = self.mutator_probs if isinstance(self.mutator_probs, str) else self.mutator_probs()
        posts = self.postprocs if isinstance(self.postprocs, str) else self.postprocs()
        return ms.space_generator.ScheduleFn(self.schedule_fn, sch_rules=[], postprocs=posts, mutator_probs=probs)

    def target(self, target: tvm.target.Target | None = None) -> tvm.target.Target:
        """The target to tune with (``cuda_target()`` by default): where the space needs it, one whose shared-memory
        limit is the dynamic 227 KB (the tag says 48 KB, the static limit, and ``VerifyGPUCode`` would drop every
        deep pipeline)."""
        target = target or cuda_target()
        if not self.dynamic_shared_memory:
            return target
        spec = {k: v for k, v in dict(target.export()).items() if k != "host"}
        spec["max_shared_memory_per_block"] = MAX_SHARED_BYTES
        return tvm.target.Target(spec, host=target.host)


def v5_space(sch: s_tir.Schedule) -> list[s_tir.Schedule]:
    """``ScheduleFn`` body: the v5 template once per ``V5_SPACE_VARIANTS`` entry."""
    return [gemm_v5_space(sch.copy(), lanes=lanes, stages=stages, prefetch=prefetch, columns_outer=columns_outer)
            for lanes, stages, prefetch, columns_outer in V5_SPACE_VARIANTS]


def rules_seeds(wl: Workload) -> list[s_tir.Schedule]:
    """The ``rules`` space's seeds: each split-K candidate the conv rules give ``wl``, as the split-K space's trace
    with its tiles set to the candidate's."""
    design = conv2d_nchw_splitk_space(s_tir.Schedule(wl.mod))
    return [with_decisions(wl, design, splitk_decisions(s_tir.Schedule(wl.mod), dict(cand)))
            for record in rule_records(wl) if record.name == NCHW_SPLITK.name for cand in record.candidates]


def _any_workload(wl: Workload) -> None:
    """MetaSchedule's rules take any workload."""


def _require_fp32_gemm(wl: Workload) -> None:
    if wl.name != "gemm" or wl.dtype != "float32":
        raise ValueError(f"space='v5' is the fp32 GEMM template, not {wl.name} {wl.dtype}")


def _require_template_conv(wl: Workload) -> None:
    require_nchw_fp32_conv(wl, param="space='template'")


def _require_splitk_conv(wl: Workload) -> None:
    require_nchw_fp32_conv(wl, param="space='splitk'")


def _require_rules_conv(wl: Workload) -> None:
    require_nchw_fp32_conv(wl, param="space='rules'")


def _require_fp16_nhwc_conv(wl: Workload) -> None:
    if wl.name != "conv2d" or wl.dtype != "float16" or wl.layout != "NHWC":
        raise ValueError(f"space='wmma' is the fp16 NHWC conv2d implicit GEMM, not {wl.name} {wl.dtype} "
                         f"{wl.layout or ''}".rstrip())
    require_plain(wl, "space='wmma'")


def _default_pass_config(wl: Workload) -> dict[str, bool]:
    return TENSOR_CORE_PASS_CONFIG if uses_tensor_cores(wl) else {}


def _wgmma_seed_kernel(wl: Workload, sch: s_tir.Schedule) -> bool:
    """The wgmma space's ``seed_kernel``: ``tuned_kernel``'s answer (a warp-specialized candidate by the kernel it
    builds, a v8 one by its block tile, raster, stages and overlap)."""
    return tuned_kernel(wl, sch)[1]


def _tile_mutators() -> dict[ms.Mutator, float]:
    """Only tile sizes: "cuda"'s unroll and thread-binding mutators look for MetaSchedule's own annotations."""
    return {ms.mutator.MutateTileSize(): 1.0}


def _tile_and_choice_mutators() -> dict[ms.Mutator, float]:
    """Tile sizes, and the template's own categorical choices (``MutateCategorical``: MetaSchedule's mutators leave
    them alone)."""
    return {ms.mutator.MutateTileSize(): 0.6, MutateCategorical(): 0.4}


#: Every space ``tune`` knows, by name.
SPACES: dict[str, DesignSpace] = {space.name: space for space in (
    DesignSpace(name="default", description="MetaSchedule's own CUDA rules (tensor-core rules for fp16/int8)",
                check=_any_workload, schedule_fn=None, pass_config=_default_pass_config, db_suffix=""),
    DesignSpace(name="v5", description="fp32 GEMM: the v5 warp-tiled kernel with its tile sizes sampled",
                check=_require_fp32_gemm, schedule_fn=v5_space, pass_config=lambda wl: SIMT_ASYNC_CONFIG,
                db_suffix="_v5space", dynamic_shared_memory=True, needs=V5_WARP_TILED.needs),
    DesignSpace(name="template", description="fp32 NCHW conv2d: AutoTVM's classic tunable CUDA conv2d template",
                check=_require_template_conv, schedule_fn=conv2d_template_space, pass_config=lambda wl: {},
                db_suffix="_templatespace", mutator_probs=_tile_mutators),
    DesignSpace(name="splitk", description="fp32 NCHW conv2d at small batch: input channels split across blocks "
                "(rfactor), tiles sampled", check=_require_splitk_conv, schedule_fn=conv2d_nchw_splitk_space,
                pass_config=lambda wl: {}, db_suffix="_splitkspace", mutator_probs=_tile_mutators),
    DesignSpace(name="rules", description="fp32 NCHW conv2d: the conv rules' split-K family, tiles sampled, the "
                "search started from the rules' candidates (measured first, as seeds)", check=_require_rules_conv,
                schedule_fn=conv2d_nchw_splitk_space, pass_config=lambda wl: {}, db_suffix="_rulesspace",
                mutator_probs=_tile_mutators, seeds=rules_seeds),
    DesignSpace(name="wmma", description="fp16 NHWC conv2d: the implicit GEMM on wmma fragments whose shape "
                "(m8n32k16, m16n16k16, m32n8k16) follows GEMM_M, tiles sampled", check=_require_fp16_nhwc_conv,
                schedule_fn=conv2d_wmma_space, pass_config=lambda wl: WMMA_CONFIG, db_suffix="_wmmaspace",
                dynamic_shared_memory=True, mutator_probs=_tile_mutators, postprocs=cuda_postprocs_keep_storage,
                needs=("wmma", "cp_async")),
    DesignSpace(name="wgmma", description="fp16 GEMM and fp16 NHWC conv2d: the v8 wgmma kernel with its block "
                "tile, raster, stages and overlap sampled, and the pipeline itself (v8's, or the warp-specialized "
                "kernel with its ring depth, persistence and, on the conv2d, gather); the search started from the "
                "hand sweep's candidates (seeds)", check=require_wgmma_workload, schedule_fn=wgmma_space,
                pass_config=wgmma_pass_config, db_suffix="_wgmmaspace", dynamic_shared_memory=True,
                mutator_probs=_tile_and_choice_mutators, postprocs=wgmma_postprocs, seeds=wgmma_seeds,
                as_built=as_built, seed_kernel=_wgmma_seed_kernel,
                needs=tuple(dict.fromkeys((*V8_WGMMA.needs, *NHWC_TMA_WS.needs)))),
)}


def get_space(name: str) -> DesignSpace:
    """The space called ``name``; one-line ValueError naming the known ones otherwise."""
    if name not in SPACES:
        raise ValueError(f"space={name!r}: expected one of {', '.join(map(repr, SPACES))}")
    return SPACES[name]


def as_space(space: DesignSpace | str) -> DesignSpace:
    """``space`` itself, or the registered space of that name (``get_space``): what public functions accept."""
    return space if isinstance(space, DesignSpace) else get_space(space)

"""The wgmma design space (MetaSchedule ``--space wgmma``): v8, Hopper's warpgroup MMA kernel
(``warpgroup.gemm_v8_wgmma``), on the fp16 GEMM and, through the implicit GEMM (``conv2d_as_gemm``), on the fp16
NHWC convolution, with its choices left to the search as decisions MetaSchedule samples and mutates.

MetaSchedule's own tensor-core rules know wmma and mma.sync, not wgmma; this space starts from the hand kernel
instead. What is sampled, per candidate:

- the block tile's rows, ``bm`` = 64 x (1, 2, 3 or 4) warpgroups (``sample_perfect_tile`` of M / 64: a divisor);
- the block tile's columns, ``bn`` = 64 x (1..4) (``sample_perfect_tile`` of N / 64): the wgmma's N, up to 256;
- the block order, ``raster`` (``sample_perfect_tile`` of the block rows, up to 8; 1 is row by row);
- the pipeline depth, ``stages`` in ``STAGES`` (``sample_categorical``);
- ``overlap`` (``sample_categorical`` over off/on): a k tile's wgmma group keeps running while the next copies go.

The three tiles are perfect tiles, which ``MutateTileSize`` moves; the two categorical choices are moved by
``tirbench.tuning.mutators.MutateCategorical`` (MetaSchedule's own mutators only touch categorical samples of its
own unroll and thread-binding patterns). ``tile_k`` stays 64 (a 128-byte swizzled row of halves), and the
shared-memory layout would be one design space each (it is a different program, its ``transform_layout`` and copy
order, not a value a loop takes): ``LAYOUTS`` searches ``"swizzle128"`` only, for both workloads, so each has one
design space (the hand sweep's ``"interleaved"`` candidate is 3x slower and is no seed).

The wgmma intrinsic is written for one N, k tile, layout and pipeline depth (``intrinsics.wgmma``), so a candidate
cannot be tensorized before its decisions are known: the design leaves the product block ``"<block>_o"`` annotated
(``LAYOUT``, ``STAGES_KEY``, ``OVERLAP``, the last two the sampled values), and the postprocessor ``finish_wgmma``
(``tirbench.tuning.postprocs.RewriteWgmma``, the space's first) tensorizes it and pipelines the k loop as the hand
kernel does (``warpgroup.tensorize_wgmma``), once the hand kernel's own checks accept the combination drawn:
overlap needs 3 stages or more, the pipeline must fit in the 227 KB of dynamic shared memory, and (here only) have
no more stages than the k loop has tiles, and a thread's accumulators must leave room in its share of the registers
(256 x 256 tiles do not: ptxas fails). A combination they refuse is rejected there, as the space's
``VerifyGPUCode`` (against the 227 KB limit, ``DesignSpace.dynamic_shared_memory``) rejects one whose padded C tile
does not fit: nothing raises in the tuner. A candidate whose decisions are a hand candidate's generates the hand
kernel's CUDA, byte for byte. The tiles divide by construction: M and N are padded up to multiples of 64, K to the
k tile, first (``tirbench.schedules.common.padding``; shapes that need none are not touched), so any m, n, k works.

``wgmma_seeds`` (``seed_candidates``) turns the hand sweep's candidates (``V8_WGMMA`` and its padded sweep,
``NHWC_WGMMA``) into this space's traces with their decisions set, so the search is measured from where the hand
sweep stops. ``intrinsics.wgmma.register_space_intrins`` registers every intrinsic a candidate can name
(``import_tensor_intrin`` calls it, so a tuned trace replays in a fresh process); the space's k tile, N, stages and
layouts are defined there (``SPACE_*``), below the space, for that.
"""
from __future__ import annotations

from tvm import s_tir

from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.common.padding import Padding, pad_to_tiles
from tirbench.schedules.common.tiling import (MAX_SHARED_BYTES, REGISTERS_PER_SM, SampledTile, Warps, gemm_block,
                                              has_block)
from tirbench.schedules.gemm.warpgroup import _require_wgmma_tiles, tensorize_wgmma, wgmma_nest
from tirbench.schedules.intrinsics import wgmma
from tirbench.workloads.base import Workload

#: The k tile: one 128-byte swizzled row of halves (what ``"swizzle128"`` needs).
TILE_K = wgmma.SPACE_TILE_K
#: Block rows: 64 (one warpgroup) x a sampled 1..4.
WARPS = SampledTile(unit=4, max_units=4)  # in warps: 4 per warpgroup
ROWS_UNIT = 16 * WARPS.unit
#: Block columns (the wgmma's N): 64 (a swizzled panel of B) x a sampled 1..4.
COLUMNS = SampledTile(unit=wgmma.SPACE_N[0], max_units=len(wgmma.SPACE_N))
#: Blocks launched together cover this many block rows (a divisor of them, at most 8).
RASTER = SampledTile(unit=1, max_units=8)
#: A thread's registers: bn / 2 accumulators plus about this many more (ptxas: 128 x 256 tiles use 159, 256 x 192
#: 128), out of 65536 per SM shared by the block's 2 x bm threads (at most 255 each).
REGISTERS_BESIDES_ACCUMULATORS = 32
#: Pipeline depths a candidate draws from.
STAGES = wgmma.SPACE_STAGES
#: Overlap off / on.
OVERLAP_CHOICES = (0, 1)
#: The shared-memory layouts searched, one design space each. Not ``"interleaved"``: the hand sweep keeps that one
#: as a lesson (3x slower at 4096^3, ``docs/notes-gemm.md``); add it here to search it too (``gemm_wgmma_design``
#: takes it).
LAYOUTS = wgmma.SPACE_LAYOUTS
#: Annotations on the product block that ``finish_wgmma`` reads (and removes); ``CROP`` and ``PADS``: a padded GEMM's
#: crop block and input pad blocks, folded away (``Padding.finish``) once the store is tensorized, as in v8 (C's
#: shared tile is aligned on the tensorized store block; before tensorize its alignment would be lost).
LAYOUT, STAGES_KEY, OVERLAP = "tirbench.wgmma_layout", "tirbench.wgmma_stages", "tirbench.wgmma_overlap"
CROP, PADS = "tirbench.wgmma_crop", "tirbench.wgmma_pads"


def require_wgmma_workload(wl: Workload, *, param: str = "space='wgmma'") -> None:
    """One-line ValueError unless ``wl`` is the fp16 GEMM (float32 C, as v8 writes it) or the fp16 NHWC conv2d."""
    if wl.dtype == "float16" and ((wl.name == "gemm" and wl.out_dtype == "float32")
                                  or (wl.name == "conv2d" and wl.layout == "NHWC")):
        return
    what = f"{wl.name} {wl.dtype} {wl.layout or ''}".rstrip()
    what += f" with a {wl.out_dtype} C" if wl.name == "gemm" else ""
    raise ValueError(f"{param} is the float16 GEMM (float32 C) or float16 NHWC conv2d on wgmma, not {what}")


def wgmma_pass_config(wl: Workload) -> dict[str, bool]:
    """The PassContext config the candidates build with: their hand kernel's (``V8_WGMMA``'s, ``NHWC_WGMMA``'s)."""
    from tirbench.schedules.conv.records import NHWC_WGMMA
    from tirbench.schedules.gemm.records import V8_WGMMA

    return dict((V8_WGMMA if wl.name == "gemm" else NHWC_WGMMA).pass_config)


def _design(sch: s_tir.Schedule, block: str, layout: str) -> Warps:
    """The sampled v8 kernel on the GEMM block ``block`` up to its tensor intrinsics (``finish_wgmma`` adds them);
    returns the warps as split factors, for a caller's epilogue."""
    blk, *_ = gemm_block(sch, block)
    dtype = sch.get(blk).reads[0].source.dtype
    if dtype != "float16":
        raise ValueError(f"the wgmma space needs float16 inputs, got a {dtype} workload")
    c_scope = sch.get(blk).writes[0].source.scope()  # global, or a convolution's shared C tile
    padding = pad_to_tiles(sch, block, (ROWS_UNIT, COLUMNS.unit, TILE_K), shared_output=c_scope == "global")
    tile, _, _, warps = wgmma_nest(sch, block, dtype=dtype, layout=layout, bn=COLUMNS, tile_k=TILE_K, warps=WARPS,
                                   raster=RASTER)
    stages = sch.sample_categorical(list(STAGES), [1 / len(STAGES)] * len(STAGES))
    overlap = sch.sample_categorical(list(OVERLAP_CHOICES), [0.5, 0.5])
    sch.annotate(tile, LAYOUT, layout)
    sch.annotate(tile, STAGES_KEY, stages)
    sch.annotate(tile, OVERLAP, overlap)
    if padding.through_shared:  # C's shared tile is stored by the tensorized store: left to finish_wgmma
        sch.annotate(tile, CROP, padding.output)
        sch.annotate(tile, PADS, ",".join(padding.inputs))
    else:
        padding.finish(sch, warps)
    return warps


def gemm_wgmma_design(sch: s_tir.Schedule, *, layout: str = "swizzle128") -> s_tir.Schedule:
    """The fp16 GEMM's design in one shared-memory ``layout`` (see the module docstring)."""
    if layout not in wgmma.LAYOUTS:
        raise ValueError(f"layout={layout!r}: expected one of {', '.join(map(repr, wgmma.LAYOUTS))}")
    _design(sch, "C", layout)
    return sch


def conv2d_wgmma_design(sch: s_tir.Schedule) -> s_tir.Schedule:
    """The fp16 NHWC convolution's design: ``conv2d_nhwc_wgmma``'s implicit GEMM (channel blocks of 64 where 64
    divides C, else C) with the sampled v8 kernel (``"swizzle128"``, as there), C written out through the same
    epilogue."""
    from tirbench.schedules.conv.implicit_gemm import _channel_block, _finish, conv2d_as_gemm

    conv2d_as_gemm(sch, channel_block=_channel_block(sch, TILE_K, None))
    warps = _design(sch, "conv", "swizzle128")
    return _finish(sch, warps=warps)


def wgmma_space(sch: s_tir.Schedule) -> list[s_tir.Schedule]:
    """``ScheduleFn`` body: the GEMM's design once per searched layout (``LAYOUTS``), or the convolution's."""
    if has_block(sch, "conv"):
        return [conv2d_wgmma_design(sch.copy())]
    return [gemm_wgmma_design(sch.copy(), layout=layout) for layout in LAYOUTS]


def _product_blocks(sch: s_tir.Schedule) -> list[str]:
    """Names of the blocks the design left annotated for ``finish_wgmma``."""
    found, todo = [], list(sch.get_child_blocks(sch.get_sblock("root")))
    while todo:
        blk = todo.pop()
        if LAYOUT in sch.get(blk).annotations:
            found.append(sch.get(blk).name_hint)
        todo.extend(sch.get_child_blocks(blk))
    return found


def finish_wgmma(sch: s_tir.Schedule) -> bool:
    """The space's postprocessing step: tensorize each annotated product block (``tensorize_wgmma``) with the
    intrinsics of its sampled N and its layout, stages and overlap, and pipeline its k loop; False (the candidate
    is rejected) where the hand kernel's checks refuse the drawn combination (overlap with 2 stages, a pipeline
    over 227 KB of shared memory), where the pipeline has more stages than the k loop has tiles, where the
    accumulators leave a thread too few registers (``REGISTERS_BESIDES_ACCUMULATORS``), or where there is nothing to
    finish."""
    names = _product_blocks(sch)
    for name in names:
        tile = sch.get_sblock(name)
        ann = sch.get(tile).annotations
        layout, stages, overlap = str(ann[LAYOUT]), int(ann[STAGES_KEY]), bool(int(ann[OVERLAP]))
        inner, = sch.get_child_blocks(tile)  # the GEMM block ("C", "conv")
        block = sch.get(inner).name_hint
        *_, warp, ko = sch.get_loops(tile)
        bn, tile_k = (int(sch.get(loop).extent) for loop in sch.get_loops(inner)[-2:])
        bm = 16 * int(sch.get(warp).extent)
        if stages > int(sch.get(ko).extent):  # a pipeline deeper than the k loop: nothing to gain, odd code
            return False
        if bn // 2 + REGISTERS_BESIDES_ACCUMULATORS > min(255, REGISTERS_PER_SM // (2 * bm)):
            return False  # 256 x 256: ptxas gives up ("Insufficient registers"), a build failure on the GPU host
        try:  # the tiles divide by construction; what is left to check is the combination drawn
            _require_wgmma_tiles((bm, bn, tile_k), "float16", block_tile=(bm, bn), tile_k=tile_k, stages=stages,
                                 raster=1, layout=layout, overlap=overlap)
        except ValueError:
            return False
        padding = None
        if CROP in ann:
            pads = str(ann[PADS])
            padding = Padding(tuple(pads.split(",")) if pads else (), str(ann[CROP]), through_shared=True)
        for key in (LAYOUT, STAGES_KEY, OVERLAP) + ((CROP, PADS) if padding else ()):
            sch.unannotate(tile, key)
        acc, = sch.get_consumers(tile)
        tensorize_wgmma(sch, block, acc, ko, bn=bn, tile_k=tile_k, layout=layout, stages=stages, overlap=overlap,
                        dtype="float16")
        if padding:  # as gemm_v8_wgmma's, after the tensor intrinsics
            padding.finish(sch, bm // 16)
    return bool(names)


def _gemm_extents(wl: Workload) -> tuple[int, int]:
    """(m, n) of ``wl``'s GEMM block (the convolution's after ``conv2d_as_gemm``), padded as the design pads them."""
    sch = s_tir.Schedule(wl.mod)
    block = "C"
    if has_block(sch, "conv"):
        from tirbench.schedules.conv.implicit_gemm import _channel_block, conv2d_as_gemm

        conv2d_as_gemm(sch, channel_block=_channel_block(sch, TILE_K, None))
        block = "conv"
    _, m, n, _ = gemm_block(sch, block)
    return -(-m // ROWS_UNIT) * ROWS_UNIT, -(-n // COLUMNS.unit) * COLUMNS.unit


def _decisions(mn: tuple[int, int], params: dict) -> tuple[list[list[int]], list[int]] | None:
    """The space's decisions for a hand candidate's ``params`` (``gemm_v8_wgmma`` / ``conv2d_nhwc_wgmma``
    keywords) on a GEMM of the padded extents ``mn``: (perfect tiles in the order the design samples them,
    categorical values), or None where the candidate is not in the space for this shape."""
    m, n = mn
    (bm, bn), raster, stages = params["block_tile"], params.get("raster", 1), params["stages"]
    fits = (params.get("tile_k", TILE_K) == TILE_K and bm % ROWS_UNIT == 0 and bn % COLUMNS.unit == 0
            and m % bm == 0 and n % bn == 0 and bm // ROWS_UNIT <= WARPS.max_units
            and bn // COLUMNS.unit <= COLUMNS.max_units and raster <= RASTER.max_units
            and (m // bm) % raster == 0 and stages in STAGES)
    if not fits:
        return None
    tiles = [[n // bn, bn // COLUMNS.unit], [m // bm, bm // ROWS_UNIT], [m // bm // raster, raster]]
    return tiles, [stages, int(bool(params.get("overlap", False)))]


def seed_candidates(wl: Workload) -> list[tuple[dict, s_tir.Schedule]]:
    """The hand candidates that fit ``wl``, each with its parameters (``V8_WGMMA`` / ``NHWC_WGMMA`` keywords) and as
    this space's schedule (see the module docstring): ``V8_WGMMA``'s and its padded sweep's for the GEMM (each in its
    layout's design), ``NHWC_WGMMA``'s for the convolution. A candidate whose tiles do not divide the (padded)
    shape, that the space does not sample (another ``tile_k``), or whose pipeline does not fit in shared memory is
    left out, as is a repeat."""
    from tirbench.schedules.conv.records import NHWC_WGMMA
    from tirbench.schedules.gemm.records import PADDED, V8_WGMMA

    require_wgmma_workload(wl)
    if wl.name == "gemm":
        record, extra, layouts = V8_WGMMA, PADDED[V8_WGMMA.name], LAYOUTS
    else:
        record, extra, layouts = NHWC_WGMMA, (), ("swizzle128",)
    designs = dict(zip(layouts, wgmma_space(s_tir.Schedule(wl.mod))))
    mn = _gemm_extents(wl)
    out, seen = [], set()
    for cand in (*record.candidates, *extra):
        params = record.params(cand)
        key = repr(sorted(params.items()))
        decisions = _decisions(mn, params)
        layout = params.get("layout", "swizzle128")
        if key in seen or decisions is None or layout not in designs:
            continue
        (bm, bn), stages = params["block_tile"], params["stages"]
        if stages * (bm + bn) * TILE_K * 2 > MAX_SHARED_BYTES:
            continue
        seen.add(key)
        out.append((params, with_decisions(wl, designs[layout], decisions[0], categorical=decisions[1])))
    return out


def wgmma_seeds(wl: Workload) -> list[s_tir.Schedule]:
    """``DesignSpace.seeds``: the schedules of ``seed_candidates``."""
    return [sch for _, sch in seed_candidates(wl)]

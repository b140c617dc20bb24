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

A sixth decision picks the **pipeline**: v8's (every warp loads and multiplies, the above) or v9's warp-specialized
one (a producer warpgroup loads, one or two consumer warpgroups only multiply): ``gemm.tma_ws.gemm_v9_tma_ws`` on
the GEMM (both tiles by TMA), ``conv.tma_ws.conv2d_nhwc_tma_ws`` on the convolution (the filter's tiles by TMA, the
im2col tiles gathered by the producer's threads), with that kernel's own choices sampled beside it: its ring depth
(``WS_STAGES``), one block per tile or 132 persistent ones, and on the convolution the producer threads per im2col
row (``WS_LANES``) and the gather through L1 or not; its block tile is the sampled ``bm`` x ``bn`` (64 or 128 rows:
one or two consumers). That kernel is written whole in TIRx, not scheduled, so no trace of schedule primitives
yields it: a candidate that draws it is finished as a stand-in (its v8 kernel with the same block tile, 2 stages, no
overlap: what the cost model sees) whose root block carries the drawn kernel (``SUBSTITUTE``: its name, the
workload's geometry and the parameters), and ``as_built`` swaps in the TIRx kernel wherever a candidate is built:
the tuner's builders and ``tuning.replay`` (both, and the kernels' choices, checks and builders, in
``spaces.ws_kernels``). What is measured, recorded and replayed is the warp-specialized kernel; the database keeps the
trace, whose decisions say which one.

The three tiles are perfect tiles, which ``MutateTileSize`` moves; the categorical choices are moved by
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

``wgmma_seeds`` (``seed_candidates``) turns the hand sweep's candidates (``V8_WGMMA`` and its padded sweep and
``V9_TMA_WS`` on the GEMM, ``NHWC_WGMMA`` and ``NHWC_TMA_WS`` on the convolution) into this space's traces with their
decisions set, so the search is measured from where the hand sweep stops; ``tuned_kernel`` says what a tuned schedule
builds as and whether that is a seed's kernel. ``intrinsics.wgmma.register_space_intrins`` registers every
intrinsic a candidate can name (``import_tensor_intrin`` calls it, so a tuned trace replays in a fresh process); the
space's k tile, N, stages and layouts are defined there (``SPACE_*``), below the space, for that.
"""
from __future__ import annotations

import json

from tvm import s_tir

from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.spaces.ws_kernels import (CONV_WS, GEOMETRY, PIPELINE, PIPELINES, SUBSTITUTE, WS_CHOICES,
                                                WS_KEYWORDS, require_ws, substitute_spec, ws_kernel, ws_record)
from tirbench.schedules.common.padding import Padding, pad_to_tiles
from tirbench.schedules.common.tiling import (MAX_SHARED_BYTES, REGISTERS_PER_SM, SampledTile, Warps, gemm_block,
                                              has_block)
from tirbench.schedules.gemm.warpgroup import require_wgmma_tiles, tensorize_wgmma, wgmma_nest
from tirbench.schedules.intrinsics import wgmma
from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import require_plain

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
#: as a lesson (3x slower at 4096^3, ``docs/gemm.md``); add it here to search it too (``gemm_wgmma_design``
#: takes it).
LAYOUTS = wgmma.SPACE_LAYOUTS
#: Annotations on the product block that ``finish_wgmma`` reads (and removes); ``CROP`` and ``PADS``: a padded GEMM's
#: crop block and input pad blocks, folded away (``Padding.finish``) once the store is tensorized, as in v8 (C's
#: shared tile is aligned on the tensorized store block; before tensorize its alignment would be lost).
LAYOUT, STAGES_KEY, OVERLAP = "tirbench.wgmma_layout", "tirbench.wgmma_stages", "tirbench.wgmma_overlap"
CROP, PADS = "tirbench.wgmma_crop", "tirbench.wgmma_pads"
#: The stand-in a warp-specialized candidate is finished as (v8 with its block tile): stages, overlap.
STAND_IN = (2, False)


def require_wgmma_workload(wl: Workload, *, param: str = "space='wgmma'") -> None:
    """One-line ValueError unless ``wl`` is the fp16 GEMM (float32 C, as v8 writes it) or the fp16 NHWC conv2d (of
    one group, no dilation, one stride and one padding)."""
    if wl.dtype == "float16" and ((wl.name == "gemm" and wl.out_dtype == "float32")
                                  or (wl.name == "conv2d" and wl.layout == "NHWC")):
        if wl.name == "conv2d":
            require_plain(wl, param)
        return
    what = f"{wl.name} {wl.dtype} {wl.layout or ''}".rstrip()
    what += f" with a {wl.out_dtype} C" if wl.name == "gemm" else ""
    raise ValueError(f"{param} is the float16 GEMM (float32 C) or float16 NHWC conv2d on wgmma, not {what}")


def wgmma_pass_config(wl: Workload) -> dict[str, bool]:
    """The PassContext config the candidates build with: their hand kernel's (``V8_WGMMA``'s, ``NHWC_WGMMA``'s)."""
    from tirbench.schedules.conv.records import NHWC_WGMMA
    from tirbench.schedules.gemm.records import V8_WGMMA

    return dict((V8_WGMMA if wl.name == "gemm" else NHWC_WGMMA).pass_config)


def _geometry(sch: s_tir.Schedule) -> dict:
    """The geometry the design annotates for the warp-specialized kernel (see ``GEOMETRY``), read from the workload's
    schedule before the design transforms it: the convolution's ``conv_geometry``, or the GEMM's m, n, k and C's
    dtype."""
    if has_block(sch, "conv"):
        from tirbench.schedules.conv.tma_ws import conv_geometry

        return conv_geometry(sch, "NHWC")
    _, m, n, k = gemm_block(sch, "C")
    return {"m": m, "n": n, "k": k, "out_dtype": str(sch.mod["main"].params[-1].dtype)}  # C, the last parameter


def _design(sch: s_tir.Schedule, block: str, layout: str, geometry: dict | None = None) -> Warps:
    """The sampled v8 kernel on the GEMM block ``block`` up to its tensor intrinsics (``finish_wgmma`` adds them);
    with the workload's ``geometry`` (``ws_kernel`` tells which kernel it is for), the pipeline and the
    warp-specialized kernel's choices sampled too. Returns the warps as split factors, for a caller's epilogue."""
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
    if geometry is not None:
        for key, choices in ((PIPELINE, PIPELINES), *WS_CHOICES[ws_kernel(geometry)]):
            sch.annotate(tile, key, sch.sample_categorical(list(choices), [1 / len(choices)] * len(choices)))
        sch.annotate(tile, GEOMETRY, json.dumps(geometry, sort_keys=True))
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
    _design(sch, "C", layout, geometry=_geometry(sch))
    return sch


def conv2d_wgmma_design(sch: s_tir.Schedule) -> s_tir.Schedule:
    """The fp16 NHWC convolution's design: ``conv2d_nhwc_wgmma``'s implicit GEMM (channel blocks of 64 where 64
    divides C, else C) with the sampled v8 kernel (``"swizzle128"``, as there), C written out through the same
    epilogue, or the warp-specialized kernel (the sampled pipeline, see the module docstring)."""
    from tirbench.schedules.conv.implicit_gemm import (conv2d_as_gemm, default_channel_block,
                                                      finish_implicit_gemm)

    geometry = _geometry(sch)
    conv2d_as_gemm(sch, channel_block=default_channel_block(sch, TILE_K, None))
    warps = _design(sch, "conv", "swizzle128", geometry=geometry)
    return finish_implicit_gemm(sch, warps=warps)


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


def warp_specialized_spec(ann: dict, block_tile: tuple[int, int]) -> dict | None:
    """The warp-specialized kernel the product block's annotations ``ann`` drew, as ``SUBSTITUTE`` records it
    (kernel, geometry, parameters: its helper's keywords, its defaults for the rest), or None where they drew v8; a
    one-line ValueError where that kernel refuses the parameters (its checks on the workload: e.g. more than two
    consumers' registers, a ring over 227 KB, tiles that do not divide an unpadded GEMM)."""
    if PIPELINE not in ann or not int(ann[PIPELINE]):
        return None
    geometry = json.loads(str(ann[GEOMETRY]))
    kernel = ws_kernel(geometry)
    drawn = {WS_KEYWORDS[key]: int(ann[key]) for key, _ in WS_CHOICES[kernel]}
    if "l1_gather" in drawn:
        drawn["l1_gather"] = bool(drawn["l1_gather"])
    params = ws_record(kernel).params({"block_tile": block_tile, "consumers": block_tile[0] // ROWS_UNIT, **drawn})
    require_ws(kernel, geometry, params)
    return {"kernel": kernel, "geometry": geometry, "params": params}


def finish_wgmma(sch: s_tir.Schedule) -> bool:
    """The space's postprocessing step: tensorize each annotated product block (``tensorize_wgmma``) with the
    intrinsics of its sampled N and its layout, stages and overlap, and pipeline its k loop; False (the candidate
    is rejected) where the hand kernel's checks refuse the drawn combination (overlap with 2 stages, a pipeline
    over 227 KB of shared memory), where the pipeline has more stages than the k loop has tiles, where the
    accumulators leave a thread too few registers (``REGISTERS_BESIDES_ACCUMULATORS``), or where there is nothing to
    finish. A candidate that drew the warp-specialized pipeline is checked by that kernel's rules instead, finished
    as its stand-in (``STAND_IN``) and its root block annotated with the kernel to build (``SUBSTITUTE``)."""
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
        try:
            ws_spec = warp_specialized_spec(dict(ann), (bm, bn))
        except ValueError:
            return False
        if ws_spec is not None:
            stages, overlap = STAND_IN
            sch.annotate(sch.get_sblock("root"), SUBSTITUTE, json.dumps(ws_spec, sort_keys=True))
        if stages > int(sch.get(ko).extent):  # a pipeline deeper than the k loop: nothing to gain, odd code
            return False
        if bn // 2 + REGISTERS_BESIDES_ACCUMULATORS > min(255, REGISTERS_PER_SM // (2 * bm)):
            return False  # 256 x 256: ptxas gives up ("Insufficient registers"), a build failure on the GPU host
        try:  # the tiles divide by construction; what is left to check is the combination drawn
            require_wgmma_tiles((bm, bn, tile_k), "float16", block_tile=(bm, bn), tile_k=tile_k, stages=stages,
                                 raster=1, layout=layout, overlap=overlap)
        except ValueError:
            return False
        padding = None
        if CROP in ann:
            pads = str(ann[PADS])
            padding = Padding(tuple(pads.split(",")) if pads else (), str(ann[CROP]), through_shared=True)
        ws_keys = tuple(key for key in (PIPELINE, *WS_KEYWORDS, GEOMETRY) if key in ann)
        for key in (LAYOUT, STAGES_KEY, OVERLAP) + ((CROP, PADS) if padding else ()) + ws_keys:
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
        from tirbench.schedules.conv.implicit_gemm import conv2d_as_gemm, default_channel_block

        conv2d_as_gemm(sch, channel_block=default_channel_block(sch, TILE_K, None))
        block = "conv"
    _, m, n, _ = gemm_block(sch, block)
    return -(-m // ROWS_UNIT) * ROWS_UNIT, -(-n // COLUMNS.unit) * COLUMNS.unit


def _ws_values(kernel: str, params: dict) -> list[int]:
    """The values of the warp-specialized choices (``WS_CHOICES``) that ``params`` make, in the design's order."""
    return [int(params[WS_KEYWORDS[key]]) for key, _ in WS_CHOICES[kernel]]


def _decisions(mn: tuple[int, int], params: dict, kernel: str) -> tuple[list[list[int]], list[int]] | None:
    """The space's decisions for a v8 hand candidate's ``params`` (``gemm_v8_wgmma`` / ``conv2d_nhwc_wgmma``
    keywords) on a GEMM of the padded extents ``mn``: (perfect tiles in the order the design samples them,
    categorical values: v8's, the pipeline v8's, the warp-specialized ``kernel``'s choices at its defaults), or None
    where the candidate is not in the space for this shape."""
    m, n = mn
    (bm, bn), raster, stages = params["block_tile"], params.get("raster", 1), params["stages"]
    fits = (params.get("tile_k", TILE_K) == TILE_K and _tiles_fit(mn, (bm, bn)) and raster <= RASTER.max_units
            and (m // bm) % raster == 0 and stages in STAGES)
    if not fits:
        return None
    tiles = [[n // bn, bn // COLUMNS.unit], [m // bm, bm // ROWS_UNIT], [m // bm // raster, raster]]
    return tiles, [stages, int(bool(params.get("overlap", False))), 0,
                   *_ws_values(kernel, ws_record(kernel).defaults)]


def _tiles_fit(mn: tuple[int, int], block_tile: tuple[int, int]) -> bool:
    """Whether the design can sample ``block_tile`` on a GEMM of the padded extents ``mn``."""
    (m, n), (bm, bn) = mn, block_tile
    return (bm % ROWS_UNIT == 0 and bn % COLUMNS.unit == 0 and m % bm == 0 and n % bn == 0
            and bm // ROWS_UNIT <= WARPS.max_units and bn // COLUMNS.unit <= COLUMNS.max_units)


def _ws_decisions(mn: tuple[int, int], params: dict, kernel: str,
                  geometry: dict) -> tuple[list[list[int]], list[int]] | None:
    """The decisions of a warp-specialized hand candidate (``kernel``'s keywords): its block tile (raster 1), the
    stand-in's stages and overlap, the pipeline and its choices; None where the space cannot draw it (A by TMA, no
    TMA store, a value it does not sample, a block tile that does not divide) or the kernel refuses it."""
    m, n = mn
    bm, bn = params["block_tile"]
    values = _ws_values(kernel, params)
    fits = (_tiles_fit(mn, (bm, bn)) and params["consumers"] * ROWS_UNIT == bm and params["tma_store"]
            and not params.get("a_by_tma", False)
            and all(value in choices for value, (_, choices) in zip(values, WS_CHOICES[kernel])))
    try:
        require_ws(kernel, geometry, params)
    except ValueError:
        fits = False
    if not fits:
        return None
    tiles = [[n // bn, bn // COLUMNS.unit], [m // bm, bm // ROWS_UNIT], [m // bm, 1]]
    return tiles, [STAND_IN[0], int(STAND_IN[1]), 1, *values]


def seed_candidates(wl: Workload) -> list[tuple[dict, s_tir.Schedule]]:
    """The hand candidates that fit ``wl``, each with its parameters (its record's keywords) and as this space's
    schedule (see the module docstring): ``V8_WGMMA``'s and its padded sweep's and ``V9_TMA_WS``'s for the GEMM,
    ``NHWC_WGMMA``'s and ``NHWC_TMA_WS``'s for the convolution. A candidate whose tiles do not divide the (padded)
    shape, that the space does not sample (another ``tile_k``, A by TMA, no TMA store), that its kernel refuses, or
    whose pipeline does not fit in shared memory is left out, as is a repeat."""
    from tirbench.schedules.conv.records import NHWC_WGMMA
    from tirbench.schedules.gemm.records import PADDED, V8_WGMMA

    require_wgmma_workload(wl)
    geometry = _geometry(s_tir.Schedule(wl.mod))
    kernel = ws_kernel(geometry)
    ws = ws_record(kernel)
    if kernel == CONV_WS:
        v8, v8_candidates, layouts = NHWC_WGMMA, NHWC_WGMMA.candidates, ("swizzle128",)
    else:
        v8, v8_candidates, layouts = V8_WGMMA, (*V8_WGMMA.candidates, *PADDED[V8_WGMMA.name]), LAYOUTS
    designs = dict(zip(layouts, wgmma_space(s_tir.Schedule(wl.mod))))
    mn = _gemm_extents(wl)
    out, seen = [], set()
    for record, candidates in ((v8, v8_candidates), (ws, ws.candidates)):
        for cand in candidates:
            params = record.params(cand)
            key = (record.name, repr(sorted(params.items())))
            layout = params.get("layout", "swizzle128")
            if record is ws:
                decisions = _ws_decisions(mn, params, kernel, geometry)
            else:
                decisions = _decisions(mn, params, kernel)
                (bm, bn), stages = params["block_tile"], params["stages"]
                if stages * (bm + bn) * TILE_K * 2 > MAX_SHARED_BYTES:
                    continue
            if key in seen or decisions is None or layout not in designs:
                continue
            seen.add(key)
            out.append((params, with_decisions(wl, designs[layout], decisions[0], categorical=decisions[1])))
    return out


def _v8_decisions(sch: s_tir.Schedule) -> list:
    """The v8 decisions of a schedule of the space: its three tiles and the values of its stages and overlap."""
    trace = sch.trace
    samples = [inst for inst in trace.insts if inst.kind.name.startswith("Sample")][:5]
    return [[int(d) for d in trace.decisions[inst]] if inst.kind.name == "SamplePerfectTile"
            else int(inst.attrs[0][int(trace.decisions[inst])]) for inst in samples]


def tuned_kernel(wl: Workload, sch: s_tir.Schedule) -> tuple[str, bool]:
    """What a tuned schedule of ``wl`` in this space builds as (one line: the warp-specialized kernel's call, or
    v8's block tile, raster, stages and overlap) and whether that is a seed's kernel, a hand candidate, rather than
    one the search found."""
    seeds = seed_candidates(wl)
    spec = substitute_spec(sch.mod)
    if spec is not None:
        params = {**spec["params"], "block_tile": tuple(spec["params"]["block_tile"])}
        return ws_record(spec["kernel"]).describe(params), any(p == params for p, _ in seeds)
    decisions = _v8_decisions(sch)
    (n_tiles, n_units), (m_tiles, m_units), (_, raster), stages, overlap = decisions
    text = (f"v8: block tile {m_units * ROWS_UNIT}x{n_units * COLUMNS.unit}, raster {raster}, {stages} stages, "
            f"overlap {'on' if overlap else 'off'}")
    return text, any(_v8_decisions(seed) == decisions for p, seed in seeds if "consumers" not in p)


def wgmma_seeds(wl: Workload) -> list[s_tir.Schedule]:
    """``DesignSpace.seeds``: the schedules of ``seed_candidates``."""
    return [sch for _, sch in seed_candidates(wl)]

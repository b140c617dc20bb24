"""AutoTVM's classic tunable CUDA conv2d template ("tune_conv2d_cuda.py", NCHW) as a MetaSchedule design space.

The TE template's knobs map one to one onto TensorIR sampling instructions: each ``define_split`` is a
``sample_perfect_tile`` (4 factors for the output channels f, rows y and columns x: block, virtual thread,
thread, inner; 3 for the reductions rc, ry, rx: outer, middle, inner), each ``define_knob`` a
``sample_categorical``. The schedule on the ``"conv"`` block of ``tirbench.workloads.conv2d(..., layout="NCHW")``:

* blocks over (batch, f, y, x) block tiles, vthread.z/y/x and threads over the next two levels; each thread
  accumulates its f x y x x inner tile in registers (``cache_write`` "local", written back by the thread);
* reduction order rco, ryo, rxo, rcm, rym, rxm, rci, ryi, rxi, then the inner output tile;
* the padded input and the filter staged in shared memory at rxo (the ``"pad"`` block inlined into the fill, so the
  padded copy never exists), fetched cooperatively: the copy's loops fused and split over the same f x y x x
  threads as the compute (a predicate guards the tail);
* the unroll knobs as ``pragma_auto_unroll_max_step`` / ``pragma_unroll_explicit`` on the outermost loop, as the
  TE template put them on its ``kernel_scope`` loop: TVM's UnrollLoop pass unrolls every loop inside with at most
  that many steps, by copying the body (explicit) or by ``#pragma unroll`` for nvcc (implicit).

The TE template binds blockIdx.z/y/x and threadIdx.z/y/x; here the block loops (batch fused with f, y, x) are
fused onto blockIdx.x and the thread loops (f, y, x) onto threadIdx.x, x fastest: CUDA numbers threads and
blocks x fastest, so the warps and the block order are the TE template's, but no sample can break a per-dimension
limit (threadIdx.z <= 64, gridDim.y/z <= 65535) that ``VerifyGPUCode`` does not check: on an H100 a sample with
512 threads on threadIdx.z passed MetaSchedule's postprocessors and failed to launch.

Each tile split has ``max_innermost_factor`` = the loop's extent, so every ordered factorization can be sampled
(the template's full space; ``template_space_size`` counts it). -1, "no limit", samples the same space, but
MetaSchedule's ``MutateTileSize`` reads the limit literally and would then never grow an innermost factor.
MetaSchedule's ``MutateUnroll`` only mutates its own root-block unroll annotation, so during a search the two
unroll knobs change when the evolutionary search draws fresh random samples, the tiles also by mutation.
"""
from __future__ import annotations

import math
from typing import Union

from tvm import s_tir

from tirbench.workloads.base import Workload
from tirbench.workloads.conv_geometry import require_plain

#: The TE template's splits: knob name -> (loop, number of factors).
TILES: dict[str, tuple[str, int]] = {"tile_f": ("f", 4), "tile_y": ("y", 4), "tile_x": ("x", 4),
                                     "tile_rc": ("rc", 3), "tile_ry": ("ry", 3), "tile_rx": ("rx", 3)}
#: The TE template's knobs and their candidates.
KNOBS: dict[str, tuple[int, ...]] = {"auto_unroll_max_step": (0, 512, 1500), "unroll_explicit": (0, 1)}

#: One point of the space, AutoTVM-style: every ``TILES`` knob -> its factors (outermost first, all of them
#: given: their product is the loop's extent), every ``KNOBS`` knob -> one of its candidates.
Config = dict[str, Union[list[int], int]]


def require_nchw_fp32_conv(wl: Workload, *, param: str = "workload") -> None:
    """One-line ValueError unless ``wl`` is a float32 NCHW ``conv2d`` workload of one group, no dilation, one stride
    and one padding (what the template schedules)."""
    if (wl.name, wl.layout, wl.dtype) != ("conv2d", "NCHW", "float32"):
        raise ValueError(f"{param}: the conv2d template needs a float32 NCHW conv2d, not {wl.name} {wl.dtype} "
                         f"{wl.layout or '(no layout)'}")
    require_plain(wl, param)


def _conv_block(sch: s_tir.Schedule) -> s_tir.SBlockRV:
    """The ``"conv"`` block, after checking it is an NCHW float32 convolution: reads Xp then W[f, rc, ry, rx]."""
    wrong = ValueError("conv2d_template_space needs the 'conv' block of a float32 NCHW convolution "
                       "(tirbench.workloads.conv2d(..., layout='NCHW'))")
    try:
        blk = sch.get_sblock("conv")
    except s_tir.ScheduleError:
        raise wrong from None
    block = sch.get(blk)
    iters = [iv.var for iv in block.iter_vars]
    if len(iters) != 7 or [r.source.name for r in block.reads] != ["Xp", "W"]:
        raise wrong
    w_index = [rng.min for rng in block.reads[1].region]
    if not all(e.same_as(iters[i]) for e, i in zip(w_index, (1, 4, 5, 6))) or any(
            str(r.source.dtype) != "float32" for r in (*block.reads, *block.writes)):
        raise wrong
    return blk


def _require_config(config: Config, extents: dict[str, int]) -> None:
    """One-line ValueError naming the knob for a config that is not a point of the space."""
    names = [*TILES, *KNOBS]
    if sorted(config) != sorted(names):
        raise ValueError(f"config: expected the knobs {', '.join(names)}, got {', '.join(config) or 'none'}")
    for name, (loop, parts) in TILES.items():
        factors = config[name]
        if (not isinstance(factors, (list, tuple)) or len(factors) != parts
                or not all(isinstance(v, int) and v > 0 for v in factors) or math.prod(factors) != extents[loop]):
            raise ValueError(f"config[{name!r}]={factors!r}: expected {parts} positive factors whose product is "
                             f"{loop}={extents[loop]}")
    for name, candidates in KNOBS.items():
        if config[name] not in candidates:
            raise ValueError(f"config[{name!r}]={config[name]!r}: expected one of {list(candidates)}")


def conv2d_template_space(sch: s_tir.Schedule, config: Config | None = None) -> s_tir.Schedule:
    """The template with its knobs sampled (a ``ScheduleFn`` body), or fixed to ``config`` (the same trace with
    those decisions: one point of the space, e.g. a tuned config written by hand)."""
    conv = _conv_block(sch)
    loops = sch.get_loops(conv)
    extents = {name: int(sch.get(loop).extent) for name, loop in zip(("n", "f", "y", "x", "rc", "ry", "rx"), loops)}
    if config is not None:
        _require_config(config, extents)
    n, *_ = loops
    splits, factors = {}, {}
    for (name, (loop_name, parts)), loop in zip(TILES.items(), loops[1:]):
        factors[name] = sch.sample_perfect_tile(loop, n=parts, max_innermost_factor=extents[loop_name],
                                                decision=None if config is None else list(config[name]))
        splits[name] = sch.split(loop, factors=factors[name])
    (bf, vf, tf, fi), (by, vy, ty, yi), (bx, vx, tx, xi) = (splits[k] for k in ("tile_f", "tile_y", "tile_x"))
    (rco, rcm, rci), (ryo, rym, ryi), (rxo, rxm, rxi) = (splits[k] for k in ("tile_rc", "tile_ry", "tile_rx"))
    sch.reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, rco, ryo, rxo, rcm, rym, rxm, rci, ryi, rxi, fi, yi, xi)
    blocks, threads = sch.fuse(n, bf, by, bx), sch.fuse(tf, ty, tx)
    for loop, tag in ((blocks, "blockIdx.x"), (vf, "vthread.z"), (vy, "vthread.y"), (vx, "vthread.x"),
                      (threads, "threadIdx.x")):
        sch.bind(loop, tag)
    out_local = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(out_local, threads)
    caches = [sch.cache_read(conv, index, "shared") for index in (0, 1)]  # Xp, W
    for cache in caches:  # unit loops kept: the fetch below fuses a fixed number of loops whatever the tiles
        sch.compute_at(cache, rxo, preserve_unit_loops=True)
    sch.compute_inline(sch.get_sblock("pad"))
    thread_factors = [factors[k][2] for k in ("tile_f", "tile_y", "tile_x")]
    for cache in caches:
        fused = sch.fuse(*sch.get_loops(cache)[-4:])
        _, *fetch_threads = sch.split(fused, factors=[None, *thread_factors])
        sch.bind(sch.fuse(*fetch_threads), "threadIdx.x")
    for name, ann in (("auto_unroll_max_step", "pragma_auto_unroll_max_step"),
                      ("unroll_explicit", "pragma_unroll_explicit")):
        candidates = KNOBS[name]
        knob = sch.sample_categorical(list(candidates), [1 / len(candidates)] * len(candidates),
                                      decision=None if config is None else candidates.index(config[name]))
        sch.annotate(blocks, ann, knob)
    sch.decompose_reduction(conv, rco)
    return sch


def template_config(sch: s_tir.Schedule) -> Config:
    """The config (AutoTVM-style knob values) of a schedule made by ``conv2d_template_space``, e.g. a tuned best."""
    trace = sch.trace
    decisions = [(inst, trace.decisions[inst]) for inst in trace.insts
                 if inst.kind.name in ("SamplePerfectTile", "SampleCategorical") and inst in trace.decisions]
    if len(decisions) != len(TILES) + len(KNOBS):
        raise ValueError("sch: not a schedule of conv2d_template_space (its trace has other sampling decisions)")
    config: Config = {name: [int(v) for v in decision] for name, (_, decision) in zip(TILES, decisions)}
    for name, (_, decision) in zip(KNOBS, decisions[len(TILES):]):
        config[name] = KNOBS[name][int(decision)]
    return config


def _ordered_factorizations(extent: int, parts: int) -> int:
    """Ways to write ``extent`` as an ordered product of ``parts`` positive factors: per prime power p^e, the
    ways to spread e over the parts, C(e + parts - 1, parts - 1)."""
    count, p = 1, 2
    while extent > 1:
        e = 0
        while extent % p == 0:
            extent, e = extent // p, e + 1
        count *= math.comb(e + parts - 1, parts - 1)
        p += 1
    return count


def template_space_size(wl: Workload) -> int:
    """Configurations of the template for ``wl``: the ordered factorizations of each split loop, times the
    3 x 2 unroll knobs (what AutoTVM's ``len(task.config_space)`` reports)."""
    require_nchw_fp32_conv(wl)
    sch = s_tir.Schedule(wl.mod)
    loops = sch.get_loops(_conv_block(sch))[1:]
    size = math.prod(_ordered_factorizations(int(sch.get(loop).extent), parts)
                     for loop, (_, parts) in zip(loops, TILES.values()))
    return size * math.prod(len(c) for c in KNOBS.values())

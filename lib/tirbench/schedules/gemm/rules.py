"""GEMM rules: which rungs of the ladder take a GEMM, and with which tiles, decided from the GEMM itself.

The conv rules' counterpart (``schedules.conv.rules``) for ``workloads.gemm``: ``rule_records(wl)`` reads the
workload's dtype, out dtype and sizes and returns the ``KernelRecord`` families that take it, each with a few
candidates ranked by how their blocks fill the GPU's SMs, so that ``bench.choose`` builds, verifies and times only
those and keeps the fastest. No tuning: a GEMM is one sweep.

- float32: v5's warp-tiled SIMT kernel (``V5_WARP_TILED``), any M, N, K (padded where a tile does not divide).
- float16, float32 C: v9's warp-specialized TMA kernel (``V9_TMA_WS``; where its tiles do not divide the GEMM, the
  candidates with the TMA store, whose TMA unit zero-fills the loads and clips the stores past the edges, where K and
  N are multiples of 8: rows of A and B a tensor map can stride) and v8's wgmma (``V8_WGMMA``; any shape, padded).
- float16, float16 C (cuBLAS's fp16 GEMM): v9 only (the only rung that writes a half C), so none where K or N is not
  a multiple of 8.
- at most ``SPLITK_ROWS`` rows and a K of ``SPLITK_MIN_K`` or more, also split-K (``FEW_ROWS``: ``SPLITK_SIMT``
  for float32, ``SPLITK_WGMMA`` and ``SPLITK_MMA`` for float16 with a float32 C; ``gemm.splitk``): K in ``split``
  slices computed by ``split`` times as many blocks, then summed. A GEMM of 37 rows has too few block tiles to fill
  the SMs however narrow they are; its slices do.

The pool of a family is its sweep (``record.candidates``), the tiles for shapes no tile divides (``PADDED``), v5's tiles
of 96 and 192 and 96 x 256 (``WAVE_TILES``), v9's of 192 columns and 64 x 64 (``FP16_WAVE_TILES``) and the narrow tiles
for few rows (``NARROW``), and v9's split-K in a thread-block cluster where the GEMM has fewer tiles than SMs
(``cluster_splits``), less the tiles taller than the GEMM (``fits_rows``). A candidate's score (``score``) is its
wave fill (``wave_fill``): with ``blocks`` block tiles on the GPU's ``sm_count()`` SMs, one block per SM at a time,
``waves = ceil(blocks / SMs)`` and the SMs do useful work ``blocks / (waves * SMs)`` of the time, times the share of
each tile that is not padding; times the tile's reuse (``reuse``: the multiply-adds per value it loads,
``bm*bn / (bm+bn)``, relative to a 128 x 128 tile's and at most 1), so that a 64 x 32 tile whose last wave is a little
fuller does not beat a 128 x 256 one at 4096^3; times the real share of K padded to whole k tiles (``k_fill``: at K =
700 a k tile of 28 pads nothing, one of 24 pads 20). A split-K candidate's blocks are its tiles times its ``split``, its
K padded to ``split`` slices of whole k tiles. The best score first (to two decimals), then the larger tile, then the
fewer slices (less partial-sum traffic); a family keeps its ``KEEP`` best that schedule the GEMM. v8's unswizzled tile
(the lesson of its sweep: several times slower) is left out. v7 (``mma.sync``) is offered
only where the build's architecture builds none of ``FAMILIES``' (``FALLBACK``: no wgmma, before Hopper and on
Blackwell): v8 and v9 beat it on Hopper at every size notebook 03 records (split-K offers v7's nest beside v8's for
its float16 partial GEMM); on Turing (no cp.async) v6's wmma for float16 and v5 with synchronous copies
(``SM75_V5``) for float32.

Only the families the build's architecture has the features of (``KernelRecord.needs``) are offered, each one
skipped said in one line the first time (``record.offered``: ``v9_tma_ws: needs tma (sm_90+); this build is
sm_80``); a GEMM none of whose families builds there is refused in one line (an ArchError).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from tirbench.core.errors import refusal
from tirbench.core.gpu import ArchError, current_gpu
from tirbench.schedules.common.record import KernelRecord, first_offered, for_arch, offered
from tirbench.schedules.gemm.warp_specialized import MAX_CLUSTER
from tirbench.schedules.gemm.records import (
    CLUSTER_SPLIT_TILES,
    FP16_WAVE_TILES,
    NARROW,
    PADDED,
    SPLITK_MMA,
    SPLITK_SIMT,
    SPLITK_WGMMA,
    SM75_V5,
    V5_WARP_TILED,
    V6_WMMA,
    V7_MMA_LDMATRIX,
    V8_WGMMA,
    V9_TMA_WS,
    WAVE_TILES,
    fits_rows,
)
from tirbench.workloads.base import Workload

#: Streaming multiprocessors of the GPU the rules plan for (``core.gpu.current_gpu()``), as the conv rules' ``SMS``
#: (``schedules.conv.rules``, a floor above this one); read here only through ``sm_count()``.
SMS = current_gpu().sm_count
#: Candidates kept per family (the chooser builds, verifies and times them all).
KEEP = 8
#: The block tile whose reuse the model counts as enough: past its ``bm*bn / (bm+bn)`` a block is taken to be
#: compute-bound (an assumption of the model, not a measurement; the chooser times the candidates).
FULL_REUSE = (128, 128)
#: The families, in the order offered, by (input dtype, output dtype).
FAMILIES: dict[tuple[str, str], tuple[KernelRecord, ...]] = {
    ("float32", "float32"): (V5_WARP_TILED,),
    ("float16", "float32"): (V9_TMA_WS, V8_WGMMA),
    ("float16", "float16"): (V9_TMA_WS,),
}
#: The families offered, by (input dtype, output dtype), where the build's architecture builds none of ``FAMILIES``':
#: the first group that builds there (``record.first_offered``): v5 with synchronous copies on Turing (``SM75_V5``);
#: v7 (mma.sync, cp.async: sm_80+), else v6 (wmma: Turing).
FALLBACK: dict[tuple[str, str], tuple[tuple[KernelRecord, ...], ...]] = {
    ("float32", "float32"): ((SM75_V5,),),
    ("float16", "float32"): ((V7_MMA_LDMATRIX,), (V6_WMMA,)),
}
#: Tiles the rules add for Turing's float16 fallback v6 (which has no sweep of its own): its default 128 x 128 tile
#: stages C in more shared memory than sm_75 has where a tile does not divide the GEMM; these fit.
TURING_TILES: dict[str, tuple[dict[str, Any], ...]] = {
    V6_WMMA.name: ({"block_tile": (64, 64), "warp_tile": (32, 32), "tile_k": 32},
                   {"block_tile": (128, 64), "warp_tile": (64, 32), "tile_k": 32},
                   {"block_tile": (64, 128), "warp_tile": (32, 64), "tile_k": 32}),
}
#: GEMMs of at most this many rows are also offered split-K, whose block tiles take every row (``gemm.splitk``): one
#: 128-row tile (past that the GEMM has two block rows of tiles or more without slicing K).
SPLITK_ROWS = 128
#: ... and at least this deep a K: two slices of 256 or more (a shorter sum gains less from slicing than the partial
#: buffer and the second launch cost; an assumption, not a measurement).
SPLITK_MIN_K = 512
#: The split-K families, by (input dtype, output dtype), offered after ``FAMILIES``' at up to ``SPLITK_ROWS`` rows.
FEW_ROWS: dict[tuple[str, str], tuple[KernelRecord, ...]] = {
    ("float32", "float32"): (SPLITK_SIMT,),
    ("float16", "float32"): (SPLITK_WGMMA, SPLITK_MMA),
}


def sm_count() -> int:
    """The SMs of the GPU the rules plan for (``SMS``, from the GPU description)."""
    return SMS


def block_count(m: int, n: int, block_tile: tuple[int, int], split: int = 1) -> int:
    """The blocks of an ``m`` x ``n`` C: its block tiles (edge tiles padded) times the slices of K (``split``)."""
    return math.ceil(m / block_tile[0]) * math.ceil(n / block_tile[1]) * split


def waves(m: int, n: int, block_tile: tuple[int, int]) -> float:
    """How many times the blocks fill the SMs (one block per SM): 2.2 is two full waves and a fifth of one."""
    return block_count(m, n, block_tile) / sm_count()


def wave_fill(m: int, n: int, block_tile: tuple[int, int], split: int = 1) -> float:
    """The share of the SMs' time spent on useful work: ``blocks / (ceil(blocks / SMs) * SMs)`` (how full the last
    wave is; ``split`` slices of K make ``split`` times the blocks), times the share of the block tiles that is not
    padding."""
    blocks, sms = block_count(m, n, block_tile, split), sm_count()
    useful = m * n * split / (blocks * block_tile[0] * block_tile[1])
    return useful * blocks / (math.ceil(blocks / sms) * sms)


def k_fill(k: int, tile_k: int, split: int = 1) -> float:
    """The share of the padded K that is real: K padded to ``split`` slices of whole ``tile_k`` tiles (700 in k tiles
    of 24 is 720, 0.97; in tiles of 28, 1.0)."""
    step = split * tile_k
    return k / (-(-k // step) * step)


def reuse(block_tile: tuple[int, int]) -> float:
    """The multiply-adds per value a block tile loads (``bm*bn / (bm+bn)``) relative to ``FULL_REUSE``'s, at most 1."""
    def per_value(bm: int, bn: int) -> float:
        return bm * bn / (bm + bn)
    return min(1.0, per_value(*block_tile) / per_value(*FULL_REUSE))


def score(m: int, n: int, block_tile: tuple[int, int], split: int = 1, k_share: float = 1.0) -> float:
    """How the rules rank a block tile (in ``split`` slices of K) for an ``m`` x ``n`` C: ``wave_fill`` times
    ``reuse`` times ``k_share`` (``k_fill``: the real share of the padded K), to two decimals."""
    return round(wave_fill(m, n, block_tile, split) * reuse(block_tile) * k_share, 2)


def with_raster(record: KernelRecord, cand: Mapping[str, Any], m: int) -> Mapping[str, Any]:
    """``cand`` with its ``raster`` (blocks ordered in groups of that many block rows, for L2 reuse) lowered to the
    largest divisor of the GEMM's block rows not above it, where it does not divide them (at 2500 rows, 20 block
    rows of 128: raster 8 becomes 5)."""
    raster, rows = cand.get("raster", 1), math.ceil(m / record.params(cand)["block_tile"][0])
    if rows % raster == 0:
        return cand
    return {**cand, "raster": max(d for d in range(1, raster + 1) if rows % d == 0)}


def cluster_splits(record: KernelRecord, m: int, n: int) -> tuple[Mapping[str, Any], ...]:
    """``record``'s ``CLUSTER_SPLIT_TILES`` (v9's split-K in a cluster) for an ``m`` x ``n`` C: each tile of which the
    GEMM has fewer than ``sm_count()``, in every number of slices (2 to ``MAX_CLUSTER``) whose blocks still fit one
    wave of the SMs. A GEMM with a wave of tiles or more gains nothing from slicing K but the partial sums' cost."""
    return tuple({**tile, "split": split} for tile in CLUSTER_SPLIT_TILES.get(record.name, ())
                 for split in range(2, MAX_CLUSTER + 1)
                 if block_count(m, n, record.params(tile)["block_tile"], split) <= sm_count())


def candidate_pool(record: KernelRecord, m: int, n: int) -> tuple[Mapping[str, Any], ...]:
    """``record``'s sweep (its defaults where it has none: v6), its ``PADDED``, ``WAVE_TILES``, ``FP16_WAVE_TILES``,
    ``TURING_TILES``, ``NARROW`` tiles and ``cluster_splits``, each with a ``raster`` that fits (``with_raster``),
    once each, less those taller than ``m`` rows allow (``fits_rows``) and the unswizzled wgmma tiles."""
    pool: list[Mapping[str, Any]] = []
    for cand in (*(record.candidates or ({},)), *PADDED.get(record.name, ()), *WAVE_TILES.get(record.name, ()),
                 *FP16_WAVE_TILES.get(record.name, ()), *TURING_TILES.get(record.name, ()),
                 *NARROW.get(record.name, ()), *cluster_splits(record, m, n)):
        cand = with_raster(record, cand, m)
        if cand not in pool and fits_rows(record, dict(cand), m) and cand.get("layout") != "interleaved":
            pool.append(cand)
    return tuple(pool)


def ranked(wl: Workload, record: KernelRecord, keep: int = KEEP) -> tuple[Mapping[str, Any], ...]:
    """The ``keep`` best of ``candidate_pool`` that schedule ``wl`` (no ValueError), best ``score`` first (with its K's
    ``k_fill``), then the larger tile, then the fewer slices of K (split-K)."""
    m, n, k = wl.sizes["m"], wl.sizes["n"], wl.sizes["k"]

    def key(cand: Mapping[str, Any]) -> tuple[float, int, int]:
        params = record.params(cand)
        (bm, bn), split = params["block_tile"], params.get("split", 1)
        share = k_fill(k, params.get("tile_k", 1), split)
        return (-score(m, n, (bm, bn), split, share), -bm * bn, split)

    taken: list[Mapping[str, Any]] = []
    for cand in sorted(candidate_pool(record, m, n), key=key):
        if len(taken) < keep and refusal(lambda: record.apply(wl, cand)) is None:
            taken.append(cand)
    return tuple(taken)


def rule_records(wl: Workload, keep: int = KEEP) -> list[KernelRecord]:
    """The families that take the GEMM ``wl`` and build for the build's architecture, each with its ``keep`` best
    candidates for it (module docstring); a one-line ValueError for a workload no family takes."""
    if wl.name != "gemm":
        raise ValueError(f"the GEMM rules take a gemm workload, not {wl.name}")
    key = (wl.dtype, wl.out_dtype)
    if key not in FAMILIES:
        raise ValueError(f"no GEMM rule takes {wl.dtype} inputs with a {wl.out_dtype} C: the rules take float32, "
                         f"float16 with a float32 C, and float16 with a float16 C")
    fallbacks = FALLBACK.get(key, ())
    families = tuple(first_offered(FAMILIES[key], *fallbacks))
    if not families:
        raise ArchError(f"no GEMM family builds {wl.dtype} inputs with a {wl.out_dtype} C here: "
                        f"{for_arch((*FAMILIES[key], *(f for group in fallbacks for f in group)))[1][-1]}")
    if wl.sizes["m"] <= SPLITK_ROWS and wl.sizes["k"] >= SPLITK_MIN_K:
        families = (*families, *offered(FEW_ROWS.get(key, ())))
    records = [f.with_candidates(cands) for f in families if (cands := ranked(wl, f, keep))]
    if not records:
        why = ("v9 takes only K and N that are multiples of 8 (rows of A and B that a TMA tensor map can stride, "
               "16 bytes a step)" if families[0] is V9_TMA_WS else refusal(lambda: families[0].apply(wl)))
        raise ValueError(f"no {'/'.join(f.name for f in families)} candidate takes gemm {wl.shape} ({wl.dtype}, "
                         f"{wl.out_dtype} C): {why}")
    return records

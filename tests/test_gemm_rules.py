"""The GEMM rules (``schedules.gemm.rules``): tiles ranked by how their blocks fill the SMs' waves, a candidate for
every shape (padded, or for v9 zero-filled by TMA, where no tile divides it, few rows included), and one-line
refusals."""
from __future__ import annotations

import math

import pytest

from tirbench.schedules.gemm.records import (
    SPLITK_MMA,
    SPLITK_SIMT,
    SPLITK_WGMMA,
    V5_WARP_TILED,
    V8_WGMMA,
    V9_TMA_WS,
    WAVE_TILES,
    divisible_shape,
)
from tirbench.schedules.gemm.rules import (
    SPLITK_MIN_K,
    SPLITK_ROWS,
    block_count,
    cluster_splits,
    k_fill,
    rule_records,
    score,
    sm_count,
    wave_fill,
    waves,
    with_raster,
)
from tirbench.workloads import gemm


def _tiles(record) -> list[tuple[int, int]]:
    return [tuple(record.params(c)["block_tile"]) for c in record.candidates]


def test_wave_fill_is_the_share_of_the_sms_time_spent_on_useful_tiles():
    assert sm_count() == 132
    assert waves(3072, 3072, (128, 256)) == pytest.approx(288 / 132)        # 2.2 waves
    assert wave_fill(3072, 3072, (128, 256)) == pytest.approx(288 / (3 * 132))
    assert wave_fill(1408, 3072, (128, 256)) == 1.0                         # 132 blocks: one full wave
    assert wave_fill(100, 64, (128, 64)) == pytest.approx(100 / 128 / 132)  # padding counts against a tile


def test_a_tile_whose_last_wave_is_fuller_ranks_above_128x256_at_2_2_waves():
    """At 3072^3 fp16, 128x256 tiles make 2.2 waves of the 132 SMs (the last a fifth full): a 128x128 tile (4.4
    waves; v8) or v9's 128x192 (2.9 waves) ranks first; where 128x256 makes one full wave (1408 x 3072), it ranks
    first."""
    for record in rule_records(gemm(3072, 3072, 3072, dtype="float16"), keep=2):
        tiles = _tiles(record)
        assert tiles[0] == ((128, 192) if record.name == V9_TMA_WS.name else (128, 128)), (record.name, tiles)
        assert score(3072, 3072, tiles[0]) > score(3072, 3072, (128, 256))
    v9 = rule_records(gemm(1408, 3072, 1024, dtype="float16"), keep=1)[0]
    assert v9.name == V9_TMA_WS.name and _tiles(v9)[0] == (128, 256)


def test_bigger_tiles_win_where_every_tile_fills_the_waves():
    (v5,) = rule_records(gemm(4096, 4096, 4096))
    assert _tiles(v5)[0] == (128, 256)



def test_v5_tiles_of_192_fill_the_last_wave_that_powers_of_two_leave_a_tenth_full():
    """2500 x 3500 fp32: 560 tiles of 128 x 128 are 4.2 waves of 132 SMs, 392 of 192 x 128 are 2.97; the rules rank
    the 192 tiles first, and notebook 03's padded sweep (``PADDED``, ``divisible_shape``) does not see them."""
    assert waves(2500, 3500, (192, 128)) == pytest.approx(392 / 132)
    (v5,) = rule_records(gemm(2500, 3500, 1500))
    assert set(_tiles(v5)[:2]) == {(192, 128), (128, 192)}
    assert score(2500, 3500, (192, 128)) > score(2500, 3500, (128, 128))
    assert {tuple(c["block_tile"]) for c in WAVE_TILES[V5_WARP_TILED.name]} <= set(_tiles(v5))
    assert divisible_shape((2000, 3000, 1000)) == (2048, 3072, 1024)

@pytest.mark.parametrize("size, dtype", [
    ((37, 4096, 4096), "float32"), ((37, 4096, 4096), "float16"), ((100, 3000, 5000), "float32"),
    ((2000, 3000, 1000), "float16"), ((1, 1, 1), "float32"), ((2500, 3500, 1500), "float16"),
])
def test_every_shape_gets_candidates_no_taller_than_its_rows(size, dtype):
    records = rule_records(gemm(*size, dtype=dtype), keep=2)
    assert records and all(r.candidates for r in records)
    for record in records:
        for bm, bn in _tiles(record):
            assert bm <= math.ceil(size[0] / 64) * 64


def test_few_rows_get_narrow_tiles_that_give_every_sm_a_block():
    v5, _ = rule_records(gemm(37, 4096, 4096))
    assert v5.name == V5_WARP_TILED.name
    assert _tiles(v5)[0] == (64, 32) and waves(37, 4096, (64, 32)) == pytest.approx(128 / 132)


def test_split_k_blocks_are_tiles_times_slices():
    """37 x 4096 in 64 x 64 tiles: 64 blocks fill 64 of the 132 SMs; in 2 slices, 128 blocks fill 128."""
    assert block_count(37, 4096, (64, 64), split=2) == 128
    assert wave_fill(37, 4096, (64, 64), 2) == pytest.approx(37 / 64 * 128 / 132)
    assert score(37, 4096, (64, 64), 2) > score(37, 4096, (64, 64))


@pytest.mark.parametrize("size", [(37, 4096, 4096), (100, 3000, 5000)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype, families", [("float32", (SPLITK_SIMT,)), ("float16", (SPLITK_WGMMA, SPLITK_MMA))])
def test_few_rows_are_offered_split_k_whose_slices_fill_the_sms(size, dtype, families):
    """After the ladder's families, split-K: tiles that take every row, 2-16 slices, the first candidate's blocks
    (tiles x slices) for 90% of the SMs or more, ranked by score (with the real share of the padded K), then the
    larger tile, then the fewer slices."""
    m, n, _ = size
    records = rule_records(gemm(*size, dtype=dtype))
    split = records[-len(families):]
    assert len(records) > len(families) and [r.name for r in split] == [f.name for f in families]
    for record in split:
        params = [record.params(c) for c in record.candidates]
        assert params and all(m <= p["block_tile"][0] <= -(-m // 64) * 64 and 2 <= p["split"] <= 16
                              for p in params)
        assert block_count(m, n, params[0]["block_tile"], params[0]["split"]) >= 0.9 * sm_count()
        keys = [(-score(m, n, p["block_tile"], p["split"], k_fill(size[2], p["tile_k"], p["split"])),
                 -math.prod(p["block_tile"]), p["split"]) for p in params]
        assert keys == sorted(keys)


def test_k_fill_is_the_real_share_of_k_padded_to_whole_slices_of_k_tiles():
    assert k_fill(700, 24) == pytest.approx(700 / 720) and k_fill(700, 28) == 1.0
    assert k_fill(5000, 28, split=11) == pytest.approx(5000 / (11 * 17 * 28))
    assert score(1200, 5000, (96, 128), k_share=k_fill(700, 24)) < score(1200, 5000, (96, 128))


@pytest.mark.parametrize("size, family, first, kept", [
    ((1200, 5000, 700), V5_WARP_TILED, (96, 256, 1), [(96, 128, 1)]),
    ((100, 3000, 5000), SPLITK_SIMT, (112, 128, 11), [(128, 128, 11), (128, 128, 16)]),
    ((1024, 1024, 1024), V5_WARP_TILED, None, [(64, 64, 1)]),
    ((2500, 3500, 1500), V5_WARP_TILED, None, [(128, 192, 1)]),
], ids=["1200x5000x700", "100x3000x5000-splitk", "1024^3", "2500x3500x1500"])
def test_fp32_tiles_for_the_waves_come_first_and_the_last_runs_winners_stay(size, family, first, kept):
    """1200 x 5000: 96 x 256 tiles (260 blocks, 1.97 waves; K of 700 in k tiles of 24 or 48); 100 x 3000: 112-row
    split-K tiles in 11 slices (264 blocks, rows padded to 112); the tiles of run 20261127T140407Z's choices
    (96 x 128; 128 x 128 in 16 slices; 64 x 64 at 1024^3; 128 x 192) still among the candidates."""
    (record,) = [r for r in rule_records(gemm(*size)) if r.name == family.name]
    tiles = [(*record.params(c)["block_tile"], record.params(c).get("split", 1)) for c in record.candidates]
    assert first in (None, tiles[0]) and set(kept) <= set(tiles), tiles


@pytest.mark.parametrize("size, dtype", [((4096, 4096, 4096), "float32"), ((4096, 4096, 4096), "float16"),
                                         ((SPLITK_ROWS + 1, 4096, 4096), "float32"),
                                         ((37, 4096, SPLITK_MIN_K - 1), "float32")])
def test_split_k_is_not_offered_past_few_rows(size, dtype):
    names = [r.name for r in rule_records(gemm(*size, dtype=dtype), keep=1)]
    assert names and not {SPLITK_SIMT.name, SPLITK_WGMMA.name, SPLITK_MMA.name} & set(names)


@pytest.mark.parametrize("size", [(2000, 3000, 1000), (1000, 1000, 1000), (37, 4096, 4096), (100, 3000, 5000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_v9_takes_shapes_its_tiles_do_not_divide_with_the_tma_store(size):
    """Where K and N are multiples of 8, v9 comes first with the candidates of its sweep that store C by TMA (the
    register epilogue stores whole tiles) or split K in a cluster (whose sums are stored clipped at C's edges),
    ranked as at divisible shapes; v8 padded is the other family."""
    m, n, _ = size
    records = rule_records(gemm(*size, dtype="float16"), keep=3)
    assert [r.name for r in records[:2]] == [V9_TMA_WS.name, V8_WGMMA.name]
    params = [records[0].params(c) for c in records[0].candidates]
    assert params and all(p["tma_store"] or p.get("split", 1) > 1 for p in params)
    keys = [(-score(m, n, p["block_tile"], p.get("split", 1)), -math.prod(p["block_tile"]), p.get("split", 1))
            for p in params]
    assert keys == sorted(keys)
    assert rule_records(gemm(*size, dtype="float16", out_dtype="float16"), keep=1)[0].name == V9_TMA_WS.name


@pytest.mark.parametrize("size, family, first", [
    ((2000, 3000, 1000), V9_TMA_WS, {"block_tile": (128, 192), "stages": 4}),
    ((100, 3000, 5000), SPLITK_WGMMA, {"split": 8, "block_tile": (128, 192), "stages": 3}),
], ids=["2000x3000x1000-v9", "100x3000x5000-splitk"])
def test_tiles_of_192_columns_come_first_where_they_fill_the_waves(size, family, first):
    """2000 x 3000: 256 v9 tiles of 128 x 192 (1.94 waves) before 192 of 128 x 256 (1.45); 100 x 3000: 16 split-K
    tiles of 128 x 192 in 8 slices are 128 blocks (one wave, half the partial sums of 128 x 128 in 16 slices)."""
    (record,) = [r for r in rule_records(gemm(*size, dtype="float16")) if r.name == family.name]
    assert dict(record.candidates[0]) == first


def test_v9_offers_a_multicast_and_cluster_split_k_for_1000_cubed():
    """1000^3: 128 x 64 tiles give 128 blocks for 132 SMs, also in clusters of two that share A (the H200's choice,
    run 6dbf37), and 64 tiles of 128 x 128 fill the SMs in two slices of K."""
    (v9, _) = rule_records(gemm(1000, 1000, 1000, dtype="float16"))
    assert {"block_tile": (128, 64), "stages": 6, "persistent_ctas": 0, "multicast": 2} in v9.candidates
    assert any(c.get("split") == 2 and c["block_tile"] == (128, 128) for c in v9.candidates)


def test_a_shape_v9_cannot_take_leaves_v8_and_a_raster_is_lowered_to_fit():
    """K = 1500 and N = 3500 halves are rows of 3000 and 7000 bytes, which no TMA tensor map strides."""
    records = rule_records(gemm(2500, 3500, 1500, dtype="float16"), keep=3)
    assert [r.name for r in records] == [V8_WGMMA.name]
    assert all(20 % c.get("raster", 1) == 0 for c in records[0].candidates if c["block_tile"][0] == 128)
    assert with_raster(V8_WGMMA, {"block_tile": (128, 128), "raster": 8}, 2500)["raster"] == 5


@pytest.mark.parametrize("wl, message", [
    (gemm(37, 50, 10, dtype="float16", out_dtype="float16"), "v9 takes only K and N that are multiples of 8"),
])
def test_refusals_are_one_line(wl, message):
    with pytest.raises(ValueError, match=message) as err:
        rule_records(wl)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("size, split_tiles", [
    ((100, 3000, 5000), {(128, 128): 5, (128, 192): 8, (128, 64): 2}),
    ((1000, 1000, 1000), {(128, 128): 2, (128, 192): 2}),
    ((37, 4096, 4096), {(64, 128): 4}),
    ((2000, 3000, 1000), {}),
    ((4096, 4096, 4096), {}),
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_v9_splits_k_in_a_cluster_only_where_its_tiles_leave_sms_idle(size, split_tiles):
    """``cluster_splits``: a tile of which the GEMM has fewer than the SMs, in every number of slices (2 to 8) whose
    blocks still fit one wave; none where the tiles fill a wave (the slices would only add partial sums)."""
    m, n, _ = size
    offered = cluster_splits(V9_TMA_WS, m, n)
    most: dict[tuple[int, int], int] = {}
    for cand in offered:
        tile = V9_TMA_WS.params(cand)["block_tile"]
        assert block_count(m, n, tile, cand["split"]) <= sm_count() and cand["persistent_ctas"] == 0
        most[tile] = max(most.get(tile, 0), cand["split"])
    assert {t: s for t, s in most.items() if t in split_tiles or not split_tiles} == split_tiles

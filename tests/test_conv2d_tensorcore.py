"""fp16 tensor-core convolution: the fp16 workload, the implicit-GEMM schedules (built for sm_90a here), the
shape-aware fragment rule and the wmma design space, bad inputs."""
import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.bench.harness import run_checked
from tirbench.core.build import build
from tirbench.core.machine import cpu_target
from tirbench.schedules.conv.implicit_gemm import conv2d_as_gemm, conv2d_nhwc_mma, conv2d_nhwc_wgmma
from tirbench.schedules.conv.records import CONV_TC_CONFIG
from tirbench.schedules.conv.wmma_space import WMMA_CONFIG, conv2d_wmma_design, conv2d_wmma_space, fragment_rows
from tirbench.workloads import conv2d

H100 = tvm.target.Target("nvidia/nvidia-h100")


def _cuda(sch, config=CONV_TC_CONFIG):
    return build(sch, H100, config).mod.imports[0].inspect_source()


def test_fp16_workload_matches_reference_on_llvm():
    for shape in ((2, 16, 6, 6, 32, 3, 3, 1, 1), (1, 8, 9, 7, 16, 3, 3, 2, 1)):
        wl = conv2d(*shape, layout="NHWC", dtype="float16")
        assert wl.out_dtype == "float16"
        run_checked(wl, build(wl.mod, cpu_target()), tvm.cpu(0), seed=0)


def test_fp16_tolerance_catches_a_wrong_output():
    wl = conv2d(1, 16, 4, 4, 16, layout="NHWC", dtype="float16")
    x, w = wl.make_inputs(np.random.default_rng(0))
    ref = wl.reference(x, w)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose((ref * 1.01).astype(np.float16), ref, **wl.tolerance)


@pytest.mark.parametrize("gemm_m, rows", [(1568, (8, 16, 32)), (48, (8, 16)), (24, (8,)), (7, (8,))])
def test_fragment_rule_follows_gemm_m(gemm_m, rows):
    assert fragment_rows(gemm_m) == rows


def test_wmma_space_has_one_design_per_fragment():
    # GEMM_M = 2 x 4 x 4 = 32: three fragments; = 1 x 4 x 4 = 16: two; = 1 x 2 x 4 = 8: one
    for n, h, w, count in ((2, 4, 4, 3), (1, 4, 4, 2), (1, 2, 4, 1)):
        wl = conv2d(n, 16, h, w, 32, layout="NHWC", dtype="float16")
        assert len(conv2d_wmma_space(s_tir.Schedule(wl.mod))) == count


def test_as_gemm_gives_a_three_loop_block():
    wl = conv2d(2, 64, 6, 6, 32, layout="NHWC", dtype="float16")
    sch = conv2d_as_gemm(s_tir.Schedule(wl.mod), channel_block=64)
    loops = sch.get_loops(sch.get_sblock("conv"))
    assert [int(sch.get(lp).extent) for lp in loops] == [2 * 6 * 6, 32, 9 * 64]


def test_wgmma_conv_uses_wgmma_and_16_byte_predicated_copies():
    wl = conv2d(4, 64, 8, 8, 128, layout="NHWC", dtype="float16")   # GEMM 256 x 128 x 576
    src = _cuda(conv2d_nhwc_wgmma(s_tir.Schedule(wl.mod), block_tile=(128, 128), stages=3))
    assert "wgmma.mma_async" in src
    assert "cp_async_legacy_pred_cg_16" in src   # padded border: zero-fill, still 16 bytes per copy
    assert "for (int ax1_1_s" not in src         # no copy split into 2-byte loads


def test_wgmma_1x1_conv_builds():
    wl = conv2d(2, 64, 8, 8, 64, 1, 1, 1, 0, layout="NHWC", dtype="float16")
    assert "wgmma.mma_async" in _cuda(conv2d_nhwc_wgmma(s_tir.Schedule(wl.mod), block_tile=(64, 64)))


def test_mma_conv_uses_ldmatrix_and_mma_sync():
    wl = conv2d(2, 64, 4, 4, 64, layout="NHWC", dtype="float16")   # GEMM_M = 32
    src = _cuda(conv2d_nhwc_mma(s_tir.Schedule(wl.mod), block_tile=(32, 64), warp_tile=(16, 32), tile_k=32))
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix" in src


def test_wmma_design_builds_each_fragment_shape():
    wl = conv2d(2, 16, 4, 4, 32, layout="NHWC", dtype="float16")   # GEMM_M = 32
    ctx = ms.TuneContext(mod=wl.mod, target=H100, space_generator=ms.space_generator.ScheduleFn(
        conv2d_wmma_space, sch_rules=[], postprocs="cuda", mutator_probs={}), task_name="main")
    fetch = next(p for p in ctx.space_generator.postprocs if type(p).__name__ == "RewriteCooperativeFetch")
    for im, frag in ((8, "8, 32, 16"), (16, "16, 16, 16"), (32, "32, 8, 16")):
        sch = conv2d_wmma_design(s_tir.Schedule(wl.mod, seed=1), im=im)
        assert fetch.apply(sch)   # binds the fills and the epilogue to the sampled warps x 32 lanes
        src = _cuda(sch, WMMA_CONFIG)
        assert "wmma::mma_sync" in src and f"wmma::accumulator, {frag}" in src


def test_wmma_candidates_pass_the_gpu_check_built_as_they_are():
    # MetaSchedule's VerifyGPUCode lowers with storage rewriting, which breaks every wmma candidate; the space's own
    # check lowers as WMMA_CONFIG builds, and still refuses a block of more than 1024 threads
    from tirbench.tuning.spaces import get_space

    wl = conv2d(32, 64, 14, 14, 64, layout="NHWC", dtype="float16")   # GEMM_M = 6272
    space = get_space("wmma")
    ctx = ms.TuneContext(mod=wl.mod, target=space.target(H100), space_generator=space.generator(wl),
                         task_name="main", num_threads=1)
    *rewrites, ours = ctx.space_generator.postprocs
    assert not isinstance(ours, ms.postproc.VerifyGPUCode)   # the space's own check (VerifyGPUCodeAsBuilt)
    theirs = ms.postproc.VerifyGPUCode()
    theirs._initialize_with_tune_context(ctx)
    verdicts = []
    for seed in range(1, 13):
        sch = conv2d_wmma_design(s_tir.Schedule(wl.mod, seed=seed), im=16)
        tiles = [list(map(int, sch.trace.decisions[inst])) for inst in sch.trace.insts
                 if inst.kind.name == "SamplePerfectTile"]
        assert all(p.apply(sch) for p in rewrites)
        verdicts.append((tiles[0][1] * tiles[1][1] * 32 <= 1024, ours.apply(sch.copy()), theirs.apply(sch.copy())))
    assert not any(theirs for _, _, theirs in verdicts)
    assert any(fits for fits, _, _ in verdicts) and any(not fits for fits, _, _ in verdicts)
    assert all(ok == fits for fits, ok, _ in verdicts)


@pytest.mark.parametrize("make, message", [
    (lambda: conv2d_nhwc_wgmma(s_tir.Schedule(conv2d(2, 64, 4, 4, 64, layout="NHWC").mod)), "float16"),
    (lambda: conv2d_nhwc_wgmma(s_tir.Schedule(conv2d(2, 64, 4, 4, 64, dtype="float16").mod)), "NHWC"),
    (lambda: conv2d_nhwc_wgmma(s_tir.Schedule(conv2d(2, 48, 4, 4, 64, layout="NHWC", dtype="float16").mod),
                               channel_block=32), "channel_block"),   # any C by default; an explicit block divides it
    (lambda: conv2d_nhwc_wgmma(s_tir.Schedule(conv2d(1, 64, 7, 7, 256, layout="NHWC", dtype="float16").mod),
                               block_tile=(128, 256), stages=8), "shared memory"),   # m=49 itself is padded
    (lambda: conv2d_wmma_design(s_tir.Schedule(conv2d(1, 16, 2, 3, 32, layout="NHWC", dtype="float16").mod),
                                im=16), "admits"),
    (lambda: conv2d(1, 16, 4, 4, 16, dtype="int8"), "unsupported dtype"),
    (lambda: conv2d_nhwc_mma(s_tir.Schedule(conv2d(2, 64, 8, 8, 64, layout="NHWC", dtype="float16").mod),
                             block_tile=(64, 16)), r"warp_tile\[1\]=64 does not divide block_tile\[1\]=16"),
])
def test_bad_inputs_fail_in_one_line(make, message):
    with pytest.raises(ValueError, match=message) as err:
        make()
    assert "\n" not in str(err.value)


def test_records_schedule_the_notebook_layers_and_refuse_others_in_one_line():
    """Notebook 06 sweeps TENSOR_CORE on each layer and refuses, in its first cell, a layer no candidate takes: every
    candidate of the padding families takes any fp16 NHWC layer (channels the k tile does not divide pad k,
    ``test_conv_any_channels``), the warp-specialized one refuses channels in no 64-channel k tile in one line, an
    fp32 one is refused in one line."""
    from tirbench.core.errors import refusal
    from tirbench.schedules.conv.records import NHWC_MMA, NHWC_TMA_WS, NHWC_WGMMA, TENSOR_CORE

    assert [r.name for r in TENSOR_CORE] == ["nhwc_wgmma", "nhwc_mma", "nhwc_tma_ws", "nhwc_1x1_tma"]
    ok = conv2d(32, 512, 7, 7, 512, layout="NHWC", dtype="float16")   # GEMM_M = 1568: padded to every tile
    assert all(refusal(lambda: NHWC_WGMMA.apply(ok, c)) is None for c in NHWC_WGMMA.candidates)
    c32 = conv2d(32, 32, 14, 14, 64, layout="NHWC", dtype="float16")
    assert refusal(lambda: NHWC_WGMMA.apply(c32)) is None
    odd = conv2d(256, 250, 14, 14, 500, layout="NHWC", dtype="float16")
    assert all(refusal(lambda: record.apply(odd, overrides)) is None
               for record in (NHWC_WGMMA, NHWC_MMA) for overrides in record.candidates)
    reason = refusal(lambda: NHWC_TMA_WS.apply(odd))
    assert "does not divide c (input channels)=250" in reason and "\n" not in reason
    reason = refusal(lambda: NHWC_MMA.apply(conv2d(2, 64, 4, 4, 64, layout="NHWC")))   # fp32: not taken
    assert "float16" in reason and "\n" not in reason


def test_direct_fp16_schedule_tile_follows_the_batch():
    """The notebook's hwcn_direct_fp16 row: HWCN_SEED with tile 8 where the batch is a multiple of 64, else 4 (a
    64-wide batch tile does not divide batch 32: skipped with the helper's one line)."""
    from tirbench.core.errors import refusal
    from tirbench.schedules.conv.records import HWCN_SEED

    wl = conv2d(32, 64, 7, 7, 64, layout="HWCN", dtype="float16")
    assert "does not divide n (batch)=32" in refusal(lambda: HWCN_SEED.apply(wl, {"tile": 8}))
    assert refusal(lambda: HWCN_SEED.apply(wl, {"tile": 4})) is None
    assert HWCN_SEED.with_candidates([{"tile": 4}]).candidates == ({"tile": 4},)

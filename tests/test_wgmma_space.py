"""The ``wgmma`` design space: registered and on the CLI; one-line refusals of what it cannot take; its design spaces
and their decisions (tiles, stages, overlap; on the convolution the pipeline and the warp-specialized kernel's
choices); its seeds are the hand sweep's v8 and warp-specialized kernels (the same CUDA); sampled and mutated
candidates finish, pass or are cleanly rejected, and build for sm_90a with wgmma (the warp-specialized ones as the
TIRx kernel, with TMA and mbarriers); MetaSchedule's search runs over it with stand-in builder and runner (no GPU
here: nothing is measured)."""
import functools
import pickle
import random
import shutil
import tempfile

import pytest
import tvm
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.conv.records import NHWC_TMA_WS, NHWC_WGMMA
from tirbench.schedules.gemm.records import V8_WGMMA, V9_TMA_WS
from tirbench.schedules.spaces.wgmma_space import (
    LAYOUTS,
    STAGES,
    conv2d_wgmma_design,
    finish_wgmma,
    gemm_wgmma_design,
    seed_candidates,
    tuned_kernel,
    wgmma_seeds,
)
from tirbench.schedules.spaces.ws_kernels import WS_LANES, WS_PERSISTENT, WS_STAGES, substitute_spec
from tirbench.tuning.builders import build_candidate
from tirbench.tuning.cli import build_parser, main
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import trials_done
from tirbench.tuning.seeds import seed_database
from tirbench.tuning.spaces import SPACES, get_space
from tirbench.tuning.tune import space_target, tuned_pass_config, work_dir_for
from tirbench.workloads import conv2d, conv2d_int8, conv2d_winograd, gemm
from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from metaschedule_stand_ins import DoneFuture

H100 = tvm.target.Target("nvidia/nvidia-h100", host="llvm")
SPACE = get_space("wgmma")
TARGET = SPACE.target(H100)
GEMM = gemm(256, 256, 256, "float16")
CONV = conv2d(4, 64, 8, 8, 256, layout="NHWC", dtype="float16")   # GEMM 256 x 256 x 576
#: A GEMM candidate's last categorical decisions with the pipeline v8's (v9's ring depth and persistence unused).
V8_PIPELINE = [0, 4, 132]


def _context(wl, seed=1):
    return ms.TuneContext(mod=wl.mod, target=TARGET, space_generator=SPACE.generator(wl), task_name="main",
                          num_threads=1, rand_state=seed)


def _postprocessed(ctx, sch):
    """``sch`` through the space's postprocessors, as the search applies them; None where one rejects it."""
    sch = sch.copy()
    sch.enter_postproc()
    return sch if all(p.apply(sch) for p in ctx.space_generator.postprocs) else None


def _samples(insts, trace):
    return [(inst.kind.name, trace.decisions[inst]) for inst in insts if inst.kind.name.startswith("Sample")]


def _cuda(sch, wl):
    """The CUDA a candidate is built as (``DesignSpace.built_module``: the warp-specialized kernel where it drew
    that pipeline)."""
    mod, config = SPACE.built_module(wl, sch if isinstance(sch, tvm.IRModule) else sch.mod)
    return device_source(mod, H100, config)


def test_registered_with_the_hand_kernels_config_and_the_dynamic_shared_memory_limit(tmp_path):
    assert "wgmma" in SPACES
    assert work_dir_for(tmp_path, GEMM, "wgmma").name == "float16_256x256x256_wgmmaspace"
    assert work_dir_for(tmp_path, CONV, "wgmma").name == "float16_NHWC_4x64x8x8x256x3x3x1x1_wgmmaspace"
    assert space_target("wgmma").attrs["max_shared_memory_per_block"] == 227 * 1024
    assert tuned_pass_config(GEMM, "wgmma") == dict(V8_WGMMA.pass_config)
    assert tuned_pass_config(CONV, "wgmma") == dict(NHWC_WGMMA.pass_config)
    gen = SPACE.generator(GEMM)
    assert isinstance(gen, ms.space_generator.ScheduleFn) and not gen.sch_rules
    assert [type(m).__name__ for m in gen.mutator_probs] == ["MutateTileSize", "_PyMutator"]


def test_cli_lists_and_accepts_it():
    help_text = " ".join(build_parser().format_help().split())
    assert "wgmma: fp16 GEMM and fp16 NHWC conv2d: the v8 wgmma kernel" in help_text
    for argv in (["gemm", "4096", "4096", "4096", "--dtype", "float16", "--space", "wgmma", "--trials", "256"],
                 ["conv2d", "256", "256", "14", "14", "512", "3", "3", "1", "1", "--layout", "NHWC", "--dtype",
                  "float16", "--space", "wgmma", "--trials", "256"]):
        assert build_parser().parse_args(argv).space == "wgmma"


@pytest.mark.parametrize("wl", [gemm(256, 256, 256), conv2d(4, 64, 8, 8, 64, dtype="float16"),
                                conv2d(4, 64, 8, 8, 64, layout="NHWC"), conv2d_int8(1, 64, 8, 8, 64),
                                conv2d_winograd(1, 8, 8, 8, 8, m=2, layout="NHWC"),
                                gemm(256, 256, 256, "float16", out_dtype="float16")],
                         ids=["gemm fp32", "conv NCHW fp16", "conv NHWC fp32", "conv int8", "winograd", "gemm half C"])
def test_other_workloads_are_one_line(wl):
    with pytest.raises(ValueError, match=r"^space='wgmma' is the float16 GEMM \(float32 C\) or float16 NHWC conv2d on wgmma, "
                                         r"not [^\n]*$"):
        SPACE.require(wl)
    with pytest.raises(ValueError, match="^the wgmma space needs float16 inputs"):
        gemm_wgmma_design(s_tir.Schedule(gemm(256, 256, 256).mod))


def test_cli_refuses_fp32_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["gemm", "256", "256", "256", "--space", "wgmma", "--trials", "1"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "space='wgmma' is the float16 GEMM" in err


def test_design_spaces_and_their_decisions():
    """One design each (one per searched layout: ``"swizzle128"``); each samples three perfect tiles (block
    columns, block rows, raster) and two categorical values (stages, overlap), then the pipeline and the
    warp-specialized kernel's choices: ring depth and persistent blocks (v9 on the GEMM), also lanes and the L1
    gather on the convolution."""
    assert LAYOUTS == ("swizzle128",)
    for wl, extra in ((GEMM, [[0, 1], list(WS_STAGES), list(WS_PERSISTENT)]),
                      (CONV, [[0, 1], list(WS_STAGES), list(WS_LANES), [0, 1], list(WS_PERSISTENT)])):
        designs = _context(wl).space_generator.generate_design_space(wl.mod)
        assert len(designs) == 1
        for design in designs:
            kinds = [kind for kind, _ in _samples(design.trace.insts, design.trace)]
            assert kinds == ["SamplePerfectTile"] * 3 + ["SampleCategorical"] * (2 + len(extra))
            choices = [[int(c) for c in inst.attrs[0]] for inst in design.trace.insts
                       if inst.kind.name == "SampleCategorical"]
            assert choices == [list(STAGES), [0, 1], *extra]


@pytest.mark.parametrize("wl, counts", [
    (gemm(1024, 1024, 512, "float16"), {"v8": 9, "ws": 6}),   # v8: not 256 x 128 rasterized by 8, interleaved;
                                                              # v9: not without the TMA store
    (gemm(1000, 600, 200, "float16"), {"v8": 6, "ws": 0}),    # padded (C through shared memory; N = 640): no v9
    (CONV, {"v8": 6, "ws": 6}),
], ids=["gemm", "padded gemm", "conv"])
def test_each_seed_is_its_hand_candidate_built_with_wgmma(wl, counts):
    """The hand candidates that fit the shape are the seeds, and each seed, postprocessed as the search does it,
    gives its hand kernel's CUDA byte for byte: v8's, or the warp-specialized TIRx kernel (v9 on the GEMM, TMA and
    mbarriers), which ``tuned_kernel`` names, both as seeds."""
    ctx = _context(wl)
    pairs = seed_candidates(wl)
    assert len(pairs) == sum(counts.values()) and len(wgmma_seeds(wl)) == len(pairs)
    for params, seed in pairs:
        ws = "consumers" in params
        record = (V9_TMA_WS if ws else V8_WGMMA) if wl.name == "gemm" else (NHWC_TMA_WS if ws else NHWC_WGMMA)
        counts["ws" if ws else "v8"] -= 1
        done = _postprocessed(ctx, seed)
        assert done is not None, params
        src = _cuda(done, wl)
        assert "wgmma.mma_async" in src
        assert ("cp.async.bulk.tensor" in src and "mbarrier" in src) == ws
        assert src == device_source(record.schedule(s_tir.Schedule(wl.mod), **params), H100, record.pass_config)
        text, is_seed = tuned_kernel(wl, done)
        assert is_seed and text.startswith(f"{record.schedule.__name__}(" if ws else "v8: block tile")
    assert set(counts.values()) == {0}


def test_sampled_candidates_finish_or_are_rejected_cleanly():
    """Fresh samples of the design (the search's first population): each is finished and passes the GPU check, or
    a postprocessor rejects it (never an exception); those that pass build with wgmma."""
    for wl in (gemm(256, 256, 1024, "float16"), CONV):
        ctx = _context(wl)
        design, = ctx.space_generator.generate_design_space(wl.mod)
        verdicts = []
        for seed in random.Random(0).sample(range(1, 2**30), 16):   # small seeds draw alike
            sch = s_tir.Schedule(wl.mod, seed=seed)
            s_tir.Trace(design.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
            done = _postprocessed(ctx, sch)
            verdicts.append(done is not None)
            if done is not None and sum(verdicts) <= 2:
                assert "wgmma.mma_async" in _cuda(done, wl)
        assert sum(verdicts) >= 4 and not all(verdicts), verdicts


@pytest.mark.parametrize("stages", STAGES)
def test_every_depth_builds_and_overlap_needs_three_stages(stages):
    """Each pipeline depth, with and without overlap, waits for the tile it multiplies (``stages - 2`` copy groups
    may still be in flight); overlap with 2 stages, or more stages than k tiles, is rejected."""
    wl = gemm(256, 256, 512, "float16")   # 8 k tiles
    design = gemm_wgmma_design(s_tir.Schedule(wl.mod))
    for overlap in (0, 1):
        sch = with_decisions(wl, design, [[2, 2], [2, 2], [1, 2]], categorical=[stages, overlap, *V8_PIPELINE])
        if overlap and stages < 3:
            assert not finish_wgmma(sch)
            continue
        assert finish_wgmma(sch)
        src = _cuda(sch, wl)
        assert "wgmma.mma_async" in src and f"cp.async.wait_group {stages - 2}" in src
    short = with_decisions(GEMM, gemm_wgmma_design(s_tir.Schedule(GEMM.mod)), [[2, 2], [2, 2], [1, 2]],
                           categorical=[stages, 0, *V8_PIPELINE])   # K = 256: 4 k tiles
    assert finish_wgmma(short) == (stages <= 4)


def test_too_much_shared_memory_or_too_few_registers_is_rejected_not_raised():
    """128 x 256 tiles: 4 stages fit in 227 KB, 5 do not; 256 x 256 tiles leave 128 registers a thread for 128
    accumulators (ptxas fails): the postprocessor says so, nothing raises."""
    wl = gemm(512, 512, 512, "float16")
    design = gemm_wgmma_design(s_tir.Schedule(wl.mod))
    fits = with_decisions(wl, design, [[2, 4], [4, 2], [4, 1]], categorical=[4, 1, *V8_PIPELINE])
    too_deep = with_decisions(wl, design, [[2, 4], [4, 2], [4, 1]], categorical=[5, 1, *V8_PIPELINE])
    too_wide = with_decisions(wl, design, [[2, 4], [2, 4], [2, 1]], categorical=[2, 0, *V8_PIPELINE])
    assert finish_wgmma(fits) and not finish_wgmma(too_deep) and not finish_wgmma(too_wide)


def _ws(block_tile, *, stages=4, lanes=4, l1_gather=1, persistent=0):
    """CONV's design with the warp-specialized pipeline drawn (raster 1; the stand-in's stages 2, no overlap)."""
    (bm, bn), (m, n) = block_tile, (256, 256)
    design = conv2d_wgmma_design(s_tir.Schedule(CONV.mod))
    return with_decisions(CONV, design, [[n // bn, bn // 64], [m // bm, bm // 64], [m // bm, 1]],
                          categorical=[2, 0, 1, stages, lanes, l1_gather, persistent])


def test_the_warp_specialized_choice_follows_its_kernels_rules():
    """A drawn warp-specialized kernel is checked by ``conv2d_nhwc_tma_ws``'s own rules (four consumers' registers
    do not fit an SM, five 128 x 256 stages and the store staging do not fit 227 KB: rejected, not raised); one that
    passes carries its parameters on the root block and is built as that kernel, the v8 stand-in left behind."""
    assert not finish_wgmma(_ws((256, 64))) and not finish_wgmma(_ws((128, 256), stages=5))
    sch = _ws((128, 256), stages=3, lanes=2, l1_gather=0, persistent=132)
    assert finish_wgmma(sch)
    spec = substitute_spec(sch.mod)
    assert spec["kernel"] == "conv2d_nhwc_tma_ws" and spec["geometry"]["k"] == 256
    params = {**spec["params"], "block_tile": tuple(spec["params"]["block_tile"])}
    assert params == NHWC_TMA_WS.params({"block_tile": (128, 256), "stages": 3, "lanes": 2, "l1_gather": False,
                                         "persistent_ctas": 132})
    assert "cp.async.wait_group 0" in device_source(sch, H100, SPACE.pass_config(CONV))   # the 2-stage stand-in
    src = _cuda(sch, CONV)
    assert src == device_source(NHWC_TMA_WS.apply(CONV, params), H100, NHWC_TMA_WS.pass_config)
    assert "cp.async.bulk.tensor" in src and "cp.async.ca.shared.global" not in src
    assert tuned_kernel(CONV, sch) == (NHWC_TMA_WS.describe(params), False)   # not a hand candidate


def test_on_the_gemm_the_warp_specialized_choice_is_v9():
    """On the GEMM the pipeline decision draws v9 (``gemm_v9_tma_ws``) with its ring depth and persistence: built as
    v9 byte for byte; four consumers, or a GEMM that needs padding (v9 takes only tiles that divide), rejected."""
    wl = gemm(512, 512, 512, "float16")
    design = gemm_wgmma_design(s_tir.Schedule(wl.mod))
    sch = with_decisions(wl, design, [[2, 4], [4, 2], [4, 1]], categorical=[2, 0, 1, 3, 0])
    assert finish_wgmma(sch)
    params = V9_TMA_WS.params({"stages": 3, "persistent_ctas": 0})
    src = _cuda(sch, wl)
    assert src == device_source(V9_TMA_WS.apply(wl, params), H100, V9_TMA_WS.pass_config)
    assert "cp.async.bulk.tensor" in src and tuned_kernel(wl, sch) == (V9_TMA_WS.describe(params), False)
    four = with_decisions(wl, design, [[2, 4], [2, 4], [2, 1]], categorical=[2, 0, 1, 4, 132])
    padded = gemm(1000, 600, 200, "float16")   # M, N, K padded to 1024, 640, 256 for v8
    unpadded = with_decisions(padded, gemm_wgmma_design(s_tir.Schedule(padded.mod)), [[5, 2], [8, 2], [8, 1]],
                              categorical=[2, 0, 1, 4, 132])
    assert not finish_wgmma(four) and not finish_wgmma(unpadded)


def test_the_builders_build_what_a_candidate_stands_for():
    """The tuner's ``f_build`` (pickled to its workers) builds a warp-specialized candidate as the TIRx kernel and
    any other as it is (a v8 candidate of the GEMM: the same module, the same config)."""
    f_build = pickle.loads(pickle.dumps(functools.partial(build_candidate, SPACE.as_built,
                                                          SPACE.pass_config(CONV))))
    ctx = _context(CONV)
    built = {}
    for params, seed in seed_candidates(CONV):
        kind = "ws" if "lanes" in params else "v8"
        if kind not in built:
            built[kind] = f_build(_postprocessed(ctx, seed).mod, TARGET, None).imports[0].inspect_source()
    assert "cp.async.bulk.tensor" in built["ws"] and "cp.async.bulk.tensor" not in built["v8"]
    gemm_mod = _postprocessed(_context(GEMM), wgmma_seeds(GEMM)[0]).mod
    assert SPACE.built_module(GEMM, gemm_mod) == (gemm_mod, dict(V8_WGMMA.pass_config))


def test_mutators_move_tiles_and_choices_and_the_result_replays():
    ctx = _context(CONV, seed=3)
    design = ctx.space_generator.generate_design_space(CONV.mod)[0]
    before = _samples(design.trace.insts, design.trace)
    moved = set()
    for mutator in ctx.space_generator.mutator_probs:
        for _ in range(6):
            trace = mutator.apply(design.trace)
            if trace is None:
                continue
            after = _samples(trace.insts, trace)
            moved |= {i for i, (b, a) in enumerate(zip(before, after)) if b[1] != a[1]}
            sch = s_tir.Schedule(CONV.mod)
            trace.apply_to_schedule(sch, remove_postproc=True)
            _postprocessed(ctx, sch)   # passes or is rejected; does not raise
    assert set(range(3, 10)) & moved and {0, 1, 2} & moved   # a categorical choice and a tile moved


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_seed_compiles_with_nvcc_without_spills():
    seed = _postprocessed(_context(CONV), wgmma_seeds(CONV)[0])
    report = " ".join(nvcc_report(_cuda(seed, CONV)))
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report


@derived_object
class _Builder(ms.builder.PyBuilder):
    """Builds each candidate here (CUDA source for sm_90a, with the space's config) and hands back an empty file."""

    def __init__(self, wl) -> None:
        super().__init__()
        self.wl, self.sources = wl, []

    def build(self, build_inputs):
        out = []
        for inp in build_inputs:
            self.sources.append(_cuda(inp.mod, self.wl))
            out.append(ms.builder.BuilderResult(tempfile.mkdtemp() + "/k.so", None))
        return out


@derived_object
class _Runner(ms.runner.PyRunner):
    """Random run times."""

    def run(self, runner_inputs):
        return [DoneFuture(random.uniform(1e-4, 3e-4)) for _ in runner_inputs]


@pytest.mark.parametrize("wl", [gemm(512, 512, 256, "float16"), CONV], ids=["gemm", "conv"])
def test_metaschedule_searches_the_space_from_its_seeds(tmp_path, wl):
    """The seeds committed first (``seed_database``), then MetaSchedule's evolutionary search (a small population)
    samples, mutates, postprocesses and builds more candidates, all with wgmma; the best record replays."""
    builder = _Builder(wl)
    seeds = wgmma_seeds(wl)
    n = seed_database(wl, tmp_path, seeds, space_generator=SPACE.generator(wl), target=TARGET, builder=builder,
                      runner=_Runner())
    assert n == len(seeds) >= 4
    strategy = ms.search_strategy.EvolutionarySearch(population_size=16, init_measured_ratio=0.2,
                                                     init_min_unmeasured=8, genetic_num_iters=1)
    ms.tune_tir(mod=wl.mod, target=TARGET, work_dir=str(tmp_path), max_trials_global=n + 8, num_trials_per_iter=8,
                space=SPACE.generator(wl), strategy=strategy, cost_model="random", builder=builder,
                runner=_Runner(), seed=0)
    assert trials_done(tmp_path) > n and len(builder.sources) == trials_done(tmp_path)
    assert all("wgmma.mma_async" in src for src in builder.sources)
    best = best_schedule(open_database(tmp_path), wl, TARGET)
    assert "wgmma.mma_async" in _cuda(best, wl)

"""The ``rules`` design space: its seeds are the conv rules' split-K candidates written as the split-K space's trace
(the same module as the hand schedule), ``seed_database`` commits them as tuning records the search can start from
(built and run here by stand-ins: no GPU), and the space takes only what the rules' split-K family takes."""
import pytest
import tvm
from tvm import s_tir
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from metaschedule_stand_ins import DoneFuture

from tirbench.core.machine import cuda_target
from tirbench.schedules.common.decisions import with_decisions
from tirbench.schedules.conv.direct import conv2d_nchw_splitk_space
from tirbench.schedules.conv.rules import rule_records
from tirbench.tuning.database import best_schedule, open_database
from tirbench.tuning.history import trials_done
from tirbench.tuning.seeds import _postprocessed, seed_database
from tirbench.tuning.spaces import get_space, rules_seeds
from tirbench.workloads import conv2d

LAYERS = [(1, 64, 56, 56, 64, 3, 3, 1, 1), (1, 3, 224, 224, 64, 7, 7, 2, 3), (1, 64, 35, 35, 64, 3, 3, 1, 1)]


@pytest.mark.parametrize("shape", LAYERS, ids=["3x3@56", "stem", "35x35"])
def test_each_seed_is_the_rules_hand_candidate(shape):
    wl = conv2d(*shape)
    record = rule_records(wl)[0]
    assert record.name == "nchw_splitk"
    seeds = rules_seeds(wl)
    assert len(seeds) == len(record.candidates) >= 1
    for seed, cand in zip(seeds, record.candidates):
        tvm.ir.assert_structural_equal(seed.mod, record.apply(wl, cand).mod)


def test_decisions_that_do_not_fit_the_design_are_one_line():
    wl = conv2d(*LAYERS[0])
    design = conv2d_nchw_splitk_space(s_tir.Schedule(wl.mod))
    with pytest.raises(ValueError, match="samples 4 tilings, the seed gives 1"):
        with_decisions(wl, design, [[1, 1, 64]])


@derived_object
class _Builder(ms.builder.PyBuilder):
    def build(self, build_inputs):
        return [ms.builder.BuilderResult(f"/nowhere/{i}.so", None) for i in range(len(build_inputs))]


@derived_object
class _Runner(ms.runner.PyRunner):
    """Says the second candidate is the fastest."""

    def run(self, runner_inputs):
        return [DoneFuture(1e-4 if i == 1 else 3e-4) for i in range(len(runner_inputs))]


def test_seed_database_commits_the_seeds_and_the_fastest_replays(tmp_path):
    wl = conv2d(*LAYERS[0])
    space = get_space("rules")
    target = space.target(cuda_target())
    seeds = rules_seeds(wl)
    n = seed_database(wl, tmp_path, seeds, space_generator=space.generator(wl), target=target, builder=_Builder(),
                      runner=_Runner())
    assert n == len(seeds) == trials_done(tmp_path)
    best = best_schedule(open_database(tmp_path), wl, target)
    ctx = ms.TuneContext(mod=wl.mod, target=target, space_generator=space.generator(wl), task_name="t")
    tvm.ir.assert_structural_equal(best.mod, _postprocessed(ctx, seeds[1]).mod)


def test_the_rules_space_takes_fp32_nchw_only_in_one_line():
    with pytest.raises(ValueError, match=r"^space='rules'") as err:
        get_space("rules").require(conv2d(32, 64, 56, 56, 64, 3, 3, 1, 1, layout="NHWC", dtype="float16"))
    assert "\n" not in str(err.value)

"""``replay``, the one call the notebooks make per database: None and one line without a database; the best schedule
and the trials with one; a measurement only where a CUDA GPU ran it. A tiny GEMM tuned on llvm for a few trials, and
a tiny Winograd convolution (notebook 04 replays the batch-256 layer's as ``winograd_f<m>_metaschedule``)."""
import shutil
from pathlib import Path

import pytest

from tirbench.bench.harness import output_error
from tirbench.core.build import build
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.tuning.builders import make_builder
from tirbench.tuning.database import tuned_arch
from tirbench.tuning.history import trials_done
from tirbench.tuning.replay import Replay, replay
from tirbench.tuning.runners import make_local_runner
from tirbench.tuning.spaces import get_space
from tirbench.tuning.tune import tune, work_dir_for
from tirbench.workloads import conv2d_winograd, gemm

WL = gemm(32, 32, 32)
TRIALS = 4


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """A project root whose default-space database of ``WL`` holds ``TRIALS`` llvm trials."""
    root = tmp_path_factory.mktemp("root")
    tune(WL, work_dir_for(root, WL), trials=TRIALS, chunk=TRIALS, target=cpu_target(), builder=make_builder(WL),
         runner=make_local_runner("tuned"))
    assert trials_done(work_dir_for(root, WL)) == TRIALS
    return root


def test_no_database_is_one_line_and_none(tmp_path, capsys):
    assert replay(WL, "default", variant="metaschedule_float32", root=tmp_path, target=cpu_target()) is None
    assert capsys.readouterr().out == ("metaschedule_float32 32x32x32: no tuning database yet "
                                       "(results/tuning/gemm/float32_32x32x32)\n")


def test_tune_now_without_a_gpu_tunes_nothing(tmp_path, capsys):
    assert replay(WL, "default", variant="v", root=tmp_path, target=cpu_target(), trials=4, tune_now=True) is None
    assert trials_done(work_dir_for(tmp_path, WL)) == 0


def test_replay_gives_the_best_schedule_and_the_trials_without_a_measurement(tuned, capsys):
    r = replay(WL, get_space("default"), variant="metaschedule_float32", root=tuned, target=cpu_target())
    assert isinstance(r, Replay) and r.trials == TRIALS and r.space is get_space("default")
    assert r.work_dir == work_dir_for(tuned, WL) and r.measurement is None   # no CUDA GPU: nothing timed
    assert "sample_perfect_tile" in str(r.schedule.trace)
    assert capsys.readouterr().out == (f"metaschedule_float32 32x32x32: best of {TRIALS} trials from "
                                       "results/tuning/gemm/float32_32x32x32\n")


def test_replay_takes_a_space_name_and_a_copied_database(tuned, tmp_path):
    shutil.copytree(tuned / "results", tmp_path / "results")
    r = replay(WL, "default", variant="v", root=tmp_path, target=cpu_target())
    assert r is not None and r.trials == TRIALS and r.schedule.mod.script()


@pytest.mark.full
def test_a_tuned_winograd_module_replays_and_matches_the_reference(tmp_path, capsys):
    """MetaSchedule's default rules on the Winograd module (five blocks, two of them with the transforms' selects):
    the database it writes is found again for the same module (``tirx.noalias`` included), and the replayed
    schedule's output meets the derived tolerance."""
    wl = conv2d_winograd(1, 4, 6, 6, 4, m=2)
    tune(wl, work_dir_for(tmp_path, wl), trials=2, chunk=2, target=cpu_target(), builder=make_builder(wl),
         runner=make_local_runner("tuned"))
    r = replay(conv2d_winograd(1, 4, 6, 6, 4, m=2), "default", variant="winograd_f2_metaschedule", root=tmp_path,
               target=cpu_target())
    assert r is not None and r.trials == 2 and r.measurement is None
    assert capsys.readouterr().out.endswith("winograd_f2_metaschedule 1x4x6x6x4x2: best of 2 trials from "
                                            "results/tuning/conv2d_winograd/float32_NCHW_1x4x6x6x4x2\n")
    error = output_error(wl, build(r.schedule, cpu_target()), target=cpu_target())
    assert 0 < error["max_abs"] < error["atol"] == wl.tolerance["atol"]


def test_a_database_tuned_for_another_arch_or_a_space_the_arch_lacks_is_not_replayed(capsys):
    """The recorded databases were tuned for the Hopper build: a build for sm_80 replays none of them (a schedule tuned
    for one architecture is neither valid nor fast on another), and none of a space it lacks a feature of."""
    root = Path(__file__).resolve().parents[1]
    big = gemm(1024, 1024, 1024)
    hopper = tuned_arch(work_dir_for(root, big))
    assert hopper == cuda_target().attrs["arch"]   # the default build's
    assert replay(big, "default", variant="ms", root=root, target=cuda_target("sm_80")) is None
    assert replay(gemm(4096, 4096, 4096, dtype="float16"), "wgmma", variant="ms", root=root,
                  target=cuda_target("sm_80")) is None
    assert capsys.readouterr().out.splitlines() == [
        f"ms 1024x1024x1024: not replayed (tuned for {hopper}; this build is sm_80)",
        "ms 4096x4096x4096: not replayed (space='wgmma': needs wgmma (sm_90a); this build is sm_80)"]

"""AutoTVM's conv2d template as a MetaSchedule design space: its size; sampled points that pass MetaSchedule's CUDA
postprocessors compile for sm_90a with shared memory and the sampled unrolling; a fixed point; one-line errors.

CUDA kernels cannot run here: the workload's numerics are checked on llvm, the scheduled kernels only compile."""
from __future__ import annotations

import itertools
import math
import shutil

import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms

from tirbench.bench.harness import run_checked
from tirbench.core.cuda_source import device_source, kernel_only, nvcc_report
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.schedules.conv.template import conv2d_template_space, template_config, template_space_size
from tirbench.workloads import conv2d, gemm
from tirbench.workloads.base import Workload

RESNET_LAST = conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)  # ResNet-50's last 3x3 layer, the AutoTVM tutorial's task
STEM = conv2d(1, 3, 224, 224, 64, 7, 7, 2, 3)  # ResNet-50's 7x7 stride-2 stem
#: A hand point for RESNET_LAST: 16 x 1 x 1 blocks of 8 x 7 x 7 = 392 threads, each 2 (vthreads) x 2 x 1 x 1 outputs.
HAND = {"tile_f": [16, 2, 8, 2], "tile_y": [1, 1, 7, 1], "tile_x": [1, 1, 7, 1], "tile_rc": [64, 2, 4],
        "tile_ry": [1, 3, 1], "tile_rx": [1, 1, 3], "auto_unroll_max_step": 1500, "unroll_explicit": 1}


def _passes_cuda_postprocs(sch: s_tir.Schedule, wl: Workload) -> bool:
    """MetaSchedule's CUDA postprocessors (VerifyGPUCode at the sm_90a tag's 48 KB and 1024 threads among them)
    applied to ``sch`` in place, as the search applies them to each sample; whether all accept it."""
    posts = ms.postproc.Postproc.create("cuda")
    for post in posts:
        post._initialize_with_tune_context(ms.TuneContext(mod=wl.mod, target=cuda_target()))
    return all(post.apply(sch) for post in posts)


def _loops(src: str) -> int:
    return src.count("for (")


def test_space_size_matches_the_autotvm_count():
    """Ordered factorizations per split (512 = 2^9 into 4: C(12, 3) = 220; 7 into 4: 4; 512 into 3: 55; 3 into 3: 3)
    times 3 unroll steps x explicit on/off; the AutoTVM tutorial reports about 10^7 for this layer."""
    assert template_space_size(RESNET_LAST) == 220 * 4 * 4 * 55 * 3 * 3 * 6 == 10_454_400
    # 64 = 2^6 into 4: C(9, 3) = 84; 112 = 2^4 * 7 into 4: C(7, 3) * 4 = 140; 3 and 7 into 3: 3
    assert template_space_size(STEM) == 84 * 140 * 140 * 3 * 3 * 3 * 6 == 266_716_800


def test_space_size_counts_every_factorization():
    def brute(extent: int, parts: int) -> int:
        divisors = [d for d in range(1, extent + 1) if extent % d == 0]
        return sum(math.prod(t) == extent for t in itertools.product(divisors, repeat=parts))

    wl = conv2d(2, 12, 6, 5, 8, 3, 1, 1, 0)  # f=8, y=4, x=5 into 4; rc=12, ry=3, rx=1 into 3
    assert template_space_size(wl) == brute(8, 4) * brute(4, 4) * brute(5, 4) * brute(12, 3) * brute(3, 3) * 6


@pytest.mark.parametrize("wl, seeds, at_least", [(RESNET_LAST, 40, 3), (STEM, 24, 8)], ids=["resnet_last", "stem"])
def test_sampled_points_pass_postprocs_and_compile(wl, seeds, at_least):
    """Most samples of the full space break a limit (over 1024 threads, over 48 KB of shared memory) and
    ``VerifyGPUCode`` drops them, as AutoTVM's builder dropped them; those that pass compile, stage both operands
    in shared memory, and unroll as sampled: explicit unrolling leaves fewer loops than no unrolling, implicit
    unrolling leaves ``#pragma unroll`` for nvcc."""
    passed, configs = 0, set()
    for seed in range(1, seeds + 1):
        sch = conv2d_template_space(s_tir.Schedule(wl.mod, seed=seed))
        config = template_config(sch)
        configs.add(str(config))
        if not _passes_cuda_postprocs(sch, wl):
            continue
        passed += 1
        src = kernel_only(device_source(sch))
        assert src.count("__shared__") == 2
        if config["auto_unroll_max_step"]:
            plain = conv2d_template_space(s_tir.Schedule(wl.mod), dict(config, auto_unroll_max_step=0))
            if config["unroll_explicit"]:
                assert _loops(src) < _loops(kernel_only(device_source(plain)))
            else:
                assert "#pragma unroll" in src
    assert passed >= at_least and len(configs) == seeds


def test_design_space_replays_with_fresh_decisions():
    """The search re-draws a design space's decisions and replays its trace: the loop counts the trace records
    (``get_loops`` of the shared copies) must not depend on the tile sizes."""
    insts = conv2d_template_space(s_tir.Schedule(STEM.mod, seed=1)).trace.insts
    configs = set()
    for seed in range(1, 16):
        sch = s_tir.Schedule(STEM.mod, seed=seed)
        s_tir.Trace(insts, {}).apply_to_schedule(sch, remove_postproc=True)
        configs.add(str(template_config(sch)))
    assert len(configs) == 15


def test_workload_matches_reference_on_llvm():
    """The template's workload itself (unscheduled: GPU-bound kernels cannot run on llvm)."""
    run_checked(RESNET_LAST, tvm.compile(RESNET_LAST.mod, target=cpu_target()), tvm.cpu(0))


def test_hand_point_is_the_config_and_compiles():
    """A config gives the same trace with those decisions: its launch, register tile and shared tiles."""
    sch = conv2d_template_space(s_tir.Schedule(RESNET_LAST.mod), HAND)
    assert template_config(sch) == HAND and _passes_cuda_postprocs(sch, RESNET_LAST)
    src = kernel_only(device_source(sch))
    assert "__launch_bounds__(392)" in src and "float Y_local_ptr[4];" in src
    # per rco step: 8 channels x 9 x 9 padded pixels; 32 filters x 8 channels x 3 x 3 taps
    assert "Xp_shared_ptr[648];" in src and "W_shared_ptr[2304];" in src
    if shutil.which("nvcc"):  # valid CUDA for sm_90a (ptxas caps this 392-thread block at 128 registers)
        assert any("Used 128 registers" in line for line in nvcc_report(device_source(sch)))


@pytest.mark.parametrize("wl", [conv2d(1, 8, 7, 7, 8, layout="NHWC"), conv2d(1, 8, 7, 7, 8, layout="HWCN"),
                                gemm(64, 64, 64)], ids=["nhwc", "hwcn", "gemm"])
def test_other_workloads_are_one_line_errors(wl):
    with pytest.raises(ValueError, match=r"^conv2d_template_space needs the 'conv' block of a float32 NCHW [^\n]*$"):
        conv2d_template_space(s_tir.Schedule(wl.mod))
    with pytest.raises(ValueError, match=r"^workload: the conv2d template needs a float32 NCHW conv2d[^\n]*$"):
        template_space_size(wl)


@pytest.mark.parametrize("change, message", [
    ({"tile_f": [16, 2, 8, 4]}, r"config\['tile_f'\]=\[16, 2, 8, 4\]: expected 4 positive factors whose product is "
                                r"f=512"),
    ({"tile_ry": [3, 1]}, r"config\['tile_ry'\]=\[3, 1\]: expected 3 positive factors"),
    ({"auto_unroll_max_step": 64}, r"config\['auto_unroll_max_step'\]=64: expected one of \[0, 512, 1500\]"),
    ({"tile_z": [1]}, r"config: expected the knobs tile_f, "),
])
def test_bad_config_is_a_one_line_error(change, message):
    with pytest.raises(ValueError, match=message) as info:
        conv2d_template_space(s_tir.Schedule(RESNET_LAST.mod), {**HAND, **change})
    assert "\n" not in str(info.value)

"""Conv rules (``schedules.conv.rules``) and their run (``bench.choose``): every ResNet-50 layer and the shapes the
hand sweeps could not take (3 and 96 channels, a 35x35 map, batch 7, stride 2) get candidates that schedule and
compile for sm_90a; a workload no rule takes is one line; recorded choices round-trip and replay only while the
rules still offer them, and are chosen again (within a time budget) once the rules offer a family added since."""
import re
from dataclasses import replace

import pytest
import tvm

from tirbench.bench import choose as choose_module
from tirbench.bench.choose import Choice, Choices, choose_all, families_offered, is_stale, offered
from tirbench.bench.harness import Measurement, Timing
from tirbench.bench.sweep import SweepResult, Trial
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import arch_for
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv.records import WINOGRAD
from tirbench.schedules.conv.rules import SMS, GemmView, gemm_view, rule_records, splitk_candidates, winograd_forms
from tirbench.workloads import conv2d, gemm
from tirbench.workloads.resnet50 import RESNET50, resnet50_layers

CUDA = tvm.target.Target("nvidia/nvidia-h100", host="llvm")
ODD = [(1, 3, 224, 224, 64, 7, 7, 2, 3), (1, 96, 28, 28, 128, 3, 3, 1, 1), (1, 64, 35, 35, 64, 3, 3, 1, 1),
       (7, 128, 28, 28, 128, 3, 3, 1, 1), (1, 64, 56, 56, 128, 1, 1, 2, 0)]


def test_resnet50_has_23_distinct_convolutions_53_in_all_and_its_known_work():
    assert len(RESNET50) == 23 and sum(layer.count for layer in RESNET50) == 53
    macs = sum(layer.count * conv2d(*shape).flops / 2 for layer, shape in resnet50_layers(1))
    assert 4.08e9 < macs < 4.11e9   # ResNet-50's 4.1 GMACs of convolution at 224x224
    assert {layer.shape(32)[0] for layer in RESNET50} == {32}


def test_gemm_view_and_fill():
    wl = conv2d(32, 256, 14, 14, 256, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    assert gemm_view(wl) == GemmView(32 * 14 * 14, 256, 256 * 9)
    exact = GemmView(128 * SMS, 128, 64)
    assert exact.fill(128, 128) == 1.0 and exact.fill(128, 256) == pytest.approx(0.5)


@pytest.mark.parametrize("shape", ODD, ids=["stem", "c96", "35x35", "batch7", "1x1s2"])
def test_every_fp32_candidate_fits_the_layer(shape):
    wl = conv2d(*shape)
    records = rule_records(wl)
    assert [r.name for r in records] == ["nchw_splitk", "nchw_gemm"]
    assert 1 <= len(records[0].candidates) <= 5 and 1 <= len(records[1].candidates) <= 4
    for record in records:
        for cand in record.candidates:
            record.apply(wl, cand)   # a one-line ValueError would fail the test


def test_fp32_nhwc_layers_get_the_implicit_gemm():
    wl = conv2d(*ODD[3], layout="NHWC")
    (record,) = rule_records(wl)
    assert record.name == "nhwc_gemm" and record.candidates
    record.apply(wl, record.candidates[0])


def test_winograd_forms_only_for_3x3_stride_1_fp32_and_a_recorded_winograd_choice_is_offered():
    wl = conv2d(1, 256, 14, 14, 256, 3, 3, 1, 1)
    forms = winograd_forms(wl)
    assert [f.sizes["m"] for f in forms] == [2, 4] and all(f.name == "conv2d_winograd" for f in forms)
    assert all(f.flops == wl.flops for f in forms)   # rates compare with the direct kernels'
    for shape in (ODD[0], ODD[4]):   # 7x7 stride 2, 1x1 stride 2
        assert winograd_forms(conv2d(*shape)) == []
    assert winograd_forms(conv2d(32, 64, 56, 56, 64, 3, 3, 1, 1, layout="NHWC", dtype="float16")) == []
    cand = dict(WINOGRAD.candidates[-1])
    form, record, params = offered(wl, Choice(WINOGRAD.name, {"m": 4, **cand}, 1.0))
    assert form.sizes["m"] == 4 and params == cand and record.candidates == (cand,)
    assert offered(wl, Choice(WINOGRAD.name, {"m": 3, **cand}, 1.0)) is None


@pytest.mark.parametrize("shape", [ODD[0], ODD[2]], ids=["stem", "35x35"])
def test_the_rules_first_fp32_candidate_compiles_for_sm90a(shape):
    wl = conv2d(*shape)
    record = rule_records(wl)[0]
    src = device_source(record.apply(wl, record.candidates[0]), CUDA, record.pass_config)
    assert any("registers" in line for line in nvcc_report(src))


@pytest.mark.full
def test_each_kind_of_resnet50_layer_gets_tensor_core_candidates_that_schedule(monkeypatch):
    """Each candidate the rules keep was scheduled by them (``ranked_tiles`` keeps those that raise nothing): the
    schedules that succeed are recorded as the rules make them, not made a second time here (half the test's time).
    One layer of each kind (filter, stride, narrowing or widening the channels, a map of 56 or of 14 and less): 10 of
    the 22 after the stem. Every layer on every architecture: ``tests/test_arch_filter.py`` (sm_75, sm_80, sm_89) and
    ``results/kernel/rules_every_layer.csv`` (built and verified on a GPU)."""
    scheduled, apply = [], KernelRecord.apply

    def recording_apply(record, wl, overrides=None, **kwargs):
        sch = apply(record, wl, overrides, **kwargs)
        scheduled.append((wl.shape, record.name, dict(overrides or {}), kwargs))
        return sch

    monkeypatch.setattr(KernelRecord, "apply", recording_apply)
    kinds = {}
    for layer, shape in resnet50_layers(32)[1:]:   # the stem: tests/test_conv_any_channels.py
        kinds.setdefault((layer.r, layer.stride, layer.c > layer.k, layer.h <= 14), (layer, shape))
    assert len(kinds) == 10
    for layer, shape in kinds.values():
        wl = conv2d(*shape, layout="NHWC", dtype="float16")
        kept = [(wl.shape, record.name, dict(cand), {}) for record in rule_records(wl) for cand in record.candidates]
        assert len(kept) >= 4 and all(k in scheduled for k in kept), layer.name


def test_a_workload_no_rule_takes_is_one_line():
    with pytest.raises(ValueError, match=r"^no conv rule takes gemm float32") as err:
        rule_records(gemm(64, 64, 64))
    assert "\n" not in str(err.value)


def test_split_k_tilings_divide_their_axes_and_fit_shared_memory():
    for cand in splitk_candidates(conv2d(1, 64, 35, 35, 64, 3, 3, 1, 1), keep=8):
        py, px = cand["block_pixels"]
        assert 35 % py == 0 and 35 % px == 0 and 64 % cand["split"] == 0 and 64 % cand["block_k"] == 0


def test_choices_round_trip_and_replay_only_what_the_rules_offer(tmp_path):
    wl = conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)
    record = rule_records(wl)[0]
    choices = Choices(tmp_path / "choices.csv")
    choices.remember(wl, Choice(record.name, record.candidates[0], 3.25), "NVIDIA H100 80GB HBM3")
    choices.write(tmp_path / "choices.csv")
    back = Choices(tmp_path / "choices.csv").recorded(wl)
    assert back == Choice(record.name, dict(record.candidates[0]), 3.2)   # rules_s kept to 0.1 s
    assert offered(wl, back)[1].candidates == (back.params,)
    assert offered(wl, Choice(record.name, {**back.params, "split": 3}, 1.0)) is None   # no longer offered
    assert Choices(tmp_path / "none.csv").recorded(wl) is None


def test_choices_are_kept_per_arch_and_rows_from_before_the_arch_column_read_as_the_hopper_build(tmp_path):
    """A build for sm_80 neither replays nor overwrites the recorded Hopper choices (results/08_resnet50/choices.csv
    predates the column: its H100/H200 rows read as those GPUs' own architecture)."""
    wl = conv2d(1, 512, 7, 7, 512, 3, 3, 1, 1)
    path = tmp_path / "choices.csv"
    hopper = arch_for("9.0")   # what every H100/H200 row was built for
    path.write_text("dtype,layout,shape,kernel,params,rules_s,gpu,families\n"
                    f"float32,NCHW,{wl.shape},nchw_splitk,\"{{'split': 16}}\",2.0,NVIDIA H200,\n")
    assert Choices(path, arch=hopper).recorded(wl).kernel == "nchw_splitk"
    ampere = Choices(path, arch="sm_80")
    assert ampere.recorded(wl) is None
    ampere.remember(wl, Choice("nchw_gemm", {"block_tile": (64, 64)}, 1.0), "NVIDIA A100-SXM4-80GB")
    ampere.write(path)
    assert Choices(path, arch="sm_80").recorded(wl).kernel == "nchw_gemm"
    assert Choices(path, arch=hopper).recorded(wl).kernel == "nchw_splitk"
    assert sorted(row["arch"] for row in Choices(path, arch="sm_80").rows.values()) == sorted(["sm_80", hopper])
    assert path.read_text().splitlines()[0].endswith(",arch")


def test_the_split_k_candidates_of_the_3x3_layer_at_56_do_not_spill():
    """Above 256 threads ptxas kept these kernels to 32 registers and spilled ~1 KB a thread (250 us vs 47 us on an
    H100); the rules' candidates now stay within what it compiles without spilling more than a few words."""
    wl = conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1)
    record = rule_records(wl)[0]
    for cand in record.candidates:
        report = " ".join(nvcc_report(device_source(record.apply(wl, cand), CUDA)))
        spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
        assert spills and max(spills) <= 64, (cand, report)


def test_a_choice_made_before_a_family_joined_the_rules_is_chosen_again_within_the_budget(tmp_path, monkeypatch,
                                                                                         capsys):
    wl = conv2d(32, 256, 14, 14, 256, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    wl7 = conv2d(32, 512, 7, 7, 512, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    now = families_offered(wl)
    assert any(f.startswith("nhwc_tma_ws:") for f in now)
    old = Choice("nhwc_wgmma", {"block_tile": (128, 128), "stages": 4}, 50.0,
                 families=tuple(f for f in now if not f.startswith("nhwc_tma_ws:")))
    assert is_stale(wl, old) and not is_stale(wl, replace(old, families=now))
    choices = Choices(tmp_path / "choices.csv")
    for layer in (wl, wl7):
        choices.remember(layer, old, "NVIDIA H100 80GB HBM3")
    choices.write(tmp_path / "choices.csv")
    assert Choices(tmp_path / "choices.csv").recorded(wl).families == old.families
    assert is_stale(wl7, old)

    replayed = []   # the layers replayed: a stale layer chosen again is not replayed first
    monkeypatch.setattr(choose_module, "replay_all",
                        lambda wls, *_, **__: replayed.append([w.shape for w in wls]) or
                        [replace(old, replayed=True) for _ in wls])
    monkeypatch.setattr(choose_module, "choose_many",
                        lambda ws, **_: [Choice("nhwc_tma_ws", {}, 40.0, families=families_offered(w)) for w in ws])
    # each stale layer is budgeted at min(50 s x 1.5, 60 s): the first fits in 70 s, the second (40 + 60) does not
    out = choose_all([wl, wl7], choices, now=False, target=None, repeats=1, seed=0, budget_s=70)
    assert [(c.kernel, c.replayed) for c in out] == [("nhwc_tma_ws", False), ("nhwc_wgmma", True)]
    assert not is_stale(wl, out[0]) and is_stale(wl7, out[1])
    printed = capsys.readouterr().out
    assert "1 stale choices replayed" in printed and wl7.shape in printed
    assert replayed == [[wl7.shape]]
    assert [c.kernel for c in choose_all([wl, wl7], choices, now=False, target=None, repeats=1, seed=0)] == \
        ["nhwc_tma_ws"] * 2   # no budget: every stale layer is chosen again


def test_a_candidate_added_to_a_family_makes_its_choices_stale(monkeypatch):
    wl = conv2d(32, 256, 14, 14, 256, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    chosen = Choice("nhwc_tma_ws", {}, 10.0, families=families_offered(wl))
    assert not is_stale(wl, chosen)
    forms = choose_module.rule_forms(wl)
    (form, records, extra), rest = forms[0], forms[1:]
    grown = [r.with_candidates(r.candidates + ({"stages": 2},)) if r.name == "nhwc_tma_ws" else r for r in records]
    monkeypatch.setattr(choose_module, "rule_forms", lambda w: [(form, grown, extra), *rest])
    assert is_stale(wl, chosen)


def test_choose_many_sweeps_every_layer_in_one_batch_and_keeps_each_layers_fastest(monkeypatch):
    """One ``sweep_all`` for all layers (their builds side by side); each layer gets its own fastest verified trial
    and a share of the batch's time."""
    wls = [conv2d(1, 64, 56, 56, 64, 1, 1, 1, 0), conv2d(1, 128, 28, 28, 128, 1, 1, 1, 0)]
    calls = []

    def fake_sweep_all(jobs, **_):
        calls.append([wl.shape for wl, _ in jobs])
        return [SweepResult(wl, [_trial(wl, records[0], ms) for ms in (0.2, wl.sizes["c"] / 1000)])
                for wl, records in jobs]

    monkeypatch.setattr(choose_module, "sweep_all", fake_sweep_all)
    out = choose_module.choose_many(wls, target=None, repeats=1, seed=0)
    assert calls == [[wl.shape for wl in wls]]
    assert [c.measurement.timing.median_ms for c in out] == [0.064, 0.128]
    assert [c.measurement.workload for c in out] == wls and out[0].rules_s == out[1].rules_s
    assert choose_module.choose_many([], target=None, repeats=1, seed=0) == []


def _trial(wl, record, ms: float) -> Trial:
    return Trial(record, {}, "ok", measurement=Measurement(wl, record.name, "tvm", Timing(ms, ms, ms, 1)))

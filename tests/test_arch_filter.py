"""Families offered by the build's architecture (issue 41, "Records say what they need"): the conv and GEMM rules,
sweeps, the ladder and the MetaSchedule spaces offer only families whose ``needs`` the arch has, and say in one line
what they skip; the default build (an H100's, sm_90a) offers what it did."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tirbench.bench.sweep import sweep, target_arch
from tirbench.core.cuda_source import device_source, nvcc_report
from tirbench.core.gpu import ARCH_ENV, ArchError, features
from tirbench.core.machine import cpu_target, cuda_target
from tirbench.schedules.common.record import for_arch, require_a_candidate
from tirbench.schedules.conv import rules as conv_rules
from tirbench.schedules.conv.records import INT8_MMA, NHWC_MMA, NHWC_WGMMA, NHWC_WMMA
from tirbench.schedules.gemm import rules as gemm_rules
from tirbench.schedules.gemm.records import LADDER, V7_MMA_LDMATRIX, V8_WGMMA, V9_TMA_WS
from tirbench.tuning.spaces import SPACES, get_space
from tirbench.workloads import conv2d, conv2d_int8, gemm

ROOT = Path(__file__).resolve().parents[1]
#: Features no pre-Hopper build has.
HOPPER_ONLY = {"wgmma", "tma", "setmaxnreg"}


@pytest.fixture(autouse=True)
def _default_build(monkeypatch):
    """No GPU and no ``TIRBENCH_ARCH`` unless a test sets it (the build reads it through ``current_gpu()``)."""
    monkeypatch.delenv(ARCH_ENV, raising=False)
    monkeypatch.setenv("TIRBENCH_FORCE_CPU", "1")


def test_for_arch_keeps_the_order_and_says_why_for_the_others():
    taken, skipped = for_arch(LADDER, "sm_80")
    assert [r.name for r in taken] == [r.name for r in LADDER[:8]]
    assert skipped == ["v8_wgmma: needs wgmma (sm_90a); this build is sm_80",
                       "v9_tma_ws: needs tma (sm_90+); this build is sm_80"]
    assert for_arch(LADDER)[0] == list(LADDER) and for_arch(LADDER)[1] == []   # the default build: every rung
    assert [r.name for r in for_arch(LADDER, "sm_75")[0]] == ["v0_naive", "v1_local", "v2_shared", "v3_vectorized",
                                                              "v6_wmma"]


def test_asking_a_hopper_family_directly_is_one_line_naming_the_feature_and_the_arch(monkeypatch):
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    fp16_gemm, fp16_conv = gemm(256, 256, 256, dtype="float16"), conv2d(8, 64, 14, 14, 64, layout="NHWC",
                                                                       dtype="float16")
    for record, wl, feature in ((V8_WGMMA, fp16_gemm, "wgmma (sm_90a)"), (V9_TMA_WS, fp16_gemm, "tma (sm_90+)"),
                                (NHWC_WGMMA, fp16_conv, "wgmma (sm_90a)")):
        with pytest.raises(ArchError) as err:
            record.apply(wl)
        assert str(err.value) == f"{record.name}: needs {feature}; this build is sm_80"
        assert err.value._render_traceback_() == [f"ArchError: {err.value}"]
    with pytest.raises(ValueError, match=rf"^no nhwc_wgmma kernel takes conv2d {fp16_conv.shape}: nhwc_wgmma: "
                                         r"needs wgmma \(sm_90a\); this build is sm_80$"):
        require_a_candidate(fp16_conv, (NHWC_WGMMA,))   # how notebook 06 checks a layer for a family
    V7_MMA_LDMATRIX.apply(fp16_gemm)   # sm_80's own families still schedule
    assert require_a_candidate(fp16_conv, (NHWC_WGMMA, NHWC_MMA)) is fp16_conv


def test_the_rules_offer_no_hopper_family_on_sm_80_and_say_so_once(monkeypatch, capsys):
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    monkeypatch.setattr("tirbench.schedules.common.record._SAID", set())
    fp16 = conv2d(32, 256, 14, 14, 256, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    int8 = conv2d_int8(32, 256, 14, 14, 256, 3, 3, 1, 1, relu=True, residual=False)
    for _ in range(2):
        assert [r.name for r in conv_rules.rule_records(fp16, keep=1)] == [NHWC_MMA.name]
        assert [r.name for r in conv_rules.rule_records(int8, keep=1)] == [INT8_MMA.name]
        assert conv_rules.int8_forms(int8) == []   # its KRSC form is for the TMA kernel
    said = capsys.readouterr().out.splitlines()
    assert said == ["nhwc_wgmma: needs wgmma (sm_90a); this build is sm_80",
                    "nhwc_tma_ws: needs tma (sm_90+); this build is sm_80",
                    "nhwc_1x1_tma: needs tma (sm_90+); this build is sm_80",
                    "int8_wgmma: needs wgmma (sm_90a); this build is sm_80",
                    "int8_tma_ws: needs tma (sm_90+); this build is sm_80"]
    few_rows = gemm(64, 1024, 1024, dtype="float16")
    offered = gemm_rules.rule_records(few_rows, keep=1)
    assert [r.name for r in offered] == ["v7_mma_ldmatrix", "splitk_mma"]   # v7 where no wgmma family builds
    assert not HOPPER_ONLY & {f for r in offered for f in r.needs}
    with pytest.raises(ArchError, match=r"^no GEMM family builds float16 inputs with a float16 C here: v9_tma_ws: "
                                        r"needs tma \(sm_90\+\); this build is sm_80$"):
        gemm_rules.rule_records(gemm(256, 256, 256, dtype="float16", out_dtype="float16"))


def test_the_default_build_offers_the_hopper_families(capsys):
    fp16 = conv2d(32, 256, 14, 14, 256, 3, 3, 1, 1, layout="NHWC", dtype="float16")
    assert [r.name for r in conv_rules.rule_records(fp16, keep=1)] == ["nhwc_wgmma", "nhwc_tma_ws", "nhwc_mma"]
    assert [r.name for r in gemm_rules.rule_records(gemm(64, 1024, 1024, dtype="float16"), keep=1)] == \
        ["v9_tma_ws", "v8_wgmma", "splitk_wgmma", "splitk_mma"]
    assert capsys.readouterr().out == ""


def test_a_sweep_skips_in_one_trial_a_family_its_targets_arch_lacks(monkeypatch):
    """The target's arch decides (a notebook's tag may be older than the build's); llvm has none."""
    assert target_arch(cuda_target()) == "sm_90a" and target_arch(cuda_target("sm_80")) == "sm_80"
    assert target_arch(cpu_target()) is None
    monkeypatch.setattr("tirbench.bench.sweep.build_by_config", lambda jobs, target: [])
    res = sweep(gemm(256, 256, 256, dtype="float16"), [V8_WGMMA, V9_TMA_WS], target=cuda_target("sm_80"))
    assert [(t.record.name, t.status, t.reason) for t in res.trials] == [
        ("v8_wgmma", "skipped", "v8_wgmma: needs wgmma (sm_90a); this build is sm_80"),
        ("v9_tma_ws", "skipped", "v9_tma_ws: needs tma (sm_90+); this build is sm_80")]


def test_a_space_is_refused_in_one_line_on_an_arch_without_its_features(monkeypatch):
    wl = gemm(256, 256, 256, dtype="float16")
    assert get_space("wgmma").generator(wl) is not None   # the default build searches it
    monkeypatch.setenv(ARCH_ENV, "sm_80")
    with pytest.raises(ArchError, match=r"^space='wgmma': needs wgmma \(sm_90a\); this build is sm_80$"):
        get_space("wgmma").generator(wl)
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    with pytest.raises(ArchError, match=r"^space='v5': needs cp_async \(sm_80\+\); this build is sm_75$"):
        get_space("v5").generator(gemm(256, 256, 256))
    assert get_space("default").generator(wl) is not None   # MetaSchedule's rules: wmma, sm_75+
    assert all(set(space.needs) <= set(features("sm_90a")) for space in SPACES.values())


#: Under ``TIRBENCH_ARCH`` in a fresh process (the rules' SM count and shared-memory limit are read at import): what
#: notebook 08 sweeps on every ResNet-50 layer (``bench.choose.rule_forms``: fp32 NCHW at batch 1 with its Winograd
#: forms, fp16 NHWC and int8 at batch 32 with the int8 forms), each form's families with their needs and candidate
#: counts, or the one line that refused the layer.
RESNET_SCRIPT = """
import json
from tirbench.bench.choose import rule_forms
from tirbench.workloads import conv2d, conv2d_int8
from tirbench.workloads.resnet50 import RESNET50
out = {}
for layer in RESNET50:
    for dtype, wl in (("float32", conv2d(*layer.shape(1), layout="NCHW", dtype="float32")),
                      ("float16", conv2d(*layer.shape(32), layout="NHWC", dtype="float16")),
                      ("int8", conv2d_int8(*layer.shape(32), relu=True, residual=False))):
        try:
            out[f"{layer.name} {dtype}"] = [[r.name, list(r.needs), len(r.candidates)]
                                            for _, records, _ in rule_forms(wl, keep=1) for r in records]
        except ValueError as err:
            out[f"{layer.name} {dtype}"] = str(err)
print(json.dumps(out))
"""


def resnet_families(arch: str) -> dict[str, list | str]:
    env = {**os.environ, ARCH_ENV: arch, "TIRBENCH_FORCE_CPU": "1"}
    run = subprocess.run([sys.executable, "-c", RESNET_SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.splitlines()[-1])


#: The families an sm_75 build's rules give a ResNet-50 layer, by dtype: fp32 split-K and the Turing siblings of the
#: cp.async families (``sm75_``), fp16 and int8 the wmma families.
SM75_FAMILIES = {"float32": {"nchw_splitk", "sm75_nchw_gemm", "sm75_winograd_simt"}, "float16": {"nhwc_wmma"},
                 "int8": {"sm75_int8_wmma"}}


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_89"])
def test_notebook_08s_rules_give_every_resnet50_layer_a_kernel_the_arch_builds(arch):
    """fp32, fp16 and int8 on every layer, every family one the arch builds (``SM75_FAMILIES`` on sm_75); the Turing
    siblings and wmma families nowhere else."""
    found = resnet_families(arch)
    assert len(found) == 23 * 3
    for layer, families in found.items():
        assert isinstance(families, list) and families, f"{layer}: {families}"
        for name, needs, candidates in families:
            assert candidates >= 1 and set(needs) <= set(features(arch)), f"{layer}: {name} needs {needs}"
        names = {name for name, *_ in families}
        if arch == "sm_75":
            assert names <= SM75_FAMILIES[layer.rsplit(" ", 1)[1]], f"{layer}: {names}"
        elif layer.endswith("float32"):
            assert not any(name.startswith("sm75_") for name in names), f"{layer}: {names}"
        else:   # no wmma fallback where mma.sync builds
            assert names == {"nhwc_mma" if layer.endswith("float16") else "int8_mma"}, f"{layer}: {names}"


def test_turings_fp16_convolution_is_wmma_with_synchronous_copies_and_compiles_for_sm_75(monkeypatch):
    """``nhwc_wmma`` on a stem-like layer (3 channels: GEMM_K padded to the k tile) built for sm_75: wmma fragments,
    no cp.async, and nvcc compiles it for sm_75 without spilling."""
    monkeypatch.setenv(ARCH_ENV, "sm_75")
    wl = conv2d(2, 3, 32, 32, 64, 7, 7, 2, 3, layout="NHWC", dtype="float16")
    src = device_source(NHWC_WMMA.apply(wl), cuda_target("sm_75"))
    assert "wmma::mma_sync" in src and "cp.async" not in src and "cp_async" not in src
    assert "0 bytes spill stores" in " ".join(nvcc_report(src, "sm_75"))

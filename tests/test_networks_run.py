"""Notebook 10's machinery without a GPU: each config's workload of a layer, the plan of five networks' distinct
convolutions and what no family takes, a recorded choice rebuilt without asking the rules, ``networks.csv`` from one
run's verified rows (and the README section and index entry from it), depthwise layers against HBM bandwidth, the
choosing command's one-line refusals and its chunks that stop before the time limit and resume, and the notebook's
parameters refused in one line."""
import csv
import html
import shutil
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
import tvm_ffi
from test_results import row

from tirbench.bench import choose as choose_module
from tirbench.bench import networks as runner
from tirbench.bench import networks_measure
from tirbench.bench.choose import Choice, Choices, recorded_form
from tirbench.bench.harness import Measurement, Timing
from tirbench.bench.network import (NETWORKS_COLUMNS, depthwise_bandwidth, layer_shape, layer_workload,
                                    network_summary, recorded_networks)
from tirbench.bench.params import ParameterError
from tirbench.bench.results import append_csv, append_rows
from tirbench.bench.sweep import SweepResult
from tirbench.report import networks as published
from tirbench.report import overview
from tirbench.report.index import index_html
from tirbench.schedules.common.record import KernelRecord
from tirbench.schedules.conv.records import INT8_TMA_WS, WINOGRAD
from tirbench.schedules.conv.rules import refused_here, rule_records
from tirbench.workloads import conv2d, conv2d_int8
from tirbench.workloads.conv2d_int8 import filter_layout_of
from tirbench.workloads.layers import ConvLayer
from tirbench.workloads.networks import CONVNEXT_TINY, MOBILENET_V2, NETWORKS, RESNEXT50_32X4D
from tirbench.workloads.resnet50 import RESNET50

ROOT = Path(__file__).resolve().parents[1]
TS = "2026-11-29T00:00:00+00:00"
STEM, S1 = RESNET50[0], RESNET50[2]   # counts 1 and 3
DW = next(layer for layer in MOBILENET_V2 if layer.groups > 1)   # the first depthwise layer


def test_each_configs_workload_of_plain_depthwise_grouped_and_narrow_layers():
    assert layer_workload(STEM, "fp16", 32).layout == "NHWC" and layer_workload(STEM, "fp32", 1).dtype == "float32"
    int8 = layer_workload(S1, "int8", 32)   # notebook 08's int8 workload, as it built it before
    assert tvm_ffi.structural_equal(int8.mod, conv2d_int8(*S1.shape(32), relu=True, residual=False).mod)
    assert layer_workload(DW, "fp16", 32).shape == layer_shape(DW, 32)
    assert layer_workload(DW, "int8", 32).shape == layer_shape(DW, 32)   # depthwise: int8_depthwise's
    grouped = layer_workload(next(layer for layer in RESNEXT50_32X4D if 1 < layer.groups < layer.c), "int8", 32)
    assert filter_layout_of(grouped.mod) == "KCRS" and grouped.shape.endswith("_g32")   # grouped: int8_grouped's
    narrow = layer_workload(MOBILENET_V2[2], "int8", 32)   # 32 -> 16 channels: one group of 32 lanes, 16 of them real
    assert narrow.sizes["k"] == 16 and narrow.out_shape[1] == 1
    with pytest.raises(ValueError, match="config 'fp64': expected one of fp32, fp16, int8"):
        layer_workload(STEM, "fp64", 1)


def test_the_plan_measures_a_layer_two_networks_share_once_and_lists_what_no_family_takes():
    nets = {"resnet50": RESNET50[:5], "resnext50_32x4d": RESNEXT50_32X4D[:5]}   # stem, s1 (3x3 grouped in ResNeXt)
    fp16 = runner.plan(nets, "fp16", 32)
    stem = next(p for p in fp16.planned if p.wl.shape == layer_shape(STEM, 32))
    assert [name for name, _ in stem.layers] == ["resnet50", "resnext50_32x4d"]
    assert len({p.wl.shape for p in fp16.planned}) == len(fp16.planned) == 5 + 4
    assert not fp16.refused and not runner.plan(nets, "fp32", 1).refused   # nhwc_ / nchw_grouped_gemm
    assert not runner.plan(nets, "int8", 32).refused   # grouped: int8_grouped
    assert not runner.plan({"convnext_tiny": CONVNEXT_TINY}, "int8", 32).refused   # depthwise: int8_depthwise
    odd = ConvLayer("g3 48", 48, 14, 14, 48, 3, 3, 1, 1, count=1, groups=3)   # a group's channels across lane groups
    refused = runner.plan({"mine": [STEM, odd]}, "int8", 32).refused
    assert [(name, layer.name) for name, layer, _ in refused] == [("mine", "g3 48")]
    assert "input and output channels are multiples of 32" in refused[0][2]
    assert runner.quick_layers(MOBILENET_V2) == [MOBILENET_V2[0], DW] and runner.quick_layers(RESNET50) == [STEM]


def test_whether_a_family_builds_here_schedules_no_candidate(monkeypatch):
    def scheduled(*_, **__):
        raise AssertionError("a candidate was scheduled")

    monkeypatch.setattr(KernelRecord, "apply", scheduled)
    assert refused_here(layer_workload(STEM, "fp16", 8)) is None
    assert refused_here(layer_workload(STEM, "int8", 8)) is None


def test_a_recorded_choice_is_rebuilt_from_its_family_and_parameters_without_the_rules():
    wl = conv2d(1, 64, 56, 56, 64, 3, 3, 1, 1)
    form, record, params = recorded_form(wl, Choice(WINOGRAD.name, {"m": 4, "block_tile": (64, 64)}, 1.0))
    assert form.sizes["m"] == 4 and record.name == WINOGRAD.name and params == {"block_tile": (64, 64)}
    assert record.candidates == (params,)
    int8 = conv2d_int8(32, 256, 14, 14, 256, 3, 3, 1, 1, relu=True, residual=False)
    form, record, params = recorded_form(int8, Choice(INT8_TMA_WS.name, {"filter_layout": "KRSC"}, 1.0))
    assert filter_layout_of(form.mod) == "KRSC" and record.name == INT8_TMA_WS.name and params == {}
    assert recorded_form(wl, Choice("no_such_family", {}, 1.0)) is None


def test_choices_of_another_notebook_replay_and_only_what_is_remembered_is_written(tmp_path):
    wl, other = conv2d(1, 64, 56, 56, 64, 1, 1, 1, 0), conv2d(1, 128, 28, 28, 128, 1, 1, 1, 0)
    theirs = Choices(tmp_path / "08.csv", arch="sm_90a")
    for w in (wl, other):
        theirs.remember(w, Choice("nchw_splitk", {"split": 2}, 2.0), "NVIDIA H200")
    theirs.write(tmp_path / "08.csv")
    mine = Choices(tmp_path / "10.csv", arch="sm_90a", also=[tmp_path / "08.csv"])
    assert mine.recorded(wl).kernel == "nchw_splitk" and not mine.rows
    mine.remember(wl, mine.recorded(wl), "NVIDIA H200")
    mine.write(tmp_path / "10.csv")
    assert [r["shape"] for r in csv.DictReader(open(tmp_path / "10.csv"))] == [wl.shape]


def _trial_none(wl, records):
    return SweepResult(wl, [])


def test_a_layer_without_a_verified_kernel_is_none_where_missing_is_allowed(monkeypatch, capsys):
    monkeypatch.setattr(choose_module, "sweep_all", lambda jobs, **_: [_trial_none(wl, r) for wl, r in jobs])
    wl = conv2d(1, 64, 56, 56, 64, 1, 1, 1, 0)
    assert choose_module.choose_many([wl], target=None, repeats=1, seed=0, missing_ok=True) == [None]
    assert f"the rules found no kernel for conv2d {wl.shape}" in capsys.readouterr().out
    with pytest.raises(choose_module.SweepError):
        choose_module.choose_many([wl], target=None, repeats=1, seed=0)


def test_a_layer_the_rules_refuse_gets_none_and_the_others_are_chosen_together(monkeypatch, capsys):
    a, b = conv2d(1, 64, 56, 56, 64, 1, 1, 1, 0), conv2d(1, 128, 28, 28, 128, 1, 1, 1, 0)

    def forms(wl):
        if wl is b:
            raise ValueError("no depthwise_nchw candidate takes it")
        return []

    calls = []
    monkeypatch.setattr(runner, "rule_forms", forms)
    monkeypatch.setattr(runner, "choose_many",
                        lambda wls, **_: calls.append(wls) or [Choice("x", {}, 1.0) for _ in wls])
    out = runner.choose_each([a, b], target=None, repeats=1, seed=0)
    assert calls == [[a]] and out[0].kernel == "x" and out[1] is None
    assert f"conv2d {b.shape} (float32): no depthwise_nchw candidate takes it" in capsys.readouterr().out


# -- networks.csv, the README section, the index entry ------------------------------------------------------------

def conv(run_id, layer, batch, dtype, variant, ms, provider="tvm", **kw):
    return row(run_id, TS, notebook="10_networks", workload="conv2d", shape=layer_shape(layer, batch), dtype=dtype,
               variant=variant, provider=provider, median_ms=ms, **kw)


def run_rows():
    """One run, fp32 at batch 1: ResNet-50's stem (TVM 0.02, cuDNN 0.03) and s1 3x3 (0.01 x 3; cuDNN 0.02 x 3: its
    unverified 0.001 left out) and MobileNetV2's depthwise layer, whose unverified rules row gives it no time."""
    return [conv("r1", STEM, 1, "float32", "rules", 0.02), conv("r1", STEM, 1, "float32", "cudnn_nchw", 0.05, "cudnn"),
            conv("r1", STEM, 1, "float32", "cudnn_nhwc", 0.03, "cudnn"),
            conv("r1", S1, 1, "float32", "rules", 0.01),
            conv("r1", S1, 1, "float32", "cudnn_nchw", 0.001, "cudnn", verified=False),
            conv("r1", S1, 1, "float32", "cudnn_nhwc", 0.02, "cudnn"),
            conv("r1", DW, 1, "float32", "rules", 0.001, verified=False),
            conv("r1", DW, 1, "float32", "cudnn_nchw", 0.004, "cudnn")]


def test_networks_csv_comes_from_the_runs_verified_rows_with_its_worst_layer():
    out = network_summary(pd.DataFrame(run_rows()), {"resnet50": [STEM, S1], "mobilenet_v2": [DW]},
                          {"fp32": 1, "fp16": 32})
    assert out == [{"run_id": "r1", "gpu": "NVIDIA H200", "network": "resnet50", "config": "fp32", "layers": 2,
                    "convolutions": 4, "tvm_ms": 0.05, "cudnn_ms": 0.09, "worst_layer": STEM.name,
                    "worst_ratio": 1.5}]   # stem 0.03 / 0.02 = 1.5 < s1 0.02 / 0.01 = 2
    ptx = pd.DataFrame([dict(r, arch="sm_80" if r["provider"] == "tvm" else "sm_90a") for r in run_rows()])
    assert network_summary(ptx, {"resnet50": [STEM, S1]}, {"fp32": 1}) == []   # PTX code: not against cuDNN


def test_each_network_and_config_shows_its_latest_row():
    base = dict(gpu="NVIDIA H200", layers=2, convolutions=4, tvm_ms=0.05, cudnn_ms=0.09, worst_layer="x",
                worst_ratio=1.5)
    df = pd.DataFrame([dict(base, run_id=r, network=n, config=c, tvm_ms=t) for r, n, c, t in (
        ("20261129T000000Z-aaaaaa", "resnet50", "fp32", 0.05), ("20261129T000000Z-aaaaaa", "mobilenet_v2", "fp32", 1.0),
        ("20261130T000000Z-bbbbbb", "resnet50", "fp32", 0.045))])
    latest = recorded_networks(df)
    assert list(zip(latest["network"], latest["tvm_ms"])) == [("resnet50", 0.045), ("mobilenet_v2", 1.0)]
    assert latest["cuDNN / TVM"].iloc[0] == pytest.approx(2.0)


def test_the_readme_section_and_index_entry_read_networks_csv(tmp_path):
    assert published.networks_table(tmp_path) == "not run on a GPU yet"
    assert "no GPU results recorded yet" in published.networks_html(tmp_path)
    folder = tmp_path / "results" / "10_networks"
    append_rows(folder / "results.csv", [r for r in run_rows() if r["verified"]])
    summary = network_summary(pd.DataFrame(run_rows()), {"resnet50": RESNET50}, {"fp32": 1})
    append_csv(folder / "networks.csv", summary, NETWORKS_COLUMNS, lambda r: None)
    table = published.networks_table(tmp_path)
    assert (f"| resnet50 | fp32 batch 1 | 2 of 23 | 4 | 0.050 | 0.090 | 1.800x | {STEM.name} (1.50x) | r1 |"
            in table)
    assert "From `results/10_networks/results.csv`, run r1: NVIDIA H200, driver 580, 2026-11-29;" in table
    assert f"<td>{html.escape(STEM.name)} (1.50x)</td>" in published.networks_html(tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "10_networks.ipynb").write_text("{}")
    assert published.networks_html(tmp_path) in index_html(tmp_path / "out", tmp_path)
    assert overview.summary(overview.load_results(tmp_path)).empty   # its ~300 shapes stay out of 00's table


def test_depthwise_layers_are_judged_against_hbm_bandwidth():
    rows = [conv("r1", DW, 32, "float16", "rules", 0.1, gbps=2400.0),
            conv("r1", DW, 32, "float16", "cudnn_nchw", 0.2, "cudnn", gbps=1200.0),
            conv("r1", DW, 32, "float16", "cudnn_nhwc", 0.15, "cudnn", gbps=1600.0),
            conv("r1", STEM, 32, "float16", "rules", 0.1)]
    bw = depthwise_bandwidth(pd.DataFrame(rows), "fp16", MOBILENET_V2, 32, 4.8)
    assert bw.to_dict("records") == [{"layer": DW.name, "count": DW.count, "tvm_ms": 0.1, "tvm_gbps": 2400.0,
                                      "tvm_hbm": 0.5, "cudnn_ms": 0.15, "cudnn_gbps": 1600.0,
                                      "cudnn_hbm": pytest.approx(1 / 3)}]
    assert depthwise_bandwidth(pd.DataFrame(rows), "fp16", RESNET50, 32, 4.8).empty


# -- the choosing command -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["choose", "resnet18"], "networks: argument NETWORK: unknown network 'resnet18': expected one of resnet50, "),
    (["choose", "resnet50", "--config", "fp64"], "networks: argument --config: unknown config 'fp64': expected one "
                                                 "of fp32, fp16, int8"),
    (["choose"], "networks: the following arguments are required: NETWORK"),
    (["tune", "resnet50"], "networks: argument command: invalid choice: 'tune'"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        runner.main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(message) and err.count("\n") == 1


@pytest.mark.skipif(runner.has_cuda_gpu(), reason="checks the no-GPU behaviour")
def test_choosing_without_a_gpu_is_one_line(capsys):
    assert runner.main(["choose", "convnext_tiny", "--config", "fp32"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


class Clock:
    """A clock each chosen layer advances by ``per_layer`` seconds; a layer of ``missing`` (shapes) gets no kernel."""

    def __init__(self, per_layer: float, missing: tuple[str, ...] = ()):
        self.now, self.per_layer, self.missing = 0.0, per_layer, missing

    def __call__(self) -> float:
        return self.now

    def choose(self, wls):
        self.now += self.per_layer * len(wls)
        return [None if getattr(wl, "shape", None) in self.missing else Choice("nchw_gemm", {"n": i}, 1.0)
                for i, wl in enumerate(wls)]


def test_choosing_stops_before_the_time_limit_and_the_same_command_goes_on(tmp_path, capsys):
    """ConvNeXt-T's 8 fp32 layers at 10 s a layer: 30 s left (after the margin) fit a first chunk of 5 at the prior
    4 s x 1.5 a layer, then nothing more; the second run chooses the 3 left (one gets no kernel) and the 8 of int8."""
    clock = Clock(10.0)
    run = dict(root=tmp_path, arch="sm_90a", gpu="NVIDIA H200", deadline=runner.MARGIN_S + 30)
    assert runner.run_choose(["convnext_tiny"], ["fp32", "int8"], choose=clock.choose, clock=clock, **run) == 3
    out = capsys.readouterr().out
    assert "fp32: 5 layers chosen in 50 s (10.0 s a layer); 3 left" in out
    assert "fp32 has 3 layers left; not started: int8; the same command goes on from there" in out
    path = tmp_path / runner.CHOICES
    first = [r["shape"] for r in csv.DictReader(open(path))]
    assert first == sorted(layer_shape(layer, 1) for layer in CONVNEXT_TINY[:5])
    last = layer_shape(CONVNEXT_TINY[-1], 1)
    clock = Clock(1.0, missing=(last,))   # the next call, with its own clock
    assert runner.run_choose(["convnext_tiny"], ["fp32", "int8"], choose=clock.choose, clock=clock, **run) == 1
    rows = list(csv.DictReader(open(path)))
    fp32 = {r["shape"] for r in rows if r["dtype"] == "float32"}
    assert fp32 == {layer_shape(layer, 1) for layer in CONVNEXT_TINY} - {last}
    assert len([r for r in rows if r["dtype"] == "int8"]) == 8
    assert "1 layers got no verified kernel" in capsys.readouterr().out
    recorded, choices = layer_workload(CONVNEXT_TINY[0], "fp32", 1), runner.choices_for(tmp_path, "sm_90a")
    assert runner.pending([layer_workload(CONVNEXT_TINY[-1], "fp32", 1), recorded], choices)[0].shape == last
    assert runner.pending([recorded], choices, stale=True) == [recorded]   # chosen among no families: stale


def test_a_chunk_is_sized_by_the_last_chunks_seconds_a_layer():
    clock, sizes = Clock(2.0), []
    left = runner.choose_in_chunks(list(range(40)), choose=clock.choose,
                                   save=lambda chunk, _: sizes.append(len(chunk)), seconds_left=lambda: 200 - clock(),
                                   prior=20.0, label="fp16", clock=clock)
    # 200 / 30 -> 6 layers (12 s); then 188 / 3 -> 24 at most; then 140 / 3 -> 10 (the last 10)
    assert sizes == [6, 24, 10] and left == []


# -- the notebook ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, message", [
    ("networks", ["resnet18"], "networks: unknown 'resnet18': expected one of resnet50, mobilenet_v2, "),
    ("configs", ["fp64"], "configs: unknown 'fp64': expected one of fp32, fp16, int8"),
    ("networks", [], "networks must name at least one of resnet50,"),
    ("choose_now", "yes", "choose_now must be True or False, got 'yes'"),
])
def test_the_notebooks_parameters_are_refused_in_one_line(name, value, message):
    cells = [c for c in nbformat.read(ROOT / "notebooks" / "10_networks.ipynb", as_version=4).cells
             if c.cell_type == "code"]
    space: dict = {}
    exec(cells[0].source, space)
    assert set(space["networks"]) == set(NETWORKS)
    space[name] = value
    with pytest.raises(ParameterError) as err:
        exec(cells[1].source, space)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_notebooks_gpu_path_with_stand_ins_for_the_gpu(tmp_path, monkeypatch, capsys):
    """The cells a CPU run skips, run with the GPU stood in for (invented times, as make run-all stages them): every
    ConvNeXt-T layer with a recorded choice is measured beside cuDNN, the others are named with the command that
    records them; networks.csv, choices.csv, the rows and the figure are staged."""
    from tirbench.bench import session as session_module

    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setenv("TIRBENCH_ROOT", str(tmp_path))
    monkeypatch.setenv("TIRBENCH_STAGE_DIR", str(tmp_path / "stage"))
    monkeypatch.setattr(session_module, "has_cuda_gpu", lambda: True)
    device = SimpleNamespace(gpu="NVIDIA H200", driver="580", tvm_version="0.27", compute_capability="9.0",
                             describe=lambda: "NVIDIA H200")
    monkeypatch.setattr(session_module, "DeviceInfo", SimpleNamespace(detect=lambda: device))

    def timed(wl, ms, variant, provider="tvm"):
        return Measurement(wl, variant, provider, Timing(ms, ms, ms, 5), verified=True)

    def replay(wls, choices, *, now, target, repeats, seed):   # the last layer has no recorded choice
        return [None if i == len(wls) - 1 else Choice("nchw_gemm", {}, 2.0, timed(wl, 0.01 * (i + 1), "nchw_gemm"),
                                                      replayed=True) for i, wl in enumerate(wls)]

    cells = [c.source for c in nbformat.read(ROOT / "notebooks" / "10_networks.ipynb", as_version=4).cells
             if c.cell_type == "code"]
    space: dict = {"display": print}
    exec(cells[0], space)
    space["networks"] = ["convnext_tiny"]
    exec(cells[1], space)
    space.update(start_build_workers=lambda target: 0.0, replay_or_choose=replay,
                 CudnnBest=lambda record, **kw: runner.CudnnBest(record, measure=lambda wl, channels_last, **_: timed(
                     wl, 0.02 - 0.005 * channels_last, f"cudnn_{channels_last}", "cudnn"), **kw))
    for source in cells[2:]:
        exec(source, space)
    out = capsys.readouterr().out
    assert "convnext_tiny: 24 layers verified and timed beside cuDNN" in out and "left for the next run" not in out
    assert "`python -m tirbench.bench.networks choose convnext_tiny --config fp16` records them" in out
    stage = tmp_path / "stage" / "10_networks"
    summary = pd.read_csv(stage / "networks.csv")
    assert list(summary["config"]) == ["fp32", "fp16", "int8"] and list(summary["layers"]) == [7, 7, 7]
    assert (stage / "networks_ratios.png").exists() and len(pd.read_csv(stage / "choices.csv")) == 7 + 7 + 7
    rows = pd.read_csv(stage / "results.csv")
    assert rows["verified"].all() and (rows["variant"] == "rules").sum() == 21


# -- nvcc before a GPU session --------------------------------------------------------------------------------------

#: ConvNeXt's 4x4/4 stem in fp16: its im2col fill was once CUDA that nvcc rejects.
CONVNEXT_STEM = layer_workload(CONVNEXT_TINY[0], "fp16", 32)


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_check_gives_every_pending_candidate_to_nvcc_and_names_the_rejected(monkeypatch, capsys):
    """The stem's candidates (a process each) pass nvcc; a kernel whose CUDA nvcc rejects is one line, status 1."""
    monkeypatch.setattr(runner, "_pending_by_shape", lambda names, config, arch: {CONVNEXT_STEM.shape: CONVNEXT_STEM})
    candidates = sum(len(r.candidates) for r in rule_records(CONVNEXT_STEM))
    assert runner.check_builds(["convnext_tiny"], ["fp16"], "sm_90a") == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"0 of {candidates} rejected"
    monkeypatch.setattr(runner, "device_source", lambda sch, pass_config: 'extern "C" __global__ void k() { x; }')
    assert runner.check_builds(["convnext_tiny"], ["fp16"], "sm_90a") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"{candidates} of {candidates} rejected"
    assert out[1].startswith(f"fp16 {CONVNEXT_STEM.shape} nhwc_wgmma(block_tile=(256, 128), stages=3, overlap=True): "
                             "RuntimeError: nvcc rejected the generated source: ") and '"x" is undefined' in out[1]


# -- whole networks within a time budget ----------------------------------------------------------------------------

def test_stalest_first_puts_a_network_without_a_row_for_some_config_first_then_the_oldest():
    rows = pd.DataFrame([{"network": n, "config": c, "run_id": r} for n, c, r in [
        ("a", "fp32", "20261128T1"), ("a", "fp16", "20261128T1"), ("b", "fp32", "20261127T1"),
        ("b", "fp16", "20261128T2"), ("c", "fp32", "20261128T3")]])
    assert networks_measure.stalest_first(["a", "b", "c", "d"], rows) == ["c", "d", "b", "a"]
    assert networks_measure.stalest_first(["a", "b"], pd.DataFrame(columns=["network", "config", "run_id"])) == \
        ["a", "b"]


def fake_plans() -> dict[str, runner.Plan]:
    """Two configs; networks a (layers 1, 2), b (2, 3, 4: layer 2 shared with a) and c (5)."""
    def planned(shape, *names):
        return runner.Planned(SimpleNamespace(shape=shape), [(name, SimpleNamespace(name=shape)) for name in names])
    return {config: runner.Plan(config, 1, [planned("1", "a"), planned("2", "a", "b"), planned("3", "b"),
                                            planned("4", "b"), planned("5", "c")], []) for config in ("fp32", "fp16")}


@pytest.mark.parametrize("max_seconds, measured, left", [(None, ["a", "b", "c"], []), (7, ["a", "c"], ["b"]),
                                                         (1, ["a"], ["b", "c"])])
def test_whole_networks_are_measured_while_they_fit_and_a_shared_layer_once(monkeypatch, max_seconds, measured,
                                                                            left):
    """Each layer takes 1 s: a's 4 layer-configs take 4 s, so b (2 x 2 more: layer 2 is done) is estimated at 4 s
    and c at 2 s; the first network is measured whatever the budget; layer 4 has no recorded choice."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(networks_measure, "measure_layer", lambda session, cudnn, choices, layer, config, batch, wl,
                        choice, echo: {"run": config, "layer": layer.name})

    def replay(wls):
        clock.now += len(wls)
        return [None if wl.shape == "4" else Choice("nchw_gemm", {}, 1.0) for wl in wls]
    session = SimpleNamespace(commits=0)
    session.commit = lambda: setattr(session, "commits", session.commits + 1)
    run = networks_measure.measure_networks(["a", "b", "c"], fake_plans(), session=session, cudnn=None, choices=None,
                                            replay=replay, max_seconds=max_seconds, clock=lambda: clock.now)
    assert run.measured == measured and run.left == left and session.commits == len(measured)
    layers = {"a": ["1", "2"], "b": ["3"], "c": ["5"]}
    assert sorted((r["run"], r["layer"]) for r in run.rows) == sorted(
        (config, shape) for name in measured for shape in layers[name] for config in ("fp32", "fp16"))
    assert run.unrecorded == ({"fp32": {"b"}, "fp16": {"b"}} if "b" in measured else {})

"""Whole models through Relax (notebook 09, ``tirbench.compile.models``, ``model_builds``, ``model_results``,
``tuning.relax_model``), the parts that need neither torch nor a GPU: the tolerances, the check, the rows a run
records, the recorded rows a machine without a GPU shows (the notebook's, else the tool's), the time split's
accounting, the dispatch summary, and where whole-model databases live (archived, left out of the curves; trimming
and replaying them: ``test_tuning_archive``)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tirbench.bench.harness import Timing
from tirbench.bench.params import narrowing
from tirbench.bench.results import COLUMNS, append_csv, append_rows, require_columns, validate_row
from tirbench.compile import model_results as mr
from tirbench.compile.dispatch import LayerNote
from tirbench.compile.model_builds import Compiled, CompileJob, dispatch_lines, is_conv_kernel, split_ms
from tirbench.compile.models import CONFIGS, FP16_RTOL, RTOL, TVM_VARIANTS, VariantResult, check, rel_diff, tolerance
from tirbench.report.overview import tuning_databases
from tirbench.tuning.archive import database_dirs
from tirbench.tuning.history import trials_done
from tirbench.tuning.relax_model import metaschedule_variant, tune_command, work_dir_for

FP32, FP16 = CONFIGS["fp32"], CONFIGS["fp16"]
TIMING = Timing(1.5, 1.4, 1.6, 50)
RUN = dict(run_id="20261201T000000Z-abcdef", timestamp="2026-12-01T00:00:00+00:00", gpu="NVIDIA H200", driver="580",
           tvm_version="0.27.0.post1")


def test_tolerances_are_the_derived_ones_per_dtype():
    assert tolerance("float32") == FP32.tolerance == RTOL == 1e-3
    assert tolerance("float16") == FP16.tolerance == FP16_RTOL == pytest.approx(0.0732, abs=1e-4)
    with pytest.raises(ValueError, match="int8"):
        tolerance("int8")
    assert (FP32.batch, FP32.layout, FP16.batch, FP16.layout) == (1, "NCHW", 32, "NHWC")


def test_check_passes_within_the_tolerance_and_says_why_not():
    ref = np.array([1.0, -2.0, 4.0])
    ok = check("m", FP16, "tvm_rules", "tvm", "NHWC", lambda: ref + 0.2, ref)
    assert ok.verified and ok.max_rel_diff == pytest.approx(0.05) and ok.error == ""
    far = check("m", FP16, "tvm_default", "tvm", "NHWC", lambda: ref + 0.4, ref)
    assert not far.verified and far.max_rel_diff == pytest.approx(rel_diff(ref + 0.4, ref)) == pytest.approx(0.1)

    def fails():
        raise RuntimeError("Traceback...\n  deep frames\nCUDA error: an illegal memory access")

    broken = check("m", FP32, "torch_compile", "torch", "NCHW", fails, ref)
    assert not broken.verified and broken.error == "CUDA error: an illegal memory access"
    assert math.isnan(broken.max_rel_diff)


def result(variant="tvm_rules", provider="tvm", config=FP16, timing=TIMING, **kw) -> VariantResult:
    return VariantResult("resnet50", config, variant, provider, config.layout, 0.03, timing is not None, timing,
                         **kw)


def test_a_verified_variant_is_a_results_row_with_the_models_rates():
    wl = mr.model_workload("resnet50", FP16, flops=4_000_000_000 * 32 * 2, params=25_000_000,
                           out_elements=32 * 1000)
    assert (wl.name, wl.shape, wl.dtype) == ("resnet50", "32", "float16")
    assert wl.bytes == 25_000_000 * 2 + 4 * (32 * 3 * 224 * 224 + 32 * 1000)
    m = mr.measurement(result(), wl)
    assert m.gflops == pytest.approx(wl.flops / 1.5e-3 / 1e9) and m.verified and m.tuned_best == ""
    assert mr.measurement(result("metaschedule", "metaschedule"), wl).tuned_best == "search"
    with pytest.raises(ValueError, match="no row"):
        mr.measurement(result(timing=None), wl)
    row = {**RUN, "notebook": mr.NOTEBOOK, "workload": wl.name, "shape": wl.shape, "dtype": wl.dtype,
           "variant": m.variant, "provider": m.provider, "trials": 0, "median_ms": 1.5, "p20_ms": 1.4, "p80_ms": 1.6,
           "gflops": m.gflops, "gbps": m.gbps, "verified": True, "repeats": 50, "compute_capability": "9.0",
           "tuned_best": m.tuned_best, "arch": "sm_90a"}
    validate_row(row)


def test_checks_splits_and_the_tools_rows_hold_their_columns(tmp_path):
    split = {"conv_ms": 1.0, "other_ms": 0.3, "kernels": 80}
    checked = [result(split=split, convs_dispatched=53, convs=53, transposes=2),
               result("tvm_default", timing=None, error="")]
    rows = [{**RUN, **mr.check_row(r)} for r in checked]
    assert append_csv(tmp_path / mr.CHECKS, rows, mr.CHECK_COLUMNS, require_columns(mr.CHECK_COLUMNS)) == 2
    splits = [row for r in checked if (row := mr.split_row(r))]
    assert splits == [{"model": "resnet50", "batch": 32, "dtype": "float16", "variant": "tvm_rules",
                       "provider": "tvm", **split, "model_ms": 1.5}]
    tool = mr.tool_row(checked[1], {k: RUN[k] for k in ("run_id", "timestamp", "gpu", "tvm_version")}
                       | {"torch_version": "2.11", "flush": "l2"})
    assert set(tool) == set(mr.TOOL_COLUMNS) and math.isnan(tool["median_ms"]) and tool["verified"] is False
    with pytest.raises(ValueError, match="lacks columns: run_id"):
        require_columns(mr.CHECK_COLUMNS)(mr.check_row(checked[0]))


def tool_rows(run_id: str, timestamp: str, model: str, dtype: str, batch: int, variants: list) -> list[dict]:
    """The tool's rows of one run: (variant, layout, ms, verified) each."""
    return [dict(run_id=run_id, timestamp=timestamp, gpu="NVIDIA H200", tvm_version="0.27", torch_version="2.11",
                 model=model, batch=batch, dtype=dtype, layout=layout, flush="l2", variant=variant, median_ms=ms,
                 max_rel_diff=0.1 if not ok else 0.01, verified=ok, convs_dispatched=0, convs=0, transposes=2)
            for variant, layout, ms, ok in variants]


def write_tool_csv(root):
    """An older fp16 ResNet-50 run, the latest one (its NCHW TVM rows not the notebook's fp16 layout), a
    MobileNetV2 fp16 run of its own, and an fp32 run."""
    rows = (tool_rows("r0", "2026-11-26T00:00:00+00:00", "resnet50", "float16", 32, [("tvm_rules", "NHWC", 9.9, True)])
            + tool_rows("r1", "2026-11-27T00:00:00+00:00", "resnet50", "float16", 32,
                        [("torch_eager", "NCHW", 5.8, True), ("tvm_default", "NHWC", float("nan"), False),
                         ("tvm_rules", "NHWC", 1.8, True), ("tvm_rules", "NCHW", 2.5, True)])
            + tool_rows("r2", "2026-11-27T01:00:00+00:00", "mobilenet_v2", "float16", 32,
                        [("tvm_rules", "NHWC", 1.7, True)])
            + tool_rows("r3", "2026-11-27T02:00:00+00:00", "resnet50", "float32", 1, [("tvm_rules", "NCHW", 1.2, True)]))
    path = root / mr.TOOL_CSV
    path.parent.mkdir(parents=True)
    append_csv(path, rows, mr.TOOL_COLUMNS, require_columns(mr.TOOL_COLUMNS))


def test_without_the_notebooks_rows_the_tools_latest_run_per_model_and_dtype_is_shown(tmp_path):
    write_tool_csv(tmp_path)
    rec = mr.recorded(tmp_path)
    assert set(rec.rows.columns) == set(COLUMNS) and (rec.rows["notebook"] == mr.NOTEBOOK).all()
    got = {(r.workload, r.dtype, r.variant): r.median_ms for r in rec.rows.itertuples()}
    assert got == {("resnet50", "float16", "torch_eager"): 5.8, ("resnet50", "float16", "tvm_rules"): 1.8,
                   ("mobilenet_v2", "float16", "tvm_rules"): 1.7, ("resnet50", "float32", "tvm_rules"): 1.2}
    failed = rec.checks[~rec.checks["verified"].astype(bool)]
    assert list(failed["variant"]) == ["tvm_default"] and failed["tolerance"].iloc[0] == FP16_RTOL
    assert rec.splits.empty
    label = rec.label("float16")
    assert label.startswith("recorded runs of tools/gpu-checks/relax_models.py (results/kernel/relax_models_v2.csv)")
    assert "run r1 (NVIDIA H200, 2026-11-27)" in label and "r3" not in label and "r0" not in label
    table = mr.times_table(rec.rows).set_index(["model", "dtype"])
    assert table.loc[("resnet50", "float16"), "torch / rules"] == pytest.approx(5.8 / 1.8)
    assert mr.plot_config(rec.rows, rec.checks, "float16", label).axes[0].get_title() == "resnet50, float16, batch 32"


def test_the_notebooks_own_rows_come_first_with_their_checks_and_splits(tmp_path):
    write_tool_csv(tmp_path)
    folder = tmp_path / "results" / mr.NOTEBOOK
    append_rows(folder / "results.csv", [{**RUN, "notebook": mr.NOTEBOOK, "workload": "resnet50", "shape": "1",
                                          "dtype": "float32", "variant": "tvm_rules", "provider": "tvm", "trials": 0,
                                          "median_ms": 1.1, "p20_ms": 1.0, "p80_ms": 1.2, "gflops": 1.0, "gbps": 1.0,
                                          "verified": True, "repeats": 50, "compute_capability": "9.0"}])
    done = result(config=FP32, split={"conv_ms": 0.8, "other_ms": 0.2, "kernels": 70})
    append_csv(folder / mr.CHECKS, [{**RUN, **mr.check_row(done)}], mr.CHECK_COLUMNS,
               require_columns(mr.CHECK_COLUMNS))
    append_csv(folder / mr.SPLITS, [{**RUN, **mr.split_row(done)}], mr.SPLIT_COLUMNS,
               require_columns(mr.SPLIT_COLUMNS))
    rec = mr.recorded(tmp_path)
    assert list(rec.rows["median_ms"]) == [1.1] and len(rec.checks) == len(rec.splits) == 1
    assert rec.label().startswith(f"recorded run of results/{mr.NOTEBOOK}/results.csv: float32 run {RUN['run_id']}")
    table = mr.split_table(rec.splits)
    assert table["conv share %"].iloc[0] == 80.0 and table["kernels / call"].iloc[0] == round(1.0 / table["model_ms"].iloc[0], 2)


def test_this_runs_results_are_shown_as_measured():
    shown = mr.from_results([result(), result("tvm_default", timing=None)], RUN, "this session")
    assert list(shown.rows["variant"]) == ["tvm_rules"] and len(shown.checks) == 2
    assert shown.label().startswith("measured in this run (this session): float16 run")


def test_the_split_counts_the_rules_kernels_and_every_conv2d_as_conv():
    rules = frozenset({"nhwc_gemm_32x64x56x56x64x3x3x1x1_bias_relu"})
    assert is_conv_kernel("nhwc_gemm_32x64x56x56x64x3x3x1x1_bias_relu", rules)
    assert is_conv_kernel("fused_conv2d_add_relu", frozenset()) and not is_conv_kernel("fused_matmul_add", rules)
    split = split_ms([("nhwc_gemm_32x64x56x56x64x3x3x1x1_bias_relu", 0.5), ("fused_conv2d1_add", 0.25),
                      ("transpose", 0.125), ("mean", 0.125)], rules)
    assert split == {"conv_ms": 0.75, "other_ms": 0.25, "kernels": 4}


def test_the_dispatch_summary_names_families_fused_epilogues_and_what_was_left(tmp_path):
    job = CompileJob("resnet50", FP16, TVM_VARIANTS[1], None, str(tmp_path))
    notes = (LayerNote("conv2d a", "nhwc_gemm{'block': 1} (recorded)", epilogue="bias_relu", transposes=0),
             LayerNote("conv2d b", "nhwc_mma{'warp': 2} (rules)", epilogue="bias_residual_relu",
                       apart="the layer writes float32, its kernel float16"),
             LayerNote("conv2d c", reason="no family takes it"))
    lines = dispatch_lines("resnet50 fp16", Compiled(job, "lib.so", notes=notes, transposes=2))
    assert lines[0] == "resnet50 fp16: 2 of 3 convs dispatched to the rules' kernels: {'nhwc_gemm': 1, 'nhwc_mma': 1}"
    assert lines[1] == "resnet50 fp16: 1 of them with their epilogue fused: {'bias_relu': 1}"
    assert lines[2:4] == ["  bias_residual_relu left to FuseOps: the layer writes float32, its kernel float16",
                          "  left for DLight: no family takes it"]
    assert lines[-1].endswith("2 relax.permute_dims in the model (weights' folded away)")


def test_whole_model_databases_have_their_own_folder_archived_and_left_out_of_the_curves(tmp_path):
    work_dir = work_dir_for(tmp_path, "mobilenet_v2", FP16)
    assert work_dir == tmp_path / "results" / "tuning" / "relax" / "mobilenet_v2_float16_b32"
    assert trials_done(work_dir) == 0 and metaschedule_variant(tmp_path, "mobilenet_v2", FP16) is None
    work_dir.mkdir(parents=True)
    (work_dir / "database_tuning_record.json").write_text('[0, [[], [0.001], {"kind": "cuda"}, []]]\n')
    variant = metaschedule_variant(tmp_path, "mobilenet_v2", FP16)
    assert (variant.name, variant.provider, variant.rules) == ("metaschedule", "metaschedule", False)
    assert database_dirs(tmp_path / "results" / "tuning") == [work_dir]
    assert tuning_databases(tmp_path) == ([], [])
    assert tune_command("resnet50", FP32, 500) == "python -m tirbench.tuning.relax_model resnet50 --config fp32 --trials 500"


def test_the_tuning_budget_does_not_narrow_a_run():
    defaults = {"quick": "False", "configs": '["fp32", "fp16"]', "trials": "2000", "tune_now": "False"}
    assert narrowing(defaults, {"trials": 100, "tune_now": True}) == {}
    assert narrowing(defaults, {"configs": ["fp16"]}) == {"configs": (["fp16"], ["fp32", "fp16"])}


def test_the_readme_table_shows_each_variant_the_speedups_and_why_a_variant_has_no_time(tmp_path):
    from tirbench.report.readme import relax_models_table

    assert relax_models_table(tmp_path) == "not run on a GPU yet"
    folder = tmp_path / "results" / mr.NOTEBOOK
    run = {**RUN, "notebook": mr.NOTEBOOK, "workload": "resnet50", "shape": "32", "dtype": "float16", "provider": "tvm",
           "trials": 0, "p20_ms": 1.0, "p80_ms": 1.2, "gflops": 1.0, "gbps": 1.0, "verified": True, "repeats": 50,
           "compute_capability": "9.0", "arch": "sm_90a"}
    append_rows(folder / "results.csv", [{**run, "variant": v, "median_ms": ms} for v, ms in
                                         (("tvm_rules", 2.0), ("torch_eager", 8.0), ("torch_eager_channels_last", 5.0),
                                          ("torch_compile", 3.0))])
    failed = [VariantResult("resnet50", FP16, "tvm_default", "tvm", "NHWC", 0.113),
              VariantResult("resnet50", FP16, "metaschedule", "metaschedule", "NHWC", error="compile: out of memory")]
    append_csv(folder / mr.CHECKS, [{**RUN, **mr.check_row(r)} for r in (result(), *failed)], mr.CHECK_COLUMNS,
               require_columns(mr.CHECK_COLUMNS))
    table = relax_models_table(tmp_path)
    assert "| resnet50 | float16 | 32 | 2.000 | 8.000 | 5.000 | 3.000 | 2.50x | 1.50x |" in table
    assert "resnet50 float16 tvm_default: no time, its check failed (max |difference| / max |reference| 0.113 > " \
           f"{FP16_RTOL:.3g})" in table
    assert "resnet50 float16 metaschedule: no time, compile: out of memory" in table
    assert f"run {RUN['run_id']}: NVIDIA H200, driver 580, 2026-12-01" in table


def test_the_time_split_queues_each_call_behind_a_sleep_and_doubles_it_when_the_host_was_late(monkeypatch):
    import sys
    import types

    from tirbench.compile import model_builds

    log, late = [], iter([True, False])   # the first call's first kernel ran before the host had queued the call

    class Event:
        def __init__(self, enable_timing):
            self.t = None

        def record(self):
            self.t = len(log)
            log.append("event")

        def query(self):
            return next(late, False)

        def elapsed_time(self, end):
            return float(end.t - self.t)

    cuda = types.SimpleNamespace(Event=Event, _sleep=lambda cycles: log.append(("sleep", cycles)),
                                 synchronize=lambda: None)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    class Vm:
        instrument = None

        def set_instrument(self, fn):
            self.instrument = fn

        def __getitem__(self, name):
            def main(x):
                for symbol in ("vm.builtin.alloc", "fused_conv2d_rules", "fused_add"):
                    self.instrument(None, symbol, True, None)
                    log.append(symbol)
                    self.instrument(None, symbol, False, None)
            return main

    vm = Vm()
    split = model_builds.kernel_split(vm, None, frozenset({"fused_conv2d_rules"}), runs=2)
    sleeps = [entry[1] for entry in log if isinstance(entry, tuple)]
    assert sleeps == [model_builds.SLEEP_CYCLES, 2 * model_builds.SLEEP_CYCLES, 2 * model_builds.SLEEP_CYCLES,
                      2 * model_builds.SLEEP_CYCLES]   # the late call measured again, then a first call and two runs
    assert split == {"conv_ms": 2.0, "other_ms": 2.0, "kernels": 2} and vm.instrument is None

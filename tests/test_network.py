"""Notebook 08's whole-network ResNet-50 numbers (``bench.network``) and the README section generated from them, on
a small results CSV whose totals are computed by hand."""
import math
from pathlib import Path

import pandas as pd
import pytest
from test_results import row

from tirbench.bench.network import layer_shape, metaschedule_per_layer, network_totals, per_layer, recorded_batch
from tirbench.bench.results import append_rows, read_results
from tirbench.report import readme as report
from tirbench.report.published import EVALUATOR, TIMING_NOTES
from tirbench.workloads import conv2d, conv2d_int8
from tirbench.workloads.resnet50 import RESNET50

STEM, S1 = RESNET50[0], RESNET50[2]   # counts 1 and 3
OLD, NEW, INT8 = "2026-11-20T00:00:00+00:00", "2026-11-21T00:00:00+00:00", "2026-11-22T00:00:00+00:00"


def conv(run_id, timestamp, layer, batch, dtype, variant, ms, provider="tvm", trials=0):
    return row(run_id, timestamp, notebook="08_resnet50", workload="conv2d", shape=layer_shape(layer, batch),
               dtype=dtype, variant=variant, provider=provider, median_ms=ms, trials=trials)


def rows():
    """r1 (older): an fp32 stem to be ignored. r2: fp32 at batch 1 and the MetaSchedule space on the stem; fp32 TVM
    0.02 + 3 x 0.01 = 0.05 ms, cuDNN (faster layout) 0.03 + 3 x 0.02 = 0.09 ms. r3 (newest, int8 only) at batch 32:
    TVM 0.1 + 3 x 0.2 = 0.7 ms, cuDNN fp16 0.14 + 3 x 0.25 = 0.89 ms (its faster fp32 rows are not int8's)."""
    return [
        conv("r1", OLD, STEM, 1, "float32", "rules", 0.5),
        conv("r2", NEW, STEM, 1, "float32", "rules", 0.02),
        conv("r2", NEW, STEM, 1, "float32", "cudnn_nchw", 0.05, "cudnn"),
        conv("r2", NEW, STEM, 1, "float32", "cudnn_nhwc", 0.03, "cudnn"),
        conv("r2", NEW, S1, 1, "float32", "rules", 0.01),
        conv("r2", NEW, S1, 1, "float32", "cudnn_nchw", 0.02, "cudnn"),
        conv("r2", NEW, S1, 1, "float32", "cudnn_nhwc", 0.04, "cudnn"),
        conv("r2", NEW, STEM, 1, "float32", "metaschedule_rules", 0.04, "metaschedule", trials=36),
        conv("r3", INT8, STEM, 32, "int8", "rules", 0.1),
        conv("r3", INT8, STEM, 32, "float16", "cudnn_nhwc", 0.14, "cudnn"),
        conv("r3", INT8, S1, 32, "int8", "rules", 0.2),
        conv("r3", INT8, S1, 32, "float16", "cudnn_nchw", 0.25, "cudnn"),
        conv("r3", INT8, S1, 32, "float32", "cudnn_nchw", 0.001, "cudnn"),
    ]


@pytest.fixture
def root(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    append_rows(tmp_path / "results" / "08_resnet50" / "results.csv", rows())
    return tmp_path


@pytest.fixture
def df(root):
    return read_results(root / "results" / "08_resnet50" / "results.csv")


def test_layer_shape_is_the_workloads_shape():
    assert layer_shape(STEM, 1) == conv2d(*STEM.shape(1), layout="NCHW", dtype="float32").shape
    int8 = conv2d_int8(*S1.shape(32), relu=True, residual=False)
    assert layer_shape(S1, 32) == int8.shape == "32x64x56x56x64x3x3x1x1"


def test_per_layer_takes_each_configs_latest_run_and_cudnns_faster_layout(df):
    fp32 = per_layer(df, "fp32", [STEM, S1], 1)
    assert fp32.to_dict("list") == {"run": ["fp32", "fp32"], "layer": [STEM.name, S1.name], "count": [1, 3],
                                    "tvm_ms": [0.02, 0.01], "cudnn_ms": [0.03, 0.02], "run_id": ["r2", "r2"]}
    int8 = per_layer(df, "int8", [STEM, S1], 32)
    assert list(int8["cudnn_ms"]) == [0.14, 0.25] and set(int8["run_id"]) == {"r3"}   # cuDNN fp16, not fp32
    assert per_layer(df, "fp16", [STEM, S1], 32).empty
    assert math.isnan(per_layer(df.drop(index=[2, 3]), "fp32", [STEM], 1)["cudnn_ms"].iloc[0])


def test_recorded_batch_reads_the_latest_runs_shapes(df):
    assert (recorded_batch(df, "fp32"), recorded_batch(df, "int8"), recorded_batch(df, "fp16")) == (1, 32, None)


def test_network_totals_weigh_each_layer_by_its_count(df):
    table = pd.concat([per_layer(df, config, [STEM, S1], batch) for config, batch in (("fp32", 1), ("int8", 32))],
                      ignore_index=True)
    totals = network_totals(table)
    assert list(totals.index) == ["fp32", "int8"] and list(totals["layers"]) == [2, 2]
    assert list(totals["convolutions"]) == [4, 4] and list(totals["run_id"]) == ["r2", "r3"]
    assert totals["tvm_ms"].tolist() == pytest.approx([0.05, 0.7])
    assert totals["cudnn_ms"].tolist() == pytest.approx([0.09, 0.89])
    assert totals["cuDNN / TVM"].tolist() == pytest.approx([1.8, 0.89 / 0.7])


def test_metaschedule_per_layer_keeps_the_layers_it_has_a_row_for(df):
    ms = metaschedule_per_layer(df, per_layer(df, "fp32", [STEM, S1], 1), [STEM, S1], 1)
    assert ms.to_dict("records") == [{"layer": STEM.name, "count": 1, "trials": 36, "rules_ms": 0.02,
                                      "ms_rules_ms": 0.04, "cudnn_ms": 0.03}]


def test_resnet50_network_section_in_readme(root):
    table = report.network_table(root)
    assert "| fp32 batch 1 | 2 | 4 | 0.050 | 0.090 | 1.800x | r2 |" in table
    assert "| int8 batch 32 (cuDNN fp16) | 2 | 4 | 0.700 | 0.890 | 1.271x | r3 |" in table
    assert "fp16" not in table.replace("cuDNN fp16", "")
    assert ("(1 of 2 layers, 1 convolutions, best of up to 36 trials a layer, run r2): 0.040 ms against the conv "
            "rules' 0.020 ms on the same layers (0.500x the rules' speed)") in table
    assert "From `results/08_resnet50/results.csv`, run r2: NVIDIA H200, driver 580, 2026-11-21;" in table
    assert table.rstrip(".").endswith("run r3: NVIDIA H200, driver 580, 2026-11-22; " + TIMING_NOTES[EVALUATOR])
    readme = root / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\n<!-- resnet50-network:start -->\nold\n"
                      "<!-- resnet50-network:end -->\n")
    assert report.update_readme(readme, root)
    assert "old" not in readme.read_text() and "| fp32 batch 1 | 2 | 4 | 0.050 |" in readme.read_text()
    (root / "empty").mkdir()
    assert report.network_table(root / "empty") == "not run on a GPU yet"


def test_each_config_is_compared_with_the_cudnn_measurement_taken_with_it(df):
    """A run measuring fp16 and int8 records cuDNN fp16 once per config: int8 takes the rows measured after its own
    rules rows, not the faster of the two measurements."""
    both = [conv("r4", "2026-11-23T00:00:00+00:00", STEM, 32, "float16", "rules", 0.09),
            conv("r4", "2026-11-23T00:00:00+00:00", STEM, 32, "float16", "cudnn_nhwc", 0.10, "cudnn"),
            conv("r4", "2026-11-23T00:00:00+00:00", STEM, 32, "int8", "rules", 0.08),
            conv("r4", "2026-11-23T00:00:00+00:00", STEM, 32, "float16", "cudnn_nhwc", 0.12, "cudnn")]
    run = pd.DataFrame(both)
    assert per_layer(run, "fp16", [STEM], 32)["cudnn_ms"].tolist() == [0.10]
    assert per_layer(run, "int8", [STEM], 32)["cudnn_ms"].tolist() == [0.12]


def test_recorded_int8_network_uses_the_int8_configs_own_cudnn_rows():
    """In the recorded run that measured fp16 and int8, cuDNN fp16 per layer is the int8 config's measurement."""
    recorded = read_results(Path(__file__).resolve().parents[1] / "results" / "08_resnet50" / "results.csv")
    run = recorded[recorded["run_id"] == "20261126T112012Z-eb1ee1"].reset_index(drop=True)
    int8 = per_layer(run, "int8", RESNET50, 32).set_index("layer")["cudnn_ms"]
    fp16 = per_layer(run, "fp16", RESNET50, 32).set_index("layer")["cudnn_ms"]
    assert len(int8) == len(fp16) == 23 and (int8 != fp16).any()   # two measurements, each config its own
    after_int8 = run["variant"].eq("rules").cumsum().map(dict(enumerate(run.loc[run["variant"] == "rules", "dtype"], 1)))
    own = run[(run["provider"] == "cudnn") & (after_int8 == "int8")].groupby("shape")["median_ms"].min()
    shapes = {layer.name: layer_shape(layer, 32) for layer in RESNET50}
    assert all(int8[name] == own[shapes[name]] for name in int8.index)

"""What the notebooks' prose may say: no measured number typed into a markdown cell (a run computes and prints it),
the same account of Winograd's filter transform in notebooks 04 and 08, a pointer to the executed copies in every
notebook's first cell; and notebook 08 measures cuDNN fp16 once per run, its int8 run compared with that one
measurement (``bench.network.measured_with``)."""
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
from test_results import row

from tirbench.bench.network import layer_shape, per_layer
from tirbench.bench.networks import CudnnBest
from tirbench.workloads import conv2d
from tirbench.workloads.resnet50 import RESNET50

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

#: A time, a rate or a ratio: "181.8 us", "374 TFLOP/s", "0.96x".
MEASURED = re.compile(r"\d[\d.,]*\s*(?:µs|us|ms|TFLOP/s|TFLOPS|TOPS|GB/s|TB/s)\b|\b\d+(?:\.\d+)?x\b")

#: The numbers markdown may hold, per notebook: none measured by a run of this suite.
ALLOWED = {
    "00_overview": {"4.8 TB/s": "the H200's HBM bandwidth, datasheet"},
    "03_gemm": {"67 TFLOPS": "datasheet peak", "989 TFLOPS": "datasheet peak"},
    "04_conv2d": {
        "1.8 ms": "the direct convolution's floor, from the peak table", "1.77 ms": "the same floor",
        "67 TFLOP/s": "the peak table's FP32 peak", "2.25x": "Winograd's arithmetic", "4x": "Winograd's arithmetic",
        "37.1 ms": "TVM's tutorial, as it printed", "16.3 ms": "TVM's tutorial, as it printed",
        "2.2x": "the error model against numpy (computed on the CPU)", "5x": "the error model's safety argument",
    },
    "07_conv2d_int8": {"1979 TOPS": "datasheet peak"},
}


def markdown(nb: Path) -> list[str]:
    return [c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_markdown_quotes_no_measured_number(nb):
    """A number a run measures is printed by a code cell from the run's rows; prose that types it goes stale."""
    typed = {m.group(0) for text in markdown(nb) for m in MEASURED.finditer(text)}
    allowed = set(ALLOWED.get(nb.stem, {}))
    assert typed <= allowed, f"{nb.name}: typed numbers {sorted(typed - allowed)}"
    assert allowed <= typed, f"{nb.name}: ALLOWED lists numbers its prose no longer has: {sorted(allowed - typed)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_first_cell_points_to_the_executed_copy_and_report(nb):
    first = nbformat.read(nb, as_version=4).cells[0]
    assert first.cell_type == "markdown"
    assert f"`results/executed/{nb.stem}.ipynb`" in first.source and f"`results/reports/{nb.stem}.html`" in first.source


@pytest.mark.parametrize("name", ["04_conv2d", "08_resnet50"])
def test_winograd_filter_transform_is_told_the_same_way(name):
    """Ours: transformed once, ahead of time, untimed; cuDNN's Winograd: inside every call, inside its time."""
    text = " ".join(" ".join(markdown(ROOT / "notebooks" / f"{name}.ipynb")).split())
    assert "U is computed once, ahead of time, when the weights are loaded" in text
    assert "cuDNN's Winograd receives the plain filter and transforms it inside every call" in text
    assert "cuDNN's time includes its filter transform, ours does not" in text
    assert not re.search(r"untimed,? (as|like) cuDNN", text)


def notebook_cell(nb: Path, start: str) -> str:
    (source,) = [c.source for c in nbformat.read(nb, as_version=4).cells if c.source.startswith(start)]
    return source


def test_notebook_08_measures_cudnn_fp16_once_for_its_fp16_and_int8_runs():
    """Its ``CudnnBest`` (``bench.networks``, notebook 10's too), with a stand-in for cuDNN that counts its calls."""
    calls = []

    def timed(wl, channels_last, repeats, seed):
        calls.append((wl.shape, wl.dtype, channels_last))
        return SimpleNamespace(timing=SimpleNamespace(median_ms=1.0 + channels_last), variant=f"cudnn_{channels_last}")

    cell = notebook_cell(ROOT / "notebooks" / "08_resnet50.ipynb", "# cuDNN's faster layout")
    assert "cudnn = CudnnBest(session.record, repeats=repeats, seed=seed)" in cell and "cudnn, choices" in cell
    best, stem = CudnnBest(lambda m: m, repeats=1, seed=0, measure=timed), RESNET50[0]
    assert best(stem, "fp16", 8) is best(stem, "int8", 8) and best(stem, "int8", 8).variant == "cudnn_False"
    best(stem, "fp32", 1)
    assert [(dtype, cl) for _, dtype, cl in calls] == [("float16", False), ("float16", True), ("float32", False),
                                                      ("float32", True)]
    assert calls[0][0] == conv2d(*stem.shape(8), layout="NCHW", dtype="float16").shape


def test_the_int8_run_takes_the_cudnn_measurement_of_the_fp16_run():
    """One run, fp16 then int8, cuDNN fp16 measured once (after fp16's rules row): both configs take it."""
    stem, ts = RESNET50[0], "2026-11-28T00:00:00+00:00"
    shape = layer_shape(stem, 32)
    conv = {"notebook": "08_resnet50", "workload": "conv2d", "shape": shape}
    run = pd.DataFrame([
        row("r5", ts, **conv, dtype="float16", variant="rules", median_ms=0.09),
        row("r5", ts, **conv, dtype="float16", variant="cudnn_nhwc", provider="cudnn",
            median_ms=0.10),
        row("r5", ts, **conv, dtype="float16", variant="cudnn_nchw", provider="cudnn",
            median_ms=0.20),
        row("r5", ts, **conv, dtype="int8", variant="rules", median_ms=0.08)])
    assert per_layer(run, "fp16", [stem], 32)["cudnn_ms"].tolist() == [0.10]
    assert per_layer(run, "int8", [stem], 32)["cudnn_ms"].tolist() == [0.10]

"""A figure is complete when it is saved: plot_providers takes the x tick names, and save_figure refuses a positional
x axis ("size": 0, 1, 2 ...) without them (the old 06/07 plots showed "size" over 0.0 ... 4.0)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from PIL import Image

from tirbench.bench.plots import IncompleteFigureError, plot_providers, save_figure

LAYERS = ["batch-256 3x3 @ 14", "3x3 @ 28", "1x1 @ 14"]


def layer_rows() -> pd.DataFrame:
    """Rows the way 06/07 plot them: each layer at its position in ``size``."""
    return pd.DataFrame([{"provider": p, "variant": v, "size": i, "TFLOP/s": 100.0 + i + (p == "cudnn")}
                         for i in range(len(LAYERS)) for p, v in (("tvm", "nhwc_mma_best"), ("cudnn", "cudnn_nhwc"))])


def test_layer_names_are_on_the_saved_figure(tmp_path):
    path = tmp_path / "conv2d_fp16.png"
    fig = plot_providers(layer_rows(), x="size", y="TFLOP/s", kind="line", title="t", caption="c", ylabel="TFLOP/s",
                         xticks=LAYERS, xlabel="layer", path=path)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == LAYERS and ax.get_xlabel() == "layer"
    assert Image.open(path).mode == "P"   # a palette PNG: a third of the bytes of RGBA
    plt.close(fig)


def test_a_positional_axis_without_names_is_not_saved(tmp_path):
    path = tmp_path / "conv2d_fp16.png"
    with pytest.raises(IncompleteFigureError, match=r"conv2d_fp16\.png: the x axis 'size' shows positions "
                                                    r"without their names: pass xticks="):
        plot_providers(layer_rows(), x="size", y="TFLOP/s", kind="line", title="t", caption="c", ylabel="TFLOP/s",
                       path=path)
    assert not path.exists()
    plt.close("all")


def test_xticks_must_name_every_position():
    with pytest.raises(ValueError, match=r"xticks names 2 positions, x='size' has values 0\.\.2"):
        plot_providers(layer_rows(), x="size", y="TFLOP/s", title="t", caption="c", ylabel="y", xticks=LAYERS[:2])
    plt.close("all")


def test_save_figure_checks_a_figure_built_by_hand(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3])
    ax.set_xlabel("size")
    with pytest.raises(IncompleteFigureError):
        save_figure(fig, tmp_path / "a.png")
    ax.set_xticks(range(3), LAYERS)   # what 04 does before it saves: complete
    save_figure(fig, tmp_path / "a.png")
    assert (tmp_path / "a.png").exists()
    plt.close(fig)

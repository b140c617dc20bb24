"""The five networks' convolution tables (``workloads.networks``): counts, unique names, every layer a conv2d workload
in both of the configs the issue measures, and, where torchvision is installed, the tables against torchvision's
own models (every ``nn.Conv2d`` that a forward pass of a zero input runs, with its input size)."""
from collections import Counter

import pytest

from tirbench.bench.network import layer_shape
from tirbench.workloads.layers import ConvLayer, merge
from tirbench.workloads.networks import INCEPTION_V3, NETWORKS
from tirbench.workloads.resnet50 import RESNET50

#: Per network: distinct convolutions, convolutions in all (torchvision's nn.Conv2d modules run in eval mode).
TOTALS = {"resnet50": (23, 53), "mobilenet_v2": (30, 52), "resnext50_32x4d": (24, 53), "inception_v3": (43, 94),
          "convnext_tiny": (8, 22)}
SIZES = ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")   # conv2d's positional arguments


def test_each_network_has_its_distinct_and_total_convolutions():
    assert {name: (len(net), sum(layer.count for layer in net)) for name, net in NETWORKS.items()} == TOTALS


@pytest.mark.parametrize("name", NETWORKS)
def test_names_are_unique_and_no_two_layers_are_the_same_convolution(name):
    net = NETWORKS[name]
    assert len({layer.name for layer in net}) == len({layer.key for layer in net}) == len(net)


def test_resnet50_is_plain_and_its_shape_the_nine_sizes():
    assert all(layer.geometry.plain for layer in RESNET50) and RESNET50[0].shape(1) == (1, 3, 224, 224, 64, 7, 7, 2, 3)
    assert RESNET50[4].name == "s1 1x1 64->256 @56 + down" and RESNET50[4].count == 4


def test_merge_adds_counts_and_the_words_a_later_name_adds():
    a = ConvLayer("6b 1x7 128->128 @17", 128, 17, 17, 128, 1, 7, 1, (0, 3), 1)
    b = ConvLayer("6c 1x7 128->128 @17", 128, 17, 17, 128, 1, 7, (1, 1), (0, 0, 3, 3), 2)
    c = ConvLayer("6b 1x7 128->128 @17", 128, 17, 17, 128, 1, 7, 1, (0, 3), 1, groups=2)
    assert merge([a, b, a, c]) == (ConvLayer("6b 1x7 128->128 @17 + 6c", 128, 17, 17, 128, 1, 7, 1, (0, 3), 4), c)


def test_a_layer_gives_conv2ds_arguments_and_its_shape():
    row = next(layer for layer in INCEPTION_V3 if layer.r == 1 and layer.s == 7)
    assert row.conv2d_kwargs(8) == {"n": 8, "c": 128, "h": 17, "w": 17, "k": 128, "r": 1, "s": 7, "stride": 1,
                                    "pad": (0, 3), "dilation": 1, "groups": 1}
    assert row.shape(8) == (8, 128, 17, 17, 128, 1, 7, 1, 0) and layer_shape(row, 8) == "8x128x17x17x128x1x7x1x0_p0x3"


@pytest.mark.parametrize("config", [(1, "NCHW", "float32"), (32, "NHWC", "float16")], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", NETWORKS)
def test_every_layer_builds_its_workload(name, config):
    batch, layout, dtype = config
    for layer in NETWORKS[name]:
        wl = layer.workload(batch, layout, dtype)
        assert (wl.shape, wl.layout, wl.dtype) == (layer_shape(layer, batch), layout, dtype)
        if layer.geometry.plain:   # the workload notebook 08 builds from the nine sizes
            assert layer.conv2d_kwargs(batch) == {**dict(zip(SIZES, layer.shape(batch))), "dilation": 1, "groups": 1}


def _torchvision_convs(name: str, size: int) -> Counter:
    """(c, h, w, k, r, s, stride, padding, dilation, groups) of every nn.Conv2d that torchvision's ``name`` (eval
    mode, no weights) runs on a zero 1 x 3 x ``size`` x ``size`` input, counted."""
    torch = pytest.importorskip("torch")
    models = pytest.importorskip("torchvision.models")
    kwargs = {"init_weights": False} if name == "inception_v3" else {}
    model = getattr(models, name)(weights=None, **kwargs).eval()
    seen: Counter = Counter()

    def hook(mod, args, _out):
        _, c, h, w = args[0].shape
        seen[(c, h, w, mod.out_channels, *mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.groups)] += 1

    for mod in model.modules():
        if isinstance(mod, torch.nn.Conv2d):
            mod.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    return seen


@pytest.mark.parametrize("name", NETWORKS)
def test_each_table_is_torchvisions_network(name):
    net = NETWORKS[name]
    ours: Counter = Counter()
    for layer in net:
        g = layer.geometry
        top, bottom, left, right = g.pad
        assert (top, left) == (bottom, right)   # torch's nn.Conv2d pads each axis on both sides alike
        ours[(layer.c, layer.h, layer.w, layer.k, layer.r, layer.s, g.stride, (top, left), g.dilation, g.groups)] += \
            layer.count
    assert _torchvision_convs(name, net[0].h) == ours

"""Every distinct convolution of five networks, torchvision's definitions, at their torchvision input size (224x224,
Inception-v3 299x299), in network order, each with how often the network runs it (``layers.merge``).

Each table is walked from the architecture's structure, as torchvision builds it:

- ``resnet50``: ResNet-50 v1.5 (``resnet50.RESNET50``), 53 convolutions.
- ``mobilenet_v2``: MobileNetV2 1.0: a 3x3/2 stem, 17 inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project;
  the first without the expand) and a 1x1 to 1280 channels: 52 convolutions.
- ``resnext50_32x4d``: ResNet-50's layout with every 3x3 in 32 groups, twice as wide: 53 convolutions.
- ``inception_v3``: Inception-v3 in eval mode, which does not run the aux classifier (its two convolutions are left
  out): the five stem convolutions, Mixed 5b-5d (A), 6a (B), 6b-6e (C: 1x7 and 7x1 with padding (0, 3) and (3, 0)),
  7a (D), 7b-7c (E: 1x3 and 3x1): 94 convolutions.
- ``convnext_tiny``: ConvNeXt-T: the 4x4/4 stem, the 7x7 depthwise convolution of each of its 3, 3, 9, 3 blocks and
  the three 2x2/2 downsampling convolutions: 22. Each block's two pointwise layers are ``nn.Linear`` on
  channels-last activations, not convolutions: they are not here.
"""
from __future__ import annotations

from tirbench.workloads.layers import ConvLayer, merge
from tirbench.workloads.resnet50 import RESNET50, bottleneck_net


def conv(where: str, c: int, size: int, k: int, r: int, s: int | None = None, *, stride: int = 1,
         pad: int | tuple[int, int] = 0, groups: int = 1) -> ConvLayer:
    """One convolution (count 1) of a ``size`` x ``size`` input, named "<where> <r>x<s>[/stride] <c>-><k> @<size>"
    ("dw<r>x<s>[/stride] <c>" for a depthwise one, " g<groups>" after k for a grouped one)."""
    s = r if s is None else s
    kernel = f"{r}x{s}" + (f"/{stride}" if stride > 1 else "")
    what = (f"dw{kernel} {c}" if groups == c == k else
            f"{kernel} {c}->{k}" + (f" g{groups}" if groups > 1 else ""))
    return ConvLayer(f"{where} {what} @{size}", c, size, size, k, r, s, stride, pad, 1, groups)


def _mobilenet_v2() -> list[ConvLayer]:
    """MobileNetV2 1.0 at 224x224: per stage (expansion t, channels, blocks, stride of the first block), its inverted
    residuals."""
    layers, c, size = [conv("stem", 3, 224, 32, 3, stride=2, pad=1)], 32, 112
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))
    for stage, (t, out, blocks, first_stride) in enumerate(settings, 1):
        for block in range(blocks):
            where, hidden = f"s{stage}", c * t
            if t != 1:
                layers.append(conv(where, c, size, hidden, 1))
            layers.append(conv(where, hidden, size, hidden, 3, stride=first_stride if block == 0 else 1, pad=1,
                               groups=hidden))
            size = layers[-1].out_hw()[0]
            layers.append(conv(where, hidden, size, out, 1))
            c = out
    return [*layers, conv("head", c, size, 1280, 1)]


def _inception_a(where: str, c: int, size: int, pool: int) -> tuple[list[ConvLayer], int]:
    """InceptionA: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; pool -> 1x1 (``pool`` channels)."""
    return [conv(where, c, size, 64, 1), conv(where, c, size, 48, 1), conv(where, 48, size, 64, 5, pad=2),
            conv(where, c, size, 64, 1), conv(where, 64, size, 96, 3, pad=1), conv(where, 96, size, 96, 3, pad=1),
            conv(where, c, size, pool, 1)], 64 + 64 + 96 + pool


def _inception_b(where: str, c: int, size: int) -> tuple[list[ConvLayer], int]:
    """InceptionB (to 17x17): 3x3/2; 1x1 -> 3x3 -> 3x3/2; max pool."""
    return [conv(where, c, size, 384, 3, stride=2), conv(where, c, size, 64, 1), conv(where, 64, size, 96, 3, pad=1),
            conv(where, 96, size, 96, 3, stride=2)], 384 + 96 + c


def _inception_c(where: str, c: int, size: int, c7: int) -> tuple[list[ConvLayer], int]:
    """InceptionC: 1x1; 1x1 -> 1x7 -> 7x1; 1x1 -> 7x1 -> 1x7 -> 7x1 -> 1x7 (``c7`` channels inside); pool -> 1x1."""
    def row(c_in: int, k: int) -> ConvLayer:
        return conv(where, c_in, size, k, 1, 7, pad=(0, 3))

    def col(c_in: int, k: int) -> ConvLayer:
        return conv(where, c_in, size, k, 7, 1, pad=(3, 0))

    return [conv(where, c, size, 192, 1), conv(where, c, size, c7, 1), row(c7, c7), col(c7, 192),
            conv(where, c, size, c7, 1), col(c7, c7), row(c7, c7), col(c7, c7), row(c7, 192),
            conv(where, c, size, 192, 1)], 4 * 192


def _inception_d(where: str, c: int, size: int) -> tuple[list[ConvLayer], int]:
    """InceptionD (to 8x8): 1x1 -> 3x3/2; 1x1 -> 1x7 -> 7x1 -> 3x3/2; max pool."""
    return [conv(where, c, size, 192, 1), conv(where, 192, size, 320, 3, stride=2), conv(where, c, size, 192, 1),
            conv(where, 192, size, 192, 1, 7, pad=(0, 3)), conv(where, 192, size, 192, 7, 1, pad=(3, 0)),
            conv(where, 192, size, 192, 3, stride=2)], 320 + 192 + c


def _inception_e(where: str, c: int, size: int) -> tuple[list[ConvLayer], int]:
    """InceptionE: 1x1; 1x1 -> (1x3, 3x1); 1x1 -> 3x3 -> (1x3, 3x1); pool -> 1x1."""
    def split(c_in: int) -> list[ConvLayer]:
        return [conv(where, c_in, size, 384, 1, 3, pad=(0, 1)), conv(where, c_in, size, 384, 3, 1, pad=(1, 0))]

    return [conv(where, c, size, 320, 1), conv(where, c, size, 384, 1), *split(384), conv(where, c, size, 448, 1),
            conv(where, 448, size, 384, 3, pad=1), *split(384), conv(where, c, size, 192, 1)], 320 + 4 * 384 + 192


def _inception_v3() -> list[ConvLayer]:
    """Inception-v3 at 299x299 (eval: no aux classifier): the stem with its two 3x3/2 max pools, then the Mixed
    blocks."""
    def pooled(size: int) -> int:   # a 3x3/2 max pool without padding
        return (size - 3) // 2 + 1

    stem = [conv("1a", 3, 299, 32, 3, stride=2)]
    stem.append(conv("2a", 32, stem[-1].out_hw()[0], 32, 3))
    stem.append(conv("2b", 32, stem[-1].out_hw()[0], 64, 3, pad=1))
    stem.append(conv("3b", 64, pooled(stem[-1].out_hw()[0]), 80, 1))
    stem.append(conv("4a", 80, stem[-1].out_hw()[0], 192, 3))
    layers, c, size = stem, 192, pooled(stem[-1].out_hw()[0])
    blocks = [("5b", _inception_a, 32), ("5c", _inception_a, 64), ("5d", _inception_a, 64), ("6a", _inception_b),
              ("6b", _inception_c, 128), ("6c", _inception_c, 160), ("6d", _inception_c, 160),
              ("6e", _inception_c, 192), ("7a", _inception_d), ("7b", _inception_e), ("7c", _inception_e)]
    for where, block, *args in blocks:
        block_layers, c = block(where, c, size, *args)
        layers += block_layers
        size = min(layer.out_hw()[0] for layer in block_layers)   # halved by B and D's 3x3/2 (and max pool)
    return layers


def _convnext_tiny() -> list[ConvLayer]:
    """ConvNeXt-T at 224x224: the 4x4/4 stem, then per stage (dims 96, 192, 384, 768; 3, 3, 9, 3 blocks) a 2x2/2
    downsampling convolution (from the second stage on) and each block's 7x7 depthwise convolution."""
    layers, size, c = [conv("stem", 3, 224, 96, 4, stride=4)], 56, 96
    for stage, (dim, blocks) in enumerate(((96, 3), (192, 3), (384, 9), (768, 3)), 1):
        if dim != c:
            layers.append(conv(f"s{stage} down", c, size, dim, 2, stride=2))
            c, size = dim, layers[-1].out_hw()[0]
        layers += [conv(f"s{stage}", dim, size, dim, 7, pad=3, groups=dim)] * blocks
    return layers


#: Every distinct convolution of MobileNetV2 1.0 at 224x224, in network order.
MOBILENET_V2: tuple[ConvLayer, ...] = merge(_mobilenet_v2())
#: Every distinct convolution of ResNeXt-50 32x4d at 224x224, in network order.
RESNEXT50_32X4D: tuple[ConvLayer, ...] = bottleneck_net(groups=32, width_per_group=4)
#: Every distinct convolution of Inception-v3 at 299x299 (eval mode: without the aux classifier), in network order.
INCEPTION_V3: tuple[ConvLayer, ...] = merge(_inception_v3())
#: Every distinct convolution of ConvNeXt-T at 224x224, in network order.
CONVNEXT_TINY: tuple[ConvLayer, ...] = merge(_convnext_tiny())

#: The five networks by torchvision's name for each.
NETWORKS: dict[str, tuple[ConvLayer, ...]] = {
    "resnet50": RESNET50, "mobilenet_v2": MOBILENET_V2, "resnext50_32x4d": RESNEXT50_32X4D,
    "inception_v3": INCEPTION_V3, "convnext_tiny": CONVNEXT_TINY,
}

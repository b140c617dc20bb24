"""The convolutions of ResNet-50 (torchvision's v1.5: the stride of a downsampling bottleneck is on its 3x3), at
224x224: the 7x7 stem, the 1x1 and 3x3 layers of the four stages and the stride-2 1x1 downsample layers. 53
convolutions, 23 distinct shapes, each with how often it occurs. ``bottleneck_net`` also gives ResNeXt-50's
(``networks``).
"""
from __future__ import annotations

from tirbench.workloads.base import check_positive
from tirbench.workloads.layers import ConvLayer, merge

__all__ = ["ConvLayer", "RESNET50", "bottleneck_net", "resnet50_layers"]


def _stage(index: int, c_in: int, width: int, out: int, size: int, blocks: int, groups: int) -> list[ConvLayer]:
    """The convolutions of a stage of ``blocks`` bottlenecks (1x1 -> 3x3 of ``groups`` -> 1x1; width ``width``,
    output ``out``) whose input is ``c_in`` x ``size`` x ``size``, each with its count in the stage; stages after the
    first halve the size in the first block's 3x3 and its 1x1 downsample."""
    stride = 1 if index == 1 else 2
    after, down = size // stride, "/2" if stride == 2 else ""
    g = f" g{groups}" if groups > 1 else ""
    layers = [
        ConvLayer(f"s{index} 1x1 {c_in}->{width} @{size}", c_in, size, size, width, 1, 1, 1, 0, 1),
        ConvLayer(f"s{index} 3x3{down} {width}{g} @{size}", width, size, size, width, 3, 3, stride, 1,
                  1 if stride == 2 else blocks, groups),
        ConvLayer(f"s{index} 1x1 {out}->{width} @{after}", out, after, after, width, 1, 1, 1, 0, blocks - 1),
        ConvLayer(f"s{index} 1x1 {width}->{out} @{after}", width, after, after, out, 1, 1, 1, 0, blocks),
        ConvLayer(f"s{index} down 1x1{down} {c_in}->{out} @{size}", c_in, size, size, out, 1, 1, stride, 0, 1),
    ]
    if stride == 2:
        layers.insert(2, ConvLayer(f"s{index} 3x3 {width}{g} @{after}", width, after, after, width, 3, 3, 1, 1,
                                   blocks - 1, groups))
    return layers


def bottleneck_net(groups: int = 1, width_per_group: int = 64) -> tuple[ConvLayer, ...]:
    """The distinct convolutions of torchvision's ``ResNet`` with 3, 4, 6 and 3 bottlenecks at 224x224, each 3x3 in
    ``groups`` groups of ``width_per_group`` channels per 64 planes: ResNet-50 by default, ResNeXt-50 32x4d with
    (32, 4)."""
    layers, c_in, size = [ConvLayer("stem 7x7/2 3->64 @224", 3, 224, 224, 64, 7, 7, 2, 3, 1)], 64, 56
    for index, (planes, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), 1):
        width = planes * width_per_group // 64 * groups
        layers += _stage(index, c_in, width, 4 * planes, size, blocks, groups)
        c_in, size = 4 * planes, size if index == 1 else size // 2
    return merge(layers)


#: Every distinct convolution of ResNet-50 v1.5 at 224x224, in network order.
RESNET50: tuple[ConvLayer, ...] = bottleneck_net()


def resnet50_layers(batch: int) -> list[tuple[ConvLayer, tuple[int, ...]]]:
    """(layer, conv2d sizes at ``batch``) for every distinct convolution of ResNet-50."""
    check_positive(batch=batch)
    return [(layer, layer.shape(batch)) for layer in RESNET50]

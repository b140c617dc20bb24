"""The convolutions of ResNet-50 (torchvision's v1.5: the stride of a downsampling bottleneck is on its 3x3), at
224x224: the 7x7 stem, the 1x1 and 3x3 layers of the four stages and the stride-2 1x1 downsample layers. 53
convolutions, 23 distinct shapes, each with how often it occurs.
"""
from __future__ import annotations

from dataclasses import dataclass

from tirbench.workloads.base import check_positive


@dataclass(frozen=True)
class ConvLayer:
    """One distinct convolution: a name, its input ``c`` x ``h`` x ``w``, ``k`` filters of ``r`` x ``s``, stride,
    padding, and how many times the network runs it."""

    name: str
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int
    pad: int
    count: int

    def shape(self, batch: int) -> tuple[int, ...]:
        """The conv2d workload's sizes at ``batch``: (N, C, H, W, K, R, S, stride, pad)."""
        return (batch, self.c, self.h, self.w, self.k, self.r, self.s, self.stride, self.pad)


def _stage(index: int, c_in: int, width: int, size: int, blocks: int) -> list[ConvLayer]:
    """The distinct convolutions of a stage of ``blocks`` bottlenecks (1x1 -> 3x3 -> 1x1, width ``width``, output
    4 x width) whose input is ``c_in`` x ``size`` x ``size``; stages after the first halve the size in the first
    block's 3x3 and its 1x1 downsample."""
    out, stride = 4 * width, 1 if index == 1 else 2
    after, down = size // stride, "/2" if stride == 2 else ""
    layers = [
        ConvLayer(f"s{index} 1x1 {c_in}->{width} @{size}", c_in, size, size, width, 1, 1, 1, 0, 1),
        ConvLayer(f"s{index} 3x3{down} {width} @{size}", width, size, size, width, 3, 3, stride, 1,
                  1 if stride == 2 else blocks),
        ConvLayer(f"s{index} 1x1 {out}->{width} @{after}", out, after, after, width, 1, 1, 1, 0, blocks - 1),
        ConvLayer(f"s{index} 1x1 {width}->{out} @{after}", width, after, after, out, 1, 1, 1, 0, blocks),
        ConvLayer(f"s{index} down 1x1{down} {c_in}->{out} @{size}", c_in, size, size, out, 1, 1, stride, 0, 1),
    ]
    if stride == 2:
        layers.insert(2, ConvLayer(f"s{index} 3x3 {width} @{after}", width, after, after, width, 3, 3, 1, 1,
                                   blocks - 1))
    return layers


def _merge(layers: list[ConvLayer]) -> list[ConvLayer]:
    """Layers with the same shape merged into one (counts added, " + down" on the name), in first-seen order."""
    merged: dict[tuple, ConvLayer] = {}
    for layer in layers:
        key = layer.shape(1)
        if key in merged:
            old = merged[key]
            merged[key] = ConvLayer(f"{old.name} + down", *key[1:], count=old.count + layer.count)
        else:
            merged[key] = layer
    return list(merged.values())


#: Every distinct convolution of ResNet-50 v1.5 at 224x224, in network order.
RESNET50: tuple[ConvLayer, ...] = tuple(_merge([
    ConvLayer("stem 7x7/2 3->64 @224", 3, 224, 224, 64, 7, 7, 2, 3, 1),
    *_stage(1, 64, 64, 56, 3),
    *_stage(2, 256, 128, 56, 4),
    *_stage(3, 512, 256, 28, 6),
    *_stage(4, 1024, 512, 14, 3),
]))


def resnet50_layers(batch: int) -> list[tuple[ConvLayer, tuple[int, ...]]]:
    """(layer, conv2d sizes at ``batch``) for every distinct convolution of ResNet-50."""
    check_positive(batch=batch)
    return [(layer, layer.shape(batch)) for layer in RESNET50]

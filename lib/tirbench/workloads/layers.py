"""A network's convolutions as data: ``ConvLayer`` (one distinct convolution and how often the network runs it) and
``merge`` (same-shaped layers counted once). The tables themselves: ``resnet50`` and ``networks``."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from tirbench.workloads.base import Workload, check_positive, shape_text
from tirbench.workloads.conv2d import conv2d
from tirbench.workloads.conv_geometry import ConvGeometry, conv_geometry


@dataclass(frozen=True)
class ConvLayer:
    """One distinct convolution: a name, its input ``c`` x ``h`` x ``w``, ``k`` filters of ``r`` x ``s``, stride,
    padding, how many times the network runs it, and ``groups`` and ``dilation``. ``stride``, ``pad`` and
    ``dilation`` take ``conv2d``'s forms (one int, per axis, or for ``pad`` per side); the defaults are a plain
    layer's."""

    name: str
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int | tuple[int, int]
    pad: int | tuple[int, ...]
    count: int
    groups: int = 1
    dilation: int | tuple[int, int] = 1

    @property
    def geometry(self) -> ConvGeometry:
        """Stride, padding, dilation and groups in their full form (``conv2d.ConvGeometry``)."""
        return conv_geometry(self.stride, self.pad, self.dilation, self.groups)

    @property
    def key(self) -> tuple:
        """What makes two layers the same convolution: sizes and geometry (not the name or count)."""
        return (self.c, self.h, self.w, self.k, self.r, self.s, self.geometry)

    def out_hw(self) -> tuple[int, int]:
        """The output's rows and columns."""
        return self.geometry.out_hw(self.h, self.w, self.r, self.s)

    def shape(self, batch: int) -> tuple[int, ...]:
        """The conv2d workload's sizes at ``batch``: (N, C, H, W, K, R, S, stride, pad), with stride = sh and pad =
        top where they differ per axis (``conv2d_kwargs`` has the whole geometry)."""
        g = self.geometry
        return (batch, self.c, self.h, self.w, self.k, self.r, self.s, g.stride[0], g.pad[0])

    def shape_name(self, batch: int) -> str:
        """The ``shape`` column of this layer's conv2d rows at ``batch`` (``Workload.shape``): sizes joined by 'x',
        then a suffix for each thing it has beyond a plain layer (``_g32``, ``_p0x3``...)."""
        return shape_text(self.shape(batch), self.geometry.extra())

    def conv2d_kwargs(self, batch: int) -> dict[str, int | tuple[int, ...]]:
        """``conv2d``'s arguments for this layer at ``batch`` (layout and dtype aside)."""
        check_positive(batch=batch)
        return {"n": batch, "c": self.c, "h": self.h, "w": self.w, "k": self.k, "r": self.r, "s": self.s,
                **self.geometry.kwargs()}

    def workload(self, batch: int, layout: str = "NCHW", dtype: str = "float32") -> Workload:
        """This layer's ``conv2d`` workload at ``batch`` in ``layout`` and ``dtype``."""
        return conv2d(**self.conv2d_kwargs(batch), layout=layout, dtype=dtype)


def merge(layers: Iterable[ConvLayer]) -> tuple[ConvLayer, ...]:
    """Layers of the same ``key`` merged into one, in first-seen order: counts added, the name that of the first
    with " + " and the words of each later name that it lacks (ResNet-50's "s1 1x1 64->256 @56 + down")."""
    merged: dict[tuple, ConvLayer] = {}
    for layer in layers:
        old = merged.get(layer.key)
        if old is None:
            merged[layer.key] = layer
            continue
        new_words = [word for word in layer.name.split() if word not in old.name.split()]
        name = f"{old.name} + {' '.join(new_words)}" if new_words else old.name
        merged[layer.key] = replace(old, name=name, count=old.count + layer.count)
    return tuple(merged.values())

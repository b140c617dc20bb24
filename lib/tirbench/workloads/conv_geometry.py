"""A convolution's geometry beyond its sizes: stride and dilation per axis, padding per side, groups
(``ConvGeometry``), as ``conv2d`` and ``conv2d_int8`` workloads carry it, and their shape names
(``parse_conv_shape``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tirbench.workloads.base import Workload, check_positive


def is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class ConvGeometry:
    """How a convolution walks its input beyond R x S: ``stride`` (sh, sw), zero ``pad`` (top, bottom, left,
    right), ``dilation`` (dh, dw) and ``groups``."""

    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def plain(self) -> bool:
        """One group, no dilation, one stride and one padding on all four sides: what every kernel family takes."""
        return not self.extra()

    def out_hw(self, h: int, w: int, r: int, s: int) -> tuple[int, int]:
        """Output rows and columns of an ``h`` x ``w`` input and an ``r`` x ``s`` kernel."""
        t, b, left, right = self.pad
        return (output_size(h, r, self.stride[0], (t, b), self.dilation[0]),
                output_size(w, s, self.stride[1], (left, right), self.dilation[1]))

    def extra(self) -> dict[str, int | tuple[int, ...]]:
        """``Workload.extra``: what ``sizes`` (``stride`` = sh, ``pad`` = top) leaves out, each tag only where it
        differs from a plain layer's: ``g`` groups, ``d`` dilation (one value or dh x dw), ``s`` sh x sw, ``p``
        ph x pw (top = bottom, left = right) or top x bottom x left x right."""
        (sh, sw), (t, b, left, right), (dh, dw) = self.stride, self.pad, self.dilation
        tags: dict[str, int | tuple[int, ...]] = {}
        if self.groups != 1:
            tags["g"] = self.groups
        if (dh, dw) != (1, 1):
            tags["d"] = dh if dh == dw else (dh, dw)
        if sh != sw:
            tags["s"] = (sh, sw)
        if (t, left) != (b, right):
            tags["p"] = self.pad
        elif t != left:
            tags["p"] = (t, left)
        return tags

    def beyond_plain(self) -> str:
        """What this layer has beyond a plain one, in one line: "groups 32, dilation 2, stride 2x1 per axis, padding
        0x3 per axis" (or "padding 0x1x0x1 per side": top x bottom x left x right); "" for a plain layer."""
        tags = self.extra()
        per = "per side" if len(tags.get("p", ())) == 4 else "per axis"
        said = {"g": "groups {}", "d": "dilation {}", "s": "stride {} per axis", "p": "padding {} " + per}
        return ", ".join(said[tag].format("x".join(map(str, v)) if isinstance(v, tuple) else v)
                         for tag, v in tags.items())

    def require_plain(self, who: str, what: str = "this layer") -> None:
        """A one-line ValueError unless the layer is plain: "<who> takes groups 1, dilation 1, one stride and one
        padding; <what> has groups 32"."""
        if not self.plain:
            raise ValueError(f"{who} takes groups 1, dilation 1, one stride and one padding; {what} has "
                             f"{self.beyond_plain()}")

    def kwargs(self) -> dict[str, int | tuple[int, ...]]:
        """``conv2d``'s arguments for this geometry: ``stride``, ``pad``, ``dilation`` and ``groups``, each in its
        shortest form (one int where the axes or sides agree)."""
        (sh, sw), (t, b, left, right), (dh, dw) = self.stride, self.pad, self.dilation
        pad = t if len(set(self.pad)) == 1 else (t, left) if (t, left) == (b, right) else self.pad
        return {"stride": sh if sh == sw else self.stride, "pad": pad,
                "dilation": dh if dh == dw else self.dilation, "groups": self.groups}


def _per_axis(name: str, value: object, *, least: int, counts: Sequence[int], form: str) -> tuple[int, ...]:
    """``value`` (an int, or a sequence of ``counts`` ints) as a tuple of ints, each at least ``least``; a one-line
    ValueError (``form`` names the tuple forms) otherwise."""
    what = "a positive integer" if least == 1 else "a non-negative integer"
    if is_int(value):
        if value < least:
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return (int(value),)
    if not isinstance(value, (tuple, list)) or len(value) not in counts or \
            not all(is_int(v) and v >= least for v in value):
        raise ValueError(f"{name} must be {what} or {form} of them, got {value!r}")
    return tuple(int(v) for v in value)


def conv_geometry(stride: int | Sequence[int] = 1, pad: int | Sequence[int] = 0,
                  dilation: int | Sequence[int] = 1, groups: int = 1) -> ConvGeometry:
    """``ConvGeometry`` of ``stride`` (int or (sh, sw)), ``pad`` (int, (ph, pw) or (top, bottom, left, right)),
    ``dilation`` (int or (dh, dw)) and ``groups``; a one-line ValueError naming a bad one."""
    st = _per_axis("stride", stride, least=1, counts=(2,), form="two (sh, sw)")
    dil = _per_axis("dilation", dilation, least=1, counts=(2,), form="two (dh, dw)")
    p = _per_axis("pad", pad, least=0, counts=(2, 4), form="two (ph, pw) or four (top, bottom, left, right)")
    check_positive(groups=groups)
    pads = p * 4 if len(p) == 1 else (p[0], p[0], p[1], p[1]) if len(p) == 2 else p
    return ConvGeometry(st * 2 if len(st) == 1 else st, pads, dil * 2 if len(dil) == 1 else dil, int(groups))


def geometry_of(wl: Workload) -> ConvGeometry:
    """The geometry of a ``conv2d`` (or ``conv2d_int8``) workload, from its ``sizes`` and ``extra``."""
    z, e = wl.sizes, wl.extra
    return conv_geometry(e.get("s", z["stride"]), e.get("p", z["pad"]), e.get("d", 1), e.get("g", 1))


def parse_conv_shape(shape: str) -> dict[str, int | tuple[int, ...]]:
    """``conv2d``'s arguments (n, c, h, w, k, r, s, stride, pad, dilation, groups) from a conv2d ``shape``
    (``NxCxHxWxKxRxSxstridexpad`` and the suffixes ``ConvGeometry.extra`` names: ``_g32``, ``_d2``, ``_s2x1``,
    ``_p0x3``): ``conv2d(**parse_conv_shape(wl.shape), layout=..., dtype=...)`` is ``wl`` again. A one-line
    ValueError for a string that is not one."""
    plain, *tags = shape.split("_")
    try:
        sizes = [int(v) for v in plain.split("x")]
        extra = {tag[0]: tuple(int(v) for v in tag[1:].split("x")) for tag in tags}
    except ValueError:
        sizes, extra = [], {}
    counts = {"g": (1,), "d": (1, 2), "s": (2,), "p": (2, 4)}
    if len(sizes) != 9 or len(extra) != len(tags) or list(extra) != [t for t in counts if t in extra] or \
            any(len(v) not in counts[t] for t, v in extra.items()):
        raise ValueError(f"not a conv2d shape: {shape!r} (expected NxCxHxWxKxRxSxSTRIDExPAD, then _gG, _dD or _dDHxDW, "
                         f"_sSHxSW, _pPHxPW or _pTxBxLxR, in that order)")
    def one(tag: str, default: int) -> int | tuple[int, ...]:
        value = extra.get(tag, (default,))
        return value[0] if len(value) == 1 else value
    return {**dict(zip("nchwkrs", sizes[:7])), "stride": one("s", sizes[7]), "pad": one("p", sizes[8]),
            "dilation": one("d", 1), "groups": one("g", 1)}


def plain_refusal(wl: Workload) -> str | None:
    """None for a plain layer (``ConvGeometry.plain``); else what it has beyond one (``ConvGeometry.beyond_plain``)."""
    return geometry_of(wl).beyond_plain() or None


def require_plain(wl: Workload, who: str) -> None:
    """A one-line ValueError where ``wl`` is a conv2d layer that is not plain: "<who> takes groups 1, dilation 1, one
    stride and one padding; conv2d <shape> has groups 32"."""
    if wl.name == "conv2d":
        geometry_of(wl).require_plain(who, f"{wl.name} {wl.shape}")


def output_size(size: int, window: int, stride: int, pad: int | tuple[int, int], dilation: int = 1) -> int:
    """Output rows (or columns) of a convolution: floor((size + pad before + pad after - dilation (window - 1) - 1)
    / stride) + 1; ``pad`` one int for both sides or (before, after)."""
    before, after = (pad, pad) if is_int(pad) else pad
    return (size + before + after - dilation * (window - 1) - 1) // stride + 1

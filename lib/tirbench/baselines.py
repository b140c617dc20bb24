"""Vendor baselines through torch, verified and timed by the harness's rules (same run, L2 flushed, median)."""
from __future__ import annotations

from tirbench.harness import Measurement, verify_then_time_torch
from tirbench.workloads.base import Workload


def cudnn_conv2d(wl: Workload, *, channels_last: bool = False, repeats: int = 100, seed: int = 0) -> Measurement:
    """cuDNN's convolution of an NCHW ``conv2d`` workload: ``torch.nn.functional.conv2d`` with TF32 off and
    ``cudnn.benchmark`` on (cuDNN times its algorithms on the first call and keeps the fastest, Winograd and FFT
    included). ``channels_last``: the same tensors in NHWC memory (converted once, untimed), often cuDNN's faster
    layout. Variant ``cudnn_nhwc`` or ``cudnn_nchw``, provider ``cudnn``."""
    import torch

    if wl.name != "conv2d" or wl.layout != "NCHW":
        raise ValueError(f"cudnn_conv2d takes an NCHW conv2d workload, got {wl.name} {wl.layout or ''}".strip())
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    stride, pad = wl.sizes["stride"], wl.sizes["pad"]

    def conv(x, w):
        return torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)

    def to_channels_last(x, w):
        return x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)

    return verify_then_time_torch(wl, conv, variant="cudnn_nhwc" if channels_last else "cudnn_nchw",
                                  provider="cudnn", repeats=repeats, seed=seed,
                                  prepare=to_channels_last if channels_last else None)

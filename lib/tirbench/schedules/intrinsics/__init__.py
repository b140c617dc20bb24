"""Tensor intrinsics of our own: Hopper ``wgmma`` and the swizzled int8 ``ldmatrix``."""

"""Workloads: a TVMScript module, how to make its inputs, a numpy reference, and its FLOP/byte counts."""
from tirbench.workloads.base import Workload, check_dtype, check_positive
from tirbench.workloads.conv2d import conv2d
from tirbench.workloads.conv2d_int8 import conv2d_int8
from tirbench.workloads.elementwise import copy, vector_add
from tirbench.workloads.gemm import gemm
from tirbench.workloads.window import window_sum
from tirbench.workloads.winograd import conv2d_winograd, winograd_filter_transform

__all__ = ["Workload", "check_dtype", "check_positive", "conv2d", "conv2d_int8", "conv2d_winograd", "copy", "gemm",
           "vector_add", "window_sum", "winograd_filter_transform"]

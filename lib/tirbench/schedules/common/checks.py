"""Parameter checks shared by the schedule helpers: clear one-line errors before TVM sees a bad tile."""
from __future__ import annotations

from tvm import s_tir

#: Hopper (and every CUDA GPU since Fermi): at most 1024 threads in one block.
MAX_THREADS_PER_BLOCK = 1024


def loop_extent(sch: s_tir.Schedule, loop: s_tir.LoopRV) -> int:
    """The constant extent of a loop."""
    return int(sch.get(loop).extent)


def require_positive_int(value: int, *, param: str) -> None:
    """ValueError unless ``value`` is an int (not a bool) above zero."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{param} must be a positive integer, got {value!r}")


def require_divides(extent: int, factor: int, *, param: str, axis: str) -> None:
    """ValueError unless ``factor`` is a positive divisor of ``extent``."""
    require_positive_int(factor, param=param)
    if extent % factor:
        raise ValueError(f"{param}={factor} does not divide {axis}={extent}: pick a divisor of {extent}")


def require_threads(threads: int, *, param: str = "threads") -> None:
    """ValueError unless 1 <= threads <= MAX_THREADS_PER_BLOCK."""
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"{param}={threads!r} threads per block: must be between 1 and {MAX_THREADS_PER_BLOCK}")


def require_vector_bytes(vector: int, itemsize: int, *, param: str = "vector") -> None:
    """ValueError unless the vector is 1, 2, 4, ... elements and at most 16 bytes (one LDG.128)."""
    if vector not in (1, 2, 4, 8, 16) or vector * itemsize > 16:
        raise ValueError(f"{param}={vector!r}: a vector access is 1, 2, 4, 8 or 16 elements and at most 16 bytes "
                         f"({16 // itemsize} elements of {itemsize} bytes)")

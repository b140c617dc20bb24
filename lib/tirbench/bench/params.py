"""Checks for a notebook's papermill parameters, run first in the cell after the ``parameters`` cell: a bad value
(a negative size, a tile that does not divide, an unknown dtype, a string where a number belongs) stops the notebook
there with one line naming the parameter, before anything is built, measured or written."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence, TypeVar

import tvm

from tirbench.core.errors import OneLineError
from tirbench.core.gpu import PEAKS, current_gpu, peak_key
from tirbench.core.machine import cuda_target, has_cuda_gpu, ptx_if_older
from tirbench.workloads.base import Workload

T = TypeVar("T")
R = TypeVar("R")

#: Parameters that change how a notebook measures (how often, the seed, the build target's tag, whether and how long
#: it tunes or chooses its kernels again: ``trials``, notebook 09's tuning budget; notebook 10's ``max_seconds``, how
#: many whole networks a run measures before the next run goes on), not what it measures: a run that sets only these
#: is still a full run.
NEUTRAL = ("repeats", "seed", "target", "tune_now", "choose_now", "rules_budget_s", "trials", "max_seconds")
#: Prefixes of such parameters (tuning budgets: ``trials_fp16``, ``trials_rules``, ...).
NEUTRAL_PREFIXES = ("trials_",)


class ParameterError(OneLineError):
    """A notebook parameter of the wrong type or value."""


def require_flags(**values: object) -> None:
    """ParameterError unless each value is True or False."""
    for name, value in values.items():
        if not isinstance(value, bool):
            raise ParameterError(f"{name} must be True or False, got {value!r}")


def _leaves(value: object) -> list[object]:
    return [x for v in value for x in _leaves(v)] if isinstance(value, (list, tuple)) else [value]


def require_ints(minimum: int = 1, **values: object) -> None:
    """ParameterError unless each value is an integer >= ``minimum``, or a (nested) non-empty list of them."""
    for name, value in values.items():
        leaves = _leaves(value)
        if not leaves or any(not isinstance(x, int) or isinstance(x, bool) or x < minimum for x in leaves):
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ParameterError(f"{name} must be {what}{' (or a list of them)' * isinstance(value, list)}, "
                                 f"got {value!r}")


def require_strings(**values: object) -> None:
    """ParameterError unless each value is a list of non-empty strings (possibly empty)."""
    for name, value in values.items():
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ParameterError(f"{name} must be a list of non-empty strings, got {value!r}")


def require_members(allowed: Sequence[str], **values: object) -> None:
    """ParameterError unless each value is a non-empty list of names, each one of ``allowed``."""
    for name, value in values.items():
        require_strings(**{name: value})
        if not value:
            raise ParameterError(f"{name} must name at least one of {', '.join(allowed)}, got []")
        for item in value:
            if item not in allowed:
                raise ParameterError(f"{name}: unknown {item!r}: expected one of {', '.join(allowed)}")


def require_target(target: object) -> tvm.target.Target:
    """The CUDA target a notebook builds for: "auto" is ``cuda_target()`` (the GPU description's arch: this GPU's, or
    ``TIRBENCH_ARCH``'s); anything else must name a TVM target (a tag such as "nvidia/nvidia-a100"), else a
    ParameterError."""
    if target == "auto":
        return _made("target", target, lambda _: cuda_target())
    made = _made("target", target, lambda t: tvm.target.Target(t, host="llvm"))
    if made.kind.name == "cuda" and "arch" in made.attrs:
        ptx_if_older(str(made.attrs["arch"]))
    return made


def require_valid(name: str, value: T, make: Callable[[T], object]) -> None:
    """Run ``make(value)`` (a workload or schedule helper, which checks its own arguments); its ValueError or
    TypeError becomes a one-line ParameterError naming the parameter."""
    _made(name, value, make)


def _made(name: str, value: T, make: Callable[[T], R]) -> R:
    """``make(value)``, its ValueError or TypeError turned into a one-line ParameterError naming the parameter."""
    try:
        return make(value)
    except (ValueError, TypeError) as err:
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise ParameterError(f"{name}={value!r}: {first}") from None


@dataclass(frozen=True)
class GpuMemory:
    """The device memory a notebook's buffers must fit in, and the GPU it belongs to (for the message)."""

    bytes: int
    gpu: str


def gpu_memory(target_gpu: str | None = None) -> GpuMemory:
    """The detected GPU's memory, or (no CUDA GPU here) the peak table's for ``target_gpu`` ("H100", "T4"; default:
    the GPU description's, ``current_gpu()``)."""
    if has_cuda_gpu():
        dev = tvm.cuda(0)
        return GpuMemory(int(dev.total_global_memory), dev.device_name)
    target_gpu = target_gpu or peak_key(current_gpu().name)
    if target_gpu not in PEAKS:
        raise ParameterError(f"target_gpu={target_gpu!r}: expected one of {', '.join(map(repr, PEAKS))}")
    return GpuMemory(int(PEAKS[target_gpu].memory_gb * 1e9), target_gpu)


def decimal_bytes(count: int) -> str:
    """``count`` bytes in decimal units, as GPU datasheets give memory: "1.2 TB", "80 GB"."""
    units = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    power = min(len(str(count)) - 1, 3 * (len(units) - 1)) // 3
    return f"{count / 1000 ** power:.3g} {units[power]}"


def require_fits(name: str, value: T, make: Callable[[T], Workload | Sequence[Workload]],
                 memory: GpuMemory | None = None) -> None:
    """``require_valid``, then ParameterError unless the buffers of each workload ``make(value)`` returns (inputs and
    output, ``Workload.buffer_bytes``: counted, not allocated) fit in ``memory`` (default ``gpu_memory()``)."""
    made = _made(name, value, make)
    largest = max([made] if isinstance(made, Workload) else made, key=lambda wl: wl.buffer_bytes)
    memory = memory or gpu_memory()
    if largest.buffer_bytes > memory.bytes:
        raise ParameterError(f"{name}={value!r}: {largest.name} {largest.shape} needs "
                             f"{decimal_bytes(largest.buffer_bytes)} of buffers, more than the "
                             f"{decimal_bytes(memory.bytes)} of the {memory.gpu}")


def _default(source: str) -> object:
    """A parameter's default from its source text (papermill's ``inspect_notebook``): the literal, else the text."""
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return source


def narrowing(defaults: Mapping[str, str], values: Mapping[str, object]) -> dict[str, tuple[object, object]]:
    """The parameters of ``values`` that narrow a notebook's run, each with (its value, the notebook's default): those
    ``defaults`` (name -> default's source text, as ``papermill.inspect_notebook`` gives it) declares, set to another
    value than the default, and neither in ``NEUTRAL`` nor starting with one of ``NEUTRAL_PREFIXES``. A run with any
    (``quick``, fewer ``configs``, other sizes) measures part of what the notebook's defaults do, or something else."""
    out = {}
    for name, value in values.items():
        if name not in defaults or name in NEUTRAL or name.startswith(NEUTRAL_PREFIXES):
            continue
        default = _default(defaults[name])
        if value != default:
            out[name] = (value, default)
    return out

"""Checks for a notebook's papermill parameters, run first in the cell after the ``parameters`` cell: a bad value
(a negative size, a tile that does not divide, an unknown dtype, a string where a number belongs) stops the notebook
there with one line naming the parameter, before anything is built, measured or written."""
from __future__ import annotations

from typing import Callable, TypeVar

import tvm

from tirbench.core.errors import OneLineError

T = TypeVar("T")


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


def require_target(target: object) -> None:
    """ParameterError unless ``target`` names a TVM target (a tag such as "nvidia/nvidia-h100")."""
    require_valid("target", target, tvm.target.Target)


def require_valid(name: str, value: T, make: Callable[[T], object]) -> None:
    """Run ``make(value)`` (a workload or schedule helper, which checks its own arguments); its ValueError or
    TypeError becomes a one-line ParameterError naming the parameter."""
    try:
        make(value)
    except (ValueError, TypeError) as err:
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise ParameterError(f"{name}={value!r}: {first}") from None

"""Errors that a notebook shows as one line instead of a traceback."""
from __future__ import annotations

from typing import Callable


class OneLineError(ValueError):
    """A ValueError that IPython (and so a papermill-executed notebook and its report) shows as one line:
    ``<class name>: <message>``, through IPython's ``_render_traceback_`` hook."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def refusal(call: Callable[[], object]) -> str | None:
    """The one line a bad input is refused with: the message of the ValueError ``call()`` raises, or None when it
    raises nothing (notebooks show their one-line refusals with this instead of a ``try:``)."""
    try:
        call()
    except ValueError as err:
        return str(err)
    return None

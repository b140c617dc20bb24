"""Errors that a notebook shows as one line instead of a traceback."""
from __future__ import annotations


class OneLineError(ValueError):
    """A ValueError that IPython (and so a papermill-executed notebook and its report) shows as one line:
    ``<class name>: <message>``, through IPython's ``_render_traceback_`` hook."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]

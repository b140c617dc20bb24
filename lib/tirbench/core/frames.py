"""Frozen stdlib modules named to ``inspect``: TVMScript's ``T.prim_func`` calls ``inspect.stack()``, which asks
``inspect.getmodule`` for the module of every frame on the stack. A frame of a frozen module (``<frozen
importlib._bootstrap>`` under every import, ``<frozen runpy>`` under every ``python -m``) is in none of its caches,
so each such frame scans all of ``sys.modules``, twice: importing ``tvm.s_tir.tensor_intrin`` (about 500 prim_funcs
parsed inside an import) took 20-40 s a process so, and about a tenth of that once these names are cached."""
from __future__ import annotations

import inspect
import sys


def name_frozen_modules() -> None:
    """Cache ``<frozen NAME>`` -> ``NAME`` for each frozen module loaded (as ``inspect`` caches a module's file once it
    has scanned for it). The frame information TVM gets is unchanged: a frozen module has no source to show, and
    ``linecache`` gives none for a ``<...>`` file name whichever module it is told the frame belongs to."""
    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)

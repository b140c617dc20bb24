"""Frames' files named to ``inspect``: TVMScript's ``T.prim_func`` calls ``inspect.stack()``, which asks
``inspect.getmodule`` for the module of every frame on the stack. A frame whose file is in none of its caches scans all
of ``sys.modules``, twice, for every prim_func parsed:

- a frozen module's (``<frozen importlib._bootstrap>`` under every import, ``<frozen runpy>`` under every
  ``python -m``): importing ``tvm.s_tir.tensor_intrin`` (about 500 prim_funcs parsed inside an import) took 20-40 s
  a process so, and about a tenth of that once these names are cached;
- code that has no module: TVMScript's own expressions (``<ast>``), ``python -`` (``<stdin>``), ``exec`` (``<string>``),
  the script a process was started with (Jupyter's kernel launcher), and in Jupyter each cell (a file name IPython
  makes from the cell's text): a notebook applying the ladder's ten rungs spent half of its 35 s in these scans.

The frame information TVM gets is unchanged: a frozen module has no source to show, and ``linecache`` gives the same
lines for a file that is not a module's whichever module it is told the frame belongs to (none).
"""
from __future__ import annotations

import inspect
import sys

#: What ``inspect.getmodule`` is told the files of code without a module belong to: no module of that name exists,
#: so it answers None, as its scan of ``sys.modules`` would, without the scan.
NO_MODULE = "<no module>"
#: File names of code compiled from text rather than a module's file.
PSEUDO_FILES = ("<ast>", "<stdin>", "<string>")


def name_frame_files() -> None:
    """Cache ``<frozen NAME>`` -> ``NAME`` for each frozen module loaded (as ``inspect`` caches a module's file once it
    has scanned for it), and ``NO_MODULE`` for the files of code without a module (module docstring): the
    ``PSEUDO_FILES``, the started script where it is not ``__main__``'s file, and in IPython each cell before it
    runs."""
    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)
    for name in PSEUDO_FILES:
        inspect.modulesbyfile.setdefault(name, NO_MODULE)
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if sys.argv and sys.argv[0].endswith(".py") and sys.argv[0] != main:
        inspect.modulesbyfile.setdefault(sys.argv[0], NO_MODULE)
    _name_cells_before_they_run()


def _name_cells_before_they_run() -> None:
    """In IPython: before each cell runs, its file name (what the shell's compiler will name it: from the cell's text,
    raw in a kernel, transformed and numbered in a terminal) is cached as ``NO_MODULE``; registered once."""
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is None or _name_cell in shell.events.callbacks["pre_run_cell"]:
        return
    shell.events.register("pre_run_cell", _name_cell)


def _name_cell(info: object) -> None:
    """``pre_run_cell``'s callback: the cell about to run named (``_name_cells_before_they_run``)."""
    shell = sys.modules["IPython"].get_ipython()
    name = shell.compile.get_code_name(info.raw_cell, shell.transform_cell(info.raw_cell), shell.execution_count)
    inspect.modulesbyfile.setdefault(name, NO_MODULE)

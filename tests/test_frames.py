"""``core.frames``: the files of code without a module are cached as such, so ``inspect`` (which TVMScript asks about
every frame of every prim_func it parses) no longer scans ``sys.modules`` for them, and answers as the scan did."""
import inspect
import sys

from tirbench.core import frames


def test_code_without_a_module_is_answered_from_the_cache_as_the_scan_answered():
    code = compile("1", "<ast>", "eval")
    frames.name_frame_files()
    assert inspect.modulesbyfile["<ast>"] == frames.NO_MODULE and frames.NO_MODULE not in sys.modules
    assert inspect.getmodule(code, "<ast>") is None
    assert inspect.modulesbyfile["<frozen importlib._bootstrap>"] == "importlib._bootstrap"


def test_a_module_file_still_gives_its_module():
    frames.name_frame_files()
    assert inspect.getmodule(frames.name_frame_files) is frames


def test_in_ipython_each_cell_is_named_before_it_runs():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        frames.name_frame_files()
        frames.name_frame_files()   # registered once
        assert shell.events.callbacks["pre_run_cell"].count(frames._name_cell) == 1
        cell = "import inspect\nfile = inspect.currentframe().f_code.co_filename"
        shell.run_cell(cell)
        assert inspect.modulesbyfile[shell.user_ns["file"]] == frames.NO_MODULE
    finally:
        InteractiveShell.clear_instance()

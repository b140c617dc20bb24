"""A bad notebook parameter stops the notebook in its first cell with one line; ``make run-all`` then runs the other
notebooks, fails naming it, and leaves every recorded CSV, plot, executed notebook and report byte-identical (and, run
without a GPU, writes nothing under results/)."""
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from chromium import Chromium, check_reports, find_chromium

ROOT = Path(__file__).resolve().parents[1]
NB01 = ROOT / "notebooks" / "01_vector_add.ipynb"

#: A tile that does not divide (``threads=384``) is the run-all test's failure below.
BAD_PARAMETERS = {
    "negative size": ({"sizes_log2": [-1, 20]}, "sizes_log2 must be a positive integer (or a list of them), got [-1, 20]"),
    "unknown dtype": ({"dtype": "int3"}, "dtype='int3': unsupported dtype 'int3': expected one of float32, float16"),
    "string for a number": ({"repeats": "100"}, "repeats must be a positive integer, got '100'"),
}


@pytest.mark.parametrize("params, message", BAD_PARAMETERS.values(), ids=BAD_PARAMETERS)
def test_bad_parameter_stops_the_first_cell_with_one_line(tmp_path, params, message):
    out = tmp_path / NB01.name
    with pytest.raises(pm.PapermillExecutionError) as err:
        pm.execute_notebook(str(NB01), str(out), parameters={"quick": True, "save": False, **params},
                            cwd=str(NB01.parent), kernel_name="python3", progress_bar=False)
    assert (err.value.ename, err.value.evalue) == ("ParameterError", message)
    assert_stopped_in_first_cell(out, message)


def test_a_winograd_tile_that_has_no_transforms_stops_notebook_04_in_its_first_cell(tmp_path):
    nb04 = ROOT / "notebooks" / "04_conv2d.ipynb"
    message = "winograd_m=[2, 3]: m=3: Winograd transforms exist here for m = 2 (F(2x2,3x3)) and 4 (F(4x4,3x3))"
    with pytest.raises(pm.PapermillExecutionError) as err:
        pm.execute_notebook(str(nb04), str(tmp_path / nb04.name), parameters={"quick": True, "save": False,
                                                                              "winograd_m": [2, 3]},
                            cwd=str(nb04.parent), kernel_name="python3", progress_bar=False)
    assert (err.value.ename, err.value.evalue) == ("ParameterError", message)
    assert_stopped_in_first_cell(tmp_path / nb04.name, message)


def assert_stopped_in_first_cell(executed: Path, message: str) -> None:
    cells = [c for c in nbformat.read(executed, as_version=4).cells if c.cell_type == "code"]
    tags = [c.metadata.get("tags", []) for c in cells]
    params = next(i for i, t in enumerate(tags) if "injected-parameters" in t)
    first = next(i for i in range(params + 1, len(cells)) if cells[i].outputs)   # the setup cells print nothing
    assert [o.output_type for o in cells[first].outputs] == ["error"]   # the first output of the notebook
    assert cells[first].outputs[0].traceback == [f"ParameterError: {message}"]
    assert all(c.execution_count is None for c in cells[first + 1:])   # nothing after it ran


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_run_all_goes_on_after_a_failure_names_it_and_changes_no_recorded_file(tmp_path):
    repo = tmp_path / "repo"
    for name in ("notebooks", "results"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("logs", ".ipynb_checkpoints"))
    for name in ("Makefile", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, repo / name)
    out = repo / "build" / "cpu-run"
    for path, text in ((out / "executed" / NB01.name, "an earlier run"), (out / "reports" / "01_vector_add.html", "x")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    results, readme = snapshot(repo / "results"), (repo / "README.md").read_text()
    env = {k: v for k, v in os.environ.items() if k != "TIRBENCH_ROOT"} | {"TIRBENCH_FORCE_CPU": "1"}
    proc = subprocess.run(
        ["make", "--no-print-directory", "run-all", f"PY={sys.executable}", "SETUP=", "QUICK=True",
         "NOTEBOOKS=notebooks/00_overview.ipynb notebooks/01_vector_add.ipynb", "PARAMS=-p threads 384"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert log.index("== 01_vector_add") < log.index("== 00_overview")   # the overview runs last, after a failure
    summary = log[log.index("== run-all summary"):]
    assert re.search(r"01_vector_add +FAILED +\d+\.\d s  ParameterError: threads, vector=\(384, 4\)", summary), log
    assert re.search(r"00_overview +ok +\d+\.\d s", summary) and re.search(r"index\.html +ok", summary)
    assert re.search(r"total \d+\.\d s; FAILED: 01_vector_add\n", summary)
    assert snapshot(repo / "results") == results   # no GPU: nothing under results/ written or changed
    assert (repo / "README.md").read_text() == readme
    assert (out / "executed" / NB01.name).read_text() == "an earlier run"   # the failed notebook's copies stay
    assert (out / "reports" / "01_vector_add.html").read_text() == "x"
    assert (out / "executed" / "00_overview.ipynb").exists() and (out / "reports" / "00_overview.html").exists()
    assert (out / "reports" / "index.html").exists() and list((out / "00_overview").glob("roofline_*.png"))
    assert_stopped_in_first_cell(repo / "build" / "run-all" / NB01.name, "threads, vector=(384, 4): threads*vector=1536 "
                                 "does not divide n=1048576: pick a divisor of 1048576")
    if find_chromium():   # this CPU run's index and the overview's report, with its figures, in a real browser
        with Chromium() as browser:
            pages = check_reports(browser, out / "reports" / "index.html")
        assert {p.stem for p in pages} == {"00_overview", "01_vector_add"}

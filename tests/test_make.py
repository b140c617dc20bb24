"""The Makefile's recipes (``make -n``: printed, not run) and ``.ci/run`` with stand-in commands: the Python
environment a user picks, ``make lab`` as root, quick mode, and CI failing where it could install Chromium but did not."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The Makefile and the files its recipes depend on, copied: a clean clone, no .venv yet."""
    folder = tmp_path_factory.mktemp("clone")
    for name in ("Makefile", "requirements.txt", "requirements-gpu.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, folder / name)
    return folder


def dry_run(clone: Path, *args: str) -> str:
    """What ``make -n ARGS`` would run in ``clone``."""
    return subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=clone, capture_output=True, text=True,
                          check=True).stdout


def test_the_makefile_names_no_path_outside_the_repository():
    text = (ROOT / "Makefile").read_text()
    assert "/opt/" not in text and "gpukit" not in text


def test_the_project_venv_is_the_default(clone):
    assert "python3 -m venv .venv" in dry_run(clone, "test") and ".venv/bin/python -m pytest -q" in dry_run(clone, "test")


@pytest.mark.parametrize("args", [["PY=python3"], ["VENV=0"]])
def test_an_active_environment_is_used_as_it_is(clone, args):
    recipe = dry_run(clone, "test", *args)
    assert ".venv" not in recipe and "python3 -m pytest -q" in recipe
    assert ('python3 -c "import tirbench" 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation -e .'
            in recipe)


@pytest.mark.skipif(os.geteuid() != 0, reason="checks the root case")
def test_lab_as_root_allows_root_and_passes_lab_args(clone):
    assert "python3 -m jupyter lab --allow-root --port 8890 notebooks/" in dry_run(
        clone, "lab", "PY=python3", "SETUP=", "LAB_ARGS=--port 8890")


def test_quick_is_passed_only_when_asked_for(clone):
    """(run-all's recipe calls $(MAKE), so ``make -n`` runs it: PY=echo.)"""
    assert "-p quick" not in dry_run(clone, "run-all", "PY=echo", "SETUP=")   # the overview declares no `quick`
    assert "-p quick True -p seed 1" in dry_run(clone, "run-all", "PY=echo", "SETUP=", "QUICK=True", "PARAMS=-p seed 1")


def test_lab_says_in_one_line_where_the_executed_copies_are(clone):
    said = [line for line in dry_run(clone, "lab", "PY=python3", "SETUP=").splitlines() if line.startswith("echo")]
    assert len(said) == 1 and "results/executed/NN_name.ipynb" in said[0] and "results/reports/" in said[0]


@pytest.mark.parametrize("status, readme", [(2, False), (1, True), (0, True)])
def test_run_all_leaves_the_readme_after_a_bad_command_line(clone, tmp_path, status, readme):
    """Exit status 2 (run_all refused the command line, nothing ran): the README is not regenerated; the status is
    make's."""
    py = tmp_path / "py"
    py.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/ran\n'
                  f'[ "$2" = tirbench.report.run_all ] && exit {status}\nexit 0\n')
    py.chmod(0o755)
    proc = subprocess.run(["make", "--no-print-directory", "run-all", f"PY={py}", "SETUP=", "PARAMS=-p repeats"],
                          cwd=clone, capture_output=True, text=True)
    ran = (tmp_path / "ran").read_text().splitlines()
    assert ran[0] == "-m tirbench.report.run_all -p repeats"   # the clone has no notebooks/
    assert any("tirbench.report.readme" in line for line in ran) == readme
    assert proc.returncode == (2 if status else 0)


def ci_run(tmp_path: Path, uid: int, apt_get: str | None) -> subprocess.CompletedProcess:
    """``.ci/run`` in a copy of the repository, on a PATH of stand-ins: ``id -u`` says ``uid``, ``apt-get`` runs
    ``apt_get`` (absent when None), no chromium, ``make`` records that it ran."""
    (tmp_path / ".ci").mkdir()
    shutil.copy2(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    tools = {"id": f"echo {uid}", "make": f'echo "$@" > {tmp_path}/make-ran'}
    if apt_get is not None:
        tools["apt-get"] = apt_get
    for name, body in tools.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    (bin_ / "dirname").symlink_to(shutil.which("dirname"))
    return subprocess.run([shutil.which("bash"), str(tmp_path / ".ci" / "run")], env={"PATH": str(bin_)},
                          capture_output=True, text=True)


def test_ci_fails_where_it_could_install_chromium_and_did_not(tmp_path):
    proc = ci_run(tmp_path, uid=0, apt_get="exit 100")
    assert proc.returncode != 0 and not (tmp_path / "make-ran").exists()
    assert "ci: chromium could not be installed (apt-get failed, or put no chromium on PATH): the browser test cannot run" in proc.stderr


@pytest.mark.parametrize("uid, apt_get", [(1000, "exit 0"), (0, None)])
def test_ci_skips_the_browser_test_without_root_or_apt(tmp_path, uid, apt_get):
    proc = ci_run(tmp_path, uid=uid, apt_get=apt_get)
    assert proc.returncode == 0 and (tmp_path / "make-ran").read_text() == "test\n"
    assert "ci: no chromium and no root to apt-get it: the report browser test will be skipped" in proc.stdout

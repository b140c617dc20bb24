# make run-all   execute every notebook (papermill; 00_overview last), render HTML reports and their index, regenerate
#                plots and the README table; a failing notebook does not stop the others, make fails naming it
# make test      run the test suite (CPU only) on TEST_WORKERS processes (pytest-xdist; default 2, CI's cores;
#                TEST_WORKERS=1: one process, e.g. where pytest-xdist is not installed); a sample of the sweeps
#                (tests/conftest.py); 13-17 min on 2 cores (fresh clone, 2026-11-28 and -29)
# make test-full every case of every sweep and the tests marked `full` (23 min on 2 cores)
# make compare-runs   per notebook, the latest native run's headline ratios against the run before it on its GPU
#                (tirbench.report.rerun; TOLERANCE=0.03 flags a change past 3%)
# make lab       open the notebooks in JupyterLab (--allow-root when run as root); LAB_ARGS="--port 8890 --no-browser"
#                passes more options to `jupyter lab`; it says where the executed copies are (results/executed/)
# make tune-rpc TUNE="conv2d 1 256 14 14 256 3 3 1 1 --trials 64"   tune on every GPU of this host: an RPC tracker
#                and one server per GPU (CUDA_VISIBLE_DEVICES), stopped afterwards, also on Ctrl-C;
#                CLUSTER="--port 9190 --key h100 --min-servers 4" passes options to tirbench.tuning.rpc.cluster
# make tune-network TRIALS=32   tune notebook 08's 23 fp32 layers (space `rules`), one task per layer on every GPU of
#                this host (Dask: a scheduler and one worker per GPU, stopped afterwards; the same command resumes);
#                SPREAD="--gpus 2" or SPREAD="--scheduler tcp://HOST:8786" passes options to tirbench.tuning.spread
# Python: by default the project's .venv, created on first use from requirements.txt (plus requirements-gpu.txt where
# nvidia-smi sees a GPU). PY=python3 (any interpreter), or VENV=0 (python3), uses the environment that is already
# active (a container, conda, a cluster module) as it is: nothing is installed into it but this project
# (pip install --no-deps -e .), and that only if it cannot `import tirbench`.
# make tuning-databases DEST=build/tuning-databases   the full tuning databases (git keeps the 2 fastest records
#                of each and its history) from results/tuning/databases.tar.xz; DEST=results/tuning replaces the
#                trimmed ones (refused where one has trials the archive lacks)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

VENV ?= 1
ifeq ($(VENV),0)
PY ?= python3
endif
PY ?= .venv/bin/python
ifeq ($(PY),.venv/bin/python)
SETUP := .venv/.installed
else
SETUP := active-env
endif

NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
QUICK ?= False
# More papermill parameters, each given to the notebooks that declare it: PARAMS="-p repeats 20 -p seed 1"; a name
# that no selected notebook declares stops run-all before anything runs
PARAMS ?=
LAB_ARGS ?=
TEST_WORKERS ?= 2

# Options of tirbench.tuning.rpc.cluster (before its `tune` command) and the tuning CLI's arguments.
CLUSTER ?=
TUNE ?=
# Options of tirbench.tuning.spread and the trial budget per layer of `make tune-network`.
SPREAD ?=
TRIALS ?= 32
# Where `make tuning-databases` puts the full tuning databases.
DEST ?= build/tuning-databases

.PHONY: run-all test test-full lab readme compare-runs clean-cpu-run tune-rpc tune-network active-env tuning-databases
# GPU run: executed notebooks, reports and index.html go to results/; CPU run: to build/cpu-run (results/ untouched).
# Exit status 2 (a bad command line: one line, nothing run): the README is left as it is.
run-all: $(SETUP)
	@status=0; $(PY) -m tirbench.report.run_all $(if $(filter-out False,$(QUICK)),-p quick $(QUICK)) $(PARAMS) \
	  $(NOTEBOOKS) || status=$$?; \
	if [ $$status -ne 2 ]; then $(MAKE) --no-print-directory readme; fi; exit $$status

readme: $(SETUP)
	$(PY) -m tirbench.report.readme README.md

compare-runs: $(SETUP)
	$(PY) -m tirbench.report.rerun --tolerance $(or $(TOLERANCE),0.03)

test: $(SETUP)
	$(PY) -m pytest -q $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

test-full: $(SETUP)
	$(PY) -m pytest -q --full $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

lab: $(SETUP)
	@echo "lab: notebooks/ holds the notebooks without outputs; a GPU run's executed copies are in results/executed/NN_name.ipynb, its HTML reports in results/reports/ (index.html lists them)"
	$(PY) -m jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/

tune-rpc: $(SETUP)
	$(PY) -m tirbench.tuning.rpc.cluster $(CLUSTER) tune $(TUNE)

tune-network: $(SETUP)
	$(PY) -m tirbench.tuning.spread $(SPREAD) resnet50 --trials $(TRIALS)

tuning-databases: $(SETUP)
	$(PY) -m tirbench.tuning.archive unpack $(DEST)

.venv/.installed: requirements.txt requirements-gpu.txt pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then \
	  .venv/bin/pip install -q -r requirements-gpu.txt; else .venv/bin/pip install -q -r requirements.txt; fi
	.venv/bin/pip install -q --no-deps -e .
	touch $@

# The active environment (PY=..., VENV=0): this project added, without dependencies or a package index, if missing.
active-env:
	$(PY) -c "import tirbench" 2>/dev/null || $(PY) -m pip install -q --no-deps --no-build-isolation -e .

clean-cpu-run:
	rm -rf build/cpu-run

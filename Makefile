# make run-all   execute every notebook (papermill; 00_overview last), render HTML reports and their index, regenerate
#                plots and the README table; a failing notebook does not stop the others, make fails naming it
# make test      run the test suite (CPU only)
# make lab       open the notebooks in JupyterLab
# make tune-rpc TUNE="conv2d 1 256 14 14 256 3 3 1 1 --trials 64"   tune on every GPU of this host: an RPC tracker
#                and one server per GPU (CUDA_VISIBLE_DEVICES), stopped afterwards, also on Ctrl-C;
#                CLUSTER="--port 9190 --key h100 --min-servers 4" passes options to tirbench.tuning.rpc.cluster
# make tuning-databases DEST=build/tuning-databases   the full tuning databases (git keeps the 32 fastest records
#                of each and its history) from results/tuning/databases.tar.xz; DEST=results/tuning replaces the
#                trimmed ones (refused where one has trials the archive lacks)
# Both create the environment on first use: .venv from requirements.txt (plus requirements-gpu.txt where
# nvidia-smi sees a GPU); on the GPU host that has the offline kit (/opt/gpukit) the system Python is used.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

ifneq ($(wildcard /opt/gpukit/env.sh),)
PY    := python3
SETUP := build/.installed-gpukit
else
PY    := .venv/bin/python
SETUP := .venv/.installed
endif

NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
QUICK ?= False
# More papermill parameters, each given to the notebooks that declare it: PARAMS="-p repeats 20 -p seed 1"
PARAMS ?=

# Options of tirbench.tuning.rpc.cluster (before its `tune` command) and the tuning CLI's arguments.
CLUSTER ?=
TUNE ?=
# Where `make tuning-databases` puts the full tuning databases.
DEST ?= build/tuning-databases

.PHONY: run-all test lab readme clean-cpu-run tune-rpc tuning-databases
# GPU run: executed notebooks, reports and index.html go to results/; CPU run: to build/cpu-run (results/ untouched).
run-all: $(SETUP)
	@status=0; $(PY) -m tirbench.report.run_all -p quick $(QUICK) $(PARAMS) $(NOTEBOOKS) || status=$$?; \
	$(MAKE) --no-print-directory readme; exit $$status

readme: $(SETUP)
	$(PY) -m tirbench.report.readme README.md

test: $(SETUP)
	$(PY) -m pytest -q

lab: $(SETUP)
	$(PY) -m jupyter lab notebooks/

tune-rpc: $(SETUP)
	$(PY) -m tirbench.tuning.rpc.cluster $(CLUSTER) tune $(TUNE)

tuning-databases: $(SETUP)
	$(PY) -m tirbench.tuning.archive unpack $(DEST)

.venv/.installed: requirements.txt requirements-gpu.txt pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then \
	  .venv/bin/pip install -q -r requirements-gpu.txt; else .venv/bin/pip install -q -r requirements.txt; fi
	.venv/bin/pip install -q --no-deps -e .
	touch $@

build/.installed-gpukit: pyproject.toml
	. /opt/gpukit/env.sh && python3 -m pip install -q --no-deps --no-build-isolation -e .
	mkdir -p build && touch $@

clean-cpu-run:
	rm -rf build/cpu-run

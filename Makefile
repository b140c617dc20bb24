# make run-all   execute every notebook (papermill), render HTML reports, regenerate plots and the README table
# make test      run the test suite (CPU only)
# make lab       open the notebooks in JupyterLab
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
# GPU run: executed notebooks and reports are results; CPU run: they go to build/cpu-run (recorded ones stay).
OUT_DIR_PY := from tirbench.machine import has_cuda_gpu; print('results' if has_cuda_gpu() else 'build/cpu-run')

.PHONY: run-all test lab readme clean-cpu-run
run-all: $(SETUP)
	@out=$$($(PY) -c "$(OUT_DIR_PY)"); mkdir -p "$$out/executed" "$$out/reports"; \
	for nb in $(NOTEBOOKS); do \
	  stem=$$(basename "$$nb" .ipynb); echo "== $$stem -> $$out/executed/$$stem.ipynb"; \
	  $(PY) -m papermill "$$nb" "$$out/executed/.$$stem.tmp.ipynb" --cwd notebooks -k python3 -p quick $(QUICK); \
	  mv "$$out/executed/.$$stem.tmp.ipynb" "$$out/executed/$$stem.ipynb"; \
	  $(PY) -m jupyter nbconvert --to html --log-level WARN "$$out/executed/$$stem.ipynb" --output-dir "$$out/reports"; \
	done
	$(MAKE) --no-print-directory readme

readme: $(SETUP)
	$(PY) -m tirbench.report README.md

test: $(SETUP)
	$(PY) -m pytest -q

lab: $(SETUP)
	$(PY) -m jupyter lab notebooks/

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

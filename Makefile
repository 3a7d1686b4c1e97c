# fleetlib -- two commands on a fresh machine:
#   make report   set up .venv, run the report chain (rung notebooks, then the course) -> reports/
#   make test     set up .venv, lint, run every test and execute the course notebooks under nbval
# Set-up is a stamp file: it re-runs only when pyproject.toml or constraints.txt change.
# VENV may point anywhere (make VENV=/tmp/venvcheck test builds a throwaway environment).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOT ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fleetlib-installed

PARAMS ?= parameters/running_example.yaml
REPORT_DIR ?= $(if $(FLEET),reports/$(notdir $(patsubst %/,%,$(dir $(FLEET)))),reports/running_example)
# FLEET=path/fleet.yaml runs the rung notebooks on your own fleet bundle; P="key=value ..." overrides parameters.
FLEET ?=
# SCHEDULER=tcp://host:8786 measures the fleet on a running Dask cluster (as does DASK_SCHEDULER_ADDRESS in the environment).
SCHEDULER ?=
P ?=
COURSE_DIR := notebooks/course
COURSE_NOTEBOOKS := $(wildcard $(COURSE_DIR)/*.ipynb)
PYTEST_ARGS ?=
NBVAL_ARGS ?= --nbval-lax --nbval-current-env --nbval-cell-timeout=600

# Headless: no display anywhere.  Notebook kernels use the inline backend instead (fleetlib.report
# sets it for papermill; the nbval step below sets it for its kernels), so figures reach the outputs.
export MPLBACKEND := Agg
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help setup report test test-fast lint clean distclean

help: ## list the targets
	@echo "fleetlib -- ML fleet goodput workbook"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "variables: VENV=$(VENV) PARAMS=$(PARAMS) FLEET=$(FLEET) P=$(P) REPORT_DIR=$(REPORT_DIR)"

$(PY):
	$(PYTHON_BOOT) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	@# compat mode: a .pth path entry to the checkout, under which the regular package wins over a
	@# namespace portion -- Python run from a folder that holds a clone named fleetlib still imports it
	@# (the default finder hook returned that folder as an empty namespace package)
	$(PY) -m pip install --disable-pip-version-check -c constraints.txt -e ".[dev]" \
		--config-settings editable_mode=compat
	@# byte-compile the package, as a wheel install does (an editable one does not): every Dask
	@# worker imports it, and compiling it on each import cost ~0.5 s a process where bytecode is not written
	$(PY) -m compileall -q fleetlib
	@# compile the runtime rung's per-job kernel once (numba caches it beside the module), so that no
	@# measurement pays the compile (about 15-30 s on a 2-core machine)
	$(PY) -c "import fleetlib.runtime; fleetlib.runtime.warm_up()"
	@touch $@

setup: $(STAMP) ## create the virtual environment and install fleetlib with its dev tools (pinned)

report: $(STAMP) ## run the report chain on PARAMS (and FLEET=fleet.yaml) into REPORT_DIR; prints index.html's path
	$(VENV)/bin/fleetlib report --params $(PARAMS) --out $(REPORT_DIR) $(if $(FLEET),--fleet $(FLEET)) \
	  $(if $(SCHEDULER),--scheduler $(SCHEDULER)) \
	  $(foreach kv,$(P),-p '$(kv)')

test: $(STAMP) ## ruff, then pytest tests/, then the course notebooks under nbval
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest tests $(PYTEST_ARGS)
ifeq ($(strip $(COURSE_NOTEBOOKS)),)
	@echo "make test: $(COURSE_DIR) holds no notebooks yet -- nbval step skipped"
else
	MPLBACKEND=module://matplotlib_inline.backend_inline FLEETLIB_BATCH=1 \
	  $(VENV)/bin/pytest -p no:cacheprovider $(NBVAL_ARGS) $(COURSE_DIR)
endif

test-fast: $(STAMP) ## ruff, then every test but the slow ones (notebooks, browser, fuzz, fleet scale), on every core
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest tests -m "not slow" -n auto --dist loadgroup $(PYTEST_ARGS)

lint: $(STAMP) ## ruff check (code, tests and notebooks)
	$(VENV)/bin/ruff check .

clean: ## remove reports and caches (keeps the virtual environment)
	rm -rf reports .pytest_cache .ruff_cache .hypothesis build dist
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## also remove the virtual environment
	rm -rf $(VENV)

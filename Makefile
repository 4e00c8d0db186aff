# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-all bench docs docs-serve clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gradsim-jax demo cloth

test: $(STAMP)
	$(PY) -m pytest -q -n 2

test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 -m ""

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# The documentation site, built strictly into site/ (a broken link or a missing API name fails); it reads
# from disk: open site/index.html.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The site served at http://127.0.0.1:8000 and rebuilt on every change: its search runs only when served
# (a browser does not start the search's worker for a page opened from disk).
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

clean:
	rm -rf $(VENV) runs site .pytest_cache

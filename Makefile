# The two commands the README opens with. Both create .venv inside the repo and install from
# pyproject.toml on first use (re-installing when pyproject.toml changes).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,torch,mlir]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/estimate --model llama-3-8b --arch blackwell --precision bf16

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check estimator passes hwdesc models tests tools

bench: $(STAMP)
	$(PY) tools/bench_estimate.py

clean:
	rm -rf $(VENV) *.egg-info

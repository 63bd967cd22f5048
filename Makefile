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

.PHONY: venv engines tpu-venv device-wheels train evolve test test-heavy test-plan test-promises test-all bench
venv: $(STAMP)

# The reference engines for evaluation (Debian packages; root or sudo): fairy-stockfish, gpsshogi.
ENGINES := /usr/games/fairy-stockfish /usr/games/gpsusi
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
engines:
	@for e in $(ENGINES); do test -x $$e || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  $(SUDO) apt-get install -y -qq fairy-stockfish gpsshogi >/dev/null || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq fairy-stockfish gpsshogi >/dev/null; }; \
	fi

# libtpu, to plan TPU runs on this machine (bench/tpu_plan.py); kept out of the main venv,
# where it would probe for a TPU whenever JAX starts.
TPU_VENV := .venv-tpu
$(TPU_VENV)/.installed: pyproject.toml
	test -x $(TPU_VENV)/bin/python || $(PY) -m venv $(TPU_VENV)
	$(TPU_VENV)/bin/python -m pip install -q --upgrade pip
	$(TPU_VENV)/bin/python -m pip install -q -e ".[tpu]"
	touch $@
tpu-venv: $(TPU_VENV)/.installed

# Wheels (Python 3.12, x86-64) of what the lent GPU machines lack, for bench/device.sh.
device-wheels:
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .whl pgx mctx cshogi ml-collections tensorboardX svgwrite

# The main job at a CPU-sized default: Shogi816K then RandomStart2 self-play training, resumable.
# Its game budget is what 55 minutes hold on this machine, measured after compiling and kept
# in the workdir's budget.json (14,648-16,217 games on the study's idle 2-core CPU:
# docs/stall_study.md#game-budget).
train: venv
	$(BIN)/python train.py --config configs/shogi816k_randomstart2.py:cpu --workdir runs/shogi816k_randomstart2_cpu --budget_minutes 55

# The classical baseline: the GA study's run (100 genomes, 200 generations) on the teacher set.
evolve: venv
	$(BIN)/python evolve.py --config configs/ga_baseline.py --workdir runs/ga_baseline

# The test suite CI runs (slow and heavy tests excluded); two workers, one test file each at a time.
# XLA's CPU compiles dominate it. LLVM at -O0 with XLA's older fusion emitters compiles
# them in about a third of the time (the dense move generator 21 s -> 5 s; the same programs,
# run several times slower, which tests do not notice); not for test-plan, whose TPU cost
# figures they would change, nor for real runs (at -O2 the older emitters run 1.5x slower).
TEST_XLA_FLAGS := --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false
test: venv
	XLA_FLAGS="$(TEST_XLA_FLAGS) $$XLA_FLAGS" $(BIN)/python -m pytest -m "not slow and not heavy and not tpu_plan" -q -n 2 --dist loadfile

# The tests that compile the playing agent or the mate in three (the USI engine with its
# network, the agent's guards, the mate search against brute force): about 4 minutes on
# two cores, most of it compiling; CI runs them after `test`.
test-heavy: venv
	XLA_FLAGS="$(TEST_XLA_FLAGS) $$XLA_FLAGS" $(BIN)/python -m pytest -m "heavy and not slow and not tpu_plan" -q -n 2 --dist loadfile

# bench/tpu_plan.py compiled for a TPU topology on this machine (needs .venv-tpu; CI runs it).
test-plan: venv tpu-venv
	$(BIN)/python -m pytest -m tpu_plan -q

# The slow tests that keep the docs' promises (every documented command at smoke size, the
# reproduction killed and resumed, the engine's draw inside the tree); CI runs them after `test`.
test-promises: venv
	XLA_FLAGS="$(TEST_XLA_FLAGS) $$XLA_FLAGS" $(BIN)/python -m pytest -m promise -q -n 2 --dist load --durations=10

test-all: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: venv
	$(BIN)/python bench/env_bench.py

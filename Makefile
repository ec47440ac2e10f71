# Two entry points, both self-contained on a fresh clone: `make eval` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EVAL_OUT ?= runs/eval
EVAL_ENVS := frostgym/Math-v0,frostgym/Arithmetic-v0,frostgym/Fractions-v0,frostgym/LinearEquations-v0,frostgym/SQL-v0

.PHONY: install eval test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[hf,dev]'
	touch $(STAMP)

install: $(STAMP)

eval: $(STAMP)
	$(BIN)/frostgym eval --env $(EVAL_ENVS) --agent oracle --episodes 50 --seed 0 --out $(EVAL_OUT)/oracle
	$(BIN)/frostgym eval --env $(EVAL_ENVS) --agent random --episodes 50 --seed 0 --out $(EVAL_OUT)/random
	@echo "results: $(EVAL_OUT)/oracle/result.json $(EVAL_OUT)/random/result.json"

lint: $(STAMP)
	$(BIN)/ruff check frostgym tests benchmarks
	$(BIN)/ruff format --check frostgym tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/math_throughput.py
	$(BIN)/python benchmarks/sql_grading.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache

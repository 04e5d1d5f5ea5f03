# replay-actor: `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
# make test installs every integration's extra: CI must run those tests, not skip them.
EXTRAS := dev,live,openai,anthropic,gemini,serve,inspect,pydantic-ai,pytest,ray,interop,evals
BSTAMP := $(VENV)/.installed-bench
# CrewAI's latest release needs openai<3, so it gets an environment of its own, inside
# .venv (tests/attribution/test_frameworks.py runs it under replay-actor run).
CREWAI := $(VENV)/crewai
CSTAMP := $(CREWAI)/.installed

.DEFAULT_GOAL := help
.PHONY: help test lint typecheck pytest node-deps browser crewai demo demo-sdk bench soak clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

$(CSTAMP): pyproject.toml | $(PY)
	@echo "make: installing CrewAI into $(CREWAI), an environment of its own (a few minutes)"
	$(PYTHON) -m venv $(CREWAI)
	$(CREWAI)/bin/python -m pip install -q --upgrade pip
	$(CREWAI)/bin/python -m pip install -q -e '.[crewai]'
	touch $@

crewai: $(CSTAMP) ## install CrewAI into .venv/crewai (its own environment) for the attribution tests

$(BSTAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[$(EXTRAS),bench]'
	touch $@

test: $(STAMP) $(CSTAMP) node-deps browser ## install into .venv, then run ruff, mypy --strict and pytest
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest

lint: $(STAMP) ## ruff only
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

typecheck: $(STAMP) ## mypy --strict only
	$(VENV)/bin/mypy

pytest: $(STAMP) $(CSTAMP) node-deps browser ## pytest only
	$(PY) -m pytest

# The front door's tests drive the npm openai, @anthropic-ai/sdk and Vercel AI SDK (ai,
# @ai-sdk/openai) packages from Node (tests/frontdoor/test_node.py); where node is
# missing those tests skip.
NODE_PACKAGES := openai @anthropic-ai/sdk ai @ai-sdk/openai @ai-sdk/anthropic
node-deps: ## install the npm packages the Node tests use into .cache/node (if node exists)
	@if command -v node >/dev/null 2>&1; then \
		for p in $(NODE_PACKAGES); do test -d .cache/node/node_modules/$$p || missing=1; done; \
		test -z "$$missing" || \
		npm install --silent --no-audit --no-fund --prefix .cache/node $(NODE_PACKAGES); \
	fi

demo: $(STAMP) ## run the example evaluation: baseline and candidate against a bundled fixture
	$(PY) examples/demo.py

demo-sdk: $(STAMP) ## run an unchanged openai-SDK app (two calls and a stream) under replay
	$(PY) examples/openai_app/app.py

bench: $(BSTAMP) ## run benchmarks/, print the table, rewrite docs/benchmarks.md
	$(PY) -m benchmarks

soak: $(STAMP) ## random-kill soak: 1,000 cycles of killed owners, actors, zygotes, copies (minutes; not in make test)
	$(PY) -m tests.support.soak --cycles 1000

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# The attribution example's HTML page is opened in headless Chromium
# (tests/examples/test_attribution.py); Debian's package is installed where apt-get runs as
# root, and the test skips where no Chromium can be had.
browser: ## install Debian's chromium for the HTML tests (root with apt-get only)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null \
		|| { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; } \
		|| echo "browser: chromium could not be installed; the HTML test will skip"; \
	else echo "browser: no chromium (needs root and apt-get); the HTML test will skip"; fi; }
